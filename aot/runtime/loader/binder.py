"""The call-time binder of a spec with state or iterators: the caller's arrays and state, checked against
what the artifact was compiled for, turned into what cuda.compute's object reads at each call.

The compiled code holds no address: cuda.compute reads each operator's ``get_state()`` and each iterator's
state bytes at every call. So the binder hands it state-only stand-ins for the spec's operators (the
packed state struct: no numba-cuda-mlir, no toolkit) and rebuilds the spec's iterators
(:mod:`aot.algorithms.forms`) around the caller's leaves with cuda.compute's own iterator classes. The
builder walks the same :func:`make_iterator` with placeholders and the real operators.

Every check raises one :class:`~aot.core.errors.CallError` naming the spec and the field: a wrong argument
is an error, never a wrong result. Imported only when a spec with state or iterators is loaded.
"""

from __future__ import annotations

import functools
import struct
from typing import Any, Callable, Iterator, Mapping

from ...algorithms import ALGORITHMS, np_dtype
from ...algorithms.forms import Node, StateField, leaves, pack_state, state_alignment, state_fields, tree
from ...core.errors import CallError
from ...core.oplang import op_state
from ...core.spec import CcclSpec
from ...core.text import short
from .lean import import_cuda_compute


@functools.lru_cache(maxsize=1)
def _stand_in_class() -> type:
    """An operator adapter carrying only state bytes: what cuda.compute reads of an operator at call time."""
    from cuda.compute.op import _OpAdapter

    class CompiledOp(_OpAdapter):
        __slots__ = ("_state", "_align")

        def __init__(self, state: bytes = b"", align: int = 1):
            self._state, self._align = state, align

        def compile(self, input_types, output_type=None):
            raise RuntimeError("aot: this operator is already compiled into the loaded artifact")

        @property
        def is_stateful(self) -> bool:
            return bool(self._state)

        def get_state(self) -> bytes:
            return self._state

        @property
        def state_alignment(self) -> int:
            return self._align

    return CompiledOp


def stand_in_op(fields: tuple[StateField, ...] = (), values: Mapping[str, Any] | None = None):
    """A stand-in for a compiled operator that receives ``fields`` (their packed values from ``values``)."""
    if not fields:
        return _stand_in_class()()
    packed = pack_state(fields, tuple((values or {})[f.name] for f in fields))
    return _stand_in_class()(packed, state_alignment(fields))


def np_scalar(dtype: str, value: Any):
    import numpy as np
    return np.dtype(dtype).type(value)


def discard(dtype: str):
    """A discard iterator of scalar ``dtype`` elements (its type from a counting iterator: no array)."""
    cc = import_cuda_compute()
    return cc.DiscardIterator(cc.CountingIterator(np_scalar(dtype, 0)))


def make_iterator(node: Node, leaf: Callable[[Node], Any], op_for: Callable[[Any], Any], output: bool = False,
                  types: Mapping[str, Any] | None = None):
    """The cuda.compute iterator (or array) ``node`` describes: ``leaf(node)`` gives each leaf's object (an
    array, a counting iterator, ...), ``op_for(op)`` each transform's operator. One walk for the builder
    (placeholders, real operators) and the binder (the caller's leaves, stand-ins)."""
    cc = import_cuda_compute()
    if node.kind in ("array", "counting", "constant", "shuffle", "discard"):
        return leaf(node)
    kids = [make_iterator(c, leaf, op_for, output, types) for c in node.children]
    if node.kind == "transform":
        from cuda.compute.types import from_numpy_dtype
        td = from_numpy_dtype(np_dtype(node.dtype, types))
        if output:
            return cc.TransformOutputIterator(kids[0], op_for(node.op), td)
        return cc.TransformIterator(kids[0], op_for(node.op), td)
    if node.kind == "zip":
        return cc.ZipIterator(*kids)
    if node.kind == "permutation":
        return cc.PermutationIterator(kids[0], kids[1])
    if node.kind == "cache_modified":
        return cc.CacheModifiedInputIterator(kids[0], modifier=node.modifier)
    return cc.ReverseIterator(kids[0])


class Binder:
    """What a loaded spec with state or iterators does at each call: check ``state=`` and each iterator
    argument's leaves, and fill in the operators' stand-ins and the iterators."""

    __slots__ = ("spec", "fields", "ops", "seqs")

    def __init__(self, spec: CcclSpec):
        p = spec.params
        algo = ALGORITHMS[spec.algorithm]
        self.spec = spec
        self.fields = state_fields(p.get("state"))
        layouts = {slot.keyword: op_state(p[slot.field], self.fields) for slot in algo.ops}
        self.ops = {kw: layout for kw, layout in layouts.items() if layout}  # stateless ones: CcclAlgorithm's
        self.seqs = []  # (seq, its node, how many values its caller passes)
        for s in algo.seqs:
            if p.get(s.field, "array") != "array":
                node = tree(p[s.field], s.dtype(p), spec.types)
                self.seqs.append((s, node, sum(1 for _ in leaves(node))))

    def fail(self, fld: str, message: str) -> CallError:
        return CallError(f"{self.spec.name}: {fld}: {message}")

    def bind(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``kwargs`` of a call, with ``state`` checked and consumed, the iterators built and the operators'
        stand-ins set."""
        values = self.check_state(kwargs.pop("state", None))
        by_layout: dict[tuple[StateField, ...], Any] = {}
        for kw, layout in self.ops.items():
            if layout not in by_layout:
                by_layout[layout] = self.packed(layout, values)
            kwargs[kw] = by_layout[layout]
        for seq, node, n_leaves in self.seqs:
            given = kwargs.get(seq.keyword)
            items = iter(given if isinstance(given, tuple) else (given,))
            if (len(given) if isinstance(given, tuple) else 1) != max(n_leaves, 1):
                raise self.fail(seq.keyword, f"the {seq.field} iterator takes {n_leaves} value(s) in a tuple "
                                             f"(its leaves, depth first), got {_kind(given)}")
            kwargs[seq.keyword] = make_iterator(node, functools.partial(self.leaf, items=items, kw=seq.keyword),
                                                functools.partial(self.op_for, values=values), seq.output,
                                                self.spec.types)
        return kwargs

    def op_for(self, op: Any, values: Mapping[str, Any]):
        return self.packed(op_state(op, self.fields), values)

    def packed(self, layout: tuple[StateField, ...], values: Mapping[str, Any]):
        """:func:`stand_in_op`, a value the checks let through that still does not pack being a CallError."""
        try:
            return stand_in_op(layout, values)
        except (struct.error, OverflowError, ValueError, TypeError) as e:
            raise self.fail("state", f"cannot be packed as declared ({e})") from None

    # ------------------------------------------------------------------ checks
    def check_state(self, state: Any) -> dict[str, Any]:
        """name -> the address (arrays) or the value (scalars) to pack, after checking ``state`` against the
        declared fields: every one present and no other, device arrays of the declared dtype, 1-D and
        contiguous, scalars of the declared dtype."""
        if not self.fields:
            if state is not None and not (isinstance(state, Mapping) and not state):  # never truth-test it
                raise self.fail("state", f"this spec declares no state, got {_kind(state)}")
            return {}
        declared = ", ".join(f"{f.name}: {f.declaration}" for f in self.fields)
        if not isinstance(state, Mapping):
            raise self.fail("state", f"pass state={{...}} by name ({declared}), got {_kind(state)}")
        for name in state:
            if not any(f.name == name for f in self.fields):
                raise self.fail(f"state.{name}", f"not a declared state field (declared: {declared})")
        out = {}
        for f in self.fields:
            if f.name not in state:
                raise self.fail(f"state.{f.name}", f"missing (declared: {declared})")
            v = state[f.name]
            out[f.name] = self.array_address(f"state.{f.name}", v, f.dtype) if f.array else \
                self.scalar(f"state.{f.name}", v, f.dtype)
        return out

    def array_address(self, fld: str, v: Any, dtype: str) -> int:
        """The data address of device array ``v`` of ``dtype`` (1-D, contiguous), else a CallError."""
        import numpy as np
        cai = getattr(v, "__cuda_array_interface__", None)
        if not isinstance(cai, dict):
            what = "a host numpy array" if isinstance(v, np.ndarray) else _kind(v)
            raise self.fail(fld, f"needs a device array of {dtype} (__cuda_array_interface__), got {what}")
        try:
            got = np.dtype(cai["descr"]) if "descr" in cai and len(cai["descr"]) > 1 else np.dtype(cai["typestr"])
        except (KeyError, TypeError, ValueError, OverflowError):
            got = None
        want = np_dtype(dtype, self.spec.types)
        if got is None or got != want and not (want.names and got.itemsize == want.itemsize and got.kind == "V"):
            raise self.fail(fld, f"needs a device array of {dtype}, got one of {str(got)[:80]}")
        try:
            shape, strides = tuple(cai.get("shape", ())), cai.get("strides")
            strides = None if strides is None else tuple(strides)
        except TypeError:
            raise self.fail(fld, "its __cuda_array_interface__ has a shape or strides that is not a sequence") from None
        if len(shape) != 1 or (strides is not None and strides != (want.itemsize,)):
            raise self.fail(fld, f"needs a 1-D contiguous device array, got shape {short(shape)} strides "
                                 f"{short(strides)}")
        data = cai.get("data")
        addr = data[0] if isinstance(data, (tuple, list)) and data else None
        if isinstance(addr, bool) or not isinstance(addr, (int, np.integer)) or not 0 <= int(addr) < 1 << 64:
            raise self.fail(fld, f"its __cuda_array_interface__ 'data' must be (address, read_only) with a 64-bit "
                                 f"address, got {short(data)}")
        return int(addr)

    def scalar(self, fld: str, v: Any, dtype: str) -> Any:
        """A scalar state value of ``dtype``: a numpy scalar of that dtype, or a Python number it holds exactly."""
        import numpy as np
        dt = np.dtype(dtype)
        if isinstance(v, np.generic):
            if v.dtype != dt:
                raise self.fail(fld, f"needs a {dtype} scalar, got a {v.dtype} one")
            return v.item()
        if isinstance(v, (bool, int, float)) and not isinstance(v, bool):
            try:
                with np.errstate(all="ignore"):
                    conv = dt.type(v)
            except (OverflowError, ValueError):  # an int out of the dtype's range (NumPy 2 refuses it)
                raise self.fail(fld, f"{short(v)} does not fit a {dtype}") from None
            if conv.item() == v or (dt.kind == "f" and isinstance(v, float) and np.isfinite(conv)):
                return conv.item()
            raise self.fail(fld, f"{short(v)} is not exactly a {dtype}")
        raise self.fail(fld, f"needs a {dtype} scalar, got {_kind(v)}")

    def leaf(self, node: Node, items: Iterator[Any], kw: str) -> Any:
        """The caller's value for one leaf, checked, as cuda.compute takes it."""
        import numpy as np
        cc = import_cuda_compute()
        if node.kind == "discard":
            return discard(node.dtype)
        v = next(items)
        fld = f"{kw} ({node.kind} of {node.dtype})"
        if node.kind == "array":
            self.array_address(fld, v, node.dtype)
            return v
        if node.kind == "shuffle":
            if not isinstance(v, cc.ShuffleIterator):
                raise self.fail(fld, f"needs a cuda.compute.ShuffleIterator, got {_kind(v)}")
            return v
        cls = cc.CountingIterator if node.kind == "counting" else cc.ConstantIterator
        if isinstance(v, cls):
            if v.value_type.dtype != np.dtype(node.dtype):
                raise self.fail(fld, f"needs a {cls.__name__} of {node.dtype}, got one of {v.value_type.dtype}")
            return v
        return cls(np_scalar(node.dtype, self.scalar(fld, v, node.dtype)))


def _kind(v: Any) -> str:
    return "None" if v is None else f"a {type(v).__module__}.{type(v).__qualname__}"
