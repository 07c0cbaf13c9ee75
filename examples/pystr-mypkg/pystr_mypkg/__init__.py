"""A downstream GPU library whose NVRTC kernels are Python strings (pystr_mypkg/kernels.py), shipped ahead
of time by aot's hatchling hook and launched through the handle each caller prefers:

    registry.kernel("saxpy", "saxpy")               # cuda.core.Kernel
    aot.cufunction("saxpy", "saxpy", registry)      # CUfunction for cuLaunchKernel (current context)
    aot.cupy_kernel("saxpy", "saxpy", registry)     # cupy.RawKernel from the packaged cubin
"""

import aot


def __getattr__(name: str):
    # The registry is made on first use: `aot build` imports pystr_mypkg.kernels (the matrix names its
    # strings) while the artifacts are being built, when there is nothing to find yet.
    if name == "registry":
        global registry
        registry = aot.Registry.from_package(__name__)
        return registry
    raise AttributeError(name)
