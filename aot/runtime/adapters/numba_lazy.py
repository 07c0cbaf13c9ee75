"""A package's numba-cuda kernels attached at numba-cuda's first compile, not at ``import`` (issue 42).

Attaching (:func:`aot.runtime.adapters.numba_attach.attach_numba`) reads and checks the manifest, imports the
kernels' modules, takes each kernel's digest (reading its source) and checks the numba-cuda release: tens of
milliseconds that ``import pkg`` paid even in a process that launches nothing. :func:`defer` records the registry
instead and puts one hook on numba-cuda's ``CUDADispatcher.compile``, the call every launch of a signature not
yet in memory makes before it asks the dispatcher's cache (``kernel[grid, block](args)``, ``specialize``,
``get_compile_result``, an eager ``@cuda.jit("sig")``): its first call, in any dispatcher, attaches every
deferred registry (manifest, modules, overload caches; no digest), then the compile goes on and finds the packaged
overloads in front. Each kernel's digest is taken by its packaged cache when numba-cuda first compiles that kernel
(:func:`numba_attach._maker`), before its packaged cubin is handed out: an edited kernel is refused (one warning,
numba-cuda's JIT) before its first launch, as before, and a first launch pays for its own kernel's digest, not for
every kernel's of the package. After that the
hook is one empty-list test per compile (never per launch: a compiled signature is served from the dispatcher's
overloads, in C).

Where numba-cuda's dispatcher module is not imported yet when the package builds its registry (its kernels are
imported later, lazily), the attach happens at once, as it did before: aot does not import numba for it.
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Any

from ...core.log import get_logger

__all__ = ["defer", "pending"]

log = get_logger("aot.runtime.numba")

_DISPATCHER = "numba.cuda.dispatcher"
#: The registries whose attach waits for the first compile; an RLock: attaching imports kernel modules, and an
#: eager ``@cuda.jit("sig")`` in one compiles (re-entering the hook, which finds nothing left to do).
_PENDING: list[Any] = []
_LOCK = threading.RLock()
_BUSY = threading.local()  # set in the thread attaching: a compile the attach itself causes does not wait
_MARK = "_aot_deferred_attach"


def pending() -> int:
    """How many registries wait for numba-cuda's first compile (tests; diagnostics)."""
    return len(_PENDING)


def defer(registry: Any) -> bool:
    """Attach ``registry``'s numba kernels at numba-cuda's first compile. Returns ``False`` (nothing deferred:
    the caller attaches now) where numba-cuda's dispatcher module is not imported yet."""
    module = sys.modules.get(_DISPATCHER)
    cls = getattr(module, "CUDADispatcher", None)
    if cls is None:
        return False
    with _LOCK:
        if not getattr(cls.compile, _MARK, False):
            cls.compile = _hooked(cls.compile)
        registry._numba_deferred = True
        _PENDING.append(registry)
    return True


def _hooked(compile_: Any) -> Any:
    @functools.wraps(compile_)
    def compile(self: Any, *args: Any, **kw: Any) -> Any:
        if _PENDING:
            attach_pending()
        return compile_(self, *args, **kw)
    setattr(compile, _MARK, True)
    return compile


def attach_pending() -> None:
    """Attach every deferred registry now. A registry leaves the list only once attached, so a second thread's
    first compile waits on the lock and then finds its overloads in front (never a JIT of a packaged kernel); a
    compile inside the attach itself (an eager ``@cuda.jit("sig")`` in a kernel module it imports) goes on
    without waiting. An unexpected failure is one warning per registry; numba-cuda compiles as without aot."""
    if getattr(_BUSY, "on", False):
        return
    with _LOCK:
        _BUSY.on = True
        try:
            while _PENDING:
                registry = _PENDING[0]
                from .numba_attach import attach_numba
                try:
                    attach_numba(registry, digest_now=False)  # each kernel's digest at its own first compile
                except Exception as e:  # noqa: BLE001 - the library's compile must go on: numba-cuda JITs
                    registry._warn(f"aot: {registry.root}: attaching the packaged numba kernels failed "
                                   f"({type(e).__name__}: {e}); numba-cuda JIT-compiles them")
                finally:
                    _PENDING.pop(0)
                    registry._numba_deferred = False
                log.debug("%s: numba kernels attached at numba-cuda's first compile", registry.root)
        finally:
            _BUSY.on = False
