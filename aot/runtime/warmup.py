"""A registry's warm pool: specs loaded, and all their kernels loaded into the device, in background threads.

Warm means: the artifact read, checked and deserialized, its library loaded for the device and every
kernel of it loaded into the device (:mod:`aot.runtime.warm`), so the first call runs like the second.
Nothing CUDA is imported or queried in the caller's thread: one dispatch thread imports CUDA's packages
(in order) and hands the specs to a pool of 4 threads, which make the registry's device current and load.

The pool knows its registry only through what it is given: the registry's lock, its :class:`ServedDevice`,
and callables to look a spec up, load it (single flight) and reach its status record.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from ..core.log import get_logger
from ..core.spec import CcclSpec, Spec
from . import warm as _warm
from .driver import ServedDevice
from .lean import import_cuda_compute
from .objects import SpecStatus, _Loaded

#: The loader's records keep the logger name they always had.
log = get_logger("aot.runtime.registry")


class WarmPool:
    """The background warmup of one registry: :meth:`request` starts it, :meth:`wait` joins it."""

    def __init__(self, lock: threading.Lock, device: ServedDevice, *, spec: Callable[[str], Spec],
                 load: Callable[[str], _Loaded], status_of: Callable[[str], SpecStatus]):
        self._lock = lock  # the registry's: spare objects and status records are shared with it
        self._device = device
        self._spec, self._load, self._status_of = spec, load, status_of
        self._pool: ThreadPoolExecutor | None = None
        self._futures: dict[str, Any] = {}

    def prefer_device(self, device: int | None) -> None:
        """The device to warm up for, unless the registry knows its device or one was chosen already."""
        if self._device.preferred is None:
            self._device.preferred = device

    def request(self, names: list[str]) -> None:
        """Start warming ``names`` (known specs: the registry checked them); returns at once; idempotent."""
        if not self._device.known and self._device.preferred is None:
            self._device.preferred = _warm.caller_device()  # the caller's current device is the one to warm up for
        with self._lock:
            new = [n for n in dict.fromkeys(names) if n not in self._futures]
            for n in new:
                self._futures[n] = Future()
        if not new:
            return
        cccl = [n for n in new if isinstance(self._spec(n), CcclSpec)]
        nvrtc = [n for n in new if n not in cccl]
        go = threading.Event()

        def dispatch() -> None:
            go.wait()  # the caller never waits for the GIL behind a busy warmup thread
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="aot-warmup")
                pool = self._pool
            # This thread alone imports CUDA's packages, in order: importing them from several threads at
            # once can hand one a partially initialised module ("cannot import name 'Device'"). NVRTC
            # units need no cuda.compute: they load while it imports (~200 ms).
            _import_quietly(_warm.import_cuda_core)
            for n in nvrtc:
                pool.submit(self._run, n, self._futures[n])
            if cccl:
                _import_quietly(import_cuda_compute)
            for n in cccl:
                pool.submit(self._run, n, self._futures[n])

        threading.Thread(target=dispatch, name="aot-warmup-dispatch", daemon=True).start()
        go.set()

    def wait(self, timeout: float | None = None) -> list[str]:
        """Block until requested warmups finish (or ``timeout`` seconds pass); return the still-cold names."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            futures = dict(self._futures)
        cold = []
        for n, f in futures.items():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                f.result(timeout=left)
            except Exception:  # noqa: BLE001 - reported through status() and the returned list
                cold.append(n)
        return sorted(cold)

    def _run(self, name: str, future: Future) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            self._warm(name)
        except BaseException as e:  # noqa: BLE001 - handed to ensure_warm through the future
            future.set_exception(e)
        else:
            future.set_result(None)

    def _warm(self, name: str) -> None:
        try:
            self._device.make_current()
            loaded = self._load(name)
            spec = self._spec(name)
            if isinstance(spec, CcclSpec):
                with self._lock:
                    spare = loaded.obj
                if spare is None:  # JIT/cache results and taken spares: make one for the next thread
                    spare = import_cuda_compute().deserialize(loaded.payload)
                kernels = self._load_kernels(name, lambda: _warm.warm_cccl(spare))
                with self._lock:
                    if loaded.obj is None:
                        loaded.obj = spare
            else:
                names = spec.kernels
                kernels = self._load_kernels(name, lambda: _warm.warm_nvrtc(loaded.obj, names))
            st = self._status_of(name)
            with self._lock:
                st.kernels = kernels
        except Exception as e:
            st = self._status_of(name)
            with self._lock:
                st.errors.append(f"warmup: {e}")
            log.debug("warmup of %s failed: %s: %s", name, type(e).__name__, e)
            raise

    def _load_kernels(self, name: str, warm: Callable[[], int]) -> int | None:
        """Run a :mod:`aot.runtime.warm` loader; its failure is not the spec's (the kernels then load at the
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


def _import_quietly(do_import: Callable[[], Any]) -> None:
    """Import ahead of the warmup tasks; a failure is theirs to report (each retries and records it)."""
    try:
        do_import()
    except Exception:  # noqa: BLE001, S110 - no driver, no cuda.compute: the tasks say so in status()
        pass
