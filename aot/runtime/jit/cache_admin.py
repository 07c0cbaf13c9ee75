"""What ``aot cache`` and ``aot doctor`` report about the per-user cache, and what ``aot cache clear``
removes. Reads only a cache that passes :mod:`aot.runtime.jit.cache`'s trust checks, headers only; the
loader never needs any of this (only the CLI imports it).
"""

from __future__ import annotations

import errno
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ...core import format as fmt
from ...core.env import CACHE_MAX_BYTES
from ...core.errors import AotError, ArtifactError
from ...core.fs import (NOFOLLOW, TMP_PREFIX, Removal, UnsafePath, unlink_owned, open_trusted_root,
                       open_trusted_subdir, remove_owned, same_file, trust_problem)
from ...core.text import printable
from .cache import _CLOEXEC, CCCL_DIR, NVRTC_DIR, STUB_DIR, UnsafeCacheError, cache_root, enabled


@dataclass
class Entry:
    path: Path
    size: int
    name: str = "?"
    sm: int | None = None
    cuda_cccl: str = "?"
    aot: str = "?"
    problem: str | None = None  # unreadable or corrupt header
    trusted: bool = True  # owned by the current user and writable by nobody else (else neither read nor counted)


@dataclass
class CacheInfo:
    root: Path
    state: str  # "ok" | "absent" | "disabled" | "unsafe" | "unusable"
    problem: str | None = None
    cap: int = 0
    entries: list[Entry] = field(default_factory=list)
    locks: int = 0
    skipped: list[str] = field(default_factory=list)  # shard folders not entered, and why
    #: Entries another user owns or others can write: listed by path and why, neither read nor counted.
    untrusted: list[Entry] = field(default_factory=list)
    nvrtc_files: int = 0
    nvrtc_bytes: int = 0
    stub_files: int = 0
    stub_bytes: int = 0
    #: Files under ``nvrtc/`` and the stand-in folder left out of the counts for the same reason.
    untrusted_files: int = 0

    @property
    def total_bytes(self) -> int:
        """Bytes of the entries and files counted: the current user's own, writable by nobody else."""
        return sum(e.size for e in self.entries) + self.nvrtc_bytes + self.stub_bytes

    @property
    def skipped_count(self) -> int:
        """Entries and files seen but not counted (another user's, or writable by others)."""
        return len(self.untrusted) + self.untrusted_files


def root_state() -> tuple[str, str | None]:
    """("ok" | "absent" | "disabled" | "unsafe" | "unusable", why) for the cache root."""
    if not enabled():
        return "disabled", "AOT_DISABLE_CACHE is set"
    try:
        os.close(open_trusted_root(cache_root(), create=False))
    except (FileNotFoundError, NotADirectoryError):
        return "absent", None
    except UnsafePath as e:
        return "unsafe", str(e)
    except OSError as e:
        return "unusable", e.strerror or str(e)
    return "ok", None


def _header_of(fd: int) -> dict:
    """The header of the artifact open on ``fd``: at most 12 bytes + 64 KiB read."""
    with open(os.dup(fd), "rb") as f:
        head = f.read(fmt.PREFIX_LEN)
        if len(head) == fmt.PREFIX_LEN:
            hlen = int.from_bytes(head[len(fmt.MAGIC):], "little")
            head += f.read(min(hlen, fmt.MAX_HEADER_LEN))
    return fmt.decode_header(head)[0]


def _entry(sfd: int, name: str, shown: Path) -> Entry | None:
    """One ``<key>.aot`` of the shard open on ``sfd``: opened ``O_NOFOLLOW`` (a link is never followed),
    then owner and mode checked on that descriptor before a byte is read (another user's entry is listed,
    not read); ``None`` for what is not a regular file."""
    try:
        fd = os.open(name, os.O_RDONLY | NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0), dir_fd=sfd)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            return None  # a symbolic link: not an entry aot wrote, and never followed
        return Entry(shown, 0, problem=f"cannot open: {e.strerror or e}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        ent = Entry(shown, st.st_size)
        why = trust_problem(st, "entry")
        if why:
            ent.problem, ent.trusted = f"{why}; not read", False
            return ent
        try:
            h = _header_of(fd)
            ent.name, ent.sm = printable(str(h["name"]), 128), h["sm"]
            prod = h["producer"]
            ent.cuda_cccl, ent.aot = (printable(str(prod.get(k, "?")), 64) for k in ("cuda_cccl", "aot"))
        except (OSError, ArtifactError, KeyError, TypeError, AttributeError) as err:
            ent.problem = printable(str(err), 300)
        return ent
    finally:
        os.close(fd)


def _entries(root: Path, info: CacheInfo) -> list[Entry]:
    """Every ``<key>.aot`` of ``root/cccl``: each level opened relative to the one above, without
    following links, and checked (:func:`aot.runtime.jit.cache._open_chain`'s rule); an untrusted shard
    folder (a link, another user's) is not entered, and ``info.skipped`` says why; lock files are counted
    into ``info.locks`` on the way, and an entry another user owns or others can write into ``info.untrusted``
    (listed, not read, not counted: issue 37 found ``cache info`` counting them)."""
    out: list[Entry] = []
    top = open_trusted_subdir_chain(root, CCCL_DIR)
    try:
        for shard in sorted(os.listdir(top)):
            where = root / CCCL_DIR / shard
            try:
                sfd = open_trusted_subdir(top, shard, create=False, what=str(where))
            except (FileNotFoundError, NotADirectoryError):
                continue
            except (OSError, UnsafePath) as e:
                info.skipped.append(f"{e}; not entered" if isinstance(e, UnsafePath) else
                                    f"{where}: {e.strerror or e}; not entered")
                continue
            try:
                for name in sorted(os.listdir(sfd)):
                    if name.endswith(".lock") and not name.startswith("."):
                        info.locks += 1
                    elif name.endswith(".aot") and not name.startswith("."):
                        ent = _entry(sfd, name, where / name)
                        if ent is not None:
                            (out if ent.trusted else info.untrusted).append(ent)
            finally:
                os.close(sfd)
    finally:
        os.close(top)
    return out


def open_trusted_subdir_chain(root: Path, sub: str) -> int:
    """A checked descriptor of ``root/sub`` (the root checked too); :class:`UnsafeCacheError` if either
    could have been written by another user."""
    from .cache import _open_chain
    return _open_chain(root, [sub], create=False, cache_wide=2)


def _tree_size(path: Path) -> tuple[int, int, int]:
    """(files, bytes, files skipped) under ``path``: only regular files the current user owns and nobody else
    can write are counted (:func:`aot.core.fs.trust_problem`); links are neither followed nor counted."""
    files = size = skipped = 0
    for dirpath, _dirs, names in os.walk(path):  # does not follow directory symlinks
        for n in names:
            try:
                st = os.lstat(os.path.join(dirpath, n))
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if trust_problem(st, "file"):
                skipped += 1
                continue
            size += st.st_size
            files += 1
    return files, size, skipped


def inspect_cache() -> CacheInfo:
    """What ``aot cache info`` and ``aot doctor`` print. Reads only a trusted cache, headers only, and of
    those only entries the user owns and nobody else can write (checked on the descriptor read); counts
    (entries, files, bytes) only those too, and says how many others it saw (:attr:`CacheInfo.skipped_count`)."""
    root = cache_root()
    state, why = root_state()
    info = CacheInfo(root, state, why, CACHE_MAX_BYTES.get())
    if state != "ok":
        return info
    try:
        info.entries = _entries(root, info) if (root / CCCL_DIR).is_dir() else []
    except (OSError, ArtifactError) as e:
        info.state, info.problem = "unsafe" if isinstance(e, UnsafeCacheError) else "unusable", str(e)
        return info
    if (root / NVRTC_DIR).is_dir() and not (root / NVRTC_DIR).is_symlink():
        info.nvrtc_files, info.nvrtc_bytes, skipped = _tree_size(root / NVRTC_DIR)
        info.untrusted_files += skipped
    if (root / STUB_DIR).is_dir() and not (root / STUB_DIR).is_symlink():
        info.stub_files, info.stub_bytes, skipped = _tree_size(root / STUB_DIR)
        info.untrusted_files += skipped
    return info


def _idle_lock(dfd: int, name: str, shown: Path, res: Removal) -> None:
    """Remove lock file ``name`` if it is ours and no process holds it (a live build's lock is left alone);
    the owner is checked on the descriptor that is locked, and the name must still name it."""
    import fcntl
    try:
        fd = os.open(name, os.O_RDWR | NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
    except OSError:
        return
    try:
        held = os.fstat(fd)
        if held.st_uid != os.geteuid():
            res.left.append(f"{shown}: owned by uid {held.st_uid}, not by you; left in place")
            return
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        now = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
            os.unlink(name, dir_fd=dfd)
            res.files += 1
    except OSError:  # held by a live build, or gone
        pass
    finally:
        os.close(fd)


def _stale_entry(dfd: int, name: str, shown: Path, fresh: Callable[[dict], bool], res: Removal) -> None:
    """Remove entry ``name`` if it is ours and stale (another cuda-cccl or aot, or an unreadable header):
    the owner is checked and the header read on one descriptor, and the name must still name that file."""
    try:
        fd = os.open(name, os.O_RDONLY | NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, dir_fd=dfd)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            res.left.append(f"{shown}: owned by uid {st.st_uid}, not by you; left in place")
            return
        if not stat.S_ISREG(st.st_mode):
            return
        try:
            with open(os.dup(fd), "rb") as f:
                head = f.read(fmt.PREFIX_LEN)
                if len(head) == fmt.PREFIX_LEN:
                    head += f.read(min(int.from_bytes(head[len(fmt.MAGIC):], "little"), fmt.MAX_HEADER_LEN))
            keep = fresh(fmt.decode_header(head)[0])
        except (OSError, ArtifactError, KeyError, TypeError, AttributeError):
            keep = False
        if keep:
            return
        try:
            if same_file(os.stat(name, dir_fd=dfd, follow_symlinks=False), st):  # not rewritten since
                os.unlink(name, dir_fd=dfd)
                res.files, res.bytes = res.files + 1, res.bytes + st.st_size
        except FileNotFoundError:
            pass
        except OSError as e:
            res.left.append(f"{shown}: cannot remove: {e.strerror or e}")
    finally:
        os.close(fd)


def _old_temp(dfd: int, name: str, shown: Path, res: Removal, older_than_s: float = 3600.0) -> None:
    """Remove a writer's temp file if it is ours and older than an hour (a live writer owns young ones)."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError:
        return
    if time.time() - st.st_mtime >= older_than_s:
        unlink_owned(dfd, name, shown, st, res)


def _clear_stale(root_fd: int, root: Path, res: Removal) -> None:
    """``clear --stale`` inside the (checked) root: per shard folder of ``cccl/`` that is ours, stale
    entries, idle locks and old temp files; stand-ins of another source."""
    from ...core.version import __version__
    from ...core.versions import dist_version, stub_digest
    cccl = dist_version("cuda-cccl")

    def fresh(header: dict) -> bool:
        prod = header["producer"]
        return prod.get("cuda_cccl") == cccl and prod.get("aot") == __version__

    for sub, per_shard in ((CCCL_DIR, True), (STUB_DIR, False)):
        try:
            top = open_trusted_subdir(root_fd, sub, create=False, what=str(root / sub))
        except FileNotFoundError:
            continue
        except (OSError, UnsafePath) as e:
            res.left.append(f"{root / sub}: not cleared: {e}")
            continue
        try:
            if not per_shard:
                current = stub_digest()
                for name in sorted(os.listdir(top)):
                    if name != current:
                        remove_owned(top, name, root / sub / name, res)
                continue
            for shard in sorted(os.listdir(top)):
                try:
                    sfd = open_trusted_subdir(top, shard, create=False, what=str(root / sub / shard))
                except (OSError, UnsafePath) as e:
                    if not isinstance(e, (FileNotFoundError, NotADirectoryError)):
                        res.left.append(f"{root / sub / shard}: not cleared: {e}")
                    continue
                try:
                    for name in sorted(os.listdir(sfd)):
                        shown = root / sub / shard / name
                        if name.startswith(TMP_PREFIX):
                            _old_temp(sfd, name, shown, res)
                        elif name.endswith(".lock"):
                            _idle_lock(sfd, name, shown, res)
                        elif name.endswith(".aot"):
                            _stale_entry(sfd, name, shown, fresh, res)
                finally:
                    os.close(sfd)
        finally:
            os.close(top)


def clear_cache(stale: bool = False) -> Removal:
    """Remove what aot wrote in the cache: every entry, cuda.core's NVRTC cache, the stand-in libcuda,
    lock files and temp files (``stale``: only CCCL entries of another cuda-cccl or aot version or with an
    unreadable header, stand-ins of another source, idle locks, old temp files).

    Only what the user owns is removed, checked on the descriptor as reads are: another user's file or
    folder is left and listed in the result's ``left`` with the reason, and so is anything a racing writer
    kept refilling. Refuses (:class:`AotError`) a cache directory another user could write: it would
    delete their files."""
    state, why = root_state()
    res = Removal()
    if state in ("absent", "disabled"):
        return res
    root = cache_root()
    if state != "ok":
        raise AotError(f"refusing to clear the user cache: {_named(root, why)}")
    try:
        root_fd = open_trusted_root(root, create=False)
    except (OSError, UnsafePath) as e:
        raise AotError(f"refusing to clear the user cache: "
                       f"{_named(root, e.strerror if isinstance(e, OSError) and e.strerror else str(e))}") from None
    try:
        if stale:
            _clear_stale(root_fd, root, res)
        else:
            for sub in (CCCL_DIR, NVRTC_DIR, STUB_DIR):
                remove_owned(root_fd, sub, root / sub, res)
    finally:
        os.close(root_fd)
    return res


def _named(root: Path, why: str | None) -> str:
    """``why`` with the cache path in it (``Permission denied`` alone names nothing)."""
    why = why or "unusable"
    return why if str(root) in why else f"{root}: {why}"
