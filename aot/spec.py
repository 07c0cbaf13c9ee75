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

from .algorithms import ALGORITHMS, BUILTIN_OPS, DTYPES, REQUIRED, SORT_ORDERS, is_dtype_field  # noqa: F401

#: Bumped whenever what a build produces from an unchanged spec changes (a patch, a recipe tweak):
#: it is part of every content key, so such a change invalidates incremental builds and user caches.
RECIPE_VERSION = 2  # 2: internal symbol names normalized


#: Kept for callers of the old tables: every algorithm's dtype fields.
DTYPE_FIELDS = tuple(sorted({f for a in ALGORITHMS.values() for f in a.fields if is_dtype_field(f)}))

#: cuda.core ``ProgramOptions`` fields a unit may set (a subset that cannot break reproducibility).
NVRTC_OPTIONS = ("std", "use_fast_math", "define_macro", "lineinfo", "ftz", "prec_div", "prec_sqrt",
                 "fma", "max_register_count", "device_code_optimize", "debug", "restrict")

#: Bounds on a struct type (``types:``): fields per struct.
MAX_STRUCT_FIELDS = 64


def code_ref_problem(op: str) -> str | None:
    """Why ``op`` is not an operator-from-code reference ``"pkg.module:function"``, or ``None``."""
    mod, sep, func = op.partition(":")
    if not sep or not func.isidentifier() or not mod or not all(p.isidentifier() for p in mod.split(".")):
        return f"{op!r} is not a 'package.module:function' reference"
    return None


def is_code_ref(op: Any) -> bool:
    return isinstance(op, str) and ":" in op and not op.startswith("lambda")


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
    """One cuda.compute algorithm instance: algorithm, dtypes, operator, init value.

    ``types``: the struct types (``types:`` of the matrix) this spec names, as ``{name: ((field, dtype),
    ...)}``; ``code``: its operators from code, ``{"pkg.mod:func": sha256 of the function's source}``.
    Both enter the definition (and so the content key) only when used, so specs without them keep the
    keys they always had."""

    name: str
    algorithm: str
    params: Mapping[str, Any]  # every field of ALGORITHMS[algorithm], defaults filled in
    types: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    code: Mapping[str, str] = field(default_factory=dict)
    family: str = field(default="cccl", init=False)

    def definition(self) -> dict[str, Any]:
        d = {"name": self.name, "algorithm": self.algorithm, **dict(self.params)}
        if self.types:
            d["types"] = {n: [list(f) for f in fs] for n, fs in self.types.items()}
        if self.code:
            d["code"] = dict(self.code)
        return d

    def content_key(self) -> str:
        d = self.definition()
        d.pop("name")  # renaming a spec does not change what it builds
        from cccl_patches import PATCH_VERSION  # plain data; no CUDA import
        return _key(("family", "cccl"), ("recipe", str(RECIPE_VERSION)), ("patch", str(PATCH_VERSION)),
                    ("definition", _canonical(d)))


@dataclass(frozen=True)
class NvrtcUnit:
    """One CUDA C source compiled with NVRTC; ``source`` is its text, ``source_path`` where it came from.

    ``kernels`` are names or name expressions (``axpy<float>``: a template instantiated by NVRTC and
    looked up by the same expression). ``headers`` maps each file under ``include_dirs`` the unit may
    include (path relative to its include dir) to its text: they ship with the definition, so a JIT
    elsewhere compiles the same bytes, and they are part of the content key."""

    name: str
    source_path: str
    source: str
    kernels: tuple[str, ...]
    options: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)
    family: str = field(default="nvrtc", init=False)

    def definition(self) -> dict[str, Any]:
        d = {"name": self.name, "source_path": self.source_path, "kernels": list(self.kernels),
             "options": dict(self.options)}
        if self.headers:
            d["headers"] = dict(self.headers)
        return d

    def content_key(self) -> str:
        parts = [("family", "nvrtc"), ("recipe", str(RECIPE_VERSION)), ("source", self.source),
                 ("kernels", _canonical(list(self.kernels))), ("options", _canonical(dict(self.options)))]
        if self.headers:
            parts.append(("headers", _canonical(dict(self.headers))))
        return _key(*parts)

    def name_expressions(self) -> tuple[str, ...]:
        """The kernels that need NVRTC name expressions (templates); plain ``extern "C"`` names need none."""
        return tuple(k for k in self.kernels if not k.isidentifier())


Spec = Union[CcclSpec, NvrtcUnit]


def item_key(spec: Spec, sm: int, payload_kind: str, toolchain: Mapping[str, str]) -> str:
    """Content key of one build item: the spec, the SM, the payload kind and the toolchain versions."""
    return _key(("spec", spec.content_key()), ("sm", str(sm)), ("kind", payload_kind),
                ("toolchain", _canonical(dict(toolchain))))


def types_problem(types: Any) -> str | None:
    """Why a definition's ``types`` is unusable, or ``None``: ``{name: [[field, scalar dtype], ...]}``."""
    if not isinstance(types, dict):
        return "types must be a mapping of struct names to field lists"
    for tname, fields in types.items():
        if not isinstance(tname, str) or not tname.isidentifier() or tname in DTYPES:
            return f"struct type name {tname!r} must be an identifier that is not a scalar dtype"
        if not isinstance(fields, (list, tuple)) or not 1 <= len(fields) <= MAX_STRUCT_FIELDS:
            return f"struct type {tname!r} needs 1 to {MAX_STRUCT_FIELDS} fields"
        names = set()
        for f in fields:
            if (not isinstance(f, (list, tuple)) or len(f) != 2 or not isinstance(f[0], str)
                    or not f[0].isidentifier() or f[1] not in DTYPES):
                return f"struct type {tname!r}: each field must be [name, scalar dtype], got {f!r}"
            if f[0] in names:
                return f"struct type {tname!r}: field {f[0]!r} appears twice"
            names.add(f[0])
    return None


def op_problem(op: Any, code: Mapping[str, Any]) -> str | None:
    """Why ``op`` is not a built-in, an acceptable lambda, or a recorded operator from code."""
    if not isinstance(op, str):
        return f"operator {op!r} is not a string"
    if op in BUILTIN_OPS:
        return None
    if op.startswith("lambda"):
        return lambda_problem(op)
    if is_code_ref(op):
        problem = code_ref_problem(op)
        if problem:
            return problem
        digest = code.get(op)
        if not (isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)):
            return f"operator {op!r} has no recorded source digest"
        return None
    return f"operator {op!r} is neither a built-in, a lambda nor a 'package.module:function'"


def init_problem(init: Any, dtype: str, types: Mapping[str, Any]) -> str | None:
    def scalar_ok(v: Any) -> bool:
        return not isinstance(v, bool) and (isinstance(v, (int, float)) or v in ("inf", "-inf", "min", "max"))
    if dtype in types:
        if not isinstance(init, (list, tuple)) or len(init) != len(types[dtype]) or not all(map(scalar_ok, init)):
            return f"init {init!r} must list one number per field of struct {dtype!r}"
        return None
    if not scalar_ok(init):
        return f"init {init!r} is not a number or 'inf', '-inf', 'min', 'max'"
    return None


def definition_problem(d: Mapping[str, Any]) -> str | None:
    """Why a spec definition read back from a manifest is unusable, or ``None``: the same rules the matrix
    validation applies, so a manifest cannot hand the loader an operator, dtype or field it would refuse."""
    if "algorithm" in d:
        algo = d.get("algorithm")
        if not isinstance(algo, str) or algo not in ALGORITHMS:
            return f"unknown algorithm {algo!r}"
        a = ALGORITHMS[algo]
        fields = a.fields
        extra = set(d) - {"name", "algorithm", "types", "code", *fields, *a.optional}
        if extra or not {"name", "algorithm", *fields} <= set(d):
            return f"fields {sorted(set(d) - {'name', 'algorithm'})} do not match {algo}'s {sorted(fields)}"
        types = d.get("types", {})
        problem = types_problem(types)
        if problem:
            return problem
        code = d.get("code", {})
        if not isinstance(code, dict):
            return "code must be a mapping of operator references to source digests"
        for f, default in {**fields, **a.optional}.items():
            v = d.get(f, default)
            if is_dtype_field(f):
                if v is None and default is None:
                    continue
                if v not in DTYPES and not (f in a.struct_fields and isinstance(v, str) and v in types):
                    return f"{f} {v!r} is not a known dtype"
                if f in a.choices and v not in a.choices[f]:
                    return f"{f} {v!r} is not one of {a.choices[f]}"
            elif f in a.choices and v not in a.choices[f]:
                return f"{f} {v!r} is not one of {a.choices[f]}"
            elif f in a.int_ranges:
                lo, hi = a.int_ranges[f]
                if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                    return f"{f} {v!r} is not an integer in [{lo}, {hi}]"
        for slot in a.ops:
            problem = op_problem(d.get(slot.field), code)
            if problem:
                return problem
        if "init" in fields:
            problem = init_problem(d.get("init"), str(d.get("dtype")), types)
            if problem:
                return problem
        return None
    if not isinstance(d.get("source_path"), str) or not isinstance(d.get("source", ""), str):
        return "an NVRTC unit needs a string source_path and source"
    kernels = d.get("kernels")
    if not isinstance(kernels, list) or not kernels or not all(isinstance(k, str) and k for k in kernels):
        return "kernels must be a non-empty list of names"
    options = d.get("options", {})
    if not isinstance(options, dict) or any(k not in NVRTC_OPTIONS for k in options):
        return f"options {options!r} are not cuda.core ProgramOptions fields aot allows"
    headers = d.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) and header_path_ok(k)
                                                for k, v in headers.items()):
        return "headers must map relative header paths to their text"
    return None


def header_path_ok(rel: str) -> bool:
    """A header's recorded path: relative, no ``..``, no empty parts (it is written under a private
    directory at JIT time, so it must not point outside it)."""
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts) and "\\" not in rel


def spec_from_definition(d: Mapping[str, Any]) -> Spec:
    """Rebuild a spec from the ``definition()`` a manifest stores (NVRTC: source stored alongside).
    Raises ``ValueError`` for a definition the matrix validation would refuse."""
    problem = definition_problem(d)
    if problem:
        raise ValueError(problem)
    if "algorithm" in d:
        params = {k: v for k, v in d.items() if k not in ("name", "algorithm", "types", "code")}
        types = {n: tuple((f[0], f[1]) for f in fs) for n, fs in d.get("types", {}).items()}
        return CcclSpec(name=d["name"], algorithm=d["algorithm"], params=params, types=types,
                        code=dict(d.get("code", {})))
    return NvrtcUnit(name=d["name"], source_path=d["source_path"], source=d.get("source", ""),
                     kernels=tuple(d["kernels"]), options=dict(d.get("options", {})),
                     headers=dict(d.get("headers", {})))
