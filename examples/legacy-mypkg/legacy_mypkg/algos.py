"""The library's cuda.compute calls, unchanged by aot (``cccl-legacy`` in pyproject.toml names each)."""

import numpy as np

from . import ops


def reduce_into(d_in, d_out, op=ops.add, init=0):
    """``d_out[0] = reduce(op, d_in, init)`` with cuda.compute 0.6's two-phase call."""
    from cuda.compute import algorithms
    from numba import cuda
    h_init = np.array([init], dtype=d_in.dtype)
    r = algorithms.make_reduce_into(d_in=d_in, d_out=d_out, op=op, h_init=h_init)
    size = r(temp_storage=None, d_in=d_in, d_out=d_out, op=op, num_items=d_in.size, h_init=h_init)
    r(temp_storage=cuda.device_array(max(size, 1), dtype=np.uint8), d_in=d_in, d_out=d_out, op=op, num_items=d_in.size,
      h_init=h_init)
    return d_out


def negate(d_in, d_out):
    from cuda.compute import algorithms
    t = algorithms.make_unary_transform(d_in=d_in, d_out=d_out, op=ops.negate)
    t(d_in=d_in, d_out=d_out, op=ops.negate, num_items=d_in.size)
    return d_out


def add_arrays(d_a, d_b, d_out):
    """``d_out = d_a + d_b`` (a binary transform with the library's own operator)."""
    from cuda.compute import algorithms
    algorithms.binary_transform(d_in1=d_a, d_in2=d_b, d_out=d_out, op=ops.add, num_items=d_a.size)
    return d_out


def segment_sums(d_in, d_out, d_starts, d_ends):
    """``d_out[i] = sum(d_in[d_starts[i]:d_ends[i]])`` (a segmented reduction; int64 offsets)."""
    from cuda.compute import algorithms
    algorithms.segmented_reduce(d_in=d_in, d_out=d_out, num_segments=d_out.size, start_offsets_in=d_starts,
                                end_offsets_in=d_ends, op=ops.add, h_init=np.array([0], dtype=d_in.dtype))
    return d_out
