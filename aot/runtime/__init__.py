"""The runtime: what an end user's process runs, in four rooms.

* :mod:`aot.runtime.loader`: the tiny runtime. ``import aot``, ``Registry.from_package`` and loading a
  packaged artifact import this room alone (``tests/test_layers.py`` measures it): the registry, its catalog
  and sources, the driver and the library loaded through it, the lean ``import cuda.compute``, the threads.
* :mod:`aot.runtime.warmup`: the background warm pool and what "warm" means (every kernel in the device).
* :mod:`aot.runtime.adapters`: serving at a library's own call (cuda.core's program cache, a lookup by
  source, numba-cuda's dispatchers, CuPy's compile, driver and CuPy handles).
* :mod:`aot.runtime.jit`: the JIT fallback and its per-user caches.

The loader imports the other rooms only inside functions, on the paths that need them. The runtime imports the
core only; the JIT fallback alone reaches up to :mod:`aot.build.compile`, lazily.
"""
