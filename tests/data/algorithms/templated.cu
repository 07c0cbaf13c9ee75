// Test unit: a template instantiated through name expressions, a header from include_dirs, and a CUB
// block primitive from the installed cuda-cccl.
#include <aot_test/scale.cuh>
#include <cub/block/block_reduce.cuh>

template <typename T>
__global__ void axpy(T a, const T* __restrict__ x, T* __restrict__ y, int n)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = aot_test_scale(a, x[i], y[i]);
  }
}

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) block_max(const T* __restrict__ in, int n, T* __restrict__ out)
{
  using BlockReduce = cub::BlockReduce<T, BLOCK>;
  __shared__ typename BlockReduce::TempStorage temp;
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  const T v = i < n ? in[i] : in[0];
  const T m = BlockReduce(temp).Reduce(v, cuda::maximum<>{});
  if (threadIdx.x == 0) {
    out[blockIdx.x] = m;
  }
}
