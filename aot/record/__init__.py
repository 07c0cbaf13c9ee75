"""``aot record``: run a user's command under a hook and write the matrix of what it compiled.

A room of its own beside the build, one layer above it (it turns CuPy's records into entries with the build's
:mod:`aot.build.cupy_build`; the verify layer reads its launch store's format). Two kinds of module live here:
the recorder, imported as part of aot (:mod:`~aot.record.record` the command, :mod:`~aot.record.run` the
recorded process and its private ``sitecustomize``, :mod:`~aot.record.cccl` naming cuda.compute calls as specs,
:mod:`~aot.record.launch_store` writing the kept launches), and the hook, stdlib-only files loaded by path inside
the recorded process where ``import aot`` is not allowed (:mod:`~aot.record.hook` with one module per family:
:mod:`~aot.record.hook_cccl`, :mod:`~aot.record.hook_numba`, :mod:`~aot.record.hook_cupy`,
:mod:`~aot.record.launches`; :mod:`~aot.record.rerender` checks rendered sources again in a process of its own).
"""
