"""The numba-cuda half of ``aot record``'s hook (:mod:`aot.build.record_hook`, loaded by path beside it,
stdlib only): each new compile of a ``@cuda.jit`` kernel's dispatcher, with its signature as launched.

numba-cuda compiles a kernel for the argument types of its first launch with those types
(``CUDADispatcher._compile_for_args`` types the arguments, then ``compile(argtypes)``), and for each
signature given to the decorator or to ``compile``. Both go through ``CUDADispatcher.compile``: wrapping it
sees every compile, before it runs (a host without a GPU still records what the command asked for, though
the launch then fails there). An overload already compiled in the process is not recorded again.

The record names the kernel where it lives (``pkg.mod:attr``, the module-level name bound to this very
dispatcher, inside the recorded packages) and writes the signature in the matrix's syntax
(``void(float32[::1], float64, int64)``), read back through numba's own parser and compared with the
argument types; what cannot be written so is said by name and :mod:`aot.build.record` lists it.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

#: The modules whose import triggers :func:`patch` (see ``record_hook.FAMILY_HOOKS``).
TARGETS = ("numba.cuda.dispatcher",)


#: (dispatcher id, argument types) recorded in this process: a compile that failed (no GPU here) and is asked
#: for again at the next launch is one compile, as it is where the first one succeeds.
_seen: set = set()


class Unwritable(Exception):
    """An argument type the matrix's signature syntax cannot say."""


def patch(name: str, mod: Any, api: Any) -> None:
    """``CUDADispatcher.compile`` records each new (kernel, argument types) before compiling."""
    cls: Any = getattr(mod, "CUDADispatcher", None)
    original = getattr(cls, "compile", None)
    if cls is None or original is None or getattr(original, "_aot_recorded", False):
        return

    @functools.wraps(original)
    def compile(self, sig):  # noqa: ANN001, ANN202 - numba's own signature
        if not api.busy():
            try:
                with api.quiet():
                    rec = describe(self, sig, api.packages)
                    if rec is not None:
                        rec["site"] = api.sites()
                if rec is not None:
                    api.write(rec)
            except Exception as e:  # noqa: BLE001 - recording never changes the command's result
                api.write({"kind": "skipped", "why": f"recording a numba-cuda compile failed: "
                                                     f"{type(e).__name__}: {e}"[:300]})
        with api.quiet():  # numba-cuda's own work underneath (device functions, linked files) is this compile
            return original(self, sig)

    compile._aot_recorded = True  # type: ignore[attr-defined]
    cls.compile = compile


def describe(dispatcher: Any, sig: Any, packages: tuple) -> dict | None:
    """The record of a compile of ``dispatcher`` at ``sig``; ``None`` for one numba-cuda does not make (a
    device function, an overload it already has)."""
    if dispatcher.targetoptions.get("device"):
        return None
    from numba.cuda.core import sigutils  # numba-cuda is loaded: this compile is its own
    argtypes, _ = sigutils.normalize_signature(sig)
    if argtypes in dispatcher.overloads or (id(dispatcher), argtypes) in _seen:
        return None
    _seen.add((id(dispatcher), argtypes))
    py = dispatcher.py_func
    module, qual = getattr(py, "__module__", None) or "", getattr(py, "__qualname__", "?")
    rec: dict[str, Any] = {"kind": "numba", "module": module, "qualname": qual}
    try:
        text = "void(" + ", ".join(type_text(t) for t in argtypes) + ")"
        if tuple(sigutils.normalize_signature(text)[0]) != tuple(argtypes):
            raise Unwritable(f"{text!r} reads back as other types")
        rec["signature"] = text
    except Unwritable as e:
        rec["why"] = f"its argument types {tuple(str(t) for t in argtypes)}: {e}"
        return rec
    where = f"{module}:{qual}"
    if not any(module == p or module.startswith(p + ".") for p in packages):
        rec["why"] = f"the kernel {where} is not in the recorded package(s) {', '.join(packages) or '(none)'}"
    elif "." in qual or getattr(sys.modules.get(module), qual, None) is not dispatcher:
        rec["why"] = (f"the kernel {where} is not the module-level dispatcher of that name (a nested function, "
                      f"a specialization, or a dispatcher made at run time is not importable by name)")
    else:
        rec["ref"] = where
    return rec


def type_text(t: Any) -> str:
    """A numba argument type in the matrix's signature syntax: ``float32``, ``float32[::1]``, ``int64[:, :]``."""
    if type(t).__name__ == "Array":
        if not getattr(t, "mutable", True):
            raise Unwritable(f"{t} is a read-only array")
        if not getattr(t, "aligned", True):
            raise Unwritable(f"{t} is an unaligned array")
        dims = [":"] * int(t.ndim)
        if not dims:
            raise Unwritable(f"{t} has no dimensions")
        if t.layout == "C":
            dims[-1] = "::1"
        elif t.layout == "F":
            dims[0] = "::1"
        return f"{type_text(t.dtype)}[{', '.join(dims)}]"
    text = str(t)
    if not text.replace("_", "").isalnum():
        raise Unwritable(f"{text} is not a plain scalar type")
    return text
