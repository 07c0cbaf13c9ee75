"""Where a spec is served from: the best packaged artifact for this GPU, else the per-user cache, else JIT.

For a device of compute capability ``cc`` (see :func:`aot.core.arch.rank`): a packaged artifact for
exactly ``cc``; else one of the same major with the highest minor <= the device's; NVRTC only: else PTX
with SM <= ``cc``; else the per-user cache (CCCL: our artifact files; NVRTC: cuda.core's
``FileStreamProgramCache``); else JIT for this device, persisted to the user cache.

Nothing read from disk is trusted (:func:`open_packaged`): magic, bounds, sizes, sha256 (file vs manifest
and payload vs header), the spec's content key and the producer versions (exact cuda-cccl, CUDA major)
are checked before ``deserialize``. Any mismatch costs one warning naming the file and the reason, then
the next source serves. Never a crash, never a wrong result.

The functions here hold no state: :func:`search` asks the registry (a :class:`SourceHost`) for its
manifest, device and warning channel, and opens candidates through the registry's own methods.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping, Protocol, cast

from ...core import format as fmt
from ...core.arch import Candidate, rank
from ...core.errors import AotError, ArtifactError, NoDeviceError
from ...core.log import get_logger
from ...core.manifest import Manifest
from ...core.spec import CcclSpec, CupyKernel, NumbaKernel, NvrtcUnit, Spec, TritonKernel
from .driver import check_ptx_loadable, require_driver
from .lean import foreign_cccl, import_cuda_compute, require_cuda_cccl, require_jit
from .library import DriverLibrary
from .threads import IMPORTS
from .objects import SpecStatus, _Loaded
from .packaged import check_packaged  # noqa: F401 - the checks before a load, in a module of their own

#: The loader's records keep the logger name they always had (one name for the whole search).
log = get_logger("aot.runtime.registry")  # the channel users filter on: its name outlives the move


class SourceHost(Protocol):
    """What :func:`search` needs of the registry that owns the artifacts."""

    manifest: Manifest | None

    def device_sm(self) -> int: ...

    def packaged_candidates(self, spec: Spec, device_sm: int) -> list[Candidate]: ...

    def open_packaged(self, spec: Spec, entry: Mapping[str, Any], path: Path, device_sm: int) -> _Loaded: ...

    def _code_spec(self, spec: CcclSpec) -> tuple[CcclSpec, str | None]: ...

    def _warn(self, msg: str) -> None: ...


def search(host: SourceHost, spec: Spec, st: SpecStatus) -> _Loaded:
    """Serve ``spec``: packaged candidates best first, then the user cache / JIT; skipped sources are
    recorded in ``st.errors`` and warned about once through ``host._warn``."""
    device_sm = host.device_sm()
    if isinstance(spec, NumbaKernel):  # served through its own dispatcher (Registry.attach_numba), not from here
        raise AotError(f"{spec.name!r} is a numba-cuda kernel: Registry.attach_numba() serves it to its dispatcher")
    if isinstance(spec, CupyKernel):  # served at CuPy's own compile call (adapters.cupy_attach), not from here
        raise AotError(f"{spec.name!r} is a CuPy kernel: Registry.from_package serves it at CuPy's compile call")
    if isinstance(spec, TritonKernel):  # served at Triton's cache lookup (adapters.triton_attach), not from here
        raise AotError(f"{spec.name!r} is a Triton kernel: Registry.from_package serves it at its launch")
    live = None
    if isinstance(spec, NvrtcUnit):  # every NVRTC source ends in a module load: a real driver or nothing
        require_driver(f"loading NVRTC unit {spec.name!r}")
        spec, live = live_unit(spec, getattr(host, "_owner", None))
        if live is not None:  # the library's own text differs: its packaged artifacts are of another text
            host._warn(live)
            st.errors.append(live)
    refusal = None
    if isinstance(spec, CcclSpec):  # no cuda-cccl: neither a packaged blob nor JIT can serve it
        require_cuda_cccl(spec.name, host.manifest)
    if isinstance(spec, CcclSpec) and spec.code:
        spec, refusal = host._code_spec(spec)
    cands = host.packaged_candidates(spec, device_sm) if live is None else []  # CCCL: the installed release's blobs
    packaged = host.manifest is not None and bool(host.manifest.entries_for(spec.name))
    foreign = foreign_cccl(host.manifest, getattr(host, "_owner", None)) if packaged and spec.family == "cccl" \
        else None
    if foreign is not None:  # other cuda-cccl releases built the package: one warning for it, not one per file
        host._warn(foreign.warning)
        st.errors.append(foreign.warning)
        cands = []
    log.debug("%s: device sm_%d, %d packaged candidate(s): %s", spec.name, device_sm, len(cands),
              ", ".join(f"{c.kind} sm_{c.sm}" for c in cands) or "none")
    for cand in cands:
        entry = cast(Mapping[str, Any], cand.ref)  # packaged_candidates puts manifest entries there
        assert host.manifest is not None  # candidates come only from a manifest
        path = host.manifest.path_of(entry)
        t0 = time.perf_counter()
        try:
            loaded = host.open_packaged(spec, entry, path, device_sm)
        except NoDeviceError:
            raise  # not the artifact's fault: no other source can do better without a device
        except Exception as e:  # noqa: BLE001 - any failure (cuda.core's CUDAError too): next source
            msg = f"aot: skipping {path}: {e}"
            st.errors.append(msg)
            log.debug("%s: candidate %s skipped: %s", spec.name, path, e)
            host._warn(msg)
        else:
            log.debug("%s: candidate %s accepted in %.1f ms", spec.name, path,
                      (time.perf_counter() - t0) * 1e3)
            return loaded
    if refusal is not None:  # packaged artifacts need no import; JIT would import the operator's module
        host._warn(refusal)
        raise AotError(refusal)
    log.debug("%s: no packaged artifact served; trying the user cache, then JIT for sm_%d", spec.name, device_sm)
    require_jit(spec.name, device_sm, foreign)  # stand-ins instead of the toolkit: one error naming the extra
    try:
        if isinstance(spec, CcclSpec):
            from ..jit.jit import cccl_from_cache_or_jit
            payload, source, path = cccl_from_cache_or_jit(spec, device_sm, st.errors, host._warn)
            return _Loaded(payload, "cccl-blob", device_sm, source, path)
        from ..jit.jit import nvrtc_from_cache_or_jit
        obj, source, path = nvrtc_from_cache_or_jit(spec, device_sm)
        return _Loaded(None, "cubin", device_sm, source, path, obj=obj)
    except AotError:
        raise
    except Exception as e:  # noqa: BLE001 - nothing else can serve: say why, with every earlier reason
        st.errors.append(f"JIT: {type(e).__name__}: {e}")
        raise AotError(f"{spec.name}: no packaged artifact fits sm_{device_sm} and JIT failed "
                       f"({type(e).__name__}: {e})" + (f"; earlier: {'; '.join(st.errors[:-1])}"
                                                       if len(st.errors) > 1 else "")) from e


def live_unit(spec: NvrtcUnit, owner: str | None) -> tuple[NvrtcUnit, str | None]:
    """A unit from code (``source_path`` ``pkg.mod:ATTR``, or ``pkg.mod:fn(k=v, ...)``) as the running library
    holds it: the library's text is the truth. Where ``pkg.mod`` is imported in this process and its text is not
    the one packaged (the build read it with bare parents, or from an older tree), returns the unit with the
    live text and one warning line: its packaged artifacts are then never served, JIT compiles the live text.
    Nothing is imported: a module not in ``sys.modules`` is not checked. A ``str`` is read from the module's
    namespace (no code runs); a function is called, with the arguments its label records, only when it lies
    in ``owner`` (the package that owns the artifacts), the way the library itself would call it."""
    import sys
    ref, _, args = spec.source_path.partition("(")
    mod, _, attr = ref.partition(":")
    module = sys.modules.get(mod)
    if module is None or getattr(module, "__aot_bare__", False):
        return spec, None
    value = vars(module).get(attr)
    try:
        if isinstance(value, str) and not args:
            text = value
        elif callable(value) and args and owner is not None and (mod == owner or mod.startswith(owner + ".")):
            import ast  # only for a unit rendered by a function of a module imported here
            call = ast.parse(f"f({args}", mode="eval").body
            assert isinstance(call, ast.Call) and not call.args
            text = value(**{kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg})
        else:
            return spec, None
    except Exception as e:  # noqa: BLE001 - the library's own function failed: not checked, logged
        log.debug("%s: the live text of %s could not be rendered (%s: %s)", spec.name, ref, type(e).__name__, e)
        return spec, None
    if not isinstance(text, str) or text == spec.source:
        return spec, None
    return (NvrtcUnit(name=spec.name, source_path=spec.source_path, source=text, kernels=spec.kernels,
                      options=spec.options, headers=spec.headers),
            f"aot: {spec.name}: {spec.source_path} in this process is not the text its artifacts were built from "
            f"(built with its parent packages' __init__ not run? see docs/matrix-imports.md); compiling this "
            f"process's text (JIT), not serving the packaged artifacts")


def code_spec(spec: CcclSpec, *, trusted: bool, owner: str | None, root: Path | None
              ) -> tuple[CcclSpec, str | None]:
    """A spec with operators from code, as it stands now. Importing a module runs it, so only the
    caller's own specs (``trusted``: the matrix being built) or, for a manifest's, modules inside the
    package that owns the artifacts (``owner``) are resolved; any other reference is refused with one
    AotWarning. A resolved operator whose source changed re-keys the spec: its packaged artifacts are then
    stale and JIT builds the edited one. Returns the spec and, when refused, why (packaged artifacts still
    serve: loading one imports nothing)."""
    from ...core.opref import OpRefError, inside, source_digest
    if not trusted:
        foreign = [r for r in spec.code if owner is None or not inside(r, owner)]
        if foreign:
            where = f"package {owner!r}" if owner else "the package that owns the artifacts"
            return spec, (f"aot: {spec.name}: refusing to import operator {foreign[0]!r} named by "
                          f"{root}/manifest.json: it is outside {where}; a manifest never makes aot "
                          f"import other modules")
    try:
        now = {ref: source_digest(ref) for ref in spec.code}
    except OpRefError as e:
        return spec, f"aot: {spec.name}: {e}"
    if now == dict(spec.code):
        return spec, None
    return CcclSpec(name=spec.name, algorithm=spec.algorithm, params=spec.params, types=spec.types,
                    code=now), None


def packaged_candidates(manifest: Manifest | None, spec: Spec, device_sm: int) -> list[Candidate]:
    """The manifest's artifacts of ``spec`` that can serve ``device_sm``, best first."""
    if manifest is None:
        return []
    cands = [Candidate(e["sm"], e["payload_kind"], "packaged", e) for e in manifest.entries_for(spec.name)]
    return rank(device_sm, cands)


def open_packaged(manifest: Manifest | None, spec: Spec, entry: Mapping[str, Any], path: Path,
                  device_sm: int) -> _Loaded:
    """Read, check and load one packaged artifact; ArtifactError (or the loader's error) says why not."""
    return materialize(spec, check_packaged(manifest, spec, entry, path), path)


def materialize(spec: Spec, art: fmt.Artifact, path: Path) -> _Loaded:
    """Load an artifact :func:`check_packaged` accepted: ``cuda.compute.deserialize`` (CCCL), or the unit's
    image through the driver with every kernel resolved (NVRTC: :class:`aot.runtime.loader.library.DriverLibrary`,
    no CUDA Python package imported; the ``cuda.core`` handles are made when first asked)."""
    h = art.header
    if spec.family == "cccl":
        obj = import_cuda_compute().deserialize(art.payload)  # raises RuntimeError on an incompatible blob
        return _Loaded(art.payload, art.kind, art.sm, "packaged", str(path), obj=obj)
    assert isinstance(spec, NvrtcUnit)  # the CCCL family returned above
    if art.kind == "ptx":
        IMPORTS.settle()  # cuda.bindings: not while a warmup's thread imports cuda.core
        check_ptx_loadable(h["producer"])
    code = DriverLibrary(spec.name, art.payload, art.kind, spec.kernels, symbol_mapping(h))
    return _Loaded(None, art.kind, art.sm, "packaged", str(path), obj=code)


def symbol_mapping(header: Mapping[str, Any]) -> dict[str, bytes] | None:
    """A templated unit's ``symbols`` header field (name expression -> lowered name) in the shape
    ``cuda.core.ObjectCode`` wants, the one ``Program.compile(name_expressions=...)`` produces: ``str``
    expressions to ``bytes`` lowered names (a ``str`` value fails at ``get_kernel``). Lowered names are
    mangled C++ symbols, so ASCII; anything else is a damaged header."""
    symbols = header.get("symbols") or None
    if symbols is None:
        return None
    if not (isinstance(symbols, dict) and all(isinstance(k, str) and isinstance(v, str) and v.isascii()
                                              for k, v in symbols.items())):
        raise ArtifactError("header field 'symbols' is not a mapping of names")
    return {k: v.encode("ascii") for k, v in symbols.items()}


def package_artifact_dir(package: str, folder: str = "artifacts") -> Path:
    """``<installed package>/<folder>``; an unimportable package is an error naming it."""
    from importlib import resources  # 12-18 ms to import: only here (the registry finds most folders without it)
    try:
        return Path(str(resources.files(package))) / folder
    except (ModuleNotFoundError, TypeError, ValueError) as e:
        raise AotError(f"package {package!r}: cannot be found ({e})") from None
