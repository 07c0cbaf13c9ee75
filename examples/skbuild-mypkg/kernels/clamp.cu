// v[i] <- min(max(v[i], lo), hi)
extern "C" __global__ void clamp_f32(float* __restrict__ v, float lo, float hi, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) v[i] = fminf(fmaxf(v[i], lo), hi);
}
