"""What every algorithm definition shares: the field vocabulary, and what a definition may ask of its
build context (:class:`Build`) and check context (:class:`Check`).

An algorithm is one object (see :class:`aot.algorithms.Algorithm`); this module holds the pieces its
methods are given, so a definition reads as "these fields become these factory arguments" and "this is
the numpy answer". :mod:`aot.algorithms` is a leaf: it imports nothing else from aot (the contexts are
protocols here; their implementations live above, in :mod:`aot.build.compile` and
:mod:`aot.verify.context`). Nothing here imports CUDA or numpy at import time: the runtime loader reads
the field tables through :mod:`aot.core.spec` cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

if TYPE_CHECKING:
    import numpy as np

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


class Build(Protocol):
    """What a definition's ``factory_kwargs`` may ask of its build context: makers for each kind of factory
    argument. The concrete one is :class:`aot.build.compile.FactoryArgs`.

    ``array(dtype)`` is a ``ProxyArray`` for AoT builds and a real device array elsewhere (benchmarks);
    ``dtype`` may be a struct type's name (``types``)."""

    @property
    def types(self) -> Mapping[str, Any]:
        """The spec's struct types: name -> ((field, dtype), ...)."""

    def np_dtype(self, name: str) -> Any:
        """A scalar dtype name or a struct type's name -> numpy dtype (:func:`np_dtype`)."""

    def array(self, dtype: str) -> Any:
        """An array argument of ``dtype``."""

    def value(self, dtype: str, init: Any) -> Any:
        """A spec's ``init`` as a 1-element numpy array of ``dtype`` (:func:`init_value`)."""

    def op(self, source: str) -> Any:
        """A spec's operator (built-in name, lambda source or ``"pkg.mod:func"``) as the factory takes it."""

    def order(self, order: str) -> Any:
        """``"ascending"`` / ``"descending"`` -> ``cuda.compute.SortOrder``."""

    def counting(self, dtype: str) -> Any:
        """A counting iterator over ``dtype`` indices; its start is bound at call time."""

    def input(self, p: Mapping[str, Any], dtype: str) -> Any:
        """The input sequence: an array of ``dtype``, or the indices when ``input: counting``."""

    def seq(self, p: Mapping[str, Any], seq: Any) -> Any:
        """The sequence argument ``seq`` (:class:`aot.algorithms.forms.Seq`) describes: an array, or the
        iterator its node describes, over placeholders."""

    def determinism(self, word: str) -> Any:
        """``"run_to_run"`` / ``"not_guaranteed"`` -> ``cuda.compute.Determinism``."""


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


class Check(Protocol):
    """What a definition's ``check`` may ask of its check context on a GPU: a seeded generator, the device,
    helpers that upload, allocate poisoned outputs (0xA5 bytes, so unwritten elements show) and run the
    two-phase temp-storage protocol of cuda.compute, and the numpy references to compare with. The
    concrete one is :class:`aot.verify.context.GpuCheck` (references: :mod:`aot.verify.reference`)."""

    @property
    def device(self) -> Any:
        """The device the check runs on."""

    @property
    def n(self) -> int:
        """The number of items to check with."""

    @property
    def rng(self) -> np.random.Generator:
        """The seeded generator every random input comes from."""

    @property
    def types(self) -> Mapping[str, Any]:
        """The spec's struct types: name -> ((field, dtype), ...)."""

    def np_dtype(self, name: str) -> Any:
        """A scalar dtype name or a struct type's name -> numpy dtype (:func:`np_dtype`)."""

    def up(self, host: Any) -> Any:
        """A device copy of ``host`` (``.to_host()`` reads it back)."""

    def out(self, n: int, dtype: Any) -> Any:
        """A device array of ``n`` elements of ``dtype`` (a name or a numpy dtype), filled with 0xA5 bytes."""

    def twice(self, call: Callable[[Any], Any]) -> None:
        """``call(None)`` for the temp-storage size, then ``call(temp)``."""

    def rand(self, dtype: str, n: int, *, small: bool = False) -> np.ndarray:
        """``n`` seeded random values of ``dtype`` (``small``: integers within +-1000)."""

    def value(self, dtype: str, init: Any) -> Any:
        """A spec's ``init`` as a 1-element numpy array of ``dtype`` (:func:`init_value`)."""

    def op(self, source: str) -> Any:
        """A spec's operator as cuda.compute takes it."""

    def counting(self, dtype: str, start: int = 0) -> Any:
        """A counting iterator over ``dtype`` indices from ``start``."""

    def shuffle(self, n: int, seed: int) -> Any:
        """A shuffle of the indices 0..n-1 (``cuda.compute.ShuffleIterator``)."""

    def source(self, p: Mapping[str, Any], seq: Any, n: int, *, index_like: bool = False) -> Any:
        """Inputs for the sequence ``seq`` (:class:`aot.algorithms.forms.Seq`) of ``n`` elements: a
        :class:`Source` (``arg`` to pass, ``values`` the numpy elements it yields, ``plain``: an array the
        check may edit, ``ordered``: False for a shuffle, whose order no reference knows). ``index_like``:
        integer elements in [0, n), where an operator may subscript state with them."""

    def sink(self, p: Mapping[str, Any], seq: Any, n: int) -> Any:
        """An output for ``seq`` of ``n`` elements: a :class:`Sink` (``arg`` to pass; ``compare(want, what)``
        reads it back through its iterator, or skips a discard)."""

    @property
    def ref(self) -> References:
        """The numpy references to compare with."""


class Expect(Protocol):
    """A reference result (:class:`aot.verify.reference.Expected`): ``want``; ``tol``, absolute per element
    (for a struct, a dict float field -> tolerances); ``dont_care``, elements no reference can decide
    (rounding could flip a comparison). ``part(sl)``: the same for a slice of the elements."""

    @property
    def want(self) -> np.ndarray: ...

    @property
    def tol(self) -> Any: ...

    @property
    def dont_care(self) -> np.ndarray: ...

    def part(self, sl: slice) -> Expect: ...


class References(Protocol):
    """The numpy references a check compares with (the concrete one is the module
    :mod:`aot.verify.reference` itself). Operators are typed as the device types them (numba's rules for
    lambdas and operators from code, the C++ functor's type for built-ins)."""

    def close(self, got: np.ndarray, want: np.ndarray, what: str, *, tol: Any = None,
              dont_care: np.ndarray | None = None) -> None:
        """Raise ``AssertionError`` unless ``got`` equals ``want``: integers exactly, floats within ``tol``."""

    def close_to(self, got: np.ndarray, expected: Expect, what: str) -> None:
        """:meth:`close` with an :class:`Expect`'s tolerance and don't-care elements."""

    def expect_transform(self, op: str, out_dtype: Any, *inputs: np.ndarray) -> Expect:
        """``op`` applied element-wise, stored as ``out_dtype``."""

    def expect_predicate(self, op: str, *inputs: np.ndarray) -> Expect:
        """The boolean mask ``op`` gives (``dont_care``: where rounding could flip it)."""

    def expect_reduce(self, op: str, dtype: Any, values: np.ndarray) -> Expect:
        """``op`` folded over ``values`` (init first) in any association order, as a 1-element result."""

    def expect_segmented_reduce(self, op: str, dtype: Any, init: np.ndarray, x: np.ndarray,
                                offsets: np.ndarray) -> Expect:
        """``op`` over ``init`` and each segment ``x[offsets[i]:offsets[i + 1]]``."""

    def expect_scan(self, op: str, dtype: Any, values: np.ndarray) -> Expect:
        """Inclusive scan of ``values`` (init first) under ``op``, per prefix."""

    def unique_first(self, op: str, keys: np.ndarray) -> np.ndarray:
        """Mask of the first element of each run of consecutive keys that ``op`` calls equal."""

    def sorted_problem(self, op: str, keys_in: np.ndarray, keys_out: np.ndarray, vals_in: np.ndarray | None = None,
                       vals_out: np.ndarray | None = None) -> str | None:
        """Why ``keys_out`` (and ``vals_out``) is not ``keys_in`` sorted under comparator ``op``, or ``None``."""

    def mismatch(self, what: str, message: str) -> AssertionError:
        """A failure that is not element-wise (a count, a permutation), for the check to raise."""

    @property
    def NoReference(self) -> type[Exception]:  # noqa: N802 - the exception class's own name
        """Raised when a spec has no reference (verification reports it, never "ok")."""


def decided_input(c: Check, ops: tuple[str, ...], x: np.ndarray, counting: bool) -> np.ndarray:
    """``x`` with every element on which rounding could decide a predicate of ``ops`` either way (a
    multiply-add the device may contract, next to a comparison's threshold) replaced by one that is decided,
    so a selection's output is exact. Counting inputs cannot be changed: such a spec has no reference."""
    import numpy as np
    dc = np.zeros(len(x), bool)
    for op in ops:
        dc |= c.ref.expect_predicate(op, x).dont_care
    if dc.any():
        if counting or dc.all():
            raise c.ref.NoReference(f"predicate {ops}: rounding could decide {int(dc.sum())} inputs either way")
        x = x.copy()
        x[dc] = x[np.flatnonzero(~dc)[0]]
    return x


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
    #: Sequence arguments that may be iterators (:class:`aot.algorithms.forms.Seq`); each is an optional
    #: field (default ``"array"``) unless ``fields`` lists it.
    seqs: tuple[Any, ...] = ()
    #: Choice values refused with a reason (``determinism: gpu_to_gpu``).
    refused: Mapping[str, Mapping[str, str]] = {}

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
