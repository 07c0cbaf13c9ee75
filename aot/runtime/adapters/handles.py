"""The handles libraries launch NVRTC kernels with, besides ``cuda.core.Kernel`` (:meth:`Registry.kernel`):

* :func:`cufunction`: the raw ``CUfunction`` of a kernel in the **current** context, for driver-API
  launchers (``cuLaunchKernel``). The unit is loaded as ``Registry.kernel`` loads it (packaged artifact,
  user cache or JIT, every check included); ``cuKernelGetFunction`` then gives that kernel's function for
  the context current in the calling thread.
* :func:`cupy_module` / :func:`cupy_kernel`: a ``cupy.RawModule`` / ``cupy.RawKernel`` over the very image
  the registry served (a packaged cubin or PTX, or what JIT built): nothing is recompiled. CuPy loads
  modules only from a file, so the checked image is written to a private temporary directory (``0700``:
  no other user can swap it), loaded into the current device, and removed. CuPy is optional: it is
  imported only here, when one of these is called.

Imported only when one of these is used (``aot.cufunction`` and friends resolve lazily), so the
packaged-artifact path does not import it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

from ...core.errors import AotError

if TYPE_CHECKING:
    from ..loader.registry import Registry


def _registry(registry: Registry | None) -> Registry:
    if registry is not None:
        return registry
    from ..loader.default import default_registry
    return default_registry()


def _object_code(reg: Registry, unit: str, kernel_name: str | None = None) -> tuple[Any, tuple[str, ...]]:
    """The ``cuda.core.ObjectCode`` the registry serves ``unit`` from and the unit's kernels, after
    ``kernel()``'s checks."""
    from ...core.spec import NvrtcUnit
    spec = reg.spec(unit)
    if not isinstance(spec, NvrtcUnit):
        raise AotError(f"{unit!r} is a CCCL spec; use cccl({unit!r})")
    if kernel_name is not None and kernel_name not in spec.kernels:
        raise AotError(f"unit {unit!r} has no kernel {kernel_name!r}; it has {', '.join(spec.kernels)}")
    return reg._load(unit).obj, spec.kernels


def cufunction(unit: str, kernel_name: str, registry: Registry | None = None) -> Any:
    """The ``cuda.bindings.driver.CUfunction`` of ``kernel_name`` in the context current in this thread
    (``int(f)`` is the raw pointer, for ctypes launchers). Needs a current context: make one current
    first (``cuda.core.Device().set_current()``, ``cuCtxSetCurrent``, or CuPy/PyTorch having used the
    device); without one this is an :class:`AotError` saying so."""
    from cuda.bindings import driver
    kernel = _registry(registry).kernel(unit, kernel_name)
    err, func = driver.cuKernelGetFunction(kernel.handle)
    if err != driver.CUresult.CUDA_SUCCESS:
        why = "no CUDA context is current in this thread" if err in (
            driver.CUresult.CUDA_ERROR_INVALID_CONTEXT, driver.CUresult.CUDA_ERROR_CONTEXT_IS_DESTROYED) else err.name
        raise AotError(f"{unit}/{kernel_name}: cuKernelGetFunction failed: {why}")
    return func


def _lowered_names(code: Any, unit: str) -> dict[str, str]:
    """Name expression -> lowered (mangled) name for a templated unit's kernels; plain names map to themselves."""
    mapping = getattr(code, "symbol_mapping", None) or {}
    return {k: (v.decode("ascii") if isinstance(v, bytes) else str(v)) for k, v in mapping.items()}


def cupy_module(unit: str, registry: Registry | None = None) -> Any:
    """A ``cupy.RawModule`` over the image the registry serves ``unit`` from, loaded into CuPy's current
    device without recompiling. Its kernels by name: ``mod.get_function("scale")``; a template kernel by
    its lowered name (:func:`cupy_kernel` takes the name expression). For the current device only."""
    mod, _ = _cupy_module(_registry(registry), unit)
    return mod


def _cupy_module(reg: Registry, unit: str, kernel_name: str | None = None) -> tuple[Any, dict[str, str]]:
    code, kernels = _object_code(reg, unit, kernel_name)
    return cupy_raw_module(code, kernels, unit)


def cupy_raw_module(code: Any, kernels: tuple[str, ...], unit: str) -> tuple[Any, dict[str, str]]:
    """(``cupy.RawModule`` over ``code``'s image, name expression -> lowered name), every kernel resolved;
    ``unit`` names it in errors. Shared with the lookup by source (:mod:`aot.runtime.adapters.bysource`)."""
    try:
        import cupy  # optional: only the caller who asks for a CuPy handle needs it
    except ImportError as e:
        raise AotError(f"{unit}: a CuPy handle needs CuPy (pip install cupy-cuda13x): {e}") from None
    image, kind = code.code, code.code_type
    if not isinstance(image, (bytes, bytearray)) or kind not in ("cubin", "ptx"):
        raise AotError(f"{unit}: the served image is a {kind} {type(image).__name__}; CuPy loads cubin or PTX bytes")
    folder = tempfile.mkdtemp(prefix="aot-cupy-")  # 0700: no other user can swap the file before CuPy reads it
    try:
        path = os.path.join(folder, f"module.{kind}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(bytes(image))
        mod = cupy.RawModule(path=path)
        mod.compile()  # loads the image into the current device now, while the file exists
        names = _lowered_names(code, unit)
        for k in kernels:  # every kernel resolved now: a bad image fails here, not at launch
            mod.get_function(names.get(k, k))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return mod, names


def cupy_kernel(unit: str, kernel_name: str, registry: Registry | None = None) -> Any:
    """A ``cupy.RawKernel`` for ``kernel_name`` (a name or a name expression such as ``"axpy<float>"``),
    from the image the registry serves, not recompiled: ``k((blocks,), (threads,), (x, n))``."""
    mod, names = _cupy_module(_registry(registry), unit, kernel_name)
    return mod.get_function(names.get(kernel_name, kernel_name))
