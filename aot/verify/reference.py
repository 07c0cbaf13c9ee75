"""Numpy references: what ``verify --gpu`` compares every algorithm and bundled NVRTC unit with.

Seeded random inputs (:func:`rand`) and, for each kind of algorithm, the expected output as an
:class:`Expected` (``want``, a tolerance, and the elements no reference can decide): ``expect_transform``,
``expect_predicate``, ``expect_reduce``, ``expect_segmented_reduce`` and ``expect_scan``. They follow the
device's arithmetic (:mod:`aot.verify.typed`: numba's types for a lambda's mixed scalars and literals, the
C++ functor's type for a built-in), so a transform compares bit for bit except where the device may
contract a multiply-add; a float reduction or scan may associate in any order, so it is allowed
``H * eps * (sum of magnitudes)`` per float field (:func:`aot.verify.compare.reassociation_tol`);
integers and min/max compare exactly. An operator from code whose body is one expression is typed the same
way; any other is called element by element and treated as sum-like. :func:`close` compares (per struct
field) and raises :class:`Mismatch`. A spec with no reference raises :class:`NoReference` and fails
verification: nothing ships unchecked. The checks that use these live in :mod:`aot.algorithms` (through
:mod:`aot.verify.context`) and :mod:`aot.verify.units`.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, NamedTuple

import numpy as np

from .compare import F8, Mismatch, NoReference, close, fields, tree_height
from .typed import TV, Bound, Value, lift, resolve_code, store, typed_operator

__all__ = ["Expected", "Mismatch", "NoReference", "close", "close_to", "expect_predicate", "expect_reduce",
           "expect_scan", "expect_segmented_reduce", "expect_transform", "mismatch", "np_operator", "rand",
           "reduce_reference", "scan_reference", "select_reference", "sorted_problem", "unique_first"]


class Expected(NamedTuple):
    """A reference result: ``want`` (the output's dtype), ``tol`` (absolute, per element: an array, or for a
    struct a dict float field -> array) and ``dont_care`` (bool per element)."""

    want: np.ndarray
    tol: Any
    dont_care: np.ndarray

    def part(self, sl: slice) -> Expected:
        tol = ({k: np.asarray(t)[sl] for k, t in self.tol.items()} if isinstance(self.tol, dict)
               else self.tol[sl] if np.ndim(self.tol) else self.tol)
        return Expected(self.want[sl], tol, self.dont_care[sl])


def close_to(got: np.ndarray, expected: Any, what: str) -> None:
    """:func:`close` with ``expected``'s tolerance and don't-care elements."""
    close(got, expected.want, what, tol=expected.tol, dont_care=expected.dont_care)


def mismatch(what: str, message: str) -> Mismatch:
    """A failure that is not element-wise (a count, a permutation): ``what: message``."""
    return Mismatch(what, message=message)


def rand(rng: np.random.Generator, dtype: Any, n: int, *, small: bool = False) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.names:  # a struct: each field drawn on its own
        out = np.zeros(n, dt)
        for f in dt.names:
            out[f] = rand(rng, dt[f], n, small=small)
        return out
    if dt.kind == "f":
        return rng.uniform(-1.0, 1.0, n).astype(dt)
    info = np.iinfo(dt)
    if small:
        lo, hi = max(info.min, -1000), min(info.max, 1000)
    else:
        lo, hi = info.min, info.max
    return rng.integers(lo, hi, n, dtype=dt, endpoint=True)


# ------------------------------------------------------------------------------- typed values <-> arrays
def _n(v: Value) -> int:
    return len(next(iter(v.values())).v) if isinstance(v, dict) else int(np.size(v.v))


def _take(v: Value, idx: np.ndarray) -> Value:
    if isinstance(v, dict):
        return {k: _take(t, idx) for k, t in v.items()}
    return TV(v.v[idx], v.dev[idx], v.mag[idx], v.amb[idx])


def _put(v: Value, idx: np.ndarray, w: Value) -> None:
    if isinstance(v, dict):
        for k in v:
            _put(v[k], idx, w[k])
        return
    n = len(idx)
    for a, b in ((v.v, w.v), (v.dev, w.dev), (v.mag, w.mag), (v.amb, w.amb)):
        a[idx] = np.broadcast_to(b, (n,))


def _settle(v: Value, n: int) -> Value:
    """Every array of ``v`` as a writable array of ``n`` elements (a constant result broadcasts)."""
    if isinstance(v, dict):
        return {k: _settle(t, n) for k, t in v.items()}
    return TV(*(np.broadcast_to(a, (n,)).copy() for a in (v.v, v.dev, v.mag, v.amb)))


def _expected(v: Value, dtype: np.dtype, n: int, rounds: bool, height: int) -> Expected:
    """Assemble an :class:`Expected` of ``dtype`` from a typed result; ``rounds``: allow reassociation
    (``height`` roundings per path) on top of the arithmetic's own deviation bound."""
    v = _settle(v, n)
    want = np.empty(n, dtype)
    tol: dict[str | None, np.ndarray] = {}
    dc = np.zeros(n, bool)
    for name, t, _ in fields(dtype):
        tv = v[name] if name is not None else v
        if name is None:
            want[...] = tv.v
        else:
            want[name] = tv.v
        dc |= tv.amb
        if t.kind == "f":
            extra = 0.0
            if rounds:
                with np.errstate(all="ignore"):
                    extra = height * float(np.finfo(t).eps) * tv.mag + np.spacing(np.abs(tv.v)).astype(F8)
            if t == np.float32 and height == 0:  # transforms: the device may keep a float32 intermediate exact
                # (H100: x * x - 1.0 as float32 is a contracted fma; cancellation makes that 3 ulp of the result):
                # half an ulp of the operands' magnitude, plus 2 ulp of the result
                with np.errstate(all="ignore"):
                    ulp2 = 2 * np.spacing(np.abs(np.asarray(tv.v, t))).astype(F8)
                    extra = extra + float(np.finfo(t).eps) * tv.mag + ulp2
            tol[name] = tv.dev + extra
    return Expected(want, tol.get(None, 0.0) if dtype.names is None else tol, dc)


# ------------------------------------------------------------------------------- operators
def code_elementwise(fn: Callable) -> Callable[..., np.ndarray]:
    """An operator from code called element by element on numpy scalars / records (what the device runs is
    numba's compilation of the same Python)."""
    def g(*xs):
        arrs = [np.asarray(x) for x in xs]
        n = max(a.shape[0] if a.ndim else 1 for a in arrs)
        rows = [a.view(np.recarray) if a.dtype.names else a for a in arrs]
        with np.errstate(all="ignore"):
            out = [fn(*(r[i] if r.ndim else r for r in rows)) for i in range(n)]
        like = next((a.dtype for a in arrs if a.dtype.names), None)
        if like is not None and out and isinstance(out[0], tuple):  # a struct-valued operator
            return np.array(out, dtype=like)
        return np.array(out)
    return g


def _opaque(fn: Callable) -> Callable[..., Value]:
    """An operator from code that :mod:`aot.verify.typed` cannot read, on typed values: called element by
    element on numpy scalars, whose types may differ from numba's. Every float result is taken to be
    sum-like (its magnitude: the operands' magnitudes added) and allowed ``4 eps (|v| + magnitude)`` in the
    narrowest float type involved (the device may compute in a wider type than numpy did, or narrower)."""
    g = code_elementwise(fn)

    def h(*xs: Value) -> Value:
        arrays = [_array(x) for x in xs]
        floats = [t for a in arrays for _, t, _ in fields(a.dtype) if t.kind == "f"]
        out = lift(g(*arrays))
        n = _n(out)
        for k, t in (out.items() if isinstance(out, dict) else [(None, out)]):
            mags = [p.mag for x in xs if (p := _part(x, k)) is not None]
            if not mags:  # a struct result from scalar operands, or the reverse: every operand's magnitude
                mags = [m.mag for x in xs for m in (x.values() if isinstance(x, dict) else [x])]
            t.mag = sum(mags, np.zeros(n))
            if t.dtype.kind == "f":
                eps = max(float(np.finfo(d).eps) for d in floats + [t.dtype])
                t.dev = 4 * eps * (np.abs(t.v.astype(F8)) + t.mag)
        return out
    return h


def _part(v: Value, name: str | None) -> TV | None:
    """Field ``name`` of a struct value (``None``: a scalar value itself), or None where it has none."""
    if name is None:
        return v if isinstance(v, TV) else None
    return v.get(name) if isinstance(v, dict) else None


def _array(v: Value) -> np.ndarray:
    if not isinstance(v, dict):
        return v.v
    n = _n(v)
    out = np.empty(n, [(k, t.v.dtype) for k, t in v.items()])
    for k, t in v.items():
        out[k] = np.broadcast_to(t.v, (n,))
    return out


def _operator(op: Any) -> tuple[Callable[..., Value], bool]:
    """(the operator on typed values, whether it does float arithmetic that rounds)."""
    try:
        return typed_operator(op), _rounds(op)
    except NoReference:
        from ..core.oplang import is_code_ref
        inner = op.op if isinstance(op, Bound) else op
        if not (callable(inner) or is_code_ref(inner)):
            raise
    return _opaque(resolve_code(op)), True


def _rounds(op: Any) -> bool:
    """Whether ``op`` does arithmetic that rounds (so the association order changes a float result):
    plus/minus/multiplies, or any arithmetic operator in a lambda's or code's expression; selections
    (min/max, comparisons, bitwise) never round."""
    from .typed import BUILTIN_BINOPS, BUILTIN_CMP, code_expression, is_lambda, vet_lambda
    if isinstance(op, str) and (op in ("minimum", "maximum") or op in BUILTIN_CMP):
        return False
    if isinstance(op, str) and op in BUILTIN_BINOPS:
        return op in ("plus", "minus", "multiplies")
    if is_lambda(op):
        tree: ast.AST = vet_lambda(op)
    else:
        parsed = code_expression(resolve_code(op))
        tree = parsed[1] if parsed else ast.parse("a + b")
    arith = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
    return any(isinstance(x, ast.BinOp) and isinstance(x.op, arith) for x in ast.walk(tree))


# ------------------------------------------------------------------------------- element-wise
def expect_transform(op: Any, out_dtype: Any, *inputs: np.ndarray) -> Expected:
    """``out[i] = op(in[i], ...)`` stored as ``out_dtype``: exact wherever the device cannot round
    differently; else within the arithmetic's deviation bound."""
    out = np.dtype(out_dtype)
    f, _ = _operator(op)
    res = store(f(*(lift(x) for x in inputs)), out)
    return _expected(res, out, len(inputs[0]), False, 0)


def expect_predicate(op: Any, *inputs: np.ndarray) -> Expected:
    """The mask a predicate (or a binary relation) gives; ``dont_care`` where rounding could flip it."""
    return expect_transform(op, np.dtype(bool), *inputs)


# ------------------------------------------------------------------------------- reductions and scans
def _fold(f: Callable[..., Value], dtype: np.dtype, v: Value, lens: np.ndarray) -> Value:
    """``f`` folded pairwise within each segment of ``v`` (lengths ``lens``, each >= 1), all segments at
    once: one vectorised level per tree level, pairs (0, 1), (2, 3), ... and an odd last item carried."""
    lens = lens.astype(np.int64)
    while lens.max(initial=1) > 1:
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
        k = np.arange(int(lens.sum())) - np.repeat(starts, lens)
        even = k % 2 == 0
        left = even & (k + 1 < np.repeat(lens, lens))
        li = np.flatnonzero(left)
        combined = store(f(_take(v, li), _take(v, li + 1)), dtype)
        nxt = _take(v, np.flatnonzero(even))
        _put(nxt, np.flatnonzero(left[even]), combined)
        v, lens = nxt, (lens + 1) // 2
    return v


def _init_first(init: np.ndarray, x: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each segment with ``init`` in front: (values, lengths)."""
    sizes = np.diff(offsets.astype(np.int64))
    return np.insert(x, offsets[:-1].astype(np.int64), np.repeat(init, len(sizes))), sizes + 1


def expect_segmented_reduce(op: Any, dtype: Any, init: np.ndarray, x: np.ndarray, offsets: np.ndarray) -> Expected:
    """``op`` over ``init`` then each segment ``x[offsets[i]:offsets[i + 1]]`` (an empty one gives init),
    in any association order: float fields within :func:`reassociation_tol` of the pairwise fold."""
    dt = np.dtype(dtype)
    f, rounds = _operator(op)
    vals, lens = _init_first(init.astype(dt), x.astype(dt), offsets)
    r = _fold(f, dt, lift(vals), lens)
    return _expected(r, dt, len(lens), rounds, tree_height(int(lens.max(initial=1))))


def expect_reduce(op: Any, dtype: Any, values: np.ndarray) -> Expected:
    """``op`` folded over ``values`` (init first) in any association order, as 1-element arrays."""
    v = np.asarray(values)
    return expect_segmented_reduce(op, dtype, v[:1], v[1:], np.array([0, len(v) - 1]))


def expect_scan(op: Any, dtype: Any, values: np.ndarray) -> Expected:
    """Inclusive scan of ``values`` (init first; Hillis-Steele, the left operand the earlier element), each
    prefix within the reassociation bound of a scan (its decoupled look-back chain included)."""
    dt = np.dtype(dtype)
    f, rounds = _operator(op)
    n = len(values)
    y, k = _settle(lift(np.asarray(values).astype(dt)), n), 1
    while k < n:
        r = store(f(_take(y, np.arange(0, n - k)), _take(y, np.arange(k, n))), dt)
        y = _settle(y, n)
        _put(y, np.arange(k, n), r)
        k *= 2
    return _expected(y, dt, n, rounds, tree_height(n, scan=True))


# ------------------------------------------------------------------------------- the plain-array API
def np_operator(op: str) -> Callable[..., Any]:
    """A spec's operator as a vectorised function of numpy arrays, typed as the device types it."""
    f, _ = _operator(op)
    return lambda *xs: _array(f(*(lift(np.asarray(x)) for x in xs)))


def reduce_reference(op: str, dtype: Any, values: np.ndarray) -> np.ndarray:
    """``op`` folded over ``values`` (init first), as a 1-element array (pairwise, in order)."""
    return expect_reduce(op, dtype, values).want


def scan_reference(op: str, dtype: Any, values: np.ndarray) -> np.ndarray:
    """Inclusive scan of ``values`` under ``op``."""
    return expect_scan(op, dtype, values).want


def select_reference(op: str, x: np.ndarray) -> np.ndarray:
    """The mask of elements the predicate keeps (:func:`expect_predicate` also says where it is unsure)."""
    return expect_predicate(op, x).want


def unique_first(op: str, keys: np.ndarray) -> np.ndarray:
    """Mask of the first element of each run of consecutive keys that ``op`` calls equal (what
    ``unique_by_key`` keeps: each key is compared with the previous input key)."""
    if len(keys) == 0:
        return np.zeros(0, bool)
    same = expect_predicate(op, keys[:-1], keys[1:])
    if same.dont_care.any():
        raise NoReference(f"operator {op!r}: rounding could decide some key comparisons either way")
    return np.concatenate([[True], ~same.want])


def sorted_problem(op: str, keys_in: np.ndarray, keys_out: np.ndarray, vals_in=None, vals_out=None) -> str | None:
    """Why ``keys_out`` (and ``vals_out``) is not ``keys_in`` sorted under comparator ``op``, or ``None``.
    Used where no exact stable order can be computed cheaply (a lambda comparator): the output must be a
    permutation of the input (pairs kept together) in which no element is ``op``-less than its predecessor."""
    if len(keys_out) != len(keys_in) or not np.array_equal(np.sort(keys_out), np.sort(keys_in)):
        return "output keys are not a permutation of the input keys"
    if vals_in is not None:
        a, b = np.lexsort((vals_in, keys_in)), np.lexsort((vals_out, keys_out))
        if not (np.array_equal(keys_in[a], keys_out[b]) and np.array_equal(vals_in[a], vals_out[b])):
            return "output (key, value) pairs are not a permutation of the input pairs"
    if len(keys_out) > 1:
        less = expect_predicate(op, keys_out[1:], keys_out[:-1])
        bad = np.flatnonzero(less.want & ~less.dont_care)
        if bad.size:
            i = int(bad[0]) + 1
            k = np.asarray(keys_out)
            return (f"not sorted under {op!r}: element [{i}] = {k[i].item()!r} sorts before "
                    f"[{i - 1}] = {k[i - 1].item()!r}")
    return None
