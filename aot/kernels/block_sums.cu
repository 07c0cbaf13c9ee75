// Per-block sums with CUB's cooperative BlockReduce: a templated NVRTC unit using CCCL's device headers
// (cuda-cccl's include directory is on every unit's include path). Instantiated through name expressions
// ("block_sums<float, 256>"), which the loader looks up by the same expression.
#include <cub/block/block_reduce.cuh>

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) block_sums(const T* __restrict__ in, int n, T* __restrict__ out)
{
  using BlockReduce = cub::BlockReduce<T, BLOCK>;
  __shared__ typename BlockReduce::TempStorage temp;
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  const T v = i < n ? in[i] : T(0);
  const T sum = BlockReduce(temp).Sum(v);
  if (threadIdx.x == 0) {
    out[blockIdx.x] = sum;
  }
}
