"""adopt-mypkg's CUDA C++ kernels, kept as Python strings (rendered per dtype where needed), and the flags
its compile function passes to NVRTC."""

#: The NVRTC flags of every compile (what the build matrix lists for each unit).
OPTIONS = ("-std=c++17", "-DBLOCK=256")

SAXPY = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

BLOCK_SUM = r"""
extern "C" __global__ void block_sum(const int* x, long long* out, int n) {
    __shared__ long long part[BLOCK];
    int i = blockIdx.x * BLOCK + threadIdx.x;
    part[threadIdx.x] = i < n ? x[i] : 0;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}
"""

_C = {"float32": "float", "float64": "double"}


def scale_source(dtype: str) -> str:
    """``y = a * x`` for one dtype (the library renders one source per dtype it is called with)."""
    t = _C[dtype]
    return f"""
extern "C" __global__ void scale(const {t}* x, {t}* y, {t} a, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}}
"""
