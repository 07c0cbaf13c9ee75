"""Frozen spec dataclasses (a CCCL algorithm spec, an NVRTC unit) and their content keys.

The tables here are the single description of what a spec may say: :mod:`aot.matrix` validates
against them, :mod:`aot.compile` builds from them, :mod:`aot.reference` checks them on a GPU. They are
plain data (no CUDA imports) so the runtime loader can read specs back from a manifest cheaply.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import math
import re
import reprlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Union

#: Bumped whenever what a build produces from an unchanged spec changes (a patch, a recipe tweak):
#: it is part of every content key, so such a change invalidates incremental builds and user caches.
RECIPE_VERSION = 2  # 2: internal symbol names normalized

from ..algorithms import ALGORITHMS, BUILTIN_OPS, DTYPES, REQUIRED, SORT_ORDERS, is_dtype_field  # noqa: E402,F401

#: Kept for callers of the old tables: every algorithm's dtype fields.
DTYPE_FIELDS = tuple(sorted({f for a in ALGORITHMS.values() for f in a.fields if is_dtype_field(f)}))

#: cuda.core ``ProgramOptions`` fields a unit may set (a subset that cannot break reproducibility).
NVRTC_OPTIONS = ("std", "use_fast_math", "define_macro", "lineinfo", "ftz", "prec_div", "prec_sqrt",
                 "fma", "max_register_count", "device_code_optimize", "debug", "restrict")


_SAFE_NODES = ("Expression", "Lambda", "arguments", "arg", "Name", "Load", "Constant", "BinOp", "UnaryOp",
               "Compare", "BoolOp", "IfExp", "Add", "Sub", "Mult", "Div", "FloorDiv", "Mod", "Pow", "BitAnd",
               "BitOr", "BitXor", "LShift", "RShift", "USub", "UAdd", "Not", "Invert", "Eq", "NotEq", "Lt",
               "LtE", "Gt", "GtE", "And", "Or")

# Bounds on what a spec field may hold. Specs come from matrices and from manifests on disk (which the
# loader reads in the host application), so every bound is checked before anything costly (a parse, a
# repr, a file read) happens. Each is far above what a real spec needs.
#: Longest operator lambda (the default matrix's longest is 16 characters).
MAX_LAMBDA_LEN = 1000
#: Most operators, brackets and keywords in one lambda: bounds its parse time and nesting depth, counted
#: on the text before it is parsed (a 1000-character hostile lambda otherwise costs milliseconds to parse).
MAX_LAMBDA_TOKENS = 32
#: Deepest parsed lambda expression (checked again after the parse).
MAX_LAMBDA_DEPTH = 32
#: Longest spec name (names become file names: a file system allows 255 bytes).
MAX_NAME_LEN = 128
#: Longest other text field (a source path, a kernel name, an NVRTC option value).
MAX_TEXT_LEN = 4096
#: Most entries in a list or mapping field (kernels, define_macro).
MAX_LIST_LEN = 256
#: Largest NVRTC source file.
MAX_SOURCE_LEN = 4 * 1024 * 1024
#: Most specs in one matrix or manifest (the default matrix has 22). With the lambda bounds above, this
#: bounds what validating a hostile manifest can cost (measured: well under a second for 1024 lambdas
#: at the operator limit, on a loaded 2-core machine).
MAX_SPECS = 1024

#: Most fields of a struct type (``types:``).
MAX_STRUCT_FIELDS = 64
#: Most header files, and their total size, an NVRTC unit's include_dirs may bring into its definition.
MAX_HEADERS, MAX_HEADERS_LEN = 256, 4 * 1024 * 1024

INIT_WORDS = ("inf", "-inf", "min", "max")
_OPERATOR_CHARS = str.maketrans("", "", "-+*/%<>=!&|^~@([{:,")
_KEYWORD = re.compile(r"\b(?:not|and|or|if|else|lambda|is|in)\b")


class SpecError(ValueError):
    """A spec that does not validate; ``field`` names the field at fault (``None``: the spec as a whole).

    Raised by the one validator both the matrix (:mod:`aot.matrix`) and manifests (:mod:`aot.manifest`)
    use; each caller adds where the spec came from (file and line, or manifest file)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class _ShortRepr(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple = 2, 4, 4, 4
        self.maxstring, self.maxother, self.maxlong = 60, 60, 40

    def repr_int(self, x: int, level: int) -> str:  # repr() of an int over 4300 digits raises
        return super().repr_int(x, level) if x.bit_length() < 128 else f"<a {x.bit_length()}-bit integer>"

    def repr_str(self, x: str, level: int) -> str:
        return super().repr_str(x[:self.maxstring + 1], level)


_REPR = _ShortRepr()


def short(value: Any) -> str:
    """A bounded repr for error messages: input is never repr'd whole (a YAML alias bomb or a 16 MiB
    string would take minutes and gigabytes), and a repr that cannot be made does not raise."""
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - an error message must not fail
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def hint(value: Any, choices: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for a near miss, else ``""`` (only short strings are compared)."""
    if not isinstance(value, str) or len(value) > 64:
        return ""
    close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _text_problem(value: str, limit: int) -> str | None:
    if len(value) > limit:
        return f"is {len(value)} characters, over the {limit}-character limit"
    if "\0" in value:
        return "holds a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate (not encodable as UTF-8)"
    return None


@functools.lru_cache(maxsize=1024)
def _lambda_check(source: str) -> tuple[int, str | None]:
    """(number of arguments, problem or ``None``) for a lambda source: parsed once per distinct text.

    Bounded before the parse (length, then operators and brackets counted by a regular expression), so
    a hostile manifest cannot make the loader spend seconds or gigabytes in ``ast.parse``; anything the
    parser still refuses (nesting, memory) is a problem, not an exception.
    """
    import ast
    problem = _text_problem(source, MAX_LAMBDA_LEN)
    if problem:
        return 0, f"the lambda {problem}"
    tokens = len(source) - len(source.translate(_OPERATOR_CHARS))  # C speed: no parse, no regex
    if tokens <= MAX_LAMBDA_TOKENS:
        tokens += len(_KEYWORD.findall(source))
    if tokens > MAX_LAMBDA_TOKENS:
        return 0, f"the lambda has {tokens} operators, brackets and keywords, over the limit of {MAX_LAMBDA_TOKENS}"
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as e:
        return 0, f"lambda does not parse: {e.msg}"
    except (RecursionError, MemoryError, ValueError) as e:
        return 0, f"lambda does not parse: {type(e).__name__}"
    if not isinstance(tree.body, ast.Lambda):
        return 0, "the operator source must be a single lambda expression"
    args = tree.body.args
    if args.defaults or args.kw_defaults or args.kwonlyargs or args.vararg or args.kwarg or args.posonlyargs:
        return 0, "lambda parameters must be plain positional names (no defaults, *args, **kwargs or keyword-only)"
    names = [a.arg for a in args.args]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        return 0, f"lambda names the argument {dup!r} twice"
    params = set(names)
    level: list[ast.AST] = [tree]
    for _ in range(MAX_LAMBDA_DEPTH):  # breadth first, one level at a time: no recursion, bounded depth
        below: list[ast.AST] = []
        for node in level:
            kind = type(node).__name__
            if kind not in _SAFE_NODES:
                return 0, f"lambda uses {kind}; only arithmetic, comparisons and boolean logic are allowed"
            if isinstance(node, ast.Name) and node.id not in params:
                return 0, f"lambda refers to {node.id!r}; only its own arguments and numeric constants are allowed"
            if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, bool)):
                return 0, f"lambda uses the constant {short(node.value)}; only numbers are allowed"
            below.extend(ast.iter_child_nodes(node))
        if not below:
            return len(names), None
        level = below
    return 0, f"the lambda nests deeper than {MAX_LAMBDA_DEPTH} levels"


def lambda_problem(source: str) -> str | None:
    """Why ``source`` is not an acceptable operator lambda, or ``None``.

    Operator lambdas are evaluated (to hand numba a function) when a spec is built, including on an end
    user's machine when the loader falls back to JIT from a manifest. Only arithmetic, comparisons and
    boolean logic over the lambda's own (distinct) arguments and numeric constants are allowed: no names,
    calls, attributes or subscripts, so evaluating one cannot run anything else. Length and nesting are
    bounded before the text is parsed.
    """
    if not isinstance(source, str):
        return "the lambda source is not a string"
    problem = _text_problem(source, MAX_LAMBDA_LEN)  # before the cache: it never holds a long text
    return f"the lambda {problem}" if problem else _lambda_check(source)[1]


def code_ref_problem(op: str) -> str | None:
    """Why ``op`` is not an operator-from-code reference ``"pkg.module:function"``, or ``None``."""
    mod, sep, func = op.partition(":")
    if (not sep or len(op) > 256 or not func.isidentifier() or not mod
            or not all(p.isidentifier() for p in mod.split("."))):
        return f"{short(op)} is not a 'package.module:function' reference"
    return None


def is_code_ref(op: Any) -> bool:
    """Whether an operator names a function in code (``"pkg.mod:func"``) rather than a built-in or lambda."""
    return isinstance(op, str) and ":" in op and not op.lstrip().startswith("lambda")


def check_op(value: Any, role: str, arity: int, fld: str = "op") -> str:
    """A built-in operator name, an acceptable lambda taking ``arity`` arguments (stripped), or an operator
    from code's reference (its shape: the caller resolves it), else :class:`SpecError` on ``fld``. ``role``
    names what the operator is for, for messages."""
    if not isinstance(value, str):
        raise SpecError(f"the {role} must be a built-in operator name or a 'lambda ...' source", fld)
    problem = _text_problem(value, MAX_LAMBDA_LEN)
    if problem:
        raise SpecError(f"the {role} {problem}", fld)
    value = value.strip()
    if value.startswith("lambda"):
        n_args, problem = _lambda_check(value)
        if problem:
            raise SpecError(problem, fld)
        if n_args != arity:
            raise SpecError(f"the {role} lambda takes {n_args} argument(s); this algorithm calls it with "
                            f"{arity}", fld)
        return value
    if is_code_ref(value):
        problem = code_ref_problem(value)
        if problem:
            raise SpecError(problem, fld)
        return value
    if value not in BUILTIN_OPS:
        raise SpecError(f"unknown operator {short(value)}{hint(value, BUILTIN_OPS)}; built-ins: "
                        f"{', '.join(BUILTIN_OPS)}, a 'lambda x: ...' source or a 'package.module:function'", fld)
    return value


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


def check_name(name: Any) -> str:
    """A spec name: non-empty, at most :data:`MAX_NAME_LEN` letters, digits, ``_``, ``-``, ``.``."""
    if not isinstance(name, str) or not name.strip():
        raise SpecError("a spec needs a non-empty string 'name'", "name")
    if len(name) > MAX_NAME_LEN:
        raise SpecError(f"the name is {len(name)} characters, over the {MAX_NAME_LEN}-character limit", "name")
    if not all(c.isalnum() or c in "_-." for c in name) or name.startswith("."):
        raise SpecError("names may use letters, digits, '_', '-', '.' only", "name")
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


def check_cccl(d: Mapping[str, Any], types: Mapping[str, tuple[tuple[str, str], ...]] | None = None,
               digest: Callable[[str], str] | None = None) -> CcclSpec:
    """The CCCL spec a mapping (a matrix entry, a manifest definition) describes, every field checked
    and defaults filled in; else :class:`SpecError` naming the first field at fault.

    A matrix entry comes with the matrix's ``types`` and a ``digest`` that hashes an operator from code's
    source (importing its module: the matrix is the user's own file). A manifest definition (both
    ``None``) carries its own ``types`` and ``code`` digests, checked here and never imported."""
    name = check_name(d.get("name"))
    algo = d.get("algorithm")
    if algo is None:
        raise SpecError("missing required field", "algorithm")
    if not isinstance(algo, str) or algo not in ALGORITHMS:
        raise SpecError(f"unknown algorithm {short(algo)}{hint(algo, ALGORITHMS)}; known: "
                        f"{', '.join(ALGORITHMS)}", "algorithm")
    adef = ALGORITHMS[algo]
    from_manifest = types is None and digest is None
    allowed = ("name", "algorithm", *adef.fields, *adef.optional) + (("types", "code") if from_manifest else ())
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
        elif fld in slots:
            value = check_op(value, slots[fld].role, slots[fld].arity, fld)
            if is_code_ref(value):
                if digest is not None:
                    code[value] = digest(value)
                elif _is_digest(recorded.get(value)):
                    code[value] = recorded[value]
                else:
                    raise SpecError(f"operator {short(value)} has no recorded source digest", "code")
        elif fld in adef.choices:
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
    return CcclSpec(name=name, algorithm=algo, params=params, types=used_types, code=code)


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
    for key in d:
        if key not in NVRTC_DEFINITION_FIELDS:
            raise SpecError(f"unknown field for an NVRTC unit{hint(key, NVRTC_DEFINITION_FIELDS)}", str(key))
    for key in ("source_path", "source"):
        value = d.get(key)
        if not isinstance(value, str) or (key == "source_path" and (not value or _text_problem(value, MAX_TEXT_LEN))):
            raise SpecError(f"an NVRTC unit needs a string {key}", key)
    return check_nvrtc(d, d["source"], d.get("headers"))
