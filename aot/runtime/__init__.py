"""The runtime: what an end user's process runs.

``registry`` (the manifest view, per-thread objects, single-flight loads, status), ``sources`` (finding,
checking and opening artifacts; the cache/JIT fallback), ``warmup`` (the background warm pool) and
``warm`` (kernel preloading), ``objects`` (what the loader hands out), ``default`` (aot's own registry),
``driver``, the lean toolchain (stand-ins for NVRTC/nvJitLink), the per-user cache and the JIT fallback.
Imports the core only; the JIT fallback alone reaches up to :mod:`aot.build.compile`, lazily.
"""
