"""The cuda.compute half of ``aot record``'s hook (:mod:`aot.record.hook`, loaded by path beside it,
stdlib only): a ``make_*`` factory's keyword arguments described as JSON data.

Arrays and placeholders become their dtype; iterators their kind, element type and children (read from
the iterator objects cuda.compute 1.2 builds); operators a built-in's name, or a Python function's module,
qualified name, free variables and, for a lambda, its source text (found in the file's syntax tree by its
line and argument names). What this cannot describe is said by name (``{"unknown": ...}``) and
:mod:`aot.record.cccl` lists it as not named.
"""

from __future__ import annotations

import ast
import functools
import sys
from typing import Any, Callable

_ENUMS = ("SortOrder", "Determinism")
#: cuda.compute's ``OpKind`` (its class is the bindings' ``cccl_op_kind_t``).
_OPKINDS = ("OpKind", "cccl_op_kind_t")


#: The modules whose import triggers :func:`patch` (see ``hook.FAMILY_HOOKS``).
TARGETS = ("cuda.compute",)


def patch(name: str, mod: Any, api: Any) -> None:
    """Every ``make_*`` of cuda.compute's modules, wherever it is bound (the one-shot functions look theirs
    up in their own module, so they are recorded through it)."""
    wrapped: dict[int, Any] = {}
    for modname, m in list(sys.modules.items()):
        if m is None or not (modname == name or modname.startswith(name + ".")):
            continue
        for attr, fn in list(vars(m).items()):
            if attr.startswith("make_") and callable(fn) and not getattr(fn, "_aot_recorded", False) and \
                    str(getattr(fn, "__module__", "")).startswith("cuda.compute.algorithms"):
                if id(fn) not in wrapped:
                    wrapped[id(fn)] = wrap(fn, attr, api.write, api.sites, api.quiet, api.busy, parse_cached)
                setattr(m, attr, wrapped[id(fn)])


@functools.lru_cache(maxsize=64)
def parse_cached(path: str) -> Any:
    """A source file's syntax tree, parsed once per process (lambda sources are found in it)."""
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read(), path)


def wrap(fn: Callable, factory: str, write: Callable, sites: Callable, quiet: Any, busy: Callable,
         parse: Callable) -> Callable:
    """``fn`` recording each outermost call (a factory called by another records once)."""

    @functools.wraps(fn)
    def make(*args, **kwargs):
        if not busy():
            try:
                with quiet():
                    rec = {"kind": "cccl", "factory": factory, "site": sites(), "positional": len(args),
                           "args": {k: describe(v, parse) for k, v in kwargs.items()}}
                write(rec)
            except Exception as e:  # noqa: BLE001 - recording never changes the command's result
                write({"kind": "skipped", "why": f"recording {factory} failed: {type(e).__name__}: {e}"[:300]})
        with quiet():
            return fn(*args, **kwargs)

    make._aot_recorded = True  # type: ignore[attr-defined]
    return make


def dtype_of(x: Any) -> Any:
    """A numpy dtype (or something carrying one) as a name, or a struct's ``[[field, dtype], ...]``."""
    dt = getattr(x, "dtype", x)
    if getattr(dt, "names", None):
        return {"struct": [[n, dtype_of(dt.fields[n][0])] for n in dt.names]}
    name = getattr(dt, "name", None)
    if isinstance(name, str):
        return name
    cai = getattr(x, "__cuda_array_interface__", None)
    if isinstance(cai, dict) and "numpy" in sys.modules:
        return dtype_of(sys.modules["numpy"].dtype(cai.get("typestr")))
    return None


def describe(v: Any, parse: Callable, depth: int = 0) -> dict:
    """One argument as data."""
    if depth > 8:
        return {"unknown": "iterators nested too deep"}
    if v is None:
        return {"none": True}
    t = type(v)
    name, mod = t.__name__, t.__module__ or ""
    if name in _OPKINDS or name in _ENUMS or mod.startswith(("cuda.compute", "compute.")):
        return _compute_object(v, name, parse, depth)
    if mod == "numpy" and name == "ndarray":
        return {"value": v.tolist(), "dtype": dtype_of(v)}
    if hasattr(v, "__cuda_array_interface__"):
        return {"array": dtype_of(v)}
    if isinstance(v, (bool, int, float, str)):
        return {"scalar": v}
    if callable(v):
        return {"op": op_info(v, parse)}
    return {"unknown": f"a {name} argument"}


def _compute_object(v: Any, name: str, parse: Callable, depth: int) -> dict:
    d = functools.partial(describe, parse=parse, depth=depth + 1)
    if name in _OPKINDS:
        return {"op": {"builtin": v.name}}
    if name in _ENUMS:
        return {"enum": name, "name": v.name}
    if name == "ProxyArray":
        return {"array": dtype_of(v)}
    if name == "PointerIterator":
        return {"array": dtype_of(getattr(v, "_array", None))}
    if name == "CountingIterator":
        return {"counting": dtype_of(getattr(v, "_start_value", None))}
    if name == "ConstantIterator":
        return {"constant": dtype_of(getattr(v, "_constant_value", None))}
    if name in ("TransformIterator", "TransformOutputIterator"):
        return {"transform": op_info(getattr(v, "_transform_op", None), parse), "over": d(v._underlying),
                "output": name == "TransformOutputIterator"}
    if name == "ReverseIterator":
        return {"reverse": d(v._underlying)}
    if name == "DiscardIterator":
        return {"discard": True}
    if name == "ShuffleIterator":
        return {"shuffle": True}
    if name == "PermutationIterator":
        return {"permutation": d(v._values), "indices": d(v._indices)}
    if name == "CacheModifiedInputIterator":
        return {"cache_modified": {"array": dtype_of(getattr(v, "_array", None))},
                "modifier": str(getattr(v, "_modifier", ""))}
    return {"unknown": f"a cuda.compute {name}"}


def op_info(op: Any, parse: Callable) -> dict:
    """An operator: ``{"builtin": NAME}``, or a Python function's whereabouts (and a lambda's text)."""
    kind = type(op).__name__
    if kind in _OPKINDS:
        return {"builtin": op.name}
    if kind == "_WellKnownOp":
        return {"builtin": op._kind.name}
    if kind == "_StatelessOp":
        return op_info(op._func, parse)
    if kind in ("_StatefulOp", "RawOp"):
        return {"unknown": "a stateful operator (its captured arrays)" if kind == "_StatefulOp" else
                "a C++ operator (cuda.compute RawOp) built at run time"}
    code = getattr(op, "__code__", None)
    if code is None:
        return {"unknown": f"a callable {kind}, not a Python function"}
    info: dict[str, Any] = {"module": getattr(op, "__module__", None), "qualname": op.__qualname__,
                            "closure": list(code.co_freevars), "globals": sorted(set(code.co_names))}
    home = sys.modules.get(info["module"] or "")
    info["importable"] = home is not None and getattr(home, op.__qualname__, None) is op
    if op.__name__ == "<lambda>":
        try:
            tree = parse(code.co_filename)
            args = list(code.co_varnames[:code.co_argcount])
            texts = {ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Lambda)
                     and n.lineno == code.co_firstlineno and [a.arg for a in n.args.args] == args}
            if len(texts) == 1:
                info["lambda"] = texts.pop()
            else:
                info["why"] = f"{len(texts)} lambdas with these arguments on line {code.co_firstlineno}"
        except (OSError, SyntaxError, ValueError) as e:
            info["why"] = f"its source cannot be read ({type(e).__name__})"
    return info
