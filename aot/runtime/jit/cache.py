"""The per-user cache: where it is, whether it can be trusted, the CCCL artifact store in it, and what
``aot cache`` reports and clears.

Layout under the root (``AOT_CACHE_DIR``, else platformdirs' user cache dir for ``aot``)::

    cccl/<key[:2]>/<key>.aot       artifact files (the packaged format), written tmp + fsync + rename
    cccl/<key[:2]>/<key>.lock      held while one process JIT-builds that key; removed afterwards
    nvrtc/                         cuda.core's FileStreamProgramCache (we do not write a second NVRTC cache)
    stub/<digest>/libcuda.so.1     the stand-in libcuda of a source checkout (see aot.build.toolchain)

Trust follows ssh and pip: the root, every directory below it down to an entry, and the entry must be
owned by the effective user and writable by nobody else, or they are never read. A cache key is
computable from public information, so in a directory another user can write (a mode-1777 shared
directory, a symlink into someone else's home) a self-consistent planted entry would otherwise be
served as ours. Reads are ``get``-only (no check-then-read): every level is opened relative to the
descriptor of the level above, without following symlinks, and the owner is checked on the descriptor
that is then read. Directories aot creates are 0700, entries 0600.

An untrusted root (or ``cccl/``) raises :class:`UnsafeCacheError`: the caller warns once per process and
works as if the cache were disabled. An untrusted entry raises :class:`UnsafeEntryError`: the caller
warns, serves from JIT, and neither deletes nor overwrites it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
import time
from pathlib import Path
from typing import Iterator

from ...core import format as fmt
from ...core.env import CACHE_DIR, CACHE_MAX_BYTES, DISABLE_CACHE
from ...core.fs import (DIR_FLAGS, NOFOLLOW, Removal, UnsafePath, atomic_write, open_trusted_root,
                       open_trusted_subdir, remove_owned, same_file, sweep_temp, trust_problem)
from ...core.errors import ArtifactError

CCCL_DIR, NVRTC_DIR, STUB_DIR = "cccl", "nvrtc", "stub"
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_LOCK_RETRIES = 100  # a lock file removed by the holder we waited on: open the new one (bounded)


class UnsafeCacheError(ArtifactError):
    """The cache directory itself (the root or ``cccl/``) could have been written by another user."""


class UnsafeEntryError(ArtifactError):
    """One entry (or its shard directory) could have been written by another user: not read, not replaced."""


_reported: set[str] = set()
_reported_lock = threading.Lock()


def first_report(what: str) -> bool:
    """True the first time ``what`` is reported in this process (the unsafe-directory warning is once)."""
    with _reported_lock:
        if what in _reported:
            return False
        _reported.add(what)
        return True


def cache_root() -> Path:
    override = CACHE_DIR.get()
    if override is not None:
        return Path(override)
    import platformdirs
    return Path(platformdirs.user_cache_dir("aot", appauthor=False))


def enabled() -> bool:
    return not DISABLE_CACHE.get()


def _open_chain(top: Path, names: list[str], *, create: bool, cache_wide: int) -> int:
    """Descriptor of ``top/names...``, every level checked. The first ``cache_wide`` levels (``top``
    counts as one) failing the check raise :class:`UnsafeCacheError`, deeper ones :class:`UnsafeEntryError`;
    an absent level (not ``create``) raises ``FileNotFoundError``, an unusable path other ``OSError``."""
    try:
        fd = open_trusted_root(top, create=create)
    except UnsafePath as e:
        raise UnsafeCacheError(f"user cache {e}") from None
    path = top
    for depth, name in enumerate(names, start=1):
        path = path / name
        try:
            sub = open_trusted_subdir(fd, name, create=create, what=str(path))
        except UnsafePath as e:
            cls = UnsafeCacheError if depth < cache_wide else UnsafeEntryError
            raise cls(f"user cache {e}") from None
        finally:
            os.close(fd)
        fd = sub
    return fd


def private_dir(*names: str) -> Path:
    """``<root>/names...`` created 0700 where missing, every level checked (for cuda.core's NVRTC cache and
    the stand-in libcuda). Raises :class:`UnsafeCacheError` or ``OSError``."""
    root = cache_root()
    os.close(_open_chain(root, list(names), create=True, cache_wide=len(names) + 1))
    return root.joinpath(*names)


def _touch(dir_fd: int, name: str, seen: os.stat_result) -> None:
    """Mark an entry used (atime, the LRU order) on the file just read, if it is still that file."""
    try:
        fd = os.open(name, os.O_RDONLY | NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0), dir_fd=dir_fd)
    except OSError:
        return
    try:
        if same_file(os.fstat(fd), seen):
            os.utime(fd, ns=(time.time_ns(), seen.st_mtime_ns))
    except OSError:
        pass
    finally:
        os.close(fd)


class ArtifactCache:
    """Bytes-in/bytes-out store of artifacts keyed by content key. ``get`` only: no check-then-read."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else cache_root() / CCCL_DIR

    def _path(self, key: str) -> Path:
        if not fmt.is_sha256_hex(key):
            raise ValueError(f"bad cache key {key!r}")
        return self.root / key[:2] / f"{key}.aot"

    def _shard(self, key: str, *, create: bool) -> int:
        return _open_chain(self.root.parent, [self.root.name, key[:2]], create=create, cache_wide=2)

    def check(self) -> None:
        """Raise :class:`UnsafeCacheError` (or ``OSError``) unless the store's directories can be trusted."""
        os.close(_open_chain(self.root.parent, [self.root.name], create=False, cache_wide=2))

    def get(self, key: str) -> fmt.Artifact | None:
        """The cached artifact, ``None`` if absent. A corrupt entry raises :class:`ArtifactError` after it
        has been deleted (so the caller warns once and the next process rebuilds it). An entry that exists
        but cannot be read (permissions, I/O error) raises :class:`ArtifactError` and is left alone; one
        another user could have written raises :class:`UnsafeEntryError`, a cache directory another user
        could have written :class:`UnsafeCacheError`, an unusable cache path (too long, a symlink loop,
        no permission) ``OSError``."""
        path = self._path(key)
        try:
            dfd = self._shard(key, create=False)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            return self._get_in(dfd, key, path)
        finally:
            os.close(dfd)

    def _get_in(self, dfd: int, key: str, path: Path) -> fmt.Artifact | None:
        name = path.name
        seen: list[os.stat_result] = []

        def trusted(st: os.stat_result) -> None:
            seen.append(st)
            why = trust_problem(st, f"user-cache entry {path}")
            if why:
                raise UnsafeEntryError(f"{why}; not read")

        try:
            data = fmt._read_regular(name, fmt.MAX_FILE_LEN, dir_fd=dfd, nofollow=True, check=trusted)
        except FileNotFoundError:
            return None
        except UnsafeEntryError:
            raise
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise UnsafeEntryError(f"user-cache entry {path} is a symbolic link; not read") from None
            raise ArtifactError(f"{path}: cannot read user-cache entry: {e.strerror or e}") from None
        except ArtifactError as e:  # not a regular file, or larger than any artifact
            raise ArtifactError(f"corrupt user-cache entry {self._discard(dfd, name, seen)}: {e}") from None
        try:
            art = fmt.decode(data)
        except ArtifactError as e:
            raise ArtifactError(f"corrupt user-cache entry {self._discard(dfd, name, seen)}: {path}: {e}") from None
        if art.header.get("content_key") != key:
            raise ArtifactError(f"{path}: user-cache entry holds another key; {self._discard(dfd, name, seen)}")
        _touch(dfd, name, seen[0])
        return art

    @staticmethod
    def _discard(dfd: int, name: str, seen: list[os.stat_result]) -> str:
        """Delete the bad entry we read, unless another process has meanwhile replaced it with a new file
        (a rename gives a new inode): a good entry written by a racing builder is never lost."""
        try:
            now = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if not seen or (now.st_dev, now.st_ino) != (seen[0].st_dev, seen[0].st_ino):
                return "left alone (already replaced)"
            os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            return "deleted"
        except OSError as e:
            return f"could not be deleted ({e.strerror or e})"
        return "deleted"

    def put(self, key: str, data: bytes) -> Path:
        """Write an entry (0600, atomically), then evict past the size cap. Raises like :meth:`get`."""
        path = self._path(key)
        os.close(self._shard(key, create=True))
        atomic_write(path, data, mode=0o600)
        try:
            self.enforce_cap()
        except (OSError, ArtifactError):  # eviction is housekeeping: the entry is written either way
            pass
        return path

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[bool]:
        """An exclusive advisory lock on ``<key>.lock`` for one JIT build, removed when released. Yields
        whether it is held: best effort, ``False`` where the directory is unusable or the file system has no
        locks. The lock file is opened ``O_NOFOLLOW`` 0600 and must be ours: a planted link or file is never
        followed or written."""
        try:
            import fcntl
            dfd = self._shard(key, create=True)
        except (ImportError, OSError, ArtifactError):
            yield False
            return
        name = f"{key}.lock"
        fd: int | None = None
        locked = False
        try:
            for _ in range(_LOCK_RETRIES):
                try:
                    fd = os.open(name, os.O_RDWR | os.O_CREAT | NOFOLLOW | _CLOEXEC, 0o600, dir_fd=dfd)
                    held = os.fstat(fd)
                    if not stat.S_ISREG(held.st_mode) or held.st_uid != os.geteuid():
                        break
                    fcntl.flock(fd, fcntl.LOCK_EX)
                    now = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                    if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                        locked = True
                        break
                except FileNotFoundError:  # removed by the holder we waited for: take the next one
                    pass
                except OSError:  # a link (ELOOP), ENOLCK / EOPNOTSUPP: go on without the lock
                    break
                if fd is not None:
                    os.close(fd)
                    fd = None
            yield locked
        finally:
            try:
                if locked and fd is not None:  # still holding it, and the name still names our inode: remove it
                    now = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                    held = os.fstat(fd)
                    if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                        os.unlink(name, dir_fd=dfd)
            except OSError:
                pass
            finally:
                if fd is not None:
                    os.close(fd)
                os.close(dfd)

    def _scan(self) -> list[tuple[Path, os.stat_result]]:
        """Every ``<key>.aot`` under the (checked) store, with its lstat."""
        self.check()
        out = []
        with os.scandir(self.root) as shards:
            for shard in shards:
                if not shard.is_dir(follow_symlinks=False):
                    continue
                with os.scandir(shard.path) as files:
                    for f in files:
                        if f.name.endswith(".aot") and not f.name.startswith("."):
                            st = f.stat(follow_symlinks=False)
                            if stat.S_ISREG(st.st_mode):
                                out.append((Path(f.path), st))
        return out

    def enforce_cap(self, max_bytes: int | None = None) -> int:
        """Evict least recently used entries (atime, set on every hit) until the store fits ``max_bytes``
        (default ``AOT_CACHE_MAX_BYTES``; 0 = no cap). A delete is guarded by (inode, size, mtime): an
        entry a racing writer has just replaced is kept. Returns the number of entries evicted."""
        cap = CACHE_MAX_BYTES.get() if max_bytes is None else max_bytes
        if cap <= 0 or not self.root.is_dir():
            return 0
        entries = self._scan()
        total = sum(st.st_size for _, st in entries)
        evicted = 0
        for path, st in sorted(entries, key=lambda e: e[1].st_atime_ns):
            if total <= cap:
                break
            if st.st_uid != os.geteuid():  # another user's file is never deleted (nor counted as ours)
                continue
            try:
                now = os.lstat(path)
                if not same_file(now, st):
                    total += now.st_size - st.st_size
                    continue
                os.unlink(path)
            except FileNotFoundError:
                pass
            total -= st.st_size
            evicted += 1
        return evicted

    def sweep(self) -> int:
        return sweep_temp(self.root) if self.root.exists() else 0

    def clear(self) -> list[str]:
        """Remove the store, keeping to what the user owns (:func:`aot.core.fs.remove_owned`); returns what
        was left, one ``"PATH: reason"`` each."""
        res = Removal()
        try:
            parent = os.open(self.root.parent, DIR_FLAGS)
        except FileNotFoundError:
            return res.left
        try:
            remove_owned(parent, self.root.name, self.root, res)
        finally:
            os.close(parent)
        return res.left
