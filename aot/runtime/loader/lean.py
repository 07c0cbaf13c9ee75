"""Import ``cuda.compute`` with or without the CUDA toolkit; say which happened.

A runtime-only install (no ``[jit]`` extra) has cuda-cccl, cuda-core and cuda-bindings but no NVRTC,
nvJitLink or cudart, and ``import cuda.compute`` fails in cuda-pathfinder ("Failure finding
libnvrtc.so.13"), although loading packaged artifacts compiles nothing. :func:`import_cuda_compute`
asks cuda-pathfinder for each real library of the installed cuda-bindings major; for each one it cannot
find, it preloads aot's stand-in (:mod:`aot._stand_ins`) ``RTLD_GLOBAL`` under the real soname. Then
cuda-pathfinder finds it "already loaded", ``libcccl.c.parallel.so`` binds its versioned imports to it,
and ``cuda.compute`` imports. The stand-ins only return errors, so JIT is then unavailable: the loader
asks :func:`require_jit` first, which raises one error naming the spec, the SM and the extra to install.

``AOT_FORCE_STUB_TOOLCHAIN=1`` loads the stand-ins even where the real libraries exist (tests use it to
prove that loading and running packaged artifacts never calls them: :func:`stub_calls`).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ...core.errors import ToolchainError

if TYPE_CHECKING:
    from ...core.manifest import Manifest

#: The distribution name in pyproject.toml (the CUDA-major variants are ``<name>-cu12`` / ``-cu13``).
DIST_NAME = "cccl-aot"
#: The extra that adds the CUDA toolkit (NVRTC, nvJitLink, nvvm, numba-cuda-mlir) for JIT fallback.
JIT_EXTRA = "jit"
#: The libraries JIT needs; cudart is only preloaded by cuda.compute, never called by aot's paths.
_JIT_LIBS = ("nvrtc", "nvJitLink")


@dataclass(frozen=True)
class RuntimeToolchain:
    """What :func:`prepare` found: per library, ``"real <path>"`` or ``"stand-in <path>"``."""

    cuda_major: int
    forced: bool
    libs: dict[str, str] = field(default_factory=dict)
    stand_ins: dict[str, str] = field(default_factory=dict)  # lib -> path of the stand-in loaded

    @property
    def jit(self) -> bool:
        """True when NVRTC and nvJitLink are the real ones (JIT fallback can work)."""
        return not any(lib in self.stand_ins for lib in _JIT_LIBS)

    def describe(self) -> str:
        if not self.stand_ins:
            return f"CUDA {self.cuda_major} toolkit (NVRTC, nvJitLink): JIT fallback available"
        libs = ", ".join(sorted(self.stand_ins))
        if self.forced:
            return f"aot stand-ins for {libs} (forced by AOT_FORCE_STUB_TOOLCHAIN): packaged artifacts only"
        return f"aot stand-ins for {libs} (no CUDA toolkit found): packaged artifacts only; {install_hint()} adds JIT"


_state: RuntimeToolchain | None = None
#: Reentrant: import_cuda_compute() imports cuda.compute holding it, and the import hook
#: (:mod:`aot.runtime.loader.import_hook`) then runs in the same thread.
_lock = threading.RLock()
_handles: dict[str, ctypes.CDLL] = {}


def state() -> RuntimeToolchain | None:
    """What :func:`prepare` decided, or ``None`` before anything needed cuda.compute."""
    return _state


def _cuda_major() -> int:
    from ...core.versions import dist_version
    v = dist_version("cuda-bindings")
    if v == "missing":
        raise ToolchainError(f"cuda-bindings is not installed (reinstall {DIST_NAME}-cu12 or {DIST_NAME}-cu13)")
    return int(v.split(".")[0])


def _find_real(lib: str, major: int) -> str | None:
    """Path of the real ``lib`` of CUDA ``major`` as cuda-pathfinder loads it, else ``None``."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        loaded = load_nvidia_dynamic_lib(lib)
    except Exception:  # noqa: BLE001 - DynamicLibNotFoundError and friends: "not there" is the answer
        return None
    path = loaded.abs_path or ""
    from .stand_ins import soname
    return path if os.path.basename(path).startswith(soname(lib, major)) else None


def _forced() -> bool:
    from ...core.env import FORCE_STUB_TOOLCHAIN
    return FORCE_STUB_TOOLCHAIN.get()


def prepare() -> RuntimeToolchain:
    """Decide once per process (idempotent, thread-safe) and preload stand-ins where needed."""
    global _state
    with _lock:
        if _state is not None:
            return _state
        from .stand_ins import LIBS
        major, forced = _cuda_major(), _forced()
        if forced and "cuda.compute._bindings" in sys.modules:
            raise ToolchainError("AOT_FORCE_STUB_TOOLCHAIN=1 but cuda.compute was imported before aot could "
                                 "load its stand-ins")
        real = {} if forced else {lib: _find_real(lib, major) for lib in LIBS}
        missing = [lib for lib in LIBS if not real.get(lib)]
        stand_ins = {}
        if missing:
            from .stand_ins import stand_in_paths
            paths = stand_in_paths(major)
            for lib in missing:
                _handles[lib] = ctypes.CDLL(str(paths[lib]), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
                stand_ins[lib] = str(paths[lib])
        libs = {lib: f"stand-in {stand_ins[lib]}" if lib in stand_ins else f"real {real[lib]}" for lib in LIBS}
        _state = RuntimeToolchain(major, forced, libs, stand_ins)
        return _state


def prepare_for_import() -> RuntimeToolchain | None:
    """The import hook's call (:mod:`aot.runtime.loader.import_hook`), on the first ``import cuda.compute`` of the
    process: :func:`prepare`, unless it ran already (a lock-free check: aot's own
    :func:`import_cuda_compute` imports cuda.compute after preparing) or cuda-bindings is not installed
    (nothing to prepare: cuda.compute then reports its own problem)."""
    if _state is not None:
        return _state
    from ...core.versions import dist_version
    if dist_version("cuda-bindings") == "missing":
        return None
    return prepare()


def require_cuda_cccl(spec_name: str, manifest: Manifest | None = None) -> None:
    """Raise one ToolchainError when cuda-cccl is not installed: a cuda.compute spec cannot load or JIT
    without it (NVRTC units need none, so aot does not require it); names the version that built it."""
    from ...core.versions import runtime_versions
    if runtime_versions()["cuda_cccl"] != "missing":
        return
    from ...core.manifest import cccl_specifier  # read only on this error's path
    releases = manifest.cccl_releases() if manifest is not None else ()
    pin = f"cuda-cccl{cccl_specifier(releases, known_releases())}" if releases else "cuda-cccl"
    raise ToolchainError(f"{spec_name}: a cuda.compute (CCCL) spec needs cuda-cccl, which is not installed: "
                         f"pip install '{pin}'")


def import_cuda_compute() -> ModuleType:
    """``cuda.compute``, imported with the real toolkit where there is one, else with the stand-ins."""
    if "cuda.compute" in sys.modules and (_state is not None or not _forced()):
        import cuda.compute  # already imported (by us, the user or a test's stand-in): the choice was made
        return cuda.compute
    require_cuda_cccl("cuda.compute")
    prepare()
    import warnings
    with _lock, warnings.catch_warnings():  # one thread at a time: catch_warnings swaps global state
        warnings.simplefilter("ignore", RuntimeWarning)  # cuda-cccl only warns when its bindings fail
        import cuda.compute
    if not getattr(cuda.compute, "_BINDINGS_AVAILABLE", False):
        raise ToolchainError("cuda.compute's CUDA bindings did not load (is the NVIDIA driver installed?)")
    return cuda.compute


def import_cuda_core() -> None:
    """What every warmup task uses: cuda.core (the device, NVRTC units) and the driver bindings."""
    import cuda.core  # noqa: F401
    from cuda.bindings import driver  # noqa: F401


def install_hint(extra: str = JIT_EXTRA) -> str:
    """``pip install '<dist>[jit]'`` for the distribution that installed ``aot`` (else :data:`DIST_NAME`)."""
    dist = DIST_NAME
    try:
        from importlib.metadata import packages_distributions
        dists = packages_distributions().get("aot") or []
        dist = dists[0] if dists else dist
    except Exception:  # noqa: BLE001, S110 - a hint, never a failure
        pass
    return f"pip install '{dist}[{extra}]'"


@dataclass(frozen=True)
class ForeignCccl:
    """Packaged cuda.compute artifacts built with other cuda-cccl releases than the installed one (they cannot
    load: a blob carries its exact cuda-cccl version). Said once per package (:attr:`warning`, one line), then
    JIT serves where the toolkit is installed, else :func:`require_jit` raises :meth:`error`."""

    who: str         # "package 'mypkg'" or "the artifacts in <dir>"
    built: str       # the cuda-cccl releases that built them: "1.2.1", or "1.1.0, 1.2.0, 1.2.1"
    installed: str   # the cuda-cccl installed here
    pin: str = ""    # the requirement that would load them: "cuda-cccl==1.2.1", "cuda-cccl>=1.1.0,<=1.2.1,!=1.1.1"

    @property
    def _install(self) -> str:
        return self.pin or f"cuda-cccl=={self.built}"

    @property
    def warning(self) -> str:
        return (f"aot: {self.who} ships cuda.compute artifacts built with cuda-cccl {self.built}, but cuda-cccl "
                f"{self.installed} is installed, so they cannot load: its cuda.compute specs JIT-compile where the "
                f"CUDA toolkit is installed; to load them install {self._install} (or a build of it made "
                f"with cuda-cccl {self.installed})")

    def error(self, spec_name: str, device_sm: int) -> str:
        return (f"{spec_name}: {self.who} ships it built with cuda-cccl {self.built}, but cuda-cccl {self.installed} "
                f"is installed, and JIT fallback (sm_{device_sm}) needs the CUDA toolkit, which is not installed: "
                f"pip install '{self._install}' to load the packaged artifact, or {install_hint()}")


def known_releases() -> tuple[str, ...]:
    """The cuda-cccl releases a blob can be built under (:data:`cccl_patches.CHECKED`; plain data)."""
    from cccl_patches import VERIFIED_CCCL_VERSIONS  # tuples and a dataclass: no CUDA import
    return VERIFIED_CCCL_VERSIONS


def foreign_cccl(manifest: Manifest | None, owner: str | None) -> ForeignCccl | None:
    """:class:`ForeignCccl` when ``manifest`` carries CCCL blobs, none of the installed cuda-cccl's release;
    ``owner`` names the package (else the folder is named)."""
    from ...core.versions import runtime_versions
    if manifest is None:
        return None
    releases, installed = manifest.cccl_releases(), runtime_versions()["cuda_cccl"]
    if not releases or installed in releases:
        return None
    from ...core.manifest import cccl_specifier  # the catalog imported it already: a name lookup
    return ForeignCccl(f"package {owner!r}" if owner else f"the artifacts in {manifest.root}", ", ".join(releases),
                       installed, f"cuda-cccl{cccl_specifier(releases, known_releases())}")


def blobs_for_installed(manifest: Manifest | None, cands: list[Any]) -> list[Any]:
    """The CCCL candidates (manifest entries in ``.ref``) of the installed cuda-cccl's release: a blob loads
    only under the release that built it (its check would refuse any other). None where the set does not
    carry that release: the search then says so once (:func:`foreign_cccl`) and JIT serves."""
    from ...core.versions import runtime_versions
    if manifest is None or not cands:
        return cands
    installed = runtime_versions()["cuda_cccl"]
    return [c for c in cands if manifest.release_of(c.ref) == installed]


def require_jit(spec_name: str, device_sm: int, foreign: ForeignCccl | None = None) -> None:
    """Raise one ToolchainError naming the spec, the SM and the extra when JIT cannot work here (and, for a
    package built with another cuda-cccl, the cuda-cccl that would load its artifacts)."""
    st = prepare()
    if not st.jit and foreign is not None:
        raise ToolchainError(foreign.error(spec_name, device_sm))
    if not st.jit:
        raise ToolchainError(f"{spec_name}: no packaged artifact fits sm_{device_sm}, and JIT fallback needs the "
                             f"CUDA toolkit (NVRTC, nvJitLink), which is not installed: {install_hint()}")


def stub_calls() -> dict[str, int]:
    """Calls each loaded stand-in has received so far (``aot_stub_calls()``), by library name."""
    out = {}
    for lib, handle in _handles.items():
        fn = handle.aot_stub_calls
        fn.restype = ctypes.c_ulong
        out[lib] = int(fn())
    return out
