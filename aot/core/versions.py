"""Which artifacts this environment can use: the installed cuda-cccl and CUDA major, the driver's CUDA.

One place for the version rules the loader, the JIT cache and the wheel build all apply: cuda.compute
blobs carry an exact cuda-cccl version stamp, every artifact belongs to one CUDA major, and PTX only
JIT-compiles on a driver at least as new as the NVRTC that wrote it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata as md
from typing import Any, Mapping

from .errors import ArtifactError, ToolchainError

#: What a CLI message or a doc tells a developer to install, per purpose: distributions that exist (aot's own
#: are one per CUDA major, made by .ci/variant.py; "cccl-aot" is only the source tree's name).
INSTALL_TOOLKIT = "pip install 'cccl-aot-cu13[cu13]' or 'cccl-aot-cu12[cu12]'"

#: What a wheel carrying numba-cuda kernels requires to load them (the hatch hook and ``aot bundle`` add it): the
#: kernels are the library's own ``@cuda.jit`` dispatchers, so numba-cuda itself, as a range, never the release
#: that built them (another one JIT-compiles them, said in one warning). The lower bound is cuda-cccl 0.6's own
#: (its cu13 extra asks numba-cuda>=0.23); the environment matrix loads a numba wheel under 0.23, 0.26 and 0.30.
NUMBA_CUDA_REQUIREMENT = "numba-cuda>=0.23,<1"

#: cuda-core features the runtime uses beyond loading (the packaged NVRTC path goes through the driver with
#: ctypes and needs only ``cuda.core.Device``): the module and attribute each needs, and the first release
#: that has it (each release installed and probed: docs/dependencies.md). Where one is missing, that feature
#: says so in one line (:func:`cuda_core_missing`); the rest works.
CUDA_CORE_FEATURES: dict[str, tuple[str, str, str, str]] = {
    "kernel": ("a cuda.core.Kernel handle (Registry.kernel, aot.kernel)", "cuda.core", "Kernel.from_handle",
               "0.6.0"),
    "jit_cache": ("the per-user cache of JIT-compiled NVRTC units", "cuda.core.utils", "FileStreamProgramCache",
                  "1.0.0"),
    "program_cache": ("aot.program_cache", "cuda.core.utils", "ProgramCacheResource", "1.0.0"),
}


def cuda_core_missing(feature: str) -> str | None:
    """``None`` where the installed cuda-core has what ``feature`` (a :data:`CUDA_CORE_FEATURES` key) needs;
    else one line naming the feature, the cuda-core release that brings it and the installed one. Imports
    ``cuda.core`` (only features that are about to use it ask)."""
    label, module, attr, first = CUDA_CORE_FEATURES[feature]
    return _cuda_core_missing(label, module, attr, first)


@functools.lru_cache(maxsize=None)
def _cuda_core_missing(label: str, module: str, attr: str, first: str) -> str | None:
    import importlib
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return (f"{label} needs cuda-core>={first} ({module}.{attr}); installed is cuda-core "
                f"{dist_version('cuda-core')}")
    return None


def dist_version(name: str) -> str:
    """An installed distribution's version, or ``"missing"``."""
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "missing"


@functools.lru_cache(maxsize=1)
def runtime_versions() -> dict[str, str]:
    """Versions an artifact must match to load here (cheap: package metadata only, cached)."""
    return {"cuda_cccl": dist_version("cuda-cccl"), "cuda_major": cuda_major()}


@functools.lru_cache(maxsize=1)
def cuda_major() -> str:
    """The CUDA major of the ``cuda.bindings`` this process runs: its ``__version__`` where it is imported
    already (a library's first NVRTC hit: reading package metadata costs 3-6 ms, issue 42), else the
    distribution's."""
    import sys
    version = getattr(sys.modules.get("cuda.bindings"), "__version__", None)
    return (version if isinstance(version, str) else dist_version("cuda-bindings")).split(".")[0]


def check_producer(producer: Mapping[str, Any], family: str) -> None:
    """Refuse artifacts from another cuda-cccl (CCCL blobs carry an exact version stamp) or CUDA major. A Triton
    cubin is served only under the Triton build whose own cache key it was built with (which covers its ptxas
    and LLVM): no CUDA Python package takes part, so neither applies."""
    if family == "triton":
        return
    here = runtime_versions() if family == "cccl" else {"cuda_major": cuda_major()}
    if str(producer.get("cuda_major")) != here["cuda_major"]:
        raise ArtifactError(f"built for CUDA {producer.get('cuda_major')}, this environment is CUDA "
                            f"{here['cuda_major']}")
    if family == "cccl" and producer.get("cuda_cccl") != here["cuda_cccl"]:
        raise ArtifactError(f"built with cuda-cccl {producer.get('cuda_cccl')}, installed is {here['cuda_cccl']}")


@functools.lru_cache(maxsize=1)
def producer_versions() -> dict[str, str]:
    """The producer versions stamped into artifacts. Needs no driver (NVRTC/nvJitLink are libraries).

    cuda-cccl is recorded as ``"missing"`` where it is not installed: NVRTC units build without it (their
    content keys then say so), and a build of CCCL specs is refused up front (:func:`require_cccl`)."""
    cccl = dist_version("cuda-cccl")
    bindings = dist_version("cuda-bindings")
    if bindings == "missing":
        raise ToolchainError(f"cuda-bindings must be installed to build ({INSTALL_TOOLKIT})")
    try:
        from cuda.bindings import nvjitlink, nvrtc
        err, major, minor = nvrtc.nvrtcVersion()
        nvrtc_v = f"{major}.{minor}"
        jl = nvjitlink.version()
        nvjitlink_v = f"{jl[0]}.{jl[1]}"
    except Exception as e:  # a failed probe is recorded, never silently equal to a working toolchain
        raise ToolchainError(f"cannot load NVRTC/nvJitLink: {e}") from None
    from .version import __version__
    return {"aot": __version__, "cuda_cccl": cccl, "cuda_major": bindings.split(".")[0],
            "nvrtc": nvrtc_v, "nvjitlink": nvjitlink_v, "cuda_core": dist_version("cuda-core")}


def require_cccl(names: list[str]) -> None:
    """Refuse to build (or JIT) the cuda.compute specs ``names`` where cuda-cccl is not installed: one line
    naming the first of them and the install that fixes it. NVRTC units need no cuda-cccl."""
    if names and dist_version("cuda-cccl") == "missing":
        more = f" (and {len(names) - 1} more)" if len(names) > 1 else ""
        raise ToolchainError(f"{names[0]}{more}: a cuda.compute (CCCL) spec needs cuda-cccl, which is not installed "
                             f"({INSTALL_TOOLKIT}); NVRTC units build without it")


def stub_digest() -> str:
    """Names a compiled stand-in by its source: a changed ``libcuda_stub.c`` gets a new directory."""
    import cccl_patches
    return hashlib.sha256(cccl_patches.STUB_SOURCE.read_bytes()).hexdigest()[:16]
