"""Verification: integrity of an artifact set (CPU), and correctness of every artifact on a GPU.

``verify_integrity`` is what ``aot verify DIR|WHEEL`` runs anywhere: every manifest entry present, sizes
and sha256 right, headers well-formed and consistent with their entries, one producer for the set, and
each NVRTC entry's lookup keys (``source_key``, ``progkey``) computed again from its own unit
(:mod:`aot.verify.keys`).
``verify_gpu`` executes each artifact this GPU can load (not only the loader's first choice: a PTX
fallback is checked too) against the numpy references of :mod:`aot.verify.reference`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from ..core import format as fmt
from ..core.errors import ArtifactError
from ..core.manifest import load_manifest, verify_files
from ..core.spec import _NOT_IN_KEY
from ..core.numbaspec import twin_base
from .keys import key_problems


#: Producer fields a CuPy artifact's content key leaves out (:data:`aot.core.spec._NOT_IN_KEY`).
STACK_MAY_DIFFER = _NOT_IN_KEY["cupy"]


def verify_integrity(root: str | Path) -> tuple[int, list[str]]:
    """(number of artifacts checked, problems). Problems name the file and what is wrong."""
    try:
        m = load_manifest(root)
    except ArtifactError as e:
        return 0, [str(e)]
    problems = verify_files(m)
    bad_paths = {p.split(":")[0] for p in problems}
    for entry in m.artifacts:
        if entry["path"] in bad_paths:
            continue
        try:
            if "pack" in entry:  # inside a pack (aot.core.pack): its path names the member
                from ..core.pack import read_member
                art = fmt.decode(read_member(m, entry))
            else:
                art = fmt.read(m.path_of(entry))
        except ArtifactError as e:
            problems.append(str(e) if "pack" not in entry else f"{entry['path']}: {e}")
            continue
        h = art.header
        for key, hkey in (("name", "name"), ("family", "family"), ("sm", "sm"), ("payload_kind", "payload_kind"),
                          ("content_key", "content_key")):
            if entry[key] != h[hkey]:
                problems.append(f"{entry['path']}: header {hkey}={h[hkey]!r} but manifest says {entry[key]!r}")
        made_by = m.producer_of(entry)  # a set of several cuda-cccl releases: the entry's release's producer
        # a CuPy set of several stacks (aot.build.merge_cupy): what its key leaves out may differ per artifact
        free = STACK_MAY_DIFFER if entry["family"] == "cupy" else ()
        for k in fmt.PRODUCER_FIELDS:
            if k not in free and str(h["producer"].get(k)) != str(made_by.get(k)):
                problems.append(f"{entry['path']}: produced by {k} {h['producer'].get(k)}, the set by "
                                f"{made_by.get(k)}")
    problems += key_problems(m)
    from .legacy import legacy_problems
    problems += legacy_problems(m, bad_paths)
    return len(m.artifacts) + sum(len(r.answers) for r in m.legacy.values()), problems


#: The status of a row whose artifact was loaded but whose check could not run (no check, or a reference
#: that would import code a manifest from elsewhere names).
UNRUN = "loaded, not executed"


def current_device():
    """The current cuda.core ``Device`` (made current): the one GPU step the CPU tests replace."""
    from cuda.core import Device  # function-level: cuda.core's import is the GPU path's cost alone
    device = Device()
    device.set_current()
    return device


def code_references(spec) -> set[str]:
    """Every operator-from-code reference ``"pkg.mod:func"`` the numpy check of ``spec`` could import: its
    operators from code (``spec.code``) and any reference anywhere in its parameters (a C++ operator's
    ``reference``, an iterator's transform), found by walking them all, so no field is forgotten."""
    from ..core.oplang import code_ref_problem, is_code_ref
    refs = set(getattr(spec, "code", {}) or {})
    todo: list = [getattr(spec, "params", {})]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            todo.extend(v.values())
        elif isinstance(v, (list, tuple)):
            todo.extend(v)
        elif is_code_ref(v) and code_ref_problem(v) is None:
            refs.add(v)
    return refs


def reference_refusal(registry, spec) -> str | None:
    """Why the check of ``spec`` must not run its numpy reference, or ``None``. A reference from code is
    imported (so run) only for the caller's own specs (``verify --matrix``) or inside the package that owns
    the artifacts (``verify --package``): a manifest from elsewhere never makes aot import a module, not
    even one the current folder or the artifact set holds. Loading its artifacts imports nothing."""
    from ..core.opref import inside
    refs = code_references(spec)
    if not refs:
        return None
    cat = registry._catalog()
    if spec.name in cat.trusted:
        return None
    owner = registry._owner
    foreign = sorted(r for r in refs if owner is None or not inside(r, owner))
    if foreign:
        return (f"its reference {foreign[0]!r} is code named by {cat.root}/manifest.json, not imported (a "
                f"manifest from elsewhere never makes aot import a module); pass --matrix (your own matrix) or "
                f"--package (the package that owns these artifacts) to run it")
    return None


@dataclass
class GpuRow:
    spec: str
    family: str
    sm: int | None
    kind: str
    source: str
    ok: bool
    ms: float
    detail: str = ""
    status: str = ""  # "ok" | "failed" | "loaded, not executed" (an NVRTC unit with no check)
    #: A failed comparison's facts (:meth:`aot.verify.compare.Mismatch.to_json`: what, count, total, index,
    #: got, want, reason); None for other failures (an exception: ``detail`` says it).
    failure: dict | None = None

    def __post_init__(self):
        if not self.status:
            self.status = "ok" if self.ok else "failed"

    def failure_line(self) -> str:
        """One line saying where and what failed: spec, SM and kind, then the comparison's message."""
        where = f"{self.spec} {'sm_' + str(self.sm) if self.sm else '-'} {self.kind}"
        return f"{where}: {' | '.join(self.detail.splitlines()) or self.status}"


def verify_gpu(registry, names: Iterable[str] | None = None, *, checks: dict[str, str] | None = None,
               package: str | None = None, on_spec: Callable[[str, bool], None] | None = None,
               launches: tuple[Any, dict[str, dict]] | None = None, replays: list | None = None,
               runner: Callable | None = None) -> list[GpuRow]:
    """Run every spec (each loadable packaged artifact, else the loader's cache/JIT choice) on this GPU.

    NVRTC units: aot's bundled units have references here; a package's own unit runs the check its
    ``[tool.aot] checks`` names (``checks``: unit -> "pkg.mod:func", resolved only inside ``package``).
    A unit with neither is loaded (every kernel) but not executed: its row says so, and is not "ok".
    numba-cuda kernels run their package's check through a copy of their dispatcher
    (:mod:`aot.verify.numba_gate`); without one, or without ``package``, they are loaded, not executed.
    ``on_spec(name, done)`` is called before (False) and after (True) each spec (the CLI's progress bar).
    ``launches`` (folder, index: :mod:`aot.verify.launches`): a numba kernel without a check replays the launch
    ``aot record`` kept for it through its dispatcher (with ``package``). ``replays``
    (:func:`aot.verify.replay.read_store`): an NVRTC unit or numba kernel with neither replays the recorded
    launches of its kernels against the artifact under test, importing nothing (``runner(device)`` runs them:
    :class:`aot.verify.replay.CudaCoreRunner`); with none either, its row is "loaded, not executed"."""
    progress = on_spec or (lambda name, done: None)
    from .context import check_cccl
    from .compare import Mismatch, NoReference
    from .bound import only_code
    from .units import CheckContext, check_kernel, resolve_check
    from ..core.spec import CcclSpec, NumbaKernel
    device_sm = registry.device_sm()  # raises NoDeviceError (exit 6) when there is no usable GPU
    device = current_device()
    rows: list[GpuRow] = []
    for name in (list(names) if names is not None else registry.names()):
        progress(name, False)
        spec = registry.spec(name)
        cands = registry.packaged_candidates(spec, device_sm)
        targets = [(c.ref, c.sm, c.kind) for c in cands] or [(None, None, "loader")]
        for entry, sm, kind in targets:
            t0 = time.perf_counter()
            source = "packaged"
            try:
                if spec.family in ("cupy", "triton"):  # served at the library's own compile call / launch
                    rows.append(GpuRow(name, spec.family, sm, kind, source, True, 0.0,
                                       f"served at {'CuPy' if spec.family == 'cupy' else 'Triton'}'s own call, "
                                       f"not loaded here", status=UNRUN))
                    continue
                if isinstance(spec, NumbaKernel):  # through a copy of its own @cuda.jit dispatcher
                    from .numba_gate import check_numba_artifact
                    if entry is None:
                        source, kind = "jit", "numba-cuda"
                    cname = name if checks and name in checks else twin_base(name)  # a fastmath twin: its base's
                    fn = resolve_check(checks[cname], package) if checks and cname in checks and package else None
                    lname = name if launches is not None and name in launches[1] else twin_base(name)
                    if fn is None and launches is not None and lname in launches[1] and package is not None:
                        from .launches import launch_check
                        fn = launch_check(launches[0], launches[1][lname])
                    done = _replayed(registry, spec, entry, None, replays, runner, device) \
                        if fn is None and replays and entry is not None else None
                    if done:
                        rows.append(GpuRow(name, spec.family, sm, kind, source, True,
                                           (time.perf_counter() - t0) * 1e3, done[1], status=done[0]))
                        continue
                    status, detail = check_numba_artifact(registry, spec, entry, sm, kind, device_sm, fn, package)
                    rows.append(GpuRow(name, spec.family, sm, kind, source, True, (time.perf_counter() - t0) * 1e3,
                                       detail, status=status))
                    continue
                if entry is not None:
                    loaded = registry.open_packaged(spec, entry, registry.manifest.path_of(entry), device_sm)
                    obj = loaded.obj
                else:
                    loaded = registry._load(name)
                    source, sm, kind = loaded.source, loaded.sm, loaded.kind
                    obj = registry.cccl(name) if isinstance(spec, CcclSpec) else loaded.obj
                if isinstance(spec, CcclSpec):
                    refusal = reference_refusal(registry, spec)
                    if refusal:  # the check would import what a manifest from elsewhere names: load only
                        rows.append(GpuRow(name, spec.family, sm, kind, source, True,
                                           (time.perf_counter() - t0) * 1e3, refusal, status=UNRUN))
                        continue
                    if spec.code:  # inside the owner: the operator's source must still be the one built
                        problem = registry._code_spec(spec)[1]
                        if problem:
                            raise NoReference(problem)
                    from ..runtime.loader.objects import CcclAlgorithm
                    if not isinstance(obj, CcclAlgorithm):
                        obj = CcclAlgorithm(spec, obj)
                    with only_code(code_references(spec)):
                        check_cccl(obj, spec, device)
                elif checks and name in checks:
                    if package is None:
                        raise NoReference(f"check {checks[name]!r} runs only from its package (--package)")
                    fn = resolve_check(checks[name], package)
                    fn(CheckContext({k: obj.get_kernel(k) for k in spec.kernels}, device))
                else:
                    try:
                        check_kernel(obj.get_kernel, spec, device)
                    except NoReference:
                        kernels = {k: obj.get_kernel(k) for k in spec.kernels}
                        done = _replayed(registry, spec, entry, kernels, replays, runner, device) \
                            if replays else None
                        if done:
                            rows.append(GpuRow(name, spec.family, sm, kind, source, True,
                                               (time.perf_counter() - t0) * 1e3, done[1], status=done[0]))
                            continue
                        rows.append(GpuRow(name, spec.family, sm, kind, source, True,
                                           (time.perf_counter() - t0) * 1e3, "no check for this unit "
                                           "([tool.aot] checks)" + (" and no recorded launch of its kernels"
                                                                    if replays is not None else ""),
                                           status=UNRUN))
                        continue
                rows.append(GpuRow(name, spec.family, sm, kind, source, True, (time.perf_counter() - t0) * 1e3))
            except Exception as e:  # noqa: BLE001 - every failure is a row in the table
                mismatch = isinstance(e, Mismatch)
                rows.append(GpuRow(name, spec.family, sm, kind, source, False, (time.perf_counter() - t0) * 1e3,
                                   str(e) if mismatch else f"{type(e).__name__}: {e}",
                                   failure=e.to_json() if isinstance(e, Mismatch) else None))
        progress(name, True)
    return rows


def _replayed(registry, spec, entry, kernels: dict | None, launches: list | None, runner: Callable | None,
              device) -> tuple[str, str] | None:
    """Replay the recorded launches of ``spec``'s kernels (:mod:`aot.verify.replay`) against the artifact under
    test: ``kernels`` (an NVRTC unit's, name -> cuda.core Kernel) or, for a numba kernel, the packaged
    ``entry``'s image loaded by its entry symbol. The row's (status, detail), or None when no launch is of it.
    A mismatch raises :class:`aot.verify.compare.Mismatch` (a failed row), unless another spec of the set
    claims the launch too (:func:`aot.verify.replay.claimants`): then the row is unchecked, saying so."""
    from .compare import Mismatch
    from .replay import CudaCoreRunner, claimants, kernel_symbol, matching, replay
    if kernels is None:  # numba: the packaged image by its entry symbol; nothing of the package is imported
        from cuda.core import ObjectCode
        from ..runtime.loader.sources import check_packaged
        art = check_packaged(registry.manifest, spec, entry, registry.manifest.path_of(entry))
        symbol = str(art.header.get("entry"))
        hits = matching(launches or (), [symbol], spec)
        if not hits:
            return None
        image = ObjectCode.from_cubin(art.payload) if art.kind == "cubin" else ObjectCode.from_ptx(art.payload)
        by_symbol = {x.symbol: image.get_kernel(symbol) for x in hits}
    else:
        layouts = {k: kernel_symbol(k) for k in kernels.values()}
        by_symbol = {sym: k for k, (sym, _) in layouts.items()}
        hits = matching(launches or (), dict(layouts.values()))
        if not hits:
            return None
    make = runner or CudaCoreRunner
    ambiguous = []
    for launch in hits:
        try:
            replay(launch, by_symbol[launch.symbol], make(device))
        except Mismatch as e:
            others = [n for n in claimants(launch, (registry.spec(n) for n in registry.names())) if n != spec.name]
            if not others:
                raise
            ambiguous.append(f"launch {launch.index} of {launch.symbol} did not reproduce ({e}); "
                             f"{', '.join(others[:3])} name(s) that kernel too")
    if ambiguous:
        return UNRUN, "; ".join(ambiguous)
    return "ok", f"replayed {len(hits)} recorded launch(es)"


# ------------------------------------------------------------------------------------ coverage (CPU)
@dataclass
class Coverage:
    """Which (spec, SM) pairs of a matrix x SM list an artifact set holds."""

    sms: list[int]
    specs: dict[str, dict]            # name -> {"family", "sms": [...], "ptx": [...]}
    missing: list[str]                # "name sm_80 (cccl-blob)" for every absent item
    cuda_major: str
    cuda_cccl: str

    @property
    def complete(self) -> bool:
        return not self.missing

    def to_json(self) -> dict:
        return {"sms": self.sms, "specs": self.specs, "missing": self.missing, "complete": self.complete,
                "cuda_major": self.cuda_major, "cuda_cccl": self.cuda_cccl}


def coverage(m, specs: Iterable | None = None, sms: Iterable[int] | None = None) -> Coverage:
    """Coverage of manifest ``m`` against ``specs`` x ``sms`` (default: the specs and the SM list the manifest
    itself records). A matrix spec whose definition differs from the manifest's counts as missing: the
    loader would refuse those artifacts as stale."""
    from ..build.builder import plan
    from ..core.rules import spec_from_definition
    if specs is None:
        specs = []
        for d in m.specs.values():
            try:
                specs.append(spec_from_definition(d))
            except ValueError:
                continue
    specs = list(specs)
    if sms is None:
        sms = recorded_sms(m.root) or {a["sm"] for a in m.artifacts if a["payload_kind"] != "ptx"}
    sm_list = sorted(set(sms))
    have = {(a["name"], a["payload_kind"], a["sm"]) for a in m.artifacts}
    stale = set()
    for s in specs:
        d = m.specs.get(s.name)
        try:
            if d is None or spec_from_definition(d).content_key() != s.content_key():
                stale.add(s.name)
        except ValueError:
            stale.add(s.name)
    missing = [f"{it.spec.name} {'compute' if it.kind == 'ptx' else 'sm'}_{it.sm} ({it.kind})"
               + (" (stale: built from another definition)" if it.spec.name in stale and it.spec.name in m.specs
                  else "")
               for it in (plan(specs, sm_list) if specs and sm_list else [])
               if it.spec.name in stale or (it.spec.name, it.kind, it.sm) not in have]
    table: dict[str, dict] = {}
    for s in specs:
        got = [a for a in m.artifacts if a["name"] == s.name]
        table[s.name] = {"family": s.family,
                         "sms": sorted({a["sm"] for a in got if a["payload_kind"] != "ptx"}),
                         "ptx": sorted({a["sm"] for a in got if a["payload_kind"] == "ptx"})}
    return Coverage(sm_list, table, missing, str(m.producer.get("cuda_major")),
                    ", ".join(m.cccl_releases()) or str(m.producer.get("cuda_cccl")))


def _raw_manifest(root: Path) -> dict:
    """The manifest's top-level fields beyond :class:`aot.manifest.Manifest` (``sms``, ``shard``,
    ``incomplete``), read with the same bounded strict reader."""
    from ..core.format import _read_regular, loads_strict_json
    from ..core.manifest import MANIFEST_NAME, MAX_MANIFEST_LEN
    try:
        doc = loads_strict_json(_read_regular(Path(root) / MANIFEST_NAME, MAX_MANIFEST_LEN))
    except (OSError, ValueError, ArtifactError):
        return {}
    return doc if isinstance(doc, dict) else {}


def recorded_sms(root: Path) -> list[int]:
    """The SM list a build recorded in its manifest (empty if none or unreadable)."""
    sms = _raw_manifest(root).get("sms")
    return [s for s in sms if isinstance(s, int) and not isinstance(s, bool)] if isinstance(sms, list) else []


def check_for_wheel(root: str | Path, *, specs: Iterable | None = None, sms: Iterable[int] | None = None,
                    allow_partial: bool = False, here: bool = True) -> Coverage:
    """What ``verify --for-wheel`` and every bundle path require before a set ships: integrity, not a shard
    or an incomplete (``--keep-going``) build, this environment's CUDA major and cuda-cccl (``here=False``: a
    major's set in a set of several, pinned under its own extra: not this environment's), and every
    (spec, SM) of ``specs`` x ``sms`` present (unless ``allow_partial``). Raises VerificationError."""
    from ..core.versions import check_producer
    from ..core.errors import VerificationError
    root = Path(root)
    n, problems = verify_integrity(root)
    if problems:
        raise VerificationError(f"{root}: {len(problems)} problem(s) in {n} artifacts; first: {problems[0]}")
    m = load_manifest(root)
    raw = _raw_manifest(root)
    if raw.get("shard") or raw.get("incomplete"):
        raise VerificationError(f"{root}: a shard or incomplete build; merge the shards first (aot merge)")
    try:  # the loader's own rule: a wheel ships only what its pinned cuda-cccl and CUDA major can load
        # (a set of several cuda-cccl releases is pinned to their union, whichever is installed here; a set
        # without a CCCL blob needs no cuda-cccl at all: an end user's install of it has none)
        if here:
            check_producer(m.producer, "cccl" if len(m.cccl_releases()) == 1 else "nvrtc")
    except ArtifactError as e:
        raise VerificationError(f"{root}: not packageable here: {e}") from None
    cov = coverage(m, specs, sms)
    if cov.missing and not allow_partial:
        more = f" and {len(cov.missing) - 5} more" if len(cov.missing) > 5 else ""
        raise VerificationError(f"{root}: lacks {len(cov.missing)} of the (spec, SM) items it should cover: "
                                f"{', '.join(cov.missing[:5])}{more}; build them, or pass --allow-partial")
    return cov
