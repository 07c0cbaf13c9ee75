"""A downstream GPU library whose kernels are numba-cuda ``@cuda.jit`` functions (numba_mypkg/kernels.py), shipped
ahead of time by aot's hatchling hook. The library launches them as always (``kernels.axpy[grid, block](...)``);
``Registry.from_package`` hands the packaged cubins to those dispatchers, so nothing compiles for a packaged
signature.
"""

import os

import aot

from . import kernels  # noqa: F401  (the dispatchers the packaged overloads are attached to)

# The artifacts are absent only while aot builds them (it imports numba_mypkg.kernels to compile them).
if os.path.isfile(os.path.join(os.path.dirname(__file__), "artifacts", "manifest.json")):
    registry = aot.Registry.from_package(__name__)  # attaches the packaged numba kernels
