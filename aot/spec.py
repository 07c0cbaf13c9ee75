"""Frozen spec dataclasses (a CCCL algorithm spec, an NVRTC unit) and their content keys.

The tables here are the single description of what a spec may say: :mod:`aot.matrix` validates
against them, :mod:`aot.compile` builds from them, :mod:`aot.reference` checks them on a GPU. They are
plain data (no CUDA imports) so the runtime loader can read specs back from a manifest cheaply.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

#: Bumped whenever what a build produces from an unchanged spec changes (a patch, a recipe tweak):
#: it is part of every content key, so such a change invalidates incremental builds and user caches.
RECIPE_VERSION = 2  # 2: internal symbol names normalized

DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")

#: Built-in operators (cuda.compute ``OpKind`` members, lower-cased). Anything else must be a lambda.
BUILTIN_OPS = ("plus", "minus", "multiplies", "minimum", "maximum", "less", "greater", "less_equal",
               "greater_equal", "equal_to", "not_equal_to", "bit_and", "bit_or", "bit_xor")

REQUIRED = object()


@dataclass(frozen=True)
class AlgorithmDef:
    """The fields an algorithm takes: ``fields`` maps name -> default (``REQUIRED`` if none)."""

    fields: Mapping[str, Any]
    op_role: str = "op"  # what the operator is for, for error messages


ALGORITHMS: dict[str, AlgorithmDef] = {
    "exclusive_scan": AlgorithmDef({"dtype": REQUIRED, "op": REQUIRED, "init": REQUIRED}),
    "inclusive_scan": AlgorithmDef({"dtype": REQUIRED, "op": REQUIRED, "init": REQUIRED}),
    "reduce": AlgorithmDef({"dtype": REQUIRED, "op": REQUIRED, "init": REQUIRED}),
    "segmented_reduce": AlgorithmDef({"dtype": REQUIRED, "op": REQUIRED, "init": REQUIRED,
                                      "offset_dtype": "int64"}),
    "select": AlgorithmDef({"dtype": REQUIRED, "op": REQUIRED, "count_dtype": "int64"},
                           op_role="predicate"),
    "lower_bound": AlgorithmDef({"dtype": REQUIRED, "index_dtype": "uint64"}),
    "upper_bound": AlgorithmDef({"dtype": REQUIRED, "index_dtype": "uint64"}),
    "radix_sort": AlgorithmDef({"dtype": REQUIRED, "value_dtype": None, "order": "ascending"}),
    "merge_sort": AlgorithmDef({"dtype": REQUIRED, "value_dtype": None, "op": "less"},
                               op_role="comparator"),
    "unique_by_key": AlgorithmDef({"dtype": REQUIRED, "value_dtype": REQUIRED, "op": "equal_to",
                                   "count_dtype": "int64"}, op_role="equality"),
}

DTYPE_FIELDS = ("dtype", "value_dtype", "offset_dtype", "count_dtype", "index_dtype")
SORT_ORDERS = ("ascending", "descending")

#: cuda.core ``ProgramOptions`` fields a unit may set (a subset that cannot break reproducibility).
NVRTC_OPTIONS = ("std", "use_fast_math", "define_macro", "lineinfo", "ftz", "prec_div", "prec_sqrt",
                 "fma", "max_register_count", "device_code_optimize", "debug", "restrict")


_SAFE_NODES = ("Expression", "Lambda", "arguments", "arg", "Name", "Load", "Constant", "BinOp", "UnaryOp",
               "Compare", "BoolOp", "IfExp", "Add", "Sub", "Mult", "Div", "FloorDiv", "Mod", "Pow", "BitAnd",
               "BitOr", "BitXor", "LShift", "RShift", "USub", "UAdd", "Not", "Invert", "Eq", "NotEq", "Lt",
               "LtE", "Gt", "GtE", "And", "Or")


def lambda_problem(source: str) -> str | None:
    """Why ``source`` is not an acceptable operator lambda, or ``None``.

    Operator lambdas are evaluated (to hand numba a function) when a spec is built, including on an end
    user's machine when the loader falls back to JIT from a manifest. Only arithmetic, comparisons and
    boolean logic over the lambda's own arguments and numeric constants are allowed: no names, calls,
    attributes or subscripts, so evaluating one cannot run anything else.
    """
    import ast
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as e:
        return f"lambda does not parse: {e.msg}"
    if not isinstance(tree.body, ast.Lambda):
        return "the operator source must be a single lambda expression"
    args = tree.body.args
    if args.defaults or args.kw_defaults or args.kwonlyargs or args.vararg or args.kwarg or args.posonlyargs:
        return "lambda parameters must be plain positional names (no defaults, *args, **kwargs or keyword-only)"
    params = {a.arg for a in args.args}
    for node in ast.walk(tree):
        kind = type(node).__name__
        if kind not in _SAFE_NODES:
            return f"lambda uses {kind}; only arithmetic, comparisons and boolean logic are allowed"
        if isinstance(node, ast.Name) and node.id not in params:
            return f"lambda refers to {node.id!r}; only its own arguments and numeric constants are allowed"
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, bool)):
            return f"lambda uses the constant {node.value!r}; only numbers are allowed"
    return None


def _key(*parts: tuple[str, bytes | str]) -> str:
    """sha256 over labelled, length-prefixed fields, so no two different inputs can collide."""
    h = hashlib.sha256(b"aot-key-v1\0")
    for label, value in parts:
        data = value.encode() if isinstance(value, str) else value
        h.update(label.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class CcclSpec:
    """One cuda.compute algorithm instance: algorithm, dtypes, operator, init value."""

    name: str
    algorithm: str
    params: Mapping[str, Any]  # every field of ALGORITHMS[algorithm], defaults filled in
    family: str = field(default="cccl", init=False)

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "algorithm": self.algorithm, **dict(self.params)}

    def content_key(self) -> str:
        d = self.definition()
        d.pop("name")  # renaming a spec does not change what it builds
        from cccl_patches import PATCH_VERSION  # plain data; no CUDA import
        return _key(("family", "cccl"), ("recipe", str(RECIPE_VERSION)), ("patch", str(PATCH_VERSION)),
                    ("definition", _canonical(d)))


@dataclass(frozen=True)
class NvrtcUnit:
    """One CUDA C source compiled with NVRTC; ``source`` is its text, ``source_path`` where it came from."""

    name: str
    source_path: str
    source: str
    kernels: tuple[str, ...]
    options: Mapping[str, Any]
    family: str = field(default="nvrtc", init=False)

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "source_path": self.source_path, "kernels": list(self.kernels),
                "options": dict(self.options)}

    def content_key(self) -> str:
        return _key(("family", "nvrtc"), ("recipe", str(RECIPE_VERSION)), ("source", self.source),
                    ("kernels", _canonical(list(self.kernels))), ("options", _canonical(dict(self.options))))


Spec = Union[CcclSpec, NvrtcUnit]


def item_key(spec: Spec, sm: int, payload_kind: str, toolchain: Mapping[str, str]) -> str:
    """Content key of one build item: the spec, the SM, the payload kind and the toolchain versions."""
    return _key(("spec", spec.content_key()), ("sm", str(sm)), ("kind", payload_kind),
                ("toolchain", _canonical(dict(toolchain))))


def definition_problem(d: Mapping[str, Any]) -> str | None:
    """Why a spec definition read back from a manifest is unusable, or ``None``: the same rules the matrix
    validation applies, so a manifest cannot hand the loader an operator, dtype or field it would refuse."""
    if "algorithm" in d:
        algo = d.get("algorithm")
        if not isinstance(algo, str) or algo not in ALGORITHMS:
            return f"unknown algorithm {algo!r}"
        fields = ALGORITHMS[algo].fields
        if set(d) != {"name", "algorithm", *fields}:
            return f"fields {sorted(set(d) - {'name', 'algorithm'})} do not match {algo}'s {sorted(fields)}"
        for f in DTYPE_FIELDS:
            if f in d and not (d[f] is None and fields[f] is None) and d[f] not in DTYPES:
                return f"{f} {d[f]!r} is not a known dtype"
        op = d.get("op")
        if "op" in fields and not (isinstance(op, str) and (op in BUILTIN_OPS or
                                                          (op.startswith("lambda") and not lambda_problem(op)))):
            return f"operator {op!r} is neither a built-in nor an acceptable lambda"
        if "order" in fields and d["order"] not in SORT_ORDERS:
            return f"order {d['order']!r} is not one of {SORT_ORDERS}"
        init = d.get("init", 0)
        if isinstance(init, bool) or not (isinstance(init, (int, float)) or init in ("inf", "-inf", "min", "max")):
            return f"init {init!r} is not a number or 'inf', '-inf', 'min', 'max'"
        return None
    if not isinstance(d.get("source_path"), str) or not isinstance(d.get("source", ""), str):
        return "an NVRTC unit needs a string source_path and source"
    kernels = d.get("kernels")
    if not isinstance(kernels, list) or not kernels or not all(isinstance(k, str) and k for k in kernels):
        return "kernels must be a non-empty list of names"
    options = d.get("options", {})
    if not isinstance(options, dict) or any(k not in NVRTC_OPTIONS for k in options):
        return f"options {options!r} are not cuda.core ProgramOptions fields aot allows"
    return None


def spec_from_definition(d: Mapping[str, Any]) -> Spec:
    """Rebuild a spec from the ``definition()`` a manifest stores (NVRTC: source stored alongside).
    Raises ``ValueError`` for a definition the matrix validation would refuse."""
    problem = definition_problem(d)
    if problem:
        raise ValueError(problem)
    if "algorithm" in d:
        params = {k: v for k, v in d.items() if k not in ("name", "algorithm")}
        return CcclSpec(name=d["name"], algorithm=d["algorithm"], params=params)
    return NvrtcUnit(name=d["name"], source_path=d["source_path"], source=d.get("source", ""),
                     kernels=tuple(d["kernels"]), options=dict(d.get("options", {})))

