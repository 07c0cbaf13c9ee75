"""What ``aot cache`` and ``aot doctor`` report about the per-user cache, and what ``aot cache clear``
removes. Reads only a cache that passes :mod:`aot.runtime.cache`'s trust checks, headers only; the
loader never needs any of this (only the CLI imports it).
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..core import format as fmt
from ..core.env import CACHE_MAX_BYTES
from ..core.errors import AotError, ArtifactError
from ..core.fs import NOFOLLOW, UnsafePath, open_trusted_root, same_file, sweep_temp
from .cache import (_CLOEXEC, CCCL_DIR, NVRTC_DIR, STUB_DIR, ArtifactCache, UnsafeCacheError, cache_root,
                    enabled)


@dataclass
class Entry:
    path: Path
    size: int
    name: str = "?"
    sm: int | None = None
    cuda_cccl: str = "?"
    aot: str = "?"
    problem: str | None = None  # unreadable or corrupt header


@dataclass
class CacheInfo:
    root: Path
    state: str  # "ok" | "absent" | "disabled" | "unsafe" | "unusable"
    problem: str | None = None
    cap: int = 0
    entries: list[Entry] = field(default_factory=list)
    locks: int = 0
    nvrtc_files: int = 0
    nvrtc_bytes: int = 0
    stub_files: int = 0
    stub_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        return sum(e.size for e in self.entries) + self.nvrtc_bytes + self.stub_bytes


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


def read_header(path: Path) -> dict:
    """An artifact's header only: at most 12 bytes + 64 KiB read, never through a link or from a non-file."""
    fd = os.open(path, os.O_RDONLY | NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    with open(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ArtifactError(f"{path}: not a regular file")
        head = f.read(fmt.PREFIX_LEN)
        if len(head) == fmt.PREFIX_LEN:
            hlen = int.from_bytes(head[len(fmt.MAGIC):], "little")
            head += f.read(min(hlen, fmt.MAX_HEADER_LEN))
        return fmt.decode_header(head)[0]


def _tree_size(path: Path) -> tuple[int, int]:
    files = size = 0
    for dirpath, _dirs, names in os.walk(path):  # does not follow directory symlinks
        for n in names:
            try:
                size += os.lstat(os.path.join(dirpath, n)).st_size
                files += 1
            except OSError:
                pass
    return files, size


def inspect_cache() -> CacheInfo:
    """What ``aot cache info`` and ``aot doctor`` print. Reads only a trusted cache, headers only."""
    root = cache_root()
    state, why = root_state()
    info = CacheInfo(root, state, why, CACHE_MAX_BYTES.get())
    if state != "ok":
        return info
    store = ArtifactCache(root / CCCL_DIR)
    try:
        entries = store._scan() if (root / CCCL_DIR).is_dir() else []
    except (OSError, ArtifactError) as e:
        info.state, info.problem = "unsafe" if isinstance(e, UnsafeCacheError) else "unusable", str(e)
        return info
    for path, st in entries:
        ent = Entry(path, st.st_size)
        try:
            h = read_header(path)
            ent.name, ent.sm = h["name"], h["sm"]
            ent.cuda_cccl, ent.aot = str(h["producer"].get("cuda_cccl", "?")), str(h["producer"].get("aot", "?"))
        except (OSError, ArtifactError) as err:
            ent.problem = str(err)
        info.entries.append(ent)
    if (root / CCCL_DIR).is_dir():
        info.locks = sum(1 for _ in (root / CCCL_DIR).glob("*/*.lock"))
    if (root / NVRTC_DIR).is_dir() and not (root / NVRTC_DIR).is_symlink():
        info.nvrtc_files, info.nvrtc_bytes = _tree_size(root / NVRTC_DIR)
    if (root / STUB_DIR).is_dir() and not (root / STUB_DIR).is_symlink():
        info.stub_files, info.stub_bytes = _tree_size(root / STUB_DIR)
    return info


def _remove_idle_locks(store: Path) -> int:
    """Lock files no process holds (a live build's lock is left alone)."""
    import fcntl
    removed = 0
    for lock in store.glob("*/*.lock"):
        try:
            fd = os.open(lock, os.O_RDWR | NOFOLLOW | _CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held, now = os.fstat(fd), os.lstat(lock)
            if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
                os.unlink(lock)
                removed += 1
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def clear_cache(stale: bool = False) -> tuple[int, int]:
    """Remove what aot wrote in the cache: every entry, cuda.core's NVRTC cache, the stand-in libcuda,
    lock files and temp files (``stale``: only CCCL entries of another cuda-cccl or aot version or with an
    unreadable header, stand-ins of another source, idle locks, old temp files). (files, bytes) removed.
    Refuses a cache directory another user could write: it would delete their files."""
    state, why = root_state()
    if state in ("absent", "disabled"):
        return 0, 0
    if state != "ok":
        raise AotError(f"refusing to clear the user cache: {why}")
    root = cache_root()
    files = size = 0
    if not stale:
        for sub in (CCCL_DIR, NVRTC_DIR, STUB_DIR):
            p = root / sub
            if p.is_symlink():
                p.unlink()
            elif p.is_dir():
                n, b = _tree_size(p)
                shutil.rmtree(p)
                files, size = files + n, size + b
        return files, size
    from ..core.version import __version__
    from ..core.versions import dist_version
    cccl = dist_version("cuda-cccl")
    store = root / CCCL_DIR
    if store.is_dir() and not store.is_symlink():
        for path, st in ArtifactCache(store)._scan():
            try:
                prod = read_header(path)["producer"]
                fresh = prod.get("cuda_cccl") == cccl and prod.get("aot") == __version__
            except (OSError, ArtifactError):
                fresh = False
            if fresh:
                continue
            try:
                if same_file(os.lstat(path), st):
                    os.unlink(path)
                    files, size = files + 1, size + st.st_size
            except OSError:
                pass
        files += _remove_idle_locks(store)
        files += sweep_temp(store)
    stubs = root / STUB_DIR
    if stubs.is_dir() and not stubs.is_symlink():
        from ..core.versions import stub_digest
        current = stub_digest()
        for d in stubs.iterdir():
            if d.name != current and d.is_dir() and not d.is_symlink():
                n, b = _tree_size(d)
                shutil.rmtree(d)
                files, size = files + n, size + b
    return files, size
