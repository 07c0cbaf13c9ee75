"""Load every kernel of a spec into the device ahead of its first call: what "warm" means.

The driver loads kernels lazily (``CUDA_MODULE_LOADING=LAZY``, its default): ``cuLibraryLoadData`` only
registers the image, and each kernel is loaded into the context at its first launch. Measured on an
H100/H200 before this module: after ``request_warmup`` + ``ensure_warm``, the first call of each spec on
2^20 items still cost 4-13 ms against 0.1-0.8 ms for the second. ``cuKernelGetFunction`` on a
``CUkernel`` loads that kernel into the current context, so warming a spec here means: resolve its
library for the current device, then ``cuKernelGetFunction`` on every kernel of it.

* NVRTC units: :func:`warm_nvrtc` calls ``cuKernelGetFunction`` on each kernel the unit's
  :class:`aot.runtime.loader.library.DriverLibrary` resolved when it loaded (or, for a JIT-built unit, on the
  handle of each ``cuda.core.ObjectCode.get_kernel``).
* cuda.compute objects: the ``CUlibrary`` lives in the C struct of the ``Device<Algo>BuildResult``
  (``build_data.library``), which cuda-cccl does not expose to Python. :func:`cccl_library_handle` reads
  it from the object's own memory at the offset found for the cuda-cccl versions in
  :data:`VERIFIED_CCCL_VERSIONS` (``tests/test_warm.py`` finds it with a fake driver whose
  ``cuLibraryLoadData`` returns sentinel handles, for every algorithm of the default matrix), and only
  after self-checks that read nothing outside the object: the struct's ``payload_size`` equals the
  length of the object's cubin, the result is loaded, the handle is non-zero. Then
  ``cuLibraryEnumerateKernels`` + ``cuKernelGetFunction`` load all of its kernels.
  On another cuda-cccl, or if a check fails, the kernels are not preloaded (they load at the first call,
  as before) and the reason is reported: :class:`KernelsNotLoaded`.

Everything here runs in the warmup threads, with the registry's device current.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable, Iterable
from typing import Any

#: cuda-cccl versions whose ``Device<Algo>BuildResult`` layout :data:`LIBRARY_OFFSET` was found for.
VERIFIED_CCCL_VERSIONS = ("1.2.1",)
#: Byte offsets, from the start of the Python object (``PyObject_HEAD`` 16 bytes, Cython vtable pointer
#: 8, then ``build_data``: ``int cc``, ``payload``, ``payload_size``, ..., ``CUlibrary library``). The
#: same for every ``Device<Algo>BuildResult`` of cuda-cccl 1.2.1 (tests/test_warm.py checks all of them).
PAYLOAD_SIZE_OFFSET = 40
LIBRARY_OFFSET = 56
_WORD = 8


class KernelsNotLoaded(Exception):
    """The kernels could not be preloaded (the reason is the message); they load at the first call."""


@functools.lru_cache(maxsize=1)
def _cccl_version() -> str:
    from ...core.versions import dist_version
    return dist_version("cuda-cccl")


def _check(result: tuple, what: str) -> tuple:
    """cuda.bindings returns ``(CUresult, *values)``; raise with the driver's error name unless success."""
    err = result[0]
    if int(err) != 0:
        raise KernelsNotLoaded(f"{what} failed: {getattr(err, 'name', err)}")
    return result[1:]


def build_result_of(obj: Any) -> Any:
    """The ``Device<Algo>BuildResult`` of a cuda.compute algorithm object, loaded for the current device
    (this also loads its library, what cuda.compute otherwise does at the first call)."""
    holder = getattr(obj, "partitioner", obj)  # select wraps a three-way partition
    results = getattr(holder, "build_results", None)
    if results is None:
        raise KernelsNotLoaded(f"{type(obj).__name__} has no build_results (another cuda.compute?)")
    from cuda.compute._cccl_interop import resolve_build_result
    return resolve_build_result(results)


def cccl_library_handle(build_result: Any) -> int:
    """The ``CUlibrary`` address held by a loaded ``Device<Algo>BuildResult``; KernelsNotLoaded with the
    reason if it cannot be read safely (another cuda-cccl, an unloaded result, a layout check failing)."""
    version = _cccl_version()
    if version not in VERIFIED_CCCL_VERSIONS:
        raise KernelsNotLoaded(f"the library handle's place is known for cuda-cccl "
                               f"{', '.join(VERIFIED_CCCL_VERSIONS)}, not {version}")
    cls = type(build_result)
    # cuda-cccl 1.2.1 names the module "compute._bindings_impl"; the Cython class is what matters
    if "_bindings" not in cls.__module__ or not cls.__name__.startswith("Device") \
            or not hasattr(build_result, "_get_cubin"):
        raise KernelsNotLoaded(f"{cls.__module__}.{cls.__name__} is not a cuda.compute build result")
    if not getattr(build_result, "_loaded", False):
        raise KernelsNotLoaded(f"{cls.__name__} is not loaded")
    size = cls.__basicsize__
    if size < LIBRARY_OFFSET + _WORD:
        raise KernelsNotLoaded(f"{cls.__name__} is {size} bytes, too small for the known layout")
    raw = ctypes.string_at(id(build_result), size)  # the object's own memory, nothing beyond it

    def word(offset: int) -> int:
        return int.from_bytes(raw[offset:offset + _WORD], sys.byteorder)

    cubin_size = len(build_result._get_cubin())
    if word(PAYLOAD_SIZE_OFFSET) != cubin_size:
        raise KernelsNotLoaded(f"{cls.__name__}: layout check failed (payload size at offset "
                               f"{PAYLOAD_SIZE_OFFSET} is not the cubin's {cubin_size} bytes)")
    library = word(LIBRARY_OFFSET)
    if library == 0:
        raise KernelsNotLoaded(f"{cls.__name__}: the library handle is NULL")
    return library


def _go_on() -> None:
    pass


def load_library_kernels(library: int, between: Callable[[], None] = _go_on) -> int:
    """``cuKernelGetFunction`` on every kernel of ``library`` (current context); returns their count.
    ``between`` runs before each kernel: a warmup worker pauses there while a caller loads its own spec
    (each load holds the driver a few milliseconds: H100, 3-20 ms). Plain driver calls (ctypes, as
    :mod:`aot.runtime.loader.library`): each releases the GIL, and none goes through cuda.bindings' wrappers."""
    from ..loader.cuctx import driver, driver_gil, error_name
    lib, lookup = driver(), driver_gil()  # lookups keep the GIL; loads release it
    if lib is None or lookup is None:
        raise KernelsNotLoaded("no NVIDIA driver")

    def check(err: int, what: str) -> None:
        if err:
            raise KernelsNotLoaded(f"{what} failed: {error_name(lib, err)}")

    handle, n = ctypes.c_void_p(library), ctypes.c_uint(0)
    check(lookup.cuLibraryGetKernelCount(ctypes.byref(n), handle), "cuLibraryGetKernelCount")
    kernels = (ctypes.c_void_p * n.value)()
    check(lookup.cuLibraryEnumerateKernels(kernels, n, handle), "cuLibraryEnumerateKernels")
    f = ctypes.c_void_p(0)
    for k in kernels:
        between()
        check(lib.cuKernelGetFunction(ctypes.byref(f), ctypes.c_void_p(k)), "cuKernelGetFunction")
    return n.value


def warm_cccl(obj: Any, between: Callable[[], None] = _go_on) -> int:
    """Load every kernel of a cuda.compute object into the current device; returns how many."""
    return load_library_kernels(cccl_library_handle(build_result_of(obj)), between)


def warm_nvrtc(code: Any, kernel_names: Iterable[str], between: Callable[[], None] = _go_on) -> int:
    """Load the named kernels of a unit into the current device; returns how many. ``code``: the
    :class:`aot.runtime.loader.library.DriverLibrary` a packaged artifact loaded into (plain driver calls), or the
    ``cuda.core.ObjectCode`` JIT or the user cache gave."""
    from ..loader.library import DriverLibrary
    if isinstance(code, DriverLibrary):
        return code.load_into_current(between)
    from cuda.bindings import driver
    n = 0
    for name in kernel_names:
        between()
        handle = int(code.get_kernel(name).handle)
        _check(driver.cuKernelGetFunction(driver.CUkernel(handle)), f"cuKernelGetFunction({name})")
        n += 1
    return n


def caller_device() -> int | None:
    """The device current in the calling thread, without importing CUDA's Python packages
    (:func:`aot.runtime.loader.cuctx.caller_context`): ``None`` when the driver library is not loaded in this
    process yet or no context is current (a warmup then uses device 0)."""
    from ..loader.cuctx import caller_context
    return caller_context()[0]
