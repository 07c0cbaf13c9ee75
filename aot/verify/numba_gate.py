"""``aot verify --gpu`` for numba-cuda kernels: each packaged artifact (every cubin and PTX this GPU can load,
not only the loader's first choice) launched by the package's own check, through a copy of the kernel's
``@cuda.jit`` dispatcher whose one overload is that artifact.

A check is named in ``[tool.aot] checks`` (``"axpy.0" = "mypkg.checks:axpy_f32"``) and written against
:class:`NumbaCheckContext`: it launches ``ctx.kernel[grid, block](...)`` as the library does and compares
with numpy. The copy cannot compile (:func:`cccl_patches.numba_cuda.gate_dispatcher`), and a check that never
launched the kernel fails, so a row that says "ok" ran the packaged code. A mutant (the artifact built from
another body under the same name and key) passes every integrity check and fails here.

Kernels are imported only from the package that owns the artifacts (``--package``); without it a cubin is
loaded by its entry symbol (cuda.core), not executed. A kernel with no check is loaded, not executed.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from ..core.errors import AotError
from ..core.opref import inside
from ..core.spec import NumbaKernel

#: What a row says: (status, detail); status "ok", "failed" or "loaded, not executed".
Outcome = tuple[str, str]


class NumbaCheckContext:
    """What a package's check of a numba kernel is given::

        def axpy_f32(ctx):
            x, y = np.arange(1000, dtype=np.float32), np.ones(1000, np.float32)
            out = ctx.empty(1000, np.float32)
            ctx.kernel[4, 256](out, ctx.array(x), ctx.array(y), np.float32(2))
            np.testing.assert_allclose(out.copy_to_host(), 2 * x + y)

    ``kernel`` launches exactly the artifact under test (arguments convert to its packaged signature; types
    that do not are an error, never a compile). A check raises (any exception) when the kernel disagrees.
    """

    def __init__(self, kernel: Any, spec: NumbaKernel, sm: int | None, kind: str):
        self.kernel, self.spec, self.sm, self.kind = kernel, spec, sm, kind
        self.signature = spec.signature

    def array(self, host: Any) -> Any:
        """A numba-cuda device copy of ``host`` (``.copy_to_host()`` reads it back)."""
        from numba import cuda
        return cuda.to_device(np.ascontiguousarray(host))

    def empty(self, shape: Any, dtype: Any) -> Any:
        """A numba-cuda device array filled with 0xA5 bytes, so elements the kernel never wrote show."""
        from numba import cuda
        dt = np.dtype(dtype)
        n = int(np.prod(shape))
        poison = np.full(n * dt.itemsize, 0xA5, np.uint8).view(dt).reshape(shape)
        return cuda.to_device(poison)

    def sync(self) -> None:
        from numba import cuda
        cuda.synchronize()


def check_numba_artifact(registry: Any, spec: NumbaKernel, entry: Mapping[str, Any] | None, sm: int | None,
                         kind: str, device_sm: int, check: Callable[[Any], None] | None,
                         package: str | None) -> Outcome:
    """Run ``spec``'s ``entry`` (a manifest entry; ``None``: no packaged artifact fits, numba-cuda JIT-compiles)
    on this GPU under ``check``; raise what failed (the caller makes it a failed row)."""
    from cccl_patches import numba_cuda as nc
    from ..runtime.adapters.numba_attach import check_abi, kernel_digest, resolve_dispatcher
    manifest = registry.manifest
    if package is None or not inside(spec.kernel, package):
        return _load_only(manifest, spec, entry, f"not executed: numba kernels run only from the package that "
                                                 f"owns them (--package; {spec.kernel})")
    installed = nc.check_version()
    problem = nc.attach_problem(spec.numba_cuda, installed)
    if problem:
        raise AotError(f"built with numba-cuda {spec.numba_cuda}, installed is {installed} ({problem}): the loader "
                       f"would not serve these artifacts")
    dispatcher = resolve_dispatcher(spec.kernel)
    if {**nc.code_options(dispatcher), "lto": None} != {**spec.options, "lto": None}:  # lto: either twin runs
        raise AotError(f"{spec.kernel}: its @cuda.jit options differ from the build's: the loader would not serve it")
    if kernel_digest(dispatcher) != spec.digest:
        raise AotError(f"{spec.kernel}: its source (or a function it calls) changed since the build: the loader "
                       f"would not serve it")
    served: list[tuple[int, int]] = []

    def source(cc: tuple[int, int]) -> tuple[str, bytes, dict] | None:
        served.append(cc)
        if entry is None:
            return None  # numba-cuda compiles, as the loader falls back
        from ..runtime.loader.sources import check_packaged
        art = check_packaged(manifest, spec, entry, manifest.path_of(entry))
        if not isinstance(art.header.get("entry"), str):
            raise AotError(f"{entry['path']}: its header lacks the kernel's entry symbol")
        check_abi(spec, art.header)  # the loader would not serve it under this numba-cuda
        return art.kind, art.payload, dict(art.header)

    kernel = nc.gate_dispatcher(dispatcher, spec.signature, spec.name, source)
    if check is None:
        kernel.compile(nc.argtypes_of(spec.signature)).bind()  # loaded into the device, not run
        return "loaded, not executed", "no check for this kernel ([tool.aot] checks)"
    check(NumbaCheckContext(kernel, spec, sm, kind))
    if not served:
        raise AotError(f"the check {check.__module__}.{check.__qualname__} never launched {spec.name}")
    return "ok", ""


def _load_only(manifest: Any, spec: NumbaKernel, entry: Mapping[str, Any] | None, why: str) -> Outcome:
    """A cubin loaded into the device by its entry symbol (cuda.core), nothing imported; PTX is left alone."""
    if entry is None or entry["payload_kind"] != "cubin":
        return "loaded, not executed", why.replace("not executed", "not loaded or executed")
    from cuda.core import ObjectCode
    from ..runtime.loader.sources import check_packaged
    art = check_packaged(manifest, spec, entry, manifest.path_of(entry))
    ObjectCode.from_cubin(art.payload).get_kernel(str(art.header["entry"]))
    return "loaded, not executed", why
