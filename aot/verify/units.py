"""GPU checks of NVRTC units: aot's bundled units (:func:`check_kernel`, against numpy) and the API a
package's own unit checks are written against (:class:`CheckContext`, :func:`resolve_check`).

Each check builds seeded random inputs, poisons every output buffer (0xA5 bytes) so elements the kernel
never wrote show up, launches the kernels and compares with :func:`aot.verify.reference.close`. A unit
with no check raises :class:`aot.verify.reference.NoReference`.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..core.spec import NvrtcUnit
from .compare import reassociation_tol
from .reference import NoReference, close


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


@functools.lru_cache(maxsize=1)
def _default_units() -> dict[str, str]:
    """Content keys of aot's own default NVRTC units, the only units the references below know."""
    from ..runtime.loader.default_specs import load
    return {s.name: s.content_key() for s in load() if isinstance(s, NvrtcUnit)}


def check_kernel(get_kernel: Callable[[str], Any], unit: NvrtcUnit, device, seed: int = 0) -> None:
    """Run every kernel of a bundled unit; ``get_kernel(name)`` returns a loaded ``cuda.core.Kernel``.

    Only aot's own default units have references here, matched by content, not by name: a package's unit
    that happens to be called ``morton`` is another kernel (launching it with the default's arguments reads
    out of bounds and poisons the context for every later check), so it gets :class:`NoReference`."""
    if _default_units().get(unit.name) != unit.content_key():
        raise NoReference(f"no reference for NVRTC unit {unit.name!r}")
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
            tol = reassociation_tol(t, np.abs(pad).sum(axis=1, dtype=np.float64), 256) if t is not np.int32 else None
            close(d_out.to_host(), pad.sum(axis=1, dtype=np.float64).astype(t), k, tol=tol)
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
