"""The NVIDIA driver, asked safely: is a real one there, which device is current, what CUDA it supports.

One rule runs through it: never call into a missing driver (after one failed call ``cuda.bindings``
can hang the next one), and never take aot's stand-in ``libcuda.so.1`` (a build-only link target,
marked by :data:`STUB_MARKER`) for a driver.

Cheap to import (the registry's front constructs a :class:`ServedDevice`): ctypes is imported where used.
"""

from __future__ import annotations

from typing import Any, Mapping

from ...core.errors import ArtifactError, NoDeviceError

#: A symbol only aot's stand-in libcuda exports.
STUB_MARKER = "aot_libcuda_stub"


def real_driver_present() -> bool:
    """True when the system loader finds a libcuda.so.1 that is not our stand-in."""
    import ctypes
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return not hasattr(lib, STUB_MARKER)


def require_driver(what: str) -> None:
    """Refuse, before any call into libcuda, when no real NVIDIA driver is loadable.

    Calling ``cuda.bindings.driver`` without a driver is not merely an error: the first failed call
    (``SystemError`` from its lazy loader) leaves a lock of the bindings held, and the next driver call
    in the process waits on it forever (seen with ``Registry(dir, device_sm=80).kernel(...)`` on a
    driverless host). The stand-in libcuda is no driver either: it only makes builds link.
    """
    if not real_driver_present():
        raise NoDeviceError(f"{what} needs an NVIDIA driver and none is installed (no libcuda.so.1)")


def driver_cuda_version() -> tuple[int, int]:
    """(major, minor) CUDA version the installed driver supports; :class:`NoDeviceError` without one."""
    require_driver("asking the driver's CUDA version")
    try:
        from cuda.bindings import driver
        err, v = driver.cuDriverGetVersion()
    except Exception as e:  # noqa: BLE001 - a broken driver install: no usable device, never a crash
        raise NoDeviceError(f"cannot ask the NVIDIA driver for its version: {type(e).__name__}: {e}") from None
    if err != driver.CUresult.CUDA_SUCCESS:
        raise NoDeviceError(f"cuDriverGetVersion failed: {err}")
    return v // 1000, (v % 1000) // 10


def check_ptx_loadable(producer: Mapping[str, Any]) -> None:
    """PTX only JIT-compiles on a driver at least as new as the NVRTC that wrote it."""
    try:
        need = tuple(int(x) for x in str(producer.get("nvrtc")).split(".")[:2])
    except ValueError:
        raise ArtifactError(f"unreadable producer NVRTC version {producer.get('nvrtc')!r}") from None
    have = driver_cuda_version()
    if have < need:
        raise ArtifactError(f"PTX from NVRTC {need[0]}.{need[1]} needs a driver for CUDA >= that; "
                            f"this driver supports CUDA {have[0]}.{have[1]}")


def native_sm() -> int | None:
    """SM of GPU 0 through the real driver, or ``None`` when there is no driver or no device."""
    if not real_driver_present():
        return None
    try:
        from cuda.bindings import driver
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        err, dev = driver.cuDeviceGet(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        A = driver.CUdevice_attribute
        err, major = driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        err2, minor = driver.cuDeviceGetAttribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        if err != driver.CUresult.CUDA_SUCCESS or err2 != driver.CUresult.CUDA_SUCCESS:
            return None
        return 10 * major + minor
    except Exception:
        return None


def current_device_sm() -> int:
    """SM of the current CUDA device (device 0 unless the caller made another current)."""
    try:  # never call into a missing driver: after one failed call, the next can hang
        require_driver("a CUDA device")
    except NoDeviceError as e:
        raise NoDeviceError(f"no usable CUDA device: {e}") from None
    try:
        from cuda.core import Device
        dev = Device()
        dev.set_current()
        major, minor = dev.compute_capability
    except Exception as e:  # noqa: BLE001 - any driver failure means "no usable device"
        raise NoDeviceError(f"no usable CUDA device: {e}") from None
    return 10 * major + minor


class ServedDevice:
    """The device a registry serves: its SM (the caller's ``device_sm``, else the current device's, found
    on first use or published by the warmup's device thread: :meth:`found`), that device's id once found,
    and ``preferred``: the device current in the thread that asked for a warmup (warmup threads without
    an opened context make it current before they look the device up)."""

    def __init__(self, sm: int | None):
        self._sm = sm
        self.id: int | None = None      # the device served (warmup threads make it current)
        self.preferred: int | None = None
        self.opening: Any = None  # the warmup's aot.runtime.loader.cuctx.Opening of this device, once one started

    @property
    def known(self) -> bool:
        return self._sm is not None

    def sm(self) -> int:
        if self._sm is None:
            self._sm = current_device_sm()
            try:
                from cuda.core import Device
                self.id = Device().device_id
            except Exception:  # noqa: BLE001 - an explicit device_sm (tests) needs no device
                pass
        return self._sm

    def found(self, device: int, sm: int) -> None:
        """The warmup opened ``device`` (SM ``sm``) through the driver: the device served, unless the
        registry already knows its SM (the caller's ``device_sm``) or its device."""
        if self.id is None:
            self.id = device
        if self._sm is None:
            self._sm = sm

    def make_current(self) -> None:
        """In a warmup thread: make the served device current (the preferred one before it is known)."""
        if self.preferred is not None and self._sm is None:
            from cuda.core import Device
            Device(self.preferred).set_current()  # before sm(): it asks the current device
        self.sm()
        if self.id is not None:
            from cuda.core import Device
            Device(self.id).set_current()
