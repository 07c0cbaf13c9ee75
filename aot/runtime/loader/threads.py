"""aot's background threads: started without making anyone wait, marked as aot's, and the one thread
of the process that imports CUDA's Python packages for warmups.

``request_warmup`` runs in the caller's thread and must return within a millisecond or so:
:func:`spawn` starts a thread with ``_thread.start_new_thread``, which returns at once
(``threading.Thread.start`` waits until the new thread runs: 0.2 ms on an idle machine, 3-9 ms on a
loaded 2-core one). Such a thread is daemon-like: the interpreter does not wait for it at exit.

:func:`background` tells aot's threads (marked by :func:`spawn` or :func:`mark`) from the caller's:
warnings a registry earns while one of them reads its manifest are held for the caller's thread
(:meth:`aot.runtime.loader.registry.Registry._catalog`). Stdlib only: imported in the caller's thread.
"""

from __future__ import annotations

import _thread
import sys
import threading  # here, in the caller's thread: the thread that first imports threading becomes its main_thread()
import time
from contextlib import contextmanager  # imported by typing already
from typing import Any, Callable, Iterator

_mark = threading.local()

class Tuning:
    """How a warmup shares the process with its caller (read as a warmup runs; module-level so that
    ``benchmarks/warm_limit.py`` can measure the alternatives; nothing else sets them). Measured on an
    H100 (issue 24; ``benchmarks/results/warm_limit_h100*.json``, medians of 5 fresh processes):

    ``polite``, ``duty``: while nobody waits for the warmup, one worker loads and rests after each step
    as long as it took (duty 0.5). An application's first result (import cupy, one reduce on 2^20
    items) with a whole warmup in flight: 0.96x / 0.85x of no warmup (default matrix / 100 specs);
    loading at full speed instead: 1.25x / 1.32x. ``workers``: threads loading while a caller waits in
    ``ensure_warm`` (4: warm-all of the 100 specs 1.08x the driver's limit).
    ``caller_first``: ``cccl(name)`` / ``kernel(unit, ...)`` during a warmup pause the workers at their
    next step until the caller's spec is served, by the worker already on it or now in the caller's
    thread; ``grace``: seconds they stay paused after that, for the caller's first call (default matrix,
    full speed: that call took 51 ms with no grace, 1 ms with 30 ms).
    ``switch_interval``: the GIL switch interval (s) while warmup work is pending (``None``: the
    process's own). 0.5 ms instead of 5 ms did not change the first result (0.98x vs 0.96x, 1.28x vs
    1.28x) and slowed warm-all (709 vs 682 ms, 1659 vs 1537 ms), so it is left alone."""

    workers = 4
    #: Extra workers wait until cuda.compute (or, without CCCL specs, cuda.core) is imported: the import
    #: is the critical leg of both sets measured in issue 29 (import + CCCL loads), and each thread that
    #: returns from a driver call takes the GIL from it; one worker keeps the driver busy meanwhile.
    single_until_imported = True
    polite = True
    duty = 0.5
    caller_first = True
    grace = 0.05
    switch_interval: float | None = None
    #: A packaged unit's cubin under this many bytes is loaded with the GIL kept
    #: (:mod:`aot.runtime.loader.library`): its driver calls take microseconds, and handing the GIL over around each
    #: one cost up to 5 ms beside the import (0: every load releases it, as before issue 29's second pass).
    gil_held_below = 1 << 20
    #: Seconds a warmup worker sleeps before each NVRTC unit, and the request's thread before each CCCL
    #: precheck, while ``aot-warmup-import`` imports (:func:`yield_to_import`; 0: never). A thread running
    #: Python keeps the GIL until the waiting import thread's switch interval (5 ms) forces it out; with a
    #: yield the import (the critical leg, issue 29) waits at most one unit's work. A sleep, not
    #: ``sleep(0)``: the woken import thread needs some microseconds to take the GIL, and a thread that
    #: returns at once takes it back first. Off: on the 2-core build host (``benchmarks/import_contention.py``,
    #: 1e-4) it did not speed the import measurably and the units then finished after it; the worker's
    #: own artifact read and hash already hand the GIL over once per unit. ``warm_limit.py``'s ``yield``
    #: variant measures it on a GPU machine.
    import_yield = 0.0
    #: Units are read and checked in the worker that loads them, just before loading (issue 29, third
    #: pass): only the CCCL specs' artifacts are checked ahead in the request's thread, since their loads
    #: wait for cuda.compute anyway. True: every spec's, as before (each a GIL hand-over beside the import).
    precheck_units_ahead = False


TUNING = Tuning()


class Turns:
    """Who goes first between a registry's warmup workers and the application's threads.

    A caller inside :meth:`caller` (``cccl``/``kernel``) pauses every worker at its next step, except one
    on the very spec it waits for, and for ``TUNING.grace`` after; a caller inside :meth:`rushing`
    (``ensure_warm``) lets every worker load at full speed. Otherwise (``TUNING.polite``) only the first
    worker loads, resting after each step as long as the step took (``TUNING.duty``)."""

    def __init__(self) -> None:
        self._cv = threading.Condition(threading.Lock())
        self._callers = 0
        self._wanted: dict[str, int] = {}  # names callers wait for: their worker never pauses
        self._resume_at = 0.0  # time.monotonic() until which workers stay paused (grace)
        self.rush = 0  # callers waiting in ensure_warm

    @contextmanager
    def caller(self, name: str) -> Iterator[None]:
        with self._cv:
            self._callers += 1
            self._wanted[name] = self._wanted.get(name, 0) + 1
            self._cv.notify_all()  # a worker paused on this very name goes on
        try:
            yield
        finally:
            with self._cv:
                self._callers -= 1
                self._wanted[name] -= 1
                if not self._wanted[name]:
                    del self._wanted[name]
                if TUNING.grace > 0:
                    self._resume_at = time.monotonic() + TUNING.grace
                self._cv.notify_all()

    @contextmanager
    def rushing(self) -> Iterator[None]:
        with self._cv:
            self.rush += 1
            self._cv.notify_all()
        try:
            yield
        finally:
            with self._cv:
                self.rush -= 1

    def polite(self) -> bool:
        """True while nobody waits for the warmup (then only one worker loads, resting between steps)."""
        return TUNING.polite and not self.rush

    def wait_rush(self) -> None:
        """An extra worker: wait until a caller waits for the warmup (at once unless polite)."""
        with self._cv:
            while self.polite():
                self._cv.wait()

    def wait(self, name: str, since: float | None = None) -> None:
        """A worker before a step of ``name``: wait while callers are served (unless one waits for ``name``)
        and, polite, rest as long as the step begun at ``since`` (``time.perf_counter()``) took."""
        rest_until = 0.0
        if since is not None and self.polite():
            duty = min(max(TUNING.duty, 0.05), 1.0)
            rest_until = time.monotonic() + (time.perf_counter() - since) * (1 / duty - 1)
        if not (self._callers or self._resume_at or rest_until):
            return
        with self._cv:
            while name not in self._wanted:
                now = time.monotonic()
                if self._callers:
                    self._cv.wait()
                elif self._resume_at > now:
                    self._cv.wait(self._resume_at - now)
                elif rest_until > now and self.polite():
                    self._resume_at = 0.0
                    self._cv.wait(rest_until - now)
                else:
                    self._resume_at = 0.0
                    return


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
    again and reports why it cannot). Imports :mod:`aot.runtime.loader.lean` only in that thread."""

    def __init__(self) -> None:
        self.core = threading.Event()
        self.compute = threading.Event()
        self._lock = threading.Lock()
        self._started = self._wanted = self._compute_started = self._passed = False
        self._decided = threading.Event()
        self._importing = 0  # imports in progress in aot's import thread(s)

    def importing(self) -> bool:
        """True while an aot thread imports cuda.core or cuda.compute (the GIL is best left to it)."""
        return self._importing > 0

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
        self._busy(1)
        try:
            from .lean import import_cuda_core
            import_cuda_core()
        except Exception:  # noqa: BLE001, S110 - no driver, no cuda.core: the tasks say so in status()
            pass
        finally:
            stamp("cuda_core_imported")
            self.core.set()
            self._busy(-1)
        self._decided.wait()
        with self._lock:
            go = self._wanted and not self._compute_started
            self._compute_started = self._compute_started or go
            self._passed = not go
        if go:
            self._import_compute()

    def settle(self, compute: bool = False) -> None:
        """In a thread about to import cuda.core itself (``compute``: cuda.compute too), such as a caller's
        ``cccl()`` or its first ``Kernel`` handle during a warmup: wait while this process's import thread
        is on it, since two threads importing one package can hand one a half-initialised module ("cannot
        import name 'Device'"). cuda.compute, if the import thread has not started it, is imported here and
        marked done for it. Nothing to wait for without a warmup."""
        if not self._started:
            return
        self.core.wait()
        if not compute:
            return
        with self._lock:
            mine = not self._compute_started
            self._compute_started = True
        if mine:
            self._import_compute()
        else:
            self.compute.wait()

    def _busy(self, k: int) -> None:
        with self._lock:
            self._importing += k

    def _import_compute(self) -> None:
        self._busy(1)
        try:
            from .lean import import_cuda_compute
            import_cuda_compute()
        except Exception:  # noqa: BLE001, S110 - the CCCL tasks import it again and record why not
            pass
        finally:
            stamp("cuda_compute_imported")
            self.compute.set()
            self._busy(-1)


#: The process's background imports.
IMPORTS = BackgroundImports()


def yield_to_import() -> None:
    """In an aot background thread between two pieces of Python work: while :data:`IMPORTS` imports, sleep
    ``TUNING.import_yield`` so that the import thread, if it waits for the GIL, takes it now rather than
    after its switch interval (see :attr:`Tuning.import_yield`). Free otherwise."""
    if IMPORTS._importing > 0 and TUNING.import_yield > 0:
        time.sleep(TUNING.import_yield)
