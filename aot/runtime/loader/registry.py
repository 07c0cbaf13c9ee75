"""The runtime loader: the best artifact for this GPU, else the per-user cache, else JIT.

:class:`Registry` is the view of one artifact directory and the specs it can serve. It keeps what a
process loaded (the checked payload of each spec, once, single flight) and hands out per-thread objects;
the rest is delegated: reading the manifest (:mod:`aot.runtime.loader.catalog`), where a spec is served
from and how an artifact is checked (:mod:`aot.runtime.loader.sources`), the background warmup
(:mod:`aot.runtime.warmup.warmup`), the device (:class:`aot.runtime.loader.driver.ServedDevice`).

Nothing heavy in the caller's thread: importing this module (stdlib ``os``, ``threading``, ``warnings``;
:mod:`aot.core.errors`), ``Registry(...)``, ``Registry.from_package(...)`` and ``request_warmup()`` cost
well under a millisecond each. Construction only records its arguments; the catalog (the manifest read
and checked, every spec definition validated, the loader's modules imported) is built once, under a
lock, on first need: in the warmup thread when ``request_warmup`` comes first, else in the first call
that needs it (``names``, ``spec``, ``cccl``, ``kernel``, ``manifest``, ``root``, ...). Warnings the
manifest earns (unreadable, specs skipped) are raised in the thread that first needs it; when that is a
warmup thread they are held and raised in the caller's thread at its next call into the registry
(``ensure_warm``, ``status``, ``cccl``, ``names``, ...), where ``warnings.catch_warnings`` sees them. A
name ``request_warmup`` does not know is raised by ``ensure_warm``.

Threads: a deserialized cuda.compute object is not safe for concurrent calls (each call writes its
arguments into it), so :meth:`Registry.cccl` returns a per-thread object; the bytes behind it are
read and checked once per process, and threads asking for the same uncached spec share one build.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import warnings
from contextlib import AbstractContextManager, nullcontext  # imported by typing already
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from ...core.errors import AotError, AotWarning
from .driver import ServedDevice

if TYPE_CHECKING:  # annotations only: these modules are what the front does not import
    from pathlib import Path

    from ...core.arch import Candidate
    from ...core.spec import CcclSpec, Spec
    from .catalog import Catalog
    from .objects import CcclAlgorithm, SpecStatus, _Loaded
    from ..warmup.warmup import WarmPool

#: :data:`aot.core.manifest.MANIFEST_NAME`, without importing that module.
MANIFEST_NAME = "manifest.json"


class _FromCatalog:
    """A registry attribute that lives in its catalog, read on first access: ``manifest``, ``root``, ``_specs``."""

    def __init__(self, field: str):
        self.field = field

    def __get__(self, reg: Registry | None, owner: type | None = None) -> Any:
        if reg is None:
            return self
        return getattr(reg._catalog(), self.field)


class Registry:
    """The artifacts of one directory (or installed package folder) plus the specs to JIT when none fits.

    ``Registry(path)`` serves ``path/manifest.json``; ``Registry.from_package("pkg", "artifacts")`` does
    the same for a package's data folder, so downstream packages can ship their own artifacts. A missing
    manifest is not an error: the registry then serves from the user cache / JIT using ``specs``.

    Operators from code (``op: "pkg.mod:func"``) are imported, to JIT or re-key a spec, only for the
    caller's ``specs`` or inside ``owner`` (the package that owns the artifacts; ``from_package`` sets it).
    """

    #: The checked ``manifest.json`` (:class:`aot.core.manifest.Manifest`), or ``None``.
    manifest = _FromCatalog("manifest")
    #: The artifact directory (a ``pathlib.Path``), or ``None``.
    root = _FromCatalog("root")
    _specs = _FromCatalog("specs")  # name -> Spec: the manifest's, then the caller's

    def __init__(self, source: str | os.PathLike | None, *, specs: Iterable[Spec] | None = None,
                 device_sm: int | None = None, owner: str | None = None,
                 _specs_from: Callable[[], Iterable[Spec]] | None = None):
        self._source = os.fspath(source) if source is not None else None
        self._caller_specs = list(specs) if specs is not None else []
        self._specs_from = _specs_from  # more caller specs, read with the catalog (the default registry's)
        self._owner = owner  # the package that owns the artifacts: its operators from code may be imported
        self._no_manifest: str | None = None  # from_package: why the package ships no artifacts
        self._device = ServedDevice(device_sm)
        self._lock = threading.Lock()
        self._inflight: dict[str, threading.Lock] = {}
        self._loaded: dict[str, _Loaded] = {}
        self._tls = threading.local()
        self._book = StatusBook(self._lock)
        self._status = self._book.records
        self._warned: set[str] = set()
        self._cat: Catalog | None = None
        self._cat_lock = threading.Lock()
        self._held: list[str] = []  # the catalog's warnings, read in a warmup thread: for the caller's
        self._starts = _Starts()
        self._warmup: WarmPool | None = None  # made by the first warmup, in its thread
        self._prechecked: dict[str, tuple[Any, Any, Any]] = {}  # path -> (spec, entry, Artifact or error)
        self._hit_index: Any = False  # the first-hit index (aot.runtime.loader.firsthit); False: not read yet

    @classmethod
    def from_package(cls, package: str, folder: str = "artifacts", *, numba: bool = True, cupy: bool = True,
                     triton: bool = True, **kw) -> "Registry":
        """The artifacts an installed package ships as data in ``<package>/<folder>/`` (what ``aot bundle``
        and the build hooks write): ``registry = aot.Registry.from_package(__name__)`` in its __init__.

        A set with numba-cuda kernels (a ``numba/`` folder) has them attached to their own ``@cuda.jit``
        dispatchers (:func:`aot.attach_numba`; ``numba=False``: not), so the library's unchanged
        ``kernel[grid, block](...)`` launches the packaged cubins: at numba-cuda's first compile
        (:mod:`aot.runtime.adapters.numba_lazy`), so ``import`` reads no manifest; a set without them costs
        one ``stat`` and imports no numba.
        Likewise a set with CuPy kernels (a ``cupy/`` folder) is served at CuPy's compile call
        (:func:`aot.runtime.adapters.cupy_attach.attach_cupy`; ``cupy=False``: not), and a set with Triton
        kernels (``triton/``) at Triton's cache lookup (:func:`aot.runtime.adapters.triton_attach.attach_triton`).

        A missing folder or manifest is one :class:`AotWarning` per process and folder, naming the path (a typo
        in ``folder``, a wheel built without artifacts, a library in development; one ``stat``, here); the
        registry then serves only specs passed in ``specs`` (JIT), and "unknown spec" errors say that no manifest
        was found. Without numba-cuda installed, numba kernels are not attached, silently (nothing can run them)."""
        root = os.path.join(package_dir(package), folder)
        reg = cls(root, owner=package, **kw)
        manifest = os.path.join(root, MANIFEST_NAME)
        if not os.path.isfile(manifest) and not _packaged_disabled():
            what = "no such folder" if not os.path.isdir(root) else f"no {MANIFEST_NAME} in it"
            reg._no_manifest = why = f"no manifest was found at {manifest} ({what})"
            with _said_lock:  # once per process and folder: by_source, program_cache and from_package all ask
                first = (package, folder) not in _said
                _said.add((package, folder))
            if first:
                reg._warn(f"aot: package {package!r} ships no artifacts: {why}; its kernels JIT-compile")
        else:
            from .families import attach_families  # a package that ships artifacts: its families' adapters
            attach_families(reg, root, numba=numba, cupy=cupy, triton=triton)
        return reg

    # ------------------------------------------------------------------ introspection
    def names(self) -> list[str]:
        return sorted(self._catalog().specs)

    def spec(self, name: str) -> Spec:
        cat = self._catalog()
        try:
            return cat.specs[name]
        except KeyError:
            raise cat.unknown(name, self._no_manifest) from None

    def device_sm(self) -> int:
        return self._device.sm()

    def status(self) -> dict[str, SpecStatus]:
        """Per spec asked for so far: the source that served it, SM, load milliseconds, skipped sources,
        kernels warmup loaded into the device. A snapshot (:class:`StatusBook`)."""
        if self._cat is not None:
            self._catalog()  # the caller's thread: raise what reading the manifest held back
        return self._book.snapshot()

    # ------------------------------------------------------------------ public loading API
    def cccl(self, name: str) -> CcclAlgorithm:
        """A ready-to-call cuda.compute algorithm for this device, owned by the calling thread."""
        per_thread = self._tls.__dict__.setdefault("objs", {})
        obj = per_thread.get(name)
        if obj is not None:
            return obj
        from ...core.spec import CcclSpec
        spec = self.spec(name)
        if not isinstance(spec, CcclSpec):
            raise AotError(f"{name!r} is an NVRTC unit; use kernel({name!r}, kernel_name)")
        from .lean import import_cuda_compute
        from .objects import CcclAlgorithm
        from .threads import IMPORTS
        IMPORTS.settle(compute=True)  # a warmup's thread may be importing cuda.core/cuda.compute now
        with _first_in_line(self, name):  # during a warmup: served before the pool's other specs
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
        from ...core.spec import NvrtcUnit
        spec = self.spec(unit)
        if not isinstance(spec, NvrtcUnit):
            raise AotError(f"{unit!r} is a CCCL spec; use cccl({unit!r})")
        if kernel_name not in spec.kernels:
            raise AotError(f"unit {unit!r} has no kernel {kernel_name!r}; it has {', '.join(spec.kernels)}")
        with _first_in_line(self, unit):  # during a warmup: served before the pool's other specs
            return self._load(unit).obj.get_kernel(kernel_name)

    def request_warmup(self, names: Iterable[str] | None = None) -> None:
        """Start loading ``names`` (default: all) in background threads; returns at once; idempotent.

        Warm means: the artifact read, checked and deserialized, its library loaded for the device and
        every kernel of it loaded into the device (:mod:`aot.runtime.warmup.warm`), so the first call runs like
        the second. The calling thread only records the request, asks the driver (if loaded) which
        context is current in it, and starts one thread: reading the manifest, checking the names (an
        unknown one is raised by :meth:`ensure_warm`), importing cuda.compute and opening the device all
        happen in the background (:mod:`aot.runtime.warmup.warmup`), on the device current here (else device 0)."""
        from .cuctx import caller_context  # ctypes only; loads and initialises nothing
        from .threads import spawn
        start = self._starts.add(None if names is None else list(names))
        device, ctx = caller_context()
        spawn("aot-warmup-start", _begin, self, start, device, ctx)

    def ensure_warm(self, timeout: float | None = None) -> list[str]:
        """Block until requested warmups finish (or ``timeout`` seconds pass); return the still-cold names.
        Raises what a warmup request could not start with (an unknown name)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        late = self._starts.wait(deadline)
        cold: set[str] = set()
        if self._cat is not None:
            self._catalog()  # the caller's thread: raise what reading the manifest held back
        pool = self._warmup
        if pool is not None:
            cold.update(pool.wait(None if deadline is None else max(0.0, deadline - time.monotonic())))
        for names in late:  # requests still starting: their names are cold
            cold.update(self.names() if names is None else names)
        return sorted(cold)

    # ------------------------------------------------------------------ the catalog, on first need
    def _catalog(self) -> Catalog:
        """The catalog (:mod:`aot.runtime.loader.catalog`), read once under a lock. Its warnings go out at once in
        the caller's thread; read in one of aot's threads, they wait for the caller's next call."""
        cat = self._cat
        if cat is None:
            with self._cat_lock:
                cat = self._cat
                if cat is None:
                    from .catalog import read_catalog
                    cat = read_catalog(self._source, self._caller_specs, self._specs_from, self._held.append)
                    self._cat = cat
        if self._held and not _background():
            with self._cat_lock:
                held, self._held = self._held, []
            for msg in held:
                self._warn(msg, stacklevel=4)
        return cat

    # ------------------------------------------------------------------ the search
    def _warn(self, msg: str, stacklevel: int = 3) -> None:
        if msg not in self._warned:
            self._warned.add(msg)
            warnings.warn(msg, AotWarning, stacklevel=stacklevel)

    def _load(self, name: str) -> _Loaded:
        loaded = self._loaded.get(name)
        if loaded is not None:
            return loaded
        spec = self._catalog().specs[name]
        with self._lock:
            gate = self._inflight.setdefault(name, threading.Lock())
        with gate:  # single flight: threads asking for the same spec share one load/build
            loaded = self._loaded.get(name)
            if loaded is not None:
                return loaded
            from . import sources
            t0 = time.perf_counter()
            st = self._book.of(name)
            loaded = sources.search(self, spec, st)
            ms = (time.perf_counter() - t0) * 1e3
            with self._lock:
                st.source, st.sm, st.path, st.ms = loaded.source, loaded.sm, loaded.path, ms
            self._loaded[name] = loaded
            sources.log.info("%s: served from %s (%s sm_%s, %s) in %.1f ms", name, loaded.source, loaded.kind,
                             loaded.sm, loaded.path or "in memory", ms)
            return loaded

    def _code_spec(self, spec: CcclSpec) -> tuple[CcclSpec, str | None]:
        """:func:`aot.runtime.loader.sources.code_spec` with this registry's trust: the caller's specs, ``owner``."""
        from .sources import code_spec
        cat = self._catalog()
        return code_spec(spec, trusted=spec.name in cat.trusted, owner=self._owner, root=cat.root)

    def packaged_candidates(self, spec: Spec, device_sm: int) -> list[Candidate]:
        """This manifest's artifacts of ``spec`` that can serve ``device_sm``, best first. A set carrying CCCL
        blobs of several cuda-cccl releases offers those of the installed release only
        (:func:`aot.runtime.loader.lean.blobs_for_installed`)."""
        from .lean import blobs_for_installed
        from .sources import packaged_candidates
        cands = packaged_candidates(self.manifest, spec, device_sm)
        return blobs_for_installed(self.manifest, cands) if spec.family == "cccl" else cands

    def open_packaged(self, spec: Spec, entry: Mapping[str, Any], path: Path, device_sm: int) -> _Loaded:
        """Read, check and load one of this manifest's artifacts (:func:`aot.runtime.loader.sources.open_packaged`);
        one a warmup read and checked already (the same spec and entry) is only loaded."""
        from . import sources
        pre = self._prechecked.pop(os.fspath(path), None)
        if pre is not None and pre[0] is spec and pre[1] is entry:
            if isinstance(pre[2], BaseException):
                raise pre[2]
            return sources.materialize(spec, pre[2], path)
        return sources.open_packaged(self.manifest, spec, entry, path, device_sm)


class StatusBook:
    """Per spec asked for: its :class:`aot.runtime.loader.objects.SpecStatus` record. Warmup threads insert while
    the caller iterates: every insertion and every :meth:`snapshot` happens under the registry's lock."""

    def __init__(self, lock: threading.Lock):
        self.lock = lock
        self.records: dict[str, SpecStatus] = {}

    def of(self, name: str) -> SpecStatus:
        """The record of ``name``, created under the lock."""
        from .objects import SpecStatus
        with self.lock:
            st = self.records.get(name)
            if st is None:
                st = self.records[name] = SpecStatus(name)
            return st

    def snapshot(self) -> dict[str, SpecStatus]:
        """Copies of every record (a later warmup does not change them)."""
        with self.lock:
            if not self.records:
                return {}
            from .objects import SpecStatus
            return {n: SpecStatus(s.name, s.source, s.sm, s.path, s.ms, list(s.errors), s.kernels)
                    for n, s in self.records.items()}


class _Start:
    """One ``request_warmup`` call until its thread has handed the names over (or failed)."""

    __slots__ = ("names", "done", "error")

    def __init__(self, names: list[str] | None):
        self.names = names
        self.done = threading.Event()
        self.error: BaseException | None = None


class _Starts:
    """The warmup requests of one registry whose background start is not joined yet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: list[_Start] = []

    def add(self, names: list[str] | None) -> _Start:
        start = _Start(names)
        with self._lock:
            self._live.append(start)
        return start

    def wait(self, deadline: float | None) -> list[list[str] | None]:
        """Join the starts (until ``deadline``); raise the first error one hit; return the names of those
        still starting (``None``: every spec)."""
        with self._lock:
            live = list(self._live)
        for s in live:
            s.done.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._live = [s for s in self._live if not s.done.is_set()]
        errors = [s.error for s in live if s.done.is_set() and s.error is not None]
        if errors:
            raise errors[0]
        return [s.names for s in live if not s.done.is_set()]


def _begin(reg: Registry, start: _Start, device: int | None, ctx: int | None) -> None:
    """A warmup request's background start (:func:`aot.runtime.loader.threads.spawn`): first the two legs of the
    floor, opening the device and importing CUDA's packages, each in its own thread; then, beside them,
    importing the loader and reading the catalog (:meth:`aot.runtime.warmup.warmup.WarmPool.request`)."""
    from . import threads
    threads.stamp("warmup_started")
    threads.SWITCH.hold()  # the GIL handed over quickly while CUDA imports beside the caller
    try:
        from . import cuctx
        served = reg._device
        if served.opening is None:
            opening = cuctx.opening(device, ctx)  # the device current in the caller's thread, else device 0
            with reg._lock:
                if served.opening is None:  # the registry serves the device its first warmup opened
                    served.opening = opening
                    served.preferred = device
        threads.IMPORTS.start()
        from ..warmup.warmup import WarmPool
        with reg._lock:
            if reg._warmup is None:
                reg._warmup = WarmPool(reg)
            pool = reg._warmup
        pool.request(start, served.opening)  # sets start.done once the names are handed over, then dispatches
    except BaseException as e:  # noqa: BLE001 - an unknown name, a bad manifest: raised by ensure_warm
        if not start.done.is_set():
            start.error = e
    finally:
        start.done.set()
        threads.SWITCH.release()


def _background() -> bool:
    from .threads import background  # only where a warning is held: a first packaged hit imports none (issue 42)
    return background()


def _first_in_line(reg: Registry, name: str) -> AbstractContextManager[None]:
    """The caller's ``name`` ahead of its registry's warmup (:meth:`aot.runtime.warmup.warmup.WarmPool.first_in_line`);
    nothing without one."""
    pool = reg._warmup
    return nullcontext() if pool is None else pool.first_in_line(name)


def package_dir(package: str) -> str:
    """The folder of an installed package, without importing :mod:`importlib.resources` where the package
    is already imported (``from_package(__name__)`` in its own ``__init__``) or is a plain folder on disk."""
    mod = sys.modules.get(package)
    paths = getattr(mod, "__path__", None) if mod is not None else None
    if paths is None:
        import importlib.util
        try:
            found = importlib.util.find_spec(package)
        except (ImportError, ValueError) as e:
            raise AotError(f"package {package!r}: cannot be found ({e})") from None
        if found is None:
            raise AotError(f"package {package!r}: cannot be found (No module named {package!r})")
        paths = found.submodule_search_locations
    paths = list(paths or ())
    if len(paths) == 1 and os.path.isdir(paths[0]):
        return paths[0]
    from .sources import package_artifact_dir  # a namespace package, a zip import, a module: the general way
    return os.path.normpath(package_artifact_dir(package, "."))


def _packaged_disabled() -> bool:
    from ...core.env import DISABLE_PACKAGED  # only on the rare path: a package without a manifest
    return DISABLE_PACKAGED.get()


_shared: dict[tuple[str, str], Registry] = {}
_said: set[tuple[str, str]] = set()  # (package, folder) said to ship no artifacts
_said_lock = threading.Lock()  # not _shared_lock: package_registry holds that while it calls from_package
_shared_lock = threading.Lock()


def package_registry(package: str, folder: str = "artifacts") -> Registry:
    """One ``Registry.from_package(package, folder)`` per process, shared by :func:`aot.by_source` and
    :func:`aot.program_cache` (so a unit is loaded once whichever way a library asks for it)."""
    with _shared_lock:
        reg = _shared.get((package, folder))
        if reg is None:
            reg = _shared[(package, folder)] = Registry.from_package(package, folder)
        return reg
