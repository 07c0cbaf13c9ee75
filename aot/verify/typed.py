"""Operators evaluated the way the device computes them: numba's types, the device's roundings.

:func:`typed_operator` turns a spec's operator (a built-in, a lambda, or an operator from code whose body
is one expression) into a function of :class:`TV` values: numpy arrays in numba's type for every node
(:mod:`aot.verify.numba_types`), computed with IEEE operations in that type, so bit-for-bit what the device
computes, plus a bound ``dev`` on how far the device may still differ (a multiply contracted into an add,
libdevice's ``pow``; 0 almost everywhere), the absolute-value evaluation ``mag`` (what a reassociated
reduction's rounding scales with) and the elements ``amb`` where a differing operand could flip a
comparison, floor or truncation (compared as "don't care"). A struct value is a dict field -> TV.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from .bound import Bound, is_lambda, vetted
from .compare import NoReference
from .numba_types import (B, F8, I8, NumbaTypingError, arith_type, bitwise_type, compare_type, const_type,
                          invert_type, neg_type, pow_type, shift_type, truediv_type, unify)


def unit_roundoff(t) -> float:
    return float(np.finfo(t).eps) / 2


@dataclass
class TV:
    """A typed value: ``v`` in numba's type, computed with the device's operations (IEEE, correctly rounded,
    so bit-for-bit the device's value unless told otherwise); ``dev`` >= |device value - v| (float64; 0 =
    identical), from the only places the device may round differently: a multiply contracted into an add
    (FMA), libdevice's pow, and anything computed from an operand that already differs;
    ``mag``: the expression on absolute values (what a reassociated reduction's rounding scales with);
    ``amb``: elements where a differing operand could flip a comparison, floor or truncation (don't care);
    ``prod``: |v| when ``v`` is directly a product (an FMA candidate for the add that consumes it)."""

    v: np.ndarray
    dev: np.ndarray
    mag: np.ndarray
    amb: np.ndarray
    prod: np.ndarray | None = None

    @property
    def dtype(self) -> np.dtype:
        return self.v.dtype


def leaf(x) -> TV:
    x = np.asarray(x)
    return TV(x, np.zeros(x.shape), _f64abs(x), np.zeros(x.shape, bool))


def _f64abs(v: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.abs(np.asarray(v).astype(F8))


def _rnd(v: np.ndarray, dev_in) -> np.ndarray:
    """A rounding step fed by operands that may already differ can land one ulp apart as well."""
    if v.dtype.kind != "f":
        return np.zeros(v.shape)
    return np.where(np.asarray(dev_in) > 0, 2 * unit_roundoff(v.dtype) * _f64abs(v), 0.0)


def convert(tv: TV, t: np.dtype) -> TV:
    """numba's implicit conversion of an operand (widening, or int -> float: deterministic)."""
    t = np.dtype(t)
    if tv.dtype == t:
        return tv
    with np.errstate(all="ignore"):
        v = tv.v.astype(t)
    return TV(v, tv.dev + _rnd(v, tv.dev), tv.mag, tv.amb)


def _truthy(tv: TV) -> tuple[np.ndarray, np.ndarray]:
    t = tv.v != 0
    return t, tv.amb | ((tv.dev > 0) & (_f64abs(tv.v) <= tv.dev))


def _near_integer(q: np.ndarray, tol: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.abs(q - np.round(q)) <= tol


def _fma(o: TV, rt: np.dtype) -> np.ndarray | float:
    """An add may be contracted with a product operand of its own type: the product's rounding is skipped."""
    if o.prod is None or o.dtype != rt or rt.kind != "f":
        return 0.0
    return unit_roundoff(rt) * o.prod


def binop(name: str, a: TV, b: TV) -> TV:
    ta, tb = a.dtype, b.dtype
    amb = a.amb | b.amb
    with np.errstate(all="ignore"):
        if name in ("Add", "Sub", "Mult", "FloorDiv", "Mod"):
            if (ta == B or tb == B) and name in ("FloorDiv", "Mod"):
                raise NumbaTypingError(f"numba does not type {name} with a bool operand")
            rt = arith_type(ta, tb)
            x, y = convert(a, rt), convert(b, rt)
            ab, bb = _f64abs(x.v), _f64abs(y.v)
            din = x.dev + y.dev
            if name in ("Add", "Sub"):
                v = x.v + y.v if name == "Add" else x.v - y.v
                dev0 = din + _fma(a, rt) + _fma(b, rt)  # a contracted add still rounds once: one ulp more
                dev = dev0 + _rnd(v, dev0)
                return TV(v, dev, a.mag + b.mag, amb)
            if name == "Mult":
                v = x.v * y.v
                dev = ab * y.dev + bb * x.dev + x.dev * y.dev
                return TV(v, dev + _rnd(v, dev), a.mag * b.mag, amb, prod=_f64abs(v) if rt.kind == "f" else None)
            if rt.kind in "iu":  # Python semantics (floor, sign of the divisor); / 0 and MIN // -1: undefined
                zero = y.v == 0
                amb = amb | zero
                if rt == I8:
                    amb = amb | ((x.v == np.iinfo(I8).min) & (y.v == -1))
                safe = np.where(zero, np.ones_like(y.v), y.v)
                v = np.floor_divide(x.v, safe) if name == "FloorDiv" else np.remainder(x.v, safe)
                return TV(v, np.zeros(v.shape), _f64abs(v), amb)
            # float // and %: CPython's algorithm (fmod, then adjust) in numpy and in numba; discontinuous
            # where a/b is an integer: don't care there when an operand differs, or at a rounding's distance
            q = (x.v / y.v).astype(F8)
            edge = (din + 4 * unit_roundoff(rt) * ab) / np.maximum(bb, np.finfo(F8).tiny)
            amb = amb | _near_integer(q, edge) | (y.v == 0)
            if name == "FloorDiv":
                v = np.floor_divide(x.v, y.v)
                return TV(v, np.zeros(v.shape), _f64abs(v), amb)
            v = np.remainder(x.v, y.v)
            return TV(v, din + _rnd(v, din), np.minimum(a.mag, bb), amb)
        if name == "Div":
            rt = truediv_type(ta, tb)
            x, y = convert(a, rt), convert(b, rt)
            v = x.v / y.v
            bb = _f64abs(y.v)
            den = bb - y.dev
            amb = amb | (den <= 0)
            dev = (x.dev + _f64abs(v) * y.dev) / np.where(den > 0, den, np.inf)
            return TV(v, dev + _rnd(v, dev), a.mag / np.where(bb > 0, bb, np.inf), amb)
        if name == "Pow":
            rt = pow_type(ta, tb)
            if rt.kind in "iu":  # MLIR ipowi, modular; negative exponent: 0 unless |base| == 1
                xi, yi = convert(a, rt).v, convert(b, rt).v
                neg = (yi < 0) if rt.kind == "i" else np.zeros(np.shape(yi), np.bool_)
                v = np.power(xi, np.where(neg, 0, yi).astype(rt))
                one = xi == 1
                mone = (xi == -1) if rt.kind == "i" else np.zeros(np.shape(xi), np.bool_)
                v = np.where(neg, np.where(one, 1, np.where(mone, np.where(yi % 2 == 0, 1, -1), 0)), v).astype(rt)
                return TV(v, np.zeros(v.shape), _f64abs(v), amb | (neg & (xi == 0)))
            xa, tiny = a.v.astype(F8), np.finfo(F8).tiny
            if tb.kind in "iu":  # libdevice __nv_powi[f]: repeated squaring, a 32-bit exponent
                n = np.asarray(b.v).astype(np.int64).astype(F8)
                v = np.power(xa, n).astype(rt)
                steps = 2 * np.ceil(np.log2(np.abs(n) + 1)) + 2
                dev = np.abs(n) * a.dev / np.maximum(np.abs(xa), tiny) * _f64abs(v)
                return TV(v, dev + steps * 2 * unit_roundoff(rt) * _f64abs(v), _f64abs(v), amb)
            y = convert(b, rt)  # powf / pow: CUDA documents 4 ulp (float) and 2 ulp (double): allow 4 ulp
            v = np.power(xa, y.v.astype(F8)).astype(rt)
            lg = np.abs(np.log(np.maximum(np.abs(xa), tiny)))
            dev = _f64abs(v) * (_f64abs(y.v) * a.dev / np.maximum(np.abs(xa), tiny) + lg * y.dev)
            return TV(v, dev + 8 * unit_roundoff(rt) * _f64abs(v), _f64abs(v), amb | (xa < 0))
        if name in ("BitAnd", "BitOr", "BitXor"):
            rt = bitwise_type(ta, tb)
            f = {"BitAnd": np.bitwise_and, "BitOr": np.bitwise_or, "BitXor": np.bitwise_xor}[name]
            v = f(a.v.astype(rt), b.v.astype(rt))
            return TV(v, np.zeros(v.shape), _f64abs(v), amb)
        if name in ("LShift", "RShift"):
            rt = shift_type(ta, tb)
            xs, s = a.v.astype(rt), b.v.astype(np.int64)
            bad = (s < 0) | (s >= 64)  # LLVM poison
            s = np.where(bad, 0, s).astype(rt)
            v = np.left_shift(xs, s) if name == "LShift" else np.right_shift(xs, s)
            return TV(v, np.zeros(v.shape), _f64abs(v), amb | bad)
    raise NoReference(f"operator {name} has no numpy evaluation")


_CMP: dict[str, Callable] = {"Eq": np.equal, "NotEq": np.not_equal, "Lt": np.less, "LtE": np.less_equal,
                             "Gt": np.greater, "GtE": np.greater_equal}


def compare(name: str, a: TV, b: TV) -> TV:
    ct = compare_type(a.dtype, b.dtype)
    x, y = convert(a, ct), convert(b, ct)
    with np.errstate(all="ignore"):
        v = _CMP[name](x.v, y.v)
        d = x.dev + y.dev
        amb = a.amb | b.amb | ((d > 0) & (np.abs(x.v.astype(F8) - y.v.astype(F8)) <= d))
    return TV(v, np.zeros(v.shape), v.astype(F8), amb)


def _where(t: np.ndarray, a: TV, b: TV, rt: np.dtype) -> TV:
    x, y = convert(a, rt), convert(b, rt)
    return TV(np.where(t, x.v, y.v), np.where(t, x.dev, y.dev), np.where(t, a.mag, b.mag), np.where(t, a.amb, b.amb))


Value = Any  # a TV, or for a struct a dict field name -> TV (a tuple of TVs for a struct-valued result)


def evaluate(node: ast.AST, env: Mapping[str, Value]) -> Value:
    """An expression as numba types it: arithmetic, comparisons, boolean logic, conditionals (all a vetted
    lambda may hold), plus what an operator from code's one-expression body may add: a struct argument's
    fields (``a.w``), ``min``/``max``/``abs`` and a tuple of field values (a struct-valued result)."""
    if isinstance(node, ast.Constant):
        return leaf(np.array(node.value, dtype=const_type(node.value)))
    if isinstance(node, ast.Name):
        if isinstance(env[node.id], np.ndarray):
            raise NoReference(f"the state array {node.id!r} is only read by subscript")
        return env[node.id]
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        return _subscript(env[node.value.id], evaluate(node.slice, env), node.value.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        rec = env[node.value.id]
        if not isinstance(rec, dict) or node.attr not in rec:
            raise NoReference(f"no field {node.attr!r}")
        return rec[node.attr]
    if isinstance(node, ast.Tuple):
        return tuple(evaluate(e, env) for e in node.elts)
    if isinstance(node, ast.Call):
        return _call(node, env)
    if isinstance(node, ast.BinOp):
        return binop(type(node.op).__name__, evaluate(node.left, env), evaluate(node.right, env))
    if isinstance(node, ast.UnaryOp):
        return _unary(type(node.op).__name__, evaluate(node.operand, env))
    if isinstance(node, ast.Compare):  # a < b < c == (a < b) and (b < c)
        left, res = evaluate(node.left, env), None
        for op, comp in zip(node.ops, node.comparators):
            right = evaluate(comp, env)
            part = compare(type(op).__name__, left, right)
            res = part if res is None else TV(res.v & part.v, res.dev, res.mag, res.amb | part.amb)
            left = right
        return res
    if isinstance(node, ast.BoolOp):  # ``a and b`` is ``b if a else a``, in the unified type
        vals = [evaluate(v, env) for v in node.values]
        rt = vals[0].dtype
        for v in vals[1:]:
            rt = unify(rt, v.dtype)
        res = vals[-1]
        for v in reversed(vals[:-1]):
            t, amb = _truthy(v)
            res = _where(t, res, v, rt) if isinstance(node.op, ast.And) else _where(t, v, res, rt)
            res.amb = res.amb | amb
        return convert(res, rt)
    if isinstance(node, ast.IfExp):
        t, amb = _truthy(evaluate(node.test, env))
        body, orelse = evaluate(node.body, env), evaluate(node.orelse, env)
        res = _where(t, body, orelse, unify(body.dtype, orelse.dtype))
        res.amb = res.amb | amb
        return res
    raise NoReference(f"expression node {type(node).__name__} has no numpy evaluation")


def _subscript(arr: Any, index: Value, name: str) -> TV:
    """``state[i]``: the state array's elements at the (integer, in-range) typed indices."""
    if not isinstance(arr, np.ndarray) or not isinstance(index, TV) or index.dtype.kind not in "iu":
        raise NoReference(f"subscript of {name!r}: an integer index into a state array has a reference, not this")
    idx = np.asarray(index.v).astype(np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= len(arr)):
        raise NoReference(f"subscript of {name!r}: indices outside [0, {len(arr)})")
    out = leaf(arr[idx])
    out.amb = out.amb | np.broadcast_to(index.amb, out.v.shape)
    return out


def _unary(op: str, a: TV) -> TV:
    if op == "Not":
        t, amb = _truthy(a)
        return TV(~t, np.zeros(t.shape), (~t).astype(F8), amb)
    if op == "Invert":
        rt = invert_type(a.dtype)
        v = ~a.v if rt == B else np.invert(a.v.astype(rt))
        return TV(v, np.zeros(v.shape), _f64abs(v), a.amb)
    if op == "USub":
        rt = neg_type(a.dtype)
        with np.errstate(all="ignore"):
            # numba types -x of a narrow unsigned as int64 but the device negates in the operand's own width,
            # then widens (seen on the H100: -851 as uint32 gives 4294966445): wrap first, then widen.
            src = a.v if a.dtype.kind == "u" else a.v.astype(rt)
            v = np.negative(src).astype(rt)
        return TV(v, a.dev, a.mag, a.amb, prod=a.prod if rt == a.dtype else None)
    if a.dtype == B:
        raise NumbaTypingError("+bool")
    return a


def _call(node: ast.Call, env: Mapping[str, Value]) -> TV:
    """``min(a, b)``, ``max(a, b)`` (numba: in the unified type) and ``abs(x)`` (its own type)."""
    name = node.func.id if isinstance(node.func, ast.Name) else None
    args = [evaluate(a, env) for a in node.args]
    if node.keywords or name not in ("min", "max", "abs") or len(args) != (1 if name == "abs" else 2):
        raise NoReference(f"call {ast.unparse(node)!r} has no numpy evaluation")
    if name == "abs":
        a = args[0]
        with np.errstate(all="ignore"):
            v = np.abs(a.v)
        return TV(v, a.dev, a.mag, a.amb)
    rt = unify(args[0].dtype, args[1].dtype)
    a, b = convert(args[0], rt), convert(args[1], rt)
    pick_a = (a.v < b.v) if name == "min" else (a.v > b.v)
    near = (a.dev + b.dev > 0) & (np.abs(a.v.astype(F8) - b.v.astype(F8)) <= a.dev + b.dev)
    return TV(np.where(pick_a, a.v, b.v), np.maximum(a.dev, b.dev), np.maximum(a.mag, b.mag), a.amb | b.amb | near)


def vet_lambda(op: Any) -> ast.Lambda:
    """A lambda operator's tree, vetted again by :func:`aot.core.oplang.lambda_problem` (specs also come
    from manifests on disk); a :class:`Bound` lambda may read its state."""
    from ..core.oplang import lambda_problem
    arrays, scalars = (op.arrays(), op.scalars()) if isinstance(op, Bound) else ((), ())
    op = op.op if isinstance(op, Bound) else op
    problem = lambda_problem(op, arrays, scalars)
    if problem:
        raise NoReference(f"operator {op!r}: {problem}")
    tree = ast.parse(op.strip(), mode="eval").body
    if not isinstance(tree, ast.Lambda):
        raise NoReference(f"operator {op!r} is not a lambda")
    return tree


def code_expression(fn: Callable) -> tuple[list[str], ast.expr] | None:
    """(parameters, body) of an operator from code whose body is one ``return EXPR`` (after a docstring)
    over what :func:`evaluate` knows; None for anything else (the caller calls it element by element)."""
    import inspect
    import textwrap
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, ast.FunctionDef) or fdef.decorator_list or fdef.args.vararg or fdef.args.kwarg:
        return None
    body = [s for s in fdef.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args]
    allowed = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.Constant, ast.Name,
               ast.Attribute, ast.Tuple, ast.Call, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp)
    if not all(isinstance(n, allowed) for n in ast.walk(body[0].value)):
        return None
    names = {n.id for n in ast.walk(body[0].value) if isinstance(n, ast.Name)}
    if not names <= set(params) | {"min", "max", "abs"}:
        return None  # a global or a constant from the module: not evaluated here
    return params, body[0].value


BUILTIN_BINOPS = {"plus": "Add", "minus": "Sub", "multiplies": "Mult", "bit_and": "BitAnd", "bit_or": "BitOr",
                  "bit_xor": "BitXor"}
BUILTIN_CMP = {"less": "Lt", "greater": "Gt", "less_equal": "LtE", "greater_equal": "GtE", "equal_to": "Eq",
               "not_equal_to": "NotEq"}


def _builtin(op: str) -> Callable[..., TV]:
    """CCCL's C++ functors on T (``cuda::std::plus<T>``: the usual arithmetic conversions, then stored into
    T: the same bits as numpy on T); min/max pick an operand."""
    if op in ("minimum", "maximum"):
        def mm(a: TV, b: TV) -> TV:
            pick_a = (a.v < b.v) if op == "minimum" else (a.v > b.v)
            return TV(np.where(pick_a, a.v, b.v), np.maximum(a.dev, b.dev), np.maximum(a.mag, b.mag), a.amb | b.amb)
        return mm
    if op in BUILTIN_CMP:
        return lambda a, b: compare(BUILTIN_CMP[op], a, b)
    name = BUILTIN_BINOPS[op]
    ufunc = {"Add": np.add, "Sub": np.subtract, "Mult": np.multiply, "BitAnd": np.bitwise_and,
             "BitOr": np.bitwise_or, "BitXor": np.bitwise_xor}[name]

    def cxx(a: TV, b: TV) -> TV:
        t = a.dtype
        with np.errstate(all="ignore"):
            v = ufunc(a.v, b.v.astype(t)).astype(t)
        din = a.dev + b.dev
        if name in ("Add", "Sub"):
            return TV(v, din + _rnd(v, din), a.mag + b.mag, a.amb | b.amb)
        if name == "Mult":
            dev = _f64abs(a.v) * b.dev + _f64abs(b.v) * a.dev
            return TV(v, dev + _rnd(v, dev), a.mag * b.mag, a.amb | b.amb)
        return TV(v, np.zeros(v.shape), _f64abs(v), a.amb | b.amb)
    return cxx


def typed_operator(op: Any) -> Callable[..., Value]:
    """A spec's operator as a function of typed values (TVs; dicts of TVs for struct arguments): a built-in
    name, a lambda source, or an operator from code (``"pkg.mod:func"``, imported only after the caller
    vetted its module) whose body is one expression. Raises :class:`NoReference` for other code."""
    if isinstance(op, str) and (op in ("minimum", "maximum") or op in BUILTIN_BINOPS or op in BUILTIN_CMP):
        return _builtin(op)
    if is_lambda(op):
        tree = vet_lambda(op)
        params = [x.arg for x in tree.args.args]
        state = {k: (v if isinstance(v, np.ndarray) else leaf(np.asarray(v)))
                 for k, v in (op.state.items() if isinstance(op, Bound) else ())}
        return lambda *xs: evaluate(tree.body, {**state, **dict(zip(params, xs))})
    fn = resolve_code(op)
    parsed = code_expression(fn)
    if parsed is None:
        raise NoReference(f"operator {op!r}: not one expression this reference can type")
    params, body = parsed
    return lambda *xs: evaluate(body, dict(zip(params, xs)))


def resolve_code(op: Any) -> Callable:
    """An operator from code: a callable, ``"pkg.mod:func"`` (the caller vetted its module), or one
    :class:`Bound` to its state (a copy of the function whose globals hold the numpy state)."""
    if isinstance(op, Bound):
        return op.function(resolve_code(op.op))
    if callable(op):
        return op
    from ..core.oplang import is_code_ref
    if not is_code_ref(op):
        raise NoReference(f"no reference for operator {op!r}")
    from ..core.opref import resolve
    return resolve(vetted(op))


def store(tv: Value, out: np.dtype) -> Value:
    """The operator's result stored into ``out`` (numba's cast in cuda.compute's op wrapper): float ->
    narrower float rounds; float -> int truncates (out of range: undefined, don't care); number -> bool is
    != 0. A struct ``out`` takes a tuple (or a dict) of field values, each stored into its field's type."""
    out = np.dtype(out)
    if out.names:
        vals = list(tv.values()) if isinstance(tv, dict) else list(tv) if isinstance(tv, tuple) else None
        if vals is None or len(vals) != len(out.names):
            raise NoReference(f"the operator's result does not have the {len(out.names)} fields of {out}")
        return {n: store(v, out.fields[n][0]) for n, v in zip(out.names, vals)}  # type: ignore[index]
    if not isinstance(tv, TV):
        raise NoReference(f"the operator returns a struct where {out} is stored")
    with np.errstate(all="ignore"):
        if out == B:
            t, amb = _truthy(tv)
            return TV(t, np.zeros(t.shape), t.astype(F8), amb)
        if out.kind in "iu" and tv.dtype.kind == "f":
            f = tv.v.astype(F8)
            info = np.iinfo(out)
            bad = ~np.isfinite(f) | (f <= info.min - 1.0) | (f >= info.max + 1.0)
            amb = tv.amb | bad | ((tv.dev > 0) & _near_integer(f, tv.dev))
            v = np.where(bad, 0, np.trunc(f)).astype(out)
            return TV(v, np.zeros(v.shape), _f64abs(v), amb)
        if out == tv.dtype:
            return TV(tv.v, tv.dev, tv.mag, tv.amb)
        v = tv.v.astype(out)
        return TV(v, tv.dev + _rnd(v, tv.dev), tv.mag, tv.amb)


def lift(x: np.ndarray) -> Value:
    """An input array as a typed value: a TV, or a dict of TVs for a (flat) struct."""
    x = np.asarray(x)
    if not x.dtype.names:
        return leaf(x)
    if any(x.dtype.fields[n][0].names for n in x.dtype.names):  # type: ignore[index]
        raise NoReference("nested struct types have no typed evaluation")
    return {n: leaf(np.ascontiguousarray(x[n])) for n in x.dtype.names}
