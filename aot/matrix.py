"""Load and validate ``build_matrix.yaml`` into specs.

Every error names the file, the line, the spec and the field, with a "did you mean" where a near
miss is likely (``reduec``, ``flaot64``). Validation is complete before anything is built, so a bad
matrix never leaves a half-written output behind.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import yaml

from .errors import MatrixError
from .spec import (ALGORITHMS, BUILTIN_OPS, DTYPES, MAX_STRUCT_FIELDS, NVRTC_OPTIONS, REQUIRED, CcclSpec,
                   NvrtcUnit, Spec, code_ref_problem, is_code_ref, is_dtype_field, lambda_problem)

TOP_KEYS = ("version", "types", "cccl", "nvrtc")
NVRTC_KEYS = ("name", "source", "kernels", "options", "include_dirs")
#: Bounds on what an NVRTC unit's include directories may bring into its definition.
MAX_HEADERS, MAX_HEADER_BYTES = 256, 4 << 20
SUPPORTED_VERSIONS = (1,)


class _Map(dict):
    """A mapping that remembers the line of each key (1-based) and of itself."""

    line: int = 0
    key_lines: dict


class _Seq(list):
    line: int = 0


class _Loader(yaml.SafeLoader):
    pass


def _construct_map(loader: _Loader, node: yaml.MappingNode) -> _Map:
    m = _Map()
    m.line = node.start_mark.line + 1
    m.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) or key is None:
            raise MatrixError(f"{loader.name}:{key_node.start_mark.line + 1}: a mapping key must be a plain "
                              f"name, not {type(key).__name__}")
        if key in m:
            raise MatrixError(f"{loader.name}:{key_node.start_mark.line + 1}: duplicate key {key!r}")
        m[key] = loader.construct_object(value_node, deep=True)
        m.key_lines[key] = value_node.start_mark.line + 1
    return m


def _construct_seq(loader: _Loader, node: yaml.SequenceNode) -> _Seq:
    s = _Seq(loader.construct_object(n, deep=True) for n in node.value)
    s.line = node.start_mark.line + 1
    return s


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_map)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_seq)


def _hint(value: Any, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(value), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class Matrix:
    """A validated matrix: its file and its specs in file order."""

    path: Path
    specs: tuple[Spec, ...]

    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    def select(self, only: Iterable[str] | None) -> tuple[Spec, ...]:
        """The specs named in ``only`` (all when ``None``); an unknown name is an error with a hint."""
        if not only:
            return self.specs
        by_name = {s.name: s for s in self.specs}
        missing = [n for n in only if n not in by_name]
        if missing:
            n = missing[0]
            raise MatrixError(f"{self.path}: --only names unknown spec {n!r}{_hint(n, by_name)}")
        wanted = set(only)
        return tuple(s for s in self.specs if s.name in wanted)


def default_matrix_path() -> Path:
    """The bundled ``build_matrix.yaml``: inside an installed package it is ``aot/build_matrix.yaml``
    (the wheel build copies it there); in a source checkout it is the repository's top-level file."""
    packaged = Path(str(resources.files("aot"))) / "build_matrix.yaml"
    if packaged.is_file():
        return packaged
    return Path(__file__).resolve().parent.parent / "build_matrix.yaml"


def resolve_source(matrix_path: Path, src: str) -> Path:
    """A unit's ``source`` is relative to the matrix file, else to the ``aot`` package (where the bundled
    ``kernels/*.cu`` live), so one matrix text works from a checkout and from an installed package."""
    p = Path(src)
    if p.is_absolute():
        return p
    first = matrix_path.parent / p
    if first.exists():
        return first
    bundled = Path(__file__).resolve().parent / p
    return bundled if bundled.exists() else first


class _Ctx:
    """Formats errors as ``file:line: spec 'name': field 'f': message``."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, line: int, msg: str, spec: str | None = None, fld: str | None = None) -> MatrixError:
        where = f"{self.path}:{line}:"
        if spec is not None:
            where += f" spec {spec!r}:"
        if fld is not None:
            where += f" field {fld!r}:"
        return MatrixError(f"{where} {msg}")


def load_matrix(path: str | Path | None = None) -> Matrix:
    """Read and validate a matrix file (the bundled default when ``path`` is ``None``)."""
    p = Path(path) if path is not None else default_matrix_path()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise MatrixError(f"{p}: cannot read build matrix: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise MatrixError(f"{p}: the build matrix is not UTF-8 text ({e.reason} at byte {e.start})") from None
    return parse_matrix(text, p)


def parse_matrix(text: str, path: Path) -> Matrix:
    ctx = _Ctx(path)
    loader = _Loader(text)
    loader.name = str(path)
    try:
        doc = loader.get_single_data()
    except MatrixError:
        raise
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        raise ctx.fail(line, f"not valid YAML: {getattr(e, 'problem', e)}") from None
    finally:
        loader.dispose()
    if not isinstance(doc, _Map):
        raise ctx.fail(1, "the matrix must be a mapping with keys 'version', 'cccl', 'nvrtc'")
    for key in doc:
        if key not in TOP_KEYS:
            raise ctx.fail(doc.key_lines[key], f"unknown top-level key {key!r}{_hint(key, TOP_KEYS)}")
    version = doc.get("version", 1)
    if version not in SUPPORTED_VERSIONS:
        raise ctx.fail(doc.key_lines.get("version", 1), f"unsupported matrix version {version!r}; "
                       f"this aot reads {', '.join(map(str, SUPPORTED_VERSIONS))}")
    types = _parse_types(ctx, doc)
    specs: list[Spec] = []
    seen: dict[str, int] = {}
    for section, parse_one in (("cccl", _parse_cccl), ("nvrtc", _parse_nvrtc)):
        entries = doc.get(section, [])
        if entries is None:
            entries = []
        if not isinstance(entries, list):
            raise ctx.fail(doc.key_lines[section], f"{section!r} must be a list of specs")
        for entry in entries:
            line = getattr(entry, "line", getattr(entries, "line", 0))
            if not isinstance(entry, _Map):
                raise ctx.fail(line, f"each {section} entry must be a mapping, got {type(entry).__name__}")
            name = entry.get("name")
            if not isinstance(name, str) or not name.strip():
                raise ctx.fail(line, "a spec needs a non-empty string 'name'", fld="name")
            if not all(c.isalnum() or c in "_-." for c in name) or name.startswith("."):
                raise ctx.fail(entry.key_lines["name"], "names may use letters, digits, '_', '-', '.' only",
                               spec=name, fld="name")
            if name in seen:
                raise ctx.fail(entry.key_lines["name"], f"duplicate spec name (first defined on line "
                               f"{seen[name]})", spec=name, fld="name")
            seen[name] = entry.key_lines["name"]
            specs.append(parse_one(ctx, entry, name, types))
    if not specs:
        raise ctx.fail(1, "the matrix defines no specs")
    return Matrix(path=path, specs=tuple(specs))


def _parse_types(ctx: _Ctx, doc: _Map) -> dict[str, tuple[tuple[str, str], ...]]:
    """``types: {bbox: {xmin: float64, ...}}``: named structs of scalar fields, in the order written."""
    raw = doc.get("types")
    if raw is None:
        return {}
    if not isinstance(raw, _Map):
        raise ctx.fail(doc.key_lines.get("types", 1), "types must map struct names to {field: dtype} mappings",
                       fld="types")
    types: dict[str, tuple[tuple[str, str], ...]] = {}
    for tname, fields in raw.items():
        line = raw.key_lines[tname]
        where = f"types.{tname}"
        if not isinstance(tname, str) or not tname.isidentifier():
            raise ctx.fail(line, f"struct type name {tname!r} must be an identifier", fld=where)
        if tname in DTYPES:
            raise ctx.fail(line, f"struct type name {tname!r} is a scalar dtype's name", fld=where)
        if not isinstance(fields, _Map) or not 1 <= len(fields) <= MAX_STRUCT_FIELDS:
            raise ctx.fail(line, f"a struct type maps 1 to {MAX_STRUCT_FIELDS} field names to scalar dtypes",
                           fld=where)
        for fname, dt in fields.items():
            if not isinstance(fname, str) or not fname.isidentifier():
                raise ctx.fail(fields.key_lines[fname], f"field name {fname!r} must be an identifier",
                               fld=f"{where}.{fname}")
            if dt not in DTYPES:
                raise ctx.fail(fields.key_lines[fname], f"unknown dtype {dt!r}{_hint(dt, DTYPES)}; struct fields "
                               f"are scalars: {', '.join(DTYPES)}", fld=f"{where}.{fname}")
        types[tname] = tuple((str(f), str(d)) for f, d in fields.items())
    return types


def _parse_cccl(ctx: _Ctx, e: _Map, name: str, types: dict | None = None) -> CcclSpec:
    types = types or {}
    algo = e.get("algorithm")
    if algo is None:
        raise ctx.fail(e.line, "missing required field", spec=name, fld="algorithm")
    if not isinstance(algo, str) or algo not in ALGORITHMS:
        raise ctx.fail(e.key_lines["algorithm"], f"unknown algorithm {algo!r}{_hint(algo, ALGORITHMS)}; "
                       f"known: {', '.join(ALGORITHMS)}", spec=name, fld="algorithm")
    adef = ALGORITHMS[algo]
    allowed = ("name", "algorithm", *adef.fields, *adef.optional)
    for key in e:
        if key not in allowed:
            raise ctx.fail(e.key_lines[key], f"unknown field for {algo}{_hint(key, allowed)}; "
                           f"allowed: {', '.join(allowed)}", spec=name, fld=str(key))
    slots = {s.field: s for s in adef.ops}
    params: dict[str, Any] = {}
    used_types: dict[str, tuple] = {}
    code: dict[str, str] = {}
    for fld, default in {**adef.fields, **adef.optional}.items():
        line = e.key_lines.get(fld, e.line)
        if fld not in e:
            if default is REQUIRED:
                raise ctx.fail(e.line, f"missing required field for {algo}", spec=name, fld=fld)
            if fld in adef.fields:
                params[fld] = default
            continue
        value = e[fld]
        if is_dtype_field(fld):
            if isinstance(value, str) and value in types:
                if fld not in adef.struct_fields:
                    raise ctx.fail(line, f"{algo} takes a scalar {fld}, not the struct {value!r}; structs are "
                                   f"accepted in: {', '.join(adef.struct_fields) or 'no field'}", spec=name, fld=fld)
                used_types[value] = types[value]
            elif value not in DTYPES:
                known = list(DTYPES) + list(types)
                raise ctx.fail(line, f"unknown dtype {value!r}{_hint(value, known)}; known: "
                               f"{', '.join(known)}", spec=name, fld=fld)
            elif fld in adef.choices and value not in adef.choices[fld]:
                raise ctx.fail(line, f"{algo} takes a {fld} of {', '.join(adef.choices[fld])}, not {value!r}",
                               spec=name, fld=fld)
        elif fld in slots:
            slot = slots[fld]
            value = _check_op(ctx, line, name, value, slot.role, arity=slot.arity, fld=fld)
            if is_code_ref(value):
                code[value] = _code_digest(ctx, line, name, fld, value)
        elif fld in adef.choices:
            if value not in adef.choices[fld]:
                raise ctx.fail(line, f"unknown {fld} {value!r}{_hint(value, adef.choices[fld])}; one of: "
                               f"{', '.join(adef.choices[fld])}", spec=name, fld=fld)
        elif fld in adef.int_ranges:
            lo, hi = adef.int_ranges[fld]
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise ctx.fail(line, f"{fld} must be an integer in [{lo}, {hi}], got {value!r}", spec=name, fld=fld)
        elif fld == "init":
            value = _parse_init(ctx, line, name, value, e.get("dtype"), types)
        if fld in adef.optional and value == default:
            continue  # an optional field at its default is not recorded (content keys stay as they were)
        params[fld] = value
    if "init" in params and params["dtype"] not in types:
        _check_init(ctx, e.key_lines["init"], name, params["init"], params["dtype"])
    return CcclSpec(name=name, algorithm=algo, params=params, types=used_types, code=code)


def _parse_init(ctx: _Ctx, line: int, name: str, value: Any, dtype: Any, types: dict) -> Any:
    if isinstance(dtype, str) and dtype in types:
        fields = types[dtype]
        if not isinstance(value, list) or len(value) != len(fields):
            raise ctx.fail(line, f"init of struct {dtype!r} must list {len(fields)} values, one per field "
                           f"({', '.join(f for f, _ in fields)})", spec=name, fld="init")
        out = [_parse_init(ctx, line, name, v, None, {}) for v in value]
        for v, (f, dt) in zip(out, fields):
            _check_init(ctx, line, name, v, dt)
        return out
    if isinstance(value, float) and value != value:
        raise ctx.fail(line, "init is NaN; use a number or 'inf', '-inf', 'min', 'max'", spec=name, fld="init")
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        value = "inf" if value > 0 else "-inf"  # YAML .inf: stored as the portable string
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ctx.fail(line, f"init must be a number (or 'inf', '-inf', 'min', 'max'), got {value!r}",
                       spec=name, fld="init")
    if isinstance(value, str) and value not in ("inf", "-inf", "min", "max"):
        try:  # YAML 1.1 reads '1e3' as a string
            value = float(value)
        except ValueError:
            raise ctx.fail(line, f"init must be a number or one of 'inf', '-inf', 'min', 'max', "
                           f"got {value!r}", spec=name, fld="init") from None
    return value


def _code_digest(ctx: _Ctx, line: int, name: str, fld: str, ref: str) -> str:
    """The source digest of an operator from code (the matrix being built may name any module)."""
    from .opref import OpRefError, source_digest
    try:
        return source_digest(ref)
    except OpRefError as err:
        raise ctx.fail(line, str(err), spec=name, fld=fld) from None


def _check_init(ctx: _Ctx, line: int, name: str, init: Any, dtype: str) -> None:
    """An init value must be representable in the spec's dtype (no silent wrap-around or truncation)."""
    import numpy as np
    if isinstance(init, str):
        if "inf" in init and not dtype.startswith("float"):
            raise ctx.fail(line, f"init {init!r} needs a float dtype, not {dtype}", spec=name, fld="init")
        return
    if dtype.startswith("float"):
        if abs(float(init)) > float(np.finfo(dtype).max):
            raise ctx.fail(line, f"init {init!r} is outside {dtype}'s range", spec=name, fld="init")
        return
    info = np.iinfo(dtype)
    if isinstance(init, float) and not init.is_integer():
        raise ctx.fail(line, f"init {init!r} is not a whole number, but dtype is {dtype}", spec=name, fld="init")
    if not info.min <= int(init) <= info.max:
        raise ctx.fail(line, f"init {init!r} is outside {dtype}'s range [{info.min}, {info.max}]",
                       spec=name, fld="init")


def _check_op(ctx: _Ctx, line: int, name: str, value: Any, role: str, arity: int = 2, fld: str = "op") -> str:
    if not isinstance(value, str):
        raise ctx.fail(line, f"the {role} must be a built-in operator name or a 'lambda ...' source",
                       spec=name, fld=fld)
    value = value.strip()
    if is_code_ref(value):
        problem = code_ref_problem(value)
        if problem:
            raise ctx.fail(line, problem, spec=name, fld=fld)
        return value
    if value.startswith("lambda"):
        import ast
        problem = lambda_problem(value)
        if problem:
            raise ctx.fail(line, problem, spec=name, fld=fld)
        tree = ast.parse(value, mode="eval")
        n_args = len(tree.body.args.args)
        if n_args != arity or tree.body.args.vararg or tree.body.args.kwarg:
            raise ctx.fail(line, f"the {role} lambda takes {n_args} argument(s); this algorithm calls it with "
                           f"{arity}", spec=name, fld=fld)
        return value
    if value not in BUILTIN_OPS:
        raise ctx.fail(line, f"unknown operator {value!r}{_hint(value, BUILTIN_OPS)}; built-ins: "
                       f"{', '.join(BUILTIN_OPS)}, a 'lambda x: ...' source or a 'package.module:function'",
                       spec=name, fld=fld)
    return value


_KERNEL_EXPR = re.compile(r"[A-Za-z_]\w*(::[A-Za-z_]\w*)*(<[\w\s:<>,*&().+-]*>)?")
_HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".cuh", ".inl", ".inc")


def _parse_nvrtc(ctx: _Ctx, e: _Map, name: str, types: dict | None = None) -> NvrtcUnit:
    for key in e:
        if key not in NVRTC_KEYS:
            raise ctx.fail(e.key_lines[key], f"unknown field{_hint(key, NVRTC_KEYS)}; allowed: "
                           f"{', '.join(NVRTC_KEYS)}", spec=name, fld=str(key))
    src = e.get("source")
    if not isinstance(src, str) or not src:
        raise ctx.fail(e.key_lines.get("source", e.line), "missing or empty source path", spec=name, fld="source")
    src_path = resolve_source(ctx.path, src)
    try:
        text = src_path.read_text(encoding="utf-8")
    except OSError as err:
        raise ctx.fail(e.key_lines["source"], f"cannot read source file {src_path}: {err.strerror or err}",
                       spec=name, fld="source") from None
    except UnicodeDecodeError as err:
        raise ctx.fail(e.key_lines["source"], f"source file {src_path} is not UTF-8 text ({err.reason})",
                       spec=name, fld="source") from None
    headers = _read_include_dirs(ctx, e, name)
    kernels = e.get("kernels")
    if not isinstance(kernels, list) or not kernels or not all(isinstance(k, str) and k for k in kernels):
        raise ctx.fail(e.key_lines.get("kernels", e.line), "kernels must be a non-empty list of kernel names "
                       "or name expressions ('axpy<float>')", spec=name, fld="kernels")
    if len(set(kernels)) != len(kernels):
        raise ctx.fail(e.key_lines["kernels"], "kernels lists a name twice", spec=name, fld="kernels")
    everything = "\n".join([text, *headers.values()])
    for k in kernels:
        if not _KERNEL_EXPR.fullmatch(k) or k.count("<") != k.count(">"):
            raise ctx.fail(e.key_lines["kernels"], f"{k!r} is neither a kernel name nor a template name "
                           f"expression like 'axpy<float>'", spec=name, fld="kernels")
        base = k.split("<", 1)[0].split("::")[-1]
        if base not in everything:
            raise ctx.fail(e.key_lines["kernels"], f"kernel {base!r} does not appear in {src}"
                           + (" or its include_dirs" if headers else ""), spec=name, fld="kernels")
    options = e.get("options", {}) or {}
    if not isinstance(options, dict):
        raise ctx.fail(e.key_lines["options"], "options must be a mapping of cuda.core ProgramOptions fields",
                       spec=name, fld="options")
    for key in options:
        if key not in NVRTC_OPTIONS:
            raise ctx.fail(options.key_lines[key], f"unknown NVRTC option {key!r}{_hint(key, NVRTC_OPTIONS)}; "
                           f"allowed: {', '.join(NVRTC_OPTIONS)}", spec=name, fld=f"options.{key}")
    return NvrtcUnit(name=name, source_path=src, source=text, kernels=tuple(kernels),
                     options={k: options[k] for k in sorted(options)}, headers=headers)


def _read_include_dirs(ctx: _Ctx, e: _Map, name: str) -> dict[str, str]:
    """``include_dirs: [include]``: directories relative to the matrix; every header file under them
    (``.h``, ``.cuh``, ``.hpp``, ...) becomes part of the unit's definition (relative path -> text), so the
    headers' bytes are in its content key and a JIT elsewhere compiles the same ones."""
    dirs = e.get("include_dirs")
    if dirs is None:
        return {}
    line = e.key_lines["include_dirs"]
    if not isinstance(dirs, list) or not all(isinstance(d, str) and d for d in dirs):
        raise ctx.fail(line, "include_dirs must be a list of directories (relative to the matrix)", spec=name,
                       fld="include_dirs")
    headers: dict[str, str] = {}
    total = 0
    for d in dirs:
        root = ctx.path.parent / d
        if Path(d).is_absolute() or ".." in Path(d).parts:
            raise ctx.fail(line, f"include dir {d!r} must be relative to the matrix, without '..'", spec=name,
                           fld="include_dirs")
        if not root.is_dir():
            raise ctx.fail(line, f"include dir {d!r} is not a directory ({root})", spec=name, fld="include_dirs")
        for path in sorted(root.rglob("*")):
            if path.suffix not in _HEADER_SUFFIXES or path.is_symlink() or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            if rel in headers:
                raise ctx.fail(line, f"header {rel!r} is in two include dirs", spec=name, fld="include_dirs")
            if len(headers) >= MAX_HEADERS:
                raise ctx.fail(line, f"more than {MAX_HEADERS} headers under include_dirs", spec=name,
                               fld="include_dirs")
            try:
                headers[rel] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                raise ctx.fail(line, f"cannot read header {path}: {err}", spec=name, fld="include_dirs") from None
            total += len(headers[rel])
            if total > MAX_HEADER_BYTES:
                raise ctx.fail(line, f"headers under include_dirs exceed {MAX_HEADER_BYTES} bytes", spec=name,
                               fld="include_dirs")
    return headers
