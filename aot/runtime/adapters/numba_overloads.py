"""What a numba-cuda kernel reaches outside its own bytecode, for its digest (:mod:`.numba_digest`).

numba-cuda types a call ``f(x)``, a method ``x.m()`` or an attribute ``x.a`` through templates in its typing
registries, not through the kernel's globals: ``@overload(f)`` registers a template holding the library's
overload function (the implementation it returns is what numba-cuda compiles into the kernel), and
``@overload_method(T, "m")`` / ``@overload_attribute(T, "a")`` do the same for a name on a type. A library's
IR rewrite (``numba.cuda.core.rewrites.register_rewrite``) runs on every kernel. Issue: an ``@overload``
implementation edited after the build kept the kernel's digest, and the stale cubin wrote 6 where numba-cuda's
compile of the current code writes 10.

This module finds them, for the digest to key:

* :func:`templates_for` ``(value)``: the templates registered for a value the kernel reaches (a global, a
  module attribute, what a reached function reads in turn), and those of the operators (``operator.add``,
  a string key such as ``"getitem"``), which bytecode reaches without a name;
* :func:`attribute_templates` ``(names)``: the method and attribute templates for the names the kernel's code
  loads (``x.m``: a name in its bytecode);
* :func:`library_rewrites`: the rewrite classes a library registered.

Only the library's own are returned (numba-cuda's are its code, keyed by its version). Each is an
:class:`Extension`: an ``overload`` (its function and options keyed like any function the kernel calls), an
``intrinsic``, or ``opaque`` (a low-level ``@type_callable``/``infer_global`` template, an attribute template
class): aot cannot say what numba-cuda lowers for those, so the digest refuses them.

Registries only grow; an index over them is rebuilt when one has grown (so a template registered after attach,
before the first launch, is seen by the values-only recheck).
"""

from __future__ import annotations

import sys
import threading
import types as pytypes
from typing import Any, Iterable, NamedTuple

_NUMBA = frozenset({"numba", "numba_cuda", "llvmlite"})
#: numba-cuda's own typing registry, and numba's, which numba-cuda installs for third-party declarations.
_REGISTRIES = ("numba.cuda.typing.templates", "numba.core.typing.templates")
_REWRITES = "numba.cuda.core.rewrites.registry"
_OPERATOR_MODULES = frozenset({"operator", "_operator"})


class Extension(NamedTuple):
    """One library template: ``kind`` is ``overload``, ``intrinsic`` or ``opaque``; ``fn`` the function numba
    calls to type it (``None`` for opaque); ``label`` a stable name for the digest; ``options`` its options as
    text; ``inline`` a cost-model function of ``inline=``, if any."""

    kind: str
    fn: Any
    label: str
    options: str
    inline: Any = None


def _top(module: Any) -> str:
    return module.partition(".")[0] if isinstance(module, str) else ""


def _home(fn: Any) -> Any:
    """A function's module: its ``__module__``, else (a function made by ``exec``, as numba's jitclass operator
    overloads are) the module whose globals it runs in."""
    module = getattr(fn, "__module__", None)
    return module if isinstance(module, str) else getattr(fn, "__globals__", {}).get("__name__")


def _is_library(fn: Any) -> bool:
    return isinstance(fn, pytypes.FunctionType) and _top(_home(fn)) not in _NUMBA


def _functions_of(cls: type) -> list[Any]:
    """The plain functions a template class holds, unwrapped, and the functions their closures hold."""
    out = []
    for value in vars(cls).values():
        fn = getattr(value, "__func__", value)
        if isinstance(fn, pytypes.FunctionType):
            out.append(fn)
            for cell in fn.__closure__ or ():
                try:
                    inner = cell.cell_contents
                except ValueError:
                    continue
                if isinstance(inner, pytypes.FunctionType):
                    out.append(inner)
    return out


def describe(template: Any) -> Extension | None:
    """The library's part of a typing template, or ``None`` for numba-cuda's own."""
    d = vars(template) if isinstance(template, type) else {}
    name = f"{getattr(template, '__module__', '?')}.{getattr(template, '__qualname__', '?')}"
    if "_overload_func" in d:
        fn = getattr(d["_overload_func"], "__func__", d["_overload_func"])
        if not _is_library(fn):
            return None  # numba-cuda's (register_jitable's wrapper too: the function itself is keyed)
        inline = getattr(getattr(template, "_inline", None), "_inline", None)
        options = {"jit_options": d.get("_jit_options"), "strict": d.get("_strict"), "attr": d.get("_attr"),
                   "prefer_literal": d.get("prefer_literal"), "inline": inline if isinstance(inline, str) else
                   None, "target": (d.get("metadata") or {}).get("target"), "kind": _base_kind(template)}
        return Extension("overload", fn, f"{_home(fn)}.{fn.__qualname__}", _text(options),
                         inline if isinstance(inline, pytypes.FunctionType) else None)
    if "_definition_func" in d:
        fn = getattr(d["_definition_func"], "__func__", d["_definition_func"])
        if not _is_library(fn):
            return None
        return Extension("intrinsic", fn, f"{_home(fn)}.{fn.__qualname__}", "")
    fns = _functions_of(template)
    if any(_is_library(f) for f in fns):
        return Extension("opaque", None, name, "")
    if fns or _top(getattr(template, "__module__", None)) in _NUMBA:
        return None  # numba-cuda's (a template made with type() may name "abc" as its module: its code says whose)
    return Extension("opaque", None, name, "")  # a library's class of data only (a ConcreteTemplate's cases)


def _base_kind(template: type) -> str:
    """Overload, method or attribute template: the base numba-cuda made it from."""
    return ",".join(b.__name__ for b in template.__bases__)


def _text(options: dict[str, Any]) -> str:
    """Options as text that names no address (a dict's ``repr`` of plain values, sorted)."""
    def one(v: Any) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k!r}: {one(x)}" for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))) + "}"
        if v is None or isinstance(v, (bool, int, float, str, tuple)):
            return repr(v)
        return f"<{type(v).__module__}.{type(v).__qualname__}>"
    return one(options)


class _Index:
    """The library templates of numba's typing registries, by the value they type and by attribute name."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sizes: tuple[int, ...] = ()
        self.by_value: dict[int, tuple[Any, list[Extension]]] = {}
        self.by_attr: dict[str, list[Extension]] = {}
        self.operators: list[tuple[str, Extension]] = []

    def current(self) -> "_Index":
        registries = [r for r in (getattr(sys.modules.get(m), "builtin_registry", None) for m in _REGISTRIES)
                      if r is not None]
        sizes = tuple(len(getattr(r, k, ())) for r in registries for k in ("functions", "attributes", "globals"))
        with self.lock:
            if sizes != self.sizes:
                self._rebuild(registries)
                self.sizes = sizes
        return self

    def _rebuild(self, registries: list[Any]) -> None:
        by_value: dict[int, tuple[Any, dict[int, Extension]]] = {}
        by_attr: dict[str, dict[int, Extension]] = {}
        operators: dict[int, tuple[str, Extension]] = {}

        def add(key: Any, template: Any) -> None:
            ext = describe(template)
            if ext is None:
                return
            if isinstance(key, str) or _top(getattr(key, "__module__", None)) in _OPERATOR_MODULES:
                operators[id(template)] = (str(getattr(key, "__name__", key)), ext)
            if not isinstance(key, str):
                by_value.setdefault(id(key), (key, {}))[1][id(template)] = ext

        for registry in registries:
            for template in getattr(registry, "functions", ()):
                add(getattr(template, "key", None), template)
            for value, typ in getattr(registry, "globals", ()):
                for template in getattr(typ, "templates", None) or ():
                    add(value, template)
            for template in getattr(registry, "attributes", ()):
                ext = describe(template)
                if ext is None:
                    continue
                attr = vars(template).get("_attr")
                names = [attr] if isinstance(attr, str) else [n[len("resolve_"):] for n in vars(template)
                                                              if n.startswith("resolve_")]
                for n in names:
                    by_attr.setdefault(n, {})[id(template)] = ext
        order = lambda exts: sorted(exts, key=lambda e: (e.label, e.options))  # noqa: E731 - registration order varies
        self.by_value = {k: (v, order(d.values())) for k, (v, d) in by_value.items()}
        self.by_attr = {k: order(d.values()) for k, d in by_attr.items()}
        self.operators = sorted(operators.values(), key=lambda p: (p[0], p[1].label, p[1].options))


_INDEX = _Index()


def templates_for(value: Any) -> list[Extension]:
    """The library's templates registered for ``value`` (by identity)."""
    got = _INDEX.current().by_value.get(id(value))
    return got[1] if got is not None and got[0] is value else []


def operator_templates() -> list[tuple[str, Extension]]:
    """The library's templates for operators (``operator.add``, ``"getitem"``): any kernel may reach them."""
    return _INDEX.current().operators


def attribute_templates(names: Iterable[str]) -> list[tuple[str, Extension]]:
    """The library's method and attribute templates for ``names`` (the attributes a kernel's code loads)."""
    index = _INDEX.current()
    return [(n, ext) for n in sorted(set(names)) for ext in index.by_attr.get(n, ())]


def library_rewrites() -> list[type]:
    """The IR rewrite classes a library registered with numba-cuda (they run on every kernel it compiles)."""
    registry = getattr(sys.modules.get(_REWRITES), "rewrite_registry", None)
    rewrites = getattr(registry, "rewrites", None) or {}
    found = {id(c): c for kind in sorted(rewrites) for c in rewrites[kind]
             if _top(getattr(c, "__module__", None)) not in _NUMBA}
    return sorted(found.values(), key=lambda c: (c.__module__, c.__qualname__))


def class_functions(cls: type) -> list[tuple[str, Any]]:
    """A library class's own functions by name (a rewrite's ``match``/``apply``), for the digest to walk."""
    return sorted((name, getattr(v, "__func__", v)) for name, v in vars(cls).items()
                  if isinstance(getattr(v, "__func__", v), pytypes.FunctionType))
