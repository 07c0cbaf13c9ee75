"""Numpy references: what ``verify --gpu`` compares every algorithm and bundled NVRTC unit with.

Seeded random inputs (:func:`rand`), every operator a spec may name as a vectorised numpy function
(:func:`np_operator`), the reference reduce/scan/select/unique/sort results, and :func:`close`, which
compares exactly for integers and with a tight relative error for floating-point sums. A spec with no
reference raises :class:`NoReference` and fails verification: nothing ships unchecked. The checks that
use these live in :mod:`aot.verify.context` (cuda.compute algorithms) and :mod:`aot.verify.units`
(NVRTC units).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np


class NoReference(Exception):
    pass


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


_UFUNCS: dict[str, np.ufunc] = {
    "plus": np.add, "minus": np.subtract, "multiplies": np.multiply, "minimum": np.minimum,
    "maximum": np.maximum, "less": np.less, "greater": np.greater, "less_equal": np.less_equal,
    "greater_equal": np.greater_equal, "equal_to": np.equal, "not_equal_to": np.not_equal,
    "bit_and": np.bitwise_and, "bit_or": np.bitwise_or, "bit_xor": np.bitwise_xor}
#: Built-ins whose reduction numpy computes exactly like any association order (integers) or within
#: rounding (floats): the fast ``ufunc.reduce`` / ``accumulate`` paths are valid for them.
_ASSOCIATIVE = ("plus", "multiplies", "minimum", "maximum", "bit_and", "bit_or", "bit_xor")

_BINOPS: dict[str, Callable] = {
    "Add": np.add, "Sub": np.subtract, "Mult": np.multiply, "Div": np.true_divide, "FloorDiv": np.floor_divide,
    "Mod": np.remainder, "Pow": np.power, "BitAnd": np.bitwise_and, "BitOr": np.bitwise_or,
    "BitXor": np.bitwise_xor, "LShift": np.left_shift, "RShift": np.right_shift}
_CMPOPS: dict[str, Callable] = {"Eq": np.equal, "NotEq": np.not_equal, "Lt": np.less, "LtE": np.less_equal,
                                "Gt": np.greater, "GtE": np.greater_equal}


def _truthy(v: Any) -> np.ndarray:
    return np.asarray(v) != 0


def _eval(node, env: dict[str, Any]) -> Any:
    """Evaluate a vetted lambda body (:func:`aot.core.oplang.lambda_problem`: arithmetic, comparisons, boolean
    logic, conditionals over its arguments and numbers) on numpy arrays, element-wise, with Python's
    semantics: ``a and b`` is ``b if a else a``, ``x if c else y`` picks per element."""
    kind = type(node).__name__
    if kind == "Constant":
        return node.value
    if kind == "Name":
        return env[node.id]
    if kind == "BinOp":
        return _BINOPS[type(node.op).__name__](_eval(node.left, env), _eval(node.right, env))
    if kind == "UnaryOp":
        v = _eval(node.operand, env)
        op = type(node.op).__name__
        if op == "Not":
            return ~_truthy(v)
        if op == "Invert":
            return np.invert(v) if np.asarray(v).dtype != bool else ~np.asarray(v)
        return np.negative(v) if op == "USub" else np.positive(v)
    if kind == "Compare":  # a < b < c == (a < b) and (b < c)
        left, result = _eval(node.left, env), None
        for op, comp in zip(node.ops, node.comparators):
            right = _eval(comp, env)
            part = _CMPOPS[type(op).__name__](left, right)
            result = part if result is None else np.logical_and(result, part)
            left = right
        return result
    if kind == "BoolOp":
        vals = [_eval(v, env) for v in node.values]
        res = vals[-1]
        for v in reversed(vals[:-1]):
            res = np.where(_truthy(v), res, v) if type(node.op).__name__ == "And" else np.where(_truthy(v), v, res)
        return res
    if kind == "IfExp":
        return np.where(_truthy(_eval(node.test, env)), _eval(node.body, env), _eval(node.orelse, env))
    raise NoReference(f"lambda node {kind} has no numpy evaluation")  # lambda_problem admits none


def np_operator(op: str) -> Callable[..., Any]:
    """A spec's operator (a built-in name or a vetted lambda source) as a vectorised numpy function."""
    if op in _UFUNCS:
        return _UFUNCS[op]
    if isinstance(op, str) and op.startswith("lambda"):
        import ast
        from ..core.oplang import lambda_problem
        problem = lambda_problem(op)  # checked again: specs also come from manifests on disk
        if problem:
            raise NoReference(f"operator {op!r}: {problem}")
        tree = ast.parse(op, mode="eval").body
        assert isinstance(tree, ast.Lambda)  # lambda_problem accepted it: a single lambda expression
        params = [a.arg for a in tree.args.args]

        def f(*xs):
            with np.errstate(all="ignore"):
                return _eval(tree.body, dict(zip(params, xs)))
        return f
    from ..core.oplang import is_code_ref
    if is_code_ref(op):  # an operator from code (the caller vetted its module): called element by element
        from ..core.opref import resolve
        fn = resolve(op)

        def g(*xs):
            arrs = [np.asarray(x) for x in xs]
            n = max(a.shape[0] if a.ndim else 1 for a in arrs)
            rows = [a.view(np.recarray) if a.dtype.names else a for a in arrs]
            out = [fn(*(r[i] if r.ndim else r for r in rows)) for i in range(n)]
            like = next((a.dtype for a in arrs if a.dtype.names), None)
            if like is not None and out and isinstance(out[0], tuple):  # a struct-valued operator
                return np.array(out, dtype=like)
            return np.array(out)
        return g
    raise NoReference(f"no numpy reference for operator {op!r}")


def _as(v: Any, dtype, n: int | None = None) -> np.ndarray:
    """``v`` stored into ``dtype`` (what the device does with an operator's result), broadcast to ``n``."""
    with np.errstate(all="ignore"):
        a = np.asarray(v).astype(dtype)
    return np.broadcast_to(a, (n,)).copy() if n is not None and a.shape != (n,) else a


def reduce_reference(op: str, dtype, values: np.ndarray) -> np.ndarray:
    """``op`` folded over ``values`` (init first), as a 1-element array: pairwise, in order, so it equals
    any association order a GPU uses whenever the operator is associative."""
    if op in _ASSOCIATIVE:
        return _UFUNCS[op].reduce(values.astype(dtype)).reshape(1).astype(dtype)
    f, v = np_operator(op), values.astype(dtype)
    if len(v) == 0:
        raise ValueError("nothing to reduce")
    while len(v) > 1:
        tail = v[len(v) - len(v) % 2:]
        v = np.concatenate([_as(f(v[0:len(v) - 1:2], v[1::2]), dtype, len(v) // 2), tail])
    return v.reshape(1)


def scan_reference(op: str, dtype, values: np.ndarray) -> np.ndarray:
    """Inclusive scan of ``values`` under ``op`` (Hillis-Steele: log2(n) vectorised steps, left operand
    always the earlier element)."""
    if op in _ASSOCIATIVE:
        return _UFUNCS[op].accumulate(values.astype(dtype), dtype=dtype)
    f, y, k = np_operator(op), values.astype(dtype), 1
    while k < len(y):
        y = np.concatenate([y[:k], _as(f(y[:-k], y[k:]), dtype, len(y) - k)])
        k *= 2
    return y


def select_reference(op: str, x: np.ndarray) -> np.ndarray:
    """The mask of elements the predicate keeps."""
    return _as(_truthy(np_operator(op)(x)), bool, len(x))


def unique_first(op: str, keys: np.ndarray) -> np.ndarray:
    """Mask of the first element of each run of consecutive keys that ``op`` calls equal (what
    ``unique_by_key`` keeps: each key is compared with the previous input key)."""
    if len(keys) == 0:
        return np.zeros(0, bool)
    same = _as(_truthy(np_operator(op)(keys[:-1], keys[1:])), bool, len(keys) - 1)
    return np.concatenate([[True], ~same])


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
        bad = np.flatnonzero(_as(_truthy(np_operator(op)(keys_out[1:], keys_out[:-1])), bool, len(keys_out) - 1))
        if bad.size:
            i = int(bad[0]) + 1
            return (f"not sorted under {op!r}: element [{i}] = {keys_out[i]!r} sorts before "
                    f"[{i - 1}] = {keys_out[i - 1]!r}")
    return None


def close(got: np.ndarray, want: np.ndarray, what: str, *, scale: np.ndarray | None = None) -> None:
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shape {got.shape} != {want.shape}")
    if got.dtype.kind == "f":
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where both are +-inf
            rel = max(1e-9, 1024 * float(np.finfo(got.dtype).eps))  # float32 sums round at ~1e-7
            tol = rel * (np.abs(scale) if scale is not None else np.maximum(1.0, np.abs(want))) + 1e-12
            bad = ~((np.abs(got - want) <= tol) | (got == want))
    else:
        bad = got != want
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} elements differ; first at [{i}]: "
                             f"got {got[i]!r}, want {want[i]!r}")
