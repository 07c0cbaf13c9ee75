"""Kernels of the WKB reader (the module path the real library uses: ``pkg.io.parse_kernels``)."""

from __future__ import annotations

from .._compile import compile_kernels
from ..kernels._device import INDEX

WKB_POINT_COUNT = INDEX + r"""
extern "C" __global__ void wkb_point_count(const unsigned char* buf, const long long* offsets, int* out, long long n) {
    MYLIB_INDEX
    const unsigned char* g = buf + offsets[i];
    unsigned int type = g[1] | (g[2] << 8) | (g[3] << 16) | ((unsigned int)g[4] << 24);
    out[i] = type == 1 ? 1 : (int)(g[5] | (g[6] << 8) | (g[7] << 16) | ((unsigned int)g[8] << 24));
}
"""

WKB_PARSE_POINTS = INDEX + r"""
extern "C" __global__ void wkb_parse_points(const unsigned char* buf, const long long* offsets, double* x, double* y,
                                            long long n) {
    MYLIB_INDEX
    const double* p = (const double*)(buf + offsets[i] + 5);
    x[i] = p[0]; y[i] = p[1];
}
"""

COORDS_INTERLEAVE = INDEX + r"""
extern "C" __global__ void coords_interleave(const double* x, const double* y, double* xy, long long n) {
    MYLIB_INDEX
    xy[2 * i] = x[i]; xy[2 * i + 1] = y[i];
}
"""

COORDS_SPLIT = INDEX + r"""
extern "C" __global__ void coords_split(const double* xy, double* x, double* y, long long n) {
    MYLIB_INDEX
    x[i] = xy[2 * i]; y[i] = xy[2 * i + 1];
}
"""

OFFSETS_FROM_COUNTS = r"""
extern "C" __global__ void offsets_from_counts(const int* counts, long long* offsets, long long n) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    long long s = 0;
    offsets[0] = 0;
    for (long long i = 0; i < n; ++i) { s += counts[i]; offsets[i + 1] = s; }
}
"""


def compile_all(**kw) -> list:
    return [compile_kernels(WKB_POINT_COUNT, ["wkb_point_count"], **kw),
            compile_kernels(WKB_PARSE_POINTS, ["wkb_parse_points"], **kw),
            compile_kernels(COORDS_INTERLEAVE, ["coords_interleave"], **kw),
            compile_kernels(COORDS_SPLIT, ["coords_split"], **kw),
            compile_kernels(OFFSETS_FROM_COUNTS, ["offsets_from_counts"], **kw)]
