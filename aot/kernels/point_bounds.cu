// Axis-aligned bounds of point sets: one thread per set, points [offsets[s], offsets[s+1]).
// out is [n_sets][4] = (xmin, ymin, xmax, ymax); an empty set yields (+inf, +inf, -inf, -inf).
extern "C" __global__ void point_set_bounds(const double* __restrict__ x, const double* __restrict__ y,
                                            const long long* __restrict__ offsets, int n_sets,
                                            double* __restrict__ out)
{
  int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= n_sets) return;
  double xmin = __longlong_as_double(0x7ff0000000000000LL), ymin = xmin;
  double xmax = -xmin, ymax = -xmin;
  for (long long i = offsets[s]; i < offsets[s + 1]; ++i) {
    xmin = fmin(xmin, x[i]); xmax = fmax(xmax, x[i]);
    ymin = fmin(ymin, y[i]); ymax = fmax(ymax, y[i]);
  }
  out[4 * s + 0] = xmin; out[4 * s + 1] = ymin;
  out[4 * s + 2] = xmax; out[4 * s + 3] = ymax;
}
