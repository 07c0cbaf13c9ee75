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
from dataclasses import dataclass, field
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


# ------------------------------------------------------------------------- removing only what is ours
@dataclass
class Removal:
    """What a clear removed, and what it left and why (one ``"PATH: reason"`` each)."""

    files: int = 0
    bytes: int = 0
    left: list[str] = field(default_factory=list)


#: Times a folder is emptied again when a racing writer of the same user put a file in it meanwhile.
RMDIR_RETRIES = 3
#: Deepest folder :func:`remove_owned` descends into (aot's cache trees are 3 levels deep).
MAX_REMOVE_DEPTH = 64
#: Most names one :func:`remove_owned` visits (a 2 GiB cache holds tens of thousands): a bound on its work
#: and its stack of pending names, far above any cache aot or cuda.core writes.
MAX_REMOVE_ENTRIES = 1_000_000


def _owner_problem(st: os.stat_result, shown: Path) -> str | None:
    if st.st_uid != os.geteuid():
        return f"{shown}: owned by uid {st.st_uid}, not by you (uid {os.geteuid()}); left in place"
    return None


def unlink_owned(parent_fd: int, name: str, shown: Path, seen: os.stat_result, res: Removal) -> None:
    """Unlink one non-directory ``name`` if it is ours, checked on a descriptor of the file itself (a regular
    file) and again on the name right before the unlink: a file a writer replaced meanwhile is looked at
    afresh. A symlink is removed, never followed."""
    for _ in range(RMDIR_RETRIES):
        st = seen
        if stat.S_ISREG(seen.st_mode):
            try:
                fd = os.open(name, os.O_RDONLY | NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent_fd)
            except FileNotFoundError:
                return
            except OSError:
                fd = -1  # unreadable (mode 000): the lstat below is all there is to check
            if fd >= 0:
                try:
                    st = os.fstat(fd)
                finally:
                    os.close(fd)
        why = _owner_problem(st, shown)
        if why:
            res.left.append(why)
            return
        try:
            now = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                seen = now  # replaced by a writer since: check the new file
                continue
            os.unlink(name, dir_fd=parent_fd)
        except FileNotFoundError:
            return
        except OSError as e:
            res.left.append(f"{shown}: cannot remove: {e.strerror or e}")
            return
        res.files, res.bytes = res.files + 1, res.bytes + st.st_size
        return
    res.left.append(f"{shown}: replaced by another process {RMDIR_RETRIES} times while clearing; left in place")


def remove_owned(parent_fd: int, name: str, shown: Path, res: Removal) -> None:
    """Remove ``name`` (a file, a link or a whole folder) inside the folder open on ``parent_fd``, keeping to
    what the effective user owns: another user's file or folder is reported in ``res.left`` and left (its
    folder is not entered), and so are its parents, which then cannot be emptied. Folders are opened
    ``O_NOFOLLOW`` relative to their parent and their owner is checked on that descriptor; no recursion
    (an explicit stack of frames, each knowing its own depth: at most :data:`MAX_REMOVE_DEPTH` folders
    deep, so at most that many descriptors open, and at most :data:`MAX_REMOVE_ENTRIES` names visited).
    A folder a racing writer of the same user refilled is emptied again, up to :data:`RMDIR_RETRIES`
    times, then reported. Never raises ``OSError`` for one entry: everything not removed is in
    ``res.left``, with the full path."""
    # frames: [parent fd, name, shown path, own fd (None before the first visit), attempts, left before, depth]
    frames: list[list] = [[parent_fd, name, shown, None, 0, 0, 0]]
    visited = 0
    while frames:
        frame = frames[-1]
        pfd, nm, path, fd, attempts, left_before, depth = frame
        if visited + len(frames) > MAX_REMOVE_ENTRIES:  # the names seen and still to visit
            res.left.append(f"{shown}: holds more than {MAX_REMOVE_ENTRIES:,} entries; stopped after removing "
                            f"{res.files:,} files (run the clear again for the rest)")
            for f in frames:  # close what is open; nothing more is removed
                if f[3] is not None:
                    os.close(f[3])
            return
        if fd is None:
            visited += 1
            try:
                st = os.stat(nm, dir_fd=pfd, follow_symlinks=False)
            except FileNotFoundError:
                frames.pop()
                continue
            except OSError as e:
                res.left.append(f"{path}: {e.strerror or e}")
                frames.pop()
                continue
            if not stat.S_ISDIR(st.st_mode):
                unlink_owned(pfd, nm, path, st, res)
                frames.pop()
                continue
            why = _owner_problem(st, path)
            if why or depth >= MAX_REMOVE_DEPTH:
                res.left.append(why or f"{path}: nested deeper than {MAX_REMOVE_DEPTH} levels; left in place")
                frames.pop()
                continue
            try:
                fd = os.open(nm, DIR_FLAGS | NOFOLLOW, dir_fd=pfd)
            except FileNotFoundError:
                frames.pop()
                continue
            except OSError as e:
                res.left.append(f"{path}: cannot open: {e.strerror or e}")
                frames.pop()
                continue
            held = os.fstat(fd)
            why = _owner_problem(held, path)
            if why or (held.st_dev, held.st_ino) != (st.st_dev, st.st_ino):
                os.close(fd)
                res.left.append(why or f"{path}: replaced while clearing; left in place")
                frames.pop()
                continue
            frame[3], frame[5] = fd, len(res.left)
            frames.extend([fd, child, path / child, None, 0, 0, depth + 1] for child in _names(fd, path, res))
            continue
        try:  # second visit: the children are done
            os.rmdir(nm, dir_fd=pfd)
        except FileNotFoundError:
            pass
        except OSError as e:
            if len(res.left) > left_before:
                pass  # what is inside was reported; the folder stays because of it
            elif e.errno in (errno.ENOTEMPTY, errno.EEXIST) and attempts < RMDIR_RETRIES:
                frame[4] = attempts + 1  # a writer added a file meanwhile: empty it again
                frames.extend([fd, child, path / child, None, 0, 0, depth + 1] for child in _names(fd, path, res))
                continue
            else:
                res.left.append(f"{path}: cannot remove the folder: {e.strerror or e}"
                                + (" (another process kept adding files)" if e.errno == errno.ENOTEMPTY else ""))
        os.close(fd)
        frames.pop()


def _names(fd: int, shown: Path, res: Removal) -> list[str]:
    try:
        return os.listdir(fd)
    except OSError as e:
        res.left.append(f"{shown}: cannot list: {e.strerror or e}")
        return []
