"""The build's process tree dies with it: worker set-up, signal handling and a bounded pool shutdown.

A build runs its items in ``spawn`` worker processes (:mod:`aot.build.builder` says why). Without the
measures below, a build killed by SIGTERM or SIGKILL (a CI cancellation, the OOM killer) left both
workers and ``multiprocessing``'s resource tracker re-parented to init for good, holding the build's
stdout/stderr open, and Ctrl-C could hang the parent in ``ProcessPoolExecutor.shutdown`` behind a
worker busy in cuda.compute, or print ``Process SpawnProcess-N: Traceback … KeyboardInterrupt`` blocks.

- **Parent death.** Each worker asks the kernel for SIGKILL when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``, Linux), then checks ``getppid()`` against the PID it was given, which
  closes the window where the parent died before the ``prctl``. PDEATHSIG fires when the *thread* that
  created the child exits, not the process: the workers are spawned from inside ``pool.submit``, in the
  thread that runs :func:`aot.build.builder.build`, and that thread cannot return before the pool is shut
  down (``build`` is synchronous), so the signal fires only when the builder's process (or that thread)
  is really gone. SIGKILL, because a worker holds nothing that needs cleaning up (results are written
  by the parent) and may be stuck in C code that would never run a Python handler; for the same reason
  the kernel's signal is preferred to a watchdog thread reading a pipe from the parent, which needs the
  interpreter to get a turn in a worker busy in a compile. Where ``prctl`` is
  missing (not Linux), a daemon thread polls ``getppid()`` once a second instead. The resource tracker
  needs nothing of its own: it exits when the last holder of its pipe (the parent and the workers) is
  gone.
- **Signals.** Workers ignore SIGINT: Ctrl-C reaches the whole process group, and the parent alone
  decides (it stops the workers and prints one line). SIGINT and SIGTERM are blocked in the parent while
  it spawns a worker, so the child starts with them blocked (the mask survives ``exec``) until its
  initializer has set SIGINT to ignored; a Ctrl-C during interpreter start-up can no longer print a
  traceback, and the parent's own handler runs right after the spawn instead of in the middle of it.
- **Bounded shutdown.** On any exception in the parent (KeyboardInterrupt, the CLI's SIGTERM) the workers
  get SIGTERM, then SIGKILL after :data:`TERM_GRACE_S`; the executor is shut down without waiting, and
  its manager thread is joined for a bounded time. Nothing waits forever on a worker busy in a compile.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Iterator

#: Seconds a worker gets to exit after SIGTERM before it is killed, and the manager thread to finish.
TERM_GRACE_S = 3.0
_PR_SET_PDEATHSIG = 1
_GUARDED = {signal.SIGINT, signal.SIGTERM}


def _set_pdeathsig() -> bool:
    """Ask Linux to SIGKILL this process when its parent (the creating thread) dies; False if unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols, libc's prctl among them
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent_pid: int) -> None:
    """The portable fallback: a daemon thread that ends the worker once it has been re-parented."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)
    threading.Thread(target=watch, name="aot-parent-watch", daemon=True).start()


def worker_start(parent_pid: int) -> None:
    """Run first in every worker: ignore SIGINT, die with the parent, then unblock what the parent blocked."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not _set_pdeathsig():
        _watch_parent(parent_pid)
    if os.getppid() != parent_pid:  # the parent died before the prctl took effect
        os._exit(1)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _GUARDED)


@contextlib.contextmanager
def signals_blocked() -> Iterator[None]:
    """Block SIGINT and SIGTERM in this thread for the duration (they are delivered right after): around a
    worker spawn, so the child inherits the mask, and around the shutdown, so a second Ctrl-C cannot cut
    it short and leave workers behind."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _GUARDED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` now, bounded: SIGTERM to every worker, SIGKILL to those still alive after
    :data:`TERM_GRACE_S`, cancel what is queued, and join the executor's manager thread for at most as long.

    Reads ``pool._processes`` and ``pool._executor_manager_thread``: the executor has no public way to stop
    a busy worker (``shutdown(cancel_futures=True)`` still waits for running items), and both attributes
    have kept their names since Python 3.9."""
    with signals_blocked():
        procs = list((getattr(pool, "_processes", None) or {}).values())
        manager = getattr(pool, "_executor_manager_thread", None)
        for p in procs:
            with contextlib.suppress(Exception):
                p.terminate()
        deadline = time.monotonic() + TERM_GRACE_S
        for p in procs:
            with contextlib.suppress(Exception):
                p.join(max(0.0, deadline - time.monotonic()))
        for p in procs:
            with contextlib.suppress(Exception):
                if p.is_alive():
                    p.kill()
                    p.join(TERM_GRACE_S)
        pool.shutdown(wait=False, cancel_futures=True)
        if manager is not None and manager is not threading.current_thread():
            manager.join(TERM_GRACE_S)
