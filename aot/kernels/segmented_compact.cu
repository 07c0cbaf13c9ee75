// Stream compaction by precomputed positions: keeps item i where flags[i] != 0 at out[positions[i]],
// positions being the exclusive scan of flags (e.g. from cuda.compute exclusive_scan). Also emits, per
// segment [seg_offsets[s], seg_offsets[s+1]), how many items it kept.
extern "C" __global__ void compact_by_flags(const int* __restrict__ values, const int* __restrict__ flags,
                                            const int* __restrict__ positions, int n, int* __restrict__ out)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && flags[i] != 0) out[positions[i]] = values[i];
}

extern "C" __global__ void segment_kept_counts(const int* __restrict__ flags,
                                               const long long* __restrict__ seg_offsets, int n_segments,
                                               int* __restrict__ counts)
{
  int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= n_segments) return;
  int c = 0;
  for (long long i = seg_offsets[s]; i < seg_offsets[s + 1]; ++i) c += flags[i] != 0;
  counts[s] = c;
}
