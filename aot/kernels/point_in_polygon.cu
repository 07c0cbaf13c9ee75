// Point-in-polygon by crossing number (even-odd rule): point i is tested against polygon poly_of[i],
// whose closed ring is vertices [ring_offsets[p], ring_offsets[p+1]) of (vx, vy).
extern "C" __global__ void point_in_polygon(const double* __restrict__ px, const double* __restrict__ py,
                                            const int* __restrict__ poly_of, int n_points,
                                            const double* __restrict__ vx, const double* __restrict__ vy,
                                            const int* __restrict__ ring_offsets,
                                            unsigned char* __restrict__ inside)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n_points) return;
  const double x = px[i], y = py[i];
  const int p = poly_of[i];
  const int begin = ring_offsets[p], end = ring_offsets[p + 1];
  bool in = false;
  for (int a = begin, b = end - 1; a < end; b = a++) {
    const double xa = vx[a], ya = vy[a], xb = vx[b], yb = vy[b];
    if ((ya > y) != (yb > y)) {
      const double xc = (xb - xa) * (y - ya) / (yb - ya) + xa;
      if (x < xc) in = !in;
    }
  }
  inside[i] = in ? 1 : 0;
}
