// v <- v * scale + offset for every value but nodata (single precision, in place)
extern "C" __global__ void scale_offset(float* __restrict__ v, float scale, float offset, float nodata, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && v[i] != nodata) v[i] = v[i] * scale + offset;
}
