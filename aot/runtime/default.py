"""``aot``'s own registry (its packaged artifacts and the bundled matrix's specs) and its background warmup.

Importing this module is cheap (no registry, no CUDA, no logging, not even importlib.resources):
``aot.request_warmup`` imports it in the caller's thread; the registry is imported and built in a
background thread.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from ..core.errors import AotError
from .warm import caller_device

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .registry import Registry

_default: Registry | None = None
_default_lock = threading.Lock()


def default_registry() -> Registry:
    """``aot``'s own packaged artifacts (``aot/artifacts``), with the bundled matrix's specs for JIT (read
    from ``aot/default_specs.json``: the runtime parses no YAML)."""
    global _default
    with _default_lock:
        if _default is None:
            import warnings
            from importlib import resources
            from pathlib import Path

            from . import default_specs as _default_specs
            from .objects import AotWarning
            from .registry import Registry
            try:
                specs = _default_specs.load()
            except AotError as e:
                warnings.warn(f"aot: {e}; serving the packaged manifest's specs only", AotWarning, stacklevel=2)
                specs = []
            _default = Registry(Path(str(resources.files("aot"))) / "artifacts", specs=specs)
        return _default


# ------------------------------------------------------------------ the default registry's warmup
#: Threads building the default registry for :func:`request_default_warmup`, and what they raised.
_starters: list[threading.Thread] = []
_start_errors: list[BaseException] = []
_start_lock = threading.Lock()


def request_default_warmup(names: Iterable[str] | None) -> None:
    """``aot.request_warmup``: even the default registry (importing the loader, reading the manifest and
    the specs: 20-90 ms) is built in a background thread, so the caller only pays for starting one."""
    names = list(names) if names is not None else None
    built = _default
    if built is not None:
        built.request_warmup(names)  # built already: a few dict lookups, and names are checked now
        return
    device = caller_device()
    go = threading.Event()

    def start() -> None:
        go.wait()  # the caller never waits for the GIL behind this thread
        try:
            reg = default_registry()
            reg._warmup.prefer_device(device)
            reg.request_warmup(names)
        except BaseException as e:  # noqa: BLE001 - an unknown name, a bad manifest: raised by ensure_warm
            with _start_lock:
                _start_errors.append(e)

    t = threading.Thread(target=start, name="aot-warmup-start", daemon=True)
    with _start_lock:
        _starters.append(t)
    t.start()
    go.set()


def wait_default_started(deadline: float | None) -> None:
    """Join the threads :func:`request_default_warmup` started; raise the first error one of them hit."""
    with _start_lock:
        starters = list(_starters)
    for t in starters:
        t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
    with _start_lock:
        _starters[:] = [t for t in _starters if t.is_alive()]
        errors, _start_errors[:] = list(_start_errors), []
    if errors:
        raise errors[0]
