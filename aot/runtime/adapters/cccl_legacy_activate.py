"""Turn the cccl-legacy serving on at a process's first ``import cuda.compute`` (issue 44).

Called by the import hook (:mod:`aot.runtime.loader.import_hook`) before anything loads NVRTC: only where
the installed cuda-cccl has no ``serialize`` (< 1.1.0) and an installed package carries answers for that
release (``<package>/artifacts/cccl-legacy/cuda-cccl-<release>/``, or in a wheel built for several CUDA majors
the installed major's ``<package>/artifacts/cu13/cccl-legacy/...``) are the shims loaded; everywhere else this
costs one metadata read. The library's code is unchanged: cuda.compute's C library binds to the shims and
every build it runs asks them first.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
from importlib import metadata
from pathlib import Path

from ...core import majorset
from ...core.legacy_manifest import FOLDER

log = logging.getLogger("aot")
#: The first cuda-cccl release whose cuda.compute serializes (its blobs are served the usual way).
FIRST_SERIALIZE = (1, 1, 0)
_active: object = None


def release_without_serialize() -> str | None:
    """The installed cuda-cccl release when it predates ``serialize``, else None (also when not installed)."""
    try:
        version = metadata.version("cuda-cccl")
    except metadata.PackageNotFoundError:
        return None
    parts = []
    for p in version.split(".")[:3]:
        digits = "".join(c for c in p if c.isdigit()) if p else ""
        parts.append(int(digits) if digits else 0)
    return version if tuple(parts) < FIRST_SERIALIZE else None


def package_roots(release: str) -> list[Path]:
    """Every installed package's ``artifacts/`` that carries answers for ``release`` (sys.path order): at its top,
    or, in a set of several CUDA majors (:mod:`aot.core.majorset`), in the installed major's set. One ``stat``
    per package, two where the first finds nothing; an index is read (bounded) only beside that major's answers."""
    roots = []
    folder = Path(FOLDER) / f"cuda-cccl-{release}"
    major: str | None = None  # cuda-bindings' major, read once and only where the top has no answers
    for entry in sys.path:
        base = Path(entry or ".")
        try:
            children = sorted(base.iterdir()) if base.is_dir() else []
        except OSError:
            continue
        for child in children:
            art = child / "artifacts"
            if (art / folder).is_dir():
                roots.append(art)
                continue
            if major is None:
                major = majorset.installed_major()
            if major.isdigit() and (art / majorset.major_dir(int(major)) / folder).is_dir() \
                    and _serves_major(art, major):
                roots.append(art)
    return roots


def _serves_major(art: Path, major: str) -> bool:
    """Whether ``art`` is a set of several majors whose index names ``major`` (read by the loader's own reader,
    bounded; a bad index is one warning and no answers)."""
    from ...core.errors import ArtifactError
    try:
        majors = majorset.read_index(art)
    except ArtifactError as e:
        log.warning("aot: %s; its cuda.compute builds JIT-compile", e)
        return False
    return majors is not None and majorset.pick(art, majors, major)[1]


def package_table(root: Path, release: str) -> dict[str, bytes | Path]:
    """key -> answer file, as the manifest of the set at ``root`` lists them for ``release`` (parsed with
    bounds: :mod:`aot.core.legacy_manifest`); in a set of several CUDA majors, the installed major's set's, as
    the loader reads it for every family (:func:`aot.core.manifest.load_manifest`; none where the index has no
    set for that major). A manifest that does not parse is one warning and no answers; each answer file is
    checked where it is first read (:func:`aot.runtime.adapters.cccl_legacy.read_answer`)."""
    from ...core.errors import ArtifactError
    from ...core.manifest import load_manifest
    try:
        m = load_manifest(root, skip_bad_specs=True, resolve_paths=False, major=majorset.installed_major)
    except (ArtifactError, OSError) as e:
        log.warning("aot: %s; its cuda.compute builds JIT-compile", e)
        return {}
    r = m.legacy.get(release)
    from ...core.keyschemas import mismatch
    stale = mismatch(m.key_schemas, "cccl_legacy") if r else None
    if stale:  # every key would differ: said once, not as a miss per compile
        log.warning("aot: %s: cccl-legacy answers %s; its cuda.compute builds JIT-compile", root, stale)
        return {}
    table: dict[str, bytes | Path] = {}
    for a in (r.answers if r else ()):
        try:
            table[a["key"]] = m.path_of(a)
        except ArtifactError as e:  # a folder of the set leads elsewhere: that answer is left out
            log.warning("aot: %s; that compile runs for real", e)
    return table


def activate() -> object:
    """Load the shims with every installed package's answers for the installed release (once per process);
    None where there is nothing to serve. A failure is one warning: cuda.compute then JITs as without aot."""
    if _active is not None:
        return _active
    from ...core.env import JIT_ONLY
    release = release_without_serialize()
    if release is None or JIT_ONLY.get():  # aot gate's JIT runs (and a timing's cold JIT): nothing served
        return None
    table: dict[str, bytes | Path] = {}
    for root in package_roots(release):
        for key, where in package_table(root, release).items():
            table.setdefault(key, where)
    return _start(release, table) if table else None


def activate_package(root: str | Path) -> object:
    """``Registry.from_package``'s step for a set carrying answers (:mod:`aot.runtime.loader.families`): its
    answers for the installed release join the active shims, or load them now, before cuda.compute. None
    where the installed cuda-cccl serializes, the set has no answers for it, or the shims cannot load."""
    release = release_without_serialize()
    if release is None:
        return None
    table = package_table(Path(root), release)
    if not table:
        return _active
    if _active is not None:
        for key, where in table.items():
            _active.table.setdefault(key, where)  # type: ignore[attr-defined]
        return _active
    return _start(release, table)


def _start(release: str, table: dict[str, bytes | Path]) -> object:
    global _active
    from . import cccl_legacy
    try:
        from ..loader.stand_ins import _private_dir
        from .cccl_legacy_files import installed_major
        major = installed_major()
        if major is None:
            raise RuntimeError("the installed cuda-bindings is neither CUDA 12 nor 13")
        shims = cccl_legacy.Shims(cccl_legacy.build_shims(major, _private_dir()), cccl_legacy.real_libs(major),
                                  table, release=release, major=major) if _c_library_free() else None
        if shims is None:
            raise RuntimeError("cuda.compute's C library is loaded already; the legacy shims must come first")
        canonical_operator_names()
        from . import cccl_legacy_ops
        cccl_legacy_ops.bind(shims)
        _active = shims
    except Exception as e:  # noqa: BLE001 - whatever fails here (no compiler for the shims, no real NVRTC, a
        # library loaded first), `import cuda.compute` must still work: one warning, and cuda.compute JITs
        log.warning("aot: cannot serve cuda.compute's builds under cuda-cccl %s (%s); they JIT-compile", release, e)
        return None
    return _active


def _c_library_free() -> bool:
    return not any(m.startswith("cuda.compute._bindings") or m.startswith("cuda.compute.cu1") for m in sys.modules)


def canonical_operator_names() -> None:
    """Operators compiled to the same bytes in every process, whatever their order, as the build compiled them.

    These releases name each operator's wrapper ``wrapped_<name>_<n>`` from a process-wide counter (in both
    the NVRTC source and the operator's LTO-IR), and numba mangles every function it compiles with another
    (``FunctionIdentity._unique_ids``): the n-th operator of a process would only be served where the build
    compiled it n-th. Both the build and this process name wrappers from the operator's content instead
    (:mod:`cccl_patches.wrapper_names`, its 1.1.x "counter" form, which these releases share), and compile a
    wrapper with numba's counter started at a number drawn from that content-named wrapper's name (the
    process's own counter is put back after). Patched as soon as ``cuda.compute._jit`` has run."""
    if "cuda.compute._jit" in sys.modules:
        _patch()
        return
    if not any(isinstance(f, _AfterJit) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterJit())


def _patch() -> None:
    import hashlib
    import itertools
    import threading

    import numba.cuda
    from cccl_patches import wrapper_names

    from . import cccl_legacy_ops
    wrapper_names.install("counter")
    compile_ = numba.cuda.compile
    if getattr(compile_, "_aot_legacy", False):
        return
    lock = threading.Lock()

    def compile(pyfunc, *args, **kwargs):
        name = getattr(pyfunc, "__name__", "")
        if kwargs.get("output") != "ltoir" or not name.startswith("wrapped_"):
            return compile_(pyfunc, *args, **kwargs)
        from numba.cuda.core.bytecode import FunctionIdentity
        start = int(hashlib.sha256(name.encode()).hexdigest()[:12], 16) << 8
        with lock:  # numba compiles under its own global lock; this one guards the counter swap
            saved = FunctionIdentity._unique_ids
            FunctionIdentity._unique_ids = itertools.count(start)
            try:  # the packaged LTO-IR where the table has its key (cccl_legacy_ops), else numba's
                return cccl_legacy_ops.compile_or_serve(compile_, pyfunc, args, kwargs)
            finally:
                FunctionIdentity._unique_ids = saved

    compile._aot_legacy = True  # type: ignore[attr-defined]
    numba.cuda.compile = compile


class _AfterJit(importlib.abc.MetaPathFinder):
    """Finds ``cuda.compute._jit`` as the path finder does, and patches once its module has executed."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "cuda.compute._jit":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        _patch()
