"""What a package folder says about the set it carries: ``aot-package.json`` (:func:`describe`, after ``verify
--for-wheel``'s checks), the set's files copied into a new folder (:func:`fill_folder`), and what a bundle returns
(:class:`BundleResult`). Shared by :mod:`aot.package.bundle` (one set) and :mod:`aot.package.majors` (a set of
several CUDA majors, one folder each).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .config import AotConfig
from .pins import has_cccl, jit_requirement, required_pins
from ..core.manifest import load_manifest
from ..core.versions import NUMBA_CUDA_REQUIREMENT

INFO_NAME = "aot-package.json"
INFO_FORMAT = "aot-package"
INFO_VERSION = 1

@dataclass(frozen=True)
class BundleResult:
    out: Path
    artifacts: int
    bytes: int
    info: Mapping[str, Any]     # what aot-package.json says (coverage, versions, checks)
    pins: tuple[str, ...]       # the requirements a wheel carrying these artifacts must declare
    built: bool                 # False: a prebuilt set was bundled
    cccl: bool = True           # the set holds a cuda.compute (CCCL) artifact: cuda-cccl is pinned
    releases: tuple[str, ...] = ()  # the cuda-cccl releases its CCCL blobs load under (the pin is their union)
    #: A set of several CUDA majors (aot.core.majorset): each major's own result (its pins go under its extra).
    majors: Mapping[int, "BundleResult"] = field(default_factory=dict)


def numba_requirement(artifacts: Iterable[Mapping[str, Any]]) -> list[str]:
    """``[numba-cuda range]`` where a set's manifest entries hold a numba-cuda kernel, else ``[]``: they load
    through the library's own ``@cuda.jit`` dispatchers, so the wheel needs numba-cuda, any release of the
    range (:data:`aot.core.versions.NUMBA_CUDA_REQUIREMENT`; one the kernels were not built by JIT-compiles them)."""
    return [NUMBA_CUDA_REQUIREMENT] if any(a.get("family") == "numba" for a in artifacts) else []


def carried_cccl(m: Any, names: set[str]) -> tuple[bool, list[str] | None]:
    """(whether the package will carry a CCCL blob of the set ``m``, the cuda-cccl releases of its blobs)."""
    return has_cccl(a for a in m.artifacts if a["name"] in names), list(m.cccl_releases()) or None


def describe(cfg: AotConfig, m: Any, specs: Sequence[Any], sms: Sequence[int], allow: bool,
             here: bool = True) -> dict[str, Any]:
    """``aot-package.json`` of the set ``m`` as the package carries it, after ``verify --for-wheel``'s checks
    (:func:`aot.verify.gpu.check_for_wheel`; ``here=False``: another CUDA major's set, pinned under its extra)."""
    from ..verify.gpu import check_for_wheel
    names = {s.name for s in specs}
    cccl, releases = carried_cccl(m, names)
    cov = check_for_wheel(m.root, specs=specs, sms=sms, allow_partial=allow, here=here)
    numba = numba_requirement(a for a in m.artifacts if a["name"] in names)
    info = {"format": INFO_FORMAT, "version": INFO_VERSION, "package": cfg.package, "folder": cfg.folder,
            **cov.to_json(), "producer": dict(m.producer), "checks": dict(sorted(cfg.checks.items())),
            "requires": required_pins(m.producer, cccl=cccl, releases=releases) + numba,
            "jit": jit_requirement(m.producer, cccl=cccl)}
    if m.producers:
        info["producers"] = {k: dict(v) for k, v in m.producers.items()}
    builds = {(a["triton"], a["triton_build"]) for a in m.artifacts if a["name"] in names and "triton_build" in a}
    if builds:  # the Triton builds its cubins serve (informational: another Triton compiles, nothing is required)
        info["triton"] = [{"release": r, "build": b} for r, b in sorted(builds)]
    return info


def fill_folder(stage: Path, src: Path, info: Mapping[str, Any], names: set[str] | None = None,
                pack: Any = False) -> tuple[int, int]:
    """Write ``src``'s manifest and the artifacts it names (only those of ``names``) into the new folder
    ``stage``, plus ``aot-package.json`` (``info``); returns (artifacts, bytes). ``pack`` (``[tool.aot]
    pack``): the artifacts go into packs (:mod:`aot.package.packing`) instead of files."""
    from ..core.manifest import write_manifest
    m = load_manifest(src)
    entries: list[dict[str, Any]] = [dict(a) for a in m.artifacts if names is None or a["name"] in names]
    kept = {a["name"] for a in entries}
    specs = {k: v for k, v in m.specs.items() if k in kept}
    total = sum(a["size"] for a in entries)
    from .packing import should_pack, write_packed
    if should_pack(pack, entries):
        write_packed(m, entries, stage)
    else:
        for a in entries:
            dest = stage / a["path"]
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(m.path_of(a), dest)
    extra: dict[str, Any] = {"sms": list(info.get("sms", []))}
    if m.legacy:  # cccl-legacy answers (cuda-cccl < 1.1): every one the set lists, whatever ``names``
        from ..build.legacy_set import FIELD, copy_answers, entries as answers, to_json
        copy_answers({a["path"]: m.path_of(a) for a in answers(m.legacy)}, stage)
        total += sum(a["size"] for a in answers(m.legacy))
        extra[FIELD] = to_json(m.legacy)
    if m.key_schemas is not None:  # the schemas its keys were made by (aot.core.keyschemas)
        extra["key_schemas"] = dict(m.key_schemas)
    if m.producers:  # a set of several cuda-cccl releases: each entry's producer stays known
        extra["producers"] = {k: dict(v) for k, v in m.producers.items()}
    write_manifest(stage, producer=m.producer, specs=specs, artifacts=entries, extra=extra)
    (stage / INFO_NAME).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
    return len(entries), total
