"""Atomic file writes: tmp file in the same directory, fsync, ``os.replace``.

A reader (another process, a later run) sees either the old file or the complete new one, never a
torn write; a crash leaves at most a ``.tmp-*`` file, which :func:`sweep_temp` removes.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

TMP_PREFIX = ".tmp-aot-"


def atomic_write(path: str | os.PathLike, data: bytes, *, mode: int = 0o644) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, dir=path.parent)
    try:
        try:
            f = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            raise
        with f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def sweep_temp(directory: str | os.PathLike, older_than_s: float = 3600.0) -> int:
    """Remove temp files a killed writer left behind (only old ones: a live writer may own new ones)."""
    removed = 0
    now = time.time()
    for p in Path(directory).rglob(TMP_PREFIX + "*"):
        try:
            if now - p.stat().st_mtime >= older_than_s:
                p.unlink()
                removed += 1
        except OSError:
            pass
    return removed
