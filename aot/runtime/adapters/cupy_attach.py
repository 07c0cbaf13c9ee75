"""CuPy's own kernels served from packaged cubins at CuPy's compile call, on its cache-miss path only.

CuPy compiles every kernel it generates (ufuncs, reductions, ``ElementwiseKernel``, ``ReductionKernel``,
``RawModule``) in ``cupy.cuda.compiler._compile_with_cache_cuda``: it builds one string, ``key_src``, hashes it
(``_hash_hexdigest``) into a file name, asks its cache for that name and, only when the cache has nothing, calls
NVRTC (``_compile_using_nvrtc_no_warning``; ``compile_using_nvrtc`` in 13.6) with ``<name>.cu`` as the program's
name. aot meets CuPy there, through two names of ``cupy.cuda.compiler`` (:data:`RELEASES` says which per release):

* the hash is observed: CuPy's own function still names the file; the thread's last ``key_src`` is kept with
  its name (one attribute store: what a request CuPy's cache answers costs aot);
* the NVRTC call is wrapped: CuPy reaches it only when its cache missed. aot computes its content key of that
  compile (:mod:`aot.runtime.adapters.cupy_key`: source, options, architecture, the text of every header the
  source can reach; not NVRTC's version) and, if a packaged kernel has it and passes every check, returns its
  cubin as NVRTC's output: CuPy stores it in its cache and loads it as if it had compiled it.

Nothing is imported until CuPy is: :func:`attach_cupy` (``Registry.from_package``) records the registry and, if
``cupy.cuda.compiler`` is not imported yet, puts a finder on ``sys.meta_path`` that installs the two wrappers
right after CuPy imports it. Without CuPy nothing happens, and nothing is said (a CPU-only user of the library
has no CuPy kernels to serve). The key table is read from the manifests on the first miss; at a package's
import (``lazy=True``) not even the manifest is read: that cost a CuPy library's ``import`` 20-25 ms (issue 42),
and this module imports neither :mod:`logging` nor :mod:`importlib.metadata` until it logs or asks.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Iterable, Mapping

from ...core.errors import AotError


def _log() -> Any:
    """aot's CuPy logger (:mod:`logging`: 2-3 ms to import, so only where something is said)."""
    from ...core.log import get_logger
    return get_logger("aot.runtime.cupy")

#: CuPy releases whose compiler aot meets, each installed and checked on the driverless host
#: (tests/test_cupy_releases.py, docs/cupy.md): release -> the function CuPy calls NVRTC through on its cache
#: miss, whose fourth argument is ``<CuPy's file name>.cu``. ``_hash_hexdigest`` and
#: ``_empty_file_preprocess_cache`` have one spelling in all of them. Any other release: one warning, no serving.
RELEASES: Mapping[str, str] = {
    "13.6.0": "compile_using_nvrtc",
    "14.0.1": "_compile_using_nvrtc_no_warning",
    "14.1.1": "_compile_using_nvrtc_no_warning",
    "14.2.0": "_compile_using_nvrtc_no_warning",
}
VERIFIED = tuple(RELEASES)
#: The CuPy distributions (one per CUDA major); the first installed names the release.
DISTRIBUTIONS = ("cupy-cuda13x", "cupy-cuda12x", "cupy")
_TARGET = "cupy.cuda.compiler"

_lock = threading.Lock()
_state: dict[str, Any] = {"registries": [], "table": None, "headers": None, "installed": None, "compiler": None}
#: Per thread, the last (name, key_src) CuPy hashed: a miss reaches NVRTC right after, in the same thread.
_local = threading.local()


def installed_version() -> str:
    """The installed CuPy release (from its distribution's metadata: no import), ``"missing"`` without one."""
    from importlib import metadata
    for dist in DISTRIBUTIONS:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "missing"


def host_paths() -> dict[str, str]:
    """This install's paths CuPy puts into its options (its bundled headers, the CUDA runtime headers), as the
    placeholders of :data:`aot.core.cupyspec.PLACEHOLDERS`: the build fills a recorded entry's options with them."""
    from cupy._core import core  # CuPy: only where CuPy kernels are built or recorded
    from cuda.pathfinder import find_nvidia_header_directory
    return {"{cupy_include}": str(core._get_header_dir_path()),
            "{cuda_include}": str(find_nvidia_header_directory("cudart") or "")}


def substitute(options: Iterable[str], paths: Mapping[str, str]) -> tuple[str, ...]:
    """A spec's options with this install's paths in place of the placeholders."""
    out = []
    for opt in options:
        for ph, path in paths.items():
            opt = opt.replace(ph, path)
        out.append(opt)
    return tuple(out)


def key_of(key_src: bytes, compiler: Any, headers: Any) -> str | None:
    """aot's content key of the compile CuPy hashed as ``key_src`` (``None``: not one aot can key)."""
    from . import cupy_key
    from cupy._core import core  # imported by CuPy already (its compile is running)
    split = cupy_key.split_key_src(key_src, compiler, ("None", core._get_header_source()))
    return None if split is None else cupy_key.content_key(*split, headers)


# ------------------------------------------------------------------------------------------- the two wrappers
def _observe(original: Any) -> Any:
    def _hash_hexdigest(value: Any) -> str:
        name = original(value)
        _local.last = (name, value)
        return name
    _hash_hexdigest._aot_cupy = original  # type: ignore[attr-defined]
    return _hash_hexdigest


def _wrap_compile(original: Any) -> Any:
    def compile_(source: Any, options: Any, arch: Any, filename: Any, name_expressions: Any = None, *a: Any,
                 **kw: Any) -> Any:
        served = None
        if isinstance(filename, str) and filename.endswith(".cubin.cu"):
            try:
                served = _serve(filename[:-len(".cubin.cu")], name_expressions)
            except Exception as e:  # noqa: BLE001 - serving never breaks CuPy's compile: it compiles
                _log().info("cupy: not served (%s: %s)", type(e).__name__, e)
        if served is not None:
            return served
        return original(source, options, arch, filename, name_expressions, *a, **kw)
    compile_._aot_cupy = original  # type: ignore[attr-defined]
    return compile_


def _stale(registry: Any) -> str | None:
    """Why a set another CuPy key schema built serves nothing (:mod:`aot.core.keyschemas`): every key differs,
    though no kernel changed. Said once, as what it is; ``None`` for a set of this schema (or one that does not
    say)."""
    from ...core.keyschemas import mismatch
    stale = mismatch(registry.manifest.key_schemas, "cupy")
    if not stale:
        return None
    why = f"aot: {registry.root}: CuPy kernels were {stale}; CuPy compiles them"
    registry._warn(why)
    return why


def _table() -> dict[str, tuple[Any, Any, Any]]:
    """aot key -> (registry, spec, manifest entry) over every attached registry, read on the first miss."""
    table = _state["table"]
    if table is None:
        from ...core.spec import CupyKernel
        table = {}
        for registry in _state["registries"]:
            if registry.manifest is None:  # attached lazily: an unreadable manifest warned as it was read
                continue
            if _stale(registry):  # attached lazily (at import): a set another key schema built, said at the first miss
                continue
            for n in registry.names():
                s = registry.spec(n)
                if isinstance(s, CupyKernel):
                    for entry in registry.manifest.entries_for(s.name):
                        if isinstance(entry.get("cupy_key"), str):
                            table.setdefault(entry["cupy_key"], (registry, s, entry))
        _state["table"] = table
    return table


def _serve(hexname: str, name_expressions: Any) -> Any:
    """NVRTC's answer (cubin, mapping) for CuPy's compile named ``hexname``, from a packaged kernel, or None."""
    last = getattr(_local, "last", None)
    if last is None or last[0] != hexname or not _state["registries"]:
        return None
    key_src = last[1]
    compiler = _state["compiler"]
    with _lock:
        table = _table()
        if _state["headers"] is None:
            from .cupy_key import Headers
            _state["headers"] = Headers()
    key = key_of(key_src, compiler, _state["headers"])
    hit = table.get(key) if key else None
    if hit is None:
        return None
    registry, spec, entry = hit
    from ..loader.sources import check_packaged
    path = registry.manifest.path_of(entry)
    try:
        art = check_packaged(registry.manifest, spec, entry, path)
        if art.header.get("cupy_key") != key:
            raise AotError("its header's CuPy key differs from the manifest's")
        answer = _answer(art.payload, name_expressions, compiler)
    except Exception as e:  # noqa: BLE001 - a foreign or corrupt artifact: said once, CuPy compiles
        registry._warn(f"aot: skipping {path}: {e}; CuPy compiles {spec.name}")
        return None
    _log().debug("cupy: %s served from %s", hexname, path)
    return answer


def _answer(payload: bytes, name_expressions: Any, compiler: Any) -> tuple[bytes, Any]:
    """(cubin, mapping) as CuPy's NVRTC call returns them; a name-expressions payload (CuPy 14.2's format: the
    mangled names ahead of the cubin) gives the mapping."""
    if not name_expressions:
        return payload, None
    decode = getattr(compiler, "_decode_cache_payload", None)
    got = decode(payload, len(name_expressions)) if decode else None
    if got is None:
        raise AotError("a name-expressions kernel whose payload this CuPy cannot read")
    mangled, cubin = got
    return cubin, dict(zip(sorted(name_expressions), mangled))


def _install(compiler: Any) -> None:
    """Put the two wrappers on CuPy's compiler (once), if its release is one aot was checked against."""
    version = getattr(sys.modules.get("cupy"), "__version__", None) or installed_version()
    fn = RELEASES.get(version)
    with _lock:
        _state["installed"], _state["compiler"] = version, compiler
    if fn is None:
        for registry in _state["registries"]:
            registry._warn(f"aot: CuPy {version} is not one aot was checked against ({', '.join(VERIFIED)}): "
                           f"packaged CuPy kernels are not served; CuPy compiles them")
        return
    if not hasattr(compiler._hash_hexdigest, "_aot_cupy"):
        compiler._hash_hexdigest = _observe(compiler._hash_hexdigest)
    if not hasattr(getattr(compiler, fn), "_aot_cupy"):
        setattr(compiler, fn, _wrap_compile(getattr(compiler, fn)))


class _Finder:
    """Installs the wrappers right after CuPy imports ``cupy.cuda.compiler``; finds nothing itself."""

    _aot_cupy_finder = True

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)  # type: ignore[assignment]  # duck-typed loader
                return spec
        return None


class _Loader:
    def __init__(self, inner: Any):
        self.inner = inner

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        _remove_finder()
        try:
            _install(module)
        except Exception as e:  # noqa: BLE001 - CuPy imports whatever happens here
            _log().info("cupy: not attached (%s: %s)", type(e).__name__, e)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)


def _remove_finder() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "_aot_cupy_finder", False)]


def attach_cupy(registry: Any, *, lazy: bool = False) -> dict[str, str]:
    """Serve ``registry``'s CuPy kernels at CuPy's compile call (see the module's docstring). Imports nothing:
    the wrappers go on when CuPy's compiler is (or already was) imported. Returns, per spec, ``"attached"``;
    ``lazy`` (``Registry.from_package``, for a set with a ``cupy/`` folder): reads no manifest, returns ``{}``
    (the specs are read at CuPy's first cache miss)."""
    names: list[str] = []
    if not lazy:
        from ...core.spec import CupyKernel
        names = [n for n in registry.names() if isinstance(registry.spec(n), CupyKernel)]
        if not names or registry.manifest is None:
            return {}
        why = _stale(registry)
        if why:
            return {n: why for n in names}
    with _lock:
        if registry not in _state["registries"]:
            _state["registries"].append(registry)
        _state["table"] = None
    compiler = sys.modules.get(_TARGET)
    if compiler is not None and hasattr(compiler, "_hash_hexdigest"):
        _install(compiler)
    elif not any(getattr(f, "_aot_cupy_finder", False) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    return {n: "attached" for n in names}


def detach_cupy() -> None:
    """Forget every attached registry and give CuPy back its own functions (tests; a library need not)."""
    compiler: Any = sys.modules.get(_TARGET)
    with _lock:
        _state.update(registries=[], table=None, headers=None)
        _local.__dict__.clear()  # this thread's (with no registry left, no other thread is served)
        _remove_finder()
        if compiler is not None:
            for attr in {"_hash_hexdigest", *RELEASES.values()}:
                fn = getattr(compiler, attr, None)
                if fn is not None and hasattr(fn, "_aot_cupy"):
                    setattr(compiler, attr, fn._aot_cupy)
