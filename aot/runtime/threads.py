"""aot's background threads: started without making anyone wait, marked as aot's, and the one thread
of the process that imports CUDA's Python packages for warmups.

``request_warmup`` runs in the caller's thread and must return within a millisecond or so:
:func:`spawn` starts a thread with ``_thread.start_new_thread``, which returns at once
(``threading.Thread.start`` waits until the new thread runs: 0.2 ms on an idle machine, 3-9 ms on a
loaded 2-core one). Such a thread is daemon-like: the interpreter does not wait for it at exit.

:func:`background` tells aot's threads (marked by :func:`spawn` or :func:`mark`) from the caller's:
warnings a registry earns while one of them reads its manifest are held for the caller's thread
(:meth:`aot.runtime.registry.Registry._catalog`). Stdlib only: imported in the caller's thread.
"""

from __future__ import annotations

import _thread
import sys
import threading  # here, in the caller's thread: the thread that first imports threading becomes its main_thread()
import time
from typing import Any, Callable

_mark = threading.local()

class Tuning:
    """How a warmup shares the process with its caller (read when a warmup starts; module-level so that
    ``benchmarks/warm_limit.py`` can measure the alternatives; nothing else sets them).

    ``workers``: loader threads per registry. The driver serializes library and kernel loads, so two
    suffice to overlap one worker's deserializing with the other's loading; each more is another
    driver call in flight that a caller's own load queues behind (H100: 1 thread 275 ms, 2: 212, 4:
    233, 8: 258 for the default matrix; ``benchmarks/kload_scaling.py``).
    ``switch_interval``: the GIL switch interval (s) while warmup work is pending, restored after
    (``None``: leave the process's). A thread that gives the GIL up for a system call waits up to the
    interval (5 ms by default) to take it back from a thread running Python: the caller's imports and
    driver calls beside aot's threads.
    ``caller_first``: ``cccl(name)`` / ``kernel(unit, ...)`` during a warmup pause the workers between
    driver calls until the caller's spec is served, loaded next (by the worker on it) or now, in the
    caller's thread; ``grace``: seconds the workers stay paused after that, for the caller's first
    call."""

    workers = 2
    switch_interval: float | None = 0.0005
    caller_first = True
    grace = 0.0


TUNING = Tuning()

class _Switch:
    """``sys.setswitchinterval(TUNING.switch_interval)`` while any warmup work is pending (:meth:`hold`
    per piece of it, :meth:`release` when done), then the process's own again, unless someone changed
    it meanwhile. Never raises it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._n = 0
        self._saved = self._ours = 0.0

    def hold(self, k: int = 1) -> None:
        want = TUNING.switch_interval
        with self._lock:
            if self._n == 0 and want is not None:
                now = sys.getswitchinterval()
                if want < now:
                    self._saved = now
                    sys.setswitchinterval(want)
                    self._ours = sys.getswitchinterval()
            self._n += k

    def release(self, k: int = 1) -> None:
        with self._lock:
            self._n -= k
            if self._n <= 0 and self._ours:
                if sys.getswitchinterval() == self._ours:
                    sys.setswitchinterval(self._saved)
                self._n, self._ours = 0, 0.0


#: The process's switch interval while warmups run.
SWITCH = _Switch()

#: When each stage of this process's warmups was first reached (``time.perf_counter()``; ``task_end``:
#: the last): what ``benchmarks/warm_breakdown.py`` reports as the pipeline's phases. Nothing reads it.
TIMELINE: dict[str, float] = {}


def stamp(stage: str, last: bool = False) -> None:
    """Record ``stage`` in :data:`TIMELINE` (the first time; every time with ``last``)."""
    if last or stage not in TIMELINE:
        TIMELINE[stage] = time.perf_counter()


def mark() -> None:
    """Mark the calling thread as one of aot's background threads."""
    _mark.on = True


def background() -> bool:
    """True in a thread :func:`mark` marked (or :func:`spawn` started)."""
    return getattr(_mark, "on", False)


def spawn(name: str, fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(*args)`` in a new thread named ``name`` (``threading.current_thread().name``, as profilers
    and tests see it), marked as aot's; returns without waiting for it to start. ``fn`` must catch its
    own exceptions (an escaping one is only printed)."""
    def run() -> None:
        mark()
        threading.current_thread().name = name
        fn(*args)

    _thread.start_new_thread(run, ())


class BackgroundImports:
    """``cuda.core``, then ``cuda.compute`` once a warmup asks for it (:meth:`want_compute`), imported by one
    thread of the process (``aot-warmup-import``), in that order: importing them from several threads at
    once can hand one a partially initialised module ("cannot import name 'Device'"). ``core`` and
    ``compute`` are set when each import is over, failed or not (a task that needs the module imports it
    again and reports why it cannot). Imports :mod:`aot.runtime.lean` only in that thread."""

    def __init__(self) -> None:
        self.core = threading.Event()
        self.compute = threading.Event()
        self._lock = threading.Lock()
        self._started = self._wanted = self._compute_started = self._passed = False
        self._decided = threading.Event()

    def start(self) -> None:
        """Start importing cuda.core (once per process): first thing in every warmup."""
        with self._lock:
            if self._started:
                return
            self._started = True
        spawn("aot-warmup-import", self._run)

    def want_compute(self, wanted: bool) -> None:
        """A warmup knows its specs: import cuda.compute after cuda.core if ``wanted`` (any warmup may ask)."""
        with self._lock:
            self._wanted = self._wanted or wanted
            late = wanted and self._passed and not self._compute_started
            if late:
                self._compute_started = True
        self._decided.set()
        if late:  # the import thread ended before any warmup wanted cuda.compute
            spawn("aot-warmup-import", self._import_compute)

    def _run(self) -> None:
        try:
            from .lean import import_cuda_core
            import_cuda_core()
        except Exception:  # noqa: BLE001, S110 - no driver, no cuda.core: the tasks say so in status()
            pass
        finally:
            stamp("cuda_core_imported")
            self.core.set()
        self._decided.wait()
        with self._lock:
            go = self._wanted and not self._compute_started
            self._compute_started = self._compute_started or go
            self._passed = not go
        if go:
            self._import_compute()

    def _import_compute(self) -> None:
        try:
            from .lean import import_cuda_compute
            import_cuda_compute()
        except Exception:  # noqa: BLE001, S110 - the CCCL tasks import it again and record why not
            pass
        finally:
            stamp("cuda_compute_imported")
            self.compute.set()


#: The process's background imports.
IMPORTS = BackgroundImports()
