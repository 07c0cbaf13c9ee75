"""Fixes for cuda-cccl's ahead-of-time (``ProxyArray``) builds, applied by ``aot``'s build workers.

cuda-cccl 1.2.1 builds a ``ProxyArray`` placeholder into a pointer iterator whose state is NULL. The C
layer (``cccl.c.parallel``) reads a pointer iterator with NULL state as *absent*:

* ``radix_sort`` with values: the values iterator looks absent, so the keys-only kernels are compiled.
  The blob sorts keys and never writes the values output (seen on an H200: values stayed zero).
  Evidence: the patched sm_90 ``radix_sort_pairs_u64_i32`` blob is 646 KB, the unpatched 624 KB.
* ``segmented_sort`` with values: the same as radix sort. Evidence (sm_90, int32 keys and values, int64
  offsets): unpatched, the pairs blob is 1,056,839 bytes, byte-for-byte the size of the keys-only blob;
  patched it is 1,089,002 (the pairs kernels). The check in :mod:`aot.algorithms.sort` verifies values.
* ``merge_sort`` with values: the keys iterator is taken for ``cub::NullType*`` and NVRTC fails with
  ``KeyInputIteratorT=cub::NullType*`` ("cannot be called with the given argument list").

Checked and unaffected (same blob size patched and unpatched, sm_90): ``three_way_partition``,
``unary_transform``, ``binary_transform``, ``histogram_even`` (their placeholders are all required
arguments the C layer never tests for NULL).

The fix (:func:`apply`): a ``ProxyArray`` becomes a pointer iterator whose state is a dummy, non-NULL,
aligned address (:data:`PLACEHOLDER_ADDRESS`). It is never dereferenced (a proxy-built algorithm is
only serialized, never called; real pointers are bound at call time) and never serialized (tests
assert the address does not occur in any blob). Every patched spec is verified on a GPU against numpy
(``python -m aot verify --gpu``) before it ships.

The patch is version-gated: it refuses to apply to a cuda-cccl it was not checked against, so an
upgrade is a conscious re-verification, not a silent change.
"""

from __future__ import annotations

from pathlib import Path

#: cuda-cccl versions this patch was verified against (on the GPU, every spec of the default matrix).
VERIFIED_CCCL_VERSIONS = ("1.2.1",)
#: The dummy non-NULL state given to ``ProxyArray`` iterators; a value easy to grep for in blobs.
PLACEHOLDER_ADDRESS = 0x0A07A07A07000
#: Bumped when the patch changes what a build produces (part of every CCCL content key).
PATCH_VERSION = 1
STUB_SOURCE = Path(__file__).with_name("libcuda_stub.c")

_applied = False


class PatchError(RuntimeError):
    pass


def apply() -> None:
    """Install the ProxyArray fix into this process's cuda.compute (idempotent)."""
    global _applied
    if _applied:
        return
    import importlib.metadata

    version = importlib.metadata.version("cuda-cccl")
    if version not in VERIFIED_CCCL_VERSIONS:
        raise PatchError(f"cccl_patches was verified against cuda-cccl {', '.join(VERIFIED_CCCL_VERSIONS)}, "
                         f"found {version}: re-verify the ProxyArray fix and add the version")
    import numpy as np
    import cuda.compute._cccl_interop as interop
    from cuda.compute._proxy import ProxyArray

    original = interop._device_array_to_cccl_iter

    def _device_array_to_cccl_iter(array):
        if not isinstance(array, ProxyArray):
            return original(array)
        info = interop._type_info_from_dtype(interop.get_dtype(array))
        state_info = interop._type_info_from_dtype(np.intp)
        return interop.Iterator(state_info.alignment, interop.IteratorKind.POINTER, interop.Op(),
                                interop.Op(), info, state=PLACEHOLDER_ADDRESS)

    interop._device_array_to_cccl_iter = _device_array_to_cccl_iter
    _applied = True
