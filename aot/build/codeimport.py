"""Import what a matrix names, and only that: ``pkg.io.kernels:SRC`` runs ``pkg/io/kernels.py`` and what it
imports, never ``pkg/__init__.py`` or ``pkg/io/__init__.py``.

A library's top-level ``__init__`` typically imports its whole API (a dataframe stack, plotting, the
GPU runtime); an isolated wheel build installs only ``[build-system] requires``, so importing the
package to read one kernel string failed the whole build on the first missing dependency. Here each
parent package of the module named becomes a *bare* package: a module object made from its spec
(``importlib.util.find_spec`` + ``module_from_spec``: ``__path__``, ``__spec__``, ``__file__`` set, no code
run), placed in ``sys.modules`` and on its own parent. The module named is then imported normally through
those parents (``importlib.import_module``: the import system's ``find_spec`` + ``module_from_spec`` +
``exec_module``, its locks and its clean-up on failure), so ``from . import sibling`` and ``from pkg.sub
import x`` inside it work: siblings execute as usual; only the ``__init__`` of the parents is skipped. A
name the parent's ``__init__`` would have defined (``from pkg import config``) is then missing, and the
error says so. ``[tool.aot] import-parents = true`` opts back into ordinary imports.

Bare parents must never change a source silently: a parent ``__init__`` that sets what the module reads
(``config.BLOCK = 256``) would give a text the library never compiles. Where a parent's ``__init__`` does
anything, each text is rendered again in a child that imports with the parents
(:meth:`CodeImports.with_parents`); a difference is the spec's error. Where that child cannot import them
(the dependencies are not installed: why parents are bare), the loader compares at run time
(:func:`aot.runtime.loader.sources.live_unit`).

Only the top-level packages of the modules named come from the matrix's folder (:func:`make_project_importable`),
and each module is imported in a child process first, bounded (:class:`_Probe`): ``os._exit()`` at import, a
crash or an import that never returns is the error of the specs naming that module, not the end or the hang of
``aot validate``.

A module that still cannot be imported is *its* specs' error (:class:`ImportFailure`, one line naming the
module and, for a ``ModuleNotFoundError``, the dependency missing), never the matrix's: the caller lists
every such spec (``aot validate``) or builds the rest (``aot build --keep-going``). ``sys.exit()`` at import
is such an error too, not the end of the process. aot's own runtime warnings (an ``AotWarning`` such as
"package 'mypkg' ships no artifacts" from a ``Registry.from_package(__name__)`` the package runs at
import) are not shown while aot imports for a matrix: the package being built has no artifacts yet.

Before the first import, the reading process gets what a build worker has: the toolkit of pip's isolated
build environment and, without an NVIDIA driver, aot's stand-in libcuda, so a library whose modules import
``cuda.compute`` at import time can be read on a driverless host.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.machinery
import importlib.util
import json
import os
import select
import subprocess
import sys
import time
import types
import warnings
from pathlib import Path
from typing import Any, Iterable

from ..core.errors import AotWarning, ToolchainError
from ..core.log import get_logger
from ..core.text import SpecError, short

log = get_logger(__name__)

#: Set on a package object made without running its ``__init__`` (aot made it bare).
BARE = "__aot_bare__"


class ImportFailure(SpecError):
    """The module a spec names cannot be imported: that spec's error alone."""


@functools.lru_cache(maxsize=1)
def _prepare_process() -> str | None:
    """Once per reading process, before the first import of the user's code (see the module docstring);
    the stand-in libcuda loaded, if any (the probe child loads the same)."""
    from .toolchain import choose_driver, worker_setup  # probes libraries: only when a matrix names code
    try:
        path = choose_driver().path
        worker_setup(path)
        return path
    except ToolchainError as e:  # no stand-in to be had: a module importing cuda.compute then says so itself
        log.debug("no stand-in libcuda for importing the matrix's modules: %s", e)
        return None


def stdlib_top(name: str) -> str | None:
    """The standard-library top-level module ``name`` lies in (``subprocess`` for ``subprocess``), or ``None``."""
    top = name.partition(".")[0]
    return top if top in sys.stdlib_module_names else None


def _bare_parents(name: str) -> None:
    """Every parent package of ``name`` not yet imported, made bare (see the module docstring)."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        pkg = ".".join(parts[:i])
        if pkg in sys.modules:
            continue
        spec = importlib.util.find_spec(pkg)  # its own parent is in sys.modules by now: nothing runs
        if spec is None:
            raise ModuleNotFoundError(f"No module named {pkg!r}", name=pkg)
        if spec.submodule_search_locations is None:
            raise ModuleNotFoundError(f"No module named {name!r}; {pkg!r} is not a package", name=name)
        module = importlib.util.module_from_spec(spec)
        setattr(module, BARE, True)
        sys.modules[pkg] = module
        if i > 1:
            setattr(sys.modules[".".join(parts[:i - 1])], parts[i - 1], module)


def _why(mod: str, e: BaseException) -> str:
    """One line: why ``mod`` did not import."""
    if isinstance(e, SystemExit):
        return f"importing {mod!r} called sys.exit({short(e.code)})"
    missing = getattr(e, "name", None) if isinstance(e, ModuleNotFoundError) else None
    if missing is not None and (mod == missing or mod.startswith(missing + ".")):
        return f"no module named {missing!r} (is {mod!r} spelled right, and its project on sys.path?)"
    if missing is not None:
        return f"importing {mod!r} needs the module {missing!r}, which is not installed here"
    msg = f"importing {mod!r} raised {type(e).__name__}: {str(e)[:200]}"
    source = getattr(e, "name", None) if isinstance(e, ImportError) else None
    if source is not None and getattr(sys.modules.get(source), BARE, False):
        msg += (f" ({source!r} is a bare package here: aot does not run the __init__ of the packages above the "
                f"module named; set import-parents = true under [tool.aot] to run them)")
    return msg


def _import_roots(root: Path) -> list[str]:
    """Absolute: build workers run in another folder (:data:`aot.build.workers.WORKER_CWD`)."""
    root = Path(os.path.abspath(root))
    return [str(p) for p in (root / "src", root) if p.is_dir()]


# ------------------------------------------------------------------ the matrix's folder: named roots only
#: A ``sys.path`` entry ``aot-import-root:<name>:<folder>`` finds the top-level module or package ``name`` in
#: ``folder`` and nothing else (:class:`_RootFinder`).
ROOT_ENTRY = "aot-import-root:"


class _RootFinder:
    """The path-entry finder of one :data:`ROOT_ENTRY`: the one top-level name, from the one folder.

    A path entry rather than a ``sys.meta_path`` finder because build workers are ``spawn``ed: they start with
    the parent's ``sys.path``, never its meta path (:meth:`CodeImports.module` installs the hook there too)."""

    def __init__(self, entry: str):
        self.name, _, folder = entry[len(ROOT_ENTRY):].partition(":")
        loaders = [(importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
                   (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES),
                   (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES)]
        self._files = importlib.machinery.FileFinder(folder, *loaders)

    def find_spec(self, fullname: str, target: types.ModuleType | None = None) -> Any:
        return self._files.find_spec(fullname, target) if fullname == self.name else None

    def invalidate_caches(self) -> None:
        self._files.invalidate_caches()


def _root_hook(entry: str) -> _RootFinder:
    if not isinstance(entry, str) or not entry.startswith(ROOT_ENTRY):
        raise ImportError("not an aot import root")
    return _RootFinder(entry)


def _install_root_hook() -> None:
    """Once per process: the hook first in ``sys.path_hooks``, and forget what the import system decided about
    our entries before it was there (a spawned worker meets them while importing aot itself)."""
    if not any(getattr(h, "__name__", None) == "_root_hook" and getattr(h, "__module__", None) == __name__
               for h in sys.path_hooks):
        sys.path_hooks.insert(0, _root_hook)
    for entry in [e for e in sys.path_importer_cache if isinstance(e, str) and e.startswith(ROOT_ENTRY)]:
        if not isinstance(sys.path_importer_cache[entry], _RootFinder):
            del sys.path_importer_cache[entry]


def make_project_importable(root: Path, modules: Iterable[str] = ()) -> None:
    """Let the top-level packages of ``modules`` (``mypkg`` of ``mypkg.ops``) be imported from the matrix's
    folder (and its ``src/``), ahead of any installed copy, for the rest of this process; nothing else comes
    from there. The folder itself never goes on ``sys.path``: a ``numpy.py``, ``json.py`` or ``cuda/`` beside
    the matrix used to replace the real one for aot and every module it imported.

    Operators from code are imported again in every build worker, and ``spawn`` workers start with the
    parent's ``sys.path``: a package whose matrix names its own operators (``mypkg.ops:f``, next to the
    matrix) then builds from its source tree, also inside pip's isolated build, without ``PYTHONPATH``.
    Only the process that builds (or verifies) this matrix calls it: the matrix being built may name any
    module."""
    _install_root_hook()
    tops = sorted({m.partition(".")[0] for m in modules if m})
    entries = [f"{ROOT_ENTRY}{top}:{folder}" for top in tops for folder in _import_roots(root)]
    sys.path[:0] = [e for e in entries if e not in sys.path]


# ------------------------------------------------------------------ each import bounded, in a child first
#: How long importing one module the matrix names may take (in the probe process) before it counts as hung.
IMPORT_TIMEOUT_S = 300.0

#: The probe's entry point: the current folder (the matrix's, often) that ``-c`` puts first goes before anything
#: is imported, then the reader's ``sys.path`` is set as it is. Not ``-I``: the child must run what the reader's
#: start-up ran (a ``sitecustomize`` on ``PYTHONPATH`` in pip's isolated builds, the ``.pth`` files it adds).
_BOOT = ("import sys\nif sys.path and sys.path[0] == '':\n    del sys.path[0]\nimport json\n"
         "r = json.loads(sys.stdin.readline())\nsys.path[:] = r['path']\n"
         "from aot.build.codeprobe import main\nmain(r)\n")


class _Probe:
    """A child process that does, before this process does, what this process is about to do: import a
    module (``{"import": mod}``) or render a source (``{"render": ref, "psets": ...}``: the sha256 of each
    text). A module that calls ``os._exit()`` at import, crashes the
    interpreter or never returns then costs that child, not this process: one line names the module.

    ``parents``: the child imports with the parents' ``__init__`` (:meth:`CodeImports.with_parents`)."""

    def __init__(self, parents: bool, prepare: bool, timeout: float):
        self.parents, self.prepare, self.timeout = parents, prepare, timeout
        self._proc: subprocess.Popen | None = None
        self._buf = b""

    def ask(self, request: dict[str, Any], what: str) -> dict[str, Any]:
        """The child's answer, or ``{"lost": why}`` (one line naming ``what``) when it died or timed out."""
        if self._proc is None:
            self._start()
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.flush()
            line = self._readline(proc, time.monotonic() + self.timeout)
        except OSError:  # the child is gone already (a broken pipe)
            line = b""
        if line is None:
            proc.kill()
            self._reap()
            return {"lost": f"{what} did not return within {self.timeout:g} s (it hangs, or waits for something "
                            f"that never comes); aot imports each module a matrix names in a child process first"}
        if not line:
            rc = self._reap()
            return {"lost": f"{what} ended the Python process (exit status {rc}: os._exit() or a crash) instead of "
                            f"returning; aot imports each module a matrix names in a child process first"}
        try:
            answer = json.loads(line)
        except ValueError:
            proc.kill()
            self._reap()
            return {"lost": f"{what} garbled aot's child process's answer"}
        return answer if isinstance(answer, dict) else {"lost": f"{what}: no answer"}

    def _start(self) -> None:
        self._proc = subprocess.Popen([sys.executable, "-c", _BOOT], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=dict(os.environ))
        self._buf = b""
        request = {"path": [p for p in sys.path if isinstance(p, str)], "parents": self.parents,
                   "prepare": self.prepare, "driver": _prepare_process() if self.prepare else None,
                   "ppid": os.getpid()}
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps(request) + "\n").encode())

    def _readline(self, proc: subprocess.Popen, deadline: float) -> bytes | None:
        """One line of the child's answers; ``b""`` at its end; ``None`` past ``deadline``."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return b""
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _reap(self) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()  # type: ignore[union-attr]
            except OSError:
                pass
        try:
            return proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()

    def close(self) -> None:
        """End the child: it ends itself at the end of its input (:meth:`_reap` kills one that has not after 5 s)."""
        self._reap()


class CodeImports:
    """The modules one matrix names, imported for it (their top-level packages from the matrix's folder and
    its ``src/``, see :func:`make_project_importable`); each failure is remembered, so a module that cannot be
    imported runs once and fails every spec naming it with the same line.

    With ``root`` (a matrix being read), each module is first imported in a child process (:class:`_Probe`,
    bounded by ``timeout``): one that ends the process or never returns is its specs' error, named, and this
    process never imports it. ``import_parents``: ordinary imports (parents' ``__init__`` run). ``driver``:
    prepare the process first (a build worker already is). :meth:`close` ends the children."""

    def __init__(self, root: Path | None, *, import_parents: bool = False, driver: bool = True,
                 timeout: float | None = None):
        self.root = root
        self.import_parents = import_parents
        self._driver = driver
        self._timeout = IMPORT_TIMEOUT_S if timeout is None else timeout
        self._failed: dict[str, str] = {}
        self._probes: dict[bool, _Probe] = {}

    def _probe(self, parents: bool) -> _Probe:
        probe = self._probes.get(parents)
        if probe is None:
            probe = self._probes[parents] = _Probe(parents, self._driver, self._timeout)
        return probe

    def close(self) -> None:
        for probe in self._probes.values():
            probe.close()
        self._probes.clear()

    def module(self, mod: str) -> types.ModuleType:
        """The module ``mod``, imported (:class:`ImportFailure` if it cannot be)."""
        if mod in self._failed:
            raise ImportFailure(self._failed[mod], "source")
        have = sys.modules.get(mod)
        if have is not None and not getattr(have, BARE, False):
            return have
        _install_root_hook()  # a spawned build worker has the reader's entries on sys.path, not yet the hook
        if self.root is not None:
            make_project_importable(self.root, [mod])
        if self._driver:
            _prepare_process()
        if self.root is not None:
            answer = self._probe(self.import_parents).ask({"import": mod}, f"importing {mod!r}")
            if not answer.get("ok"):
                self._failed[mod] = str(answer.get("lost") or answer.get("why") or f"importing {mod!r} failed")
                raise ImportFailure(self._failed[mod], "source")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", AotWarning)  # the package being built ships no artifacts yet
                if not self.import_parents:
                    _bare_parents(mod)
                    if getattr(sys.modules.get(mod), BARE, False):  # named as a parent before: run it now
                        del sys.modules[mod]
                return importlib.import_module(mod)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure is this module's specs' error, one line
            self._failed[mod] = _why(mod, e)
            raise ImportFailure(self._failed[mod], "source") from None

    def attribute(self, ref: str) -> Any:
        """What ``pkg.mod:ATTR`` names (:class:`ImportFailure`, or :class:`SpecError` for a missing attribute)."""
        mod, _, attr = ref.partition(":")
        module = self.module(mod)
        if not hasattr(module, attr):
            raise SpecError(f"module {mod!r} has no attribute {attr!r}", "source")
        return getattr(module, attr)

    def with_parents(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """What a child that imports with the parents' ``__init__`` answers to ``request`` (a ``render``:
        see :class:`_Probe`), or ``None`` when there is nothing to compare: parents are imported
        here already, no parent has an ``__init__`` that does anything, or the child could not say (the
        parents need what is not installed here: the reason bare parents exist; the runtime check covers it)."""
        ref = request["render"]
        mod = ref.partition(":")[0]
        if self.import_parents or self.root is None or not _parents_act(mod):
            return None
        answer = self._probe(True).ask(request, f"importing {mod!r} with its parent packages")
        if "keys" in answer:
            return answer
        log.debug("%s: not compared with its parents' __init__ run: %s", ref, answer.get("why") or answer.get("lost"))
        return None


def _parents_act(mod: str) -> bool:
    """Whether any parent package of ``mod`` has an ``__init__`` with a statement (beyond a docstring and
    ``from __future__``): an empty or absent one cannot change what ``mod`` reads."""
    parts = mod.split(".")
    for i in range(1, len(parts)):
        pkg = sys.modules.get(".".join(parts[:i]))
        init = getattr(pkg, "__file__", None)
        if not init:
            continue  # a namespace package: no __init__
        try:
            tree = ast.parse(Path(init).read_bytes())
        except (OSError, SyntaxError, ValueError):
            return True
        for node in tree.body:
            if isinstance(node, ast.Expr) and isinstance(getattr(node.value, "value", None), str):
                continue  # a docstring
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            return True
    return False
