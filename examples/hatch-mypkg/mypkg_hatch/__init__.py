"""A downstream GPU library that ships its own AOT kernels (built by aot's hatchling hook)."""

import aot

registry = aot.Registry.from_package(__name__)
