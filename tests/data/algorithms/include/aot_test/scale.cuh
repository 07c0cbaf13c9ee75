// A header under the test matrix's include_dirs: its bytes are part of the unit's content key.
#pragma once
#include <cuda/std/type_traits>

template <typename T>
__device__ inline T aot_test_scale(T a, T x, T y)
{
  static_assert(cuda::std::is_floating_point<T>::value, "axpy is for floating-point types");
  return a * x + y;
}
