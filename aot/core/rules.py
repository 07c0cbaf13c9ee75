"""The one spec validator: what a spec may say, checked field by field, for the matrix being built
(:mod:`aot.build.matrix`) and for manifests read at run time (:mod:`aot.core.manifest`) alike.

The field tables come from :mod:`aot.algorithms`; the bounds from :mod:`aot.core.text`; operators are
checked by :mod:`aot.core.oplang`. A failure is a :class:`~aot.core.text.SpecError` naming the field.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping

from ..algorithms import DTYPES, REQUIRED, is_dtype_field
from ..algorithms.forms import is_cpp
from .formrules import check_node, check_sources, check_state, check_stateful_op, state_names
from .oplang import check_op, is_code_ref
from .spec import CcclSpec, NvrtcUnit, Spec
from .text import (MAX_HEADERS, MAX_HEADERS_LEN, MAX_LIST_LEN, MAX_NAME_LEN, MAX_SOURCE_LEN, MAX_STRUCT_FIELDS,
                   MAX_TEXT_LEN, SpecError, _text_problem, hint, short)


#: cuda.core ``ProgramOptions`` fields a unit may set (a subset that cannot break reproducibility).
NVRTC_OPTIONS = ("std", "use_fast_math", "define_macro", "lineinfo", "ftz", "prec_div", "prec_sqrt",
                 "fma", "max_register_count", "device_code_optimize", "debug", "restrict")


INIT_WORDS = ("inf", "-inf", "min", "max")


#: numpy.finfo(dtype).max, written out (float16 included for completeness of the table).
_FLOAT_MAX = {"float16": 65504.0, "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}


def _int_range(dtype: str) -> tuple[int, int]:
    """numpy.iinfo(dtype).min/max for 'int8'..'uint64' without importing numpy."""
    bits = int(dtype.lstrip("uint"))
    return (0, 2 ** bits - 1) if dtype.startswith("u") else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def check_init(value: Any, dtype: str, types: Mapping[str, Any] | None = None) -> Any:
    """An init value (normalized: YAML ``.inf`` -> ``'inf'``, ``'1e3'`` -> ``1000.0``) that is finite or one
    of :data:`INIT_WORDS` and representable in ``dtype`` (no silent wrap-around or truncation); for a
    struct type, a list of such values, one per field.

    Pure Python (no numpy): the loader runs this on every manifest spec, and reading a manifest must stay
    cheap and dependency-free."""
    if types and dtype in types:
        fields = types[dtype]
        if not isinstance(value, list) or len(value) != len(fields):
            raise SpecError(f"init of struct {dtype!r} must list {len(fields)} values, one per field "
                            f"({', '.join(f for f, _ in fields)})", "init")
        return [check_init(v, t) for v, (_, t) in zip(value, fields, strict=True)]
    if isinstance(value, float) and value != value:
        raise SpecError("init is NaN; use a number or 'inf', '-inf', 'min', 'max'", "init")
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        value = "inf" if value > 0 else "-inf"  # YAML .inf: stored as the portable string
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SpecError(f"init must be a number (or 'inf', '-inf', 'min', 'max'), got {short(value)}", "init")
    if isinstance(value, str) and value not in INIT_WORDS:
        try:  # YAML 1.1 reads '1e3' as a string
            number = float(value) if len(value) <= 64 else math.nan
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            raise SpecError(f"init must be a number or one of 'inf', '-inf', 'min', 'max', got {short(value)}",
                            "init")
        value = number
    if isinstance(value, str):
        if "inf" in value and not dtype.startswith("float"):
            raise SpecError(f"init {value!r} needs a float dtype, not {dtype}", "init")
        return value
    if dtype.startswith("float"):
        try:
            fits = abs(float(value)) <= _FLOAT_MAX[dtype]
        except OverflowError:  # an int too large for any float
            fits = False
        if not fits:
            raise SpecError(f"init {short(value)} is outside {dtype}'s range", "init")
        return value
    lo, hi = _int_range(dtype)
    if isinstance(value, float) and not value.is_integer():
        raise SpecError(f"init {short(value)} is not a whole number, but dtype is {dtype}", "init")
    if not lo <= int(value) <= hi:
        raise SpecError(f"init {short(value)} is outside {dtype}'s range [{lo}, {hi}]", "init")
    return value


#: A spec name's characters: letters, digits, ``_``, ``-``, ``.`` (``\w`` is ``str.isalnum()`` or ``_``).
_NAME = re.compile(r"[\w.-]+")


def check_name(name: Any) -> str:
    """A spec name: non-empty, at most :data:`MAX_NAME_LEN` letters, digits, ``_``, ``-``, ``.``."""
    if not isinstance(name, str) or not name.strip():
        raise SpecError("a spec needs a non-empty string 'name'", "name")
    if len(name) > MAX_NAME_LEN:
        raise SpecError(f"the name is {len(name)} characters, over the {MAX_NAME_LEN}-character limit", "name")
    if _NAME.fullmatch(name) is None or name.startswith("."):
        from .nvsource import suggest_name  # an error path: the runtime's import closure stays as pinned
        raise SpecError(f"names may use letters, digits, '_', '-', '.' only (try {suggest_name(name)!r})", "name")
    return name


def check_types(types: Any) -> dict[str, tuple[tuple[str, str], ...]]:
    """Struct types as a definition stores them (``{name: [[field, scalar dtype], ...]}``), checked."""
    if not isinstance(types, dict) or len(types) > MAX_LIST_LEN:
        raise SpecError("types must be a mapping of struct names to field lists", "types")
    out: dict[str, tuple[tuple[str, str], ...]] = {}
    for tname, fields in types.items():
        fld = f"types.{str(tname)[:64]}"
        if not isinstance(tname, str) or len(tname) > 64 or not tname.isidentifier() or tname in DTYPES:
            raise SpecError(f"struct type name {short(tname)} must be an identifier that is not a scalar dtype", fld)
        if not isinstance(fields, (list, tuple)) or not 1 <= len(fields) <= MAX_STRUCT_FIELDS:
            raise SpecError(f"a struct type has 1 to {MAX_STRUCT_FIELDS} fields", fld)
        seen: set[str] = set()
        for f in fields:
            if (not isinstance(f, (list, tuple)) or len(f) != 2 or not isinstance(f[0], str) or len(f[0]) > 64
                    or not f[0].isidentifier() or f[1] not in DTYPES or f[0] in seen):
                raise SpecError(f"each field must be a distinct [name, scalar dtype], got {short(f)}", fld)
            seen.add(f[0])
        out[tname] = tuple((str(f[0]), str(f[1])) for f in fields)
    return out


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _missing(field: str, d: Mapping[str, Any], message: str) -> SpecError:
    """A required ``field`` is absent: a key of ``d`` that is a near miss of it (``algoritm:``) is named, with
    the "did you mean" unknown keys get (checked only once the algorithm is known)."""
    near = next((k for k in d if isinstance(k, str) and hint(k, (field,))), None)
    return SpecError(message + (f"; {short(near)} is not a field{hint(near, (field,))}" if near else ""), field)


def check_cccl(d: Mapping[str, Any], types: Mapping[str, tuple[tuple[str, str], ...]] | None = None,
               digest: Callable[[str], str] | None = None, read_cpp: Callable[[str], str] | None = None) -> CcclSpec:
    """The CCCL spec a mapping (a matrix entry, a manifest definition) describes, every field checked
    and defaults filled in; else :class:`SpecError` naming the first field at fault.

    A matrix entry comes with the matrix's ``types``, a ``digest`` that hashes an operator from code's
    source (importing its module: the matrix is the user's own file) and ``read_cpp`` that reads a C++
    operator's source next to the matrix. A manifest definition (all ``None``) carries its own ``types``,
    ``code`` digests and C++ ``sources``, checked here and never imported.

    Every algorithm also takes ``state`` (:func:`aot.core.formrules.check_state`), and its sequence fields
    (``adef.seqs``) take iterator nodes (:func:`aot.core.formrules.check_node`)."""
    if "name" not in d:
        raise _missing("name", d, "a spec needs a non-empty string 'name'")
    name = check_name(d.get("name"))
    algo = d.get("algorithm")
    if algo is None:
        raise _missing("algorithm", d, "missing required field")
    from ..algorithms import ALGORITHMS as table  # the nine algorithm modules: only for a CCCL spec (issue 42)
    if not isinstance(algo, str) or algo not in table:
        raise SpecError(f"unknown algorithm {short(algo)}{hint(algo, table)}; known: "
                        f"{', '.join(table)}", "algorithm")
    adef = table[algo]
    from_manifest = types is None and digest is None
    from_manifest = from_manifest and read_cpp is None
    allowed = ("name", "algorithm", *adef.fields, *adef.optional, "state") + \
        (("types", "code", "sources") if from_manifest else ())
    for key in d:
        if key not in allowed:
            raise SpecError(f"unknown field for {algo}{hint(key, allowed)}; allowed: {', '.join(allowed)}",
                            str(key))
    recorded: dict[str, str] = {}
    if from_manifest:
        types = check_types(d.get("types", {}))
        recorded = d.get("code", {})
        if not isinstance(recorded, dict) or len(recorded) > MAX_LIST_LEN:
            raise SpecError("code must map operator references to source digests", "code")
    types = types or {}
    state = check_state(d["state"]) if "state" in d else None
    arrays, scalars = state_names(state)
    seqs = {s.field: s for s in adef.seqs}
    cpp_paths: set[str] = set()
    slots = {s.field: s for s in adef.ops}
    params: dict[str, Any] = {}
    used_types: dict[str, tuple[tuple[str, str], ...]] = {}
    code: dict[str, str] = {}
    for fld, default in {**adef.fields, **adef.optional}.items():
        if fld not in d:
            if default is REQUIRED:
                raise SpecError(f"missing required field for {algo}", fld)
            if fld in adef.fields:
                params[fld] = default
            continue
        value = d[fld]
        if is_dtype_field(fld):
            if value is None and default is None:
                pass
            elif isinstance(value, str) and value in types:
                if fld not in adef.struct_fields:
                    raise SpecError(f"{algo} takes a scalar {fld}, not the struct {value!r}; structs are accepted "
                                    f"in: {', '.join(adef.struct_fields) or 'no field'}", fld)
                used_types[value] = types[value]
            elif not (isinstance(value, str) and value in DTYPES):
                known = [*DTYPES, *types]
                raise SpecError(f"unknown dtype {short(value)}{hint(value, known)}; known: {', '.join(known)}", fld)
            elif fld in adef.choices and value not in adef.choices[fld]:
                raise SpecError(f"{algo} takes a {fld} of {', '.join(adef.choices[fld])}, not {value!r}", fld)
        elif fld in seqs:
            dt = d.get(seqs[fld].dtype_field) or d.get(seqs[fld].dtype_default)
            if not isinstance(dt, str) or not (dt in DTYPES or dt in types):
                continue  # the dtype field reports its own problem
            value = check_node(value, dt, types, fld, output=seqs[fld].output, arrays=arrays)
            for op in _node_ops(value):
                check_stateful_op(op, fld, state)
                _note_code(op, fld, digest, recorded, code)
        elif fld in slots:
            value = check_op(value, slots[fld].role, slots[fld].arity, fld, arrays, scalars if is_cpp(value) else ())
            check_stateful_op(value, fld, state)
            if is_cpp(value):
                cpp_paths.add(value["cpp"])
            _note_code(value, fld, digest, recorded, code)
        elif fld in adef.choices:
            if isinstance(value, str) and value in adef.refused.get(fld, {}):
                raise SpecError(f"{fld} {value!r} is refused: {adef.refused[fld][value]}", fld)
            if not (isinstance(value, str) and value in adef.choices[fld]):
                raise SpecError(f"unknown {fld} {short(value)}{hint(value, adef.choices[fld])}; one of: "
                                f"{', '.join(adef.choices[fld])}", fld)
        elif fld in adef.int_ranges:
            lo, hi = adef.int_ranges[fld]
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise SpecError(f"{fld} must be an integer in [{lo}, {hi}], got {short(value)}", fld)
        if fld in adef.optional and value == default:
            continue  # an optional field at its default is not recorded (content keys stay as they were)
        params[fld] = value
    if "init" in params:
        params["init"] = check_init(params["init"], params["dtype"], types)
    sources = check_sources(d.get("sources"), cpp_paths, read_cpp) if cpp_paths or "sources" in d else {}
    if state is not None:
        params["state"] = state
    return CcclSpec(name=name, algorithm=algo, params=params, types=used_types, code=code, sources=sources)


def _node_ops(node: Any) -> list[Any]:
    """The operators of a checked iterator node (its transforms)."""
    if isinstance(node, str):
        return []
    ops = [node["transform"]] if "transform" in node else []
    for key, sub in node.items():
        if key in ("over", "permutation", "indices", "cache_modified", "reverse"):
            ops += _node_ops(sub)
        elif key == "zip":
            for m in sub:
                ops += _node_ops(m)
    return ops


def _note_code(op: Any, fld: str, digest: Callable[[str], str] | None, recorded: Mapping[str, Any],
               code: dict[str, str]) -> None:
    """Record the source digest of an operator from code, in an operator field or inside an iterator."""
    if not is_code_ref(op):
        return
    if digest is not None:
        code[op] = digest(op)
    elif _is_digest(recorded.get(op)):
        code[op] = recorded[op]
    else:
        raise SpecError(f"operator {short(op)} has no recorded source digest", "code")


def _check_option(key: str, value: Any) -> Any:
    fld = f"options.{key}"
    if key in ("std",):
        if not isinstance(value, str) or _text_problem(value, 64):
            raise SpecError(f"must be a short string, got {short(value)}", fld)
    elif key == "max_register_count":
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 255:
            raise SpecError(f"must be an integer in 1..255, got {short(value)}", fld)
    elif key == "define_macro":
        _check_macros(value, fld)
    elif not isinstance(value, bool):
        raise SpecError(f"must be true or false, got {short(value)}", fld)
    return value


def _check_macros(value: Any, fld: str) -> None:
    """``NAME[=VALUE]``, a list of those, or a mapping name -> number or string: what ProgramOptions
    renders (a list of ``[name, value]`` lists would pass here and fail the build, so it is refused)."""
    if isinstance(value, (list, dict)) and len(value) > MAX_LIST_LEN:
        raise SpecError(f"holds {len(value)} entries, over the limit of {MAX_LIST_LEN}", fld)
    numbers: list[Any] = []
    if isinstance(value, str):
        texts = [value]
    elif isinstance(value, list):
        texts = value
    elif isinstance(value, dict):
        texts = list(value) + [v for v in value.values() if isinstance(v, str)]
        numbers = [v for v in value.values() if not isinstance(v, str)]
    else:
        raise SpecError(f"must be 'NAME=VALUE', a list of those or a mapping, got {short(value)}", fld)
    for item in texts:
        problem = _text_problem(item, MAX_TEXT_LEN) if isinstance(item, str) else "is not a string"
        if problem:
            raise SpecError(f"a macro {short(item)} {problem}", fld)
    for item in numbers:
        if isinstance(item, bool) or not isinstance(item, (int, float)) or abs(item) >= 2 ** 64 \
                or (isinstance(item, float) and not math.isfinite(item)):
            raise SpecError(f"a macro value must be a string or a number, got {short(item)}", fld)


_KERNEL_EXPR = re.compile(r"[A-Za-z_]\w*(::[A-Za-z_]\w*)*(<[\w\s:<>,*&().+-]*>)?")


def header_path_ok(rel: Any) -> bool:
    """A header's recorded path: relative, no ``..``, no empty parts (it is written under a private
    directory at JIT time, so it must not point outside it)."""
    if not isinstance(rel, str) or _text_problem(rel, 1024):
        return False
    return not rel.startswith("/") and "\\" not in rel and all(p not in ("", ".", "..") for p in rel.split("/"))


def check_headers(headers: Any) -> dict[str, str]:
    """An NVRTC unit's headers (relative path -> text), bounded in number and size."""
    if not isinstance(headers, dict) or len(headers) > MAX_HEADERS:
        raise SpecError(f"headers must map at most {MAX_HEADERS} relative header paths to their text", "headers")
    total = 0
    for rel, text in headers.items():
        if not header_path_ok(rel) or not isinstance(text, str) or _text_problem(text, MAX_HEADERS_LEN):
            raise SpecError(f"header {short(rel)} is not a relative path (no '..') with UTF-8 text", "headers")
        total += len(text)
    if total > MAX_HEADERS_LEN:
        raise SpecError(f"headers hold {total} characters, over the limit of {MAX_HEADERS_LEN}", "headers")
    return dict(headers)


def check_nvrtc(d: Mapping[str, Any], source: str, headers: Mapping[str, str] | None = None) -> NvrtcUnit:
    """The NVRTC unit a mapping describes (``source`` is the file's text, ``d["source_path"]`` or, for a
    matrix entry, ``d["source"]`` where it came from; ``headers`` what its include_dirs hold); else
    :class:`SpecError` naming the field. Kernels are names or template name expressions
    (``"axpy<float>"``), whose template must appear in the source or a header."""
    name = check_name(d.get("name"))
    path = d.get("source_path", d.get("source"))
    if isinstance(path, str) and ".py" in path:  # a .py path: its text is Python, not CUDA C++
        from .nvsource import source_problem  # only then: the runtime's import closure stays as pinned
        problem = source_problem(path)
        if problem:
            raise SpecError(problem, "source")
    problem = _text_problem(source, MAX_SOURCE_LEN) if isinstance(source, str) else "is not a string"
    if problem:
        raise SpecError(f"the source text {problem}", "source")
    headers = check_headers(headers or {})
    kernels = d.get("kernels")
    if not isinstance(kernels, list) or not kernels or len(kernels) > MAX_LIST_LEN or \
            not all(isinstance(k, str) and k and not _text_problem(k, MAX_TEXT_LEN) for k in kernels):
        raise SpecError(f"kernels must be a non-empty list of at most {MAX_LIST_LEN} kernel names or name "
                        f"expressions ('axpy<float>')", "kernels")
    if len(set(kernels)) != len(kernels):
        raise SpecError("kernels lists a name twice", "kernels")
    for k in kernels:
        if not _KERNEL_EXPR.fullmatch(k) or k.count("<") != k.count(">"):
            raise SpecError(f"{short(k)} is neither a kernel name nor a template name expression like "
                            f"'axpy<float>'", "kernels")
        base = k.split("<", 1)[0].split("::")[-1]
        if base not in source and not any(base in h for h in headers.values()):
            raise SpecError(f"kernel {short(base)} does not appear in {str(path)[:200]}"
                            + (" or its include_dirs" if headers else ""), "kernels")
    options = d.get("options", {}) or {}
    if not isinstance(options, dict):
        raise SpecError("options must be a mapping of cuda.core ProgramOptions fields", "options")
    for key in options:
        if key not in NVRTC_OPTIONS:
            raise SpecError(f"unknown NVRTC option {short(key)}{hint(key, NVRTC_OPTIONS)}; allowed: "
                            f"{', '.join(NVRTC_OPTIONS)}", f"options.{str(key)[:64]}")
        _check_option(key, options[key])
    return NvrtcUnit(name=name, source_path=path, source=source, kernels=tuple(kernels),
                     options={k: options[k] for k in sorted(options)}, headers=headers)


#: The fields of an NVRTC unit as a manifest stores it (``definition()`` plus its source text).
NVRTC_DEFINITION_FIELDS = ("name", "source_path", "source", "kernels", "options", "headers")


def spec_from_definition(d: Any) -> Spec:
    """Rebuild a spec from the ``definition()`` a manifest stores (NVRTC: source stored alongside), through
    the very checks the matrix applies (:func:`check_cccl`, :func:`check_nvrtc`).

    Raises :class:`SpecError` (a ``ValueError``) naming the field, for anything the matrix would refuse.
    """
    if not isinstance(d, dict):
        raise SpecError(f"the definition is a {type(d).__name__}, not an object")
    if "algorithm" in d:
        return check_cccl(d)
    if "divisible_by_16" in d:  # the Triton family (its definitions name a kernel too: before numba's)
        from .tritonspec import check_triton  # only for a set that ships one
        return check_triton(d, check_name(d.get("name")))
    if "cupy" in d:  # the CuPy family
        from .cupyspec import check_cupy  # only for a set that ships one
        return check_cupy(d, check_name(d.get("name")))
    if "kernel" in d:  # the numba-cuda family
        from .numbaspec import check_numba  # only for a set that ships one: the runtime closure stays as pinned
        return check_numba(d, check_name(d.get("name")))
    for key in d:
        if key not in NVRTC_DEFINITION_FIELDS:
            raise SpecError(f"unknown field for an NVRTC unit{hint(key, NVRTC_DEFINITION_FIELDS)}", str(key))
    for key in ("source_path", "source"):
        value = d.get(key)
        if not isinstance(value, str) or (key == "source_path" and (not value or _text_problem(value, MAX_TEXT_LEN))):
            raise SpecError(f"an NVRTC unit needs a string {key}", key)
    return check_nvrtc(d, d["source"], d.get("headers"))
