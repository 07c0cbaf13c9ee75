"""Spatial predicates: point in polygon, boxes, segment crossings, within a distance."""

from __future__ import annotations

from .._compile import compile_kernels
from ._device import CROSS_FN, INDEX, POINT_IN_RING_FN

_CTYPE = {"float32": "float", "float64": "double"}

POINT_IN_POLYGON = INDEX + POINT_IN_RING_FN + r"""
extern "C" __global__ void point_in_polygon(const double* px, const double* py, const double* xs, const double* ys,
                                            int ring, unsigned char* out, long long n) {
    MYLIB_INDEX
    out[i] = mylib_point_in_ring(px[i], py[i], xs, ys, ring);
}
"""

BBOX_CONTAINS_POINT = INDEX + r"""
extern "C" __global__ void bbox_contains_point(const double* box, const double* px, const double* py,
                                               unsigned char* out, long long n) {
    MYLIB_INDEX
    out[i] = px[i] >= box[0] && py[i] >= box[1] && px[i] <= box[2] && py[i] <= box[3];
}
"""

BBOX_INTERSECTS = INDEX + r"""
extern "C" __global__ void bbox_intersects(const double* a, const double* b, unsigned char* out, long long n) {
    MYLIB_INDEX
    const double* p = a + 4 * i; const double* q = b + 4 * i;
    out[i] = p[0] <= q[2] && q[0] <= p[2] && p[1] <= q[3] && q[1] <= p[3];
}
"""

SEGMENT_INTERSECTS = CROSS_FN + INDEX + r"""
extern "C" __global__ void segment_intersects(const double* s, const double* t, unsigned char* out, long long n) {
    MYLIB_INDEX
    const double* a = s + 4 * i; const double* b = t + 4 * i;
    double d1 = mylib_cross(b[0], b[1], b[2], b[3], a[0], a[1]), d2 = mylib_cross(b[0], b[1], b[2], b[3], a[2], a[3]);
    double d3 = mylib_cross(a[0], a[1], a[2], a[3], b[0], b[1]), d4 = mylib_cross(a[0], a[1], a[2], a[3], b[2], b[3]);
    out[i] = ((d1 > 0) != (d2 > 0)) && ((d3 > 0) != (d4 > 0));
}
"""


def within_distance_source(dtype: str) -> str:
    """Whether each point pair lies within ``r`` of each other, in ``dtype``."""
    t = _CTYPE[dtype]
    return INDEX + f"""
extern "C" __global__ void within_distance(const {t}* ax, const {t}* ay, const {t}* bx, const {t}* by, {t} r,
                                           unsigned char* out, long long n) {{
    MYLIB_INDEX
    {t} dx = ax[i] - bx[i], dy = ay[i] - by[i];
    out[i] = dx * dx + dy * dy <= r * r;
}}
"""


def compile_all(**kw) -> list:
    out = [compile_kernels(POINT_IN_POLYGON, ["point_in_polygon"], **kw),
           compile_kernels(BBOX_CONTAINS_POINT, ["bbox_contains_point"], **kw),
           compile_kernels(BBOX_INTERSECTS, ["bbox_intersects"], **kw),
           compile_kernels(SEGMENT_INTERSECTS, ["segment_intersects"], **kw)]
    out += [compile_kernels(within_distance_source(d), ["within_distance"], **kw) for d in ("float32", "float64")]
    return out
