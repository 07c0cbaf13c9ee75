"""The JIT: what runs where no packaged artifact fits. :mod:`.jit` compiles with the build's own recipe (the one
import up to :mod:`aot.build.compile`, inside a function) into the per-user caches (:mod:`.cache`; inspected and
cleared by :mod:`.cache_admin`).

The loader falls back to it inside a function, and only where the toolkit is installed: a runtime-only install
never imports this room.
"""
