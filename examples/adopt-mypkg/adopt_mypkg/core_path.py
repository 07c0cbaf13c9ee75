"""adopt-mypkg's second compile path: cuda.core's ``Program``, with aot's program cache as ``cache=``.
The packaged cubin is the cache hit; a miss compiles with NVRTC and is kept in aot's user cache."""

import aot
from cuda.core import Program, ProgramOptions

_KERNELS: dict = {}


def kernel(source: str, name: str):
    """The ``cuda.core.Kernel`` ``name`` of ``source``, for the current device (its arch: cuda.core's default)."""
    found = _KERNELS.get((source, name))
    if found is None:
        opts = ProgramOptions(std="c++17", define_macro="BLOCK=256")
        code = Program(source, "c++", opts).compile("cubin", cache=aot.program_cache("adopt_mypkg"))
        found = _KERNELS[(source, name)] = code.get_kernel(name)
    return found
