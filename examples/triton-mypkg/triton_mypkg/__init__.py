"""A downstream GPU library whose kernels are Triton ``@triton.jit`` functions (triton_mypkg/kernels.py), shipped
ahead of time by aot's hatchling hook. The library launches them as always (``kernels.add[grid](...)``, see
triton_mypkg/ops.py); ``Registry.from_package`` puts the packaged cubins behind Triton's cache lookup, so a launch
with a packaged specialisation compiles nothing.
"""

import os

import aot

from . import kernels  # noqa: F401  (the kernels whose launches the packaged cubins serve)

# The artifacts are absent only while aot builds them (it imports triton_mypkg.kernels to compile them).
if os.path.isfile(os.path.join(os.path.dirname(__file__), "artifacts", "manifest.json")):
    registry = aot.Registry.from_package(__name__)  # serves the packaged Triton kernels at their launch
