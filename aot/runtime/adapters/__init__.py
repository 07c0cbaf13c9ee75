"""The adapters: packaged kernels served at a library's own call, through the interface its ecosystem already
has, one module per interface.

:mod:`.program_cache` (cuda.core's ``ProgramCacheResource``, keyed by :mod:`.progkey`), :mod:`.bysource` (a
lookup by NVRTC source), :mod:`.numba_attach` (numba-cuda's dispatchers, checked by :mod:`.numba_digest`),
:mod:`.cupy_attach` (CuPy's compile-with-cache path), :mod:`.handles` (``CUfunction`` and CuPy handles). Each
stands on the loader; the loader reaches one only when a package ships its kind of kernel.
"""
