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

Two more fixes for the forms beyond plain arrays (issue 20), each with its evidence in its module:

* :func:`placeholder_array` (:mod:`cccl_patches.placeholder`): a build-time array with a
  ``__cuda_array_interface__`` and the same dummy address, for the sites that refuse ``ProxyArray``
  because they read a data pointer while building (iterators over arrays, the cache-modified iterator,
  the arrays a stateful Python operator captures).
* :mod:`cccl_patches.symbols` (installed by :func:`apply`): iterator symbol names hash the operator's
  content instead of its memory address, so a ``TransformIterator`` over a Python operator builds to the
  same bytes twice. It changes no symbol of an iterator without an operator, so no artifact built before
  it changes (``PATCH_VERSION`` stays).
* :mod:`cccl_patches.wrapper_names` (installed by :func:`apply`): the wrapper cuda-cccl generates around a
  Python operator is named from the operator's content instead of a per-process counter, so a blob's bytes
  do not depend on what its worker built before, and two items' memoized names never meet in one link.
* :mod:`cccl_patches.annotated_ops` (installed by :func:`apply`): a stateless Python operator with type
  annotations is compiled for the build's target instead of eagerly for the current device (which a
  driverless host has not); ``TransformOutputIterator`` needs the annotations. Unannotated operators are
  untouched.

The patches are version-gated: they refuse to apply to a cuda-cccl they were not checked against, so an
upgrade is a conscious re-verification, not a silent change. What differs between the releases checked is
data (:data:`CHECKED`): cuda-cccl 1.1.x draws an operator wrapper's name inline from a counter and compiles
operators with numba-cuda; 1.2.x has ``_odr_helpers._make_wrapper_name`` and uses numba-cuda-mlir. The other
sites patched (``_cccl_interop._device_array_to_cccl_iter``, ``iterators._base._deterministic_suffix``,
``_odr_helpers.create_op_void_ptr_wrapper``) are the same in 1.1.0, 1.1.1, 1.2.0 and 1.2.1
(``tests/test_cccl_patches.py``: ``test_checked_releases``; the multi-release build,
``tests/test_cccl_releases.py``, builds under each). Every CCCL key carries the release it was built under
(the producer's ``cuda_cccl`` is part of every CCCL content key, and a manifest entry names its release).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .placeholder import PLACEHOLDER_ADDRESS, PlaceholderArray, placeholder_array



@dataclass(frozen=True)
class Checked:
    """One cuda-cccl release the patches were checked against, and what differs in it."""

    release: str
    #: How cuda-cccl names an operator's wrapper: ``"make_wrapper_name"`` (``_odr_helpers._make_wrapper_name``)
    #: or ``"counter"`` (inline ``next(_wrapper_name_counter)``): :func:`cccl_patches.wrapper_names.install`.
    wrapper_names: str
    #: Whether every spec of the default matrix built with it was verified on a GPU (``aot verify --gpu``);
    #: the others were built and byte-checked on the CPU host; ``.ci/gpu/cccl_releases.sh`` runs them on one.
    gpu_verified: bool


#: The cuda-cccl releases that can serialize (``cuda.compute.serialize``, 1.1.0 onwards), each checked.
CHECKED = {c.release: c for c in (
    Checked("1.1.0", "counter", False),
    Checked("1.1.1", "counter", False),
    Checked("1.2.0", "make_wrapper_name", False),
    Checked("1.2.1", "make_wrapper_name", True),
)}
#: cuda-cccl versions this patch was checked against (:data:`CHECKED`).
VERIFIED_CCCL_VERSIONS = tuple(CHECKED)
#: Bumped when the patch changes what a build produces (part of every CCCL content key). 2: operator
#: wrappers named from content (:mod:`cccl_patches.wrapper_names`), workers compile in one fixed folder.
PATCH_VERSION = 2
STUB_SOURCE = Path(__file__).with_name("libcuda_stub.c")

_applied = False


class PatchError(RuntimeError):
    pass


def apply() -> None:
    """Install the ProxyArray fix and the stable iterator symbols into this process's cuda.compute
    (idempotent)."""
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
    from . import annotated_ops, symbols, wrapper_names
    symbols.install()
    annotated_ops.install()
    # after annotated_ops: it wraps the wrapper maker annotated_ops installed
    wrapper_names.install(CHECKED[version].wrapper_names)
    _applied = True


def restart_names() -> None:
    """Restart cuda.compute's per-process counter of generated operator wrappers (``wrapped_<op>_<n>``,
    ``cuda.compute._odr_helpers._wrapper_name_counter``) before each build item.

    Without this a blob's bytes depend on which specs the same worker built before it: two ``--jobs 2``
    builds of the default matrix gave different bytes for lambda specs, though each blob was correct. The
    counter only keeps names unique within one program; every build item is its own program, linked and
    serialized alone, so restarting it per item keeps names unique where they must be. Evidence: the
    byte-identity tests (tests/test_cccl_patches.py, tests/test_forms.py) and ``verify --gpu`` of sets built
    with it. The JIT fallback builds through the same recipe, so it gets the same bytes too.

    Since :mod:`cccl_patches.wrapper_names` the wrappers of Python operators are named from content and
    this restart is also where a new program begins for it; the counter is restarted still for any other
    name cuda-cccl draws from it. The restart alone had let a memoized operator's name meet a new one in one
    link (``symbol multiply defined``): that module says how."""
    import itertools
    from . import wrapper_names

    wrapper_names.restart()  # each item is its own program (cccl_patches.wrapper_names)
    try:
        from cuda.compute import _odr_helpers
    except ImportError:  # no numba-cuda-mlir: no Python operator is compiled, no wrapper is named
        return
    with _odr_helpers._wrapper_name_lock:
        counter = _odr_helpers._wrapper_name_counter
        if isinstance(counter, wrapper_names.ContentCounter):  # cuda-cccl 1.1.x: the patch's own counter
            counter.restart()
        else:
            _odr_helpers._wrapper_name_counter = itertools.count()


__all__ = ["CHECKED", "Checked", "PATCH_VERSION", "PLACEHOLDER_ADDRESS", "PatchError", "PlaceholderArray",
           "STUB_SOURCE", "VERIFIED_CCCL_VERSIONS", "apply", "placeholder_array", "restart_names"]
