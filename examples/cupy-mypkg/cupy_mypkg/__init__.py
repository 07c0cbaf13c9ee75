"""A downstream GPU library written with CuPy (cupy_mypkg/ops.py): ufuncs, reductions (``sum``, ``cumsum``,
``argmax``, with CuPy's CUB accelerator as CuPy sets it), an ``ElementwiseKernel`` and a ``ReductionKernel`` of its
own. Every one of them makes CuPy compile a kernel with NVRTC the first time a new user calls it (seconds, per
dtype). aot ships those kernels: ``Registry.from_package`` serves them at CuPy's own compile call, so a packaged
call compiles nothing; any other compiles as CuPy does today.
"""

import os

import aot

from . import ops  # noqa: F401  (the library's public functions)

# The wheel carries the artifacts (the aot hatch hook builds build_matrix.yaml); the source tree has none and
# serves nothing: CuPy compiles as without aot (docs/cupy.md).
if os.path.isfile(os.path.join(os.path.dirname(__file__), "artifacts", "manifest.json")):
    registry = aot.Registry.from_package(__name__)  # serves the packaged CuPy kernels at CuPy's compile call
