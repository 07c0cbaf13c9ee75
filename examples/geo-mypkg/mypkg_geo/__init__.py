"""A GPU geospatial library's CCCL call sites, shipped ahead of time (aot's issue 20 example).

Every function takes and returns device arrays (anything with ``__cuda_array_interface__``; CuPy here) and
runs a kernel from this package's wheel: nothing is compiled at run time, so a lean install (no
numba-cuda-mlir, no CUDA toolkit) serves them. CuPy only allocates and copies here (no CuPy kernel, which
would need NVRTC). The kernels are :data:`registry`'s specs
(``build_matrix.yaml``).
"""

from __future__ import annotations

import functools

import numpy as np

import aot

#: The package's own artifacts (built into the wheel by aot's hatchling hook).
XY = np.dtype([("x", np.float64), ("y", np.float64)], align=True)


@functools.lru_cache(maxsize=1)
def registry() -> aot.Registry:
    """The package's registry, made on first use (importing the package costs nothing)."""
    return aot.Registry.from_package(__name__)


def _cp():
    import cupy  # the library's array type; imported on first call
    return cupy


class _Struct:
    """One struct of ``dtype`` in device memory (CuPy has no structured dtypes): what cuda.compute writes a
    struct reduction's result into."""

    def __init__(self, dtype: np.dtype):
        self.dtype = dtype
        self._buf = _cp().asarray(np.zeros(dtype.itemsize, np.uint8))

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": (1,), "typestr": self.dtype.str, "descr": self.dtype.descr, "version": 3,
                "strides": None, "data": (self._buf.data.ptr, False)}

    def get(self):
        return self._buf.get().view(self.dtype)[0]


def _run_twice(fn) -> None:
    """cuda.compute's two-phase call: ask for the temporary storage's size, then run with it."""
    cp = _cp()
    nbytes = fn(None)
    fn(cp.empty(max(int(nbytes or 0), 1), np.uint8))


def compact_by_mask(mask):
    """The indices ``i`` (int32) with ``mask[i] != 0``: one artifact serves every mask, bound per call."""
    cp = _cp()
    n = int(mask.size)
    out, count = cp.empty(max(n, 1), np.int32), cp.asarray(np.zeros(1, np.int64))
    select = registry().cccl("compact_by_mask")
    _run_twice(lambda t: select(temp_storage=t, d_in=0, d_out=out, d_num_selected_out=count, num_items=n,
                                state={"mask": mask}))
    return out[:int(count.get()[0])]


def sum_of_squares(x) -> float:
    """sum(x * x) over float64, the square fused into the reduction's read."""
    cp = _cp()
    out = cp.empty(1, np.float64)
    reduce = registry().cccl("sum_of_squares")
    _run_twice(lambda t: reduce(temp_storage=t, d_in=x, d_out=out, num_items=int(x.size),
                                h_init=np.zeros(1, np.float64)))
    return float(out.get()[0])


def centroid(x, y) -> tuple[float, float]:
    """The mean point of coordinates ``x``, ``y`` (float64): one zip reduction for both sums."""
    n = int(x.size)
    out = _Struct(XY)
    reduce = registry().cccl("sum_xy")
    _run_twice(lambda t: reduce(temp_storage=t, d_in=(x, y), d_out=out, num_items=n, h_init=np.zeros(1, XY)))
    s = out.get()
    return float(s["x"]) / n, float(s["y"]) / n


def segment_of_index(offsets, n: int):
    """For each index ``i`` in ``0..n-1``, the segment ``k`` with ``offsets[k] <= i < offsets[k + 1]``
    (``offsets``: int64, ascending, ``offsets[0] == 0``; uint64 results, cuda.compute's index type): the
    upper bound of ``i`` among the segments' ends ``offsets[1:]``, searched for every index at once."""
    cp = _cp()
    ends = offsets[1:]
    out = cp.empty(max(n, 1), np.uint64)
    search = registry().cccl("segment_of_index")
    search(d_data=ends, num_items=int(ends.size), d_values=0, num_values=n, d_out=out)
    return out[:n]
