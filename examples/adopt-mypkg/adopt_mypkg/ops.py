"""adopt-mypkg's operations on numpy arrays: device copies, one ``cuLaunchKernel``, copies back. ``path``
picks the compile path: ``"nvrtc"`` (the library's own compile function) or ``"core"`` (cuda.core's Program
with aot's program cache); both launch the same way, through a ``CUfunction``."""

import numpy as np
from cuda.bindings import driver

from . import core_path, kernels
from ._compile import compile_kernels

_BLOCK = 256


def _check(result):
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA call failed: {err!r}")
    return rest[0] if len(rest) == 1 else tuple(rest) if rest else None


def context():
    """Make device 0's primary context current in this thread (what the library does before launching)."""
    _check(driver.cuInit(0))
    dev = _check(driver.cuDeviceGet(0))
    ctx = _check(driver.cuDevicePrimaryCtxRetain(dev))
    _check(driver.cuCtxSetCurrent(ctx))
    return ctx


def _function(source: str, name: str, path: str):
    if path == "nvrtc":
        return compile_kernels(source, [name])[name]
    return _check(driver.cuKernelGetFunction(core_path.kernel(source, name).handle))


def _launch(source: str, name: str, path: str, grid: int, args: list) -> None:
    """``args``: numpy scalars (by value) and device pointers (``driver.CUdeviceptr``)."""
    holders = [np.array([int(a)], dtype=np.uint64) if isinstance(a, driver.CUdeviceptr) else np.array([a])
               for a in args]
    params = np.array([h.ctypes.data for h in holders], dtype=np.uint64)
    f = _function(source, name, path)
    _check(driver.cuLaunchKernel(f, grid, 1, 1, _BLOCK, 1, 1, 0, 0, params.ctypes.data, 0))
    _check(driver.cuCtxSynchronize())


def _to_device(a: np.ndarray):
    ptr = _check(driver.cuMemAlloc(max(a.nbytes, 1)))
    _check(driver.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes))
    return ptr


def _to_host(ptr, like: np.ndarray) -> np.ndarray:
    out = np.empty_like(like)
    _check(driver.cuMemcpyDtoH(out.ctypes.data, ptr, out.nbytes))
    return out


def saxpy(a: float, x: np.ndarray, y: np.ndarray, path: str = "nvrtc") -> np.ndarray:
    n = x.size
    dx, dy = _to_device(x.astype(np.float32)), _to_device(y.astype(np.float32))
    try:
        _launch(kernels.SAXPY, "saxpy", path, (n + _BLOCK - 1) // _BLOCK, [np.float32(a), dx, dy, np.int32(n)])
        return _to_host(dy, y.astype(np.float32))
    finally:
        driver.cuMemFree(dx)
        driver.cuMemFree(dy)


def scale(a: float, x: np.ndarray, path: str = "nvrtc") -> np.ndarray:
    n = x.size
    dx, dy = _to_device(x), _to_device(np.zeros_like(x))
    try:
        _launch(kernels.scale_source(x.dtype.name), "scale", path, (n + _BLOCK - 1) // _BLOCK,
                [dx, dy, x.dtype.type(a), np.int32(n)])
        return _to_host(dy, x)
    finally:
        driver.cuMemFree(dx)
        driver.cuMemFree(dy)


def block_sums(x: np.ndarray, path: str = "nvrtc") -> np.ndarray:
    n = x.size
    blocks = (n + _BLOCK - 1) // _BLOCK
    dx, dout = _to_device(x.astype(np.int32)), _to_device(np.zeros(blocks, np.int64))
    try:
        _launch(kernels.BLOCK_SUM, "block_sum", path, blocks, [dx, dout, np.int32(n)])
        return _to_host(dout, np.zeros(blocks, np.int64))
    finally:
        driver.cuMemFree(dx)
        driver.cuMemFree(dout)
