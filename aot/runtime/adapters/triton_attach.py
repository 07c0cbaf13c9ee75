"""Triton kernels served from packaged cubins at the library's own launch, through Triton's cache manager.

A ``kernel[grid](...)`` launch that misses Triton's in-process cache calls ``triton.compile``, which computes
Triton's own cache key (the content of the Triton build: its compiler sources and ``libtriton``; the kernel's
source and the keys of what it calls and the constexpr globals it reads; the signature, constexprs and
specialisation attributes; the options; ptxas's version and the architecture; the cache-invalidating environment)
and asks the cache manager class (``triton.knobs.cache.manager_class``, ``TRITON_CACHE_MANAGER``) for the group of
files stored under that key (``get_group``). A hit is loaded as it is; nothing compiles.

:func:`attach_triton` installs :class:`AotCacheManager` there, wrapping the manager in force (Triton's file cache,
or one the user configured): the user's own cache answers first; when it has nothing and the key is one a packaged
kernel was built under (the artifact's ``triton_key``: the build computed it with Triton's own function for the
same specialisation), the artifact is checked (size, sha256, header, content key), the kernel's code is digested
again (:mod:`aot.runtime.adapters.triton_digest`: what Triton's key misses, a ``cfg.BLOCK`` module attribute), and
its cubin and metadata are written to this process's private folder and returned as the group; Triton loads them
and compiles nothing. Triton's C launchers (``cuda_utils``, the per-signature ``__triton_launcher``), which it
would build with the host compiler at the first launch, are served the same way at ``get_file`` where the set
carries them for this interpreter (:mod:`aot.runtime.adapters.triton_launchers`). Nothing is written into the
user's Triton cache: in a later process the kernel is checked and served again (a library upgrade that changes
only what Triton's key misses is then seen). Another Triton build, an edited kernel, another specialisation or
option: another key, and Triton compiles as it does today.

Why here and not in ``JITFunction``'s device cache: the manager class is the interface Triton offers for this
(four methods), the key is Triton's own, computed by Triton at the moment it needs one, so nothing of Triton's
launch path (binder, specialisation, options) is re-derived at run time.
"""

from __future__ import annotations

import importlib
import json
import os
import threading
from typing import Any, Iterable

from ...core.errors import AotError
from ...core.keyschemas import mismatch
from ...core.log import get_logger
from ...core.opref import inside
from .numba_digest import Memo
from . import triton_launchers
from .triton_digest import jit_function, kernel_digest

log = get_logger("aot.runtime.triton")

#: The installed Triton package's folder, as a packaged kernel's metadata writes it (``extern_libs``' libdevice).
TRITON_DIR = "{triton}"

_lock = threading.Lock()
#: Triton's key -> (registry, spec, manifest entry, kernel, memo), for every attached registry.
_state: dict[str, Any] = {"table": {}, "inner": None, "installed": False}


def installed_version() -> str:
    """The installed Triton release (distribution metadata: no import), ``"missing"`` without one."""
    from ...core.versions import dist_version
    return dist_version("triton")


def resolve_kernel(ref: str, wrapper: bool = False) -> Any:
    """The ``@triton.jit`` kernel ``pkg.mod:kernel`` names (imports its module); an ``@triton.autotune`` kernel's inner
    one (``wrapper``: the object itself, its configs read by the build)."""
    mod, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(mod)
    except Exception as e:  # noqa: BLE001 - any import failure is one line naming the kernel
        raise AotError(f"kernel {ref!r}: cannot import {mod!r} ({type(e).__name__}: {e})") from None
    obj = getattr(module, attr, None)
    try:
        kernel = jit_function(obj)
    except AotError as e:
        raise AotError(f"kernel {ref!r}: {mod}.{attr} {e}") from None
    return obj if wrapper else kernel


def attach_triton(registry: Any, names: Iterable[str] | None = None) -> dict[str, str]:
    """Serve ``registry``'s Triton kernels (all, or ``names``) at Triton's cache lookup (the module's docstring).
    Imports the kernels' modules (only inside the package that owns the artifacts) and reads no artifact: each is
    read when Triton asks for its key. Returns, per spec, ``"attached"`` or why not (said once as an
    ``AotWarning``; Triton then compiles it)."""
    from ...core.spec import TritonKernel
    wanted = set(names) if names is not None else None
    specs = [s for s in (registry.spec(n) for n in registry.names()) if isinstance(s, TritonKernel)
             and (wanted is None or s.name in wanted)]
    if not specs or registry.manifest is None:
        return {}
    stale = mismatch(registry.manifest.key_schemas, "triton")
    if stale:  # every digest differs, though no kernel changed: said once, as what it is; nothing imported
        why = f"aot: {registry.root}: Triton kernels were {stale}; Triton compiles them"
        registry._warn(why)
        return {s.name: why for s in specs}
    result: dict[str, str] = {}
    installed = installed_version()
    by_kernel: dict[str, list[Any]] = {}
    for s in specs:
        by_kernel.setdefault(s.kernel, []).append(s)
    owner = registry._owner
    rows, carried = [], set()
    for ref, group in by_kernel.items():
        entries = {s.name: [e for e in registry.manifest.entries_for(s.name) if isinstance(e.get("triton_key"), str)]
                   for s in group}
        carried |= {str(e.get("triton")) for es in entries.values() for e in es}
        group = [s for s in group if any(e.get("triton") == installed for e in entries[s.name])]
        if not group:
            continue
        try:
            if owner is None or not inside(ref, owner):
                raise AotError(f"aot: refusing to import kernel {ref!r}: it is outside the package that owns the "
                               f"artifacts ({owner!r})")
            kernel, memo = resolve_kernel(ref), Memo()
            _check_digest(ref, kernel, group, memo)
        except AotError as e:
            registry._warn(f"{e}; Triton compiles it")
            result.update({s.name: str(e) for s in group})
            continue
        for s in group:  # one row per Triton build carried under this release: Triton's key picks the build
            rows += [(e["triton_key"], (registry, s, e, kernel, memo)) for e in entries[s.name]
                     if e.get("triton") == installed]
            rows += [(f"aot:{e['triton_aot_key']}", (registry, s, e, kernel, memo)) for e in entries[s.name]
                     if e.get("triton") == installed and isinstance(e.get("triton_aot_key"), str)]
            for entry in entries[s.name]:  # Triton's C launchers built with it (adapters.triton_launchers)
                if entry.get("triton") == installed:
                    triton_launchers.register(registry, s, entry)
            result[s.name] = "attached"
    missed = [s.name for s in specs if s.name not in result]
    if missed:
        why = (f"aot: {registry.root}: Triton kernels built under Triton {', '.join(sorted(carried)) or 'none'}, "
               f"installed is {installed}: they are not served; Triton compiles them")
        registry._warn(why)
        result.update({n: why for n in missed})
    if rows:
        with _lock:
            for key, row in rows:
                _state["table"].setdefault(key, row)
            _install()
    return result


def _check_digest(ref: str, kernel: Any, group: list[Any], memo: Memo) -> None:
    """The kernel's code (its source, what it calls, the values it compiles in) must be what the build digested."""
    try:
        digest = kernel_digest(kernel, memo)
    except AotError as e:
        raise AotError(f"aot: {e}") from None
    if any(s.digest != digest for s in group):
        raise AotError(f"aot: {ref}: its source, a function it calls or a value it compiles in differs from the "
                       f"packaged build's")


def _install() -> None:
    """Put :class:`AotCacheManager` in front of the cache manager in force (once per process)."""
    from triton import knobs  # the library launching Triton kernels has imported Triton
    current = knobs.cache.manager_class
    if isinstance(current, type) and issubclass(current, _manager_class()):
        return
    from triton.runtime.cache import FileCacheManager
    from . import triton_pykey
    triton_pykey.watch()  # aot's key of each Triton key: a build under another CPython answers it
    _state["inner"] = current or FileCacheManager
    knobs.cache.manager_class = _manager_class()


def _row(key: str) -> tuple[tuple | None, tuple[str, str] | None]:
    """The packaged kernel Triton's cache key ``key`` asks for: built under this CPython (Triton's key itself), or
    under another (aot's key of this compile, :mod:`aot.runtime.adapters.triton_pykey`), with that key and hash."""
    row = _state["table"].get(key)
    if row is not None:
        return row, None
    from .triton_pykey import noted
    mine = noted(key)
    return (_state["table"].get(f"aot:{mine[0]}"), mine) if mine is not None else (None, None)


def _serve(manager: Any, row: tuple, mine: tuple[str, str] | None = None) -> dict[str, str] | None:
    """Put a packaged kernel's files into the wrapped cache under ``manager``'s key; ``None``: not served.
    ``mine``: (aot's key, Triton's hash) when the artifact answers by aot's key (built under another CPython)."""
    registry, spec, entry, kernel, memo = row
    path = registry.manifest.path_of(entry)
    try:
        art = triton_launchers.checked(registry, spec, entry)  # kept for its launcher, asked for next
        if art.header.get("triton_key") != manager.key and (
                mine is None or art.header.get("triton_aot_key") != mine[0]):
            raise AotError("its header's Triton key differs from the manifest's")
        meta = art.header.get("triton_metadata")
        name = art.header.get("triton_name")
        if not isinstance(meta, dict) or not isinstance(name, str) or "/" in name or not name:
            raise AotError("its header has no Triton metadata")
    except Exception as e:  # noqa: BLE001 - a foreign or corrupt artifact: said once, Triton compiles
        registry._warn(f"aot: skipping {path}: {e}; Triton compiles {spec.name}")
        return None
    try:
        _check_digest(spec.kernel, kernel, [spec], memo)  # a value assigned since attach (cfg.BLOCK = 64)
    except AotError as e:
        registry._warn(f"{e}; Triton compiles it")
        return None
    import triton
    if mine is not None:  # the hash Triton computed here, as its own compile would write it
        meta = {**meta, "hash": mine[1]}
    text = json.dumps(meta).replace(json.dumps(TRITON_DIR)[1:-1], json.dumps(os.path.dirname(triton.__file__))[1:-1])
    folder = _private_dir()  # one folder, the key in each name: no mkdir per kernel
    group = {}
    for fname, data in ((f"{name}.cubin", art.payload), (f"{name}.json", text.encode())):
        group[fname] = path = os.path.join(folder, f"{name}.{manager.key}.{fname[len(name) + 1:]}")
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
    log.debug("triton: %s served from a packaged kernel", spec.name)
    return group


_CLASS: list[type] = []


def _absent(key: str) -> bool:
    """Whether the wrapped manager is Triton's file cache and holds no folder for ``key``: it would answer nothing,
    and making it would make that folder (an empty one in the user's Triton cache per served key, ~0.5 ms each).
    It is made when Triton writes (``put``: a compile or build aot did not serve) or is asked anything else."""
    from triton.runtime.cache import FileCacheManager
    if _state["inner"] is not FileCacheManager:
        return False
    from triton import knobs
    root = knobs.cache.dir
    return bool(root) and not os.path.isdir(os.path.join(root, key))


def _private_dir() -> str:
    """This process's folder for served files (0700, removed at exit): Triton reads a hit's files by path, and the
    user's Triton cache is left to Triton (a served kernel is checked again in each process, never kept there)."""
    with _lock:
        if _state.get("dir") is None:
            import atexit
            import shutil
            import tempfile
            _state["dir"] = tempfile.mkdtemp(prefix="aot-triton-")
            atexit.register(shutil.rmtree, _state["dir"], True)
        return _state["dir"]


def _manager_class() -> type:
    """:class:`AotCacheManager`, made on first need (it subclasses Triton's ``CacheManager``)."""
    if _CLASS:
        return _CLASS[0]
    from triton.runtime.cache import CacheManager

    class AotCacheManager(CacheManager):
        """Triton's cache manager in force, with packaged kernels behind it (see the module's docstring)."""

        def __init__(self, key: str, override: bool = False, dump: bool = False):
            self.key, self.plain, self.flags = key, not (override or dump), (override, dump)
            self._inner: Any = None if self.plain and _absent(key) else self._make()

        def _make(self) -> Any:
            return _state["inner"](self.key, override=self.flags[0], dump=self.flags[1])

        @property
        def inner(self) -> Any:
            """The wrapped manager, made on first need where its folder did not exist (:func:`_absent`)."""
            if self._inner is None:
                self._inner = self._make()
            return self._inner

        def _lookup(self) -> Any:
            """The wrapped manager to ask, or ``None`` where it holds nothing under this key (not made)."""
            return self._inner if self._inner is not None or _absent(self.key) else self.inner

        def get_file(self, filename: str) -> Any:
            inner = self._lookup()
            got = inner.get_file(filename) if inner is not None else None
            if got is not None or not self.plain:
                return got
            try:  # a C launcher Triton would build with the host compiler, built with the set
                return triton_launchers.serve(self.key, filename, _private_dir())
            except Exception as e:  # noqa: BLE001 - serving never breaks Triton's build: it builds
                log.info("triton: launcher not served (%s: %s)", type(e).__name__, e)
                return None

        def put(self, data: Any, filename: str, binary: bool = True) -> Any:
            return self.inner.put(data, filename, binary=binary)

        def put_group(self, filename: str, group: Any) -> Any:
            return self.inner.put_group(filename, group)

        def get_group(self, filename: str) -> Any:
            inner = self._lookup()
            got = inner.get_group(filename) if inner is not None else None
            if (got and filename in got) or not self.plain:
                return got
            row, mine = _row(self.key)
            if row is None or f"{row[2].get('triton_name')}.json" != filename:
                return got
            try:
                return _serve(self, row, mine) or got
            except Exception as e:  # noqa: BLE001 - serving never breaks Triton's compile: it compiles
                log.info("triton: not served (%s: %s)", type(e).__name__, e)
                return got

        def __getattr__(self, attr: str) -> Any:  # anything else a caller asks of the wrapped manager
            if "flags" not in self.__dict__:
                raise AttributeError(attr)
            return getattr(self.inner, attr)

    _CLASS.append(AotCacheManager)
    return AotCacheManager


def detach_triton() -> None:
    """Forget every attached kernel and give Triton back its cache manager (tests; a library need not)."""
    import sys
    with _lock:
        _state["table"].clear()
        triton_launchers.forget()
        knobs = getattr(sys.modules.get("triton"), "knobs", None)
        if knobs is not None and _CLASS and knobs.cache.manager_class is _CLASS[0]:
            inner = _state["inner"]
            from triton.runtime.cache import FileCacheManager
            if inner is FileCacheManager:
                del knobs.cache.manager_class
            else:
                knobs.cache.manager_class = inner
        _state["inner"] = None
