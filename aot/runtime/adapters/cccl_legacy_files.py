"""The files a cccl-legacy key holds the content of (issue 44): where they are and how they are hashed.

The compilers (NVRTC with its builtins, nvJitLink), NVVM and libdevice (the operators' compiler), and the
include directories cuda.compute's builds name: about 360 MB, hashed once per process by a thread started
with the shims (:class:`aot.runtime.adapters.cccl_legacy.Shims`), beside the library's imports.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def _sha256(path: Path) -> bytes:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)  # releases the GIL for blocks over 2 KiB: the pool's threads hash side by side
    return h.digest()


def sha256_many(paths: list[Path]) -> list[bytes]:
    """Each file's sha256, in order, hashed by up to eight threads: the key needs about 300 MB of compilers
    and headers hashed once per process, which one thread took 0.6-2 s for (longer than a library's imports,
    so the first call waited); reading and hashing release the GIL."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    workers = max(1, min(8, cpus, len(paths)))
    if workers == 1:
        return [_sha256(p) for p in paths]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="aot-cccl-legacy-hash") as pool:
        return list(pool.map(_sha256, paths, chunksize=max(1, len(paths) // (workers * 4))))


def nvvm_files(major: int = 13) -> list[Path]:
    """The NVVM library and libdevice of the CUDA wheels (resolved): what numba-cuda compiles operators with
    where it finds them there (:mod:`.cccl_legacy_ops` serves an operator only where it would load these)."""
    try:
        import nvidia
    except ImportError:
        return []
    found: set[Path] = set()
    for base in getattr(nvidia, "__path__", []):
        root = Path(base, f"cu{major}")
        for pattern in ("lib/libnvvm.so*", "nvvm/lib64/libnvvm.so*", "nvvm/libdevice/libdevice*.bc"):
            found |= {p.resolve() for p in root.glob(pattern) if p.is_file()}
    return sorted(found)


def include_dirs_to_prefetch(major: int = 13) -> list[Path]:
    """The include directories cuda.compute's builds name: cuda-cccl's headers and the CUDA wheels'."""
    dirs = []
    for mod, sub in (("cuda.cccl", ("headers", "include")), ("nvidia", (f"cu{major}", "include"))):
        try:
            m = __import__(mod, fromlist=["_"])
        except ImportError:
            continue
        dirs += [Path(p, *sub) for p in getattr(m, "__path__", []) if Path(p, *sub).is_dir()]
    return dirs
