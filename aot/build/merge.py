"""Combine sharded build outputs (``aot build --shard K/N``) into one artifact set with one manifest.

Refuses shards produced by different toolchains (any producer version differs), shards that define a
spec differently, and shards that hold different bytes under the same path. The merged manifest is
written last, like a build's, so an interrupted merge leaves no manifest naming missing files. The
result equals an unsharded build of the same items byte for byte.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from ..core.fs import atomic_write
from ..core.errors import ArtifactError, UsageError
from ..core.manifest import Manifest, load_manifest, remove_manifest, verify_files, write_manifest


def _check_shards_complete(manifests: Sequence[Manifest]) -> None:
    """Shards must be exactly 1/N..N/N of one N over one SM list: a missing shard would silently ship a
    wheel without some specs. Whole (unsharded) outputs may be combined freely. ``shard`` and ``sms`` were
    type-checked by :func:`aot.manifest.load_manifest`."""
    if not any(m.shard for m in manifests):
        return
    labels = [m.shard for m in manifests if m.shard]
    if len(labels) != len(manifests):
        raise ArtifactError("merge: mixing shard outputs with unsharded ones")
    try:
        parts = [tuple(int(x) for x in label.split("/")) for label in labels]
    except (AttributeError, ValueError):
        raise ArtifactError(f"merge: unreadable shard labels {labels}") from None
    ns = {n for _, n in parts}
    if len(ns) != 1:
        raise ArtifactError(f"merge: shards of different splits ({', '.join(sorted(set(labels)))})")
    (n,) = ns
    got = sorted(k for k, _ in parts)
    if got != list(range(1, n + 1)):
        missing = sorted(set(range(1, n + 1)) - set(got))
        dup = sorted({k for k in got if got.count(k) > 1})
        raise ArtifactError(f"merge: need shards 1..{n} once each; missing {missing or 'none'}, "
                            f"repeated {dup or 'none'}")
    sm_lists = {m.sms or () for m in manifests}
    if len(sm_lists) != 1:
        raise ArtifactError(f"merge: shards were built for different SM lists ({sorted(sm_lists)})")


def merge(shards: Sequence[Path], out: Path, on_copy: Callable[[int, int], None] | None = None) -> dict:
    """Merge ``shards`` into ``out``; returns a summary (artifact count, bytes, shards). ``on_copy(done,
    total)`` follows the copying (the CLI's progress bar). Holds ``out``'s writer lock throughout: a build
    or another merge into ``out`` is refused with :class:`~aot.errors.BusyError`."""
    from .outlock import output_lock
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    with output_lock(out, "merge"):
        return _merge(shards, out, on_copy or (lambda done, total: None))


def _merge(shards: Sequence[Path], out: Path, on_copy: Callable[[int, int], None]) -> dict:
    if not shards:
        raise UsageError("merge: name at least one shard directory")
    manifests: list[Manifest] = []
    for d in shards:
        m = load_manifest(d)
        problems = verify_files(m)
        if problems:
            raise ArtifactError(f"{d}: shard is damaged: {problems[0]}")
        if manifests and m.producer != manifests[0].producer:
            diff = {k for k in set(m.producer) | set(manifests[0].producer)
                    if m.producer.get(k) != manifests[0].producer.get(k)}
            raise ArtifactError(f"{d}: built with other versions than {shards[0]} ({', '.join(sorted(diff))})")
        manifests.append(m)
    specs: dict = {}
    entries: dict = {}
    sms: set = set()
    _check_shards_complete(manifests)
    for m in manifests:
        if m.incomplete:
            raise ArtifactError(f"{m.root}: shard build was incomplete ({len(m.incomplete)} items failed)")
        sms.update(m.sms or ())
        for name, definition in m.specs.items():
            if name in specs and specs[name] != definition:
                raise ArtifactError(f"{m.root}: spec {name!r} is defined differently than in another shard")
            specs[name] = definition
        for a in m.artifacts:
            prev = entries.get(a["path"])
            if prev is not None and prev[0]["sha256"] != a["sha256"]:
                raise ArtifactError(f"{a['path']}: shards {prev[1]} and {m.root} hold different bytes")
            entries[a["path"]] = (a, m.root)
    out.mkdir(parents=True, exist_ok=True)
    remove_manifest(out)
    for i, (path, (_entry, root)) in enumerate(entries.items()):
        on_copy(i, len(entries))
        src, dst = root / path, out / path
        if src.resolve() != dst.resolve():
            dst.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(dst, src.read_bytes())
    on_copy(len(entries), len(entries))
    write_manifest(out, producer=manifests[0].producer, specs=specs,
                   artifacts=[a for a, _ in entries.values()], extra={"sms": sorted(sms)})
    return {"artifacts": len(entries), "bytes": sum(a["size"] for a, _ in entries.values()),
            "shards": len(shards)}

