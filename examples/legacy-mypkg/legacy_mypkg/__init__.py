"""A library pinning cuda-cccl[cu13]>=0.6,<0.7 (no ``serialize``): its cuda.compute calls (``algos``) are
answered from the wheel by aot's NVRTC/nvJitLink shims, its NVRTC kernel loaded from the wheel.

The registry is made at import, before the library's first ``import cuda.compute``: that is when the shims
must load (``Registry.from_package`` activates them from this package's manifest; aot's import hook does the
same for any import order)."""

import aot

registry = aot.Registry.from_package(__name__)
