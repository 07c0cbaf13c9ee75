"""adopt-mypkg's compile function BEFORE it adopted aot (kept for docs/adopt.md and its diff test; not
packaged): NVRTC through raw cuda.bindings, one module per source, keyed by the source's sha1."""

import hashlib

from cuda.bindings import driver, nvrtc

from .kernels import OPTIONS

_PREFIX = "adopt_mypkg"
_FUNCTIONS: dict = {}


def _check(result):
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA call failed: {err!r}")
    return rest[0] if len(rest) == 1 else tuple(rest)


def _nvrtc_cubin(source: str, options) -> bytes:
    """One NVRTC compile for the current device's SM."""
    dev = _check(driver.cuCtxGetDevice())
    attr = driver.CUdevice_attribute
    major = _check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
    minor = _check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), b"kernels.cu", 0, [], []))
    try:
        flags = [f"-arch=sm_{major}{minor}".encode(), *(o.encode() for o in options)]
        _check(nvrtc.nvrtcCompileProgram(prog, len(flags), flags))
        size = _check(nvrtc.nvrtcGetCUBINSize(prog))
        buf = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, buf))
        return buf
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def compile_kernels(source: str, kernel_names, options=OPTIONS) -> dict:
    """``{name: CUfunction}`` of ``source``'s kernels in the current context (compiled once per source)."""
    key = f"{_PREFIX}-{hashlib.sha1(source.encode()).hexdigest()}"
    funcs = _FUNCTIONS.get(key)
    if funcs is None:
        module = _check(driver.cuModuleLoadData(_nvrtc_cubin(source, options)))
        funcs = {name: _check(driver.cuModuleGetFunction(module, name.encode())) for name in kernel_names}
        _FUNCTIONS[key] = funcs
    return funcs
