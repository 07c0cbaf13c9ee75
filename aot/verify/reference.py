"""Numpy references for every algorithm and bundled NVRTC unit: the checks ``verify --gpu`` runs.

Each check builds random inputs (seeded), poisons every output buffer (0xA5 bytes) so elements the
kernel never wrote show up, runs the artifact on the GPU and compares: exactly for integers, with a
tight relative error for floating-point sums. A spec with no reference here fails verification:
nothing ships unchecked.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..core.spec import CcclSpec, NvrtcUnit


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
    """Evaluate a vetted lambda body (:func:`aot.spec.lambda_problem`: arithmetic, comparisons, boolean
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


def check_cccl(obj, spec: CcclSpec, device, n: int = 100_003, seed: int = 0) -> None:
    """Run ``obj`` (a loaded cuda.compute algorithm for ``spec``) on seeded random data and raise on any
    mismatch with numpy: the algorithm's own ``check`` (:mod:`aot.algorithms`). A raw cuda.compute object
    (a JIT build) gets the spec's operators and compiled-in arguments bound as the loader binds them."""
    from ..algorithms import ALGORITHMS, Check
    algo = ALGORITHMS.get(spec.algorithm)
    if algo is None:
        raise NoReference(f"no reference for algorithm {spec.algorithm!r}")
    from ..runtime.objects import CcclAlgorithm
    if not isinstance(obj, CcclAlgorithm) and not isinstance(getattr(obj, "obj", None), CcclAlgorithm):
        obj = _bind(obj, spec)
    algo.check(obj, spec.params, Check(device, n=n, seed=seed, types=spec.types))


def _bind(raw, spec: CcclSpec):
    from ..algorithms import ALGORITHMS
    from ..build.compile import operator
    algo = ALGORITHMS[spec.algorithm]
    bound = {slot.keyword: operator(spec.params[slot.field]) for slot in algo.ops}
    defaults = algo.bound_arguments(spec.params)
    return lambda **kw: raw(**{**defaults, **kw, **bound})


# ------------------------------------------------------------------------------------------ NVRTC units
def _launch(kernel, n: int, *args) -> None:
    from cuda.core import Device, LaunchConfig, launch
    dev = Device()
    launch(dev.default_stream, LaunchConfig(grid=max(1, (n + 255) // 256), block=256), kernel, *args)
    dev.sync()


def _random_polygons(rng, m: int):
    xs, ys, offs = [], [], [0]
    for _ in range(m):
        k = int(rng.integers(3, 24))
        ang = np.sort(rng.uniform(0, 2 * np.pi, k))
        r = rng.uniform(0.3, 1.0, k)
        cx, cy = rng.uniform(-5, 5, 2)
        xs.append(cx + r * np.cos(ang))
        ys.append(cy + r * np.sin(ang))
        offs.append(offs[-1] + k)
    return np.concatenate(xs), np.concatenate(ys), np.array(offs, np.int32)


def _pip_reference(px, py, poly_of, vx, vy, offs):
    inside = np.zeros(len(px), np.uint8)
    for i in range(len(px)):
        x, y, p = px[i], py[i], poly_of[i]
        b0, e = offs[p], offs[p + 1]
        xa, ya = vx[b0:e], vy[b0:e]
        xb, yb = np.roll(xa, 1), np.roll(ya, 1)
        crosses = (ya > y) != (yb > y)
        with np.errstate(divide="ignore", invalid="ignore"):
            xc = (xb - xa) * (y - ya) / (yb - ya) + xa
        inside[i] = int(np.count_nonzero(crosses & (x < xc)) % 2)
    return inside


def check_kernel(get_kernel: Callable[[str], Any], unit: NvrtcUnit, device, seed: int = 0) -> None:
    """Run every kernel of a bundled unit; ``get_kernel(name)`` returns a loaded ``cuda.core.Kernel``."""
    from .devarray import DeviceArray as DA
    rng = np.random.default_rng(seed)
    up = lambda h: DA.from_host(h, device)  # noqa: E731
    i32, i64, f64 = np.int32, np.int64, np.float64
    if unit.name == "point_bounds":
        sizes = rng.integers(0, 300, 1000)
        sizes[::13] = 0
        offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        x, y = rng.normal(size=int(offs[-1])), rng.normal(size=int(offs[-1]))
        m = len(sizes)
        d_out = DA(4 * m, f64, device)
        _launch(get_kernel("point_set_bounds"), m, up(x).buffer, up(y).buffer, up(offs).buffer, i32(m), d_out.buffer)
        want = np.empty((m, 4))
        for s in range(m):
            a, b = offs[s], offs[s + 1]
            want[s] = ((x[a:b].min(), y[a:b].min(), x[a:b].max(), y[a:b].max()) if b > a
                       else (np.inf, np.inf, -np.inf, -np.inf))
        close(d_out.to_host(), want.ravel(), "point_set_bounds")
        return
    if unit.name == "morton":
        n = 100_003
        x, y = rng.uniform(-10, 10, n), rng.uniform(-5, 5, n)
        box = (-10.0, -5.0, 10.0, 5.0)
        d_codes = DA(n, np.uint32, device)
        _launch(get_kernel("morton_codes_2d"), n, up(x).buffer, up(y).buffer, i32(n), f64(box[0]), f64(box[1]),
                f64(box[2]), f64(box[3]), d_codes.buffer)

        def q(v, lo, hi):
            return (np.clip((v - lo) / (hi - lo), 0.0, 1.0) * 65535.0).astype(np.uint32)

        def spread(v):
            v = v & 0xFFFF
            v = (v | (v << 8)) & 0x00FF00FF
            v = (v | (v << 4)) & 0x0F0F0F0F
            v = (v | (v << 2)) & 0x33333333
            v = (v | (v << 1)) & 0x55555555
            return v
        want = (spread(q(x, box[0], box[2])) | (spread(q(y, box[1], box[3])) << 1)).astype(np.uint32)
        close(d_codes.to_host(), want, "morton_codes_2d")
        return
    if unit.name == "point_in_polygon":
        vx, vy, offs = _random_polygons(rng, 64)
        n = 20_000
        poly_of = rng.integers(0, 64, n).astype(np.int32)
        px, py = rng.uniform(-6, 6, n), rng.uniform(-6, 6, n)
        d_in = DA(n, np.uint8, device)
        _launch(get_kernel("point_in_polygon"), n, up(px).buffer, up(py).buffer, up(poly_of).buffer, i32(n),
                up(vx).buffer, up(vy).buffer, up(offs).buffer, d_in.buffer)
        close(d_in.to_host(), _pip_reference(px, py, poly_of, vx, vy, offs), "point_in_polygon")
        return
    if unit.name == "segmented_compact":
        n = 100_003
        values = rng.integers(-1000, 1000, n).astype(i32)
        flags = (rng.random(n) < 0.4).astype(i32)
        positions = (np.cumsum(flags) - flags).astype(i32)
        kept = int(flags.sum())
        d_out = DA(kept, i32, device)
        _launch(get_kernel("compact_by_flags"), n, up(values).buffer, up(flags).buffer, up(positions).buffer,
                i32(n), d_out.buffer)
        close(d_out.to_host(), values[flags != 0], "compact_by_flags")
        sizes = rng.integers(0, 200, 1000)
        seg = np.concatenate([[0], np.cumsum(sizes)]).astype(i64)
        seg = np.minimum(seg, n)
        m = len(sizes)
        d_counts = DA(m, i32, device)
        _launch(get_kernel("segment_kept_counts"), m, up(flags).buffer, up(seg).buffer, i32(m), d_counts.buffer)
        want = np.array([flags[seg[s]:seg[s + 1]].sum() for s in range(m)], i32)
        close(d_counts.to_host(), want, "segment_kept_counts")
        return
    if unit.name == "block_sums":  # block_sums<T, 256>: one sum per 256-element block
        n = 100_003
        blocks = (n + 255) // 256
        for k in unit.kernels:
            if not k.startswith("block_sums<"):
                continue
            tname = k[len("block_sums<"):].split(",")[0].strip()
            t = {"float": np.float32, "double": np.float64, "int": np.int32}[tname]
            x = rng.integers(-1000, 1000, n).astype(t) if t is np.int32 else rng.uniform(-1, 1, n).astype(t)
            d_out = DA(blocks, t, device)
            _launch(get_kernel(k), n, up(x).buffer, i32(n), d_out.buffer)
            pad = np.concatenate([x, np.zeros(blocks * 256 - n, t)]).reshape(blocks, 256)
            close(d_out.to_host(), pad.sum(axis=1, dtype=np.float64).astype(t), k,
                  scale=np.abs(pad).sum(axis=1) + 1)
        return
    raise NoReference(f"no reference for NVRTC unit {unit.name!r}")


# ------------------------------------------------------------------------- a package's own NVRTC checks
class CheckContext:
    """What a package's own NVRTC check (``[tool.aot] checks = {unit = "pkg.mod:func"}``) is given:
    the unit's loaded kernels and small helpers, so a check is a few lines of numpy::

        def axpy(ctx):
            x, y = np.arange(1000, dtype=np.float32), np.ones(1000, np.float32)
            d_y = ctx.array(y)
            ctx.launch("axpy", 1000, np.float32(2), ctx.array(x), d_y, np.int32(1000))
            np.testing.assert_allclose(d_y.to_host(), 2 * x + y)

    A check raises (any exception) when the kernels disagree with it.
    """

    def __init__(self, kernels: dict[str, Any], device):
        self.kernels, self.device = kernels, device

    def array(self, host: np.ndarray):
        """A device copy of ``host`` (``.to_host()`` reads it back)."""
        from .devarray import DeviceArray
        return DeviceArray.from_host(np.asarray(host), self.device)

    def empty(self, n: int, dtype):
        """A device array of ``n`` elements filled with 0xA5 bytes (so unwritten elements show)."""
        from .devarray import DeviceArray
        return DeviceArray(n, dtype, self.device)

    def launch(self, kernel: str, n: int, *args, block: int = 256) -> None:
        """Launch ``kernel`` over ``n`` threads (1-D) and wait; device arrays are passed as pointers."""
        from cuda.core import LaunchConfig, launch
        from .devarray import DeviceArray
        args = tuple(a.buffer if isinstance(a, DeviceArray) else a for a in args)
        launch(self.device.default_stream, LaunchConfig(grid=max(1, (n + block - 1) // block), block=block),
               self.kernels[kernel], *args)
        self.device.sync()


def resolve_check(target: str, package: str) -> Callable[[CheckContext], None]:
    """``"pkg.mod:func"`` -> the callable, only inside ``package`` (the package that owns the artifacts:
    a manifest or package file from elsewhere cannot make verify import arbitrary modules)."""
    import importlib
    mod, _, func = target.partition(":")
    if not func or not (mod == package or mod.startswith(package + ".")):
        raise NoReference(f"check {target!r} is not inside package {package!r}")
    fn = getattr(importlib.import_module(mod), func, None)
    if not callable(fn):
        raise NoReference(f"check {target!r}: {mod} has no callable {func!r}")
    return fn


_rand, _close = rand, close  # the names older callers import
