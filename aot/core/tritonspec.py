"""The Triton family as data: what a ``triton:`` matrix entry and a manifest's Triton definition may say, checked
field by field by the one validator (:func:`aot.core.rules.spec_from_definition` calls :func:`check_triton` for a
definition that lists ``divisible_by_16``, which only a Triton kernel has).

A matrix entry names a ``@triton.jit`` kernel where it lives and the specialisations a library launches::

    triton:
      - name: add
        kernel: "mypkg.kernels:add"
        signature: {x_ptr: "*fp32", y_ptr: "*fp32", out_ptr: "*fp32", n: i32}   # the runtime arguments
        constexprs: {BLOCK: 1024}                    # every tl.constexpr parameter's value
        divisible_by_16: [x_ptr, y_ptr, out_ptr]     # optional; default: every pointer
        equal_to_1: []                               # optional: integers Triton sees as 1 (then a constexpr)
        options: {num_warps: 4, num_stages: 3}       # optional; the rest at Triton's defaults
        specializations:                             # optional: one spec each, fields override the entry's
          - {constexprs: {BLOCK: 256}, options: {num_warps: 2}}

Each specialisation is one :class:`~aot.core.spec.TritonKernel` (named ``add`` alone, else ``add.0``, ``add.1``,
...). The builder fills in ``digest`` (:mod:`aot.runtime.adapters.triton_digest`), and the Triton build that
compiles it (``triton``, ``triton_build``: not part of the definition; each artifact's entry names its build).

Pure Python, no Triton import: the runtime reads manifests with it.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

from .fieldcheck import kernel_ref
from .spec import TritonKernel
from .text import MAX_LIST_LEN, SpecError, _text_problem, hint, short

#: The keys of a ``triton:`` matrix entry, and of one of its ``specializations``.
VARIANT_KEYS = ("signature", "constexprs", "divisible_by_16", "equal_to_1", "options")
MATRIX_KEYS = ("name", "kernel", *VARIANT_KEYS, "specializations")
#: The fields of a Triton kernel as a manifest stores it (``TritonKernel.definition()``).
DEFINITION_FIELDS = ("name", "kernel", *VARIANT_KEYS, "digest")
#: The launch options that change the code Triton compiles (``CUDAOptions``), their checks and Triton's defaults.
#: ``enable_fp_fusion`` defaults to ``TRITON_DEFAULT_FP_FUSION`` (on): the build writes the value it used.
OPTIONS: Mapping[str, tuple[str, Any]] = {"num_warps": ("pow2", 4), "num_stages": ("int", 3), "num_ctas": ("int", 1),
                                          "maxnreg": ("reg", None), "enable_fp_fusion": ("bool", True),
                                          "launch_cooperative_grid": ("bool", False), "launch_pdl": ("bool", False),
                                          "debug": ("bool", False)}
#: Element types Triton names (``*fp32`` is a pointer to them); a scalar argument is one aot can stand in for.
DTYPES = ("i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "fp8e4nv", "fp8e4b15", "fp8e5", "fp16",
          "bf16", "fp32", "fp64")
SCALARS = ("i1", "i32", "i64", "u64", "fp32")
_IDENT = re.compile(r"[A-Za-z_]\w{0,127}")
_HEX = re.compile(r"[0-9a-f]{64}")


def check_type(t: Any, fld: str) -> str:
    """``*fp32`` (a pointer to fp32) or a scalar type aot can stand in for (``i32``, ``i64``, ``u64``, ``fp32``,
    ``i1``)."""
    if isinstance(t, str) and t.startswith("*") and t[1:] in DTYPES:
        return t
    if isinstance(t, str) and t in SCALARS:
        return t
    raise SpecError(f"{short(t)} is not a Triton argument type: a pointer '*<dtype>' ({', '.join(DTYPES)}) or "
                    f"one of {', '.join(SCALARS)}", fld)


def check_signature(sig: Any) -> tuple[tuple[str, str], ...]:
    """The runtime arguments' types, ``{name: type}`` (a manifest: ``[[name, type], ...]``), in the order given."""
    pairs = list(sig.items()) if isinstance(sig, dict) else sig
    if not isinstance(pairs, list) or len(pairs) > MAX_LIST_LEN or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs):
        raise SpecError("signature must map each runtime argument's name to its type ('*fp32', 'i32', ...)",
                        "signature")
    out = []
    for name, t in pairs:
        if not isinstance(name, str) or not _IDENT.fullmatch(name):
            raise SpecError(f"{short(name)} is not an argument name", "signature")
        out.append((name, check_type(t, f"signature.{name}")))
    if len({n for n, _ in out}) != len(out):
        raise SpecError("signature names an argument twice", "signature")
    return tuple(out)


def check_value(v: Any, fld: str) -> Any:
    """A constexpr value: None, a bool, an int, a finite float or a short string (what a launch passes)."""
    if v is None or isinstance(v, (bool, int)) and abs(v) < 2 ** 64:
        return v
    if isinstance(v, float) and math.isfinite(v):
        return v
    if isinstance(v, str) and not _text_problem(v, 256):
        return v
    raise SpecError(f"{short(v)} is not a constexpr value aot can key (null, a bool, an integer, a finite number "
                    f"or a short string)", fld)


def check_constexprs(d: Any) -> tuple[tuple[str, Any], ...]:
    pairs = list(d.items()) if isinstance(d, dict) else d
    if pairs is None:
        return ()
    if not isinstance(pairs, list) or len(pairs) > MAX_LIST_LEN or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs):
        raise SpecError("constexprs must map each tl.constexpr parameter to its value", "constexprs")
    out = []
    for name, v in pairs:
        if not isinstance(name, str) or not _IDENT.fullmatch(name):
            raise SpecError(f"{short(name)} is not a parameter name", "constexprs")
        out.append((name, check_value(v, f"constexprs.{name}")))
    if len({n for n, _ in out}) != len(out):
        raise SpecError("constexprs names a parameter twice", "constexprs")
    return tuple(out)


def check_names(v: Any, fld: str, signature: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """A list of runtime argument names (``divisible_by_16``, ``equal_to_1``), each in the signature."""
    if not isinstance(v, list) or len(v) > MAX_LIST_LEN:
        raise SpecError(f"{fld} must list runtime argument names", fld)
    names = {n for n, _ in signature}
    for n in v:
        if not isinstance(n, str) or n not in names:
            near = hint(n, names) if isinstance(n, str) else ""
            raise SpecError(f"{short(n)} is not an argument of the signature{near}", fld)
    if len(set(v)) != len(v):
        raise SpecError(f"{fld} names an argument twice", fld)
    return tuple(v)


def check_options(options: Any) -> dict[str, Any]:
    """The code-changing launch options, every one spelled out (Triton's defaults filled in): equal options key
    equally."""
    options = {} if options is None else options
    if not isinstance(options, dict):
        raise SpecError(f"options must be a mapping of {', '.join(OPTIONS)}", "options")
    for key in options:
        if key not in OPTIONS:
            raise SpecError(f"unknown Triton option {short(key)}{hint(key, OPTIONS)}; allowed: {', '.join(OPTIONS)}",
                            f"options.{str(key)[:64]}")
    out: dict[str, Any] = {}
    for key, (kind, default) in OPTIONS.items():
        v = options.get(key, default)
        if kind == "bool" and not isinstance(v, bool):
            raise SpecError(f"must be true or false, got {short(v)}", f"options.{key}")
        if kind != "bool" and v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise SpecError(f"must be an integer, got {short(v)}", f"options.{key}")
        if kind == "pow2" and not (1 <= v <= 64 and v & (v - 1) == 0):
            raise SpecError(f"must be a power of 2 from 1 to 64, got {v}", f"options.{key}")
        if kind == "int" and not 1 <= v <= 64:
            raise SpecError(f"must be an integer in 1..64, got {v}", f"options.{key}")
        if kind == "reg" and v is not None and not 1 <= v <= 255:
            raise SpecError(f"must be an integer in 1..255 (or absent), got {v}", f"options.{key}")
        out[key] = v
    return out


def check_variant(d: Mapping[str, Any]) -> dict[str, Any]:
    """One specialisation's fields, checked (``divisible_by_16`` absent: ``None``, every pointer)."""
    sig = check_signature(d.get("signature", {}))
    div = d.get("divisible_by_16")
    return {"signature": sig, "constexprs": check_constexprs(d.get("constexprs")),
            "divisible_by_16": None if div is None else check_names(div, "divisible_by_16", sig),
            "equal_to_1": check_names(d.get("equal_to_1", []), "equal_to_1", sig),
            "options": check_options(d.get("options"))}


def check_entry(d: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """A ``triton:`` entry's kernel reference and its specialisations' checked fields, in the order written."""
    for key in d:
        if key not in MATRIX_KEYS:
            raise SpecError(f"unknown field{hint(key, MATRIX_KEYS)}; allowed: {', '.join(MATRIX_KEYS)}", str(key))
    ref = kernel_ref(d.get("kernel"))
    if "signature" not in d and "specializations" not in d:
        raise SpecError("missing required field: the kernel's runtime arguments and their types", "signature")
    base = {k: d[k] for k in VARIANT_KEYS if k in d}
    variants = d.get("specializations")
    if variants is None:
        return ref, [check_variant(base)]
    if not isinstance(variants, list) or not variants or len(variants) > MAX_LIST_LEN:
        raise SpecError(f"specializations must list 1 to {MAX_LIST_LEN} mappings of {', '.join(VARIANT_KEYS)}",
                        "specializations")
    out = []
    for i, v in enumerate(variants):
        if not isinstance(v, dict):
            raise SpecError("each specialization is a mapping", f"specializations[{i}]")
        for key in v:
            if key not in VARIANT_KEYS:
                raise SpecError(f"unknown field{hint(key, VARIANT_KEYS)}; allowed: {', '.join(VARIANT_KEYS)}",
                                f"specializations[{i}].{str(key)[:64]}")
        merged = {**base, **v}
        if isinstance(base.get("options"), dict) and isinstance(v.get("options"), dict):
            merged["options"] = {**base["options"], **v["options"]}
        try:
            out.append(check_variant(merged))
        except SpecError as e:
            raise SpecError(str(e), f"specializations[{i}].{e.field}") from None
    return ref, out


def check_triton(d: Mapping[str, Any], name: str) -> TritonKernel:
    """The Triton kernel a manifest definition describes (``name``: its checked name), every field checked."""
    for key in d:
        if key not in DEFINITION_FIELDS:
            raise SpecError(f"unknown field for a Triton kernel{hint(key, DEFINITION_FIELDS)}", str(key))
    if not (isinstance(d.get("digest"), str) and _HEX.fullmatch(d["digest"])):
        raise SpecError("digest must be a sha256 (64 hex digits)", "digest")
    v = check_variant(d)
    if v["divisible_by_16"] is None:
        raise SpecError("a definition lists divisible_by_16", "divisible_by_16")
    return TritonKernel(name=name, kernel=kernel_ref(d.get("kernel")), signature=v["signature"],
                        constexprs=v["constexprs"], divisible_by_16=v["divisible_by_16"], equal_to_1=v["equal_to_1"],
                        options=v["options"], digest=d["digest"])


def variant_names(name: str, count: int) -> list[str]:
    """The spec names of an entry's specialisations: ``name`` for one, else ``name.0``, ``name.1``, ..."""
    return [name] if count == 1 else [f"{name}.{i}" for i in range(count)]

