"""Turn the cccl-legacy serving on at a process's first ``import cuda.compute`` (issue 44).

Called by the import hook (:mod:`aot.runtime.loader.import_hook`) before anything loads NVRTC: only where
the installed cuda-cccl has no ``serialize`` (< 1.1.0) and an installed package carries answers for that
release (``<package>/artifacts/cccl-legacy/cuda-cccl-<release>/``) are the shims loaded; everywhere else this
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
    """Every installed package's ``artifacts/`` that carries answers for ``release`` (sys.path order)."""
    roots = []
    for entry in sys.path:
        base = Path(entry or ".")
        try:
            children = sorted(base.iterdir()) if base.is_dir() else []
        except OSError:
            continue
        for child in children:
            if (child / "artifacts" / "cccl-legacy" / f"cuda-cccl-{release}").is_dir():
                roots.append(child / "artifacts")
    return roots


def activate() -> object:
    """Load the shims with every installed package's answers for the installed release (once per process);
    None where there is nothing to serve. A failure is one warning: cuda.compute then JITs as without aot."""
    global _active
    if _active is not None:
        return _active
    release = release_without_serialize()
    if release is None:
        return None
    roots = package_roots(release)
    if not roots:
        return None
    from . import cccl_legacy
    try:
        table: dict[str, bytes | Path] = {}
        for root in roots:
            table.update(cccl_legacy.load_table(root, release))
        from ..loader.stand_ins import _private_dir
        shims = cccl_legacy.install(roots[0], release, _private_dir())
        shims.table.update(table)
        canonical_operator_names()
        _active = shims
    except Exception as e:  # noqa: BLE001 - whatever fails here (no compiler for the shims, no real NVRTC, a
        # library loaded first), `import cuda.compute` must still work: one warning, and cuda.compute JITs
        log.warning("aot: cannot serve cuda.compute's builds under cuda-cccl %s (%s); they JIT-compile", release, e)
        return None
    return _active


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
            try:
                return compile_(pyfunc, *args, **kwargs)
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
