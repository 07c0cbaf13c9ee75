"""Load and validate ``build_matrix.yaml`` into specs.

Every error names the file, the line, the spec and the field, with a "did you mean" where a near
miss is likely (``reduec``, ``flaot64``). Validation is complete before anything is built, so a bad
matrix never leaves a half-written output behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable


from ..core.errors import ArtifactError, MatrixError
from ..core.format import _read_regular
from ..algorithms import DTYPES
from ..core.text import (MAX_HEADERS, MAX_HEADERS_LEN, MAX_SOURCE_LEN, MAX_SPECS, MAX_STRUCT_FIELDS,
                         SpecError, hint, short)
from ..core.spec import CcclSpec, NvrtcUnit, Spec
from .includes import IncludeError, header_files, read_source
from ..core.rules import check_cccl, check_name, check_nvrtc
from ..core.nvsource import flags_to_options, is_code_source, name_template, source_problem
from ..core.opref import OpRefError, source_digest
from .codeimport import CodeImports, ImportFailure
from .pysource import code_units
from .numba_build import parse_numba_entry as _parse_numba  # the numba-cuda family (imports numba only when used)
from .cupy_build import parse_cupy_entry as _parse_cupy  # the CuPy family (imports CuPy only when used)
from .triton_build import parse_triton_entry as _parse_triton  # the Triton family (imports Triton only when used)
from .yamlread import Map, load_yaml

TOP_KEYS = ("version", "types", "cccl", "nvrtc", "numba", "cupy", "triton")
NVRTC_KEYS = ("name", "source", "kernels", "options", "include_dirs", "params")
#: Header files under an NVRTC unit's include_dirs that become part of its definition.
_HEADER_SUFFIXES = (".h", ".hh", ".hpp", ".cuh", ".inl", ".inc")
SUPPORTED_VERSIONS = (1,)

#: Largest matrix file read (the default one is under 3 KB).
MAX_MATRIX_LEN = 1024 * 1024
#: The source digest a ``--no-code`` read records for an operator from code (never built: see ``no_code``).
NO_CODE_DIGEST = "0" * 64


@dataclass(frozen=True)
class Unreadable:
    """A spec whose module cannot be imported (:class:`aot.build.codeimport.ImportFailure`): its one line."""

    name: str
    family: str  # "cccl" | "nvrtc"
    error: str


@dataclass(frozen=True)
class Matrix:
    """A validated matrix: its file and its specs in file order; the specs whose module cannot be imported
    (read with ``partial``); which specs name code (``code``: name -> references), and whether that code was
    left unimported (``no_code``: then operators from code carry :data:`NO_CODE_DIGEST` and must not be built)."""

    path: Path
    specs: tuple[Spec, ...]
    unreadable: tuple[Unreadable, ...] = ()
    code: tuple[tuple[str, tuple[str, ...]], ...] = ()
    no_code: bool = False
    import_parents: bool = False

    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    def select(self, only: Iterable[str] | None) -> tuple[Spec, ...]:
        """The specs named in ``only`` (all when ``None``); an unknown name is an error with a hint (the name
        of an unreadable spec is known: :meth:`unreadable_in` lists it)."""
        if not only:
            return self.specs
        by_name = {s.name: s for s in self.specs}
        known = {*by_name, *(u.name for u in self.unreadable)}
        missing = [n for n in only if n not in known]
        if missing:
            n = missing[0]
            raise MatrixError(f"{self.path}: --only names unknown spec {short(n)}{hint(n, by_name)}")
        wanted = set(only)
        return tuple(s for s in self.specs if s.name in wanted)

    def unreadable_in(self, only: Iterable[str] | None) -> tuple[Unreadable, ...]:
        """The unreadable specs among ``only`` (all when ``None``)."""
        wanted = set(only) if only else None
        return tuple(u for u in self.unreadable if wanted is None or u.name in wanted)


def default_matrix_path() -> Path:
    """The bundled ``build_matrix.yaml``: inside an installed package it is ``aot/build_matrix.yaml``
    (the wheel build copies it there); in a source checkout it is the repository's top-level file."""
    packaged = Path(str(resources.files("aot"))) / "build_matrix.yaml"
    if packaged.is_file():
        return packaged
    return Path(__file__).resolve().parents[2] / "build_matrix.yaml"


def resolve_source(matrix_path: Path, src: str) -> Path:
    """A unit's ``source`` is relative to the matrix file, else to the ``aot`` package (where the bundled
    ``kernels/*.cu`` live), so one matrix text works from a checkout and from an installed package."""
    p = Path(src)
    if p.is_absolute():
        return p
    first = matrix_path.parent / p
    if first.exists():
        return first
    bundled = Path(__file__).resolve().parents[1] / p
    return bundled if bundled.exists() else first


class _Ctx:
    """Formats errors as ``file:line: spec 'name': field 'f': message``; holds the matrix's imports
    (``None``: ``--no-code``, nothing is imported)."""

    def __init__(self, path: Path, imports: CodeImports | None):
        self.path = path
        self.imports = imports

    def fail(self, line: int, msg: str, spec: str | None = None, fld: str | None = None) -> MatrixError:
        where = f"{self.path}:{line}:"
        if spec is not None:
            where += f" spec {short(spec)}:"
        if fld is not None:
            where += f" field {short(fld)}:"
        return MatrixError(f"{where} {msg}")

    def spec_error(self, e: Map, err: SpecError, name: str | None) -> MatrixError:
        """A :class:`SpecError` from the shared validator, placed on the line of the field at fault."""
        fld = err.field
        line = e.line
        if fld is not None and fld.startswith("options.") and isinstance(e.get("options"), Map):
            line = e["options"].key_lines.get(fld[len("options."):], e.key_lines.get("options", e.line))
        elif fld is not None and fld in e:
            line = e.key_lines[fld]
        elif fld is not None and fld.split(".")[0].split("[")[0] in e:  # a part of a field (input.over, state.mask)
            line = e.key_lines[fld.split(".")[0].split("[")[0]]
        return self.fail(line, str(err), spec=name, fld=fld)


def _read_bounded(path: Path, max_size: int) -> bytes:
    """A regular file's bytes, at most ``max_size`` (a FIFO, a device or /dev/zero is refused, never read)."""
    try:
        return _read_regular(path, max_size)
    except OSError as e:
        raise ArtifactError(e.strerror or str(e)) from None
    except ArtifactError as e:
        raise ArtifactError(str(e).removeprefix(f"{path}: ").removeprefix("cannot read: ")) from None


def load_matrix(path: str | Path | None = None, *, import_parents: bool = False, no_code: bool = False,
                partial: bool = False) -> Matrix:
    """Read and validate a matrix file (the bundled default when ``path`` is ``None``).

    ``import_parents``: import the code it names with its parent packages' ``__init__`` (``[tool.aot]
    import-parents``); ``no_code``: import nothing (``aot validate --no-code``); ``partial``: a spec whose
    module cannot be imported is listed in ``unreadable`` instead of failing the read (one
    :class:`MatrixError` naming the first, and how many more)."""
    p = Path(path) if path is not None else default_matrix_path()
    try:
        raw = _read_bounded(p, MAX_MATRIX_LEN)
    except ArtifactError as e:
        raise MatrixError(f"{p}: cannot read build matrix: {e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MatrixError(f"{p}: the build matrix is not UTF-8 text ({e.reason} at byte {e.start})") from None
    m = parse_matrix(text, p, import_parents=import_parents, no_code=no_code)
    if m.unreadable and not partial:
        raise unreadable_error(m.unreadable)
    return m


def unreadable_error(unreadable: Iterable[Unreadable]) -> MatrixError:
    """One line: the first spec whose module cannot be imported, and how many more."""
    first, *rest = unreadable
    more = len(rest)
    return MatrixError(first.error + (f" (and {more} more spec{'s' * (more > 1)} whose module cannot be imported: "
                                      f"'aot validate' lists them)" if more else ""))


def parse_matrix(text: str, path: Path, *, import_parents: bool = False, no_code: bool = False) -> Matrix:
    """:func:`load_matrix` of a text read already; the child processes that imported its code first end here."""
    ctx = _Ctx(path, None if no_code else CodeImports(path.parent, import_parents=import_parents))
    try:
        return _parse(ctx, text, import_parents)
    finally:
        if ctx.imports is not None:
            ctx.imports.close()


def _parse(ctx: _Ctx, text: str, import_parents: bool) -> Matrix:
    path = ctx.path
    doc = load_yaml(text, str(ctx.path))
    if not isinstance(doc, Map):
        raise ctx.fail(1, "the matrix must be a mapping with keys 'version', 'cccl', 'nvrtc'")
    for key in doc:
        if key not in TOP_KEYS:
            raise ctx.fail(doc.key_lines[key], f"unknown top-level key {short(key)}{hint(key, TOP_KEYS)}")
    version = doc.get("version", 1)
    if version not in SUPPORTED_VERSIONS:
        raise ctx.fail(doc.key_lines.get("version", 1), f"unsupported matrix version {short(version)}; "
                       f"this aot reads {', '.join(map(str, SUPPORTED_VERSIONS))}")
    types = _parse_types(ctx, doc)
    specs: list[Spec] = []
    seen: dict[str, int] = {}
    unreadable: list[Unreadable] = []
    code: list[tuple[str, tuple[str, ...]]] = []
    for section, parse_one in (("cccl", _parse_cccl), ("nvrtc", _parse_nvrtc), ("numba", _parse_numba),
                               ("cupy", _parse_cupy), ("triton", _parse_triton)):
        entries = doc.get(section, [])
        if entries is None:
            entries = []
        if not isinstance(entries, list):
            raise ctx.fail(doc.key_lines[section], f"{section!r} must be a list of specs")
        for entry in entries:
            line = getattr(entry, "line", getattr(entries, "line", 0))
            if not isinstance(entry, Map):
                raise ctx.fail(line, f"each {section} entry must be a mapping, got {type(entry).__name__}")
            raw_name = entry.get("name")
            rendered = section == "nvrtc" and "params" in entry  # its name is a template: see variant_name
            try:
                name = check_name(raw_name) if not rendered else name_template(raw_name)
            except SpecError as err:
                spec = raw_name if isinstance(raw_name, str) and raw_name.strip() else None
                raise ctx.fail(entry.key_lines["name"] if spec else line, str(err), spec=spec, fld="name") from None
            try:
                got = parse_one(ctx, entry, name, types)
            except ImportFailure as err:  # this spec's error alone: the caller lists it or builds the rest
                if name in seen:
                    raise ctx.fail(entry.key_lines["name"], f"duplicate spec name (first defined on line "
                                   f"{seen[name]})", spec=name, fld="name") from None
                seen[name] = entry.key_lines["name"]
                unreadable.append(Unreadable(name, section, str(ctx.spec_error(entry, err, name))))
                continue
            except SpecError as err:
                raise ctx.spec_error(entry, err, name) from None
            refs = _code_refs(entry, got)
            if refs:
                code.append((name, refs))
            for one in got if isinstance(got, list) else [got]:
                if one.name in seen:
                    raise ctx.fail(entry.key_lines["name"], f"duplicate spec name (first defined on line "
                                   f"{seen[one.name]})", spec=one.name, fld="name")
                seen[one.name] = entry.key_lines["name"]
                specs.append(one)
            if len(specs) > MAX_SPECS:  # checked as entries expand: a parameter grid can be large
                raise ctx.fail(entry.key_lines["name"], f"the matrix defines more than {MAX_SPECS} specs",
                               spec=name, fld="params" if rendered else "name")
    if not specs and not unreadable:
        raise ctx.fail(1, "the matrix defines no specs")
    if len(specs) > MAX_SPECS:
        raise ctx.fail(1, f"the matrix defines {len(specs)} specs, over the limit of {MAX_SPECS}")
    return Matrix(path=path, specs=tuple(specs), unreadable=tuple(unreadable), code=tuple(code),
                  no_code=ctx.imports is None, import_parents=import_parents)


def _code_refs(entry: Map, got: Spec | list) -> tuple[str, ...]:
    """The code an entry names: an NVRTC source in code, a CCCL spec's operators from code, a numba kernel."""
    if isinstance(got, CcclSpec):
        return tuple(sorted(got.code))
    if "kernel" in entry and isinstance(entry.get("kernel"), str):  # a numba: or triton: entry names its kernel
        return (entry["kernel"],)
    src = entry.get("source")
    return (src,) if isinstance(src, str) and is_code_source(src) else ()


def _parse_types(ctx: _Ctx, doc: Map) -> dict[str, tuple[tuple[str, str], ...]]:
    """``types: {bbox: {xmin: float64, ...}}``: named structs of scalar fields, in the order written."""
    raw = doc.get("types")
    if raw is None:
        return {}
    if not isinstance(raw, Map):
        raise ctx.fail(doc.key_lines.get("types", 1), "types must map struct names to {field: dtype} mappings",
                       fld="types")
    types: dict[str, tuple[tuple[str, str], ...]] = {}
    for tname, fields in raw.items():
        line = raw.key_lines[tname]
        where = f"types.{str(tname)[:64]}"
        if not isinstance(tname, str) or len(tname) > 64 or not tname.isidentifier():
            raise ctx.fail(line, f"struct type name {short(tname)} must be an identifier", fld=where)
        if tname in DTYPES:
            raise ctx.fail(line, f"struct type name {tname!r} is a scalar dtype's name", fld=where)
        if not isinstance(fields, Map) or not 1 <= len(fields) <= MAX_STRUCT_FIELDS:
            raise ctx.fail(line, f"a struct type maps 1 to {MAX_STRUCT_FIELDS} field names to scalar dtypes",
                           fld=where)
        for fname, dt in fields.items():
            fline, ffld = fields.key_lines[fname], f"{where}.{str(fname)[:64]}"
            if not isinstance(fname, str) or len(fname) > 64 or not fname.isidentifier():
                raise ctx.fail(fline, f"field name {short(fname)} must be an identifier", fld=ffld)
            if dt not in DTYPES:
                raise ctx.fail(fline, f"unknown dtype {short(dt)}{hint(dt, DTYPES)}; struct fields are scalars: "
                               f"{', '.join(DTYPES)}", fld=ffld)
        types[tname] = tuple((str(f), str(d)) for f, d in fields.items())
    return types


def _code_digest(ref: str, imports: CodeImports | None) -> str:
    """The source digest of an operator from code, its module imported by ``imports`` (the matrix being
    built may name any module: :mod:`aot.build.codeimport`); ``None`` (``--no-code``): nothing imported."""
    if imports is None:
        return NO_CODE_DIGEST
    imports.module(ref.partition(":")[0])
    try:
        return source_digest(ref)
    except OpRefError as err:
        raise SpecError(str(err), "op") from None


def _parse_cccl(ctx: _Ctx, e: Map, name: str, types: dict | None = None) -> Spec:
    """The shared validator (:func:`aot.core.rules.check_cccl`): a manifest's specs pass the very same checks;
    the matrix adds its struct types and hashes operators from code."""
    def digest(ref: str) -> str:
        try:
            return _code_digest(ref, ctx.imports)
        except SpecError as err:  # name the operator field that holds this reference
            fld = next((k for k, v in e.items() if isinstance(v, str) and v.strip() == ref), "op")
            raise type(err)(str(err), fld) from None
    def read_cpp(rel: str) -> str:
        """A C++ operator's source inside the matrix folder (bounded, UTF-8, read once per file)."""
        try:
            return read_source(ctx.path.parent, rel, MAX_SOURCE_LEN)
        except IncludeError as err:
            raise SpecError(str(err), "op.cpp") from None
    return check_cccl(e, types or {}, digest, read_cpp)


def _flags_entry(e: Map) -> Map:
    """The entry with ``options`` written as NVRTC command-line flags (``["-DN=4", "-std=c++17"]``) turned
    into the ProgramOptions mapping (one content key for both spellings); ``-I dir`` joins include_dirs."""
    flags = e.get("options")
    if not isinstance(flags, list):
        return e
    options, dirs = flags_to_options(flags)
    out = Map(e)
    out.line, out.key_lines = e.line, dict(e.key_lines)
    out["options"] = options
    if dirs:
        have = e.get("include_dirs")
        out["include_dirs"] = (list(have) if isinstance(have, list) else []) + dirs
        out.key_lines.setdefault("include_dirs", e.key_lines["options"])
    return out


def _parse_nvrtc(ctx: _Ctx, e: Map, name: str, types: dict | None = None) -> Spec | list[NvrtcUnit]:
    """An NVRTC entry: a unit from a ``.cu`` file, from a ``str`` constant in code, or one unit per
    parameter set of a function in code (:mod:`aot.core.nvsource`, :mod:`aot.build.pysource`)."""
    for key in e:
        if key not in NVRTC_KEYS:
            raise ctx.fail(e.key_lines[key], f"unknown field{hint(key, NVRTC_KEYS)}; allowed: "
                           f"{', '.join(NVRTC_KEYS)}", spec=name, fld=str(key))
    src = e.get("source")
    if not isinstance(src, str) or not src:
        raise ctx.fail(e.key_lines.get("source", e.line), "missing or empty source path", spec=name, fld="source")
    problem = source_problem(src)
    if problem:
        raise ctx.fail(e.key_lines["source"], problem, spec=name, fld="source")
    e = _flags_entry(e)
    if is_code_source(src):  # imports the module: only ever for the matrix being built
        return code_units(e, name, src, ctx.imports, _read_include_dirs(ctx, e, name))
    if "params" in e:
        raise ctx.fail(e.key_lines["params"], "params render a source from code: 'source' must name a function "
                       "as 'package.module:function'", spec=name, fld="params")
    src_path = resolve_source(ctx.path, src)
    try:
        text = _read_bounded(src_path, MAX_SOURCE_LEN).decode("utf-8")
    except ArtifactError as err:
        raise ctx.fail(e.key_lines["source"], f"cannot read source file {src_path}: {err}",
                       spec=name, fld="source") from None
    except UnicodeDecodeError as err:
        raise ctx.fail(e.key_lines["source"], f"source file {src_path} is not UTF-8 text ({err.reason})",
                       spec=name, fld="source") from None
    return check_nvrtc(e, text, _read_include_dirs(ctx, e, name))


def _read_include_dirs(ctx: _Ctx, e: Map, name: str) -> dict[str, str]:
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
        if Path(d).is_absolute() or ".." in Path(d).parts:
            raise ctx.fail(line, f"include dir {short(d)} must be relative to the matrix, without '..'", spec=name,
                           fld="include_dirs")
        try:  # inside the matrix folder, no links followed, bounded (aot.build.includes)
            found = header_files(ctx.path.parent, d, _HEADER_SUFFIXES)
        except IncludeError as err:
            raise ctx.fail(line, str(err), spec=name, fld="include_dirs") from None
        for rel, path in found:
            if rel in headers:
                raise ctx.fail(line, f"header {rel!r} is in two include dirs", spec=name, fld="include_dirs")
            if len(headers) >= MAX_HEADERS:
                raise ctx.fail(line, f"more than {MAX_HEADERS} headers under include_dirs", spec=name,
                               fld="include_dirs")
            try:
                headers[rel] = _read_bounded(path, MAX_HEADERS_LEN).decode("utf-8")
            except (ArtifactError, UnicodeDecodeError) as err:
                raise ctx.fail(line, f"cannot read header {path}: {err}", spec=name, fld="include_dirs") from None
            total += len(headers[rel])
            if total > MAX_HEADERS_LEN:
                raise ctx.fail(line, f"headers under include_dirs exceed {MAX_HEADERS_LEN} characters", spec=name,
                               fld="include_dirs")
    return headers
