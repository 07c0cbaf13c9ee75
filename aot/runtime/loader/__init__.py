"""The loader: what "a tiny runtime" means, and the smallest room of the runtime.

What ``import aot``, ``Registry.from_package`` and loading a packaged artifact need, and nothing else:
:mod:`.registry` (the manifest view, per-thread objects, single-flight loads, status), :mod:`.catalog`
(manifest and specs), :mod:`.sources` (finding, checking and opening artifacts), :mod:`.library` and
:mod:`.driver` (the CUDA driver, through ctypes: :mod:`.cuctx`), :mod:`.objects` and :mod:`.binder` (what the
loader hands out, and the call-time binder of a spec with state), :mod:`.lean` and :mod:`.stand_ins`
(``import cuda.compute`` without the CUDA toolkit; :mod:`.import_hook` does it for whoever imports it first),
:mod:`.threads` (aot's background threads and the one CUDA import thread), :mod:`.default` and
:mod:`.default_specs` (aot's own registry), :mod:`.firsthit` (a library's first packaged NVRTC hit from the set's
``hit-index.json``, without the manifest).

It imports the warmup, the adapters and the JIT only inside functions, on the path that needs them
(``tests/test_layers.py``): a process that loads packaged artifacts never imports them.
"""
