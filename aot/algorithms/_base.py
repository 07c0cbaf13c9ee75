"""What every algorithm definition shares: the field vocabulary, the build context, the check context.

An algorithm is one object (see :class:`aot.algorithms.Algorithm`); this module holds the pieces its
methods are given, so a definition reads as "these fields become these factory arguments" and "this is
the numpy answer". Nothing here imports CUDA or numpy at import time: the runtime loader reads the field
tables through :mod:`aot.spec` cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

#: A field with no default: the matrix must give it.
REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()

DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")

#: Built-in operators (cuda.compute ``OpKind`` members, lower-cased). Anything else is a lambda or code.
BUILTIN_OPS = ("plus", "minus", "multiplies", "minimum", "maximum", "less", "greater", "less_equal",
               "greater_equal", "equal_to", "not_equal_to", "bit_and", "bit_or", "bit_xor")

SORT_ORDERS = ("ascending", "descending")
#: ``input``: where the algorithm's input sequence comes from ("counting": the indices 0, 1, 2, ...).
INPUTS = ("array", "counting")


def is_dtype_field(name: str) -> bool:
    """``dtype``, ``value_dtype``, ``offset_dtype``, ...: every field naming an element type."""
    return name == "dtype" or name.endswith("_dtype")


@dataclass(frozen=True)
class OpSlot:
    """One operator an algorithm takes: the spec field that names it, the keyword the factory and the
    call take it under, what it is for (error messages) and how many arguments it is called with."""

    field: str
    keyword: str
    role: str = "op"
    arity: int = 2


class Build:
    """What a definition's ``factory_kwargs`` is given: makers for each kind of argument.

    ``array(dtype)`` is a ``ProxyArray`` for AoT builds and a real device array elsewhere (benchmarks);
    ``dtype`` may be a struct type's name (``types``). The rest import cuda.compute lazily."""

    def __init__(self, array: Callable[[Any], Any], types: Mapping[str, Any] | None = None):
        self._array = array
        self.types = dict(types or {})

    def np_dtype(self, name: str):
        return np_dtype(name, self.types)

    def array(self, dtype: str):
        return self._array(self.np_dtype(dtype))

    def value(self, dtype: str, init: Any):
        return init_value(dtype, init, self.types)

    def op(self, source: str):
        from ..build.compile import operator
        return operator(source)

    def order(self, order: str):
        import cuda.compute as cc
        return cc.SortOrder[order.upper()]

    def counting(self, dtype: str):
        """A counting iterator over ``dtype`` indices; its start is bound at call time."""
        import numpy as np
        import cuda.compute as cc
        return cc.CountingIterator(np.dtype(dtype).type(0))

    def input(self, p: Mapping[str, Any], dtype: str):
        """The input sequence: an array of ``dtype``, or the indices when ``input: counting``."""
        return self.counting(dtype) if p.get("input", "array") == "counting" else self.array(dtype)


def np_dtype(name: str, types: Mapping[str, Any] | None = None):
    """A scalar dtype name, or a struct type's name -> numpy dtype (structs: aligned, as CUDA lays them)."""
    import numpy as np
    if types and name in types:
        return np.dtype([(f, np.dtype(t)) for f, t in types[name]], align=True)
    return np.dtype(name)


def init_value(dtype: str, init: Any, types: Mapping[str, Any] | None = None):
    """The spec's ``init`` as a 1-element numpy array of ``dtype`` ('inf', '-inf', 'min', 'max' allowed;
    a struct's init is a list of its fields' values, each of which may be one of those words)."""
    import numpy as np
    dt = np_dtype(dtype, types)
    if dt.names:
        values = tuple(_scalar(dt.fields[f][0], v) for f, v in zip(dt.names, init))
        return np.array([values], dtype=dt)
    return np.array([_scalar(dt, init)], dtype=dt)


def _scalar(dt, init: Any):
    import numpy as np
    if isinstance(init, str):
        if init in ("inf", "-inf"):
            return float(init)
        info = np.finfo(dt) if dt.kind == "f" else np.iinfo(dt)
        return info.min if init == "min" else info.max
    return init


class Check:
    """What a definition's ``check`` is given on a GPU: a seeded generator, the device, and helpers that
    upload, allocate poisoned outputs (0xA5 bytes, so unwritten elements show) and run the two-phase
    temp-storage protocol of cuda.compute."""

    def __init__(self, device, *, n: int = 100_003, seed: int = 0, types: Mapping[str, Any] | None = None):
        import numpy as np
        self.device, self.n, self.types = device, n, dict(types or {})
        self.rng = np.random.default_rng(seed)

    def np_dtype(self, name: str):
        return np_dtype(name, self.types)

    def up(self, host):
        from ..verify.devarray import DeviceArray
        return DeviceArray.from_host(host, self.device)

    def out(self, n: int, dtype):
        from ..verify.devarray import DeviceArray
        return DeviceArray(n, dtype if not isinstance(dtype, str) else self.np_dtype(dtype), self.device)

    def twice(self, call: Callable[[Any], Any]) -> None:
        """``call(None)`` for the temp-storage size, then ``call(temp)``."""
        import numpy as np
        from ..verify.devarray import DeviceArray
        nbytes = call(None)
        call(DeviceArray(int(nbytes or 1), np.uint8, self.device, poison=False))

    def rand(self, dtype: str, n: int, *, small: bool = False):
        from ..verify.reference import rand
        return rand(self.rng, self.np_dtype(dtype), n, small=small)

    def value(self, dtype: str, init: Any):
        return init_value(dtype, init, self.types)

    def op(self, source: str):
        from ..build.compile import operator
        return operator(source)

    def counting(self, dtype: str, start: int = 0):
        import numpy as np
        import cuda.compute as cc
        return cc.CountingIterator(np.dtype(dtype).type(start))


class AlgorithmBase:
    """Defaults for the :class:`aot.algorithms.Algorithm` protocol; a definition sets the class attributes
    and writes ``factory_kwargs`` and ``check``."""

    name: str = ""
    factory: str = ""
    fields: Mapping[str, Any] = {}
    ops: tuple[OpSlot, ...] = ()
    #: Fields recorded in a definition only when set to something else than their default, so adding one
    #: to an existing algorithm keeps its specs' content keys (and artifacts) as they were.
    optional: Mapping[str, Any] = {}
    #: Call arguments given when the caller leaves them out (e.g. binary search's ``comp``).
    call_defaults: Mapping[str, Any] = {}
    #: Fields restricted to a few words (``order``, ``input``).
    choices: Mapping[str, tuple[str, ...]] = {}
    #: Integer fields and their inclusive range.
    int_ranges: Mapping[str, tuple[int, int]] = {}
    #: Fields whose dtype may name a struct type (``types:``); the others must be scalar.
    struct_fields: tuple[str, ...] = ()

    def bound_arguments(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """Call arguments the loaded object fills in when the caller leaves them out (besides operators,
        which are always the spec's): what was compiled in and must not differ at call time."""
        return dict(self.call_defaults)

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        raise NotImplementedError

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<aot algorithm {self.name}>"
