"""Build a stateless Python operator *with type annotations* without asking for a device.

cuda-cccl 1.2.1 wraps a stateless Python operator with ``cuda.jit(device=True)(op)``
(``_odr_helpers.create_op_void_ptr_wrapper``). numba-cuda-mlir compiles an *annotated* function eagerly,
right there, for the current device's compute capability, ignoring the build's target
(``compute_capability=[sm]``): on a driverless host it fails with "Failed to get cuGetProcAddress_v2"
(``numba_cuda_mlir.tools.get_gpu_compute_capability``), with a GPU it compiles for that GPU. Annotations
are how cuda.compute learns a ``TransformOutputIterator``'s input type (required there) and a
``TransformIterator``'s value type, so this blocks those forms on every build host. Evidence
(cuda-cccl 1.2.1, numba-cuda-mlir as installed, aot's worker setup): ``make_unary_transform`` into
``TransformOutputIterator(out, half)`` with ``def half(x: np.float32) -> np.float32`` raised that error;
with this patch it builds (``tests/cccl_sites.py``, site ``transform_output``; and the gate spec
``gate_it_transform_out_code_f32``, an annotated operator from code as a transform-output, which
``verify --gpu`` checks on the GPU).

The fix (:func:`install`): hand ``cuda.jit`` a copy of the function without its annotations, so it
compiles lazily, at the wrapper's link, for the build's target, with the signature cuda.compute derived
(from those same annotations or the iterator's types) — what the stateful path already does (its
operator is re-created from the AST, annotations dropped). Functions without annotations are passed
through untouched, so no artifact built before this patch changes.
"""

from __future__ import annotations

import types
from typing import Any


def _without_annotations(op: Any) -> Any:
    if not isinstance(op, types.FunctionType) or not getattr(op, "__annotations__", None):
        return op
    copy = types.FunctionType(op.__code__, op.__globals__, op.__name__, op.__defaults__, op.__closure__)
    copy.__kwdefaults__ = op.__kwdefaults__
    copy.__qualname__ = op.__qualname__
    copy.__module__ = op.__module__
    copy.__doc__ = op.__doc__
    return copy


def install() -> None:
    """Wrap ``_odr_helpers.create_op_void_ptr_wrapper`` (idempotent). Without numba-cuda-mlir (a JIT
    install that compiles only built-in operators) ``_odr_helpers`` does not import and no Python operator
    can be compiled, so there is nothing to wrap (seen on the H100: JIT of ``reduce_sum_f64`` failed)."""
    try:
        import cuda.compute._odr_helpers as odr
    except ImportError:
        return
    if getattr(odr.create_op_void_ptr_wrapper, "_aot_lazy", False):
        return
    original = odr.create_op_void_ptr_wrapper

    def create_op_void_ptr_wrapper(op, sig):
        return original(_without_annotations(op), sig)

    create_op_void_ptr_wrapper._aot_lazy = True  # type: ignore[attr-defined]
    odr.create_op_void_ptr_wrapper = create_op_void_ptr_wrapper
