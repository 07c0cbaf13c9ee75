"""Bundle a downstream package's artifacts: build (or take a prebuilt/merged set), verify for the wheel,
write only ``manifest.json``, the ``*.aot`` files and ``aot-package.json`` into the package folder.

One code path for every integration: ``aot bundle`` (any build backend), the hatchling hook
(:mod:`aot._hatch`) and the CMake function ``aot_add_artifacts()`` (``aot/cmake/Findaot.cmake``) all call
:func:`bundle`. It runs the same build driver as ``aot build`` and the same checks as
``aot verify --for-wheel``; build reports and host paths never reach the package folder.

Pins follow the artifacts: cuda.compute blobs load only under the exact cuda-cccl that built them, so a
project whose ``[project].dependencies`` do not pin that cuda-cccl (or pin another CUDA major) is stopped
with an explanation (:func:`pin_problems`); the hatchling hook adds the pins itself instead.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from .config import AotConfig
from ..core.errors import AotError, UsageError
from ..core.manifest import MANIFEST_NAME, load_manifest

INFO_NAME = "aot-package.json"
INFO_FORMAT = "aot-package"
INFO_VERSION = 1


class PinError(AotError):
    """The project's declared dependencies do not match the artifacts it would ship (exit 2)."""

    return_code = 2


@dataclass(frozen=True)
class BundleResult:
    out: Path
    artifacts: int
    bytes: int
    info: Mapping[str, Any]     # what aot-package.json says (coverage, versions, checks)
    pins: tuple[str, ...]       # the requirements a wheel carrying these artifacts must declare
    built: bool                 # False: a prebuilt set was bundled


def required_pins(producer: Mapping[str, Any]) -> list[str]:
    """What a wheel carrying artifacts from ``producer`` must require: the exact cuda-cccl (for its CUDA
    major) and that major's cuda-bindings."""
    major = int(str(producer["cuda_major"]))
    return [f"cuda-cccl[cu{major}]=={producer['cuda_cccl']}", f"cuda-bindings>={major},<{major + 1}"]


def pin_problems(dependencies: Iterable[str], producer: Mapping[str, Any], *, require: bool = True) -> list[str]:
    """Why ``dependencies`` ([project].dependencies) cannot ship artifacts from ``producer``; empty if they
    can. ``require``: a missing cuda-cccl pin is a problem (the hatch hook adds it instead)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    cccl, major = str(producer["cuda_cccl"]), int(str(producer["cuda_major"]))
    problems, seen = [], False
    for text in dependencies:
        try:
            req = Requirement(text)
        except InvalidRequirement as e:
            problems.append(f"unreadable dependency {text!r}: {e}")
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        name = canonicalize_name(req.name)
        wrong_major = sorted(x for x in req.extras if x in ("cu12", "cu13") and x != f"cu{major}")
        if name == "cuda-cccl":
            seen = True
            pins = [s for s in req.specifier if s.operator in ("==", "===")]
            if len(pins) != 1 or pins[0].version != cccl or len(req.specifier) != 1:
                problems.append(f"{text!r}: the artifacts were built with cuda-cccl {cccl} and load only under "
                                f"exactly that version; declare \"cuda-cccl[cu{major}]=={cccl}\"")
            if wrong_major:
                problems.append(f"{text!r}: the artifacts are for CUDA {major}, not {', '.join(wrong_major)}")
        elif name in ("cuda-core", "cuda-bindings", "cuda-python"):
            if wrong_major:
                problems.append(f"{text!r}: the artifacts are for CUDA {major}, not {', '.join(wrong_major)}")
            if name != "cuda-core" and not any(req.specifier.contains(v, prereleases=True)
                                              for v in (f"{major}.0", f"{major}.9.99")):
                problems.append(f"{text!r}: excludes CUDA {major}, which the artifacts need")
    if require and not seen:
        problems.append(f"no cuda-cccl pin: a wheel carrying these artifacts must require exactly the cuda-cccl "
                        f"that built them; add \"cuda-cccl[cu{major}]=={cccl}\" to [project].dependencies")
    return problems


def _sms_for(cfg: AotConfig, sm: str | None) -> list[int]:
    from ..core.arch import parse_sm_list
    from ..build.toolchain import cuda_major, native_sm, nvrtc_supported_sms
    major = cuda_major()
    text = sm if sm is not None else cfg.sm_for(major)
    try:
        return parse_sm_list(text, cuda_major=major, native=native_sm() if "native" in text.lower() else None,
                             supported=nvrtc_supported_sms())
    except UsageError as e:
        where = "--sm" if sm is not None else f"{cfg.pyproject}: [tool.aot] key 'sm' (or AOT_WHEEL_SM)"
        raise UsageError(f"{where}: {str(e).removeprefix('--sm: ')}") from None


def bundle(cfg: AotConfig, out: Path | None = None, *, prebuilt: Path | None = None, sm: str | None = None,
           allow_partial: bool | None = None, jobs: int | None = None, work: Path | None = None,
           require_pins: bool = True, on_event: Callable | None = None) -> BundleResult:
    """Build (or take ``prebuilt``), verify for the wheel, and write the package folder ``out`` atomically.

    ``out`` defaults to ``<package>/<folder>`` in the project; ``work`` (default ``<project>/build/aot``)
    keeps the build output between runs, so an unchanged matrix is a no-op rebuild.
    """
    from ..core.env import JOBS
    from ..build.matrix import load_matrix
    from ..verify.gpu import check_for_wheel
    specs = load_matrix(cfg.matrix).specs
    unknown = [u for u in cfg.checks if u not in {s.name for s in specs if s.family == "nvrtc"}]
    if unknown:
        raise UsageError(f"{cfg.pyproject}: [tool.aot] key 'checks': {unknown[0]!r} is not an NVRTC unit of "
                         f"{cfg.matrix.name}")
    sms = _sms_for(cfg, sm)
    allow = cfg.allow_partial if allow_partial is None else allow_partial
    src = prebuilt if prebuilt is not None else cfg.prebuilt_dir()
    if src is None:
        from ..build.builder import build
        from ..build.toolchain import versions
        if require_pins:  # before minutes of compiling: the pins must already match this toolchain
            _raise_pin_problems(cfg, versions(), require_pins)
        src = work if work is not None else cfg.project / "build" / "aot"
        build(specs, sms, src, jobs=jobs if jobs is not None else JOBS.get(), on_event=on_event)
    elif not (Path(src) / MANIFEST_NAME).is_file():
        raise UsageError(f"prebuilt set {src}: no {MANIFEST_NAME} (expected an 'aot build' or 'aot merge' output)")
    m = load_manifest(src)
    _raise_pin_problems(cfg, m.producer, require_pins)  # a prebuilt set's own producer decides the pins
    cov = check_for_wheel(src, specs=specs, sms=sms, allow_partial=allow)
    info = {"format": INFO_FORMAT, "version": INFO_VERSION, "package": cfg.package, "folder": cfg.folder,
            **cov.to_json(), "producer": dict(m.producer), "checks": dict(sorted(cfg.checks.items())),
            "requires": required_pins(m.producer)}
    out = Path(out) if out is not None else cfg.out_dir
    n, size = write_package_folder(Path(src), out, info, names={s.name for s in specs})
    return BundleResult(out, n, size, info, tuple(info["requires"]), prebuilt is None and cfg.prebuilt_dir() is None)


def _raise_pin_problems(cfg: AotConfig, producer: Mapping[str, Any], require: bool) -> None:
    if "dependencies" in cfg.dynamic:
        return  # computed by the backend (the hatch hook adds the pins itself)
    problems = pin_problems(cfg.dependencies, producer, require=require)
    if problems:
        raise PinError(f"{cfg.pyproject}: [project] dependencies: {problems[0]}"
                       + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))


def write_package_folder(src: Path, out: Path, info: Mapping[str, Any],
                         names: set[str] | None = None) -> tuple[int, int]:
    """Copy ``src``'s manifest and the artifacts it names (only those of ``names``) into ``out``, plus
    ``aot-package.json``: into a sibling temporary folder first, then swapped in, so a reader never sees a
    half-written folder. Nothing else (reports, stray files) is copied. Returns (artifacts, bytes)."""
    from ..core.env import SOURCE_DATE_EPOCH
    from ..core.manifest import write_manifest
    m = load_manifest(src)
    entries: list[Mapping[str, Any]] = [dict(a) for a in m.artifacts if names is None or a["name"] in names]
    kept = {a["name"] for a in entries}
    specs = {k: v for k, v in m.specs.items() if k in kept}
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        total = 0
        for a in entries:
            dest = stage / a["path"]
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(m.path_of(a), dest)
            total += a["size"]
        write_manifest(stage, producer=m.producer, specs=specs, artifacts=entries,
                       extra={"sms": list(info.get("sms", []))})
        (stage / INFO_NAME).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
        epoch = SOURCE_DATE_EPOCH.get()
        for p in [stage, *stage.rglob("*")]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
            if epoch is not None:
                os.utime(p, (epoch, epoch))
        old = None
        if out.exists() or out.is_symlink():
            if not out.is_dir() or out.is_symlink():
                raise UsageError(f"{out}: exists and is not a directory")
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
        os.replace(stage, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
    return len(entries), total


def read_info(root: Path) -> dict | None:
    """``aot-package.json`` of a bundled folder, or ``None`` (an ``aot build`` output has none)."""
    from ..core.format import _read_regular, loads_strict_json
    try:
        doc = loads_strict_json(_read_regular(Path(root) / INFO_NAME, 1 << 20))
    except (OSError, ValueError, AotError):
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == INFO_FORMAT else None
