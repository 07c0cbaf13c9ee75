"""aot's background threads: started without making the caller wait, and marked as aot's.

``request_warmup`` runs in the caller's thread and must return within a millisecond or so:
:func:`spawn` starts its background thread with ``_thread.start_new_thread``, which returns at once
(``threading.Thread.start`` waits until the new thread runs: 0.2 ms on an idle machine, 3-9 ms on a
loaded 2-core one). Such a thread is daemon-like: the interpreter does not wait for it at exit.

:func:`background` tells aot's own threads (marked with :func:`mark`) from the caller's: warnings a
registry earns while one of them reads its manifest are held for the caller's thread
(:meth:`aot.runtime.registry.Registry._catalog`). Stdlib only: imported in the caller's thread.
"""

from __future__ import annotations

import _thread
import threading
from typing import Any, Callable

_mark = threading.local()


def mark() -> None:
    """Mark the calling thread as one of aot's background threads."""
    _mark.on = True


def background() -> bool:
    """True in a thread :func:`mark` marked (or :func:`spawn` started)."""
    return getattr(_mark, "on", False)


def spawn(fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(*args)`` in a new, marked thread; returns without waiting for it to start. ``fn`` must
    catch its own exceptions (an escaping one is only printed)."""
    def run() -> None:
        mark()
        fn(*args)

    _thread.start_new_thread(run, ())
