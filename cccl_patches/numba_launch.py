"""Whether a kernel's compile reads the launch configuration: numba-cuda compiles such a kernel per launch.

The mechanism (numba-cuda 0.30.0 on; ``numba_cuda/numba/cuda/``): a launch ``kernel[grid, block](args)`` that
must compile passes its ``_LaunchConfiguration`` to the C dispatcher (``Dispatcher._cuda_call(...,
__numba_cuda_launch_config__=cfg)``), which makes it the thread's current launch configuration while
``_compile_for_args`` runs (``cext/_dispatcher.cpp``: ``LaunchConfigGuard``). Anything that runs during that
compile (an ``@overload``'s typing function, an ``@intrinsic``, an IR rewrite: cuda.coop's pattern,
``tests/cudapy/test_launch_config_sensitive.py``) may read it through ``numba.cuda.launchconfig.
current_launch_config()`` and compile its grid, block or dynamic shared memory size into the code; it should then
call ``dispatcher.mark_launch_config_sensitive()``, and the dispatcher compiles again for another configuration
(``CUDADispatcher._select_launch_config_dispatcher``). aot builds on a driverless host, outside any launch: such
a kernel built there saw no configuration (issue: aot's cubin wrote 0 where numba-cuda's compile at a launch with
64 threads per block wrote 64). Releases before 0.30 have no launch configuration at compile time.

:func:`probed` runs a build's compile with a probe configuration current on the thread, set the way a launch sets
it, and says whether anything but numba-cuda's own bookkeeping asked for it or read it: the builder then refuses the
kernel (:func:`cccl_patches.numba_cuda.compile_kernel`), so numba-cuda compiles it at each launch, as without aot.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, TypeVar

T = TypeVar("T")
#: What numba-cuda's own compiler reads of every configuration (``CUDABackend.run_pass``): not a dependency.
_OWN = frozenset({"_is_kernel_launch_config_sensitive", "_kernel_launch_config_sensitive"})
#: Where numba-cuda's accessor runs (skipped to find who called it), and numba-cuda's compiler, whose asking
#: (``CUDABackend`` reads every configuration's sensitivity flag) is bookkeeping, not the kernel's code.
_ACCESSOR = frozenset({"numba.cuda.launchconfig", __name__})
_BOOKKEEPING = frozenset({"numba.cuda.compiler"})


class _Probe:
    """A launch configuration that records who reads it. Its grid, block and shared memory are plausible (a
    compile that reads them goes on and finishes); its dispatcher records ``mark_launch_config_sensitive``."""

    def __init__(self, reads: list[str]):
        object.__setattr__(self, "_reads", reads)

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("__") or name == "_reads":
            return object.__getattribute__(self, name)
        if name == "_is_kernel_launch_config_sensitive":
            return lambda: False
        if name not in _OWN:
            object.__getattribute__(self, "_reads").append(f"launch_config.{name}")
        return {"griddim": (1, 1, 1), "blockdim": (1, 1, 1), "sharedmem": 0, "stream": 0, "args": (),
                "pre_launch_callbacks": [], "dispatcher": _Marker(object.__getattribute__(self, "_reads"))
                }.get(name)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__getattribute__(self, "_reads").append(f"launch_config.{name} = {value!r}")


class _Marker:
    def __init__(self, reads: list[str]):
        self.reads = reads

    def mark_launch_config_sensitive(self) -> None:
        self.reads.append("dispatcher.mark_launch_config_sensitive()")

    def __getattr__(self, name: str) -> Any:
        self.reads.append(f"launch_config.dispatcher.{name}")
        raise AttributeError(name)


def _caller() -> str:
    """The first frame outside numba-cuda's accessor: who asked."""
    frame: Any = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__") in _ACCESSOR:
        frame = frame.f_back
    if frame is None:
        return ""
    return f"{frame.f_globals.get('__name__')}:{frame.f_code.co_name}"


def probed(compile_fn: Callable[[], T]) -> tuple[T | None, list[str], BaseException | None]:
    """``compile_fn()`` run with a probe launch configuration current on this thread: its result (``None`` if it
    raised), what asked for or read the configuration (empty: the compile does not depend on it), and what it
    raised. Without numba-cuda's launch configuration (before 0.30) it just runs."""
    try:
        from numba.cuda import launchconfig  # noqa: F401 - 0.30.0 on (0.29.0 has none)
        from numba.cuda.cext import _dispatcher
        real = _dispatcher.get_current_launch_config
    except (ImportError, AttributeError):
        return compile_fn(), [], None
    reads: list[str] = []
    probe = _Probe(reads)

    def asked() -> Any:
        who = _caller()
        if who and who.partition(":")[0] not in _BOOKKEEPING:
            reads.append(f"current_launch_config() from {who}")
        return probe

    box: list[Any] = []
    raised: list[BaseException] = []

    def run() -> None:
        try:
            box.append(compile_fn())
        except BaseException as e:  # noqa: BLE001 - handed to the caller: a read configuration may explain it
            raised.append(e)

    _dispatcher.get_current_launch_config = asked
    try:
        try:
            _through_the_dispatcher(probe, run)
        except Exception:  # noqa: BLE001 - the C entry point as this release has it refused: the accessor alone
            if not box and not raised:
                run()
    finally:
        _dispatcher.get_current_launch_config = real
    return (box[0] if box else None), reads, (raised[0] if raised else None)


def _through_the_dispatcher(probe: Any, run: Callable[[], None]) -> None:
    """Run ``run`` as a launch-triggered compile runs: inside ``Dispatcher._cuda_call`` with ``probe`` as the
    launch configuration, so code that holds the C function itself sees it too. A throwaway dispatcher's
    ``_compile_for_args`` (numba-cuda's own ``launchconfig.capture_compile_config`` replaces it the same way)
    is ``run``."""
    from numba.cuda.cext import _dispatcher
    from numba.cuda.dispatcher import CUDADispatcher

    def _trampoline(x):  # pragma: no cover - never compiled
        return None
    trampoline = CUDADispatcher(_trampoline, targetoptions={})
    trampoline._compile_for_args = lambda *a, **k: run()
    _dispatcher.Dispatcher._cuda_call(trampoline, 0, __numba_cuda_launch_config__=probe)
