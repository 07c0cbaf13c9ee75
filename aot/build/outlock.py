"""One writer per output directory: builds and merges into one ``--out`` take an exclusive lock on it.

Without it two builds into one directory each prune the other's artifacts and the last manifest names
files that are gone (6 of 6 trials with different matrices). The lock is ``flock`` on ``DIR/.aot-lock``,
opened with ``O_NOFOLLOW`` (a planted symlink cannot redirect it) and ``O_CLOEXEC`` (build workers do not
inherit it); the kernel releases it when the holder exits, however it exits. A second writer does not
wait: it refuses at once with a one-line :class:`BusyError` naming the directory and the holder's PID,
so a CI job never blocks on a stuck sibling.

The lock file is removed when the writer is done, as the cache's lock files are (:meth:`aot.runtime.jit.cache.
ArtifactCache.lock`), without letting two writers in: the holder unlinks the name *while still holding*
the lock, and only if the name still names the inode it locked; a process that got the lock checks
afterwards that the name still names the inode it locked, and otherwise (it locked a file the previous
holder has just unlinked) starts again with the new file. So whoever holds a lock holds the one the name
points to, and at most one process at a time can. A killed writer leaves the file; the next one reuses it.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import Iterator

from ..core.log import get_logger
from ..core.errors import BusyError, UsageError
from ..core.fs import doing

LOCK_NAME = ".aot-lock"

log = get_logger(__name__)


def _holder(fd: int) -> str:
    """What the lock file says about its holder (``PID <n> (<what>)``), or that it does not say."""
    try:
        text = os.pread(fd, 200, 0).decode("ascii", "replace").split()
    except OSError:
        text = []
    if text and text[0].isascii() and text[0].isdigit():
        return f"PID {text[0]}" + (f" ({text[1]})" if len(text) > 1 else "")
    return "a process that has not written its PID yet"


#: Attempts to lock the file the name points to when each one was unlinked by a finishing holder.
_RETRIES = 50


@contextlib.contextmanager
def output_lock(out: Path, what: str) -> Iterator[None]:
    """Hold ``out``'s writer lock for the duration; :class:`BusyError` at once if another process holds it."""
    import fcntl
    path = Path(out) / LOCK_NAME
    for _ in range(_RETRIES):
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise BusyError(f"{out}: another aot {what} or merge is writing into it ({holder}); "
                            f"wait for it to finish or use another --out") from None
        except OSError as e:  # ENOLCK / EOPNOTSUPP on some network file systems: go on, unprotected
            log.warning("%s: cannot lock the output directory (%s); concurrent writers are not detected",
                        out, e.strerror or e)
            try:
                yield
            finally:
                os.close(fd)
            return
        if _names(path, fd):
            break
        os.close(fd)  # the previous holder unlinked this one after we opened it: lock the new file
    else:
        raise BusyError(f"{out}: the output lock kept changing under us; another aot build or merge is "
                        f"starting and finishing there")
    try:
        try:  # who holds it, for the BusyError of the next writer; a full disk only loses this line
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {what}\n".encode(), 0)
        except OSError:
            pass
        log.debug("%s: output lock taken by PID %d (%s)", out, os.getpid(), what)
        yield
    finally:
        try:
            if _names(path, fd):  # still ours: remove it while holding it, so no one can lock it any more
                os.unlink(path)
        except OSError:
            pass
        finally:
            os.close(fd)  # releases the flock


def _open(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UsageError(f"{path}: is a symbolic link; refusing to use it as the output lock") from None
        raise doing(e, "creating the output lock", path) from None


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the file open on ``fd`` (not unlinked or replaced since)."""
    try:
        now, held = os.lstat(path), os.fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)
