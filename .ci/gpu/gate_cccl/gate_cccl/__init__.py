"""A library whose cuda.compute algorithms are served by aot (.ci/gpu/gate_all.sh's CCCL family)."""

import aot

registry = aot.Registry.from_package(__name__)
