"""NVRTC sources kept in Python code: ``source: "pkg.module:ATTR"`` (a ``str`` constant) or
``source: "pkg.module:function"`` with ``params`` (the function's return value per parameter set).

Importing a module runs its code, so this runs only while reading the matrix being built (the user's own
file, like operators from code): never for a manifest, which carries the rendered text. The module is
imported by :class:`aot.build.codeimport.CodeImports` (its parents stay bare), with the matrix's directory
and its ``src/`` first on ``sys.path``, so a project's own package resolves in a wheel build before it is
installed. A function is called only if it is plain Python (``types.FunctionType``) defined outside the
standard library: a matrix cannot make aot call ``builtins:open`` or ``subprocess:getoutput``. The shapes
(what a reference, a parameter set, a variant name may be) are checked by :mod:`aot.core.nvsource`.

``aot validate --no-code`` imports nothing: each unit from code is then checked with a stand-in text that
holds its kernels' names, so everything but the text itself is still validated.
"""

from __future__ import annotations

import hashlib
import sys
import types
from dataclasses import dataclass
from typing import Any, Mapping

from ..core.nvsource import fill, render_label, variant_name, variant_sets
from ..core.rules import check_nvrtc
from ..core.spec import NvrtcUnit
from ..core.text import MAX_SOURCE_LEN, SpecError, _text_problem, short
from .codeimport import CodeImports, stdlib_top


@dataclass(frozen=True)
class Rendered:
    """One unit's source from code: its text and what rendered it (``source_path`` of the unit)."""

    label: str
    text: str


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


def _callable_problem(ref: str, value: Any) -> str | None:
    """Why ``value`` is not a function aot may call with the matrix's parameters, or ``None``: only plain
    Python functions defined in a module outside the standard library (a builtin, a C function, a class, a
    method or a callable object could do anything with the arguments the matrix gives it)."""
    if not isinstance(value, types.FunctionType):
        return (f"{ref!r} is {_a(type(value).__name__)}, not a plain Python function; aot calls only a function "
                f"defined with 'def' in your package")
    home = getattr(value, "__module__", None)
    if not isinstance(home, str) or home not in sys.modules:
        return f"{ref!r} is not defined in an imported module"
    if stdlib_top(home):
        return f"{ref!r} is defined in the standard library ({home!r}); aot calls only functions of your package"
    return None


def render(ref: str, psets: list[dict[str, Any]] | None, imports: CodeImports) -> list[Rendered]:
    """The source text ``ref`` names: once for a ``str`` constant (``psets`` is ``None``), else once per
    parameter set, calling the function with that set as keyword arguments. A non-``str`` value, a
    function without ``params``, a constant with them, or a value that is not a plain Python function of
    the user's code (:func:`_callable_problem`, checked before any call) is a :class:`SpecError`."""
    std = stdlib_top(ref.partition(":")[0])
    if std:  # refused before anything is imported
        raise SpecError(f"{ref!r} names the standard library ({std!r}); a source lives in your package", "source")
    value = imports.attribute(ref)
    if psets is None:
        if callable(value):
            raise SpecError(f"{ref!r} is a function; give its arguments in 'params' (one unit per parameter "
                            f"set), or name a str constant", "source")
        one = [_checked(ref, ref, value)]
        _same_with_parents(ref, None, one, imports)
        return one
    if not callable(value):
        raise SpecError(f"{ref!r} is {_a(type(value).__name__)}, not a function; 'params' needs a function that "
                        f"returns the source", "params")
    problem = _callable_problem(ref, value)
    if problem:
        raise SpecError(problem, "source")
    out = []
    for pset in psets:
        label = render_label(ref, pset)
        try:
            text = value(**pset)
        except Exception as e:  # noqa: BLE001 - the library's own function failed: say which call, one line
            raise SpecError(f"{short(label)} raised {type(e).__name__}: {str(e)[:200]}", "params") from None
        out.append(_checked(ref, label, text))
    _same_with_parents(ref, psets, out, imports)
    return out


def _same_with_parents(ref: str, psets: list[dict[str, Any]] | None, rendered: list[Rendered],
                       imports: CodeImports) -> None:
    """Refuse a text the bare parents changed: rendered again where the parents' ``__init__`` run (as they do
    wherever the library is imported), each text must be the same (:meth:`CodeImports.with_parents`)."""
    answer = imports.with_parents({"render": ref, "psets": psets})
    if answer is None:
        return
    for r, key in zip(rendered, answer["keys"]):
        if hashlib.sha256(r.text.encode()).hexdigest() != key:
            raise SpecError(f"{short(r.label)} gives another text when the __init__ of its parent packages runs, "
                            f"as it does wherever the library is imported: aot's bare import would build a text the "
                            f"library never compiles; set import-parents = true under [tool.aot], or set the value "
                            f"in the module itself", "source")


def code_units(e: Mapping[str, Any], name: str, ref: str, imports: CodeImports | None,
               headers: Mapping[str, str]) -> list[NvrtcUnit]:
    """A matrix entry naming its source in code: ``"pkg.module:ATTR"`` (one unit) or ``"pkg.module:function"``
    with ``params`` (one unit per parameter set, named by :func:`aot.core.nvsource.variant_name`; ``{param}``
    in a kernel name is the value as written). Each rendered text is its unit's source, as a file's would be.
    ``e["options"]`` is already the ProgramOptions mapping; ``headers`` what its include_dirs hold.
    ``imports`` ``None`` (``--no-code``): nothing is imported; each unit gets a stand-in text naming its kernels."""
    psets, varying = variant_sets(e["params"]) if "params" in e else (None, [])
    if imports is None:
        rendered = [Rendered(render_label(ref, p) if psets is not None else ref, "") for p in psets or [{}]]
    else:
        rendered = render(ref, psets, imports)
    units = []
    for i, r in enumerate(rendered):
        pset = psets[i] if psets is not None else {}
        kernels = e.get("kernels")
        if isinstance(kernels, list) and pset:
            kernels = [fill(k, pset, "kernels") if isinstance(k, str) else k for k in kernels]
        d = {"name": variant_name(name, pset, varying) if psets is not None else name, "source_path": r.label,
             "kernels": kernels, "options": e.get("options", {})}
        text = r.text if imports is not None else _stand_in_text(kernels)
        units.append(check_nvrtc(d, text, headers))
    return units


def _stand_in_text(kernels: Any) -> str:
    """What ``--no-code`` validates a unit from code with: its kernels' names, so only the text goes unchecked."""
    names = [k.split("<", 1)[0].split("::")[-1] for k in kernels if isinstance(k, str)] \
        if isinstance(kernels, list) else []
    return "// not imported (aot validate --no-code)\n" + "\n".join(names) + "\n"
