"""The numba-cuda half of ``aot record``'s hook (:mod:`aot.record.hook`, loaded by path beside it,
stdlib only): each new compile of a ``@cuda.jit`` kernel's dispatcher, with its signature as launched.

numba-cuda compiles a kernel for the argument types of its first launch with those types
(``CUDADispatcher._compile_for_args`` types the arguments, then ``compile(argtypes)``), and for each
signature given to the decorator or to ``compile``. Both go through ``CUDADispatcher.compile``: wrapping it
sees every compile, before it runs (a host without a GPU still records what the command asked for, though
the launch then fails there). An overload already compiled in the process is not recorded again.

The record names the kernel where it lives (``pkg.mod:attr``, the module-level name bound to this very
dispatcher, inside the recorded packages) and writes the signature in the matrix's syntax
(``void(float32[::1], float64, int64)``), read back through numba's own parser and compared with the
argument types; what cannot be written so is said by name and :mod:`aot.record.record` lists it.

With ``AOT_RECORD_LAUNCHES`` (a private folder; ``aot record`` sets it unless ``--no-launches``), the first
launch of each (kernel, argument types) in a process is also kept (issue 36.3): grid, block, shared memory,
each argument before the launch and each array after it (the device synchronized), at most
:data:`MAX_LAUNCH_BYTES` in all, in one ``.npz``. It costs that launch a synchronization and the copies; it
changes no value the command sees. Aliased arrays (one array passed twice) and arguments that are neither
arrays nor numbers are not kept (the record says why).
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

#: The modules whose import triggers :func:`patch` (see ``hook.FAMILY_HOOKS``).
TARGETS = ("numba.cuda.dispatcher",)
#: Largest launch kept: every argument before it and every array after it, in bytes.
MAX_LAUNCH_BYTES = 8 * 1024 * 1024
#: (py_func id, argument types) whose launch this process has kept (or refused to keep).
_launched: set = set()


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
    kernel_cls: Any = getattr(mod, "_Kernel", None)
    folder = os.environ.get("AOT_RECORD_LAUNCHES")
    if kernel_cls is not None and folder and not getattr(kernel_cls.launch, "_aot_recorded", False):
        kernel_cls.launch = _keeping(kernel_cls.launch, folder, api)


def _keeping(original: Any, folder: str, api: Any) -> Any:
    """``_Kernel.launch`` keeping the first launch of each (kernel, argument types) in ``folder``."""

    @functools.wraps(original)
    def launch(self, args, griddim, blockdim, stream=0, sharedmem=0):  # noqa: ANN001, ANN202 - numba's own
        try:
            key = (id(self.py_func), tuple(self.argument_types))
        except Exception:  # noqa: BLE001 - a kernel object this does not know: launched, not kept
            key = None
        if key is None or api.busy() or key in _launched:
            return original(self, args, griddim, blockdim, stream, sharedmem)
        _launched.add(key)
        state: list[str] = []

        def run() -> None:
            state.append("started")
            original(self, args, griddim, blockdim, stream, sharedmem)
            state.append("done")

        try:
            with api.quiet():
                rec = keep_launch(self.py_func, self.argument_types, list(args), griddim, blockdim, sharedmem,
                                  run, _synchronize, folder)
        except Exception as e:
            if state == ["started"]:
                raise  # the launch itself failed: the command's own error, unchanged
            # keeping the launch failed: that never changes the command's result
            rec = {"kind": "skipped", "why": f"keeping a numba-cuda launch failed: {type(e).__name__}: {e}"[:300]}
            if not state:
                original(self, args, griddim, blockdim, stream, sharedmem)
        api.write(rec)

    launch._aot_recorded = True  # type: ignore[attr-defined]
    return launch


def _synchronize() -> None:
    sys.modules["numba.cuda"].synchronize()


def keep_launch(py: Any, argtypes: Any, args: list, grid: Any, block: Any, sharedmem: int, run: Any,
                sync: Any, folder: str) -> dict:
    """Run the launch (``run()``), keeping its arguments before and its arrays after: the record saying
    where the ``.npz`` is (or why none was kept). ``run``'s exceptions are the command's and pass through."""
    np = sys.modules["numpy"]
    rec: dict[str, Any] = {"kind": "launch", "module": getattr(py, "__module__", ""),
                           "qualname": getattr(py, "__qualname__", "?"), "grid": _dims(grid), "block": _dims(block),
                           "sharedmem": int(sharedmem or 0)}
    try:
        rec["signature"] = "void(" + ", ".join(type_text(t) for t in argtypes) + ")"
    except Unwritable as e:
        rec["why"] = str(e)
    before, why = _host_copies(args, argtypes, np)
    if why or "why" in rec:
        run()
        rec.setdefault("why", why)
        return rec
    run()
    sync()
    after, why = _host_copies(args, argtypes, np, arrays_only=True)
    if why:
        rec["why"] = why
        return rec
    name = f"{os.getpid()}-{len(_launched)}.npz"
    arrays = {f"in{i}": a for i, a in enumerate(before)}
    arrays.update({f"out{i}": a for i, a in after.items()})
    with open(os.path.join(folder, name), "xb") as f:
        np.savez(f, **arrays)
    rec["file"] = name
    rec["args"] = [{"array": i in after, "dtype": str(before[i].dtype), "shape": list(before[i].shape)}
                   for i in range(len(before))]
    return rec


def _dims(d: Any) -> list[int]:
    return [int(x) for x in (d if isinstance(d, (tuple, list)) else (d,))]


def _host_copies(args: list, argtypes: Any, np: Any, arrays_only: bool = False) -> tuple[Any, str | None]:
    """Each argument on the host (a list; with ``arrays_only``, ``{index: array}``), or why it is not kept."""
    out: list = []
    arrays: dict[int, Any] = {}
    seen: set[int] = set()
    total = 0
    for i, (a, t) in enumerate(zip(args, argtypes)):
        if type(t).__name__ == "Array":
            if id(a) in seen:
                return None, "an array passed twice (aliased arguments are not replayed)"
            seen.add(id(a))
            if isinstance(a, np.ndarray):
                host = np.array(a, copy=True)
            elif hasattr(a, "copy_to_host"):
                host = a.copy_to_host()
            elif hasattr(a, "__cuda_array_interface__"):
                host = sys.modules["numba.cuda"].as_cuda_array(a).copy_to_host()
            else:
                return None, f"argument {i} is a {type(a).__name__}, not an array it can copy"
            arrays[i] = host
        elif isinstance(a, (bool, int, float, complex, np.generic)):
            try:
                host = np.asarray(a, dtype=np.dtype(str(t)))
            except TypeError:
                return None, f"argument {i}'s type {t} is not a numpy scalar type"
        else:
            return None, f"argument {i} is a {type(a).__name__}, neither an array nor a number"
        total += host.nbytes
        if total > MAX_LAUNCH_BYTES:
            return None, f"its arguments pass {MAX_LAUNCH_BYTES} bytes"
        out.append(host)
    return (arrays if arrays_only else out), None


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
