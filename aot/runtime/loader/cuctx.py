"""The CUDA driver through its C API (ctypes), for the warmup: the caller's context, and the device and
context a warmup loads into, without importing any CUDA Python package.

Why ctypes: :func:`caller_context` runs in ``request_warmup``, in the caller's thread, where nothing CUDA
may be imported; and opening the device (``cuInit`` and the primary context: 200-300 ms on an H100)
should run beside the ``cuda.compute`` import, which is bound by the GIL: every ctypes foreign call
releases it. The rule of :mod:`aot.runtime.loader.driver` holds: never call into a missing driver nor into aot's
stand-in ``libcuda.so.1``.

The device: the one current in the thread that asked for the warmup, with that very context (a
non-primary one too), else device 0 and its primary context, retained for the life of the process (as
the CUDA runtime does). Never another device, never ``cuCtxCreate``. One :class:`Opening` per (device,
context) per process, in its own thread (``aot-warmup-context``); it publishes the device's SM before it
makes the context, so artifacts can be chosen and read meanwhile.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from ...core.errors import NoDeviceError
from . import threads
from .driver import STUB_MARKER

_ATTR_CC_MAJOR, _ATTR_CC_MINOR = 75, 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR

_lock = threading.Lock()
_driver: list[Any] = []  # [the CDLL or None], once looked up
_gil: list[Any] = []  # [the same library as a PyDLL], once made
_openings: dict[tuple[int, int | None], Opening] = {}


def driver() -> Any:
    """``libcuda.so.1`` (a ctypes CDLL), loaded once, or ``None`` when it is missing or aot's stand-in."""
    with _lock:
        if not _driver:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
            except OSError:
                lib = None
            _driver.append(None if lib is None or hasattr(lib, STUB_MARKER) else lib)
        return _driver[0]


def driver_gil() -> Any:
    """The same ``libcuda.so.1`` with calls that keep the GIL (``ctypes.PyDLL``), or ``None``: for lookups
    that return in microseconds (``cuLibraryGetKernel``, ``cuLibraryEnumerateKernels``), where handing the
    GIL back and waiting for it again (up to the switch interval, 5 ms, behind a thread importing
    cuda.compute) costs far more than the call. Never for a call that loads or waits."""
    lib = driver()
    if lib is None:
        return None
    with _lock:
        if not _gil:
            _gil.append(ctypes.PyDLL(lib._name, handle=lib._handle))
        return _gil[0]


def caller_context() -> tuple[int | None, int | None]:
    """(device, context handle) current in the calling thread, else ``(None, None)``. Loads nothing, initialises
    nothing: without a driver library in the process no context can be current (tens of microseconds)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_GLOBAL)
    except OSError:
        return None, None
    if hasattr(lib, STUB_MARKER):
        return None, None
    ctx, dev = ctypes.c_void_p(0), ctypes.c_int(-1)
    try:  # CUDA_ERROR_NOT_INITIALIZED / INVALID_CONTEXT: nothing current
        if lib.cuCtxGetCurrent(ctypes.byref(ctx)) != 0 or not ctx.value:
            return None, None
        if lib.cuCtxGetDevice(ctypes.byref(dev)) != 0 or dev.value < 0:
            return None, None
    except AttributeError:
        return None, None
    return dev.value, ctx.value


def error_name(lib: Any, err: int) -> str:
    """The driver's name of a ``CUresult`` (``CUDA_ERROR_INVALID_IMAGE``), else ``CUresult N``."""
    name = ctypes.c_char_p()
    try:
        lib.cuGetErrorName(err, ctypes.byref(name))
    except AttributeError:
        pass
    return name.value.decode(errors="replace") if name.value else f"CUresult {err}"


def _check(lib: Any, err: int, what: str) -> None:
    if err != 0:
        raise NoDeviceError(f"{what} failed: {error_name(lib, err)}")


def make_current(ctx: int) -> None:
    """Make ``ctx`` current in the calling thread (a warmup worker, once)."""
    lib = driver()
    if lib is None:
        raise NoDeviceError("no NVIDIA driver")
    _check(lib, lib.cuCtxSetCurrent(ctypes.c_void_p(ctx)), "cuCtxSetCurrent")


class Opening:
    """One device being opened in its own thread: ``cuInit``, the device's SM (published first), then
    the context (the caller's, else the device's primary context, retained). Any failure (no driver, no
    device, ``CUDA_VISIBLE_DEVICES=""``) is kept in ``error``; the warmup tasks then find the device as
    the loader always did, and say why not."""

    def __init__(self, device: int | None, ctx: int | None):
        self.device = 0 if device is None else device
        self.sm: int | None = None
        self.ctx = ctx
        self.error: BaseException | None = None
        self._sm_known = threading.Event()
        self._done = threading.Event()
        threads.spawn("aot-warmup-context", self._open)

    def _open(self) -> None:
        try:
            lib = driver()
            if lib is None:
                raise NoDeviceError("no NVIDIA driver (no libcuda.so.1, or aot's build-time stand-in)")
            _check(lib, lib.cuInit(0), "cuInit")
            dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
            _check(lib, lib.cuDeviceGet(ctypes.byref(dev), self.device), f"cuDeviceGet({self.device})")
            _check(lib, lib.cuDeviceGetAttribute(ctypes.byref(major), _ATTR_CC_MAJOR, dev), "cuDeviceGetAttribute")
            _check(lib, lib.cuDeviceGetAttribute(ctypes.byref(minor), _ATTR_CC_MINOR, dev), "cuDeviceGetAttribute")
            self.sm = 10 * major.value + minor.value
            threads.stamp("device_sm_known")
            self._sm_known.set()
            if self.ctx is None:
                handle = ctypes.c_void_p(0)
                _check(lib, lib.cuDevicePrimaryCtxRetain(ctypes.byref(handle), dev), "cuDevicePrimaryCtxRetain")
                self.ctx = handle.value
            threads.stamp("context_ready")
        except BaseException as e:  # noqa: BLE001 - kept for the warmup, which falls back
            self.error = e
        finally:
            self._sm_known.set()
            self._done.set()

    @property
    def settled(self) -> threading.Event:
        """Set once the context is made or opening failed (then ``error`` says why)."""
        return self._done

    def device_sm(self) -> tuple[int, int] | None:
        """(device, SM) once known (after ``cuInit`` and two attributes), ``None`` if that failed."""
        self._sm_known.wait()
        return None if self.sm is None else (self.device, self.sm)

    def context(self) -> int | None:
        """The context handle once made, ``None`` if opening failed."""
        self._done.wait()
        return None if self.error is not None else self.ctx


def opening(device: int | None, ctx: int | None) -> Opening:
    """The process's :class:`Opening` of ``device`` (with the caller's context ``ctx``), started on first ask."""
    key = (0 if device is None else device, ctx)
    with _lock:
        found = _openings.get(key)
        if found is None:
            found = _openings[key] = Opening(device, ctx)
        return found
