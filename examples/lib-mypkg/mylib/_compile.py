"""The one compile function every kernel of mylib goes through (as in the library this example copies):
NVRTC through ``cuda.bindings.nvrtc``, keyed by the sha1 of the source, loaded with ``cuModuleLoadData``."""

from __future__ import annotations

import hashlib
import threading

from cuda.bindings import nvrtc

#: Flags every unit is compiled with (the library's own spelling); a module may add its own.
DEFAULT_OPTIONS = ("-std=c++17",)

_lock = threading.Lock()
_cache: dict[str, object] = {}


class KernelSet:
    """A compiled unit: its cubin, and (on a GPU) its loaded module and ``CUfunction`` per kernel name."""

    def __init__(self, cubin: bytes, functions: dict):
        self.cubin = cubin
        self.functions = functions

    def __getitem__(self, name: str):
        return self.functions[name]


def _check(result, what: str, prog=None):
    err, *rest = result
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = ""
        if prog is not None:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            buf = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, buf)
            log = buf.decode(errors="replace")
        raise RuntimeError(f"{what} failed: {err}\n{log}")
    return rest[0] if len(rest) == 1 else rest


def device_arch() -> str:
    """``sm_XY`` of the current device (the library compiles for the GPU it runs on)."""
    from cuda.core import Device
    major, minor = Device().compute_capability
    return f"sm_{major}{minor}"


def _nvrtc_cubin(source: str, arch: str, options: tuple[str, ...]) -> bytes:
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), b"mylib.cu", 0, [], []), "nvrtcCreateProgram")
    try:
        flags = [f"--gpu-architecture={arch}".encode(), *(o.encode() for o in options)]
        _check(nvrtc.nvrtcCompileProgram(prog, len(flags), flags), "nvrtcCompileProgram", prog)
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return cubin
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _load(cubin: bytes, kernel_names) -> dict:
    from cuda.bindings import driver
    from cuda.core import Device
    Device().set_current()
    err, module = driver.cuModuleLoadData(cubin)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuModuleLoadData failed: {err}")
    out = {}
    for name in kernel_names:
        err, fn = driver.cuModuleGetFunction(module, name.encode())
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuModuleGetFunction({name}) failed: {err}")
        out[name] = fn
    return out


def compile_kernels(source: str, kernel_names, *, options: tuple[str, ...] = DEFAULT_OPTIONS, arch: str | None = None,
                    load: bool = True) -> KernelSet:
    """Compile ``source`` once per process (key: ``mylib-<sha1(source)>`` with the options and target) and,
    with ``load``, load it on the current device. Without a GPU, pass ``arch`` and ``load=False``."""
    arch = arch or device_arch()
    key = f"mylib-{hashlib.sha1(source.encode()).hexdigest()}-{arch}-{' '.join(options)}-{load}"
    with _lock:
        hit = _cache.get(key)
        if hit is None:
            cubin = _nvrtc_cubin(source, arch, tuple(options))
            hit = _cache[key] = KernelSet(cubin, _load(cubin, kernel_names) if load else {})
    return hit


def launch(kernels: KernelSet, name: str, n: int, *args, block: int = 256) -> None:
    """Launch ``name`` over ``n`` threads: device arrays (``.data.ptr``) as pointers, Python floats as
    double, ints as long long (the kernels' parameter types), on the default stream."""
    import ctypes
    from cuda.bindings import driver
    values, types = [], []
    for a in args:
        if hasattr(a, "data") and hasattr(a.data, "ptr"):
            values.append(a.data.ptr)
            types.append(ctypes.c_void_p)
        elif isinstance(a, float):
            values.append(a)
            types.append(ctypes.c_double)
        else:
            values.append(int(a))
            types.append(ctypes.c_longlong)
    grid = max(1, (n + block - 1) // block)
    err, = driver.cuLaunchKernel(kernels[name], grid, 1, 1, block, 1, 1, 0, 0, (tuple(values), tuple(types)), 0)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuLaunchKernel({name}) failed: {err}")
    err, = driver.cuCtxSynchronize()
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{name} failed: {err}")
