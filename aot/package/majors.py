"""Bundle a set of several CUDA majors (:mod:`aot.core.majorset`, made by ``aot merge`` of builds under each):
the wheel a project with a ``cu12`` and a ``cu13`` extra ships, warm for the users of both.

Each major's set is checked as a set of its own (:func:`aot.package.bundle.describe`: integrity, no shard, every
(spec, SM) of that major's SM list, ``[tool.aot] sm`` per major), pinned under its own extra (the pin check reads
each major's producer and cuda-cccl releases: :func:`aot.package.extras.pin_conflicts_majors`), and written to
``<folder>/cu<major>/`` with its own ``aot-package.json``; the index and an ``aot-package.json`` naming each
major's go on top. Only the build host's major is checked against the installed stack: the other's loads under
its own extra's pins, which the pin check holds to what built it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from .pkginfo import INFO_FORMAT, INFO_NAME, INFO_VERSION, BundleResult, carried_cccl, describe, fill_folder
from .config import AotConfig
from .extras import PinError, conflict_message, pin_conflicts_majors
from ..core.majorset import installed_major, major_dir, read_index, write_index
from ..core.manifest import load_manifest


def _sms(cfg: AotConfig, major: int, sms: list[int], here: bool) -> list[int]:
    """The SMs ``major``'s set must cover: ``sms`` (the bundle's, for this toolchain) for the build host's major,
    else ``[tool.aot] sm`` (or ``AOT_WHEEL_SM``) for that major."""
    from ..core.arch import parse_sm_list
    from ..core.errors import UsageError
    if here:
        return sms
    try:
        return parse_sm_list(cfg.sm_for(major).replace("native", "all"), cuda_major=major)
    except UsageError as e:
        raise UsageError(f"{cfg.pyproject}: [tool.aot] key 'sm' for cu{major}: {str(e).removeprefix('--sm: ')}") \
            from None


def bundle_majors(cfg: AotConfig, src: Path, out: Path, specs: Sequence[Any], sms: list[int], allow: bool,
                  require_pins: bool, built: bool, write: Callable[[Path, Callable], tuple[int, int]],
                  merged: bool = False) -> BundleResult:
    """Check and write the set of several majors at ``src`` into the package folder ``out`` (``sms``: the bundle's
    SM list, for the build host's major), swapped in by ``write`` (:func:`aot.package.bundle.write_swapped`).
    ``merged``: sets were merged in (``[tool.aot] merge``); each major carries the CuPy specs of its set that the
    matrix does not name, as :func:`aot.package.bundle.bundle` does for a set of one major (CuPy's generated code
    under another CuPy release is other specs)."""
    majors = read_index(src) or ()
    here = installed_major()
    sets = {m: load_manifest(src / major_dir(m)) for m in majors}
    names = {m: {sp.name for sp in specs} | ({a["name"] for a in s.artifacts if a["family"] == "cupy"} if merged
                                             else set()) for m, s in sets.items()}
    parts = {m: (s.producer, *carried_cccl(s, names[m])) for m, s in sets.items()}
    if "dependencies" not in cfg.dynamic:  # the hooks check what the backend computed themselves
        problems = pin_conflicts_majors(cfg.dependencies, parts, require=require_pins,
                                        optional=cfg.optional_dependencies)
        if problems:
            raise PinError(conflict_message(cfg.pyproject, problems))
    infos = {m: describe(cfg, s, specs, _sms(cfg, m, sms, str(m) == here), allow, here=str(m) == here)
             for m, s in sets.items()}
    top = {"format": INFO_FORMAT, "version": INFO_VERSION, "package": cfg.package, "folder": cfg.folder,
           "checks": dict(sorted(cfg.checks.items())), "majors": {str(m): i for m, i in infos.items()}}
    counts: dict[int, tuple[int, int]] = {}

    def fill(stage: Path) -> tuple[int, int]:
        import json
        for m in majors:
            (stage / major_dir(m)).mkdir()
            counts[m] = fill_folder(stage / major_dir(m), src / major_dir(m), infos[m], names[m], cfg.pack)
        write_index(stage, infos)
        (stage / INFO_NAME).write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
        return sum(n for n, _ in counts.values()), sum(b for _, b in counts.values())

    n, size = write(out, fill)
    each = {m: BundleResult(out / major_dir(m), *counts[m], infos[m], tuple(infos[m]["requires"]), built,
                            parts[m][1], tuple(parts[m][2] or ())) for m in majors}
    first = each[int(here)] if here.isdigit() and int(here) in each else each[majors[-1]]
    # the tag follows cuda-cccl's platforms where any major's set holds a CCCL blob (aot.package.tags)
    return BundleResult(out, n, size, top, tuple(p for r in each.values() for p in r.pins), built,
                        any(r.cccl for r in each.values()), first.releases, majors=each)
