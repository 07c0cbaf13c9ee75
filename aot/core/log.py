"""The library logger: ``logging.getLogger("aot")`` and its children (``aot.runtime.registry``, ``aot.build.builder``).

Library modules log, never print: DEBUG records for every decision (each candidate tried or skipped and
why, where a spec was served from, timings; each build item's hit/miss and seconds), INFO for one line
per spec served or build finished. The package installs a ``NullHandler`` (the library convention), so
nothing is printed unless the application, or ``aot -v``, attaches a handler. ``AotWarning`` still
reports skipped artifacts: a warning is for the user, a log record for whoever debugs.

``import aot`` itself does not import :mod:`logging` (about 15 ms): this module is imported by the
modules that log, the first time one of them is.
"""

from __future__ import annotations

import logging

LOGGER_NAME = "aot"

_root = logging.getLogger(LOGGER_NAME)
if not any(isinstance(h, logging.NullHandler) for h in _root.handlers):
    _root.addHandler(logging.NullHandler())


def get_logger(module: str) -> logging.Logger:
    """The logger for an ``aot.*`` module (a child of ``aot``, so one handler on ``aot`` sees all)."""
    return logging.getLogger(module)
