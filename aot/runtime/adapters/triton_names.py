"""The name of one Triton kernel at one specialisation, ``module:qualname[specialisation]``, as ``AOT_NO_JIT``
reports a compile (:mod:`aot.runtime.adapters.nojit`), ``aot gate`` logs a launch (``aot/verify/gate_hook.py``)
and lists a spec (:mod:`aot.verify.gate_run`): the same text from a launch's ``ASTSource`` and from a spec's
fields (``aot.build.triton_build.specialize`` gives the same signature, constexprs, attributes and options).

Stdlib only, and no import of Triton: the gate's hook loads this file by its path (it never imports aot).

``add[x_ptr:*fp32/16, y_ptr:*fp32/16, out_ptr:*fp32/16, n:i32/16, BLOCK=1024; w4 s3 c1]``: each runtime argument
with its type (``/16``: Triton specialised it as divisible by 16), each constexpr with its value (an integer
launched as 1 included), then the options that change the code (warps, stages, CTAs).
"""

from __future__ import annotations

from typing import Any


def _index(key: Any) -> Any:
    """A constexpr or attribute key (``(3,)`` in Triton 3.3+, ``3`` or a name before) as one index or name."""
    if isinstance(key, tuple) and len(key) == 1:
        return key[0]
    return key


def specialisation(signature: Any, constants: Any, attrs: Any, num_warps: Any = None, num_stages: Any = None,
                   num_ctas: Any = None) -> str:
    """The text inside the brackets (the module's docstring): ``signature`` maps parameter names to Triton types
    (``"constexpr"`` for a constexpr), ``constants`` and ``attrs`` are keyed by parameter index (or name)."""
    names = list(signature) if isinstance(signature, dict) else []
    values = {}
    for k, v in dict(constants or {}).items():
        i = _index(k)
        values[names[i] if isinstance(i, int) and 0 <= i < len(names) else str(i)] = v
    divisible = set()
    for k, v in dict(attrs or {}).items():
        i = _index(k)
        name = names[i] if isinstance(i, int) and 0 <= i < len(names) else str(i)
        if any(isinstance(a, (list, tuple)) and len(a) == 2 and a[0] == "tt.divisibility" for a in (v or ())):
            divisible.add(name)
    parts = []
    for name in names:
        ty = signature[name]
        if ty == "constexpr" or name in values:
            parts.append(f"{name}={_value(values.get(name))}")
        else:
            parts.append(f"{name}:{ty}{'/16' if name in divisible else ''}")
    opts = " ".join(f"{c}{v}" for c, v in (("w", num_warps), ("s", num_stages), ("c", num_ctas)) if v is not None)
    return ", ".join(parts) + (f"; {opts}" if opts else "")


def _value(v: Any) -> str:
    """A constexpr's value (``tl.constexpr(3)`` by its value, a dtype by its name)."""
    inner = getattr(v, "value", v) if type(v).__name__ == "constexpr" else v
    return repr(inner) if isinstance(inner, (bool, int, float, str, type(None))) else str(inner)


def kernel_name(fn: Any, signature: Any, constants: Any, attrs: Any, options: Any = None) -> str:
    """``module:qualname[specialisation]`` of a ``@triton.jit`` kernel (``fn``: its ``JITFunction``) compiled with
    ``options`` (Triton's parsed options, or a launch's metadata: ``num_warps``, ``num_stages``, ``num_ctas``)."""
    py = getattr(fn, "fn", fn)
    text = specialisation(signature, constants, attrs, *(getattr(options, a, None) for a in
                                                        ("num_warps", "num_stages", "num_ctas")))
    return f"{getattr(py, '__module__', '?')}:{getattr(py, '__qualname__', '?')}[{text}]"


def source_name(src: Any, options: Any = None) -> str:
    """:func:`kernel_name` of a Triton ``ASTSource`` (a compile, or a launched ``CompiledKernel.src``)."""
    return kernel_name(getattr(src, "fn", None), getattr(src, "signature", {}),
                       getattr(src, "constants", None) or getattr(src, "constexprs", None), getattr(src, "attrs", None),
                       options)
