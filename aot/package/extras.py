"""A project with a ``cu12`` and a ``cu13`` extra: where a wheel's pins go, which requirements conflict, and
the check that runs before anything compiles.

Libraries of the CUDA Python stack (cuda-cccl, numba-cuda, cuda-core, nvmath-python) ship ONE wheel per
platform and let the user pick the CUDA major with an extra: ``pip install "lib[cu13]"``. The index holds one
wheel per (version, tag), so the major cannot be chosen by the wheel; it is chosen by the extra, and every
major-specific requirement sits under its extra's marker. A wheel built with aot's hook follows that shape
(:func:`marked_pins`): the artifacts' pins under the extra of the CUDA major they were built for
(``cuda-bindings>=13,<14; extra == "cu13"``), aot's runtime of every other major under that major's extra
(``cccl-aot-cu12>=0.1.0,<0.2; extra == "cu12"``), so both extras resolve; under the other major the loader refuses
the artifacts of this one and the library JIT-compiles, as it does for any GPU the wheel does not cover. A set of
several majors (``aot merge`` of builds under each, :mod:`aot.core.majorset`) carries each major's artifacts, and
each major's pins go under its extra (:func:`marked_pins_majors`, :func:`pin_conflicts_majors`); both build
backends add what :func:`wheel_requirements` says.

The pin check (:func:`pin_conflicts`) reads each major extra against its own major, the base dependencies
against every major (they are in every install) and every other extra against the artifacts' major, and lists
every conflict, each naming its extra (:func:`conflict_message`). :func:`precheck` runs it before the build
from what the build will record (the toolchain's versions, whether the matrix holds a CCCL spec, the cuda-cccl
releases of the sets merged in), so a conflict costs seconds, not the build.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from .pins import RUNTIME_DIST, _aot_range, pin_problems, required_pins
from ..core.errors import AotError

#: The extras that pick a CUDA major, as cuda-cccl, numba-cuda and cuda-core name theirs.
MAJOR_EXTRAS = {"cu12": 12, "cu13": 13}
_RUNTIMES = {RUNTIME_DIST.format(major=m) for m in MAJOR_EXTRAS.values()} | {"cccl-aot"}


class PinError(AotError):
    """The project's declared dependencies do not match the artifacts it would ship (exit 2)."""

    return_code = 2


def major_extras(optional: Mapping[str, Iterable[str]] | None) -> tuple[int, ...]:
    """The CUDA majors the project has an extra for (``cu12``, ``cu13``), sorted; ``()``: none."""
    return tuple(sorted(m for name, m in MAJOR_EXTRAS.items() if name in (optional or {})))


def marked_pins(pins: Sequence[str], producer: Mapping[str, Any], majors: Sequence[int],
                neutral: Sequence[str] = ()) -> list[str]:
    """The requirements the hook adds to the wheel. Without major extras: ``pins`` and ``neutral`` as they are.
    With them: ``pins`` (the artifacts' major's runtime, cuda-cccl, bindings) under that major's extra marker,
    aot's runtime of each other major under its own, ``neutral`` (a numba-cuda range: no major) unmarked."""
    if not majors:
        return [*pins, *neutral]
    return marked_pins_majors({int(str(producer["cuda_major"])): pins}, str(producer.get("aot") or _version()),
                              majors, neutral)


def marked_pins_majors(pins: Mapping[int, Sequence[str]], aot: str, majors: Sequence[int],
                       neutral: Sequence[str] = ()) -> list[str]:
    """Each carried major's ``pins`` under its extra's marker (a set of several majors carries several), aot's
    runtime (of release ``aot``'s series) of each major the set does not carry under its own, ``neutral`` unmarked."""
    out = [f'{p}; extra == "cu{m}"' for m, ps in pins.items() for p in ps]
    out += [f'{RUNTIME_DIST.format(major=m)}{_aot_range(aot)}; extra == "cu{m}"' for m in majors if m not in pins]
    return [*out, *neutral]


def pin_conflicts_majors(dependencies: Iterable[str], parts: Mapping[int, tuple[Mapping[str, Any], bool, Any]], *,
                         require: bool = True, optional: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """:func:`pin_conflicts` for a set of several CUDA majors (``parts``: major -> (producer, holds a CCCL blob,
    cuda-cccl releases)): each major's set is read as the artifacts of its extra, every conflict of every major
    listed once. Without ``cuXX`` extras such a set cannot ship: nothing would pick the major."""
    extras = {k: list(v) for k, v in (optional or {}).items()}
    deps = list(dependencies)
    if not major_extras(extras):
        carried = " and ".join(str(m) for m in sorted(parts))
        return [f"[project.optional-dependencies]: the artifacts are for CUDA {carried}, one set each, and the "
                f"project has no {' or '.join(repr(f'cu{m}') for m in sorted(parts))} extra to pick the major: add "
                f"them (cu12 = [...], cu13 = [...]), or bundle one major's set"]
    problems: list[str] = []
    for _, (producer, cccl, releases) in sorted(parts.items()):
        problems += pin_conflicts(deps, producer, require=require, cccl=cccl, releases=releases, optional=extras)
    return list(dict.fromkeys(problems))


def wheel_requirements(res: Any, dependencies: Iterable[str], optional: Mapping[str, Iterable[str]] | None
                       ) -> tuple[list[str], list[str], str | None]:
    """What a build backend does with a bundle ``res`` (:class:`aot.package.bundle.BundleResult`) for a project
    declaring ``dependencies`` and ``optional`` (the hatchling hook and the setuptools backend alike): (every
    conflict, the requirements to add to the wheel, a warning or ``None``). Always the pins (an unpinned
    ``cccl-aot-cu13`` gets its range); with cu12/cu13 extras each major's under its extra, and no ``jit`` line
    (the project's own extras name each major's toolchain); else the ``jit`` extra's, or a warning without one."""
    from .pins import jit_requirements, missing_jit_extra
    extras = {k: list(v) for k, v in (optional or {}).items()}
    deps = list(dependencies)
    parts = dict(res.majors) or {int(str(res.info["producer"]["cuda_major"])): res}
    if res.majors:
        problems = pin_conflicts_majors(deps, {m: (r.info["producer"], r.cccl, r.releases) for m, r in parts.items()},
                                        require=False, optional=extras)
    else:
        problems = pin_conflicts(deps, res.info["producer"], require=False, cccl=res.cccl, releases=res.releases,
                                 optional=extras)
    numba = list(dict.fromkeys(p for r in parts.values() for p in r.pins if p.startswith("numba-cuda")))
    majors = major_extras(extras)
    if res.majors and not majors:
        return problems, [], None  # said in problems: nothing would pick the major
    if majors:
        aot = str(next(iter(parts.values())).info["producer"].get("aot") or _version())
        pins = {m: [p for p in r.pins if p not in numba] for m, r in parts.items()}
        return problems, marked_pins_majors(pins, aot, majors, numba), None
    requires = [*(p for p in res.pins if p not in numba), *numba]
    jit = jit_requirements(res.info)  # NVRTC units only: no cuda-cccl; numba kernels: numba-cuda's NVVM too
    if "jit" in extras:  # a build hook cannot add Provides-Extra itself
        return problems, requires + [f'{r}; extra == "jit"' for r in jit], None
    return problems, requires, missing_jit_extra(jit)


def _version() -> str:
    from ..core.version import __version__
    return __version__


def _other_major(where: str, texts: Iterable[str], major: int, extra: str, built_by: str,
                 base: bool) -> list[str]:
    """Requirements that cannot install with ``cu<major>`` (an install of that major: the artifacts of the
    wheel are of another, so only the runtime and the major itself are at stake)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    runtime = RUNTIME_DIST.format(major=major)
    scope = f"an install with the {extra!r} extra (CUDA {major})"
    problems = []
    for text in texts:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue  # pin_problems names it once
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        other = sorted(x for x in req.extras if x in MAJOR_EXTRAS and x != extra)
        if name in _RUNTIMES and name != runtime:
            fix = (f"name each major's runtime in its own extra ({extra} = [\"{runtime}\"]), or leave them to the "
                   f"hook, which adds them" if base else f"declare \"{runtime}\"")
            problems.append(f"{where}: {text!r}: aot's runtime of another CUDA major, which {scope} cannot "
                            f"install beside {runtime}; {fix}")
        elif name == runtime and built_by and not req.specifier.contains(built_by, prereleases=True):
            problems.append(f"{where}: {text!r}: excludes aot {built_by}, which built the artifacts; declare "
                            f"\"{runtime}{_aot_range(built_by)}\"")
        elif other:
            problems.append(f"{where}: {text!r}: asks for CUDA {', '.join(x[2:] for x in other)}, which {scope} "
                            f"cannot have" + ("; move it to that major's extra" if base else ""))
        elif name in ("cuda-bindings", "cuda-python") and not any(
                req.specifier.contains(v, prereleases=True) for v in (f"{major}.0", f"{major}.9.99")):
            problems.append(f"{where}: {text!r}: excludes CUDA {major}, which {scope} needs"
                            + ("; move it to the extra of the major it admits" if base else ""))
    return problems


def pin_conflicts(dependencies: Iterable[str], producer: Mapping[str, Any], *, require: bool = True,
                  cccl: bool = True, releases: Sequence[str] | None = None,
                  optional: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """Every requirement of the project that cannot install beside the artifacts, one line each naming where
    it is; empty if none. Without major extras this is :func:`aot.package.pins.pin_problems`. With them, each
    ``cuXX`` extra is read as an install of that major: the artifacts' major's extra by ``pin_problems``, any
    other by :func:`_other_major`; the base dependencies against every major; the other extras against the
    artifacts' major. ``require``: the project writes the pins itself (static metadata), so the artifacts'
    major's extra must name its runtime, and cuda-cccl where a CCCL artifact is bundled."""
    extras: dict[str, list[str]] = {k: list(v) for k, v in (optional or {}).items()}
    majors = major_extras(extras)
    deps = list(dependencies)
    if not majors:
        return pin_problems(deps, producer, require=require, cccl=cccl, releases=releases, optional=extras)
    built = int(str(producer["cuda_major"]))
    built_by = str(producer.get("aot") or "")
    rest = {k: v for k, v in extras.items() if k not in MAJOR_EXTRAS}
    problems = pin_problems(deps, producer, require=False, cccl=cccl, releases=releases, optional=rest)
    mine = f"cu{built}"
    if built not in majors:
        problems.append(f"[project.optional-dependencies]: the artifacts are for CUDA {built}, and the project has "
                        f"no {mine!r} extra beside {', '.join(f'cu{m}' for m in majors)}: add one, or build under a "
                        f"CUDA major it has")
    else:
        problems += pin_problems([], producer, require=False, cccl=cccl, releases=releases,
                                 optional={mine: extras[mine]})
        if require:
            problems += _missing(deps + extras[mine], producer, cccl, releases, mine)
    for m in majors:
        if m != built:
            extra = f"cu{m}"
            problems += _other_major("[project] dependencies", deps, m, extra, built_by, base=True)
            problems += _other_major(f"[project.optional-dependencies] {extra}", extras[extra], m, extra,
                                     built_by, base=False)
    return list(dict.fromkeys(problems))


def _missing(texts: Sequence[str], producer: Mapping[str, Any], cccl: bool, releases: Sequence[str] | None,
             extra: str) -> list[str]:
    """With static metadata: the pins the artifacts' major's extra (with the base dependencies) must name."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    names = set()
    for text in texts:
        try:
            names.add(canonicalize_name(Requirement(text).name))
        except InvalidRequirement:
            continue
    pins = required_pins(producer, cccl=cccl, releases=releases)
    runtime = RUNTIME_DIST.format(major=int(str(producer["cuda_major"])))
    where = f"[project.optional-dependencies] {extra}"
    out = []
    if runtime not in names:
        out.append(f"{where}: no aot runtime: the package loads its artifacts with aot; add \"{pins[0]}\"")
    if cccl and "cuda-cccl" not in names:
        out.append(f"{where}: no cuda-cccl pin: a wheel carrying these artifacts must require the cuda-cccl "
                   f"releases that built them; add \"{pins[1]}\"")
    return out


def conflict_message(pyproject: object, problems: Sequence[str]) -> str:
    """One line for one conflict; for several, a count and each on its own line (none hidden behind
    "and N more": fixing them one build at a time cost a build each)."""
    if len(problems) == 1:
        return f"{pyproject}: {problems[0]}"
    return (f"{pyproject}: {len(problems)} requirements cannot install beside the artifacts:\n"
            + "\n".join(f"  {p}" for p in problems))


def planned_producer(cfg: Any, specs: Sequence[Any] | None = None) -> tuple[dict, bool, list[str] | None]:
    """What the build of ``cfg`` will record, read before it runs: (producer, holds a CCCL artifact,
    cuda-cccl releases). A prebuilt set's own manifest where there is one; else this toolchain's versions and
    the matrix's families (``specs``: the matrix already read); the releases of the sets merged in join the
    producer's."""
    from ..core.manifest import MANIFEST_NAME, load_manifest
    if specs is None:
        from ..build.matrix import load_matrix
        specs = load_matrix(cfg.matrix, import_parents=cfg.import_parents).specs
    names = {s.name for s in specs}
    pre = cfg.prebuilt_dir()
    if pre is not None and (pre / MANIFEST_NAME).is_file():
        m = load_manifest(pre)
        producer = dict(m.producer)
        cccl = any(a.get("family") == "cccl" and a["name"] in names for a in m.artifacts)
        rels = set(m.cccl_releases())
    else:
        from ..build.toolchain import versions
        producer = dict(versions())
        cccl = any(s.family == "cccl" for s in specs)
        rels = {str(producer.get("cuda_cccl"))} - {"missing", "None"}
    from ..core.majorset import read_index
    for extra in cfg.merge_dirs():  # another CUDA major's set: its own extra's pins, checked after the merge
        if (extra / MANIFEST_NAME).is_file() and read_index(extra) is None:
            other = load_manifest(extra)
            if str(other.producer.get("cuda_major")) == str(producer.get("cuda_major")):
                rels |= set(other.cccl_releases())
    from ..core.manifest import release_order
    return producer, cccl, sorted(rels, key=release_order) or None


def precheck(cfg: Any, dependencies: Iterable[str], optional: Mapping[str, Iterable[str]], *,
             require: bool, specs: Sequence[Any] | None = None) -> None:
    """Raise :class:`PinError` listing every conflict of the project's requirements with
    the artifacts its build will make, before anything compiles."""
    from ..core.majorset import major_dir, read_index
    pre = cfg.prebuilt_dir()
    majors = read_index(pre) if pre is not None else None
    if majors is not None:  # a prebuilt set of several CUDA majors: each major's, under its extra
        from ..core.manifest import load_manifest
        if specs is None:
            from ..build.matrix import load_matrix
            specs = load_matrix(cfg.matrix, import_parents=cfg.import_parents).specs
        names = {s.name for s in specs}
        parts = {}
        for m in majors:
            one = load_manifest(pre / major_dir(m))
            cccl_m = any(a.get("family") == "cccl" and a["name"] in names for a in one.artifacts)
            parts[m] = (one.producer, cccl_m, list(one.cccl_releases()) or None)
        problems = pin_conflicts_majors(dependencies, parts, require=require, optional=optional)
        if problems:
            raise PinError(conflict_message(cfg.pyproject, problems))
        return
    producer, cccl, releases = planned_producer(cfg, specs)
    if cccl and not releases:
        return  # a CCCL spec without cuda-cccl: the build refuses it in one line of its own
    problems = pin_conflicts(dependencies, producer, require=require, cccl=cccl, releases=releases,
                             optional=optional)
    if problems:
        raise PinError(conflict_message(cfg.pyproject, problems))
