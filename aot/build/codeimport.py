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

import functools
import importlib
import importlib.util
import os
import sys
import types
import warnings
from pathlib import Path
from typing import Any

from ..core.errors import AotWarning, ToolchainError
from ..core.log import get_logger
from ..core.text import SpecError, short

log = get_logger(__name__)

#: Set on a package object made without running its ``__init__`` (aot made it bare).
BARE = "__aot_bare__"


class ImportFailure(SpecError):
    """The module a spec names cannot be imported: that spec's error alone."""


@functools.lru_cache(maxsize=1)
def _prepare_process() -> None:
    """Once per reading process, before the first import of the user's code (see the module docstring)."""
    from .toolchain import choose_driver, worker_setup  # probes libraries: only when a matrix names code
    try:
        worker_setup(choose_driver().path)
    except ToolchainError as e:  # no stand-in to be had: a module importing cuda.compute then says so itself
        log.debug("no stand-in libcuda for importing the matrix's modules: %s", e)


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


def make_project_importable(root: Path) -> None:
    """Put the matrix's directory (and its ``src/``) first on ``sys.path`` for the rest of this process.

    Operators from code are imported again in every build worker, and ``spawn`` workers start with the
    parent's ``sys.path``: a package whose matrix names its own operators (``mypkg.ops:f``, next to the
    matrix) then builds from its source tree, also inside pip's isolated build, without ``PYTHONPATH``.
    Only the process that builds (or verifies) this matrix calls it: the matrix being built may name any
    module."""
    sys.path[:0] = [p for p in _import_roots(root) if p not in sys.path]


class CodeImports:
    """The modules one matrix names, imported for it (the matrix's folder and its ``src/`` on ``sys.path``,
    see :func:`make_project_importable`); each failure is remembered, so a module that
    cannot be imported runs once and fails every spec naming it with the same line.

    ``import_parents``: ordinary imports (parents' ``__init__`` run). ``driver``: prepare the process first
    (a build worker already is)."""

    def __init__(self, root: Path | None, *, import_parents: bool = False, driver: bool = True):
        self.root = root
        self.import_parents = import_parents
        self._driver = driver
        self._failed: dict[str, str] = {}

    def module(self, mod: str) -> types.ModuleType:
        """The module ``mod``, imported (:class:`ImportFailure` if it cannot be)."""
        if mod in self._failed:
            raise ImportFailure(self._failed[mod], "source")
        have = sys.modules.get(mod)
        if have is not None and not getattr(have, BARE, False):
            return have
        if self.root is not None:
            make_project_importable(self.root)
        if self._driver:
            _prepare_process()
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
