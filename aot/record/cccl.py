"""A recorded cuda.compute build (``make_*`` and its keyword arguments, as
:mod:`aot.record.hook_cccl` describes them) as a spec of the matrix language, or why it is none.

Nothing here is written per algorithm: each definition's ``factory_kwargs`` (:mod:`aot.algorithms`) is run
once against a probe that returns, for each factory keyword, which spec fields it is made from (an array
of ``dtype``, ``h_init`` of ``dtype`` and ``init``, the operator ``op``, the sequence ``input``, ...).
Reading a recorded call backwards through that table gives the fields; a definition added there is
recorded here without a change.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Mapping

from ..algorithms import ALGORITHMS, BUILTIN_OPS, REQUIRED
from ..core.oplang import lambda_problem
from ..core.nvsource import short_value, suggest_name


class _F(str):
    """A spec field's name standing in for its value in the probe."""


class _Probe:
    """The build context of :class:`aot.algorithms.Build`, returning what each argument is made from."""

    types: dict = {}

    def np_dtype(self, name: Any) -> Any:
        raise TypeError("a factory argument computed from a dtype")  # histogram's levels: not read back

    def array(self, dtype: Any) -> tuple:
        return ("array", dtype)

    def value(self, dtype: Any, init: Any) -> tuple:
        return ("value", dtype, init)

    def op(self, source: Any) -> tuple:
        return ("op", source)

    def order(self, order: Any) -> tuple:
        return ("enum", order)

    def determinism(self, word: Any) -> tuple:
        return ("enum", word)

    def counting(self, dtype: Any) -> tuple:
        return ("seq_dtype", dtype)

    def input(self, p: Mapping[str, Any], dtype: Any) -> tuple:
        return ("input", dtype)

    def seq(self, p: Mapping[str, Any], seq: Any) -> tuple:
        return ("seq", seq.field, seq.dtype(p))


@functools.lru_cache(maxsize=None)
def _table(factory: str) -> tuple[Any, dict[str, tuple]] | None:
    """The definition building with ``factory`` and its keyword -> source table (``None``: not readable)."""
    for algo in ALGORITHMS.values():
        if algo.factory == factory:
            fields = {**algo.fields, **getattr(algo, "optional", {})}
            try:
                kw = algo.factory_kwargs({k: _F(k) for k in fields}, _Probe())
            except TypeError:
                return None
            return algo, {k: v for k, v in kw.items() if isinstance(v, tuple)}
    return None


class Unnamed(Exception):
    """A recorded build that has no spec: the message says why, in the user's words."""


def _dtype(d: Any) -> str:
    if isinstance(d, str):
        return d
    raise Unnamed("a struct dtype (declare it under types: by hand)" if isinstance(d, dict) else
                  f"an element type that cannot be read ({d!r})")


def operator(info: Mapping[str, Any]) -> str:
    """An operator as the matrix names it: a built-in, a lambda's text, or ``pkg.mod:function``."""
    if "builtin" in info:
        name = str(info["builtin"]).lower()
        if name not in BUILTIN_OPS:
            raise Unnamed(f"the built-in operator {info['builtin']} is not one aot builds")
        return name
    if "unknown" in info:
        raise Unnamed(info["unknown"])
    where = f"{info.get('module')}:{info.get('qualname')}"
    if info.get("closure"):
        raise Unnamed(f"the operator {where} is a closure over local name(s) {', '.join(info['closure'])}")
    text = info.get("lambda")
    if info.get("qualname", "").endswith("<lambda>"):
        if text is None:
            raise Unnamed(f"the lambda at {where}: {info.get('why', 'its source was not found')}")
        problem = lambda_problem(text)
        if problem is None:
            return text
        raise Unnamed(f"the operator {text!r} ({where}): {problem}")
    if info.get("importable") and "<locals>" not in where:
        return where
    raise Unnamed(f"the operator {where} is not a module-level function (not importable by name)")


def node(arg: Mapping[str, Any], dtype: str) -> Any:
    """An iterator argument as a matrix node; leaves name their element type where it is not ``dtype``."""
    def leaf(kind: str, d: Any) -> Any:
        d = _dtype(d)
        return kind if d == dtype else {kind: d}
    if "array" in arg:
        return leaf("array", arg["array"])
    if "counting" in arg:
        return leaf("counting", arg["counting"])
    if "constant" in arg:
        return leaf("constant", arg["constant"])
    if arg.get("discard"):
        return "discard"
    if arg.get("shuffle"):
        return "shuffle"
    if "transform" in arg:
        over = node(arg["over"], dtype)
        return {"transform": operator(arg["transform"]), **({} if over == "array" else {"over": over})}
    if "reverse" in arg:
        return {"reverse": node(arg["reverse"], dtype)}
    if "permutation" in arg:
        return {"permutation": node(arg["permutation"], dtype), "indices": node(arg["indices"], "int64")}
    if "cache_modified" in arg:
        return {"cache_modified": node(arg["cache_modified"], dtype), "modifier": arg.get("modifier") or "stream"}
    raise Unnamed(arg.get("unknown", f"an argument aot cannot read back ({sorted(arg)})"))


def _leaf_dtype(arg: Mapping[str, Any]) -> str | None:
    for kind in ("array", "counting", "constant"):
        if kind in arg:
            return _dtype(arg[kind])
    return None


def _init(value: Any) -> Any:
    v = value[0] if isinstance(value, list) and len(value) == 1 else value
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, (int, float)):
        return v
    raise Unnamed(f"an initial value aot cannot write ({str(v)[:40]})")


def spec_fields(rec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec fields (no name) a recorded ``make_*`` call builds; :class:`Unnamed` says why not."""
    factory = rec.get("factory", "")
    found = _table(factory)
    if found is None:
        raise Unnamed(f"cuda.compute.{factory} is not read back by aot record")
    if rec.get("positional"):
        raise Unnamed(f"{factory} was called with positional arguments")
    algo, table = found
    args: Mapping[str, Any] = rec.get("args", {})
    p: dict[str, Any] = {}
    seqs = []
    for kw, how in table.items():  # first the fields that say a dtype for sure, then the sequences
        arg = args.get(kw)
        if arg is None or arg.get("none"):
            continue
        kind = how[0]
        if kind == "value":
            p.setdefault(how[1], _dtype(arg.get("dtype")))
            p[how[2]] = _init(arg.get("value"))
        elif kind == "array":
            p.setdefault(how[1], _dtype(arg.get("array")))
        elif kind == "op":
            if "op" not in arg:
                raise Unnamed(f"{kw}: {arg.get('unknown', 'not an operator')}")
            p[how[1]] = operator(arg["op"])
        elif kind == "enum":
            p[how[1]] = str(arg.get("name", "")).lower()
        elif kind in ("input", "seq_dtype"):
            p.setdefault(how[1], _leaf_dtype(arg))
            if "counting" in arg and kind == "input":
                p["input"] = "counting"
        else:
            seqs.append((kw, how, arg))
    for kw, (_, fld, dfield), arg in sorted(seqs, key=lambda s: "output" in s[1][1]):
        if dfield not in p and "array" in arg:
            p[dfield] = _dtype(arg["array"])
        if dfield not in p:
            raise Unnamed(f"the element type of {kw} (an iterator) is not known from the other arguments")
        n = node(arg, p[dfield])
        if n != "array":
            p[fld] = n
    defaults = {**algo.fields, **getattr(algo, "optional", {})}
    p = {k: p[k] for k in sorted(p, key=lambda k: list(defaults).index(k) if k in defaults else len(defaults))}
    for k in [k for k in defaults if k not in p and defaults[k] is REQUIRED]:
        raise Unnamed(f"{factory} was built without {k!r}, which the matrix needs")
    return {"algorithm": algo.name, **{str(k): v for k, v in p.items()
                                       if v != defaults.get(k) and not (k.endswith("dtype") and k != "dtype"
                                                                        and v == p.get("dtype") and
                                                                        defaults.get(k) is None)}}


def spec_name(fields: Mapping[str, Any], site: list[str]) -> str:
    """``<the library function that built it>_<dtype>``: ``sum_of_squares_f64``."""
    where = site[0].split(":")[1].split(".")[-1] if site else fields["algorithm"]
    where = where.removeprefix("build_").removeprefix("make_")
    return suggest_name(f"{where.strip('_<>') or fields['algorithm']}_{short_value(fields.get('dtype', ''))}")
