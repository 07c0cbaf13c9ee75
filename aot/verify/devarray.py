"""A minimal device array for verification: cuda.core memory exposed through ``__cuda_array_interface__``.

``aot`` depends on no array library; GPU verification only needs to allocate, poison, copy in, copy
out, and hand pointers to cuda.compute (via the CUDA array interface) and to kernels (as Buffers).
"""

from __future__ import annotations

import numpy as np

POISON = 0xA5


class DeviceArray:
    def __init__(self, shape: int, dtype, device, *, poison: bool = True):
        self.dtype = np.dtype(dtype)
        self.shape = (int(shape),)
        self.nbytes = max(1, self.shape[0] * self.dtype.itemsize)
        self.buffer = device.allocate(self.nbytes, stream=device.default_stream)
        self.ptr = int(self.buffer.handle)
        if poison:
            from cuda.bindings import driver
            _check(driver.cuMemsetD8(self.ptr, POISON, self.nbytes))

    @classmethod
    def from_host(cls, host: np.ndarray, device) -> "DeviceArray":
        host = np.ascontiguousarray(host)
        arr = cls(host.shape[0], host.dtype, device, poison=False)
        if host.nbytes:
            from cuda.bindings import driver
            _check(driver.cuMemcpyHtoD(arr.ptr, host.ctypes.data, host.nbytes))
        return arr

    def to_host(self) -> np.ndarray:
        from cuda.bindings import driver
        out = np.empty(self.shape, self.dtype)
        _check(driver.cuCtxSynchronize())
        if out.nbytes:
            _check(driver.cuMemcpyDtoH(out.ctypes.data, self.ptr, out.nbytes))
        return out

    @property
    def __cuda_array_interface__(self):
        cai = {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
               "strides": None}
        if self.dtype.names:  # a struct: its fields, so consumers see more than opaque bytes
            cai["descr"] = self.dtype.descr
        return cai

    def close(self) -> None:
        self.buffer.close()


def _check(result) -> None:
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise RuntimeError(f"CUDA driver call failed: {err}")
