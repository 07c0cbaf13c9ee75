"""Which artifacts this environment can use: the installed cuda-cccl and CUDA major, the driver's CUDA.

One place for the version rules the loader, the JIT cache and the wheel build all apply: cuda.compute
blobs carry an exact cuda-cccl version stamp, every artifact belongs to one CUDA major, and PTX only
JIT-compiles on a driver at least as new as the NVRTC that wrote it.
"""

from __future__ import annotations

import functools
import importlib.metadata as md
from typing import Any, Mapping

from .errors import ArtifactError, NoDeviceError


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


def require_driver(what: str) -> None:
    """Refuse, before any call into libcuda, when no real NVIDIA driver is loadable.

    Calling ``cuda.bindings.driver`` without a driver is not merely an error: the first failed call
    (``SystemError`` from its lazy loader) leaves a lock of the bindings held, and the next driver call
    in the process waits on it forever (seen with ``Registry(dir, device_sm=80).kernel(...)`` on a
    driverless host). The stand-in libcuda is no driver either: it only makes builds link.
    """
    from ..build.toolchain import real_driver_present
    if not real_driver_present():
        raise NoDeviceError(f"{what} needs an NVIDIA driver and none is installed (no libcuda.so.1)")


def driver_cuda_version() -> tuple[int, int]:
    """(major, minor) CUDA version the installed driver supports; :class:`NoDeviceError` without one."""
    require_driver("asking the driver's CUDA version")
    try:
        from cuda.bindings import driver
        err, v = driver.cuDriverGetVersion()
    except Exception as e:  # noqa: BLE001 - a broken driver install: no usable device, never a crash
        raise NoDeviceError(f"cannot ask the NVIDIA driver for its version: {type(e).__name__}: {e}") from None
    if err != driver.CUresult.CUDA_SUCCESS:
        raise NoDeviceError(f"cuDriverGetVersion failed: {err}")
    return v // 1000, (v % 1000) // 10


def check_ptx_loadable(producer: Mapping[str, Any]) -> None:
    """PTX only JIT-compiles on a driver at least as new as the NVRTC that wrote it."""
    try:
        need = tuple(int(x) for x in str(producer.get("nvrtc")).split(".")[:2])
    except ValueError:
        raise ArtifactError(f"unreadable producer NVRTC version {producer.get('nvrtc')!r}") from None
    have = driver_cuda_version()
    if have < need:
        raise ArtifactError(f"PTX from NVRTC {need[0]}.{need[1]} needs a driver for CUDA >= that; "
                            f"this driver supports CUDA {have[0]}.{have[1]}")
