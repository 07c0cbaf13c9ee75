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


def dist_version(name: str) -> str:
    """An installed distribution's version, or ``"missing"``."""
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "missing"


@functools.lru_cache(maxsize=1)
def runtime_versions() -> dict[str, str]:
    """Versions an artifact must match to load here (cheap: package metadata only, cached)."""
    return {"cuda_cccl": dist_version("cuda-cccl"), "cuda_major": dist_version("cuda-bindings").split(".")[0]}


def check_producer(producer: Mapping[str, Any], family: str) -> None:
    """Refuse artifacts from another cuda-cccl (CCCL blobs carry an exact version stamp) or CUDA major."""
    here = runtime_versions()
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
        raise ToolchainError("cuda-bindings must be installed to build "
                             "(pip install 'cccl-aot[cu13]' or 'cccl-aot[cu12]')")
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
                             f"(pip install 'cccl-aot[cu13]' or 'cccl-aot[cu12]'); NVRTC units build without it")


def stub_digest() -> str:
    """Names a compiled stand-in by its source: a changed ``libcuda_stub.c`` gets a new directory."""
    import cccl_patches
    return hashlib.sha256(cccl_patches.STUB_SOURCE.read_bytes()).hexdigest()[:16]
