"""The Triton half of ``aot record``'s hook (:mod:`aot.record.hook`, loaded by path beside it, stdlib only):
every compile a ``@triton.jit`` kernel's launch asks for, as data.

``JITFunction._do_compile(key, signature, device, constexprs, options, attrs, warmup)`` is where a launch that
missed Triton's in-process cache arrives with what Triton compiles: the specialised signature, the constexpr values
by argument position, the specialisation attributes and the parsed options. Each call writes one
``triton-compile`` record (the kernel where it lives, each argument's type, the constexprs, the arguments
specialised as divisible by 16 or equal to 1, the options that change code, the library's frames on the stack) and
then calls Triton's method unchanged. :func:`aot.build.triton_build.entries_from_records` makes ``triton:`` entries
of them. An ``@triton.autotune`` kernel is recorded under the autotuner's name, without its configs' values (the
build adds each config again).
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

#: The modules whose import installs the patch (see ``hook.FAMILY_HOOKS``).
TARGETS = ("triton.runtime.jit",)
#: The options that change code, as ``aot.core.tritonspec.OPTIONS`` names them.
OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
           "launch_pdl", "debug")
_TUNED = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def patch(name: str, mod: Any, api: Any) -> None:
    """The family hook's entry (``hook.API``): wrap ``JITFunction._do_compile``."""
    cls = mod.JITFunction
    original = cls._do_compile
    if getattr(original, "_aot_recorded", False):
        return

    @functools.wraps(original)
    def _do_compile(self, key, signature, device, constexprs, options, attrs, warmup):  # noqa: ANN001
        if not api.busy():
            try:
                with api.quiet():
                    api.write(describe(self, signature, constexprs, options, attrs, api.sites()))
            except Exception as e:  # noqa: BLE001 - recording never changes the command's result
                why = f"recording a Triton compile failed: {type(e).__name__}: {e}"
                api.write({"kind": "skipped", "why": why[:300]})
        return original(self, key, signature, device, constexprs, options, attrs, warmup)

    _do_compile._aot_recorded = True  # type: ignore[attr-defined]
    cls._do_compile = _do_compile


def _where(fn: Any) -> tuple[str | None, Any]:
    """``pkg.mod:attr`` naming ``fn`` (or the ``@triton.autotune``/``@triton.heuristics`` wrapper around it) in its
    module, and the autotuner's configs where it is one."""
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    if module is None:
        return None, None
    for attr, value in sorted(vars(module).items()):
        inner, configs = value, None
        for _ in range(8):
            if inner is fn:
                return f"{module.__name__}:{attr}", configs
            if type(inner).__name__ not in ("Autotuner", "Heuristics"):
                break
            if type(inner).__name__ == "Autotuner" and configs is None:
                configs = list(inner.configs)
            inner = getattr(inner, "fn", None)
    return None, None


def describe(fn: Any, signature: dict, constexprs: dict, options: Any, attrs: dict, site: list) -> dict[str, Any]:
    """One ``triton-compile`` record of ``fn._do_compile(...)``."""
    names = [p.name for p in fn.params]
    ref, configs = _where(fn)
    tuned = {k for c in configs or () for k in c.kwargs}
    rec: dict[str, Any] = {"kind": "triton-compile", "site": site, "pid": os.getpid(), "kernel": ref,
                           "qualname": f"{fn.__module__}.{fn.__qualname__}", "autotuned": configs is not None}
    consts = {names[k[0]]: v for k, v in constexprs.items() if isinstance(k, tuple) and len(k) == 1}
    constexpr_params = {p.name for p in fn.params if p.is_constexpr}
    rec["signature"] = {n: ("i32" if signature[n] == "constexpr" else signature[n])
                        for n in names if n not in constexpr_params}
    rec["equal_to_1"] = [n for n in rec["signature"] if signature[n] == "constexpr" and consts.get(n) == 1]
    rec["constexprs"] = {n: v for n, v in consts.items() if n in constexpr_params and n not in tuned}
    rec["divisible_by_16"] = [names[k[0]] for k, v in attrs.items()
                              if isinstance(k, tuple) and len(k) == 1 and ["tt.divisibility", 16] in v]
    rec["options"] = {k: getattr(options, k) for k in OPTIONS if not (configs is not None and k in _TUNED)}
    bad = [n for n, v in rec["constexprs"].items() if not isinstance(v, (type(None), bool, int, float, str))]
    if ref is None or bad or len(constexprs) != len(consts):
        rec["why"] = ("the kernel is not a module attribute" if ref is None else
                      f"constexpr {bad[0]} is a {type(rec['constexprs'][bad[0]]).__name__}" if bad else
                      "a constexpr inside a tuple argument")
    return rec
