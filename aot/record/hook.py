"""What ``aot record`` installs in the recorded command's Python processes (see :mod:`aot.record.record`).

Stdlib only, and loaded by its path from a ``sitecustomize`` the recorder puts first on ``PYTHONPATH``:
``import aot`` would install aot's own import hook (a lean ``import cuda.compute``), and a recording must
not change what the command does. It observes and never compiles: each wrapper writes one JSON line and
calls the original with the same arguments, whose result (or exception) the caller gets unchanged.

* NVRTC compiles: ``cuda.core.Program`` (a subclass that notes its code and options; ``compile`` records),
  ``cuda.bindings.nvrtc.nvrtcCreateProgram``/``nvrtcAddNameExpression``/``nvrtcCompileProgram``, CuPy's
  ``RawModule``/``RawKernel``. Each is named where it lives, in the recorded process (the modules are
  loaded there): a ``str`` of the library's modules with the same text, or a call of one of its
  module-level functions that returned it, with its plain arguments (whether they give the same text again
  is checked after the command, in a process of its own: :mod:`aot.record.run`). Calls of the library's
  functions are seen through ``sys.setprofile``, limited to code whose module belongs to the recorded
  packages; only the plain values of their arguments are kept, never the objects. The kernels are read from
  the compiled image (:mod:`aot.build.image_symbols`) and the name expressions the compile was given.
* The other families, each a module of this folder listed in :data:`FAMILY_HOOKS`: cuda.compute's ``make_*``
  factories (:mod:`aot.record.hook_cccl`), numba-cuda's dispatcher compiles
  (:mod:`aot.record.hook_numba`).

The records file is bounded (:data:`MAX_RECORDS` lines of at most :data:`MAX_LINE` bytes each).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.abc
import importlib.util
import json
import os
import re
import sys
import threading
import types
from typing import Any

MAX_RECORDS = 20000
MAX_LINE = 64 * 1024
#: The families' hooks: stdlib-only modules of this folder, loaded by path beside this one. Each has
#: ``TARGETS`` (the modules whose import triggers it) and ``patch(name, module, api)`` (``api``: :data:`API`).
#: A new family adds its module's name here and nothing else.
FAMILY_HOOKS = ("hook_cccl", "hook_numba", "hook_cupy", "hook_triton", "launches")
_ARCH_FLAG = re.compile(r"^-{1,2}(arch|gpu-architecture|gpu-name|code)\b")

_local = threading.local()
_lock = threading.Lock()
_state: dict[str, Any] = {"count": 0, "fd": None, "packages": (), "renders": {}, "pending": {}, "mine": {}}


# ------------------------------------------------------------------------------------------------ output
def _write(rec: dict) -> None:
    """Append one record (line-atomic: O_APPEND, one write); past the bounds, one overflow record."""
    line = json.dumps(rec, sort_keys=True, default=repr)
    if len(line) > MAX_LINE:
        line = json.dumps({"kind": "skipped", "why": f"a record of {len(line)} bytes"})
    with _lock:
        if _state["fd"] is None or _state["count"] > MAX_RECORDS:
            return
        _state["count"] += 1
        if _state["count"] > MAX_RECORDS:
            line = json.dumps({"kind": "overflow", "why": f"more than {MAX_RECORDS} records"})
        os.write(_state["fd"], (line + "\n").encode("utf-8", "backslashreplace"))


def _busy() -> bool:
    return getattr(_local, "busy", False)


class _Quiet:
    """Inside the recorder: its own calls are neither profiled nor recorded."""

    def __enter__(self) -> None:
        self.was = _busy()
        _local.busy = True

    def __exit__(self, *exc: Any) -> None:
        _local.busy = self.was


# ------------------------------------------------------------------------------ the library's own calls
def _is_mine(frame: Any) -> bool:
    code = frame.f_code
    mine = _state["mine"].get(code)
    if mine is None:
        mod = frame.f_globals.get("__name__") or ""
        mine = any(mod == p or mod.startswith(p + ".") for p in _state["packages"])
        _state["mine"][code] = mine
    return mine


def _profile(frame: Any, event: str, arg: Any) -> None:
    """A call of the library's code notes its arguments; its return of a ``str`` notes who rendered it."""
    if event == "call":
        if not _busy() and _is_mine(frame):
            code = frame.f_code
            names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
            local = frame.f_locals
            _state["pending"][id(frame)] = {n: _note_arg(local.get(n)) for n in names}
    elif event == "return":
        args = _state["pending"].pop(id(frame), None)
        if args is not None and isinstance(arg, str) and arg and len(_state["renders"]) < 100000:
            code = frame.f_code
            who = (frame.f_globals.get("__name__"), getattr(code, "co_qualname", code.co_name), args)
            _state["renders"].setdefault(_sha(arg), who)


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def _library_modules() -> list[tuple[str, Any]]:
    return [(n, m) for n, m in list(sys.modules.items()) if m is not None
            and any(n == p or n.startswith(p + ".") for p in _state["packages"])]


def _note_arg(value: Any) -> tuple[bool, Any]:
    """An argument as kept: ``(True, plain value)`` or ``(False, its type's name)``; never the object, which
    the command may expect to be freed (a weak reference, a file closed by its finalizer)."""
    plain = _plain(value)
    return (True, plain) if plain is not None else (False, type(value).__name__)


def _plain(value: Any) -> Any:
    """An argument as the matrix can write it (str, int, float, bool), or ``None``: a numpy dtype or scalar
    type becomes its name (the re-rendering check decides whether the function accepts that)."""
    if isinstance(value, (bool, int, float, str)):
        return value
    name = getattr(value, "name", None) if type(value).__module__.startswith("numpy") else None
    if isinstance(value, type) and value.__module__ == "numpy":
        name = value.__name__
    return name if isinstance(name, str) else None


def name_source(text: str) -> dict:
    """Where ``text`` lives in the library: ``{"ref": "pkg.mod:ATTR"}``, ``{"ref": "pkg.mod:fn", "params":
    {...}, "rerender": {...}}``, or ``{"why": ...}`` saying why it cannot be named. The function is not
    called again here (that would run its side effects a second time in the command): ``rerender`` says how
    :mod:`aot.record.run` calls it in a process of its own (this one's interpreter, ``sys.path`` and
    folder) and compares the text's hash."""
    with _Quiet():
        consts = sorted((attr.startswith("_"), len(mod), mod, attr) for mod, m in _library_modules()
                        for attr, v in list(vars(m).items()) if isinstance(v, str) and v == text)
        if consts:
            return {"ref": f"{consts[0][2]}:{consts[0][3]}"}
        who = _state["renders"].get(_sha(text))
        if who is None:
            return {"why": "text built at run time: no str constant of the library's modules holds it, and no "
                           "function of theirs returned it"}
        mod, qual, args = who
        where = f"{mod}:{qual}"
        if "." in qual:
            return {"why": f"rendered by {where}, a nested function or method (a closure over a local is not "
                           f"importable by name)"}
        fn = getattr(sys.modules.get(mod), qual, None)
        if not callable(fn):
            return {"why": f"rendered by {where}, which is not a module-level name of {mod}"}
        bad = [k for k, (ok, _) in args.items() if not ok]
        if bad:
            return {"why": f"rendered by {where} from arguments that are not plain values: "
                           f"{', '.join(f'{k}=<{args[k][1]}>'[:80] for k in bad)}"}
        params = {k: v for k, (_, v) in args.items()}
        return {"ref": where, "params": params, "rerender": {
            "executable": sys.executable, "cwd": os.getcwd(), "path": [p for p in sys.path if isinstance(p, str)][:200],
            "module": mod, "function": qual, "params": params, "sha1": _sha(text)}}


def _sites() -> list[str]:
    """The library's frames on the stack, innermost first (where the compile or build was asked for)."""
    out: list[str] = []
    f: Any = sys._getframe(1)
    while f is not None and len(out) < 4:
        if _is_mine(f):
            code = f.f_code
            out.append(f"{f.f_globals.get('__name__')}:{getattr(code, 'co_qualname', code.co_name)}:{f.f_lineno}")
        f = f.f_back
    return out


def _text(v: Any) -> str:
    return bytes(v).decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)


def kernels_of(text: str, names: list[str], image: Any, lowered: dict) -> list[str]:
    """The unit's kernels: its name expressions as given, then every other entry symbol the compiled
    ``image`` defines (an ``extern "C"`` name, or a C++ kernel's mangled one), in the order the source text
    first mentions them (image order for the rest). The image is the truth; the text only orders."""
    if image is None:
        return list(names)
    symbols = _load_beside("image_symbols", "build").kernel_symbols(bytes(image))
    covered = {_text(v) for v in lowered.values()} | set(names)
    rest = [s for s in symbols if s not in covered]
    order = {s: (text.find(s) if text.find(s) >= 0 else len(text) + i) for i, s in enumerate(rest)}
    return list(names) + sorted(rest, key=order.__getitem__)


def record_nvrtc(via: str, text: Any, options: Any, kernels: Any, headers: int = 0, image: Any = None,
                 lowered: Any = None, failed: str | None = None) -> None:
    """One NVRTC compile: the source's name in the library (or why none), its kernels (``kernels``: the name
    expressions given; ``image``: the compiled cubin or PTX, whose entries are the others; ``lowered``: each
    name expression's symbol) and options; ``failed``: why the compile itself failed."""
    if _busy():
        return
    try:
        with _Quiet():
            text = _text(text)
            rec: dict[str, Any] = {"kind": "nvrtc", "via": via, "sha1": _sha(text), "len": len(text),
                                   "head": next((ln.strip()[:100] for ln in text.splitlines() if ln.strip()), ""),
                                   "site": _sites(), "headers": headers, "options": options,
                                   "image": image is not None}
            names = [_text(k) for k in kernels or ()]
            rec["kernels"] = kernels_of(text, names, image, dict(lowered or {}))
            if failed:
                rec["failed"] = failed
            rec.update(name_source(text))
        _write(rec)
    except Exception as e:  # noqa: BLE001 - a recording problem must never change the command's result
        _write({"kind": "skipped", "why": f"recording an NVRTC compile failed: {type(e).__name__}: {e}"[:300]})


def _flags(options: Any) -> list[str]:
    out = []
    for o in options or ():
        s = o.decode("utf-8", "replace") if isinstance(o, (bytes, bytearray)) else str(o)
        if not _ARCH_FLAG.match(s):
            out.append(s)
    return out


# ------------------------------------------------------------------------------------------ the patches
def _patch_cuda_core(mod: Any) -> None:
    base = getattr(mod, "Program", None)
    if base is None or getattr(base, "_aot_recorded", False):
        return
    import dataclasses

    class Program(base):  # type: ignore[misc, valid-type]
        _aot_recorded = True

        def __init__(self, code, code_type, options=None, *args, **kwargs):
            super().__init__(code, code_type, options, *args, **kwargs)
            self._aot_note = (code, code_type, options)

        def compile(self, target_type, name_expressions=(), *args, **kwargs):
            code, code_type, options = self._aot_note
            if _busy() or str(code_type).lower() not in ("c++", "cpp", "cu", "cuda"):
                with _Quiet():
                    return super().compile(target_type, name_expressions, *args, **kwargs)
            opts: dict[str, Any] = {}
            if options is not None and dataclasses.is_dataclass(options):
                opts = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)
                        if getattr(options, f.name) is not None and f.name not in ("arch", "name")}
            note = ("cuda.core", code, {k: (list(v) if isinstance(v, tuple) else v) for k, v in opts.items()},
                    list(name_expressions or ()))
            try:
                with _Quiet():  # what cuda.core calls underneath is this compile, not another
                    result = super().compile(target_type, name_expressions, *args, **kwargs)
            except BaseException as e:
                record_nvrtc(*note, failed=type(e).__name__)
                raise
            image = getattr(result, "code", None) if str(target_type).lower() in ("cubin", "ptx") else None
            record_nvrtc(*note, image=image, lowered=getattr(result, "symbol_mapping", None) or {})
            return result

    Program.__name__ = Program.__qualname__ = "Program"
    Program.__module__ = base.__module__
    mod.Program = Program


def _patch_nvrtc(mod: Any) -> None:
    if getattr(mod, "_aot_recorded", False):
        return
    create, add, compile_ = mod.nvrtcCreateProgram, mod.nvrtcAddNameExpression, mod.nvrtcCompileProgram
    progs: dict[int, dict] = {}

    def key(prog: Any) -> int:
        try:
            return int(prog)
        except Exception:  # noqa: BLE001
            return id(prog)

    def nvrtcCreateProgram(src, name, numHeaders, headers, includeNames):  # noqa: N802, N803
        result = create(src, name, numHeaders, headers, includeNames)
        if not _busy() and len(progs) < 100000:
            progs[key(result[1])] = {"src": src, "names": [], "headers": int(numHeaders or 0)}
        return result

    def nvrtcAddNameExpression(prog, name_expression):  # noqa: N802
        note = progs.get(key(prog))
        if note is not None:
            note["names"].append(name_expression)
        return add(prog, name_expression)

    def nvrtcCompileProgram(prog, numOptions, options):  # noqa: N802, N803
        note = progs.pop(key(prog), None)
        result = compile_(prog, numOptions, options)
        if note is not None:
            image, lowered, failed = _nvrtc_image(mod, prog, note["names"], result)
            record_nvrtc("nvrtc", note["src"], _flags(options), note["names"], note["headers"], image, lowered,
                         failed)
        return result

    mod.nvrtcCreateProgram, mod.nvrtcAddNameExpression = nvrtcCreateProgram, nvrtcAddNameExpression
    mod.nvrtcCompileProgram = nvrtcCompileProgram
    mod._aot_recorded = True


def _ok(result: Any) -> bool:
    err: Any = result[0] if isinstance(result, tuple) else result
    return int(getattr(err, "value", err)) == 0


def _nvrtc_image(mod: Any, prog: Any, names: list, result: Any) -> tuple[Any, dict, str | None]:
    """After a raw NVRTC compile: its cubin (or PTX, for a ``compute_XX`` target) and each name expression's
    lowered name, read through NVRTC's getters (which change nothing the library reads afterwards)."""
    if not _ok(result):
        return None, {}, "the compile failed"
    try:
        with _Quiet():
            image = None
            size = mod.nvrtcGetCUBINSize(prog)
            if _ok(size) and size[1]:
                buf = b" " * size[1]
                image = buf if _ok(mod.nvrtcGetCUBIN(prog, buf)) else None
            if image is None:
                size = mod.nvrtcGetPTXSize(prog)
                buf = b" " * size[1] if _ok(size) else b""
                image = buf.rstrip(b"\0") if buf and _ok(mod.nvrtcGetPTX(prog, buf)) else None
            lowered = {}
            for n in names:
                got = mod.nvrtcGetLoweredName(prog, n)
                if _ok(got):
                    lowered[_text(n)] = _text(got[1])
            return image, lowered, None
    except Exception as e:  # noqa: BLE001 - an API we do not know: the name expressions alone
        return None, {}, f"its image could not be read ({type(e).__name__})"


def _patch_cupy(mod: Any) -> None:
    for cls_name in ("RawModule", "RawKernel"):
        base = getattr(mod, cls_name, None)
        if base is None or getattr(base, "_aot_recorded", False):
            continue

        def __init__(self, *args, _base=base, _kind=cls_name, **kwargs):  # noqa: N807
            code = kwargs.get("code", args[0] if args else None)
            if isinstance(code, str) and kwargs.get("path") is None:
                names = kwargs.get("name_expressions") or ([] if _kind == "RawModule" else
                                                           [kwargs.get("name", args[1] if len(args) > 1 else "")])
                record_nvrtc(f"cupy.{_kind}", code, _flags(kwargs.get("options", args[2] if len(args) > 2 and
                                                                      _kind == "RawKernel" else ())), names)
            _base.__init__(self, *args, **kwargs)

        sub = type(cls_name, (base,), {"__init__": __init__, "_aot_recorded": True, "__module__": base.__module__})
        setattr(mod, cls_name, sub)


def _load_beside(name: str, folder: str = "") -> Any:
    """A stdlib-only module of this folder (or of the sibling ``folder`` of the aot package: ``image_symbols`` is
    the build's, which reads the same symbol tables), loaded by path like this one (not as part of the package)."""
    full = f"_aot_{name}"
    if full not in sys.modules:
        here = os.path.dirname(__file__)
        where = os.path.join(os.path.dirname(here), folder) if folder else here
        spec = importlib.util.spec_from_file_location(full, os.path.join(where, f"{name}.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[full] = module
    return sys.modules[full]


_PATCHES: dict[str, Any] = {"cuda.core": _patch_cuda_core, "cuda.core.experimental": _patch_cuda_core,
                            "cuda.bindings.nvrtc": _patch_nvrtc, "cupy": _patch_cupy}


def _family_patches() -> None:
    """Each family hook's targets, into :data:`_PATCHES` (``patch(name, module, API)``)."""
    for hook in FAMILY_HOOKS:
        module = _load_beside(hook)
        for target in module.TARGETS:
            _PATCHES[target] = functools.partial(_family_patch, module.patch, target)


def _family_patch(patch: Any, target: str, mod: Any) -> None:
    patch(target, mod, API)


def _apply(name: str, mod: Any) -> None:
    try:
        with _Quiet():
            _PATCHES[name](mod)
    except Exception as e:  # noqa: BLE001 - an API we do not know: record nothing there, change nothing
        _write({"kind": "skipped", "why": f"cannot watch {name}: {type(e).__name__}: {e}"[:300]})


class _AfterImport(importlib.abc.MetaPathFinder):
    """Patches a target module right after its own code has run, before anyone else uses it."""

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001
        if fullname not in _PATCHES or _busy():
            return None
        with _Quiet():
            spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module):  # noqa: ANN001
            original(module)
            _apply(fullname, module)

        loader.exec_module = exec_module
        return spec


def install() -> None:
    """Start recording in this process (the ``sitecustomize`` calls it): open the records file, watch the
    target modules' imports and the library's calls."""
    path = os.environ.get("AOT_RECORD_FILE")
    if not path or _state["fd"] is not None:
        return
    _state["packages"] = tuple(p for p in os.environ.get("AOT_RECORD_PACKAGES", "").split(",") if p)
    _state["fd"] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    _write({"kind": "process", "pid": os.getpid(), "executable": sys.executable})
    API.packages = _state["packages"]
    _family_patches()
    stub = os.environ.get("AOT_RECORD_STUB")
    if stub:  # --stand-in-driver: cuda.compute builds (for a given compute capability) without a driver
        import ctypes
        ctypes.CDLL(stub, mode=ctypes.RTLD_GLOBAL)
    sys.meta_path.insert(0, _AfterImport())
    for name in list(_PATCHES):
        if name in sys.modules:
            _apply(name, sys.modules[name])
    if _state["packages"]:
        sys.setprofile(_profile)
        threading.setprofile(_profile)


#: What a family hook is given: the writer, the recorder's guards and helpers (see :data:`FAMILY_HOOKS`); an
#: NVRTC-compiling family (CuPy's) records through ``record_nvrtc`` with the compiled image, if it has one.
API = types.SimpleNamespace(write=_write, sites=_sites, quiet=_Quiet, busy=_busy, packages=(),
                            load_beside=_load_beside, record_nvrtc=record_nvrtc, flags=_flags)

