"""The loader's last resort: the per-user cache, then JIT for this device (persisted for next time).

CCCL: the same recipe as the build (``aot.compile.build_cccl`` with the ProxyArray fix) for exactly the
device's SM, serialized into an artifact file in the user cache. Racing processes build once: the
builder holds an advisory lock on ``<key>.lock`` and the others re-check the cache once they get it.
NVRTC: ``cuda.core.Program`` with ``cuda.core.utils.FileStreamProgramCache`` (not a second cache).

Disk trouble (read-only or full cache dir, missing permissions) never stops the loader: the JIT result
is used in memory and one warning says why it was not persisted.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable

from . import format as fmt
from .cache import ArtifactCache, cache_root, enabled
from .errors import ArtifactError
from .spec import CcclSpec, NvrtcUnit, item_key


def _toolchain_for_cache() -> dict[str, str]:
    from .toolchain import versions
    return versions()


@contextlib.contextmanager
def _file_lock(path: Path):
    """An exclusive advisory lock across processes (best effort: no lock if the dir is unusable)."""
    try:
        import fcntl
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except (OSError, ImportError):
        fd = None
    if fd is None:
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        locked = True
    except OSError:  # ENOLCK / EOPNOTSUPP (some network file systems): go on without the lock
        locked = False
    try:
        yield locked
    finally:
        try:
            if locked:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            pass
        finally:
            os.close(fd)


def cccl_from_cache_or_jit(spec: CcclSpec, sm: int, errors: list, warn: Callable[[str], None]):
    """(payload, source, path): a blob for ``spec`` on ``sm`` from the user cache, else freshly built."""
    toolchain = _toolchain_for_cache()
    key = item_key(spec, sm, "cccl-blob", toolchain)
    use_cache = enabled()
    cache = ArtifactCache() if use_cache else None
    noted: set[str] = set()

    def note(msg: str) -> None:  # the cache is looked at twice (before and under the lock): warn once
        if msg not in noted:
            noted.add(msg)
            errors.append(msg)
            warn(msg)

    def lookup():
        if cache is None:
            return None
        try:
            art = cache.get(key)
        except ArtifactError as e:
            note(f"aot: {e}")
            return None
        except OSError:
            return None
        if art is None:
            return None
        h = art.header
        # Not the name: identically defined specs (or a renamed one) share a key and an entry.
        if (h["family"], h["sm"], h["payload_kind"]) != ("cccl", sm, "cccl-blob"):
            note(f"aot: user-cache entry {cache._path(key)} describes another artifact; ignored")
            return None
        from .compat import check_producer
        try:
            check_producer(art.header["producer"], "cccl")
        except ArtifactError as e:
            note(f"aot: user-cache entry {cache._path(key)} ignored: {e}")
            return None
        return art

    art = lookup()
    if art is not None:
        return art.payload, "cache", str(cache._path(key))
    lock_path = cache._path(key).with_suffix(".lock") if cache is not None else None
    with (_file_lock(lock_path) if lock_path is not None else contextlib.nullcontext()):
        art = lookup()  # another process may have built it while we waited for the lock
        if art is not None:
            return art.payload, "cache", str(cache._path(key))
        from .compile import compile_cccl
        payload = compile_cccl(spec, sm)  # applies the ProxyArray fix (cccl_patches) first
        path = None
        if cache is not None:
            header = fmt.make_header(family="cccl", name=spec.name, content_key=key, sm=sm,
                                     payload_kind="cccl-blob", payload=payload,
                                     producer={k: toolchain[k] for k in fmt.PRODUCER_FIELDS})
            try:
                path = str(cache.put(key, fmt.encode(header, payload)))
            except OSError as e:
                note(f"aot: cannot persist {spec.name} to the user cache {cache.root}: {e.strerror or e}; "
                     f"using the JIT result in memory")
            else:
                try:
                    cache.sweep()  # temp files of writers killed long ago (rare path: fine to walk the cache)
                except OSError:
                    pass
        return payload, "jit", path


def nvrtc_from_cache_or_jit(unit: NvrtcUnit, sm: int):
    """(ObjectCode, source, path) through cuda.core's own FileStreamProgramCache."""
    from cuda.core import Program
    from cuda.core.utils import FileStreamProgramCache, make_program_cache_key
    from .compile import program_options
    opts = program_options(unit, f"sm_{sm}")
    cache = None
    if enabled():
        try:
            cache = FileStreamProgramCache(cache_root() / "nvrtc")
        except OSError:
            cache = None
    source = "jit"
    if cache is not None:
        key = make_program_cache_key(code=unit.source, code_type="c++", options=opts, target_type="cubin")
        try:
            if cache.get(key) is not None:
                source = "cache"
        except Exception:  # noqa: BLE001 - an unreadable entry just means "compile"
            pass
    prog = Program(unit.source, "c++", opts)
    try:
        try:
            code = prog.compile("cubin", cache=cache) if cache is not None else prog.compile("cubin")
        except OSError:
            code = prog.compile("cubin")  # cache dir unusable: compile in memory
    finally:
        prog.close()
    for k in unit.kernels:
        code.get_kernel(k)
    return code, source, str(cache_root() / "nvrtc") if cache is not None else None
