"""Constructing geometry: segments from rings, points from coordinates, affine maps per dtype."""

from __future__ import annotations

from .._compile import compile_kernels
from ._device import INDEX

_CTYPE = {"float32": "float", "float64": "double"}

SEGMENTS_FROM_RING = INDEX + r"""
extern "C" __global__ void segments_from_ring(const double* x, const double* y, double* seg, long long n) {
    MYLIB_INDEX
    long long j = i + 1 < n ? i + 1 : 0;
    seg[4 * i] = x[i]; seg[4 * i + 1] = y[i]; seg[4 * i + 2] = x[j]; seg[4 * i + 3] = y[j];
}
"""

POINTS_FROM_XY = INDEX + r"""
extern "C" __global__ void points_from_xy(const double* x, const double* y, double* pts, long long n) {
    MYLIB_INDEX
    pts[2 * i] = x[i]; pts[2 * i + 1] = y[i];
}
"""


def translate_source(dtype: str) -> str:
    """Shift coordinates by (dx, dy), in ``dtype``."""
    t = _CTYPE[dtype]
    return INDEX + f"""
extern "C" __global__ void translate({t}* x, {t}* y, {t} dx, {t} dy, long long n) {{
    MYLIB_INDEX
    x[i] += dx; y[i] += dy;
}}
"""


def scale_source(dtype: str) -> str:
    """Scale coordinates about the origin, in ``dtype``."""
    t = _CTYPE[dtype]
    return INDEX + f"""
extern "C" __global__ void scale({t}* x, {t}* y, {t} sx, {t} sy, long long n) {{
    MYLIB_INDEX
    x[i] *= sx; y[i] *= sy;
}}
"""


def compile_all(**kw) -> list:
    out = [compile_kernels(SEGMENTS_FROM_RING, ["segments_from_ring"], **kw),
           compile_kernels(POINTS_FROM_XY, ["points_from_xy"], **kw)]
    for d in ("float32", "float64"):
        out += [compile_kernels(translate_source(d), ["translate"], **kw),
                compile_kernels(scale_source(d), ["scale"], **kw)]
    return out
