"""The build driver: every (spec, SM) of a matrix, in worker processes, into artifacts + manifest + report.

Why processes: NVRTC and nvJitLink serialize across threads of one process (measured: 2 threads ~1x,
2 processes ~1.6-1.7x on 2 cores), and a worker is where the stand-in libcuda may be loaded without
touching the caller's process.

Commit protocol: the old ``manifest.json`` is removed first; each artifact is written atomically as it
completes; the new manifest is written last. A failed or interrupted build therefore never leaves a
manifest that names a missing or partial file. Unchanged items (same content key in the existing
artifact's header, payload intact) are reused, not rebuilt.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from ..core import format as fmt
from ..core.fs import atomic_write, sweep_temp
from ..core.log import get_logger
from .outlock import output_lock
from .progkeys import entry_fields
from .workers import _work, _worker_cupy_cache, _worker_init, signals_blocked, stop_pool
from ..core.errors import ArtifactError, BuildError, MatrixError, UsageError
from ..core.manifest import MAX_MANIFEST_LEN, remove_manifest, write_manifest
from ..core.keyschemas import SCHEMAS
from ..core.spec import CcclSpec, NvrtcUnit, Spec, item_key

if TYPE_CHECKING:  # the matrix reader needs PyYAML; a runtime-only `verify --for-wheel` imports this module
    from .matrix import Unreadable

REPORT_NAME = "build-report.json"

log = get_logger(__name__)


@dataclass(frozen=True, eq=False)  # identity hash: specs hold dicts
class Item:
    spec: Spec
    sm: int
    kind: str  # "cccl-blob" | "cubin" | "ptx"

    @property
    def rel_path(self) -> str:
        if self.kind == "cccl-blob":
            return f"cccl/{self.spec.name}/sm_{self.sm}.aot"
        if self.spec.family == "triton":  # one per Triton build: a wheel carries several (aot merge)
            return f"triton/{self.spec.name}/{getattr(self.spec, 'triton_build', '')[:16]}/sm_{self.sm}.cubin.aot"
        if self.kind == "cubin":
            return f"{self.spec.family}/{self.spec.name}/sm_{self.sm}.cubin.aot"
        return f"{self.spec.family}/{self.spec.name}/compute_{self.sm}.ptx.aot"

    def result(self, status: str, **kw) -> "ItemResult":
        return ItemResult(self.spec.name, self.spec.family, self.sm, self.kind, self.rel_path, status, **kw)

    @property
    def label(self) -> str:
        return f"{self.spec.name}@{'compute' if self.kind == 'ptx' else 'sm'}_{self.sm}"


@dataclass
class ItemResult:
    name: str
    family: str
    sm: int
    kind: str
    path: str
    status: str  # "hit" | "built" | "failed" | "cancelled"
    seconds: float = 0.0
    bytes: int = 0
    error: str | None = None


@dataclass
class BuildReport:
    out: str
    driver: str
    versions: dict
    jobs: int
    sms: list
    shard: str | None
    seconds: float = 0.0
    items: list = field(default_factory=list)
    manifest_written: bool = False

    @property
    def failures(self) -> list[ItemResult]:
        return [r for r in self.items if r.status == "failed"]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.items:
            out[r.status] = out.get(r.status, 0) + 1
        return out

    def to_json(self) -> dict:
        d = asdict(self)
        d["counts"] = self.counts()
        return d


def error_summary(error: str | None) -> str:
    """The most telling line of a compiler error: the first that says 'error', else the first line."""
    lines = [ln.strip() for ln in (error or "").replace("\0", "").splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower() and not ln.lower().startswith(("nvrtcerror", "runtimeerror: nvrtc")):
            return ln[:300]
    return lines[0][:300] if lines else "unknown error"


def plan(specs: Sequence[Spec], sms: Sequence[int], shard: tuple[int, int] | None = None) -> list[Item]:
    """Every item of ``specs`` x ``sms`` (NVRTC: a cubin per SM plus PTX for the lowest SM).

    Sharding takes every N-th item of the list sorted by (name, kind, sm): deterministic, independent
    of the machine, and it spreads the expensive CCCL items evenly over the shards.
    """
    if not sms:
        raise UsageError("no SMs to build for")
    items: list[Item] = []
    for spec in specs:
        if isinstance(spec, CcclSpec):
            items += [Item(spec, sm, "cccl-blob") for sm in sms]
        elif spec.family in ("cupy", "triton"):  # cached per SM, keyed by the SM: no PTX serves them
            items += [Item(spec, sm, "cubin") for sm in sms]
        else:
            items += [Item(spec, sm, "cubin") for sm in sms]
            items.append(Item(spec, min(sms), "ptx"))
    items.sort(key=lambda it: (it.spec.name, it.kind, it.sm))
    if shard is not None:
        k, n = shard
        items = items[k - 1::n]
    return items


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    import re
    m = re.fullmatch(r"([0-9]{1,4})/([0-9]{1,4})", text)  # ASCII digits only: int() also takes '１' and '٣'
    if m is None:
        raise UsageError(f"--shard {text[:40]!r}: expected K/N, e.g. 1/4")
    k, n = int(m.group(1)), int(m.group(2))
    if not (n >= 1 and 1 <= k <= n):
        raise UsageError(f"--shard {text!r}: need 1 <= K <= N")
    return k, n


def _existing_hit(path: Path, key: str) -> int | None:
    """Size of the artifact at ``path`` if it is intact and was built from ``key``; else ``None``."""
    try:
        art = fmt.read(path)
    except ArtifactError:
        return None
    return path.stat().st_size if art.header.get("content_key") == key else None


# ------------------------------------------------------------------------------------------------ build
Event = Callable[[str, Item, "ItemResult | None"], None]


def build(specs: Sequence[Spec], sms: Sequence[int], out: Path, *, jobs: int = 0, force: bool = False,
          keep_going: bool = False, shard: tuple[int, int] | None = None, force_stub: bool = False,
          on_event: Event | None = None, prune: bool = True, import_parents: bool = False,
          unreadable: Sequence[Unreadable] = ()) -> BuildReport:
    """Build ``specs`` x ``sms`` into ``out``. Raises :class:`BuildError` (after writing the report) if any
    item failed; with ``keep_going`` the others still complete and the manifest lists them. ``prune``
    removes artifacts of earlier builds that this one does not produce (off for ``--only`` builds).
    ``import_parents``: workers import operators from code as the matrix was read (``[tool.aot]
    import-parents``). ``unreadable``: the matrix's specs whose module cannot be imported, failed items of
    the report (with ``keep_going`` the rest is built; without, nothing is).

    The whole build holds ``out``'s writer lock (:mod:`aot._outlock`): a second build or merge into the
    same directory is refused with :class:`~aot.errors.BusyError` instead of pruning this one's files."""
    t_start = time.perf_counter()
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    with output_lock(out, "build"):
        return _build(specs, sms, out, jobs=jobs, force=force, keep_going=keep_going, shard=shard,
                      force_stub=force_stub, on_event=on_event, prune=prune, t_start=t_start,
                      import_parents=import_parents, unreadable=unreadable)


def _build(specs: Sequence[Spec], sms: Sequence[int], out: Path, *, jobs: int, force: bool, keep_going: bool,
           shard: tuple[int, int] | None, force_stub: bool, on_event: Event | None, prune: bool,
           t_start: float, import_parents: bool, unreadable: Sequence[Unreadable]) -> BuildReport:
    from .toolchain import choose_driver, versions
    from ..core.versions import require_cccl

    require_cccl([s.name for s in specs if s.family == "cccl"])
    producer = versions()
    driver = choose_driver(force_stub=force_stub)
    jobs = jobs or os.cpu_count() or 1
    items = plan(specs, sms, shard)
    user_emit = on_event or (lambda *a: None)

    def emit(kind: str, item: Item, result: ItemResult | None) -> None:
        if kind == "done" and result is not None:
            log.debug("%s: %s in %.2f s (%d bytes)%s", item.label, "miss, built" if result.status == "built"
                      else result.status, result.seconds, result.bytes,
                      f": {error_summary(result.error)}" if result.error else "")
        user_emit(kind, item, result)

    report = BuildReport(out=str(out), driver=driver.describe(), versions=dict(producer), jobs=jobs,
                         sms=list(sms), shard=f"{shard[0]}/{shard[1]}" if shard else None)

    kept = [] if prune else _entries_to_keep(out, {s.name for s in specs}, producer)
    _refuse_oversized_manifest(items, kept)  # before anything is compiled or removed
    remove_manifest(out)  # the commit marker goes first; it comes back only if everything below holds
    (out / REPORT_NAME).unlink(missing_ok=True)  # nobody mistakes the last build's report for this one's
    sweep_temp(out, older_than_s=0)
    keys = {it: item_key(it.spec, it.sm, it.kind, producer) for it in items}
    results: dict[Item, ItemResult] = {}
    todo: list[Item] = []
    for it in items:
        size = None if force else _existing_hit(out / it.rel_path, keys[it])
        if size is not None:
            results[it] = it.result("hit", bytes=size)
            emit("done", it, results[it])
        else:
            todo.append(it)
    # Longest first: CCCL items take seconds, NVRTC items milliseconds.
    todo.sort(key=lambda it: (0 if it.kind == "cccl-blob" else 1, it.spec.name, it.sm))
    for it in todo:
        emit("queued", it, None)

    failed_reading = [r for u in unreadable for r in _unreadable_results(u, sms)]
    if failed_reading and not keep_going:
        for it in todo:
            results[it] = it.result("cancelled")
            emit("done", it, results[it])
    elif todo:
        _run_pool(todo, keys, producer, out, jobs, driver.path, keep_going, results, emit, import_parents)

    report.items = [results[it] for it in items if it in results] + failed_reading
    report.seconds = time.perf_counter() - t_start
    log.info("build into %s: %s in %.1f s with %d job%s (%s)", out,
             ", ".join(f"{v} {k}" for k, v in sorted(report.counts().items())) or "no items", report.seconds,
             jobs, "s" * (jobs != 1), report.driver)
    failed = report.failures
    if not failed or keep_going:
        if prune and shard is None and not failed:
            _prune(out, {r.path for r in report.items})
        _commit(out, items, keys, report, producer, sms, kept)
        report.manifest_written = True
    atomic_write(out / REPORT_NAME, (json.dumps(report.to_json(), indent=1) + "\n").encode())
    if failed:
        first = failed[0]
        raise BuildError(f"{len(failed)} of {len(report.items)} build items failed; first: "
                         f"{first.name} sm_{first.sm} ({first.kind}): {error_summary(first.error)}"
                         + ("" if keep_going else f"; no manifest written (see {out / REPORT_NAME})"))
    return report


def manifest_definitions(specs: Iterable[Spec]) -> dict[str, dict]:
    """Each spec's definition as the manifest stores it (an NVRTC unit with its source: the loader can JIT
    a unit from the manifest alone)."""
    out = {}
    for s in specs:
        d = s.definition()
        if isinstance(s, NvrtcUnit):
            d["source"] = s.source
        out[s.name] = d
    return out


def _refuse_oversized_manifest(items: Sequence[Item], kept: Sequence[tuple[dict, dict]]) -> None:
    """Refuse, before building, a build whose ``manifest.json`` would exceed what every reader accepts
    (:data:`aot.core.manifest.MAX_MANIFEST_LEN`): its size is known from the definitions and one entry per
    item (hashes and sizes have fixed widths), within the few KB of producer fields. Five 4 MB sources, each
    within its own bound, otherwise built into a 20 MB manifest that verify, inspect and Registry refused."""
    specs = manifest_definitions({it.spec.name: it.spec for it in items}.values())
    specs.update({e["name"]: d for e, d in kept})
    entries = [{"path": it.rel_path, "name": it.spec.name, "family": it.spec.family, "sm": it.sm, "size": 2 ** 40,
                "payload_kind": it.kind, "sha256": "0" * 64, "content_key": "0" * 64} for it in items]
    size = len(json.dumps({"specs": specs, "artifacts": entries + [e for e, _ in kept]}, indent=1, sort_keys=True))
    if size > MAX_MANIFEST_LEN - _MANIFEST_SLACK:
        big = max(specs, key=lambda n: len(json.dumps(specs[n])))
        raise MatrixError(f"this build's manifest.json would be about {size / 2 ** 20:.1f} MiB, over the "
                          f"{MAX_MANIFEST_LEN / 2 ** 20:.0f} MiB every reader accepts (largest spec: {big!r}, "
                          f"{len(json.dumps(specs[big])) / 2 ** 20:.1f} MiB); build fewer or smaller specs per "
                          f"output folder")


#: Room in the manifest bound for what :func:`_refuse_oversized_manifest` does not count (producer, SMs, shard).
_MANIFEST_SLACK = 64 * 1024


def _entries_to_keep(out: Path, rebuilt: set, producer: dict) -> list[tuple[dict, dict]]:
    """For ``--only`` builds: the previous manifest's (entry, spec definition) pairs of the specs not being
    rebuilt, where the file is still intact and the toolchain is the same, so the output stays whole."""
    from ..core.manifest import load_manifest, verify_files
    try:
        old = load_manifest(out)
    except ArtifactError:
        return []
    if dict(old.producer) != dict(producer) or old.key_schemas != dict(SCHEMAS):
        return []
    bad = {p.split(":")[0] for p in verify_files(old)}
    return [(dict(e), dict(old.specs[e["name"]])) for e in old.artifacts
            if e["name"] not in rebuilt and e["path"] not in bad]


def _commit(out: Path, items: list[Item], keys: dict, report: BuildReport, producer: dict,
            sms: Sequence[int], kept: Sequence[tuple[dict, dict]] = ()) -> None:
    """Write the manifest (last: it is the commit marker) for the items that are in place, plus the
    entries an ``--only`` build kept from the previous manifest."""
    from ..core.manifest import file_sha256
    key_of = {it.rel_path: keys[it] for it in items}
    ok = [r for r in report.items if r.status in ("hit", "built")]
    entries = [{"path": r.path, "name": r.name, "family": r.family, "sm": r.sm, "payload_kind": r.kind,
                "size": r.bytes, "sha256": file_sha256(out / r.path), "content_key": key_of[r.path]} for r in ok]
    spec_of = {it.rel_path: it.spec for it in items}
    for e in entries:  # NVRTC: the keys a library's own compile call finds the entry by (issue 28)
        unit = spec_of[e["path"]]
        if isinstance(unit, NvrtcUnit):
            e.update(entry_fields(unit, e["sm"], e["payload_kind"]))
        elif unit.family == "cupy":  # CuPy: the key its compile call finds the entry by (runtime.adapters.cupy_attach)
            header = fmt.read(out / e["path"]).header
            e["cupy_key"] = header["cupy_key"]
            if isinstance(header.get("cupy_stack"), dict):
                e["cupy_stacks"] = [header["cupy_stack"]]
        elif unit.family == "triton":  # Triton: the key and file name its launch asks for (adapters.triton_attach)
            header = fmt.read(out / e["path"]).header
            for k in ("triton_key", "triton_name", "triton", "triton_build", "triton_aot_key",
                      "triton_launcher_keys", "triton_launcher_abi"):
                if k in header:
                    e[k] = header[k]
        elif e["family"] == "cccl":  # the release its blob loads under: `aot merge` combines releases by it
            e["cuda_cccl"] = producer["cuda_cccl"]
    names = {e["name"] for e in entries}
    specs = manifest_definitions({it.spec.name: it.spec for it in items if it.spec.name in names}.values())
    for entry, definition in kept:
        entries.append(entry)
        specs.setdefault(entry["name"], definition)
    extra: dict = {"sms": sorted(set(sms) | {e["sm"] for e, _ in kept if e["payload_kind"] != "ptx"}),
                   "key_schemas": dict(SCHEMAS)}
    if report.shard or report.failures:
        extra.update(shard=report.shard, incomplete=[r.path for r in report.failures])
    write_manifest(out, producer=producer, specs=specs, artifacts=entries, extra=extra)


def _unreadable_results(u: Unreadable, sms: Sequence[int]) -> list[ItemResult]:
    """The items a spec whose module cannot be imported would have had, each failed with its one line."""
    kinds = [("cccl-blob", sm, f"cccl/{u.name}/sm_{sm}.aot") for sm in sms] if u.family == "cccl" else \
        [("cubin", sm, f"nvrtc/{u.name}/sm_{sm}.cubin.aot") for sm in sms] + \
        [("ptx", min(sms), f"nvrtc/{u.name}/compute_{min(sms)}.ptx.aot")]
    return [ItemResult(u.name, u.family, sm, kind, path, "failed", error=u.error) for kind, sm, path in kinds]


def _run_pool(todo: list[Item], keys: dict, producer: dict, out: Path, jobs: int, stub: str | None,
              keep_going: bool, results: dict, emit: Event, import_parents: bool = False) -> None:
    ctx = multiprocessing.get_context("spawn")
    with _worker_cupy_cache():
        pool = ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx, initializer=_worker_init,
                                   initargs=(stub, os.getpid(), import_parents))
        try:
            _drive(pool, todo, keys, producer, out, jobs, keep_going, results, emit)
            pool.shutdown(wait=True)  # every item is done: the workers are idle and exit on their sentinel
        except BaseException:  # Ctrl-C, the CLI's SIGTERM, a full disk: stop every worker, bounded
            stop_pool(pool)
            raise


def _drive(pool: ProcessPoolExecutor, todo: list[Item], keys: dict, producer: dict, out: Path, jobs: int,
           keep_going: bool, results: dict, emit: Event) -> None:
    """Feed ``pool`` at most ``2 * jobs`` items at a time and write each result as it completes."""
    stop = False
    pending: dict[Future, Item] = {}
    queue = list(todo)

    def submit_more():
        while queue and len(pending) < 2 * jobs and not stop:
            it = queue.pop(0)
            emit("start", it, None)
            try:
                with signals_blocked():  # a worker spawned here starts with SIGINT/SIGTERM blocked
                    pending[pool.submit(_work, it)] = it
            except BrokenProcessPool:  # a worker died (killed, out of memory): nothing more can run
                for lost in [it, *queue]:
                    results[lost] = lost.result("failed", error="a build worker process died")
                    emit("done", lost, results[lost])
                queue.clear()

    submit_more()
    while pending:
        done, _ = wait(pending, return_when=FIRST_COMPLETED)
        for fut in done:
            it = pending.pop(fut)
            res = it.result("failed")
            try:
                payload, secs, extra = fut.result()
                header = fmt.make_header(family=it.spec.family, name=it.spec.name, content_key=keys[it],
                                         sm=it.sm, payload_kind=it.kind, payload=payload,
                                         producer={k: producer[k] for k in fmt.PRODUCER_FIELDS},
                                         kernels=list(getattr(it.spec, "kernels", ())), extra=extra)
                data = fmt.encode(header, payload)
                atomic_write(out / it.rel_path, data)
                res.status, res.seconds, res.bytes = "built", secs, len(data)
            except Exception as e:  # noqa: BLE001 - a worker's failure is data for the report
                res.error = (e.strerror if isinstance(e, OSError) and e.filename is None and e.strerror
                             else str(e) or traceback.format_exc(limit=3))  # OSError: "writing PATH: why"
                if not keep_going:
                    stop = True
            results[it] = res
            emit("done", it, res)
        if stop:
            for fut, it in list(pending.items()):
                if fut.cancel():
                    pending.pop(fut)
                    results[it] = it.result("cancelled")
                    emit("done", it, results[it])
            for it in queue:
                results[it] = it.result("cancelled")
                emit("done", it, results[it])
            queue.clear()
        submit_more()


def _prune(out: Path, keep: Iterable[str]) -> None:
    """Remove artifacts a previous build left that this build's manifest does not name."""
    keep = set(keep)
    for family in fmt.FAMILIES:
        root = out / family
        if not root.is_dir():
            continue
        for p in root.rglob("*.aot"):
            if p.relative_to(out).as_posix() not in keep:
                p.unlink()
        for d in sorted((d for d in root.rglob("*") if d.is_dir()), reverse=True):
            try:
                d.rmdir()
            except OSError:
                pass
