"""aot: ahead-of-time builds of cuda.compute algorithms and NVRTC kernels, and the loader that uses them.

``import aot`` imports no CUDA library (measured in tests): the loader pulls cuda.compute / cuda.core in
only when a kernel is first requested.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
