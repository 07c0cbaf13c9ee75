"""A package's NVRTC kernels found by what its compile call holds: source text, kernel names, options.

A library on raw NVRTC bindings or CuPy compiles in one place, ``compile_kernels(source, names)``, keyed by
its own hash of the source. It adopts aot there without a table of unit names::

    _kernels = aot.by_source("mypkg")                   # cheap: nothing is read until the first call
    funcs = _kernels.cufunctions(source, ["scale", "shift"], ["-std=c++17"])   # {name: CUfunction}

The options are the library's own, in any spelling aot reads for NVRTC units (``-std=c++17``,
``--std=c++17``, ``--std c++17``, a mapping of ProgramOptions fields, a ``cuda.core.ProgramOptions``; flags
as any iterable of ``str`` or ``bytes``: :mod:`aot.core.srckey`); the GPU architecture and ``-I`` folders
are not part of the key. Every public method normalises its arguments once, first thing
(:func:`aot.core.srckey.normalize_options`, ``normalize_source``, ``normalize_names``): the memo keys, the
content key and a JIT compile all read those values, never the caller's objects (a generator of flags,
read twice, once named the unit built without them: issue 37). An argument that cannot be read
unambiguously is an :class:`aot.core.errors.ArgumentError` naming it; a ``bytes`` source is its UTF-8 text.

The manifest carries each NVRTC entry's ``source_key`` (:mod:`aot.build.progkeys`), so the first call builds
a dict from it (no source is hashed but the caller's) and every later call with the same arguments is one
dict hit (memoised per source, kernel names, options and, for ``CUfunction``, the current context). A
recorded key is not taken on trust: the first time a key finds a unit, that unit's key is computed again
from its own packaged definition (one sha256 of its text, once per key), and a mismatch (a manifest whose
keys were swapped between units would serve one unit's kernels for the other's source) warns once and
rebuilds the whole index from the definitions. Checking the hit alone is enough: a wrong entry can only
ever be reached through a hit, and hashing every unit's text at the first call would cost the package's
whole source size where one unit's is needed. ``aot verify`` checks every entry.

Served as :meth:`aot.Registry.kernel` serves a unit (best packaged image for this device, every check), or,
for a source the package does not carry, compiled for this device through ``cuda.core.Program`` with the
package's :func:`aot.program_cache` (so into the per-user NVRTC cache, under its owner checks, and found
there by the next process). Imports nothing of cuda.compute; ``import aot`` does not import this module.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Iterable

from ...core.errors import AotError, ArgumentError
from ...core.srckey import NvrtcOptions, normalize_names, normalize_options, normalize_source, source_key
from ..loader.registry import Registry, package_registry

if TYPE_CHECKING:
    from ..loader.firsthit import SourceIndex
    from .program_cache import PackagedProgramCache


def _log() -> Any:
    """This module's logger (:mod:`logging`: 2 ms to import; a packaged first hit logs nothing, issue 42)."""
    from ...core.log import get_logger
    return get_logger(__name__)

_lock = threading.Lock()
_lookups: dict[tuple[str, str], SourceLookup] = {}


def by_source(package: str, folder: str = "artifacts", *, registry: Registry | None = None) -> SourceLookup:
    """The lookup by source of ``package``'s NVRTC units (one per process); ``registry``: the library's own
    ``aot.Registry.from_package(...)`` instead of the shared one."""
    if registry is not None:
        return SourceLookup(registry)
    with _lock:
        found = _lookups.get((package, folder))
    if found is None:
        reg = package_registry(package, folder)
        with _lock:
            found = _lookups.setdefault((package, folder), SourceLookup(reg))
    return found


def _arguments(source: Any, kernel_names: Any, options: Any) -> tuple[str, tuple[str, ...], NvrtcOptions]:
    """The caller's arguments read once, at the edge, into immutable values (see the module doc)."""
    return normalize_source(source), normalize_names(kernel_names), normalize_options(options)


def _lean_has(lean: Any, name: str) -> bool:
    """Whether ``name`` is a unit of the first-hit index ``lean`` (a ``SourceIndex``; else not read or none)."""
    return not isinstance(lean, bool) and lean is not None and name in lean.units


def _is_unit(spec: Any) -> bool:
    from ...core.spec import NvrtcUnit  # the manifest path only: the first hit from the index needs no spec
    return isinstance(spec, NvrtcUnit)


class _Served:
    """What one (source, options) resolved to: the unit (``None``: compiled here) and its ObjectCode."""

    __slots__ = ("unit", "code", "source", "kernels")

    def __init__(self, unit: str | None, code: Any, source: str):
        self.unit, self.code, self.source = unit, code, source
        self.kernels: dict[str, Any] = {}

    def kernel(self, name: str) -> Any:
        k = self.kernels.get(name)
        if k is None:
            k = self.kernels[name] = self.code.get_kernel(name)
        return k


class SourceLookup:
    """Packaged NVRTC units of one registry, by source text and options (see the module doc)."""

    def __init__(self, registry: Registry):
        self.registry = registry
        self._lock = threading.Lock()
        self._index: dict[str, str] | None = None  # source_key -> unit name
        self._checked: set[str] = set()  # keys whose unit's own key was computed again and found the same
        self._memo: dict[Any, _Served] = {}
        self._units: dict[Any, str | None] = {}
        self._funcs: dict[Any, dict[str, Any]] = {}
        self._pcache: PackagedProgramCache | None = None
        self._driver = False  # a real driver found once (asked before the first call into libcuda)
        #: The first-hit index (:class:`aot.runtime.loader.firsthit.SourceIndex`); False: not read yet; None:
        #: none, or no longer trusted (the manifest's index serves).
        self._lean: SourceIndex | None | bool = False

    # ------------------------------------------------------------------ finding the unit
    def index(self) -> dict[str, str]:
        """source_key -> unit name, from the manifest's entries (computed from a definition only where an
        older manifest records none, or where a recorded key failed its check)."""
        index = self._index
        if index is None:
            with self._lock:
                index = self._index
                if index is None:
                    index = self._index = self._build_index(trust_recorded=True)
        return index

    def _lean_index(self) -> SourceIndex | None:
        """The first-hit index, read once (see the module doc of :mod:`aot.runtime.loader.firsthit`); ``None``
        without one."""
        lean = self._lean
        if lean is False:
            from ..loader.firsthit import SourceIndex, index_of
            found = index_of(self.registry)
            lean = None if found is None else SourceIndex(*found)
            with self._lock:
                if self._lean is False:
                    self._lean = lean
                lean = self._lean
        return lean  # type: ignore[return-value]  # False replaced above

    def _build_index(self, trust_recorded: bool) -> dict[str, str]:
        from ...core.spec import NvrtcUnit
        manifest = self.registry.manifest
        if manifest is None:
            return {}
        index: dict[str, str] = {}
        for e in manifest.artifacts:
            unit = manifest.built.get(e["name"])
            if not isinstance(unit, NvrtcUnit):
                continue
            key = e.get("source_key") if trust_recorded else None
            index[key if isinstance(key, str) else source_key(unit.source, unit.options)] = unit.name
        return index

    def _find(self, source: str, opts: NvrtcOptions) -> str | None:
        """The unit whose content key is this call's, its recorded key checked against its definition the
        first time it is found (a mismatch: the index is rebuilt from the definitions, warned once)."""
        key = source_key(source, opts)
        lean = self._lean_index()
        name = lean.keys.get(key) if lean is not None else None
        if name is not None:  # from the first-hit index: checked against the unit's own text as below
            if key in self._checked:
                return name
            unit = lean.units[name]  # type: ignore[union-attr]  # lean is not None here
            try:
                right = source_key(unit["source"], unit["options"]) == key
            except Exception:  # noqa: BLE001 - options the index's reader let through but srckey refuses
                right = False
            if right:
                self._checked.add(key)
                return name
        else:
            from ...core.spec import NvrtcUnit
            name = self.index().get(key)
            if name is None or key in self._checked:
                return name
            unit = self.registry.manifest.built.get(name) if self.registry.manifest is not None else None
            if isinstance(unit, NvrtcUnit) and source_key(unit.source, unit.options) == key:
                self._checked.add(key)  # per key, not per unit: another entry of the unit may record a wrong key
                return name
        self.registry._warn(f"aot: {self.registry.root}: the manifest's source_key for unit {name} is not the "
                            f"key of its own source and options; looking units up by keys computed from their "
                            f"definitions (run 'aot verify' on this set)")
        with self._lock:
            self._lean = None  # its keys are the manifest's: not trusted either
            self._index = self._build_index(trust_recorded=False)
            self._checked = set(self._index)  # every key now computed from its own definition
        return self._index.get(key)

    def unit(self, source: str | bytes, options: Any = None) -> str | None:
        """The packaged unit compiled from ``source`` with ``options``, or ``None``. A flag aot does not know,
        or an argument it cannot read, is an :class:`aot.core.errors.ArgumentError` naming it."""
        return self._unit(normalize_source(source), normalize_options(options))

    def _unit(self, source: str, opts: NvrtcOptions) -> str | None:
        memo = (source, opts)
        if memo in self._units:
            return self._units[memo]
        found = self._find(source, opts)
        if found is not None and not _lean_has(self._lean, found) and self.registry.manifest is not None:
            from .hdrkey import headers_match  # an indexed unit includes nothing: no header to match
            if not headers_match(self.registry.manifest.artifacts, found, source, opts.include_dirs,
                                 self.registry.manifest.key_schemas):
                found = None  # the user's headers are not the build's: compiled here (issue 46)
        self._units[memo] = found
        return found

    # ------------------------------------------------------------------ serving
    def _served(self, source: str, kernel_names: tuple[str, ...], opts: NvrtcOptions) -> _Served:
        """Normalised arguments only (:func:`_arguments`): every key below is made from them."""
        memo = (source, kernel_names, opts)
        found = self._memo.get(memo)
        if found is not None:
            return found
        name = self._unit(source, opts)
        lean = self._lean
        code = None
        if name is not None and _lean_has(lean, name):
            code = lean.load(self.registry, name, kernel_names)  # type: ignore[union-attr]  # a SourceIndex
        spec = self.registry.spec(name) if name is not None and code is None else None
        if code is not None:  # the first-hit index's image (firsthit.SourceIndex.load): no manifest read
            found = _Served(name, code, "packaged")
        elif _is_unit(spec) and set(kernel_names) <= set(spec.kernels):  # type: ignore[union-attr]
            loaded = self.registry._load(name)  # type: ignore[arg-type]  # name is not None here
            found = _Served(name, loaded.obj, loaded.source)
        else:
            _log().debug("no packaged unit for this source (%d characters) and options %s: compiling", len(source),
                      opts.canonical)
            found = self._compile(source, kernel_names, opts)
        for k in kernel_names:  # every kernel resolved now: a bad image fails here, not at launch
            found.kernel(k)
        with self._lock:
            return self._memo.setdefault(memo, found)

    def _compile(self, source: str, kernel_names: tuple[str, ...], opts: NvrtcOptions) -> _Served:
        """``source`` compiled for this device by cuda.core, through the package's program cache: a packaged
        image by cuda.core's key, else the user cache, else NVRTC (stored in the user cache). The options
        are the normalised value's, so the compile has exactly the flags the lookup was keyed by."""
        from ..loader.driver import require_driver
        require_driver("compiling an NVRTC source")
        from cuda.core import Program, ProgramOptions  # only on a miss: the packaged path needs neither
        sm = self.registry.device_sm()
        exprs = [k for k in kernel_names if not k.isidentifier()]
        dirs = list(opts.include_dirs)
        try:
            popts = ProgramOptions(arch=f"sm_{sm}", include_path=dirs or None, **opts.mapping())
            prog = Program(source, "c++", popts)
        except Exception as e:  # noqa: BLE001 - no NVRTC (a lean install), or options it refuses
            raise AotError(f"no packaged unit has this source with options {opts.canonical} and it cannot be "
                           f"compiled for sm_{sm}: {type(e).__name__}: {e}") from None
        from ...core.versions import cuda_core_missing
        cache = None  # cuda.core keys neither name expressions nor include directories; < 1.0 has no cache=
        if not (exprs or dirs) and cuda_core_missing("program_cache") is None:
            cache = self.program_cache()
        try:
            before = dict(cache.counts) if cache is not None else {}
            code = (prog.compile("cubin", name_expressions=exprs, cache=cache) if cache is not None
                    else prog.compile("cubin", name_expressions=exprs))
        finally:
            prog.close()
        where = "jit"
        if cache is not None:
            where = next((k for k in ("packaged", "user") if cache.counts[k] > before[k]), "jit")
        return _Served(None, code, "cache" if where == "user" else where)

    def program_cache(self) -> PackagedProgramCache:
        """This registry's :class:`aot.runtime.adapters.program_cache.PackagedProgramCache` (made on first need)."""
        cache = self._pcache
        if cache is None:
            from .program_cache import PackagedProgramCache
            cache = self._pcache = PackagedProgramCache(self.registry)
        return cache

    # ------------------------------------------------------------------ the handles
    def kernels(self, source: str | bytes, kernel_names: Iterable[str], options: Any = None) -> dict[str, Any]:
        """``{name: cuda.core.Kernel}`` for ``kernel_names`` (names or name expressions) of ``source``."""
        src, names, opts = _arguments(source, kernel_names, options)
        served = self._served(src, names, opts)
        return {k: served.kernel(k) for k in names}

    def cufunctions(self, source: str | bytes, kernel_names: Iterable[str], options: Any = None) -> dict[str, Any]:
        """``{name: CUfunction}`` in the context current in this thread (for ``cuLaunchKernel``). Without an
        NVIDIA driver: :class:`aot.core.errors.NoDeviceError`, before any call into libcuda."""
        src, names, opts = _arguments(source, kernel_names, options)
        if not self._driver:
            from ..loader.driver import require_driver
            require_driver("by_source(...).cufunctions")
            self._driver = True
        from cuda.bindings import driver  # the caller launches through it: already imported
        err, ctx = driver.cuCtxGetCurrent()
        memo = (src, names, opts, int(ctx) if ctx is not None else 0)
        found = self._funcs.get(memo)
        if found is not None:
            return found
        served = self._served(src, names, opts)
        funcs = {}
        for k in names:
            err, func = driver.cuKernelGetFunction(served.kernel(k).handle)
            if err != driver.CUresult.CUDA_SUCCESS:
                raise AotError(f"{served.unit or 'compiled source'}/{k}: cuKernelGetFunction failed: {err.name}"
                               " (is a CUDA context current in this thread?)")
            funcs[k] = func
        with self._lock:
            return self._funcs.setdefault(memo, funcs)

    def cupy_module(self, source: str | bytes, kernel_names: Iterable[str], options: Any = None) -> Any:
        """A ``cupy.RawModule`` over the served image (packaged or compiled here), not recompiled."""
        from .handles import cupy_raw_module
        src, names, opts = _arguments(source, kernel_names, options)
        served = self._served(src, names, opts)
        return cupy_raw_module(served.code, names, served.unit or "compiled source")[0]

    def cupy_kernel(self, source: str | bytes, kernel_name: str, options: Any = None) -> Any:
        """A ``cupy.RawKernel`` for ``kernel_name`` (a name or name expression) of ``source``."""
        from .handles import cupy_raw_module
        if not isinstance(kernel_name, (str, bytes, bytearray)):
            raise ArgumentError(f"kernel_name: {kernel_name!r:.80} ({type(kernel_name).__name__}) is not one "
                                f"kernel name")
        src, names, opts = _arguments(source, kernel_name, options)
        served = self._served(src, names, opts)
        mod, lowered = cupy_raw_module(served.code, names, served.unit or "compiled source")
        return mod.get_function(lowered.get(names[0], names[0]))

    def source_of(self, source: str | bytes, kernel_names: Iterable[str],
                  options: Any = None) -> tuple[str | None, str]:
        """(unit or ``None``, where from: packaged / cache / jit) for these arguments (serving them first)."""
        served = self._served(*_arguments(source, kernel_names, options))
        return served.unit, served.source

    # ------------------------------------------------------------------ warmup
    def request_warmup(self, sources: Iterable[str | bytes | tuple[str | bytes, Any]],
                       options: Any = None) -> list[str]:
        """Warm the packaged units of ``sources`` (each a text, or ``(text, options)``; ``options`` for the
        bare texts) in the background, as :meth:`aot.Registry.request_warmup` does for names; returns the
        unit names requested. A source the package does not carry is left for its first call (compiling it
        needs its kernel names). ``options`` is read once, before the first source, and serves every bare
        text; each pair's options are read once too."""
        shared = normalize_options(options)
        if isinstance(sources, (str, bytes, bytearray)):
            sources = [sources]
        names: list[str] = []
        for item in sources:
            if isinstance(item, tuple) and len(item) == 2:
                text, opts = normalize_source(item[0], "sources"), normalize_options(item[1], "sources: options")
            else:
                text, opts = normalize_source(item, "sources"), shared
            name = self._unit(text, opts)
            if name is None:
                _log().debug("warmup: a source (%d characters) the package does not carry; left cold", len(text))
            elif name not in names:
                names.append(name)
        if names:
            self.registry.request_warmup(names)
        return names
