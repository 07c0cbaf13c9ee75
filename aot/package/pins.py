"""What a wheel carrying artifacts requires (:func:`required_pins`: aot's runtime, the union of the cuda-cccl
releases its CCCL blobs were built under, the CUDA major's bindings), and the pin check: whether a project's
declared requirements, its extras' included, can install beside them (:func:`pin_problems`).
"""

from __future__ import annotations

import functools
from typing import Any, Iterable, Mapping, Sequence

from ..core.manifest import cccl_specifier, release_order


#: The runtime distribution of one CUDA major (``.ci/variant.py`` names it); the import package stays ``aot``.
RUNTIME_DIST = "cccl-aot-cu{major}"


def _aot_range(version: str) -> str:
    """The aot versions that load artifacts of ``version``: the same release series (format version 1), from
    ``version`` up: ``>=0.1.0,<0.2`` (0.x: the minor), ``>=1.2.0,<2`` (else the major)."""
    from packaging.version import Version
    release = Version(version).release + (0, 0)
    upper = f"0.{release[1] + 1}" if release[0] == 0 else str(release[0] + 1)
    return f">={version},<{upper}"


def has_cccl(artifacts: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a set's manifest entries hold a cuda.compute (CCCL) artifact: only then does a wheel carrying
    it need cuda-cccl (a blob loads only under the exact cuda-cccl that built it)."""
    return any(a.get("family") == "cccl" for a in artifacts)


def known_releases() -> tuple[str, ...]:
    """The cuda-cccl releases a blob can be built under (:data:`cccl_patches.CHECKED`)."""
    from cccl_patches import VERIFIED_CCCL_VERSIONS
    return VERIFIED_CCCL_VERSIONS


def cccl_pin(producer: Mapping[str, Any], releases: Sequence[str] | None = None) -> str:
    """``cuda-cccl`` with the releases a set's blobs load under (``releases``; default: ``producer``'s one):
    ``cuda-cccl==1.2.1``, or the union ``cuda-cccl>=1.1.0,<=1.2.1,!=1.1.1`` (:func:`cccl_specifier`)."""
    return "cuda-cccl" + cccl_specifier(list(releases or [str(producer["cuda_cccl"])]), known_releases())


def required_pins(producer: Mapping[str, Any], *, cccl: bool = True,
                  releases: Sequence[str] | None = None) -> list[str]:
    """What a wheel carrying artifacts from ``producer`` requires to *load* them, and nothing more (no
    compiler): aot's runtime of that CUDA major, the cuda-cccl releases its blobs were built under
    (:func:`cccl_pin`; ``cccl``: only where the set holds a CCCL artifact), without the ``cuXX`` extra that
    pulls the toolkit, and that major's cuda-bindings."""
    from ..core.version import __version__
    major = int(str(producer["cuda_major"]))
    runtime = RUNTIME_DIST.format(major=major) + _aot_range(str(producer.get("aot") or __version__))
    return [runtime, *([cccl_pin(producer, releases)] if cccl else []), f"cuda-bindings>={major},<{major + 1}"]


def jit_requirement(producer: Mapping[str, Any], *, cccl: bool = True) -> str:
    """The opt-in JIT fallback (the CUDA toolkit through aot's ``[jit]`` extra; ``[jit-nvrtc]``, NVRTC alone
    and no cuda-cccl, for a set of NVRTC units only), for the package's own ``jit`` extra:
    ``cccl-aot-cu13[jit]>=0.1.0,<0.2``."""
    runtime = required_pins(producer, cccl=cccl)[0]
    name = RUNTIME_DIST.format(major=int(str(producer["cuda_major"])))
    return f"{name}[{'jit' if cccl else 'jit-nvrtc'}]{runtime[len(name):]}"


def jit_requirements(info: Mapping[str, Any]) -> list[str]:
    """Everything the package's own ``jit`` extra needs for the set ``info`` (its ``aot-package.json``) describes:
    aot's (:func:`jit_requirement`) and, where the set holds numba-cuda kernels, numba-cuda's own ``cuXX`` extra
    over the wheel's numba-cuda range: numba-cuda JIT-compiles through NVVM, which neither ``[jit-nvrtc]`` nor a
    plain numba-cuda install brings (``cccl-aot-cu13[jit-nvrtc]`` alone cannot compile a numba kernel)."""
    major = int(str(info["producer"]["cuda_major"]))
    numba = [f"numba-cuda[cu{major}]{r[len('numba-cuda'):]}" for r in info.get("requires", ())
             if str(r).startswith("numba-cuda") and str(r)[len("numba-cuda"):][:1] in "<>=!~"]
    return [str(info["jit"]), *numba]


def missing_jit_extra(jit: Sequence[str]) -> str:
    """What a build hook says about a project without a ``jit`` extra (``jit``: :func:`jit_requirements`)."""
    import re
    names = ", ".join(f'"{re.split(r"[<>=!~;]", r, maxsplit=1)[0]}"' for r in jit)
    return (f"no 'jit' extra, so users cannot opt into JIT fallback for GPUs the artifacts do not cover; add "
            f"jit = [{names}] to [project.optional-dependencies]")


def _release_probes(releases: Sequence[str]) -> list[str]:
    """Versions a declared cuda-cccl requirement is tried on: the known releases, the carried ones, and
    releases just outside the carried range (a patch, minor and major above the newest, and below the oldest),
    so that an open range (``>=1.2``) is seen to admit releases no blob was built for."""
    rels = sorted(set(releases), key=release_order)
    lo, hi = [int(x) for x in rels[0].split(".")[:3]], [int(x) for x in rels[-1].split(".")[:3]]
    lo += [0] * (3 - len(lo))
    hi += [0] * (3 - len(hi))
    above = [f"{hi[0]}.{hi[1]}.{hi[2] + 1}", f"{hi[0]}.{hi[1] + 1}.0", f"{hi[0] + 1}.0.0"]
    below = [f"{lo[0]}.{lo[1]}.{lo[2] - 1}" if lo[2] else None, f"{lo[0]}.{lo[1] - 1}.99" if lo[1] else None,
             f"{lo[0] - 1}.99.99" if lo[0] else None]
    return sorted({*known_releases(), *rels, *above, *(b for b in below if b)}, key=release_order)


@functools.lru_cache(maxsize=1)
def _environments() -> tuple[dict[str, str], ...]:
    """Environments a wheel may be installed in, for evaluating requirement markers: CPython and PyPy 3.8-3.15
    on Linux (x86_64, aarch64), Windows and macOS, and the build host's own. A marker is not evaluated for the
    build host alone: ``; python_version >= "3.12"`` skipped on a 3.11 build host shipped a wheel that cannot
    install on 3.12."""
    from packaging.markers import default_environment
    platforms = [("linux", "Linux", "x86_64", "posix"), ("linux", "Linux", "aarch64", "posix"),
                 ("win32", "Windows", "AMD64", "nt"), ("darwin", "Darwin", "arm64", "posix"),
                 ("darwin", "Darwin", "x86_64", "posix")]
    out: list[dict[str, str]] = [{str(k): str(v) for k, v in default_environment().items()}]
    for minor in range(8, 16):
        for sys_platform, system, machine, os_name in platforms:
            for impl, impl_name in (("cpython", "CPython"), ("pypy", "PyPy")):
                out.append({"python_version": f"3.{minor}", "python_full_version": f"3.{minor}.0",
                            "sys_platform": sys_platform, "platform_system": system, "platform_machine": machine,
                            "os_name": os_name, "implementation_name": impl,
                            "platform_python_implementation": impl_name, "implementation_version": f"3.{minor}.0"})
    return tuple(out)


def _applies_somewhere(req: Any, extra: str) -> bool:
    """Whether ``req`` (a :class:`packaging.requirements.Requirement` of ``extra``, "" for the project's own)
    applies in any environment of :func:`_environments`: then it is checked as if everywhere."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**env, "extra": extra}) for env in _environments())


def pin_problems(dependencies: Iterable[str], producer: Mapping[str, Any], *, require: bool = True,
                 cccl: bool = True, releases: Sequence[str] | None = None,
                 optional: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """Why the project's requirements cannot ship artifacts from ``producer``; empty if they can. Each problem
    is one line naming where the requirement is (``[project] dependencies`` or ``[project.optional-dependencies]
    <extra>``) and the requirement. ``dependencies``: ``[project].dependencies``; ``optional``: every extra's
    (``[project.optional-dependencies]``), read too: an extra that cannot install beside the artifacts is a
    wheel nobody can install with it. ``require``: a missing cuda-cccl pin or aot runtime is a problem (the
    hatch hook adds them instead). ``cccl``: the set holds a CCCL artifact; without one, any cuda-cccl the
    project declares (or none) is fine. ``releases``: the cuda-cccl releases its blobs were built under
    (default: ``producer``'s).

    The rule (the hook, these messages and the manual (docs/downstream.md) say the same): the wheel requires
    :func:`required_pins`. A cuda-cccl requirement that admits none of ``releases`` can never install beside
    them; in ``[project] dependencies`` with ``require`` (the project writes the pin itself) it must admit only
    those releases (a ``cuda-cccl[cuXX]`` extra, the project's own toolkit, is fine). Another CUDA major, or an
    aot range without the version that built them, is refused too. A requirement with a marker is checked if the
    marker holds in any environment the wheel may be installed in (:func:`_environments`), and a URL reference
    for a pinned package (cuda-cccl, the aot runtime, cuda-bindings) is refused: no version to check."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    major = int(str(producer["cuda_major"]))
    rels = sorted(set(releases or [str(producer["cuda_cccl"])]), key=release_order)
    pins = required_pins(producer, cccl=cccl, releases=rels)
    runtime_pin, pin = pins[0], (pins[1] if cccl else "")
    runtime = RUNTIME_DIST.format(major=major)
    built_by = str(producer.get("aot") or "")
    problems, seen_cccl, seen_runtime = [], False, False
    declare = {runtime: runtime_pin, "cuda-bindings": pins[-1], **({"cuda-cccl": pin} if cccl else {})}
    groups = [("[project] dependencies", "", list(dependencies))]
    groups += [(f"[project.optional-dependencies] {x}", x, list(v)) for x, v in sorted((optional or {}).items())]
    for where, extra, texts in groups:
        own = not extra
        for text in texts:
            try:
                req = Requirement(text)
            except InvalidRequirement as e:
                problems.append(f"{where}: unreadable requirement {text!r}: {e}")
                continue
            if not _applies_somewhere(req, extra):
                continue
            name = canonicalize_name(req.name)
            if req.url and name in declare:  # no version to check: any release could come from it
                seen_cccl = seen_cccl or (own and name == "cuda-cccl")
                seen_runtime = seen_runtime or (own and name == runtime)
                problems.append(f"{where}: {text!r}: a URL reference, whose version this check cannot see; the "
                                f"artifacts need {declare[name]} from a package index: declare \"{declare[name]}\"")
                continue
            wrong_major = sorted(x for x in req.extras if x in ("cu12", "cu13") and x != f"cu{major}")
            if name == "cuda-cccl":
                seen_cccl = seen_cccl or own
                if not cccl:
                    continue  # NVRTC units only: the project's own cuda-cccl, whichever it is, is not ours to judge
                admitted = [v for v in _release_probes(rels) if req.specifier.contains(v, prereleases=True)]
                carried = [v for v in admitted if v in rels]
                one = len(rels) == 1
                built = (f"cuda-cccl {rels[0]} and load only under exactly that version" if one else
                         f"cuda-cccl {', '.join(rels)} and load only under one of those")
                if not carried:
                    problems.append(f"{where}: {text!r} admits no cuda-cccl the artifacts load under: they were "
                                    f"built with {built}; declare \"{pin}\"")
                elif own and require and len(carried) != len(admitted):
                    problems.append(f"{where}: {text!r} admits cuda-cccl "
                                    f"{', '.join(v for v in admitted if v not in rels)}: the artifacts were built "
                                    f"with {built}; declare \"{pin}\"")
                if wrong_major:
                    problems.append(f"{where}: {text!r}: the artifacts are for CUDA {major}, not "
                                    f"{', '.join(wrong_major)}")
            elif name in ("cccl-aot", "cccl-aot-cu12", "cccl-aot-cu13"):
                seen_runtime = seen_runtime or own
                if name != runtime:
                    problems.append(f"{where}: {text!r}: the artifacts are for CUDA {major}, whose aot runtime is "
                                    f"{runtime}; declare \"{runtime_pin}\"")
                elif built_by and not req.specifier.contains(built_by, prereleases=True):
                    problems.append(f"{where}: {text!r}: excludes aot {built_by}, which built the artifacts; "
                                    f"declare \"{runtime_pin}\"")
            elif name in ("cuda-core", "cuda-bindings", "cuda-python"):
                if wrong_major:
                    problems.append(f"{where}: {text!r}: the artifacts are for CUDA {major}, not "
                                    f"{', '.join(wrong_major)}")
                if name != "cuda-core" and not any(req.specifier.contains(v, prereleases=True)
                                                  for v in (f"{major}.0", f"{major}.9.99")):
                    problems.append(f"{where}: {text!r}: excludes CUDA {major}, which the artifacts need")
    if require and cccl and not seen_cccl:
        problems.append(f"[project] dependencies: no cuda-cccl pin: a wheel carrying these artifacts must require "
                        f"the cuda-cccl releases that built them; add \"{pin}\"")
    if require and not seen_runtime:
        problems.append(f"[project] dependencies: no aot runtime: the package loads its artifacts with aot; add "
                        f"\"{runtime_pin}\"")
    return problems
