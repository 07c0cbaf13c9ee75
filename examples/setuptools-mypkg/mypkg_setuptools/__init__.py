"""A downstream GPU library built with setuptools that ships its own AOT kernels (aot's setuptools backend)."""

import aot

registry = aot.Registry.from_package(__name__)
