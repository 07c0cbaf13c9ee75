"""The runtime: what an end user's process runs. The registry (manifest view, per-thread objects,
warmup), the lean toolchain (stand-ins for NVRTC/nvJitLink), the per-user cache and the JIT fallback.
Imports the core only; the JIT fallback alone reaches up to :mod:`aot.build.compile`, lazily.
"""
