"""Spatial indexing: Morton codes, quadtree keys, grid cells and their counts."""

from __future__ import annotations

from .._compile import compile_kernels
from ._device import INDEX, MORTON_FN

MORTON = MORTON_FN + INDEX + r"""
extern "C" __global__ void morton_codes(const double* x, const double* y, const double* box,
                                        unsigned long long* out, long long n) {
    MYLIB_INDEX
    double sx = (x[i] - box[0]) / (box[2] - box[0]), sy = (y[i] - box[1]) / (box[3] - box[1]);
    unsigned int qx = (unsigned int)fmin(fmax(sx * 4294967295.0, 0.0), 4294967295.0);
    unsigned int qy = (unsigned int)fmin(fmax(sy * 4294967295.0, 0.0), 4294967295.0);
    out[i] = mylib_spread(qx >> 16) | (mylib_spread(qy >> 16) << 1);
}
"""

QUADTREE_KEYS = MORTON_FN + INDEX + r"""
extern "C" __global__ void quadtree_keys(const unsigned int* qx, const unsigned int* qy, int level,
                                         unsigned long long* out, long long n) {
    MYLIB_INDEX
    out[i] = (mylib_spread(qx[i]) | (mylib_spread(qy[i]) << 1)) >> (2 * (16 - level));
}
"""

POINT_TO_CELL = INDEX + r"""
extern "C" __global__ void point_to_cell(const double* x, const double* y, double x0, double y0, double size,
                                         int cols, int* out, long long n) {
    MYLIB_INDEX
    out[i] = (int)floor((y[i] - y0) / size) * cols + (int)floor((x[i] - x0) / size);
}
"""

CELL_COUNTS = INDEX + r"""
extern "C" __global__ void cell_counts(const int* cells, unsigned int* counts, long long n) {
    MYLIB_INDEX
    atomicAdd(&counts[cells[i]], 1u);
}
"""


def compile_all(**kw) -> list:
    return [compile_kernels(MORTON, ["morton_codes"], **kw),
            compile_kernels(QUADTREE_KEYS, ["quadtree_keys"], **kw),
            compile_kernels(POINT_TO_CELL, ["point_to_cell"], **kw),
            compile_kernels(CELL_COUNTS, ["cell_counts"], **kw)]
