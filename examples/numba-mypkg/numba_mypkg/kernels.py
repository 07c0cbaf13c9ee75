"""The package's numba-cuda kernels, written as any numba-cuda library writes them: plain ``@cuda.jit``
functions, launched as ``kernel[grid, block](args)``. Nothing here knows about aot."""

from numba import cuda

#: Threads per block of ``block_sum``: its shared-memory tile is this long.
TPB = 256


@cuda.jit(fastmath=True)
def axpy(out, x, y, a):
    """out = a * x + y, one element per thread."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def scale_inplace(x, factor, n):
    """x *= factor over a grid-stride loop (any grid covers any n)."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, n, stride):
        x[i] *= factor


@cuda.jit(device=True)
def smoothstep(e0, e1, v):
    t = min(max((v - e0) / (e1 - e0), 0.0), 1.0)
    return t * t * (3.0 - 2.0 * t)


@cuda.jit
def smooth(out, x, e0, e1):
    """out = smoothstep(e0, e1, x): a kernel calling a device function."""
    i = cuda.grid(1)
    if i < x.size:
        out[i] = smoothstep(e0, e1, x[i])


@cuda.jit
def block_sum(out, x):
    """One sum per block of TPB elements, through a shared-memory tree reduction."""
    tile = cuda.shared.array(TPB, dtype=x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i] if i < x.size else 0
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            tile[t] += tile[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = tile[0]
