"""adopt-mypkg's compile function, after adopting aot (docs/adopt.md shows the diff against
``before/_compile.py``): the packaged cubin of each source for this GPU, found by its text and flags;
a source the wheel does not carry is compiled once per user (aot's user cache), not once per process."""

import hashlib

import aot

from .kernels import OPTIONS

_PREFIX = "adopt_mypkg"
_FUNCTIONS: dict = {}
_KERNELS = aot.by_source("adopt_mypkg")  # reads nothing until the first call


def compile_kernels(source: str, kernel_names, options=OPTIONS) -> dict:
    """``{name: CUfunction}`` of ``source``'s kernels in the current context (compiled once per source)."""
    key = f"{_PREFIX}-{hashlib.sha1(source.encode()).hexdigest()}"
    funcs = _FUNCTIONS.get(key)
    if funcs is None:
        funcs = _KERNELS.cufunctions(source, kernel_names, options)
        _FUNCTIONS[key] = funcs
    return funcs
