"""What the loader hands out and keeps: the per-thread algorithm object, per-spec status, the loaded payload.

Light to import: no CUDA package, no logging; cuda.compute is imported the first time a
:class:`CcclAlgorithm` is made. (``AotWarning`` lives in :mod:`aot.core.errors`; it is re-exported here.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...algorithms.forms import needs_binding
from ...core.errors import AotWarning
from ...core.spec import CcclSpec
from .lean import import_cuda_compute

__all__ = ["AotWarning", "CcclAlgorithm", "SpecStatus"]


@dataclass
class SpecStatus:
    name: str
    source: str | None = None  # "packaged" | "cache" | "jit"
    sm: int | None = None
    path: str | None = None
    ms: float | None = None
    errors: list = field(default_factory=list)
    kernels: int | None = None  # kernels warmup loaded into the device; None: they load at the first call


@dataclass
class _Loaded:
    """What one process keeps per spec: the checked payload, where it came from, a spare object."""

    payload: bytes | None
    kind: str
    sm: int
    source: str
    path: str | None
    obj: Any = None  # CCCL: a spare deserialized object for the first thread that asks; NVRTC: ObjectCode


def _compiled_stateless_op():
    """An operator adapter standing for the spec's stateless lambda, already compiled into the artifact.

    cuda.compute only reads an operator's state bytes at call time; handing it the Python lambda would
    JIT it through numba-cuda-mlir on every first call (seconds) just to learn the state is empty.
    """
    from cuda.compute.op import _OpAdapter

    class CompiledStatelessOp(_OpAdapter):
        def compile(self, input_types, output_type=None):
            raise RuntimeError("aot: this operator is already compiled into the loaded artifact")

    return CompiledStatelessOp()


class CcclAlgorithm:
    """A loaded cuda.compute algorithm with its operator bound: call it as the cuda.compute object, and
    leave out ``op``/``cond`` (the spec's operator is what was compiled; a lambda passed anyway is
    replaced by a stand-in carrying its empty state, so no numba JIT happens at call time).
    ``raw`` is the underlying cuda.compute object. Not thread-safe: one per thread (``Registry.cccl``)."""

    __slots__ = ("spec", "raw", "_ops", "_defaults", "_binder")

    def __init__(self, spec: CcclSpec, raw):
        from ...algorithms import ALGORITHMS
        from ...algorithms import BUILTIN_OPS
        self.spec, self.raw = spec, raw
        algo = ALGORITHMS[spec.algorithm]
        self._defaults = algo.bound_arguments(spec.params)  # compiled-in values, unless the caller passes them
        self._ops = {}  # call keyword -> the operator compiled into the artifact
        for slot in algo.ops:
            op = spec.params[slot.field]
            self._ops[slot.keyword] = (import_cuda_compute().OpKind[op.upper()] if op in BUILTIN_OPS
                                       else _compiled_stateless_op())
        self._binder = None
        if needs_binding(spec.params, algo.seqs):
            from .binder import Binder  # only for specs with state or iterators: the plain closure stays small
            self._binder = Binder(spec)

    def __call__(self, **kwargs):
        # The compiled operators are the spec's, whatever is passed: bind them (no checks on the hot path).
        if self._defaults:
            kwargs = {**self._defaults, **kwargs}
        kwargs.update(self._ops)
        if self._binder is not None:  # state and iterators: checked against the recorded layout
            kwargs = self._binder.bind(kwargs)
        elif "state" in kwargs:
            from ...core.errors import CallError
            raise CallError(f"{self.spec.name}: state: this spec declares no state")
        return self.raw(**kwargs)

    def __repr__(self) -> str:
        return f"<aot CcclAlgorithm {self.spec.name} ({self.spec.algorithm})>"
