// y <- a * x + y (single precision)
extern "C" __global__ void axpy(float a, const float* __restrict__ x, float* __restrict__ y, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
