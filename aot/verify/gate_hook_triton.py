"""Triton launches for ``aot gate``'s hook (``aot/verify/gate_hook.py``, which loads this file by its path: no
``import aot`` in the command's processes).

Triton launches from Python: ``kernel[grid](...)`` is ``JITFunction.run``, which finds or compiles the kernel (aot
serves it at Triton's cache lookup) and calls its launcher; it returns the ``CompiledKernel`` it launched. The hook
wraps ``JITFunction.run``: after a launch (not a ``warmup``), it synchronizes the device and logs the digest of
every tensor argument (the tensor's own bytes: torch's caching allocator shares one allocation between tensors,
so the allocation would carry stale bytes), the kernel named ``module:qualname[specialisation]``
(``aot/runtime/adapters/triton_names.py``: the name :mod:`aot.verify.gate_run` lists a spec under). The
autotuner's benchmark (``Autotuner._bench``: a number of timing launches that depends on the timing) is not
logged; the launch it picked is.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Any

_names: list[Any] = []


def _naming() -> Any:
    """``aot/runtime/adapters/triton_names.py``, loaded by path (stdlib only)."""
    if not _names:
        path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "runtime", "adapters", "triton_names.py")
        spec = importlib.util.spec_from_file_location("_aot_gate_triton_names", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _names.append(mod)
    return _names[0]


def _tensor_bytes(t: Any) -> tuple[bytes, str | None] | None:
    """A torch tensor's bytes on the host and its element type (``None`` where numpy has no such type: bfloat16,
    fp8), or ``None`` for an argument that is no tensor."""
    if not (hasattr(t, "data_ptr") and hasattr(t, "untyped_storage") and hasattr(t, "cpu")):
        return None
    import torch
    flat = t.detach().contiguous().reshape(-1)
    data = flat.view(torch.uint8).cpu().numpy().tobytes() if flat.numel() else b""
    dtype = str(t.dtype).removeprefix("torch.")
    return data, dtype if dtype in ("bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
                                    "uint8", "uint16", "uint32", "uint64", "complex64", "complex128") else None


def _synchronize() -> None:
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()


def patch(name: str, mod: Any, hook: Any) -> None:
    """Wrap ``JITFunction.run`` (``triton.runtime.jit``) or ``Autotuner._bench`` (``triton.runtime.autotuner``);
    ``hook`` is the gate's hook module (its log, launch counts, digest and busy flag)."""
    if name == "triton.runtime.autotuner":
        tuner: Any = getattr(mod, "Autotuner", None)
        bench = tuner.__dict__.get("_bench") if isinstance(tuner, type) else None
        if bench is None or getattr(bench, "_aot_gate", False):
            return

        @functools.wraps(bench)
        def _bench(*a: Any, **k: Any) -> Any:
            with hook._Quiet():
                return bench(*a, **k)

        _bench._aot_gate = True  # type: ignore[attr-defined]
        tuner._bench = _bench
        return
    cls: Any = getattr(mod, "JITFunction", None)
    original = cls.__dict__.get("run") if isinstance(cls, type) else None
    if original is None or getattr(original, "_aot_gate", False):
        return

    @functools.wraps(original)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if hook._busy() or kwargs.get("warmup"):
            return original(self, *args, **kwargs)
        with hook._Quiet():  # the launch itself: Triton's own compile and launcher, unseen by the other hooks
            kernel = original(self, *args, **kwargs)
        try:
            with hook._Quiet():
                _log(hook, kernel, [*args, *kwargs.values()], kwargs.get("grid"))
        except Exception as e:  # noqa: BLE001 - the digest failed; the launch's result is the caller's
            hook._write({"kind": "unseen", "via": "triton JITFunction.run",
                         "why": f"{type(e).__name__}: {e}"[:300]})
        return kernel

    run._aot_gate = True  # type: ignore[attr-defined]
    cls.run = run


def _log(hook: Any, kernel: Any, args: list, grid: Any) -> None:
    name = _naming().source_name(kernel.src, kernel.metadata)
    _synchronize()
    buffers = []
    for a in args:
        got = _tensor_bytes(a)
        if got is not None:
            buffers.append(hook.digest(*got))
    hook._write({"kind": "launch", "family": "triton", "kernel": name, "n": hook._next(name), "pid": os.getpid(),
                 "buffers": buffers, "grid": grid if isinstance(grid, (tuple, list)) else repr(grid),
                 "block": getattr(kernel.metadata, "num_warps", None), "symbol": getattr(kernel, "name", None)})
