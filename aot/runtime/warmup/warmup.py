"""A registry's warm pool: specs loaded, and all their kernels loaded into the device, in background threads.

Warm means: the artifact read, checked and deserialized, its library loaded for the device and every
kernel of it loaded into the device (:mod:`aot.runtime.warmup.warm`), so the first call runs like the second.
Nothing CUDA is imported or queried in the caller's thread. The floor a warmup cannot beat is what any
CUDA program pays: importing cuda.compute (bound by the GIL) beside making the context (not). The work
is overlapped around it (``t = 0`` is ``request_warmup``; its background thread starts the first two):

* ``aot-warmup-context`` (:class:`aot.runtime.loader.cuctx.Opening`, ctypes, GIL released): ``cuInit``, the
  device's SM, then the context: the caller's current one, else the device's primary context;
* ``aot-warmup-import`` (once per process, :class:`aot.runtime.loader.threads.BackgroundImports`): cuda.core, then
  cuda.compute if a CCCL spec is asked for;
* the request's own thread (:meth:`WarmPool.request`): the catalog (manifest, specs), the names checked,
  then, once the SM is known and while cuda.compute still imports, every CCCL spec's best artifact read
  and checked ahead (:func:`aot.runtime.loader.sources.check_packaged`; reading and hashing release the GIL).
  An NVRTC unit's artifact is read and checked by the worker that loads it, just before the load (issue
  29: 180 prechecks here slowed the import beside them; ``TUNING.precheck_units_ahead``);
* up to ``TUNING.workers`` threads ``aot-warmup-N`` (:class:`aot.runtime.loader.threads.Tuning`), each with the
  context current (once): NVRTC units as soon as the context exists, through plain driver calls
  (:class:`aot.runtime.loader.library.DriverLibrary`: no CUDA Python package needed; issue 29), then CCCL specs,
  largest first and ahead of the units still queued, once cuda.compute is imported: deserialize, load the
  library, load every kernel. One worker only until the CUDA packages are imported
  (``TUNING.single_until_imported``): the import is the longer leg, and every thread coming back from
  the driver takes the GIL from it. Each unit's own artifact read and hash hand the GIL over once per
  unit; ``TUNING.import_yield`` adds a short sleep before each unit while the import runs
  (:func:`aot.runtime.loader.threads.yield_to_import`; off by default).

The application comes first. Every driver call it makes (its runtime's first use, an allocation, a copy,
a launch) waits for the load in flight (3-20 ms each on an H100), and cuda.compute's load lock is not
fair, so a warmup loading at full speed beside the application slowed its first result by 25-53%
(``benchmarks/warm_limit.py``). Hence (:class:`aot.runtime.loader.threads.Turns`):

* polite while nobody waits for the warmup: one worker loads, resting after each step as long as the
  step took, so the driver and the GIL are free half the time;
* full speed (every worker) while a caller waits in ``ensure_warm`` (:meth:`WarmPool.wait`);
* the caller's spec first (:meth:`WarmPool.first_in_line`): ``cccl(name)`` or ``kernel(unit, ...)`` during
  a warmup pauses the workers at their next step until the spec is served, by the worker already on it,
  else in the caller's own thread, kernels included, into the context current there; the workers stay
  paused ``TUNING.grace`` after, for the first call.

Without a usable driver (or when opening the device fails) the workers load as the loader always does:
the device is looked up through cuda.core, and each spec's status says why it stayed cold.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Protocol

from ...core.log import get_logger
from ...core.spec import CcclSpec, Spec
from ..loader import cuctx, sources, threads
from ..loader.threads import IMPORTS, SWITCH, TUNING
from . import warm as _warm
from ..loader.driver import ServedDevice
from ..loader.lean import import_cuda_compute
from ..loader.objects import SpecStatus, _Loaded

#: The loader's records keep the logger name they always had.
log = get_logger("aot.runtime.registry")  # the channel users filter on: its name outlives the move

#: At interpreter exit no new task starts and the running ones finish (a thread inside the driver while
#: the process tears the driver down can crash it); queued names stay cold.
_closing = False
_busy = 0
_busy_cv = threading.Condition()


@atexit.register
def _quiesce(timeout: float = 30.0) -> None:
    global _closing
    with _busy_cv:
        _closing = True
        _busy_cv.wait_for(lambda: _busy == 0, timeout)


class WarmHost(Protocol):
    """What the pool needs of its registry (:class:`aot.runtime.loader.registry.Registry`)."""

    _lock: threading.Lock  # spare objects and status records are shared with the registry
    _device: ServedDevice
    _book: Any  # aot.runtime.loader.registry.StatusBook
    _prechecked: dict[str, tuple[Any, Any, Any]]
    _loaded: dict[str, _Loaded]
    manifest: Any

    def names(self) -> list[str]: ...

    def spec(self, name: str) -> Spec: ...

    def packaged_candidates(self, spec: Spec, device_sm: int) -> list[Any]: ...

    def _load(self, name: str) -> _Loaded: ...


class _Queue:
    """The names workers take, CCCL specs first: once cuda.compute is imported, its loads (the longest
    leg, issue 29) go ahead of the NVRTC units still queued; the units fill the driver's gaps."""

    def __init__(self) -> None:
        self._cv = threading.Condition(threading.Lock())
        self._first: deque[str] = deque()
        self._rest: deque[str] = deque()

    def put(self, name: str, first: bool = False) -> None:
        with self._cv:
            (self._first if first else self._rest).append(name)
            self._cv.notify()

    def get(self) -> str:
        with self._cv:
            while not (self._first or self._rest):
                self._cv.wait()
            return (self._first or self._rest).popleft()


class _Pending:
    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None


class WarmPool:
    """The background warmup of one registry: :meth:`request` (in a request's thread), :meth:`wait`."""

    def __init__(self, host: WarmHost):
        self._host = host
        self._lock = host._lock
        self._device = host._device
        self._pending: dict[str, _Pending] = {}
        self._queue = _Queue()
        self._workers = False
        self._tls = threading.local()  # .current: this worker made the opened context current
        self._taken: set[str] = set()  # names a worker or a caller has started (each is run once)
        self._turns = threads.Turns()
        self._imported = threading.Event()  # the CUDA packages this pool's specs need are imported

    def request(self, start: Any, opening: cuctx.Opening) -> None:
        """Check a request's names (an unknown one raises, for ``ensure_warm``), register them (then
        ``start.done`` is set), and dispatch the new ones. ``opening``: the registry's device."""
        host = self._host
        names = host.names() if start.names is None else start.names
        specs = {n: host.spec(n) for n in names}
        with self._lock:
            new = [n for n in dict.fromkeys(names) if n not in self._pending]
            for n in new:
                self._pending[n] = _Pending()
        SWITCH.hold(len(new))  # released as each name is done
        threads.stamp("names_checked")
        start.done.set()
        queued: set[str] = set()
        try:
            self._dispatch(new, specs, opening, queued)
        except BaseException as e:  # noqa: BLE001 - never leave ensure_warm waiting on a name
            for n in new:
                if n not in queued:
                    self._pending[n].error = e
                    self._pending[n].done.set()
                    SWITCH.release()
            log.debug("warmup dispatch failed: %s: %s", type(e).__name__, e)
        finally:
            self._imported.set()

    def _dispatch(self, new: list[str], specs: dict[str, Spec], opening: cuctx.Opening, queued: set[str]) -> None:
        nvrtc = [n for n in new if not isinstance(specs[n], CcclSpec)]
        cccl = sorted((n for n in new if isinstance(specs[n], CcclSpec)), key=self._size, reverse=True)
        IMPORTS.want_compute(bool(cccl))
        if not new:
            self._imported.set()
            return
        self._start_workers(opening)
        sm = self._served_sm(opening)

        def units_ready() -> bool:  # the driver loads units: once the context is made (else as CCCL: cuda.core)
            return opening.settled.is_set() and (opening.error is None or IMPORTS.core.is_set())

        groups: list[tuple[list[str], Callable[[], bool], bool]] = [
            (nvrtc, units_ready, False), (cccl, IMPORTS.compute.is_set, True)]

        def flush() -> None:  # queue what can run now (the context made, cuda.compute imported), each group once
            for group, ready, first in list(groups):
                if ready():
                    groups.remove((group, ready, first))
                    for n in group:
                        if n not in queued:
                            queued.add(n)
                            self._queue.put(n, first)

        for n in (nvrtc if TUNING.precheck_units_ahead else []) + cccl:  # units: checked by their worker
            flush()
            if sm is not None and n not in queued:
                threads.yield_to_import()
                self._precheck(specs[n], sm)
        threads.stamp("prechecked")
        opening.settled.wait()
        if opening.error is not None:
            IMPORTS.core.wait()
        flush()
        if cccl:
            IMPORTS.compute.wait()
            flush()
        else:
            IMPORTS.core.wait()
        self._imported.set()

    def _size(self, name: str) -> int:
        manifest = self._host.manifest
        return max((e["size"] for e in manifest.entries_for(name)), default=0) if manifest is not None else 0

    def _served_sm(self, opening: cuctx.Opening) -> int | None:
        """The SM to choose artifacts for: the registry's (``device_sm``, or found already), else the opened
        device's, published as the registry's device; ``None`` without one (the tasks then look it up)."""
        if self._device.known:
            return self._device.sm()
        found = opening.device_sm()  # cuInit and two attributes: well before the context
        if found is None:
            return None
        self._device.found(*found)
        return self._device.sm()

    def _precheck(self, spec: Spec, sm: int) -> None:
        """Read and check the best packaged artifact of ``spec`` for ``sm`` now, while CUDA imports: the
        registry's ``open_packaged`` then only loads it (or raises what the check found)."""
        host = self._host
        manifest = host.manifest
        if manifest is None or (isinstance(spec, CcclSpec) and spec.code):  # code specs are re-keyed first
            return
        cands = host.packaged_candidates(spec, sm)
        if not cands:
            return
        entry = cands[0].ref
        try:
            path = manifest.path_of(entry)
        except Exception:  # noqa: BLE001 - the task's search says why
            return
        try:
            found: Any = sources.check_packaged(manifest, spec, entry, path)
        except Exception as e:  # noqa: BLE001 - the task's search raises it, warns and goes on
            found = e
        host._prechecked[os.fspath(path)] = (spec, entry, found)

    def _start_workers(self, opening: cuctx.Opening) -> None:
        with self._lock:
            if self._workers:
                return
            self._workers = True
        for i in range(max(1, TUNING.workers)):
            threads.spawn(f"aot-warmup-{i}", self._work, opening, i)

    def _work(self, opening: cuctx.Opening, index: int) -> None:
        ctx = opening.context()
        if ctx is not None:
            try:
                cuctx.make_current(ctx)
                self._tls.current = True
            except Exception as e:  # noqa: BLE001 - the tasks then make the device current the old way
                log.debug("warmup worker: cannot make the context current: %s", e)
        global _busy
        turns = self._turns
        while True:
            if index:  # polite: the extra workers load only while a caller waits for the warmup
                turns.wait_rush()
                if TUNING.single_until_imported and not self._imported.is_set():
                    self._imported.wait()  # one worker while CUDA's packages import (the GIL is theirs)
            name = self._queue.get()
            if index and turns.polite():
                self._queue.put(name, True)  # the caller stopped waiting meanwhile: for the first worker
                continue
            turns.wait(name)
            with self._lock:
                if name in self._taken:  # a caller served it first
                    continue
                self._taken.add(name)
            with _busy_cv:
                if _closing:
                    return
                _busy += 1
            threads.stamp("first_task")
            threads.yield_to_import()  # TUNING.import_yield: the import (the critical leg) first, between units
            self._tls.since = time.perf_counter()
            try:
                self._run(name)
                threads.stamp("last_task_done", last=True)
            finally:
                with _busy_cv:
                    _busy -= 1
                    _busy_cv.notify_all()
            turns.wait(name, self._tls.since)  # polite: rest after the task's last step

    def wait(self, timeout: float | None = None) -> list[str]:
        """Block until requested warmups finish (or ``timeout`` seconds pass); return the still-cold names."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            pending = dict(self._pending)
        cold = []
        with self._turns.rushing():  # a caller waits: every worker, full speed
            for n, p in pending.items():
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not p.done.wait(left) or p.error is not None:  # errors: reported through status()
                    cold.append(n)
        return sorted(cold)

    @contextmanager
    def first_in_line(self, name: str) -> Iterator[None]:
        """In a caller's ``cccl(name)`` / ``kernel(name, ...)``: the workers pause at their next step until
        the body is done (and ``TUNING.grace`` after), and ``name``, if this warmup still has it to do, is
        served first: the worker on it finishes it, else it is warmed here, now."""
        pending = self._pending.get(name)
        warm = pending.done.is_set() if pending is not None else name in self._host._loaded
        if warm or not TUNING.caller_first:  # nothing to wait for: no pause (kernel() may be called often)
            yield
            return
        with self._turns.caller(name):
            if pending is not None and not pending.done.is_set():
                with self._lock:
                    mine = name not in self._taken
                    self._taken.add(name)
                if mine:
                    self._run(name, here=True)
                else:
                    pending.done.wait()
            yield

    def _run(self, name: str, here: bool = False) -> None:
        pending = self._pending[name]
        try:
            self._warm(name, here)
        except BaseException as e:  # noqa: BLE001 - handed to ensure_warm
            pending.error = e
        finally:
            pending.done.set()
            SWITCH.release()

    def _warm(self, name: str, here: bool = False) -> None:
        """Load ``name`` and every kernel of it: in a worker (``here`` false) into the warmup's context; in
        a caller's thread into the context current there, if any (else its kernels load at its first call,
        as without warmup)."""
        host = self._host
        tls, turns = self._tls, self._turns

        def between() -> None:  # a worker, before each step: callers first; polite, rest after the last
            if not here:
                turns.wait(name, tls.since)
                tls.since = time.perf_counter()

        try:
            if host.spec(name).family in ("cupy", "triton"):  # loaded by CuPy's / Triton's own launch: nothing here
                with self._lock:
                    self._status_of(name).kernels = 0
                return
            if host.spec(name).family == "numba":  # numba-cuda: attached to its own @cuda.jit dispatcher
                from ..adapters.numba_attach import warm_spec  # numba-cuda: only for a set that ships its kernels
                n = warm_spec(host, name)  # no CUDA and no numba in this thread (warm_spec says why)
                with self._lock:
                    self._status_of(name).kernels = n
                return
            if not here and not getattr(self._tls, "current", False):
                self._device.make_current()  # no opened context: cuda.core's current device, as the loader
            loaded = host._load(name)
            between()
            spec = host.spec(name)
            preload = not here or cuctx.caller_context()[1] is not None
            if isinstance(spec, CcclSpec):
                with self._lock:
                    spare = loaded.obj
                if spare is None:  # JIT/cache results and taken spares: make one for the next thread
                    spare = import_cuda_compute().deserialize(loaded.payload)
                kernels = self._load_kernels(name, lambda: _warm.warm_cccl(spare, between)) if preload else None
                with self._lock:
                    if loaded.obj is None:
                        loaded.obj = spare
            else:
                names = spec.kernels
                kernels = (self._load_kernels(name, lambda: _warm.warm_nvrtc(loaded.obj, names, between))
                           if preload else None)
            st = self._status_of(name)
            with self._lock:
                st.kernels = kernels
            threads.stamp(f"first_{spec.family}_warm")
            threads.stamp(f"last_{spec.family}_warm", last=True)
        except Exception as e:
            st = self._status_of(name)
            with self._lock:
                st.errors.append(f"warmup: {e}")
            log.debug("warmup of %s failed: %s: %s", name, type(e).__name__, e)
            raise

    def _status_of(self, name: str) -> SpecStatus:
        return self._host._book.of(name)

    def _load_kernels(self, name: str, warm: Callable[[], int]) -> int | None:
        """Run a :mod:`aot.runtime.warmup.warm` loader; its failure is not the spec's (the kernels then load at the
        first call, as without warmup): record why in the spec's status and go on."""
        try:
            n = warm()
        except Exception as e:  # noqa: BLE001 - KernelsNotLoaded, a driver error: the spec still works
            st = self._status_of(name)
            with self._lock:
                st.errors.append(f"warmup: kernels not preloaded: {e}")
            log.debug("warmup of %s: kernels not preloaded: %s", name, e)
            return None
        log.debug("warmup of %s: %d kernel(s) loaded into the device", name, n)
        return n
