"""No JIT after startup, provable at run time (issue 41): ``AOT_NO_JIT=warn|raise|report`` or :func:`no_jit`.

A library that ships its kernels should compile nothing once it has started. Under this setting every compile
entry point of the four families is wrapped, and each compile it sees after the setting was turned on is one
:class:`JitEvent` (family, kernel, the caller's stack): ``warn`` says it once per kernel
(:class:`~aot.core.errors.AotWarning`, with the stack) and lets it compile; ``raise`` raises
:class:`JitForbiddenError` before anything compiles; ``report`` only counts (``aot gate``'s packaged run).
:func:`jit_report` lists them (what the build matrix lacks); at exit the list is one warning, and, with
``AOT_NO_JIT_REPORT=FILE``, a JSON file.

The entry points (each wrapped only while the setting is on, so an install without it pays nothing):

* NVRTC: cuda.core's ``_program_compile_uncached`` (its documented seam: ``Program.compile`` without its
  ``cache=``, so a kernel ``aot.program_cache`` serves is not a compile) and
  ``cuda.bindings.nvrtc.nvrtcCompileProgram`` (raw callers);
* numba-cuda: ``compile_cuda`` where ``numba.cuda.compiler`` and ``numba.cuda.dispatcher`` bind it: every kernel
  and device function numba-cuda compiles (a first launch, ``kernel.compile(sig)``, ``cuda.compile_ptx``). A
  kernel aot serves is rebuilt from its cubin (``_Kernel._rebuild``) and never reaches it;
* CuPy: ``cupy.cuda.compiler._compile_using_nvrtc_no_warning`` and ``compile_using_nvcc``, which CuPy calls only
  when neither its own kernel cache nor aot (:mod:`aot.runtime.adapters.cupy_attach`) has the kernel;
* cuda.compute: every ``make_*`` factory of ``cuda.compute.algorithms``, wherever it is bound (aot's own packaged
  algorithms are loaded from their blobs, never through a factory; its JIT fallback builds through them);
* Triton: ``ASTSource.make_ir`` (``triton.compiler.compiler``), the first step of a compile that Triton's cache
  manager did not answer: a kernel in Triton's own cache, or one aot serves there
  (:mod:`aot.runtime.adapters.triton_attach`), never reaches it; a launch, a ``warmup`` and a ``triton.compile``
  for an explicit target all do. Named ``module:qualname[specialisation]``
  (:mod:`aot.runtime.adapters.triton_names`).

Only the outermost compile of a thread counts (a kernel's device functions, cuda.core's NVRTC underneath).
"""

from __future__ import annotations

import atexit
import functools
import importlib.abc
import importlib.util
import json
import re
import sys
import threading
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from ...core.env import NO_JIT, NO_JIT_REPORT
from ...core.errors import AotError, AotWarning, JitForbiddenError

#: ``report``: counted and reported only (``aot gate``'s packaged run: a warning could fail a test suite that
#: turns warnings into errors, and change what is compared).
MODES = ("off", "report", "warn", "raise")
#: Frames kept of the caller's stack (innermost last), and events kept in all.
STACK_DEPTH = 12
MAX_EVENTS = 10000
#: Path parts of the frameworks' own frames (skipped when naming the caller).
_FRAMEWORKS = ("/numba_cuda/", "/numba/", "/cupy/", "/cupy_backends/", "/cuda/core/", "/cuda/compute/",
               "/cuda/bindings/", "/triton/", "/aot/runtime/", "/aot/build/")
_KERNEL = re.compile(r"__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")


@dataclass
class JitEvent:
    family: str
    kernel: str
    via: str
    count: int = 1
    stack: list[str] = field(default_factory=list)

    def caller(self) -> str:
        """The innermost frame of the stack outside the compiling frameworks: who asked for the kernel."""
        return next((f for f in reversed(self.stack) if not any(p in f for p in _FRAMEWORKS)),
                    self.stack[-1] if self.stack else "?")

    def line(self) -> str:
        where = self.caller()
        return f"{self.family} {self.kernel} (via {self.via}, {self.count}x; first from {where})"

    def to_json(self) -> dict:
        return {"family": self.family, "kernel": self.kernel, "via": self.via, "count": self.count,
                "caller": self.caller(), "stack": self.stack}


_lock = threading.Lock()
_local = threading.local()
_state: dict[str, Any] = {"mode": "off", "events": {}, "finder": None, "atexit": False}


def mode() -> str:
    return str(_state["mode"])


def no_jit(setting: str = "raise") -> None:
    """Turn the check on (``"warn"``, ``"raise"``) or off (``"off"``) from now on, in this process. Wraps the
    compile entry points of the families already imported, and of the others when they are imported."""
    if setting not in MODES:
        raise AotError(f"aot.no_jit: {setting!r} is not one of {', '.join(MODES)}")
    _state["mode"] = setting
    if setting == "off":
        return
    for name in list(_TARGETS):
        if name in sys.modules:
            _apply(name, sys.modules[name])
    if _state["finder"] is None:
        finder = _AfterImport()
        _state["finder"] = finder
        sys.meta_path.insert(0, finder)
    if not _state["atexit"]:
        _state["atexit"] = True
        atexit.register(_at_exit)


def from_env() -> None:
    """``import aot`` calls this when ``AOT_NO_JIT`` is set (and only then: the setting costs nothing unset)."""
    setting = NO_JIT.get()
    if setting != "off":
        no_jit(setting)


def jit_report() -> dict:
    """What compiled since the setting was turned on: ``{"mode", "compiles", "kernels": [event...], "lines"}``;
    each kernel listed is one the build matrix lacks (or one aot refused to serve: its warning said why)."""
    with _lock:
        events = list(_state["events"].values())
    return {"mode": mode(), "compiles": sum(e.count for e in events), "kernels": [e.to_json() for e in events],
            "lines": [e.line() for e in events]}


def reset() -> None:
    """Forget the events (tests; a long-running service between phases)."""
    with _lock:
        _state["events"].clear()


def _at_exit() -> None:
    report = jit_report()
    path = NO_JIT_REPORT.get()
    if path is not None:
        try:
            path.write_text(json.dumps(report, indent=1) + "\n")
        except OSError:
            pass
    if report["kernels"] and report["mode"] != "report":
        warnings.warn(AotWarning(f"aot: {report['compiles']} compile(s) after startup of {len(report['kernels'])} "
                                 f"kernel(s) the packaged artifacts lack: " + "; ".join(report["lines"][:20])),
                      stacklevel=1)


def _stack() -> list[str]:
    frames = traceback.extract_stack()[:-3]
    here = __file__.rsplit(".", 1)[0]
    return [f"{f.filename}:{f.lineno} in {f.name}" for f in frames if not f.filename.startswith(here)][-STACK_DEPTH:]


def _seen(family: str, kernel: str, via: str) -> None:
    """One compile after startup: counted, said once per kernel, raised under ``raise``."""
    setting = mode()
    if setting == "off":
        return
    key = f"{family}:{kernel}"
    with _lock:
        event = _state["events"].get(key)
        first = event is None
        if first and len(_state["events"]) < MAX_EVENTS:
            event = _state["events"][key] = JitEvent(family, kernel, via, 1, _stack())
        elif event is not None:
            event.count += 1
    if setting == "raise":
        raise JitForbiddenError(f"aot: {family} compile of {kernel} (via {via}) after startup under AOT_NO_JIT=raise;"
                                f" the packaged artifacts lack it: add it to the build matrix")
    if first and event is not None and setting == "warn":
        warnings.warn(AotWarning(f"aot: {family} compile of {kernel} (via {via}) after startup; the packaged "
                                 f"artifacts lack it. Called from:\n  " + "\n  ".join(event.stack[-6:])),
                      stacklevel=4)


def _watched(original: Callable, family: str, via: str, name_of: Callable[..., str | None]) -> Callable:
    """``original`` noting each outermost call as a compile of ``name_of(*args, **kwargs)`` (None: not one)."""

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(_local, "inside", False) or mode() == "off":
            return original(*args, **kwargs)
        try:
            kernel = name_of(*args, **kwargs)
        except Exception:  # noqa: BLE001 - a call this module cannot read is still a compile
            kernel = "?"
        if kernel is not None:
            _seen(family, kernel, via)
        _local.inside = True
        try:
            return original(*args, **kwargs)
        finally:
            _local.inside = False

    wrapper._aot_nojit = True  # type: ignore[attr-defined]
    return wrapper


def _first_kernel(source: Any) -> str:
    text = source.decode("utf-8", "replace") if isinstance(source, (bytes, bytearray)) else str(source)
    m = _KERNEL.search(text)
    import hashlib
    digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{m.group(1) if m else '<no __global__>'} (source sha1 {digest})"


# ------------------------------------------------------------------------------------------- the families
def _patch_cuda_core(mod: Any) -> None:
    """cuda.core's own seam ``_program_compile_uncached`` (every ``Program.compile`` that compiles: a hit of a
    ``cache=`` such as ``aot.program_cache`` never reaches it); a cuda.core without it: ``Program`` itself."""
    prog_mod: Any = sys.modules.get("cuda.core._program")
    seam = getattr(prog_mod, "_program_compile_uncached", None)
    if seam is not None and not getattr(seam, "_aot_nojit", False):
        prog_mod._program_compile_uncached = _watched(seam, "nvrtc", "cuda.core Program.compile", _program_name)
    base = getattr(mod, "Program", None)
    if base is None or getattr(base, "_aot_nojit", False) or not isinstance(base, type):
        return
    watch_compile = seam is None

    class Program(base):  # type: ignore[misc, valid-type]
        """cuda.core's ``Program`` noting its kernel's name (the seam sees only the object)."""

        _aot_nojit = True

        def __init__(self, code, *args, **kwargs):  # noqa: ANN001
            super().__init__(code, *args, **kwargs)
            self._aot_kernel = _first_kernel(code)

        def compile(self, target_type, *args, **kwargs):  # noqa: ANN001, ANN201
            if not watch_compile:
                return super().compile(target_type, *args, **kwargs)
            return _watched(super().compile, "nvrtc", "cuda.core Program.compile",
                            lambda *a, **k: _program_name(self))(target_type, *args, **kwargs)

    Program.__name__ = Program.__qualname__ = "Program"
    Program.__module__ = base.__module__
    for name in ("cuda.core", "cuda.core.experimental"):
        m: Any = sys.modules.get(name)
        if m is not None and getattr(m, "Program", None) is base:
            m.Program = Program


def _program_name(program: Any, *args: Any, **kwargs: Any) -> str:
    """A cuda.core ``Program``'s kernel, from its source where cuda.core keeps it (else its name option)."""
    named = getattr(program, "_aot_kernel", None)
    if isinstance(named, str):
        return named
    opts = getattr(program, "_options", None)
    return str(getattr(opts, "name", None) or "<a cuda.core Program>")


def _patch_nvrtc(mod: Any) -> None:
    original = getattr(mod, "nvrtcCompileProgram", None)
    if original is None or getattr(original, "_aot_nojit", False):
        return
    names: dict[int, str] = {}
    create = mod.nvrtcCreateProgram

    @functools.wraps(create)
    def nvrtcCreateProgram(src, name, *args, **kwargs):  # noqa: ANN001, ANN202, N802
        result = create(src, name, *args, **kwargs)
        try:
            if len(names) < 100000:
                names[int(result[1])] = _first_kernel(src)
        except Exception:  # noqa: BLE001 - a program this module cannot read is named '?' at its compile
            pass
        return result

    def name_of(prog: Any, *a: Any, **k: Any) -> str:
        try:
            return names.pop(int(prog), "?")
        except (TypeError, ValueError):
            return "?"

    mod.nvrtcCreateProgram = nvrtcCreateProgram
    mod.nvrtcCompileProgram = _watched(original, "nvrtc", "nvrtcCompileProgram", name_of)


def _patch_numba(mod: Any) -> None:
    original = getattr(mod, "compile_cuda", None)
    if original is None or getattr(original, "_aot_nojit", False):
        return

    def name_of(pyfunc: Any, return_type: Any = None, args: Any = (), *a: Any, **k: Any) -> str:
        return (f"{getattr(pyfunc, '__module__', '?')}:{getattr(pyfunc, '__qualname__', '?')}"
                f"({', '.join(str(t) for t in (args or ()))})")

    wrapped = _watched(original, "numba", "numba-cuda compile_cuda", name_of)
    loaded: dict[str, Any] = dict(sys.modules)
    for name, m in loaded.items():
        if m is not None and name.endswith(("numba.cuda.compiler", "numba.cuda.dispatcher")) and \
                getattr(m, "compile_cuda", None) is original:
            m.compile_cuda = wrapped


def _patch_cupy(mod: Any) -> None:
    for attr, via in (("_compile_using_nvrtc_no_warning", "CuPy NVRTC"), ("compile_using_nvcc", "CuPy nvcc")):
        original = getattr(mod, attr, None)
        if original is None or getattr(original, "_aot_nojit", False):
            continue

        def name_of(source: Any, options: Any = (), arch: Any = None, filename: Any = "kern.cu", *a: Any,
                    **k: Any) -> str | None:
            if str(k.get("filename", filename)) == "preprocess.cu":  # CuPy's compiler probe, not a kernel
                return None
            return _first_kernel(source)

        setattr(mod, attr, _watched(original, "cupy", via, name_of))


def _patch_cccl(mod: Any) -> None:
    wrapped: dict[int, Any] = {}
    for modname, m in list(sys.modules.items()):
        if m is None or not (modname == "cuda.compute" or modname.startswith("cuda.compute.")):
            continue
        for attr, fn in list(vars(m).items()):
            if attr.startswith("make_") and callable(fn) and not getattr(fn, "_aot_nojit", False) and \
                    str(getattr(fn, "__module__", "")).startswith("cuda.compute.algorithms"):
                if id(fn) not in wrapped:
                    wrapped[id(fn)] = _watched(fn, "cccl", f"cuda.compute.{attr}", functools.partial(_cccl_name, attr))
                setattr(m, attr, wrapped[id(fn)])


def _cccl_name(factory: str, *args: Any, **kwargs: Any) -> str:
    def short(v: Any) -> str:
        dt = getattr(v, "dtype", None)
        return str(dt) if dt is not None else type(v).__name__
    parts = [short(v) for v in args] + [f"{k}={short(v)}" for k, v in kwargs.items()]
    return f"{factory}({', '.join(parts)})"


def _patch_triton(mod: Any) -> None:
    """``ASTSource.make_ir``: reached only when Triton's cache manager had no group for the key (a miss), before
    anything compiles, so ``raise`` stops the compile itself."""
    cls: Any = getattr(mod, "ASTSource", None)
    original = getattr(cls, "make_ir", None) if isinstance(cls, type) else None
    if original is None or getattr(original, "_aot_nojit", False):
        return
    from .triton_names import source_name

    def name_of(src: Any, target: Any = None, options: Any = None, *a: Any, **k: Any) -> str:
        return source_name(src, k.get("options", options))

    cls.make_ir = _watched(original, "triton", "Triton compile", name_of)


#: Module name -> its patch; applied when the module is imported, or at :func:`no_jit` if it already is.
_TARGETS: dict[str, Callable[[Any], None]] = {
    "cuda.core": _patch_cuda_core, "cuda.core.experimental": _patch_cuda_core, "cuda.bindings.nvrtc": _patch_nvrtc,
    "numba.cuda.compiler": _patch_numba, "numba.cuda.dispatcher": _patch_numba, "cupy.cuda.compiler": _patch_cupy,
    "cuda.compute.algorithms": _patch_cccl, "cuda.compute": _patch_cccl, "triton.compiler.compiler": _patch_triton}


def _apply(name: str, mod: Any) -> None:
    try:
        _TARGETS[name](mod)
    except Exception as e:  # noqa: BLE001 - an API this module does not know: said, never the caller's error
        warnings.warn(AotWarning(f"aot: AOT_NO_JIT cannot watch {name} ({type(e).__name__}: {e})"), stacklevel=2)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Patches a target module right after its own code has run."""

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001, ANN201
        if fullname not in _TARGETS or getattr(_local, "finding", False):
            return None
        _local.finding = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            _local.finding = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module

        def exec_module(module):  # noqa: ANN001, ANN202
            original(module)
            _apply(fullname, module)

        spec.loader.exec_module = exec_module
        return spec
