"""NVRTC sources kept in Python code: ``source: "pkg.module:ATTR"`` (a ``str`` constant) or
``source: "pkg.module:function"`` with ``params`` (the function's return value per parameter set).

Importing a module runs its code, so this runs only while reading the matrix being built (the user's own
file, like operators from code): never for a manifest, which carries the rendered text. The module is
imported with the matrix's directory and its ``src/`` first on ``sys.path`` (restored afterwards), so a
project's own package resolves in a wheel build before it is installed. The shapes (what a reference, a
parameter set, a variant name may be) are checked by :mod:`aot.core.nvsource`.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from ..core.nvsource import fill, render_label, variant_name, variant_sets
from ..core.rules import check_nvrtc
from ..core.spec import NvrtcUnit
from ..core.text import MAX_SOURCE_LEN, SpecError, _text_problem, short


@dataclass(frozen=True)
class Rendered:
    """One unit's source from code: its text and what rendered it (``source_path`` of the unit)."""

    label: str
    text: str


def _import_roots(root: Path) -> list[str]:
    """Absolute: build workers run in another folder (:data:`aot.build.builder.WORKER_CWD`)."""
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


@contextlib.contextmanager
def _project_on_path(root: Path) -> Iterator[None]:
    """The matrix's directory (and its ``src/``) first on ``sys.path`` while importing, then as it was."""
    extra = _import_roots(root)
    saved = list(sys.path)
    sys.path[:0] = [p for p in extra if p not in sys.path]
    try:
        yield
    finally:
        sys.path[:] = saved


def _attribute(ref: str, root: Path) -> Any:
    mod, _, attr = ref.partition(":")
    try:
        with _project_on_path(root):
            module = importlib.import_module(mod)
    except Exception as e:  # noqa: BLE001 - any import failure is "cannot import", said in one line
        raise SpecError(f"cannot import {mod!r} for {ref!r} ({type(e).__name__}: {str(e)[:200]})", "source") \
            from None
    if not hasattr(module, attr):
        raise SpecError(f"module {mod!r} has no attribute {attr!r}", "source")
    return getattr(module, attr)


def _a(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _checked(ref: str, label: str, text: Any) -> Rendered:
    if not isinstance(text, str):
        raise SpecError(f"{short(label)} is {_a(type(text).__name__)}, not CUDA C++ source text (a str)", "source")
    problem = _text_problem(text, MAX_SOURCE_LEN)
    if problem:
        raise SpecError(f"the source text of {short(label)} {problem}", "source")
    if not text.strip():
        raise SpecError(f"{short(label)} is empty", "source")
    return Rendered(label, text)


def render(ref: str, psets: list[dict[str, Any]] | None, root: Path) -> list[Rendered]:
    """The source text ``ref`` names: once for a ``str`` constant (``psets`` is ``None``), else once per
    parameter set, calling the function with that set as keyword arguments. A non-``str`` value, a
    function without ``params`` or a constant with them is a :class:`SpecError` on ``source``/``params``."""
    value = _attribute(ref, root)
    if psets is None:
        if callable(value):
            raise SpecError(f"{ref!r} is a function; give its arguments in 'params' (one unit per parameter "
                            f"set), or name a str constant", "source")
        return [_checked(ref, ref, value)]
    if not callable(value):
        raise SpecError(f"{ref!r} is {_a(type(value).__name__)}, not a function; 'params' needs a function that "
                        f"returns the source", "params")
    out = []
    for pset in psets:
        label = render_label(ref, pset)
        try:
            text = value(**pset)
        except Exception as e:  # noqa: BLE001 - the library's own function failed: say which call, one line
            raise SpecError(f"{short(label)} raised {type(e).__name__}: {str(e)[:200]}", "params") from None
        out.append(_checked(ref, label, text))
    return out


def code_units(e: Mapping[str, Any], name: str, ref: str, root: Path, headers: Mapping[str, str]) -> list[NvrtcUnit]:
    """A matrix entry naming its source in code: ``"pkg.module:ATTR"`` (one unit) or ``"pkg.module:function"``
    with ``params`` (one unit per parameter set, named by :func:`aot.core.nvsource.variant_name`; ``{param}``
    in a kernel name is the value as written). Each rendered text is its unit's source, as a file's would be.
    ``e["options"]`` is already the ProgramOptions mapping; ``headers`` what its include_dirs hold."""
    psets, varying = variant_sets(e["params"]) if "params" in e else (None, [])
    units = []
    for i, r in enumerate(render(ref, psets, root)):
        pset = psets[i] if psets is not None else {}
        kernels = e.get("kernels")
        if isinstance(kernels, list) and pset:
            kernels = [fill(k, pset, "kernels") if isinstance(k, str) else k for k in kernels]
        d = {"name": variant_name(name, pset, varying) if psets is not None else name, "source_path": r.label,
             "kernels": kernels, "options": e.get("options", {})}
        units.append(check_nvrtc(d, r.text, headers))
    return units
