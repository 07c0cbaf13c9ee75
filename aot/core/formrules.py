"""The validator's part for the forms of :mod:`aot.algorithms.forms`: iterator nodes, state declarations
and the sources of C++ operators. Called by :func:`aot.core.rules.check_cccl` (the one validator, for
matrices and manifests alike); each failure is one :class:`SpecError` naming the field (dotted for a
part of one: ``input.over``, ``state.mask``, ``op.cpp``).

Every function returns the canonical stored form: defaults filled in where two spellings would mean the
same thing, so they share a content key; words stay words, so ``input: counting`` keeps the key it had.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..algorithms import DTYPES
from ..algorithms.forms import (CACHE_MODIFIERS, EXTRA_KEYS, INPUT_KINDS, INTEGER_LEAVES, KINDS, LEAVES, MAX_DEPTH,
                                MAX_ZIP, OUTPUT_KINDS, StateField, is_cpp)
from .oplang import check_op
from .text import MAX_LIST_LEN, MAX_SOURCE_LEN, SpecError, _text_problem, hint, short

_INTEGERS = tuple(d for d in DTYPES if d[0] in "iu")


def check_state(value: Any) -> list[list[str]]:
    """``state: {name: "<dtype>[]" | "<dtype>"}`` (a matrix) or ``[[name, decl], ...]`` (a definition), in
    the declared order, which is the layout the operators are compiled for."""
    pairs = list(value.items()) if isinstance(value, dict) else value
    if not isinstance(pairs, list) or not pairs or len(pairs) > 32:
        raise SpecError("state must map 1 to 32 names to '<dtype>[]' (a device array) or '<dtype>' (a scalar)",
                        "state")
    out: list[list[str]] = []
    for pair in pairs:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise SpecError(f"a state entry must be [name, declaration], got {short(pair)}", "state")
        name, decl = pair
        fld = f"state.{str(name)[:64]}"
        if not isinstance(name, str) or not name.isidentifier() or len(name) > 64 or name in DTYPES \
                or name in ("lambda", "min", "max", "abs") or any(name == n for n, _ in out):
            raise SpecError(f"a state name must be a distinct identifier, got {short(name)}", fld)
        base = decl[:-2] if isinstance(decl, str) and decl.endswith("[]") else decl
        if base not in DTYPES:
            raise SpecError(f"declare a device array as '<dtype>[]' or a scalar as '<dtype>', with a dtype of "
                            f"{', '.join(DTYPES)}; got {short(decl)}", fld)
        out.append([name, decl])
    return out


def state_names(state: list[list[str]] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(array names, scalar names) of a checked state."""
    fields = [StateField(n, d.rstrip("[]"), d.endswith("[]")) for n, d in state or ()]
    return tuple(f.name for f in fields if f.array), tuple(f.name for f in fields if not f.array)


def check_stateful_op(op: Any, fld: str, state: list[list[str]] | None) -> None:
    """A Python operator reads arrays only (cuda.compute captures device arrays); scalars by value are for
    C++ operators, which receive every declared field."""
    if op is None or is_cpp(op) or not state:
        return
    from .oplang import is_code_ref
    scalars = state_names(state)[1]
    if is_code_ref(op) and scalars:
        raise SpecError(f"an operator from code receives the whole state, and {scalars[0]!r} is a scalar: a "
                        f"Python operator reads device arrays only (declare '{scalars[0]}: <dtype>[]')",
                        f"state.{scalars[0]}")


def check_node(raw: Any, dtype: str, types: Mapping[str, Any], fld: str, *, output: bool,
               arrays: tuple[str, ...] = (), depth: int = 0, free: bool = False) -> Any:
    """An iterator node whose elements are ``dtype`` (``free``: a leaf may name another dtype, under a
    transform or as indices), for an input or an ``output`` sequence; returns its canonical form."""
    if depth >= MAX_DEPTH:
        raise SpecError(f"iterators nest at most {MAX_DEPTH} deep", fld)
    allowed = OUTPUT_KINDS if output else INPUT_KINDS
    if isinstance(raw, str):
        kind, spec = raw, None
    elif isinstance(raw, dict):
        kinds = [k for k in raw if k in KINDS]
        if len(kinds) != 1:
            raise SpecError(f"an iterator mapping names exactly one kind of {', '.join(allowed)}; got keys "
                            f"{', '.join(map(str, raw)) or 'none'}", fld)
        kind, spec = kinds[0], raw
    else:
        raise SpecError(f"an iterator is a word ({', '.join(k for k in allowed if k in LEAVES)}) or a mapping, got "
                        f"{short(raw)}", fld)
    if kind not in KINDS:
        raise SpecError(f"unknown {fld.split('.')[0]} {short(kind)}{hint(kind, allowed)}; one of: {', '.join(allowed)}",
                        fld)
    if kind not in allowed:
        where = "an output" if output else "an input"
        raise SpecError(f"{short(kind)} cannot be {where}{hint(kind, allowed)}; {where} is one of: "
                        f"{', '.join(allowed)}", fld)
    if kind in LEAVES:
        return _leaf(kind, spec, dtype, types, fld, free)
    assert spec is not None
    extra = EXTRA_KEYS[kind]
    for key in spec:
        if key != kind and key not in extra:
            raise SpecError(f"unknown key {short(key)} for a {kind} iterator{hint(key, extra)}; allowed: "
                            f"{', '.join([kind, *extra])}", f"{fld}.{str(key)[:64]}")
    sub: dict[str, Any] = dict(output=output, arrays=arrays, depth=depth + 1)
    if kind == "transform":
        op = check_op(spec["transform"], "transform", 1, f"{fld}.transform", arrays)
        if is_cpp(op):
            raise SpecError("a transform iterator's operator is a lambda or an operator from code", f"{fld}.transform")
        return {"transform": op, "over": check_node(spec.get("over", "array"), dtype, types, f"{fld}.over",
                                                    free=True, **sub)}
    if kind == "zip":
        members, fields = spec["zip"], types.get(dtype)
        if not fields:
            raise SpecError(f"a zip's elements are a struct: set the dtype to a type of 'types:' with one field per "
                            f"member, not {dtype!r}", fld)
        if not isinstance(members, list) or not 2 <= len(members) <= MAX_ZIP or len(members) != len(fields):
            raise SpecError(f"a zip lists {len(fields)} members, one per field of {dtype!r}", f"{fld}.zip")
        return {"zip": [check_node(m, fields[i][1], types, f"{fld}.zip[{i}]", **sub) for i, m in enumerate(members)]}
    if kind == "permutation":
        values = check_node(spec["permutation"], dtype, types, f"{fld}.permutation", **sub)
        indices = check_node(spec.get("indices", {"array": "int64"}), "int64", types, f"{fld}.indices",
                             free=True, **sub)
        from ..algorithms.forms import tree
        if tree(indices, "int64", types).dtype not in _INTEGERS:
            raise SpecError("a permutation's indices must be integers", f"{fld}.indices")
        return {"permutation": values, "indices": indices}
    if kind == "cache_modified":
        inner = check_node(spec["cache_modified"], dtype, types, f"{fld}.cache_modified", **sub)
        if inner != "array":
            raise SpecError("a cache_modified iterator reads an array", f"{fld}.cache_modified")
        modifier = spec.get("modifier", "stream")
        if modifier not in CACHE_MODIFIERS:
            raise SpecError(f"unknown modifier {short(modifier)}; one of: {', '.join(CACHE_MODIFIERS)}",
                            f"{fld}.modifier")
        return {"cache_modified": inner, "modifier": modifier}
    inner = check_node(spec["reverse"], dtype, types, f"{fld}.reverse", **sub)
    if output and inner != "array":
        raise SpecError("a reverse output writes an array", f"{fld}.reverse")
    return {"reverse": inner}


def _leaf(kind: str, spec: dict | None, dtype: str, types: Mapping[str, Any], fld: str, free: bool) -> Any:
    own = spec.get(kind) if spec is not None else None
    if spec is not None and (len(spec) != 1 or (own is not None and not isinstance(own, str))):
        raise SpecError(f"a {kind} leaf is '{kind}' or {{{kind}: <dtype>}}", fld)
    if own is not None:
        if own not in DTYPES:
            raise SpecError(f"unknown dtype {short(own)}{hint(own, DTYPES)}; known: {', '.join(DTYPES)}", fld)
        if own != dtype and not free:
            raise SpecError(f"this {kind} yields the elements of {dtype!r} here, not {own!r} (a leaf names its own "
                            f"dtype only under a transform or as indices)", fld)
    eff = own or ("int64" if kind == "shuffle" else dtype)
    if kind in INTEGER_LEAVES and eff not in _INTEGERS:
        raise SpecError(f"a {kind} iterator yields integers, not {eff!r}", fld)
    if kind == "shuffle" and eff != "int64":
        raise SpecError("a shuffle iterator yields int64 indices", fld)
    if eff in types and kind != "array":
        raise SpecError(f"a {kind} iterator yields scalars, not the struct {eff!r}", fld)
    if kind == "shuffle" and not free and dtype != "int64":
        raise SpecError(f"a shuffle iterator yields int64 indices, where {dtype!r} is expected", fld)
    return {kind: own} if own is not None and own != dtype else kind


def check_sources(value: Any, used: set[str], read: Callable[[str], str] | None) -> dict[str, str]:
    """The C++ operators' sources: read now (a matrix: ``read(path)``) or as a definition records them
    (``{path: text}``, bounded), exactly the paths its operators use."""
    if read is not None:
        return {path: read(path) for path in sorted(used)}
    if not isinstance(value, dict) or len(value) > MAX_LIST_LEN or set(value) != used:
        raise SpecError("sources must map each C++ operator's path to its text", "sources")
    total = 0
    for path, text in value.items():
        if not isinstance(text, str) or _text_problem(text, MAX_SOURCE_LEN):
            raise SpecError(f"the source of {short(path)} is not UTF-8 text within {MAX_SOURCE_LEN} bytes", "sources")
        total += len(text)
    if total > MAX_SOURCE_LEN:
        raise SpecError(f"sources hold {total} characters, over the limit of {MAX_SOURCE_LEN}", "sources")
    return dict(value)
