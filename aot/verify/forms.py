"""The checks' side of :mod:`aot.algorithms.forms`: iterator arguments and state walked with numpy arrays.

:func:`source` makes the leaves of an input node (seeded arrays, a counting start, a constant, a shuffle),
the argument to pass (as the binder takes it: one leaf, or a tuple depth first) and the numpy elements the
iterator yields; :func:`sink` the output side, reading back through a reverse or a transform-output.
:func:`make_state` draws a spec's state, and :class:`BoundReferences` hands every reference the spec's
operators bound to it (:class:`aot.verify.bound.Bound`; a C++ operator is checked through its
``reference``), so the algorithms' checks stay written in terms of ``p["op"]``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from ..algorithms.forms import Node, state_fields, tree
from ..core.oplang import op_state
from . import reference
from .bound import Bound
from .compare import NoReference

#: A counting input starts here (not 0), so an artifact that ignored the start would show.
COUNTING_START = 3
#: State arrays hold this many elements more than the check's sequences (a counting start, an offset).
STATE_SLACK = 64


@dataclass
class Source:
    """An input sequence: ``arg`` to pass, ``values`` the numpy elements it yields, ``plain``: a plain array
    (the check may edit ``values`` and pass :meth:`with_values`), ``ordered``: False under a shuffle."""

    arg: Any
    values: np.ndarray
    plain: bool
    ordered: bool
    up: Callable[[np.ndarray], Any]

    def with_values(self, x: np.ndarray) -> Any:
        """The argument for (possibly edited) ``x``: a fresh upload for a plain array, else :attr:`arg`."""
        return self.up(x) if self.plain else self.arg


def source(c: Any, p: Mapping[str, Any], seq: Any, n: int, *, index_like: bool = False) -> Source:
    """The input ``seq`` of spec params ``p``, ``n`` elements, drawn from ``c`` (a :class:`GpuCheck`)."""
    node = tree(p.get(seq.field, "array"), seq.dtype(p), c.types)
    args: list[Any] = []
    values, ordered = _values(c, node, n, args, index_like)
    arg = args[0] if len(args) == 1 else tuple(args)
    return Source(arg, values, node.kind == "array", ordered, c.up)


def _values(c: Any, node: Node, n: int, args: list[Any], index_like: bool) -> tuple[np.ndarray, bool]:
    """(numpy elements, ordered) of ``node``; appends each leaf's argument to ``args``, depth first."""
    dt = c.np_dtype(node.dtype)
    if node.kind == "array":
        x = c.rng.integers(0, n, n).astype(dt) if index_like and dt.kind in "iu" else c.rand(node.dtype, n, small=True)
        args.append(c.up(x))
        return x, True
    if node.kind == "counting":
        args.append(COUNTING_START)
        return np.arange(COUNTING_START, COUNTING_START + n).astype(dt), True
    if node.kind == "constant":
        v = dt.type(c.rng.integers(1, 100))
        args.append(v)
        return np.full(n, v, dt), True
    if node.kind == "shuffle":
        args.append(c.shuffle(n, 5))
        return np.arange(n, dtype=dt), False
    if node.kind == "transform":
        x, ordered = _values(c, node.children[0], n, args, index_like)
        return c.ref.expect_transform(node.op, dt, x).want, ordered
    if node.kind == "zip":
        parts = [_values(c, k, n, args, index_like) for k in node.children]
        out = np.zeros(n, dt)
        for name, (x, _) in zip(dt.names, parts):
            out[name] = x
        return out, all(o for _, o in parts)
    if node.kind == "permutation":
        vals, o1 = _values(c, node.children[0], n, args, index_like)
        idx, o2 = _values(c, node.children[1], n, args, True)
        return vals[idx.astype(np.int64)], o1 and o2
    x, ordered = _values(c, node.children[0], n, args, index_like)
    return (x[::-1].copy() if node.kind == "reverse" else x), ordered


@dataclass
class Sink:
    """An output sequence: ``arg`` to pass and the way back to the algorithm's elements."""

    node: Node
    arg: Any
    device: Any
    ref: Any

    def compare(self, want: Any, what: str, count: int | None = None, ordered: bool = True) -> None:
        """Compare the first ``count`` (default all) elements written with ``want`` (an array or a
        reference's :class:`~aot.verify.reference.Expected`); ``ordered=False``: as a multiset. A discard
        output has nothing to read."""
        if self.device is None:
            return
        node, got = self.node, self.device.to_host()
        exp = want if isinstance(want, reference.Expected) else reference.Expected(
            np.asarray(want), 0.0, np.zeros(len(want), bool))
        if node.kind == "reverse":
            got, node = got[::-1], node.children[0]
        got = got[:count if count is not None else len(got)]
        exp = exp.part(slice(0, len(got)))
        if node.kind == "transform":
            exp = _through(self.ref, node.op, np.dtype(got.dtype), exp)
        if not ordered:
            self.ref.close(np.sort(got), np.sort(exp.want), f"{what} (as a multiset)")
            return
        self.ref.close_to(got, exp, what)


def _through(ref: Any, op: Any, dtype: np.dtype, exp: Any) -> Any:
    """``exp`` passed through a transform-output ``op``: its tolerance carried over (``op`` at want +- tol)."""
    out = ref.expect_transform(op, dtype, exp.want)
    tol = exp.tol
    if np.ndim(tol) or (np.isscalar(tol) and tol):
        w = exp.want.astype(np.float64)
        hi = ref.expect_transform(op, np.dtype(np.float64), w + tol).want
        lo = ref.expect_transform(op, np.dtype(np.float64), w - tol).want
        extra = np.maximum(np.abs(hi - out.want), np.abs(lo - out.want))
        return reference.Expected(out.want, out.tol + extra, out.dont_care | exp.dont_care)
    return reference.Expected(out.want, out.tol, out.dont_care | exp.dont_care)


def sink(c: Any, p: Mapping[str, Any], seq: Any, n: int) -> Sink:
    """The output ``seq`` of ``n`` elements: a poisoned device array under its iterator (none for discard)."""
    node = tree(p.get(seq.field, "array"), seq.dtype(p), c.types)
    leaf = node
    while leaf.children:
        leaf = leaf.children[0]
    if leaf.kind == "discard":
        return Sink(node, None, None, c.ref)
    dev = c.out(n, leaf.dtype)
    return Sink(node, dev, dev, c.ref)


def make_state(c: Any, p: Mapping[str, Any], n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(device state to pass, the same as numpy) for a spec's declared state: arrays of ``n`` +
    :data:`STATE_SLACK` elements (0/1 for a uint8 or bool mask, small values otherwise), scalars between 1
    and 4 (a half for floats, so a dropped fraction shows)."""
    dev, host = {}, {}
    for f in state_fields(p.get("state")):
        dt = np.dtype(f.dtype)
        if f.array:
            m = n + STATE_SLACK
            mask = dt.kind in "ub" and dt.itemsize == 1
            x = c.rng.integers(0, 2, m).astype(dt) if mask else c.rand(f.dtype, m, small=True)
            host[f.name], dev[f.name] = x, c.up(x)
        else:
            v = dt.type(c.rng.integers(1, 4) + (0.5 if dt.kind == "f" else 0))
            host[f.name] = dev[f.name] = v
    return dev, host


class BoundReferences:
    """The reference module with every operator argument bound to the check's numpy state (a C++ operator
    replaced by its ``reference``); everything else passes through."""

    _OPS = ("expect_transform", "expect_predicate", "expect_reduce", "expect_segmented_reduce", "expect_scan",
            "unique_first", "sorted_problem")

    def __init__(self, p: Mapping[str, Any], state: Mapping[str, Any]):
        self._fields = state_fields(p.get("state"))
        self._state = dict(state)

    def bind(self, op: Any) -> Any:
        if isinstance(op, dict):  # a C++ operator: its Python reference, with the same state
            if "reference" not in op:
                raise NoReference(f"the C++ operator {op.get('function')!r} names no 'reference'")
            used = {f.name: self._state[f.name] for f in self._fields}
            return Bound(op["reference"], used) if used else op["reference"]
        used = {f.name: self._state[f.name] for f in op_state(op, self._fields)}
        return Bound(op, used) if used else op

    def __getattr__(self, name: str) -> Any:
        attr = getattr(reference, name)
        if name in self._OPS:
            return functools.wraps(attr)(lambda op, *a, **k: attr(self.bind(op), *a, **k))
        return attr
