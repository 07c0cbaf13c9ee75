"""An NVRTC unit's image loaded through the CUDA driver itself, with no CUDA Python package imported.

Why: a library's inventory is mostly NVRTC units (issue 29: 183 of 218 specs), and a cubin needs nothing
of ``cuda.core`` or ``cuda.compute`` to load: ``cuLibraryLoadData`` registers it, ``cuLibraryGetKernel``
resolves each kernel (context-independent ``CUkernel`` handles), ``cuKernelGetFunction`` loads one into
the current context. So the warmup loads units from the moment the context exists, while ``cuda.compute``
still imports, and the handles callers ask for are made from the loaded library when first asked:
``cuda.core.Kernel`` (:meth:`DriverLibrary.get_kernel`, ``Kernel.from_handle``), ``CUfunction``
(:func:`aot.cufunction`) and CuPy modules (:func:`aot.cupy_module`, from :attr:`DriverLibrary.code`).

Calls go through ctypes (:func:`aot.runtime.loader.cuctx.driver`), as the warmup's context does, and no thread
imports ``cuda.bindings`` beside the one importing ``cuda.core`` (two threads importing one package can
hand one a half-initialised module). The rule of :mod:`aot.runtime.loader.driver` holds: never a call into a
missing driver nor into aot's stand-in libcuda.

The GIL: a unit's cubin is small and its driver calls are short (issue 29, H100: 180 units, 553
kernels, 22 ms of driver time in all, about 20 us a call). A call that releases the GIL costs its
thread up to the switch interval (5 ms) to get it back behind a thread importing ``cuda.compute``, so
a unit at ``cuLibraryLoadData`` + one ``cuKernelGetFunction`` per kernel took about 1.4 ms of wall time.
A cubin up to :attr:`aot.runtime.loader.threads.Tuning.gil_held_below` bytes is therefore loaded, and its
kernels loaded into the context, with the GIL kept (:func:`aot.runtime.loader.cuctx.driver_gil`): the import
waits for those microseconds instead. PTX (the driver compiles it) and larger cubins release it.
``cuInit`` is called once per process, not per unit.

A :class:`DriverLibrary` quacks like the ``cuda.core.ObjectCode`` it replaces (``get_kernel``, ``code``,
``code_type``, ``symbol_mapping``, ``name``): the JIT fallback still hands out a real ``ObjectCode``, and
callers never need to tell them apart. Libraries are never unloaded (the registry keeps what it served
for the life of the process), so the non-owning ``Kernel`` handles stay valid.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Iterable, Mapping

from ...core.errors import AotError, ArtifactError, NoDeviceError
from ...core.versions import cuda_core_missing
from . import cuctx, threads

_P, _U = ctypes.c_void_p, ctypes.c_uint


def _go_on() -> None:
    pass


#: ``cuInit`` succeeded in this process (it is idempotent; each call is one more GIL hand-over).
_initialised: list[bool] = []


def _lib() -> Any:
    lib = cuctx.driver()
    if lib is None:
        raise NoDeviceError("no NVIDIA driver (no libcuda.so.1, or aot's build-time stand-in)")
    return lib


def _init(lib: Any) -> None:
    """``cuInit(0)``, once per process once it succeeded."""
    if not _initialised:
        check(lib, lib.cuInit(0), "cuInit", NoDeviceError)
        _initialised.append(True)


def check(lib: Any, err: int, what: str, error: type[Exception] = ArtifactError) -> None:
    """Raise ``error`` naming the driver's error unless ``err`` is CUDA_SUCCESS."""
    if err:
        raise error(f"{what} failed: {cuctx.error_name(lib, err)}")


class DriverLibrary:
    """One unit's image (``kind``: ``"cubin"``, or ``"ptx"``, which the driver JIT-compiles) loaded with
    ``cuLibraryLoadData``, and ``kernels`` (names or name expressions) resolved to ``CUkernel`` handles,
    every one of them now: a bad image or a missing kernel fails here, where the loader can still fall
    back. ``symbols``: name expression -> lowered name (a templated unit's header field)."""

    __slots__ = ("name", "code", "code_type", "symbol_mapping", "handle", "_kernels", "_wrapped", "_lock", "_loads")

    def __init__(self, name: str, image: bytes, kind: str, kernels: Iterable[str],
                 symbols: Mapping[str, bytes] | None = None):
        lib = _lib()
        _init(lib)
        self.name, self.code, self.code_type = name, image, kind
        self.symbol_mapping = dict(symbols or {})
        lookup = cuctx.driver_gil() or lib  # a name lookup: keep the GIL (cuctx.driver_gil)
        small = kind == "cubin" and len(image) < threads.TUNING.gil_held_below
        self._loads = lookup if small else lib  # a small cubin's loads keep the GIL too (module docstring)
        buf = image + b"\0" if kind == "ptx" else image  # PTX is read as a NUL-terminated string
        handle = _P(0)
        check(lib, self._loads.cuLibraryLoadData(ctypes.byref(handle), buf, None, None, _U(0), None, None, _U(0)),
              f"cuLibraryLoadData({name})")
        self.handle: int = handle.value or 0
        self._kernels: dict[str, int] = {}
        for k in kernels:
            lowered = self.symbol_mapping.get(k) or k.encode()
            kh = _P(0)
            check(lib, lookup.cuLibraryGetKernel(ctypes.byref(kh), _P(self.handle), lowered),
                  f"cuLibraryGetKernel({name}/{k})")
            self._kernels[k] = kh.value or 0
        self._wrapped: dict[str, Any] = {}
        self._lock = threading.Lock()

    def kernel_handle(self, kernel_name: str) -> int:
        """The ``CUkernel`` of ``kernel_name`` (an address); KeyError for a kernel the unit does not list."""
        return self._kernels[kernel_name]

    def get_kernel(self, kernel_name: str) -> Any:
        """A ``cuda.core.Kernel`` over the loaded kernel, made on first ask (``Kernel.from_handle``; cuda.core
        is imported here, in the caller's thread, the first time), then the same object."""
        k = self._wrapped.get(kernel_name)
        if k is None:
            handle = self.kernel_handle(kernel_name)
            threads.IMPORTS.settle()  # a warmup's thread may be importing cuda.core right now
            from cuda.core import Kernel  # the first handle asked for imports cuda.core, not the load
            missing = cuda_core_missing("kernel")  # cuda-core < 0.6: the unit loads, this handle does not
            if missing:
                raise AotError(f"{self.name}/{kernel_name}: {missing}; aot.cufunction(...) gives a CUfunction")
            with self._lock:
                k = self._wrapped.get(kernel_name)
                if k is None:
                    k = self._wrapped[kernel_name] = Kernel.from_handle(handle)
        return k

    def load_into_current(self, between: Callable[[], None] = _go_on) -> int:
        """``cuKernelGetFunction`` on every kernel (into the context current in this thread): each kernel
        loaded now, not at its first launch; returns how many. ``between`` runs before each (a warmup
        worker pauses there while a caller is served)."""
        lib, loads = _lib(), self._loads
        f = _P(0)
        for k, h in self._kernels.items():
            between()
            check(lib, loads.cuKernelGetFunction(ctypes.byref(f), _P(h)), f"cuKernelGetFunction({self.name}/{k})")
        return len(self._kernels)

    def __repr__(self) -> str:
        return f"<aot DriverLibrary {self.name} ({self.code_type}, {len(self._kernels)} kernels)>"
