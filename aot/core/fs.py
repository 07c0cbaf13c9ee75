"""Atomic file writes (tmp file in the same directory, fsync, ``os.replace``) and private directories.

A reader (another process, a later run) sees either the old file or the complete new one, never a
torn write; a crash leaves at most a ``.tmp-*`` file, which :func:`sweep_temp` removes.

Private directories (the user cache): created 0700, and trusted only when owned by the effective user
and writable by nobody else (:func:`trust_problem`), checked on an open descriptor so that the
directory checked is the directory used.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import time
from pathlib import Path

TMP_PREFIX = ".tmp-aot-"


def doing(e: OSError, what: str, path: str | os.PathLike) -> OSError:
    """``e`` again (same class and errno), its message saying what aot was doing and where: ``writing
    DIR/build-report.json: No space left on device`` instead of a bare ``[Errno 28] No space left on
    device``. The CLI prints ``strerror`` of an OSError that names no file, so the line is exactly that."""
    reason = e.strerror or str(e)
    if e.filename is not None and os.fspath(e.filename) != os.fspath(path):
        reason = f"{e.filename}: {reason}"
    return type(e)(e.errno, f"{what} {os.fspath(path)}: {reason}")


def atomic_write(path: str | os.PathLike, data: bytes, *, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` atomically (module docstring). An ``OSError`` says what failed where
    (:func:`doing`): ``writing PATH: No space left on device``."""
    path = Path(path)
    try:
        _atomic_write(path, data, mode)
    except OSError as e:
        raise doing(e, "writing", path) from None


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
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


# ------------------------------------------------------------------------------- private directories
#: Opening a directory we are about to trust: no controlling tty, closed across exec.
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class UnsafePath(Exception):
    """A directory or file that another user could have written: never read, load or execute it."""


def trust_problem(st: os.stat_result, what: str) -> str | None:
    """Why a file or directory with stat ``st`` must not be trusted (ssh's rule), or ``None``: it must be
    owned by the effective user and writable by nobody else."""
    me = os.geteuid()
    if st.st_uid != me:
        return f"{what} is owned by uid {st.st_uid}, not by you (uid {me})"
    if st.st_mode & 0o022:
        who = "group and others" if st.st_mode & 0o022 == 0o022 else "others" if st.st_mode & 0o002 else "its group"
        return f"{what} is writable by {who} (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def make_private_dirs(path: str | os.PathLike) -> None:
    """Create ``path`` and its missing parents with mode 0700 (tightened after ``mkdir``: the umask can
    only remove bits, and a permissive umask must not make a cache directory group-writable)."""
    missing = []
    p = Path(path)
    while True:
        try:
            os.lstat(p)
            break
        except FileNotFoundError:
            missing.append(p)
            if p.parent == p:
                break
            p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            continue
        fd = os.open(d, DIR_FLAGS | NOFOLLOW)
        try:
            os.fchmod(fd, 0o700)
        finally:
            os.close(fd)


def open_trusted_root(path: str | os.PathLike, *, create: bool) -> int:
    """A descriptor of the directory ``path`` once it passed :func:`trust_problem`. A symlink at ``path``
    (the user may point ``AOT_CACHE_DIR`` elsewhere) is followed only when the link itself is ours (or
    root's), and the directory it leads to is checked, not the link. Missing and ``create``: made 0700.

    Raises :class:`UnsafePath`, or ``OSError`` (``FileNotFoundError`` when absent and not ``create``)."""
    try:
        lst = os.lstat(path)
    except FileNotFoundError:
        if not create:
            raise
        make_private_dirs(path)
        lst = os.lstat(path)
    link = stat.S_ISLNK(lst.st_mode)
    if link and lst.st_uid not in (os.geteuid(), 0):
        raise UnsafePath(f"{path} is a symbolic link owned by uid {lst.st_uid}")
    fd = os.open(path, DIR_FLAGS)
    return _trusted_or_closed(fd, f"{path} (-> {os.path.realpath(path)})" if link else str(path))


def _trusted_or_closed(fd: int, what: str) -> int:
    """``fd`` once the file it is open on passed :func:`trust_problem`; else closed, and UnsafePath."""
    try:
        why = trust_problem(os.fstat(fd), what)
        if why:
            raise UnsafePath(why)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_trusted_subdir(dir_fd: int, name: str, *, create: bool, what: str) -> int:
    """A descriptor of ``name`` inside the (already trusted) ``dir_fd``, never through a symlink, once it
    passed :func:`trust_problem`; made 0700 when missing and ``create``. Raises like
    :func:`open_trusted_root`."""
    flags = DIR_FLAGS | NOFOLLOW
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.mkdir(name, 0o700, dir_fd=dir_fd)
        except FileExistsError:
            pass
        fd = os.open(name, flags, dir_fd=dir_fd)
        try:  # tighten what the umask left; only a directory we own can be changed, others fail the check
            if os.fstat(fd).st_uid == os.geteuid():
                os.fchmod(fd, 0o700)
        except OSError:
            pass
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                if stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode):
                    raise UnsafePath(f"{what} is a symbolic link") from None
            except FileNotFoundError:
                pass
        raise
    return _trusted_or_closed(fd, what)


def same_file(a: os.stat_result, b: os.stat_result) -> bool:
    """Still the same file, unchanged (cuda.core's guard): inode, size and mtime. A rename gives a new
    inode; a rewrite in place changes size or mtime."""
    return (a.st_dev, a.st_ino, a.st_size, a.st_mtime_ns) == (b.st_dev, b.st_ino, b.st_size, b.st_mtime_ns)
