"""``[tool.aot]`` in a downstream project's pyproject.toml: the one configuration a package that ships its
own AOT kernels writes.

    [tool.aot]
    package = "mypkg"                 # import package (folder, relative to the project) receiving artifacts
    matrix = "build_matrix.yaml"      # default
    sm = "all"                        # or "80,90", or per CUDA major: {cu12 = "75,80,90", cu13 = "80,90,100"}
    folder = "artifacts"              # default: <package>/artifacts/ (what Registry.from_package reads)
    prebuilt = "merged/"              # optional: bundle this (merged) set instead of building
    merge = ["cccl-1.1.0/", "cccl-1.2.0/"]  # optional: sets built elsewhere (other cuda-cccl releases) merged in
    allow-partial = false             # default: every (spec, SM) of matrix x sm must be present
    checks = {axpy = "mypkg.checks:axpy"}   # optional GPU checks of NVRTC units and numba kernels
                                            # (aot verify --gpu --package mypkg)
    import-parents = false            # default: importing mypkg.kernels for the matrix skips mypkg/__init__.py
    cccl-legacy = ["reduce:int32:mypkg.ops.add:0"]  # optional: cuda.compute specs answered on cuda-cccl < 1.1
                                      # (built where the build environment has such a release; docs/build.md)
    pack = "auto"                     # default: packs (aot.core.pack) only a set over 100 MB unpacked; true, false

Validated like the matrix: every error names the pyproject.toml, the key and the problem, with a "did you
mean" for near misses. The environment can override what a CI job changes per run: ``AOT_WHEEL_SM`` the
SM list, ``AOT_WHEEL_ARTIFACTS`` the prebuilt set (the same knobs ``aot``'s own wheel build reads), and
``AOT_WHEEL_MERGE`` the sets to merge in (``os.pathsep``-separated; a CI job that built them under other
cuda-cccl releases).
"""

from __future__ import annotations

import difflib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..core.errors import ArtifactError, MatrixError
from ..core.format import _read_regular
from ..core.fs import trust_problem
from ..core.text import short

KEYS = ("package", "matrix", "sm", "folder", "prebuilt", "merge", "allow-partial", "checks", "import-parents",
        "cccl-legacy", "pack")
CUDA_KEYS = ("cu12", "cu13")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Longest ``[tool.aot]`` string (paths, SM lists); a package or folder name part becomes a file name: 255.
MAX_VALUE_LEN = 4096
MAX_NAME_PART = 255
_CHECK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


class ConfigError(MatrixError):
    """A ``[tool.aot]`` table that does not validate (exit 2, like a bad matrix)."""


@dataclass(frozen=True)
class AotConfig:
    """A validated ``[tool.aot]`` table; paths are absolute (resolved against the project directory)."""

    project: Path
    pyproject: Path
    package: str                      # dotted import name, e.g. "mypkg"
    package_dir: Path                 # where its source lives (project/mypkg or project/src/mypkg)
    matrix: Path
    sm: str | Mapping[str, str]
    folder: str
    prebuilt: Path | None
    allow_partial: bool
    checks: Mapping[str, str] = field(default_factory=dict)
    dependencies: tuple[str, ...] = ()   # [project].dependencies as written
    dynamic: tuple[str, ...] = ()        # [project].dynamic
    #: [project.optional-dependencies] as written (the pin check reads every extra too)
    optional_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: ``merge``: artifact sets built elsewhere (under other cuda-cccl releases) merged into the bundle
    merge: tuple[Path, ...] = ()
    import_parents: bool = False         # run the parent packages' __init__ of modules the matrix names
    #: ``cccl-legacy``: cuda.compute specs (``family:dtype:fields``) answered on releases without serialize
    cccl_legacy: tuple[str, ...] = ()
    pack: str | bool = "auto"            # artifacts into packs (aot.package.packing): "auto", True or False

    def sm_for(self, cuda_major: int) -> str:
        """The SM selection for one CUDA major (``AOT_WHEEL_SM`` wins)."""
        from ..core.env import WHEEL_SM
        override = WHEEL_SM.get().strip()
        if override:
            return override
        if isinstance(self.sm, str):
            return self.sm
        key = f"cu{cuda_major}"
        if key not in self.sm:
            raise ConfigError(f"{self.pyproject}: [tool.aot] key 'sm': no SM list for {key} (this build "
                              f"environment is CUDA {cuda_major}); it has {', '.join(sorted(self.sm))}")
        return self.sm[key]

    def prebuilt_dir(self) -> Path | None:
        from ..core.env import WHEEL_ARTIFACTS
        return WHEEL_ARTIFACTS.get() or self.prebuilt

    def merge_dirs(self) -> tuple[Path, ...]:
        """The sets merged into the bundle (``AOT_WHEEL_MERGE`` wins over ``merge``): builds of the same
        matrix made under other cuda-cccl releases, so the wheel carries a blob per release."""
        from ..core.env import WHEEL_MERGE
        override = WHEEL_MERGE.get()
        return override if override else self.merge

    @property
    def out_dir(self) -> Path:
        """Where the bundle lands in the source tree (``aot bundle`` without ``--out``)."""
        return self.package_dir / self.folder


#: pyproject.toml is read whole, bounded first: a real one is a few KiB.
MAX_PYPROJECT_LEN = 4 << 20


def _toml_load(data: bytes) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10 (tomli is a dependency there)
        import tomli as tomllib
    return tomllib.loads(data.decode("utf-8"))


def _hint(value: str, choices) -> str:
    close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def load_config(project: str | Path) -> AotConfig:
    """Read and validate ``project/pyproject.toml``'s ``[tool.aot]``."""
    project = Path(project).resolve()
    path = project / "pyproject.toml"
    try:
        doc = _toml_load(_read_regular(path, MAX_PYPROJECT_LEN))
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    except ArtifactError as e:  # not a regular file, or larger than any real pyproject.toml
        raise ConfigError(f"{path}: cannot read: {e}") from None
    except (ValueError, UnicodeDecodeError) as e:  # tomllib.TOMLDecodeError is a ValueError
        raise ConfigError(f"{path}: not valid TOML: {short(str(e))}") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from None
    tool = doc.get("tool", {}).get("aot")
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: no [tool.aot] table; add one naming at least 'package' "
                          f"(see aot's manual, docs/downstream.md)")

    def fail(key: str, msg: str) -> ConfigError:
        return ConfigError(f"{path}: [tool.aot] key {key!r}: {msg}")

    for key in tool:
        if key not in KEYS:
            raise ConfigError(f"{path}: [tool.aot]: unknown key {short(key)}{_hint(key, KEYS)}; known: "
                              f"{', '.join(KEYS)}")

    def string(key: str, default: str | None) -> str | None:
        v = tool.get(key, default)
        if v is not None and (not isinstance(v, str) or not v.strip()):
            raise fail(key, f"must be a non-empty string, got {short(v)}")
        if v is not None and len(v) > MAX_VALUE_LEN:
            raise fail(key, f"{short(v)} is {len(v)} characters, over the {MAX_VALUE_LEN}-character limit")
        return v

    def string_or_default(key: str, default: str) -> str:
        v = string(key, default)
        return default if v is None else v

    package = string("package", None)
    if package is None:
        raise fail("package", "missing: name the import package that receives the artifacts, e.g. "
                              "package = \"mypkg\"")
    if not all(_IDENT.fullmatch(p) for p in package.split(".")):
        raise fail("package", f"{short(package)} is not a dotted import name")
    if max(map(len, package.split("."))) > MAX_NAME_PART:
        raise fail("package", f"{short(package)}: a name longer than a file name ({MAX_NAME_PART} characters)")
    rel = Path(*package.split("."))
    candidates = [project / rel, project / "src" / rel]
    package_dir = next((c for c in candidates if c.is_dir()), None)
    if package_dir is None:
        raise fail("package", f"no folder {rel} or src/{rel} in {project}")
    folder = string_or_default("folder", "artifacts")
    if "/" in folder or "\\" in folder or folder in (".", "..") or not _IDENT.fullmatch(folder):
        raise fail("folder", f"{short(folder)} must be a plain folder name (letters, digits, '_')")
    if len(folder) > MAX_NAME_PART:
        raise fail("folder", f"{short(folder)}: longer than a file name ({MAX_NAME_PART} characters)")
    matrix = project / string_or_default("matrix", "build_matrix.yaml")
    try:
        found = matrix.is_file()
    except OSError as e:  # a name longer than the file system allows (ENAMETOOLONG)
        raise fail("matrix", f"{short(str(matrix))}: {e.strerror or e}") from None
    if not found:
        raise fail("matrix", f"{matrix} does not exist")
    sm: Any = tool.get("sm", "all")
    if isinstance(sm, dict):
        for k, v in sm.items():
            if k not in CUDA_KEYS:
                raise fail("sm", f"unknown CUDA major {short(k)}{_hint(k, CUDA_KEYS)}; use {' or '.join(CUDA_KEYS)}")
            if not isinstance(v, str) or not v.strip():
                raise fail("sm", f"sm.{k} must be a string such as \"80,90\" or \"all\", got {short(v)}")
            if len(v) > MAX_VALUE_LEN:
                raise fail("sm", f"sm.{k} is {len(v)} characters, over the {MAX_VALUE_LEN}-character limit")
    elif isinstance(sm, int) and not isinstance(sm, bool):
        sm = str(sm)
    elif not isinstance(sm, str) or not sm.strip():
        raise fail("sm", f"must be a string (\"all\", \"80,90\") or a table per CUDA major "
                         f"({{cu12 = \"75,80\", cu13 = \"80,90\"}}), got {short(sm)}")
    if isinstance(sm, str) and len(sm) > MAX_VALUE_LEN:
        raise fail("sm", f"{short(sm)} is {len(sm)} characters, over the {MAX_VALUE_LEN}-character limit")
    if isinstance(sm, str):  # syntax only; whether this NVRTC can target them is checked at build time
        from ..core.arch import parse_sm_list
        from ..core.errors import UsageError
        for major in (12, 13):
            try:
                parse_sm_list(sm.replace("native", "all"), cuda_major=major)
            except UsageError as e:
                raise fail("sm", str(e).removeprefix("--sm: ")) from None
    pre = string("prebuilt", None)
    merge = tool.get("merge", [])
    if not isinstance(merge, list) or not all(isinstance(x, str) and x.strip() and len(x) <= MAX_VALUE_LEN
                                              for x in merge):
        raise fail("merge", f"must be a list of artifact folders (\"cccl-1.1.0/\"), got {short(merge)}")
    legacy = tool.get("cccl-legacy", [])
    if not isinstance(legacy, list) or len(legacy) > 10_000 or not all(
            isinstance(x, str) and 0 < len(x) <= 256 and x.isprintable() for x in legacy):
        raise fail("cccl-legacy", f"must be a list of specs (\"reduce:int32:plus:0\"), got {short(legacy)}")
    allow_partial = tool.get("allow-partial", False)
    if not isinstance(allow_partial, bool):
        raise fail("allow-partial", f"must be true or false, got {short(allow_partial)}")
    import_parents = _import_parents(tool, path)
    pack = tool.get("pack", "auto")
    if not (isinstance(pack, bool) or pack == "auto"):
        raise fail("pack", f"must be \"auto\", true or false, got {short(pack)}")
    checks = tool.get("checks", {})
    if not isinstance(checks, dict):
        raise fail("checks", "must be a table {unit = \"package.module:function\"}")
    for unit, target in checks.items():
        if not isinstance(target, str) or not _CHECK.fullmatch(target):
            raise fail("checks", f"{short(unit)} = {short(target)}: expected \"{package}.module:function\"")
        if not (target.split(":")[0] == package or target.startswith(package + ".")):
            raise fail("checks", f"{short(unit)} = {short(target)}: a check must live inside {package!r} (the package "
                                 f"that owns the artifacts)")
    proj = doc.get("project", {}) if isinstance(doc.get("project"), dict) else {}
    deps = proj.get("dependencies", [])
    dyn = proj.get("dynamic", [])
    opt = proj.get("optional-dependencies", {})
    optional = {k: tuple(x for x in v if isinstance(x, str)) for k, v in (opt if isinstance(opt, dict) else {}).items()
                if isinstance(k, str) and isinstance(v, list)}
    return AotConfig(project=project, pyproject=path, package=package, package_dir=package_dir, matrix=matrix,
                     sm=sm, folder=folder, prebuilt=(project / pre) if pre else None, allow_partial=allow_partial,
                     checks=dict(checks), dependencies=tuple(d for d in deps if isinstance(d, str)),
                     dynamic=tuple(d for d in dyn if isinstance(d, str)), import_parents=import_parents,
                     optional_dependencies=optional, merge=tuple(project / x for x in merge),
                     cccl_legacy=tuple(legacy), pack=pack)


def _import_parents(tool: Mapping[str, Any], pyproject: Path) -> bool:
    value = tool.get("import-parents", False)
    if not isinstance(value, bool):
        raise ConfigError(f"{pyproject}: [tool.aot] key 'import-parents': must be true or false, got {short(value)}")
    return value


#: How many folders above a matrix :func:`matrix_import_parents` looks in for its project's pyproject.toml.
MAX_PROJECT_DEPTH = 8


def matrix_import_parents(matrix: str | Path) -> bool:
    """``[tool.aot] import-parents`` of the project whose matrix ``matrix`` is, for a matrix read on its own
    (``aot build/validate --matrix``): the nearest pyproject.toml in the matrix's folder or above (at most
    :data:`MAX_PROJECT_DEPTH` up), honoured only if its ``[tool.aot] matrix`` (default
    ``build_matrix.yaml``) is this file and it is ours and writable by nobody else; else ``False``. Read
    with the bounded reader of :func:`load_config`; a bad value there is a :class:`ConfigError`."""
    target = Path(os.path.abspath(matrix))
    for folder in list(target.parents)[:MAX_PROJECT_DEPTH]:
        path = folder / "pyproject.toml"
        try:
            st = path.stat()
        except OSError:
            continue
        if trust_problem(st, str(path)):
            return False
        try:
            doc = _toml_load(_read_regular(path, MAX_PYPROJECT_LEN))
        except (OSError, ArtifactError, ValueError, UnicodeDecodeError, RecursionError):
            return False  # not readable as a project's configuration: nothing opted in
        tool = doc.get("tool", {}).get("aot") if isinstance(doc.get("tool"), dict) else None
        if not isinstance(tool, dict):
            return False
        named = tool.get("matrix", "build_matrix.yaml")
        if not isinstance(named, str) or Path(os.path.abspath(folder / named)) != target:
            return False
        return _import_parents(tool, path)
    return False
