"""The library's kernels, as strings: what it would hand to NVRTC at run time, and what aot builds ahead."""

_CTYPE = {"float32": "float", "float64": "double"}

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

_SCALE_SHIFT = r"""
extern "C" __global__ void scale_shift(const {T}* __restrict__ x, {T}* __restrict__ out, {T} a, {T} b,
                                       long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * a + b;
}
"""


def scale_shift_source(dtype: str) -> str:
    """``out = x * a + b`` for ``dtype`` (float32 or float64)."""
    return _SCALE_SHIFT.replace("{T}", _CTYPE[dtype])


_PRELUDE = r"""
// BLOCK comes from -DBLOCK=... (the flags in build_matrix.yaml)
__device__ __forceinline__ long long widen(int v) { return (long long)v; }
"""

BLOCK_SUM = _PRELUDE + r"""
extern "C" __global__ void block_sum(const int* __restrict__ x, long long* __restrict__ sums, int n) {
    __shared__ long long s[BLOCK];
    int i = blockIdx.x * BLOCK + threadIdx.x;
    s[threadIdx.x] = i < n ? widen(x[i]) : 0;
    __syncthreads();
    for (int w = BLOCK / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = s[0];
}
"""
