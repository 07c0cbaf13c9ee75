"""aot: ahead-of-time builds of cuda.compute algorithms and NVRTC kernels, and the loader that uses them.

``import aot`` imports no CUDA library (measured in tests): the loader pulls cuda.compute / cuda.core in
only when a kernel is first requested. Nor does it import :mod:`logging`: the library logger
``logging.getLogger("aot")`` (debug records of every source decision, see :mod:`aot.core.log`) gets its
``NullHandler`` when the loader or the build is first imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .core.errors import (AotError, AotWarning, ArtifactError, BuildError, BusyError, CallError, JitForbiddenError,
                          MatrixError, NoDeviceError, ToolchainError, UsageError, VerificationError)

if TYPE_CHECKING:  # names for annotations only: importing the loader here would slow `import aot`
    from collections.abc import Iterable

    from .runtime.loader.objects import CcclAlgorithm, SpecStatus

from .core.version import __version__
from .runtime.loader import import_hook as _import_hook  # noqa: F401 - a lean `import cuda.compute` works after aot

import os as _os

# AOT_NO_JIT (declared in aot.core.env, which parses it): read here directly so that `import aot` imports nothing
# more without it; with it, the compile entry points are watched from now on (aot/runtime/adapters/nojit.py).
if _os.environ.get("AOT_NO_JIT", "").strip().lower() not in ("", "0", "off", "false", "no"):
    from .runtime.adapters.nojit import from_env as _no_jit_from_env
    _no_jit_from_env()

__all__ = ["__version__", "Registry", "AotWarning", "cccl", "kernel", "request_warmup", "ensure_warm",
           "status", "default_registry",
           # other handles on an NVRTC kernel (aot.runtime.adapters.handles, imported when first used)
           "cufunction", "cupy_module", "cupy_kernel",
           # a library's own compile call: cuda.core's cache= keyword, or a lookup by source (issue 28)
           "program_cache", "by_source",
           # numba-cuda kernels served through their own dispatchers (aot.runtime.adapters.numba_attach)
           "attach_numba",
           # no JIT after startup, provable at run time (aot.runtime.adapters.nojit; AOT_NO_JIT)
           "no_jit", "jit_report",
           # the error catalogue (aot.errors, stdlib only): each carries the CLI's exit code
           "AotError", "ArtifactError", "BuildError", "BusyError", "CallError", "JitForbiddenError", "MatrixError",
           "NoDeviceError", "ToolchainError", "UsageError", "VerificationError"]

_LAZY = {"Registry": "runtime.loader.registry", "default_registry": "runtime.loader.default",
         "cufunction": "runtime.adapters.handles", "cupy_module": "runtime.adapters.handles",
         "cupy_kernel": "runtime.adapters.handles",
         "program_cache": "runtime.adapters.program_cache", "by_source": "runtime.adapters.bysource",
         "attach_numba": "runtime.adapters.numba_attach", "no_jit": "runtime.adapters.nojit",
         "jit_report": "runtime.adapters.nojit"}


def __getattr__(name: str):
    """Lazy re-exports: importing the loader (and, later, CUDA) only when first used. ``program_cache`` exists
    only where the installed cuda-core has the interface it implements (``ProgramCacheResource``, 1.0+)."""
    if name == "program_cache":
        from .core.versions import cuda_core_missing
        missing = cuda_core_missing("program_cache")
        if missing:
            raise AttributeError(f"{missing}; aot.by_source(...) looks packaged units up without it")
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(name)


def cccl(name: str) -> "CcclAlgorithm":
    """The default registry's cuda.compute algorithm ``name`` for the current device (per thread)."""
    from .runtime.loader.default import default_registry
    return default_registry().cccl(name)


def kernel(unit: str, kernel_name: str):
    """The default registry's ``cuda.core.Kernel`` ``kernel_name`` of NVRTC unit ``unit``."""
    from .runtime.loader.default import default_registry
    return default_registry().kernel(unit, kernel_name)


def request_warmup(names: "Iterable[str] | None" = None) -> None:
    """Start loading ``names`` (default: every spec) and all their kernels into the current device, in
    background threads; returns within a millisecond or so (the default registry reads its manifest and
    specs in the background too; an unknown name is then raised by :func:`ensure_warm`)."""
    from .runtime.loader.default import default_registry
    default_registry().request_warmup(names)


def ensure_warm(timeout: float | None = None) -> list[str]:
    """Wait for requested warmups; returns the names still cold after ``timeout`` seconds."""
    from .runtime.loader.default import default_registry
    return default_registry().ensure_warm(timeout)


def status() -> "dict[str, SpecStatus]":
    """Per spec: the source used (packaged / cache / jit), SM, milliseconds, errors."""
    from .runtime.loader.default import default_registry
    return default_registry().status()
