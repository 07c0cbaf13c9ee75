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
- **One folder.** Workers compile in :data:`WORKER_CWD`, whatever the caller's folder (NVRTC records it).
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
import tempfile
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Iterator

from ..core.fs import doing
from ..core.spec import CcclSpec, NumbaKernel
from .codeimport import CodeImports

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


# ----------------------------------------------------------------------------------- what a worker runs
#: The working directory of every build worker. NVRTC writes the compiling process's working directory
#: into the LTO-IR it makes (cuda-cccl compiles each iterator's C++ to LTO-IR, and the blob keeps it):
#: the same spec built in /tmp/a and in /tmp/bbbb gave blobs of different sizes (see docs/matrix-imports.md).
#: One fixed directory, the same on every host, keeps a content key's bytes the same wherever it is built.
WORKER_CWD = "/"


def _worker_init(stub_path: str | None, parent_pid: int, import_parents: bool = False) -> None:
    """Every worker's initializer: signals and parent death first, then the toolchain, then its folder."""
    from .toolchain import worker_setup  # loads the toolchain's paths: only in workers, never at import
    worker_start(parent_pid)  # first: ignore SIGINT, die with the parent (the module docstring says why)
    # numba-cuda-mlir writes every operator it cannot lower to a new numba_cuda_mlir_error_*.log in the temp dir
    # (numba_cuda_mlir/mlir_compiler.py) unless this is 1, when it raises the original error: the build reports
    # that error on its one line, and a user's builds leave nothing behind in /tmp.
    os.environ.setdefault("NUMBA_CUDA_MLIR_ICE_FULL_TB", "1")
    worker_setup(stub_path)
    from .nvrtc_seed import load
    load()  # before cuda.compute: no NVRTC program it compiles is named after this worker's PID (nvrtc_seed)
    os.chdir(WORKER_CWD)  # after the set-up: a relative $AOT_STUB_LIBCUDA was opened from the caller's folder
    global _IMPORT_PARENTS
    _IMPORT_PARENTS = import_parents


#: Whether operators from code are imported with their parent packages' ``__init__`` (``[tool.aot]
#: import-parents``); set in each worker by :func:`_worker_init`.
_IMPORT_PARENTS = False


def _work(item: Any) -> tuple[bytes, float, dict]:
    """Compile one item in a worker. C-level output (NVRTC logs) is captured and returned only on failure."""
    from .compile import compile_cccl, compile_nvrtc_item
    t0 = time.perf_counter()
    try:
        log = tempfile.TemporaryFile()
    except OSError as e:  # a full /tmp: say so, not a bare "[Errno 28] No space left on device"
        raise doing(e, "creating a file for the compiler's output in", tempfile.gettempdir()) from None
    with log:
        saved = [os.dup(1), os.dup(2)]
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            extra: dict = {}
            if isinstance(item.spec, CcclSpec):
                _import_code(item.spec)
                payload = compile_cccl(item.spec, item.sm)
            elif item.spec.family == "cupy":  # the CuPy family
                from .cupy_build import compile_cupy_item
                payload, extra = compile_cupy_item(item.spec, item.sm)
            elif item.spec.family == "triton":  # the Triton family
                from .triton_build import compile_triton_item
                payload, extra = compile_triton_item(item.spec, item.sm)
            elif isinstance(item.spec, NumbaKernel):  # the numba-cuda family
                from .numba_build import compile_numba_item
                payload, extra = compile_numba_item(item.spec, item.sm, item.kind)
            else:
                payload, symbols = compile_nvrtc_item(item.spec, item.sm, item.kind)
                if symbols:  # templated kernels: the loader maps "axpy<float>" to its lowered name
                    extra["symbols"] = symbols
        except BaseException as e:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            log.seek(0, os.SEEK_END)
            size = log.tell()
            log.seek(max(0, size - 4000))
            tail = log.read().decode(errors="replace").strip()
            msg = f"{type(e).__name__}: {e}"
            if tail:
                msg += f"\n--- compiler output (last {min(size, 4000)} bytes) ---\n{tail}"
            raise RuntimeError(msg) from None
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
    return payload, time.perf_counter() - t0, extra


def _import_code(spec: CcclSpec) -> None:
    """The modules of the spec's operators from code, imported as the matrix read them (parents bare unless
    ``import-parents``: :mod:`aot.build.codeimport`) before cuda.compute resolves them by name."""
    imports = CodeImports(None, import_parents=_IMPORT_PARENTS, driver=False)
    for ref in spec.code:
        imports.module(ref.partition(":")[0])


@contextlib.contextmanager
def _worker_cupy_cache() -> Iterator[None]:
    """Workers started inside get a ``CUPY_CACHE_DIR`` of their own, removed after. Where CuPy is installed,
    importing cuda.compute (a CCCL item) imports it (through numba-cuda-mlir), and importing CuPy creates its
    kernel cache folder (``~/.cupy/kernel_cache``): an empty folder in the user's home that nothing of the build
    uses. A ``CUPY_CACHE_DIR`` the user set is kept."""
    if os.environ.get("CUPY_CACHE_DIR"):
        yield
        return
    import shutil
    tmp = tempfile.mkdtemp(prefix="aot-build-cupy-")
    os.environ["CUPY_CACHE_DIR"] = tmp  # spawned workers copy the environment when they start
    try:
        yield
    finally:
        if os.environ.get("CUPY_CACHE_DIR") == tmp:
            del os.environ["CUPY_CACHE_DIR"]
        shutil.rmtree(tmp, ignore_errors=True)
