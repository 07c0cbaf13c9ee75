"""The families a package ships, attached at ``Registry.from_package``: each adapter is imported only for a package
whose artifacts hold that family (one ``stat`` each), so a set of NVRTC units imports no numba, CuPy or Triton. In a
set of several CUDA majors (:mod:`aot.core.majorset`) the family's folder is one level down, in a major's set."""

from __future__ import annotations

import importlib.util
import os
from typing import Any


def attach_families(reg: Any, root: str, *, numba: bool, cupy: bool, triton: bool) -> None:
    """Attach the packaged numba-cuda, CuPy and Triton kernels under ``root`` to their frameworks' own calls.

    Under ``AOT_JIT_ONLY`` (aot gate's JIT runs) nothing attaches: numba-cuda, CuPy and Triton compile as without
    aot. Without numba-cuda installed (a CPU-only user) its kernels stay unattached, silently: nothing can run them.
    """
    if os.environ.get("AOT_JIT_ONLY"):  # set at all: its registry entry parses it (core.env, off the caller's path)
        from ...core.env import JIT_ONLY
        if JIT_ONLY.get():
            return
    if numba and _holds(root, "numba") and _installed("numba_cuda"):
        from ..adapters.numba_lazy import defer  # at numba-cuda's first compile, not at import (issue 42)
        if not defer(reg):
            from ..adapters.numba_attach import attach_numba  # numba-cuda not imported yet: attach now
            attach_numba(reg)
    if cupy and _holds(root, "cupy"):
        from ..adapters.cupy_attach import attach_cupy  # CuPy: only for a package that ships its kernels
        attach_cupy(reg, lazy=True)  # the manifest is read at CuPy's first cache miss, not at import (issue 42)
    if _holds(root, "cccl-legacy") and _cccl_without_serialize():  # a set of several majors: its cu<major>/
        from ..adapters.cccl_legacy_activate import activate_package  # cuda-cccl < 1.1: compiles answered
        activate_package(root)
    if triton and _holds(root, "triton"):
        from ..adapters.triton_attach import attach_triton  # Triton: only for a package shipping its kernels
        attach_triton(reg)


def _holds(root: str, family: str) -> bool:
    """Whether the set at ``root`` holds ``family``'s folder: at its top, or in a CUDA major's set (``cu13/``;
    three more ``stat`` only where the top has none)."""
    return os.path.isdir(os.path.join(root, family)) or any(
        os.path.isdir(os.path.join(root, f"cu{m}", family)) for m in (12, 13, 14))


def _cccl_without_serialize() -> bool:
    from .import_hook import _cccl_without_serialize as gate  # the hook's cheap gate: one metadata read
    return bool(gate())


def _installed(module: str) -> bool:
    """Whether a family's framework is installed (a CPU-only user may have none)."""
    return importlib.util.find_spec(module) is not None
