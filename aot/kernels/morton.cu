// 32-bit Morton (Z-order) codes of 2-D points inside a bounding box, 16 bits per axis.
__device__ __forceinline__ unsigned int spread_bits_16(unsigned int v)
{
  v &= 0x0000ffffu;
  v = (v | (v << 8)) & 0x00ff00ffu;
  v = (v | (v << 4)) & 0x0f0f0f0fu;
  v = (v | (v << 2)) & 0x33333333u;
  v = (v | (v << 1)) & 0x55555555u;
  return v;
}

__device__ __forceinline__ unsigned int quantize_16(double v, double lo, double hi)
{
  double t = (hi > lo) ? (v - lo) / (hi - lo) : 0.0;
  t = fmin(fmax(t, 0.0), 1.0);
  return (unsigned int)(t * 65535.0);
}

extern "C" __global__ void morton_codes_2d(const double* __restrict__ x, const double* __restrict__ y, int n,
                                           double xmin, double ymin, double xmax, double ymax,
                                           unsigned int* __restrict__ codes)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned int qx = quantize_16(x[i], xmin, xmax);
  unsigned int qy = quantize_16(y[i], ymin, ymax);
  codes[i] = spread_bits_16(qx) | (spread_bits_16(qy) << 1);
}
