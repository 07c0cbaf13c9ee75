"""CuPy's own kernels served from packaged cubins at CuPy's compile call.

CuPy compiles every kernel it generates (ufuncs, reductions, ``ElementwiseKernel``, ``ReductionKernel``,
``RawModule``) in ``cupy.cuda.compiler._compile_with_cache_cuda``: it builds one string, ``key_src``, of
everything that decides the bytes (the architecture, the options, the NVRTC version and the NVRTC build's own
banner, the source, its bundled headers' text and ``CUPY_CACHE_KEY``), hashes it (``_hash_hexdigest``) into a
file name and asks its kernel cache backend (``_kernel_cache_backend.load(name)``) before compiling.

:func:`attach_cupy` meets CuPy there, through those two names of ``cupy.cuda.compiler``:

* the hash is observed (CuPy's own function still computes the name): ``key_src`` with this install's paths
  written as placeholders, the CuPy release and the CUDA headers' version give aot's key (:func:`lookup_key`);
  a packaged kernel built with that key, checked like every artifact, is held for that name;
* the backend is wrapped: CuPy's own cache answers first (a user's cache stays theirs); when it has nothing,
  the held payload is returned, CuPy loads it as it loads its own cache files, and compiles nothing.

Why not seed ``CUPY_CACHE_DIR`` with CuPy's file names: CuPy's key hashes absolute install paths (the ``-I``
options of its bundled and CUDA headers), so a name computed on the build host never equals the user's, and
computing the user's at import needs the device's architecture and an NVRTC run per option set. Here CuPy
computes its key itself at the moment it needs it; nothing is written into the user's folder.

Version gate: only a CuPy release aot was checked against (:data:`VERIFIED`: the names above are private) and
only kernels built by that same release are attached (one ``AotWarning`` otherwise). The NVRTC version and build,
the architecture, the options, the source and CuPy's headers are inside ``key_src``: any difference is another key,
and CuPy compiles as it does today.
"""

from __future__ import annotations

import hashlib
import re
import threading
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Mapping

from ...core.errors import AotError
from ...core.log import get_logger

log = get_logger("aot.runtime.cupy")

#: The CuPy releases whose compiler aot meets (``_compile_with_cache_cuda``'s key and backend, checked by
#: tests/test_cupy.py); any other is left alone, with one warning.
VERIFIED = ("14.2.0",)
#: The CuPy distributions (one per CUDA major); the first installed names the release.
DISTRIBUTIONS = ("cupy-cuda13x", "cupy-cuda12x", "cupy")
_CUDART_VERSION = re.compile(rb"#define\s+CUDART_VERSION\s+(\d+)")

_lock = threading.Lock()
#: aot key -> (registry, spec, manifest entry), for every attached registry; the held payloads by CuPy's name.
_state: dict[str, Any] = {"table": {}, "pending": {}, "installed": None, "paths": None, "cuda_headers": None}


def installed_version() -> str:
    """The installed CuPy release (from its distribution's metadata: no import), ``"missing"`` without one."""
    for dist in DISTRIBUTIONS:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "missing"


def host_paths() -> dict[str, str]:
    """This install's paths CuPy puts into its options (``core.assemble_cupy_compiler_options``): its bundled
    headers and the CUDA runtime headers, as the placeholders of :data:`aot.core.cupyspec.PLACEHOLDERS`."""
    from cupy._core import core  # CuPy: only where a set ships CuPy kernels (the caller imported it already)
    from cuda.pathfinder import find_nvidia_header_directory
    return {"{cupy_include}": str(core._get_header_dir_path()),
            "{cuda_include}": str(find_nvidia_header_directory("cudart") or "")}


def cuda_headers_version(paths: Mapping[str, str]) -> str:
    """``CUDART_VERSION`` of the CUDA headers CuPy compiles with: CuPy's key names their path, not their text."""
    inc = paths.get("{cuda_include}")
    if not inc:
        return "none"
    try:
        with open(Path(inc) / "cuda_runtime_api.h", "rb") as f:
            m = _CUDART_VERSION.search(f.read(256 * 1024))
    except OSError:
        return "unreadable"
    return m.group(1).decode() if m else "unknown"


def normalize(key_src: bytes, paths: Mapping[str, str]) -> bytes:
    """``key_src`` with this install's paths written as their placeholders (longest path first)."""
    for ph, path in sorted(paths.items(), key=lambda kv: -len(kv[1])):
        if path:
            key_src = key_src.replace(path.encode(), ph.encode())
    return key_src


def lookup_key(key_src: bytes, paths: Mapping[str, str], cupy_version: str, cuda_headers: str) -> str:
    """aot's key of one CuPy compile: CuPy's own ``key_src`` (all it hashes) less the install's paths, plus the
    CuPy release (``CUPY_CACHE_KEY`` hashes its headers only) and the CUDA headers' version."""
    h = hashlib.sha256(b"aot-cupy-key-v1\0")
    for label, value in (("cupy", cupy_version.encode()), ("cuda_headers", cuda_headers.encode()),
                         ("key_src", normalize(key_src, paths))):
        h.update(label.encode() + b"\0" + len(value).to_bytes(8, "little") + value)
    return h.hexdigest()


def substitute(options: Iterable[str], paths: Mapping[str, str]) -> tuple[str, ...]:
    """A spec's options with this install's paths in place of the placeholders."""
    out = []
    for opt in options:
        for ph, path in paths.items():
            opt = opt.replace(ph, path)
        out.append(opt)
    return tuple(out)


class _Backend:
    """CuPy's kernel cache backend, wrapped: CuPy's own answer first, then a payload held for this name."""

    def __init__(self, inner: Any):
        self.inner = inner

    def load(self, name: str) -> bytes | None:
        got = self.inner.load(name)
        held = _state["pending"].get(name.rpartition(".")[0])  # kept: another thread or device may ask again
        if got is None and held is not None:
            log.debug("cupy: %s served from a packaged kernel", name)
            return held
        return got

    def save(self, name: str, cubin: bytes, source: str) -> None:
        self.inner.save(name, cubin, source)

    def __getattr__(self, attr: str) -> Any:  # anything else a caller asks of CuPy's backend
        return getattr(self.inner, attr)


def _observe(original: Any) -> Any:
    def _hash_hexdigest(value: bytes) -> str:
        name = original(value)
        if _state["table"] and name not in _state["pending"]:
            try:
                _consider(value, name)
            except Exception as e:  # noqa: BLE001 - serving never breaks CuPy's compile: it compiles
                log.info("cupy: not served (%s: %s)", type(e).__name__, e)
        return name
    _hash_hexdigest._aot_cupy = True  # type: ignore[attr-defined]
    return _hash_hexdigest


def _consider(key_src: bytes, name: str) -> None:
    """Hold the packaged payload whose aot key is this compile's, if one passes every check."""
    key = lookup_key(key_src, _state["paths"], _state["installed"], _state["cuda_headers"])
    hit = _state["table"].get(key)
    if hit is None:
        return
    registry, spec, entry = hit
    from ..loader.sources import check_packaged
    path = registry.manifest.path_of(entry)
    try:
        art = check_packaged(registry.manifest, spec, entry, path)
        if art.header.get("cupy_key") != key:
            raise AotError("its header's CuPy key differs from the manifest's")
    except Exception as e:  # noqa: BLE001 - a foreign or corrupt artifact: said once, CuPy compiles
        registry._warn(f"aot: skipping {path}: {e}; CuPy compiles {spec.name}")
        return
    _state["pending"][name] = art.payload


def _install(compiler: Any) -> None:
    if not getattr(compiler._hash_hexdigest, "_aot_cupy", False):
        compiler._hash_hexdigest = _observe(compiler._hash_hexdigest)
    if not isinstance(compiler._kernel_cache_backend, _Backend):
        compiler._kernel_cache_backend = _Backend(compiler._kernel_cache_backend)


def attach_cupy(registry: Any) -> dict[str, str]:
    """Serve ``registry``'s CuPy kernels at CuPy's compile call (see the module's docstring). Imports CuPy's
    compiler (a library shipping CuPy kernels has imported CuPy). Returns, per spec, ``"attached"`` or why not
    (said once as an ``AotWarning``; CuPy then compiles as it does today). Reads no artifact now: each is read and
    checked when CuPy first asks for its kernel."""
    from ...core.spec import CupyKernel
    specs = [s for s in (registry.spec(n) for n in registry.names()) if isinstance(s, CupyKernel)]
    if not specs or registry.manifest is None:
        return {}
    installed = installed_version()
    why = None
    if installed == "missing":
        why = "aot: CuPy is not installed: the packaged CuPy kernels are not attached"
    elif installed not in VERIFIED:
        why = (f"aot: CuPy {installed} is not one aot was checked against ({', '.join(VERIFIED)}): packaged CuPy "
               f"kernels are not attached; CuPy compiles them")
    elif any(s.cupy != installed for s in specs):
        other = sorted({s.cupy for s in specs if s.cupy != installed})
        why = (f"aot: {registry.root}: CuPy kernels were built with CuPy {', '.join(other)}, installed is "
               f"{installed}: they are not attached; CuPy compiles them")
    if why:
        registry._warn(why)
        return {s.name: why for s in specs}
    from cupy.cuda import compiler  # CuPy: only for a package that ships CuPy kernels
    with _lock:
        if _state["paths"] is None:
            paths = host_paths()
            _state["paths"], _state["cuda_headers"] = paths, cuda_headers_version(paths)
        _state["installed"] = installed
        for s in specs:
            for entry in registry.manifest.entries_for(s.name):
                key = entry.get("cupy_key")
                if isinstance(key, str):
                    _state["table"].setdefault(key, (registry, s, entry))
        _install(compiler)
    return {s.name: "attached" for s in specs}


def detach_cupy() -> None:
    """Forget every attached kernel and give CuPy back its own hash and backend (tests; a library need not)."""
    import sys
    compiler: Any = sys.modules.get("cupy.cuda.compiler")
    with _lock:
        _state["table"].clear()
        _state["pending"].clear()
        if compiler is not None:
            if isinstance(compiler._kernel_cache_backend, _Backend):
                compiler._kernel_cache_backend = compiler._kernel_cache_backend.inner
            fn = compiler._hash_hexdigest
            if getattr(fn, "_aot_cupy", False):
                compiler._hash_hexdigest = fn.__closure__[0].cell_contents
