"""The runtime loader: the best artifact for this GPU, else the per-user cache, else JIT.

:class:`Registry` is the view of one artifact directory and the specs it can serve. It keeps what a
process loaded (the checked payload of each spec, once, single flight) and hands out per-thread objects;
the rest is delegated: where a spec is served from and how an artifact is checked
(:mod:`aot.runtime.sources`), the background warmup (:mod:`aot.runtime.warmup`), the device
(:class:`aot.runtime.driver.ServedDevice`).

Threads: a deserialized cuda.compute object is not safe for concurrent calls (each call writes its
arguments into it), so :meth:`Registry.cccl` returns a per-thread object; the bytes behind it are
read and checked once per process, and threads asking for the same uncached spec share one build.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..core.arch import Candidate
from ..core.env import DISABLE_PACKAGED
from ..core.errors import AotError, ArtifactError
from ..core.log import get_logger
from ..core.manifest import MANIFEST_NAME, Manifest, load_manifest
from ..core.spec import CcclSpec, NvrtcUnit, Spec
from ..core.text import short
from . import sources
from .driver import ServedDevice
from .lean import import_cuda_compute
from .objects import AotWarning, CcclAlgorithm, SpecStatus, _Loaded
from .sources import package_artifact_dir
from .warmup import WarmPool

#: A manifest with many unusable specs costs this many warnings naming them, then one for the rest.
_MAX_SPEC_WARNINGS = 8


log = get_logger(__name__)


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
        self._device = ServedDevice(device_sm)
        self._lock = threading.Lock()
        self._inflight: dict[str, threading.Lock] = {}
        self._loaded: dict[str, _Loaded] = {}
        self._tls = threading.local()
        self._status: dict[str, SpecStatus] = {}
        self._warned: set[str] = set()
        self._warmup = WarmPool(self._lock, self._device, spec=self.spec, load=self._load,
                                status_of=self._status_of)
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
        return self._device.sm()

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
    def cccl(self, name: str) -> CcclAlgorithm:
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
        every kernel of it loaded into the device (:mod:`aot.runtime.warm`), so the first call runs like
        the second. Nothing CUDA is imported or queried in the caller's thread (about 0.1 ms): the threads
        import cuda.compute and resolve the device, the one current in the caller's thread if any."""
        names = list(names) if names is not None else self.names()
        for n in names:
            self.spec(n)
        self._warmup.request(names)

    def ensure_warm(self, timeout: float | None = None) -> list[str]:
        """Block until requested warmups finish (or ``timeout`` seconds pass); return the still-cold names."""
        return self._warmup.wait(timeout)

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
            loaded = sources.search(self, self._specs[name], st)
            ms = (time.perf_counter() - t0) * 1e3
            with self._lock:
                st.source, st.sm, st.path, st.ms = loaded.source, loaded.sm, loaded.path, ms
            self._loaded[name] = loaded
            log.info("%s: served from %s (%s sm_%s, %s) in %.1f ms", name, loaded.source, loaded.kind,
                     loaded.sm, loaded.path or "in memory", ms)
            return loaded

    def _code_spec(self, spec: CcclSpec) -> tuple[CcclSpec, str | None]:
        """:func:`aot.runtime.sources.code_spec` with this registry's trust: the caller's specs, ``owner``."""
        return sources.code_spec(spec, trusted=spec.name in self._trusted, owner=self._owner, root=self.root)

    def packaged_candidates(self, spec: Spec, device_sm: int) -> list[Candidate]:
        """This manifest's artifacts of ``spec`` that can serve ``device_sm``, best first."""
        return sources.packaged_candidates(self.manifest, spec, device_sm)

    def open_packaged(self, spec: Spec, entry: Mapping[str, Any], path: Path, device_sm: int) -> _Loaded:
        """Read, check and load one of this manifest's artifacts (:func:`aot.runtime.sources.open_packaged`)."""
        return sources.open_packaged(self.manifest, spec, entry, path, device_sm)
