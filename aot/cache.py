"""The per-user cache root and its file-backed entries (atomic, content-keyed, corruption-tolerant).

Entries are artifact files (the same magic-header format as packaged ones) under
``<root>/cccl/<key[:2]>/<key>.aot``; NVRTC JIT results are cached by cuda.core's own
``FileStreamProgramCache`` under ``<root>/nvrtc`` (we do not write a second NVRTC cache).
A reader never sees a torn file (tmp + fsync + rename); a corrupt entry is deleted and rebuilt.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._env import CACHE_DIR, DISABLE_CACHE
from ._fs import atomic_write, sweep_temp
from .errors import ArtifactError
from . import format as fmt


def cache_root() -> Path:
    override = CACHE_DIR.get()
    if override is not None:
        return Path(override)
    import platformdirs
    return Path(platformdirs.user_cache_dir("aot", appauthor=False))


def enabled() -> bool:
    return not DISABLE_CACHE.get()


class ArtifactCache:
    """Bytes-in/bytes-out store of artifacts keyed by content key. ``get`` only: no check-then-read."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else cache_root() / "cccl"

    def _path(self, key: str) -> Path:
        if not fmt.is_sha256_hex(key):
            raise ValueError(f"bad cache key {key!r}")
        return self.root / key[:2] / f"{key}.aot"

    def get(self, key: str) -> fmt.Artifact | None:
        """The cached artifact, ``None`` if absent. A corrupt entry raises :class:`ArtifactError` after it
        has been deleted (so the caller warns once and the next process rebuilds it). An entry that exists
        but cannot be read (permissions, I/O error) raises :class:`ArtifactError` and is left alone."""
        path = self._path(key)
        try:
            before = os.stat(path)
            data = fmt._read_regular(path, fmt.MAX_FILE_LEN)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise ArtifactError(f"{path}: cannot read user-cache entry: {e.strerror or e}") from None
        except ArtifactError as e:  # not a regular file, or larger than any artifact
            raise ArtifactError(f"corrupt user-cache entry {self._discard(path, before)}: {e}") from None
        try:
            art = fmt.decode(data)
        except ArtifactError as e:
            raise ArtifactError(f"corrupt user-cache entry {self._discard(path, before)}: {path}: {e}") from None
        if art.header.get("content_key") != key:
            raise ArtifactError(f"{path}: user-cache entry holds another key; {self._discard(path, before)}")
        return art

    @staticmethod
    def _discard(path: Path, seen: os.stat_result) -> str:
        """Delete the bad entry ``seen`` at ``path``, unless another process has meanwhile replaced it with
        a new file (a rename gives a new inode): a good entry written by a racing builder is never lost."""
        try:
            now = os.stat(path)
            if (now.st_dev, now.st_ino) != (seen.st_dev, seen.st_ino):
                return "left alone (already replaced)"
            os.unlink(path)
        except FileNotFoundError:
            return "deleted"
        except OSError as e:
            return f"could not be deleted ({e.strerror or e})"
        return "deleted"

    def put(self, key: str, data: bytes) -> Path:
        path = self._path(key)
        atomic_write(path, data)
        return path

    def sweep(self) -> int:
        return sweep_temp(self.root) if self.root.exists() else 0

    def clear(self) -> None:
        import shutil
        if self.root.exists():
            shutil.rmtree(self.root)
