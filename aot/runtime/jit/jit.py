"""The loader's last resort: the per-user cache, then JIT for this device (persisted for next time).

CCCL: the same recipe as the build (``aot.build.compile.build_cccl`` with the ProxyArray fix) for exactly the
device's SM, serialized into an artifact file in the user cache. Racing processes build once: the
builder holds an advisory lock on ``<key>.lock`` and the others re-check the cache once they get it.
NVRTC: ``cuda.core.Program`` with ``cuda.core.utils.FileStreamProgramCache`` (not a second cache).

Disk trouble (read-only or full cache dir, missing permissions, an unusable path) never stops the loader:
the JIT result is used in memory and one warning says why it was not persisted. A cache directory another
user could write is not used at all (one warning per process); an entry another user could write is not
read (one warning naming it): see :mod:`aot.runtime.jit.cache` for the rules.
"""

from __future__ import annotations

import contextlib
from typing import Callable

from ...core import format as fmt
from .cache import ArtifactCache, UnsafeCacheError, UnsafeEntryError, cache_root, enabled, first_report
from ...core.errors import ArtifactError
from ...core.spec import CcclSpec, NvrtcUnit, item_key


def _toolchain_for_cache() -> dict[str, str]:
    from ...core.versions import producer_versions
    return producer_versions()


def unsafe_cache_message(e: UnsafeCacheError) -> str:
    return f"aot: {e}; not using the user cache in this process (JIT results stay in memory)"


def cccl_from_cache_or_jit(spec: CcclSpec, sm: int, errors: list, warn: Callable[[str], None]):
    """(payload, source, path): a blob for ``spec`` on ``sm`` from the user cache, else freshly built."""
    toolchain = _toolchain_for_cache()
    key = item_key(spec, sm, "cccl-blob", toolchain)
    cache = ArtifactCache() if enabled() else None
    persist = cache is not None
    entry = str(cache._path(key)) if cache is not None else ""
    noted: set[str] = set()

    def note(msg: str) -> None:  # the cache is looked at twice (before and under the lock): warn once
        if msg not in noted:
            noted.add(msg)
            errors.append(msg)
            warn(msg)

    def give_up(e: Exception) -> None:
        """The cache cannot be used for this spec: an untrusted directory (said once per process) or an
        unusable path (said once here, not again by the persist step)."""
        nonlocal cache, persist
        root = cache.root.parent if cache is not None else cache_root()
        cache, persist = None, False
        if isinstance(e, UnsafeCacheError):
            if first_report(str(e)):
                note(unsafe_cache_message(e))
        else:
            reason = getattr(e, "strerror", None) or e
            note(f"aot: cannot persist {spec.name} to the user cache {root}: {reason}; "
                 f"using the JIT result in memory")

    def lookup():
        nonlocal persist
        if cache is None:
            return None
        try:
            art = cache.get(key)
        except UnsafeCacheError as e:
            give_up(e)
            return None
        except UnsafeEntryError as e:
            persist = False  # neither delete nor replace a file another user may own
            note(f"aot: {e}; serving {spec.name} from JIT")
            return None
        except ArtifactError as e:
            note(f"aot: {e}")
            return None
        except OSError as e:  # ENAMETOOLONG, ELOOP, EACCES on the cache path itself
            give_up(e)
            return None
        if art is None:
            return None
        h = art.header
        # Not the name: identically defined specs (or a renamed one) share a key and an entry.
        if (h["family"], h["sm"], h["payload_kind"]) != ("cccl", sm, "cccl-blob"):
            note(f"aot: user-cache entry {entry} describes another artifact; ignored")
            return None
        from ...core.versions import check_producer
        try:
            check_producer(art.header["producer"], "cccl")
        except ArtifactError as e:
            note(f"aot: user-cache entry {entry} ignored: {e}")
            return None
        return art

    art = lookup()
    if art is not None:
        return art.payload, "cache", entry
    with (cache.lock(key) if cache is not None and persist else contextlib.nullcontext()):
        art = lookup()  # another process may have built it while we waited for the lock
        if art is not None:
            return art.payload, "cache", entry
        from ...build.compile import compile_cccl
        payload = compile_cccl(spec, sm)  # applies the ProxyArray fix (cccl_patches) first
        path = None
        if cache is not None and persist:
            header = fmt.make_header(family="cccl", name=spec.name, content_key=key, sm=sm,
                                     payload_kind="cccl-blob", payload=payload,
                                     producer={k: toolchain[k] for k in fmt.PRODUCER_FIELDS})
            try:
                path = str(cache.put(key, fmt.encode(header, payload)))
            except UnsafeCacheError as e:
                give_up(e)
            except UnsafeEntryError as e:
                note(f"aot: {e}; {spec.name} not persisted")
            except OSError as e:
                give_up(e)
            else:
                try:
                    cache.sweep()  # temp files of writers killed long ago (rare path: fine to walk the cache)
                except OSError:
                    pass
        return payload, "jit", path


def _aot_warning(msg: str) -> None:
    import warnings
    from ..loader.objects import AotWarning
    warnings.warn(msg, AotWarning, stacklevel=4)


def nvrtc_cache_dir(warn: Callable[[str], None] | None = None):
    """``<root>/nvrtc`` for cuda.core's FileStreamProgramCache once it (and the root) passed the owner and
    mode checks; ``None`` when the cache is disabled, unusable, or untrusted (warned once per process)."""
    if not enabled():
        return None
    from .cache import NVRTC_DIR, private_dir
    try:
        return private_dir(NVRTC_DIR)
    except UnsafeCacheError as e:
        if first_report(str(e)):
            (warn or _aot_warning)(unsafe_cache_message(e))
    except OSError:
        pass
    return None


def _include_digest(opts) -> bytes:
    """What the include path of a unit without private headers contributes to its cache key: the cuda-cccl
    version whose headers it names (pinned exactly; a different install is a different digest) and the
    directories themselves."""
    import hashlib
    from ...core.versions import dist_version
    h = hashlib.sha256(b"aot-nvrtc-include-v1\0" + dist_version("cuda-cccl").encode())
    for d in opts.include_path or ():
        h.update(b"\0" + str(d).encode())
    return h.digest()


def nvrtc_from_cache_or_jit(unit: NvrtcUnit, sm: int, warn: Callable[[str], None] | None = None):
    """(ObjectCode, source, path) through cuda.core's own FileStreamProgramCache, every kernel loaded."""
    code, source, where = nvrtc_compile_cached(unit, sm, warn)
    for k in unit.kernels:
        code.get_kernel(k)
    return code, source, where


def nvrtc_compile_cached(unit: NvrtcUnit, sm: int, warn: Callable[[str], None] | None = None):
    """(ObjectCode, "jit" | "cache", cache path or None): the unit's cubin for ``sm`` from cuda.core's
    cache, else compiled now and stored there. Needs no driver (nothing is loaded). A cuda-core without that
    cache (< 1.0) compiles every time, said once per process."""
    from ...core.env import CACHE_MAX_BYTES
    from ...core.versions import cuda_core_missing
    from ...build.compile import compile_program, headers_dir, program_options
    with headers_dir(unit) as hdr:
        opts = program_options(unit, f"sm_{sm}", hdr)
        exprs = unit.name_expressions()
        cache = None
        # cuda.core's cache refuses name expressions, and a unit's private header directory is a new
        # path (so a new cache key) each time: such units compile without it.
        where = nvrtc_cache_dir(warn) if not (exprs or hdr) else None
        missing = cuda_core_missing("jit_cache") if where is not None else None
        if missing:
            if first_report(missing):
                (warn or _aot_warning)(f"aot: {missing}: JIT-compiled NVRTC units are compiled again in every "
                                       f"process")
            where = None
        if where is not None:
            from cuda.core.utils import FileStreamProgramCache, make_program_cache_key
            try:
                cache = FileStreamProgramCache(where, max_size_bytes=CACHE_MAX_BYTES.get() or None)
            except OSError:
                cache = None
        source = "jit"
        code = None
        key = None
        if cache is not None:
            # cuda.core refuses to key a compile whose include path it cannot hash (every unit has the
            # installed cuda-cccl's headers on it): the manual pattern, with those headers named by the
            # exact cuda-cccl version that ships them.
            key = make_program_cache_key(code=unit.source, code_type="c++", options=opts, target_type="cubin",
                                         extra_digest=_include_digest(opts))
            try:
                data = cache.get(key)
            except Exception:  # noqa: BLE001 - an unreadable entry just means "compile"
                data = None
            if data is not None:
                from cuda.core import ObjectCode
                code, source = ObjectCode.from_cubin(bytes(data), name=f"{unit.name}.cu"), "cache"
        if code is None:
            code = compile_program(unit.source, opts, "cubin", exprs)
            if cache is not None and key is not None:
                try:
                    cache[key] = code
                except OSError:
                    pass  # cache dir unusable: the compile result serves from memory
    return code, source, str(where) if cache is not None else None

