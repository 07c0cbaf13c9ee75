"""The check context of a cuda.compute algorithm on a GPU, and the check ``verify --gpu`` runs with it.

:class:`GpuCheck` implements :class:`aot.algorithms.Check` (what a definition's ``check`` may ask for):
device arrays from :mod:`aot.verify.devarray`, seeded inputs and the numpy references from
:mod:`aot.verify.reference`. :func:`check_cccl` runs a loaded algorithm through its definition's check.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

import numpy as np

from ..algorithms import ALGORITHMS, init_value, np_dtype
from ..algorithms._base import References
from ..core.spec import CcclSpec
from . import reference
from .reference import NoReference


class GpuCheck:
    """What a definition's ``check`` is given on a GPU (:class:`aot.algorithms.Check`): a seeded generator,
    the device, and helpers that upload, allocate poisoned outputs (0xA5 bytes, so unwritten elements show)
    and run the two-phase temp-storage protocol of cuda.compute, plus the numpy references."""

    def __init__(self, device, *, n: int = 100_003, seed: int = 0, types: Mapping[str, Any] | None = None,
                 params: Mapping[str, Any] | None = None):
        self.device, self.n, self.types = device, n, dict(types or {})
        self.rng = np.random.default_rng(seed)
        self.state: dict[str, Any] = {}  # the device state every call of the check passes
        self._ref: Any = reference
        if params is not None and ("state" in params or any(isinstance(v, dict) and "cpp" in v
                                                             for v in params.values())):
            from .forms import BoundReferences, make_state
            self.state, host = make_state(self, params, n)
            self._ref = BoundReferences(params, host)

    def np_dtype(self, name: str):
        return np_dtype(name, self.types)

    def up(self, host):
        from .devarray import DeviceArray
        return DeviceArray.from_host(host, self.device)

    def out(self, n: int, dtype):
        from .devarray import DeviceArray
        return DeviceArray(n, dtype if not isinstance(dtype, str) else self.np_dtype(dtype), self.device)

    def twice(self, call: Callable[[Any], Any]) -> None:
        """``call(None)`` for the temp-storage size, then ``call(temp)``."""
        from .devarray import DeviceArray
        nbytes = call(None)
        call(DeviceArray(int(nbytes or 1), np.uint8, self.device, poison=False))

    def rand(self, dtype: str, n: int, *, small: bool = False) -> np.ndarray:
        return reference.rand(self.rng, self.np_dtype(dtype), n, small=small)

    def value(self, dtype: str, init: Any):
        return init_value(dtype, init, self.types)

    def op(self, source: str):
        from ..build.compile import operator
        return operator(source)

    def counting(self, dtype: str, start: int = 0):
        import cuda.compute as cc
        return cc.CountingIterator(np.dtype(dtype).type(start))

    def shuffle(self, n: int, seed: int):
        """A shuffle of the indices 0..n-1 (a ``cuda.compute.ShuffleIterator``)."""
        import cuda.compute as cc
        return cc.ShuffleIterator(n, seed)

    def source(self, p: Mapping[str, Any], seq: Any, n: int, *, index_like: bool = False):
        from .forms import source
        return source(self, p, seq, n, index_like=index_like)

    def sink(self, p: Mapping[str, Any], seq: Any, n: int):
        from .forms import sink
        return sink(self, p, seq, n)

    @property
    def ref(self) -> References:
        """The numpy references (:class:`aot.algorithms.References`): the module itself, or for a spec with
        state or C++ operators the same with its operators bound (:class:`aot.verify.forms.BoundReferences`)."""
        return self._ref


def check_cccl(obj, spec: CcclSpec, device, n: int = 100_003, seed: int = 0) -> None:
    """Run ``obj`` (a loaded cuda.compute algorithm for ``spec``) on seeded random data and raise on any
    mismatch with numpy: the algorithm's own ``check`` (:mod:`aot.algorithms`). A raw cuda.compute object
    (a JIT build) gets the spec's operators and compiled-in arguments bound as the loader binds them."""
    algo = ALGORITHMS.get(spec.algorithm)
    if algo is None:
        raise NoReference(f"no reference for algorithm {spec.algorithm!r}")
    from ..runtime.loader.objects import CcclAlgorithm
    if not isinstance(obj, CcclAlgorithm) and not isinstance(getattr(obj, "obj", None), CcclAlgorithm):
        obj = CcclAlgorithm(spec, obj)  # a raw JIT build: bound as the loader binds one
    c = GpuCheck(device, n=n, seed=seed, types=spec.types, params=spec.params)
    if not c.state:
        algo.check(obj, spec.params, c)
        return
    # State is bound per call: the same object is checked with two independently drawn states (two masks).
    for check in (c, GpuCheck(device, n=n, seed=seed + 1, types=spec.types, params=spec.params)):
        algo.check(functools.partial(obj, state=check.state), spec.params, check)
