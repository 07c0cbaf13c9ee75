"""Bounding boxes: of a point set (a block reduction sized by -DBLOCK_SIZE), of rings, of segments."""

from __future__ import annotations

from .._compile import DEFAULT_OPTIONS, compile_kernels
from ._device import INDEX

_CTYPE = {"float32": "float", "float64": "double"}
#: This unit's block size is a macro, as the library passes it.
OPTIONS = (*DEFAULT_OPTIONS, "-DBLOCK_SIZE=256")

POINT_BOUNDS = r"""
extern "C" __global__ void point_bounds(const double* x, const double* y, double* blocks, long long n) {
    __shared__ double s[4][BLOCK_SIZE];
    long long i = (long long)blockIdx.x * BLOCK_SIZE + threadIdx.x;
    bool ok = i < n;
    s[0][threadIdx.x] = ok ? x[i] : 1e300;  s[1][threadIdx.x] = ok ? y[i] : 1e300;
    s[2][threadIdx.x] = ok ? x[i] : -1e300; s[3][threadIdx.x] = ok ? y[i] : -1e300;
    __syncthreads();
    for (int w = BLOCK_SIZE / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) {
            s[0][threadIdx.x] = fmin(s[0][threadIdx.x], s[0][threadIdx.x + w]);
            s[1][threadIdx.x] = fmin(s[1][threadIdx.x], s[1][threadIdx.x + w]);
            s[2][threadIdx.x] = fmax(s[2][threadIdx.x], s[2][threadIdx.x + w]);
            s[3][threadIdx.x] = fmax(s[3][threadIdx.x], s[3][threadIdx.x + w]);
        }
        __syncthreads();
    }
    if (threadIdx.x < 4) blocks[4 * blockIdx.x + threadIdx.x] = s[threadIdx.x][0];
}
"""

SEGMENT_BOUNDS = INDEX + r"""
extern "C" __global__ void segment_bounds(const double* seg, double* out, long long n) {
    MYLIB_INDEX
    const double* s = seg + 4 * i;
    out[4 * i] = fmin(s[0], s[2]); out[4 * i + 1] = fmin(s[1], s[3]);
    out[4 * i + 2] = fmax(s[0], s[2]); out[4 * i + 3] = fmax(s[1], s[3]);
}
"""


def ring_bounds_source(dtype: str) -> str:
    """The box of each ring (offsets into coordinate arrays), in ``dtype``."""
    t = _CTYPE[dtype]
    return INDEX + f"""
extern "C" __global__ void ring_bounds(const long long* offsets, const {t}* x, const {t}* y, {t}* out, long long n) {{
    MYLIB_INDEX
    {t} x0 = x[offsets[i]], y0 = y[offsets[i]], x1 = x0, y1 = y0;
    for (long long k = offsets[i] + 1; k < offsets[i + 1]; ++k) {{
        x0 = fmin(x0, x[k]); y0 = fmin(y0, y[k]); x1 = fmax(x1, x[k]); y1 = fmax(y1, y[k]);
    }}
    out[4 * i] = x0; out[4 * i + 1] = y0; out[4 * i + 2] = x1; out[4 * i + 3] = y1;
}}
"""


def compile_all(**kw) -> list:
    out = [compile_kernels(POINT_BOUNDS, ["point_bounds"], options=OPTIONS, **kw),
           compile_kernels(SEGMENT_BOUNDS, ["segment_bounds"], **kw)]
    out += [compile_kernels(ring_bounds_source(d), ["ring_bounds"], **kw) for d in ("float32", "float64")]
    return out
