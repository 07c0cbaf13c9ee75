"""The runtime loader: the best artifact for this GPU, else the per-user cache, else JIT.

For a device of compute capability ``cc`` (see :func:`aot.arch.rank`): a packaged artifact for exactly
``cc``; else one of the same major with the highest minor <= the device's; NVRTC only: else PTX with
SM <= ``cc``; else the per-user cache (CCCL: our artifact files; NVRTC: cuda.core's
``FileStreamProgramCache``); else JIT for this device, persisted to the user cache.

Nothing read from disk is trusted: magic, bounds, sizes, sha256 (file vs manifest and payload vs
header), the spec's content key and the producer versions (exact cuda-cccl, CUDA major) are checked
before ``deserialize``. Any mismatch costs one warning naming the file and the reason, then the next
source serves. Never a crash, never a wrong result.

Threads: a deserialized cuda.compute object is not safe for concurrent calls (each call writes its
arguments into it), so :meth:`Registry.cccl` returns a per-thread object; the bytes behind it are
read and checked once per process, and threads asking for the same uncached spec share one build.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, cast

from . import warm as _warm
from ..core import format as fmt
from ..core.env import DISABLE_PACKAGED
from .lean import import_cuda_compute, require_jit
from ..core.log import get_logger
from ..core.arch import Candidate, rank
from ..core.versions import check_producer
from .driver import check_ptx_loadable, require_driver
from ..core.errors import AotError, ArtifactError, NoDeviceError
from ..core.manifest import MANIFEST_NAME, Manifest, load_manifest
from ..core.spec import CcclSpec, NvrtcUnit, Spec
from ..core.text import short

#: A manifest with many unusable specs costs this many warnings naming them, then one for the rest.
_MAX_SPEC_WARNINGS = 8


log = get_logger(__name__)


class AotWarning(UserWarning):
    """An artifact or cache entry was skipped; the next source served instead."""


@dataclass
class SpecStatus:
    name: str
    source: str | None = None  # "packaged" | "cache" | "jit"
    sm: int | None = None
    path: str | None = None
    ms: float | None = None
    errors: list = field(default_factory=list)
    kernels: int | None = None  # kernels warmup loaded into the device; None: they load at the first call


@dataclass
class _Loaded:
    """What one process keeps per spec: the checked payload, where it came from, a spare object."""

    payload: bytes | None
    kind: str
    sm: int
    source: str
    path: str | None
    obj: Any = None  # CCCL: a spare deserialized object for the first thread that asks; NVRTC: ObjectCode


def current_device_sm() -> int:
    """SM of the current CUDA device (device 0 unless the caller made another current)."""
    try:  # never call into a missing driver: after one failed call, the next can hang
        require_driver("a CUDA device")
    except NoDeviceError as e:
        raise NoDeviceError(f"no usable CUDA device: {e}") from None
    try:
        from cuda.core import Device
        dev = Device()
        dev.set_current()
        major, minor = dev.compute_capability
    except Exception as e:  # noqa: BLE001 - any driver failure means "no usable device"
        raise NoDeviceError(f"no usable CUDA device: {e}") from None
    return 10 * major + minor


class Registry:
    """The artifacts of one directory (or installed package folder) plus the specs to JIT when none fits.

    ``Registry(path)`` reads ``path/manifest.json``; ``Registry.from_package("pkg", "artifacts")`` does
    the same for a package's data folder, so downstream packages can ship their own artifacts. A missing
    manifest is not an error: the registry then serves from the user cache / JIT using ``specs``.

    Operators from code (``op: "pkg.mod:func"``) are imported, to JIT or re-key a spec, only for the
    caller's ``specs`` or inside ``owner`` (the package that owns the artifacts; ``from_package`` sets it).
    """

    def __init__(self, source: str | os.PathLike | None, *, specs: Iterable[Spec] | None = None,
                 device_sm: int | None = None, owner: str | None = None):
        self.root = Path(source) if source is not None else None
        self._device_sm = device_sm
        self._device_id: int | None = None  # the device the registry serves (warmup threads make it current)
        self._warm_device: int | None = None  # the device current where request_warmup was called
        self._lock = threading.Lock()
        self._inflight: dict[str, threading.Lock] = {}
        self._loaded: dict[str, _Loaded] = {}
        self._tls = threading.local()
        self._status: dict[str, SpecStatus] = {}
        self._warned: set[str] = set()
        self._pool: ThreadPoolExecutor | None = None
        self._futures: dict[str, Any] = {}
        self.manifest: Manifest | None = None
        self._no_manifest: str | None = None  # from_package: why the package ships no artifacts
        self._specs: dict[str, Spec] = {}
        root = self.root
        if root is not None and (root / MANIFEST_NAME).exists() and not DISABLE_PACKAGED.get():
            try:
                self.manifest = load_manifest(root, skip_bad_specs=True)
            except ArtifactError as e:
                self._warn(f"ignoring packaged artifacts: {e}")
            except Exception as e:  # noqa: BLE001 - a crafted manifest must never crash the host application
                self._warn(f"ignoring packaged artifacts: {root / MANIFEST_NAME}: unreadable "
                           f"({type(e).__name__})")
        if self.manifest is not None:
            assert root is not None  # a manifest was read from it
            self._specs.update(self.manifest.built)  # checked by the matrix's own validator, once
            skipped = self.manifest.skipped
            for name, why in skipped[:_MAX_SPEC_WARNINGS]:
                self._warn(f"{root / MANIFEST_NAME}: spec {short(name)} skipped ({why}); it can only JIT "
                           f"if the caller's specs define it")
            if len(skipped) > _MAX_SPEC_WARNINGS:
                self._warn(f"{root / MANIFEST_NAME}: {len(skipped) - _MAX_SPEC_WARNINGS} more unusable "
                           f"specs skipped")
        self._owner = owner  # the package that owns the artifacts: its operators from code may be imported
        self._trusted: set[str] = set()  # specs the caller passed: their operators from code may be imported
        for s in specs or ():  # the caller's definition wins: packaged artifacts of another one are stale
            self._specs[s.name] = s
            self._trusted.add(s.name)

    @classmethod
    def from_package(cls, package: str, folder: str = "artifacts", **kw) -> "Registry":
        """The artifacts an installed package ships as data in ``<package>/<folder>/`` (what ``aot bundle``
        and the build hooks write): ``registry = aot.Registry.from_package(__name__)`` in its __init__.

        A missing folder or manifest is one :class:`AotWarning` naming the path (a typo in ``folder``, a
        wheel built without artifacts); the registry then serves only specs passed in ``specs`` (JIT), and
        "unknown spec" errors say that no manifest was found."""
        root = package_artifact_dir(package, folder)
        reg = cls(root, owner=package, **kw)
        if not (root / MANIFEST_NAME).is_file() and not DISABLE_PACKAGED.get():
            what = "no such folder" if not root.is_dir() else f"no {MANIFEST_NAME} in it"
            why = f"no manifest was found at {root / MANIFEST_NAME} ({what})"
            reg._no_manifest = why
            reg._warn(f"aot: package {package!r} ships no artifacts: {why}")
        return reg

    # ------------------------------------------------------------------ introspection
    def names(self) -> list[str]:
        return sorted(self._specs)

    def spec(self, name: str) -> Spec:
        try:
            return self._specs[name]
        except KeyError:
            import difflib
            close = difflib.get_close_matches(name, self._specs, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            note = self._no_manifest
            raise AotError(f"unknown spec {name!r}{hint}" + (f"; {note}" if note else "")) from None

    def device_sm(self) -> int:
        if self._device_sm is None:
            self._device_sm = current_device_sm()
            try:
                from cuda.core import Device
                self._device_id = Device().device_id
            except Exception:  # noqa: BLE001 - an explicit device_sm (tests) needs no device
                pass
        return self._device_sm

    def status(self) -> dict[str, SpecStatus]:
        """Per spec asked for so far: the source that served it, SM, load milliseconds, skipped sources,
        kernels warmup loaded into the device.

        A snapshot taken under the registry's lock: warmup threads add entries concurrently, and every
        insertion into ``_status`` happens under the same lock (see :meth:`_status_of`)."""
        with self._lock:
            return {n: SpecStatus(s.name, s.source, s.sm, s.path, s.ms, list(s.errors), s.kernels)
                    for n, s in self._status.items()}

    def _status_of(self, name: str) -> SpecStatus:
        """The status record of ``name``, created under the lock (status() iterates the dict)."""
        with self._lock:
            st = self._status.get(name)
            if st is None:
                st = self._status[name] = SpecStatus(name)
            return st

    # ------------------------------------------------------------------ public loading API
    def cccl(self, name: str) -> "CcclAlgorithm":
        """A ready-to-call cuda.compute algorithm for this device, owned by the calling thread."""
        spec = self.spec(name)
        if not isinstance(spec, CcclSpec):
            raise AotError(f"{name!r} is an NVRTC unit; use kernel({name!r}, kernel_name)")
        per_thread = self._tls.__dict__.setdefault("objs", {})
        obj = per_thread.get(name)
        if obj is not None:
            return obj
        loaded = self._load(name)
        with self._lock:
            spare, loaded.obj = loaded.obj, None
        if spare is None:
            spare = import_cuda_compute().deserialize(loaded.payload)
        algo = CcclAlgorithm(spec, spare)
        per_thread[name] = algo
        return algo

    def kernel(self, unit: str, kernel_name: str) -> Any:  # a cuda.core.Kernel
        """A ``cuda.core.Kernel`` of ``unit`` for this device."""
        spec = self.spec(unit)
        if not isinstance(spec, NvrtcUnit):
            raise AotError(f"{unit!r} is a CCCL spec; use cccl({unit!r})")
        if kernel_name not in spec.kernels:
            raise AotError(f"unit {unit!r} has no kernel {kernel_name!r}; it has {', '.join(spec.kernels)}")
        return self._load(unit).obj.get_kernel(kernel_name)

    def request_warmup(self, names: Iterable[str] | None = None) -> None:
        """Start loading ``names`` (default: all) in background threads; returns at once; idempotent.

        Warm means: the artifact read, checked and deserialized, its library loaded for the device and
        every kernel of it loaded into the device (:mod:`aot._warm`), so the first call runs like the
        second. Nothing CUDA is imported or queried in the caller's thread (about 0.1 ms): the threads
        import cuda.compute and resolve the device, the one current in the caller's thread if any."""
        names = list(names) if names is not None else self.names()
        for n in names:
            self.spec(n)
        if self._device_sm is None and self._warm_device is None:
            self._warm_device = _warm.caller_device()  # the caller's current device is the one to warm up for
        with self._lock:
            new = [n for n in dict.fromkeys(names) if n not in self._futures]
            for n in new:
                self._futures[n] = Future()
        if not new:
            return
        cccl = [n for n in new if isinstance(self._specs[n], CcclSpec)]
        nvrtc = [n for n in new if n not in cccl]
        go = threading.Event()

        def dispatch() -> None:
            go.wait()  # the caller never waits for the GIL behind a busy warmup thread
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="aot-warmup")
                pool = self._pool
            # This thread alone imports CUDA's packages, in order: importing them from several threads at
            # once can hand one a partially initialised module ("cannot import name 'Device'"). NVRTC
            # units need no cuda.compute: they load while it imports (~200 ms).
            _import_quietly(_warm.import_cuda_core)
            for n in nvrtc:
                pool.submit(self._warm_into, n, self._futures[n])
            if cccl:
                _import_quietly(import_cuda_compute)
            for n in cccl:
                pool.submit(self._warm_into, n, self._futures[n])

        threading.Thread(target=dispatch, name="aot-warmup-dispatch", daemon=True).start()
        go.set()

    def ensure_warm(self, timeout: float | None = None) -> list[str]:
        """Block until requested warmups finish (or ``timeout`` seconds pass); return the still-cold names."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            futures = dict(self._futures)
        cold = []
        for n, f in futures.items():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                f.result(timeout=left)
            except Exception:  # noqa: BLE001 - reported through status() and the returned list
                cold.append(n)
        return sorted(cold)

    def _warm_into(self, name: str, future: Future) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            self._warm_one(name)
        except BaseException as e:  # noqa: BLE001 - handed to ensure_warm through the future
            future.set_exception(e)
        else:
            future.set_result(None)

    def _warm_one(self, name: str) -> None:
        try:
            if self._warm_device is not None and self._device_sm is None:
                from cuda.core import Device
                Device(self._warm_device).set_current()  # before device_sm(): it asks the current device
            self.device_sm()
            if self._device_id is not None:
                from cuda.core import Device
                Device(self._device_id).set_current()
            loaded = self._load(name)
            spec = self._specs[name]
            if isinstance(spec, CcclSpec):
                with self._lock:
                    spare = loaded.obj
                if spare is None:  # JIT/cache results and taken spares: make one for the next thread
                    spare = import_cuda_compute().deserialize(loaded.payload)
                kernels = self._load_kernels(name, lambda: _warm.warm_cccl(spare))
                with self._lock:
                    if loaded.obj is None:
                        loaded.obj = spare
            else:
                names = spec.kernels
                kernels = self._load_kernels(name, lambda: _warm.warm_nvrtc(loaded.obj, names))
            st = self._status_of(name)
            with self._lock:
                st.kernels = kernels
        except Exception as e:
            st = self._status_of(name)
            with self._lock:
                st.errors.append(f"warmup: {e}")
            log.debug("warmup of %s failed: %s: %s", name, type(e).__name__, e)
            raise

    def _load_kernels(self, name: str, warm: Callable[[], int]) -> int | None:
        """Run a :mod:`aot._warm` loader; its failure is not the spec's (the kernels then load at the first
        call, as without warmup): record why in the spec's status and go on."""
        try:
            n = warm()
        except Exception as e:  # noqa: BLE001 - KernelsNotLoaded, a driver error: the spec still works
            st = self._status_of(name)
            with self._lock:
                st.errors.append(f"warmup: kernels not preloaded: {e}")
            log.debug("warmup of %s: kernels not preloaded: %s", name, e)
            return None
        log.debug("warmup of %s: %d kernel(s) loaded into the device", name, n)
        return n

    # ------------------------------------------------------------------ the search
    def _warn(self, msg: str) -> None:
        if msg not in self._warned:
            self._warned.add(msg)
            warnings.warn(msg, AotWarning, stacklevel=3)

    def _load(self, name: str) -> _Loaded:
        loaded = self._loaded.get(name)
        if loaded is not None:
            return loaded
        with self._lock:
            gate = self._inflight.setdefault(name, threading.Lock())
        with gate:  # single flight: threads asking for the same spec share one load/build
            loaded = self._loaded.get(name)
            if loaded is not None:
                return loaded
            t0 = time.perf_counter()
            st = self._status_of(name)
            loaded = self._search(self._specs[name], st)
            ms = (time.perf_counter() - t0) * 1e3
            with self._lock:
                st.source, st.sm, st.path, st.ms = loaded.source, loaded.sm, loaded.path, ms
            self._loaded[name] = loaded
            log.info("%s: served from %s (%s sm_%s, %s) in %.1f ms", name, loaded.source, loaded.kind,
                     loaded.sm, loaded.path or "in memory", ms)
            return loaded

    def _search(self, spec: Spec, st: SpecStatus) -> _Loaded:
        device_sm = self.device_sm()
        if isinstance(spec, NvrtcUnit):  # every NVRTC source ends in a module load: a real driver or nothing
            require_driver(f"loading NVRTC unit {spec.name!r}")
        refusal = None
        if isinstance(spec, CcclSpec) and spec.code:
            spec, refusal = self._code_spec(spec)
        cands = self.packaged_candidates(spec, device_sm)
        log.debug("%s: device sm_%d, %d packaged candidate(s): %s", spec.name, device_sm, len(cands),
                  ", ".join(f"{c.kind} sm_{c.sm}" for c in cands) or "none")
        for cand in cands:
            entry = cast(Mapping[str, Any], cand.ref)  # packaged_candidates puts manifest entries there
            assert self.manifest is not None  # candidates come only from a manifest
            path = self.manifest.path_of(entry)
            t0 = time.perf_counter()
            try:
                loaded = self.open_packaged(spec, entry, path, device_sm)
            except NoDeviceError:
                raise  # not the artifact's fault: no other source can do better without a device
            except Exception as e:  # noqa: BLE001 - any failure (cuda.core's CUDAError too): next source
                msg = f"aot: skipping {path}: {e}"
                st.errors.append(msg)
                log.debug("%s: candidate %s skipped: %s", spec.name, path, e)
                self._warn(msg)
            else:
                log.debug("%s: candidate %s accepted in %.1f ms", spec.name, path,
                          (time.perf_counter() - t0) * 1e3)
                return loaded
        if refusal is not None:  # packaged artifacts need no import; JIT would import the operator's module
            self._warn(refusal)
            raise AotError(refusal)
        log.debug("%s: no packaged artifact served; trying the user cache, then JIT for sm_%d", spec.name, device_sm)
        require_jit(spec.name, device_sm)  # stand-ins instead of the toolkit: one error naming the extra
        try:
            if isinstance(spec, CcclSpec):
                from .jit import cccl_from_cache_or_jit
                payload, source, path = cccl_from_cache_or_jit(spec, device_sm, st.errors, self._warn)
                return _Loaded(payload, "cccl-blob", device_sm, source, path)
            from .jit import nvrtc_from_cache_or_jit
            obj, source, path = nvrtc_from_cache_or_jit(spec, device_sm)
            return _Loaded(None, "cubin", device_sm, source, path, obj=obj)
        except AotError:
            raise
        except Exception as e:  # noqa: BLE001 - nothing else can serve: say why, with every earlier reason
            st.errors.append(f"JIT: {type(e).__name__}: {e}")
            raise AotError(f"{spec.name}: no packaged artifact fits sm_{device_sm} and JIT failed "
                           f"({type(e).__name__}: {e})" + (f"; earlier: {'; '.join(st.errors[:-1])}"
                                                           if len(st.errors) > 1 else "")) from e

    def _code_spec(self, spec: CcclSpec) -> tuple[CcclSpec, str | None]:
        """A spec with operators from code, as it stands now. Importing a module runs it, so only the
        caller's own specs (the matrix being built) or, for a manifest's, modules inside the package that
        owns the artifacts are resolved; any other reference is refused with one AotWarning. A resolved
        operator whose source changed re-keys the spec: its packaged artifacts are then stale and JIT
        builds the edited one. Returns the spec and, when refused, why (packaged artifacts still serve:
        loading one imports nothing)."""
        from ..core.opref import OpRefError, inside, source_digest
        if spec.name not in self._trusted:
            foreign = [r for r in spec.code if self._owner is None or not inside(r, self._owner)]
            if foreign:
                where = f"package {self._owner!r}" if self._owner else "the package that owns the artifacts"
                return spec, (f"aot: {spec.name}: refusing to import operator {foreign[0]!r} named by "
                              f"{self.root}/manifest.json: it is outside {where}; a manifest never makes aot "
                              f"import other modules")
        try:
            now = {ref: source_digest(ref) for ref in spec.code}
        except OpRefError as e:
            return spec, f"aot: {spec.name}: {e}"
        if now == dict(spec.code):
            return spec, None
        return CcclSpec(name=spec.name, algorithm=spec.algorithm, params=spec.params, types=spec.types,
                        code=now), None

    def packaged_candidates(self, spec: Spec, device_sm: int) -> list[Candidate]:
        if self.manifest is None:
            return []
        cands = [Candidate(e["sm"], e["payload_kind"], "packaged", e) for e in self.manifest.entries_for(spec.name)]
        return rank(device_sm, cands)

    def open_packaged(self, spec: Spec, entry: Mapping[str, Any], path: Path, device_sm: int) -> _Loaded:
        data = fmt.read_file(path, expect_size=entry["size"])  # a regular file, bounded, never blocks
        import hashlib
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            raise ArtifactError("file differs from its manifest entry (size or sha256)")
        art = fmt.decode(data)
        h = art.header
        if (h["name"], h["family"], h["sm"], h["payload_kind"]) != \
                (spec.name, spec.family, entry["sm"], entry["payload_kind"]):
            raise ArtifactError("header does not match its manifest entry (name, family, SM or kind)")
        if h["content_key"] != entry["content_key"]:
            raise ArtifactError("content key differs from the manifest's")
        from ..core.spec import item_key
        if self.manifest is None:
            raise ArtifactError("no manifest: packaged artifacts are opened only through one")
        if h["content_key"] != item_key(spec, entry["sm"], entry["payload_kind"], self.manifest.producer):
            raise ArtifactError(f"built from another definition of {spec.name!r} (a stale artifact)")
        check_producer(h["producer"], h["family"])
        if spec.family == "cccl":
            obj = import_cuda_compute().deserialize(art.payload)  # raises RuntimeError on an incompatible blob
            return _Loaded(art.payload, art.kind, art.sm, "packaged", str(path), obj=obj)
        from cuda.core import ObjectCode
        symbols = symbol_mapping(h)
        kw = {"symbol_mapping": symbols} if symbols else {}
        if art.kind == "ptx":
            check_ptx_loadable(h["producer"])
            code = ObjectCode.from_ptx(art.payload, name=spec.name, **kw)
        else:
            code = ObjectCode.from_cubin(art.payload, name=spec.name, **kw)
        assert isinstance(spec, NvrtcUnit)  # the CCCL family returned above
        for k in spec.kernels:  # load now: a bad image fails here, where we can still fall back
            code.get_kernel(k)
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
    try:
        return Path(str(resources.files(package))) / folder
    except (ModuleNotFoundError, TypeError, ValueError) as e:
        raise AotError(f"package {package!r}: cannot be found ({e})") from None


def _import_quietly(do_import: Callable[[], Any]) -> None:
    """Import ahead of the warmup tasks; a failure is theirs to report (each retries and records it)."""
    try:
        do_import()
    except Exception:  # noqa: BLE001, S110 - no driver, no cuda.compute: the tasks say so in status()
        pass


def _compiled_stateless_op():
    """An operator adapter standing for the spec's stateless lambda, already compiled into the artifact.

    cuda.compute only reads an operator's state bytes at call time; handing it the Python lambda would
    JIT it through numba-cuda-mlir on every first call (seconds) just to learn the state is empty.
    """
    from cuda.compute.op import _OpAdapter

    class CompiledStatelessOp(_OpAdapter):
        def compile(self, input_types, output_type=None):
            raise RuntimeError("aot: this operator is already compiled into the loaded artifact")

    return CompiledStatelessOp()


class CcclAlgorithm:
    """A loaded cuda.compute algorithm with its operator bound: call it as the cuda.compute object, and
    leave out ``op``/``cond`` (the spec's operator is what was compiled; a lambda passed anyway is
    replaced by a stand-in carrying its empty state, so no numba JIT happens at call time).
    ``raw`` is the underlying cuda.compute object. Not thread-safe: one per thread (``Registry.cccl``)."""

    __slots__ = ("spec", "raw", "_ops", "_defaults")

    def __init__(self, spec: CcclSpec, raw):
        from ..algorithms import ALGORITHMS
        from ..algorithms import BUILTIN_OPS
        self.spec, self.raw = spec, raw
        algo = ALGORITHMS[spec.algorithm]
        self._defaults = algo.bound_arguments(spec.params)  # compiled-in values, unless the caller passes them
        self._ops = {}  # call keyword -> the operator compiled into the artifact
        for slot in algo.ops:
            op = spec.params[slot.field]
            self._ops[slot.keyword] = (import_cuda_compute().OpKind[op.upper()] if op in BUILTIN_OPS
                                       else _compiled_stateless_op())

    def __call__(self, **kwargs):
        # The compiled operators are the spec's, whatever is passed: bind them (no checks on the hot path).
        if self._defaults:
            kwargs = {**self._defaults, **kwargs}
        kwargs.update(self._ops)
        return self.raw(**kwargs)

    def __repr__(self) -> str:
        return f"<aot CcclAlgorithm {self.spec.name} ({self.spec.algorithm})>"


# ---------------------------------------------------------------------- the default registry
_default: Registry | None = None
_default_lock = threading.Lock()


def default_registry() -> Registry:
    """``aot``'s own packaged artifacts (``aot/artifacts``), with the bundled matrix's specs for JIT (read
    from ``aot/default_specs.json``: the runtime parses no YAML)."""
    global _default
    with _default_lock:
        if _default is None:
            from . import default_specs as _default_specs
            try:
                specs = _default_specs.load()
            except AotError as e:
                warnings.warn(f"aot: {e}; serving the packaged manifest's specs only", AotWarning, stacklevel=2)
                specs = []
            _default = Registry(Path(str(resources.files("aot"))) / "artifacts", specs=specs)
        return _default
