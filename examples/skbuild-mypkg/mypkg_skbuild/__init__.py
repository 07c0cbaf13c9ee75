"""A downstream GPU library that ships its own AOT kernels (built through aot's CMake module)."""

import aot

registry = aot.Registry.from_package(__name__)
