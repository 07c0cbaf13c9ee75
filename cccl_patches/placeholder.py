"""A build-time stand-in for a device array at the sites where cuda.compute reads a data pointer.

cuda-cccl 1.2.1 refuses ``ProxyArray`` ("ProxyArray has no GPU data — it is a build-time placeholder
only") wherever it reads an array's data pointer while *building*, not only when calling:

* ``PointerIterator.__init__`` (``iterators/_pointer.py``): every iterator that wraps an array, so a
  ``TransformIterator``, ``PermutationIterator``, ``ReverseIterator`` or ``ZipIterator`` over arrays;
* ``CacheModifiedInputIterator.__init__`` (``iterators/_cache_modified.py``);
* ``_jit._compile_stateful_op`` and ``_JitOpState.to_bytes`` (``_jit.py``): the arrays a stateful Python
  operator captures, packed into the op's state.

At each site the pointer only fills the iterator's or op's *state bytes*. ``serialize()`` keeps the
state's size and alignment, never its bytes: on each call cuda.compute reads every iterator's state and
the op's ``get_state()`` from the live arguments. Evidence (cuda-cccl 1.2.1, sm_90, aot's worker setup
with the stand-in libcuda): each site built with :func:`placeholder_array`, serialized, and
:data:`PLACEHOLDER_ADDRESS` occurs in none of the blobs (``tests/test_cccl_patches.py`` asserts it for
every site). On an H100 every gate spec built over placeholders (each iterator kind, stateful Python and
C++ operators) passed ``aot verify --gpu`` called with real arrays at other addresses, and mutants that
read the state or iterators wrongly failed it (``benchmarks/results/gate_i20_h100.json``).

So the placeholder is an object exposing ``__cuda_array_interface__`` (v3) whose data address is the
same dummy, non-NULL, aligned :data:`PLACEHOLDER_ADDRESS` the ProxyArray fix uses. It is never
dereferenced: a placeholder-built algorithm is only serialized, never called.
"""

from __future__ import annotations

from typing import Any

#: The dummy non-NULL, 4 KiB-aligned state given to placeholders; easy to grep for in blobs.
PLACEHOLDER_ADDRESS = 0x0A07A07A07000


class PlaceholderArray:
    """A C-contiguous device array of ``dtype`` and ``shape`` with no memory behind it (build time only).

    ``shape`` matters for stateful Python operators: cuda.compute bakes a captured array's number of
    dimensions and shape into the op's wrapper (``carray``) and its cache key."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype: Any, shape: tuple[int, ...] = (1,)):
        import numpy as np
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(n) for n in shape)
        if not self.shape or any(n < 1 for n in self.shape):
            raise ValueError(f"placeholder shape must be non-empty and positive, got {shape!r}")

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3, "strides": None,
                "data": (PLACEHOLDER_ADDRESS, False)}

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"placeholder_array({self.dtype}, shape={self.shape})"


def placeholder_array(dtype: Any, shape: tuple[int, ...] = (1,)) -> PlaceholderArray:
    """A build-time device array of ``dtype``/``shape`` for the sites that refuse ``ProxyArray``."""
    return PlaceholderArray(dtype, shape)
