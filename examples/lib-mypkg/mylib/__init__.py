"""mylib: a GPU geospatial library shaped like a real one (aot's example of building kernels where they
live). Importing it imports its heavy dataframe stack (``heavydep``) and ``cuda.compute``, as the real one
does; its NVRTC kernels are strings in ``mylib.kernels.*`` and ``mylib.io.parse_kernels``, all compiled by
:func:`mylib._compile.compile_kernels`."""

from __future__ import annotations

import heavydep  # noqa: F401 - the real library's dataframe API needs it at import
import cuda.compute  # noqa: F401 - its CCCL algorithms (mylib.algos)

from . import algos
from .io import parse_kernels
from .kernels import bounds, construct, distance, index, measure, predicates

__all__ = ["algos", "warmup"]

_MODULES = (distance, predicates, bounds, measure, index, construct, parse_kernels)


def warmup(**kw) -> list:
    """Compile every NVRTC kernel of the library (``arch=..., load=False`` without a GPU)."""
    return [k for m in _MODULES for k in m.compile_all(**kw)]
