"""Combine build outputs into one artifact set with one manifest: the shards of a sharded build (``aot build
--shard K/N``), and builds of the same matrix made under different cuda-cccl releases.

A CCCL blob loads only under the exact cuda-cccl that built it, so a set meant for a range of cuda-cccl
carries one blob per release: build under each release (one environment per release, like shards), then
merge. Outputs of one release must come from one toolchain (any producer version differing is refused);
outputs of different releases may differ only in ``cuda_cccl`` and the ``cuda_core`` it brought
(:data:`MAY_DIFFER`). In a set of several releases every CCCL blob lives at
``cccl/<spec>/cuda-cccl-<release>/sm_<SM>.aot`` and every entry names its release (``cuda_cccl``); the
manifest's ``producers`` holds each release's producer and ``producer`` is the newest one's
(:class:`aot.core.manifest.Manifest`). NVRTC, numba and CuPy artifacts load under any cuda-cccl: one copy, the
newest release's where the copies differ only in their release stamp (:func:`_conflict`). Shards are checked
per release (1/N..N/N once each). Sets holding CuPy artifacts only are builds under CuPy stacks (CuPy, NVRTC,
CUDA headers) and keep one artifact per CuPy key: :mod:`aot.build.merge_cupy`.

Inputs are untrusted: a release they name must be a version (it becomes part of output paths), and every
output path is checked inside ``out`` before anything is written. Refused too: outputs that define a spec
differently, other bytes at one output path, and inputs made by different key schemas (every such conflict in
one line, never resolved by a release claim; :mod:`aot.build.merge_inputs`). A merge is checked whole before it
writes (:data:`Write`). The merged manifest is written last, like a build's, so an interrupted merge leaves no
manifest naming missing files. A merge of one release's shards equals an unsharded build of the same items
byte for byte. Builds under different CUDA majors are never mixed: each major's merge is a set of its own, side
by side under an index (:mod:`aot.build.merge_majors`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from ..core.errors import ArtifactError, UsageError
from ..core.log import get_logger
from ..core.manifest import (MANIFEST_NAME, Manifest, is_release, load_manifest, release_order, remove_manifest,
                             safe_join, verify_files, write_manifest)
from ..core.spec import NvrtcUnit
from ..core.text import short
from .merge_inputs import WHERE_FIELDS, copy_artifact, header_of, input_schemas, refuse_conflicts

log = get_logger(__name__)

#: Producer fields in which builds of different cuda-cccl releases may differ (each release brings its own).
MAY_DIFFER = frozenset({"cuda_cccl", "cuda_core"})
#: A merge checked whole (every conflict listed, every output path checked), not yet written: ``write(on_copy)``
#: writes it and returns its summary. A merge of several CUDA majors checks each major's before writing any.
Write = Callable[[Callable[[int, int], None]], dict]


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
    on_copy = on_copy or (lambda done, total: None)
    with output_lock(out, "merge"):
        from .merge_majors import by_major, merge_majors
        groups = by_major([Path(s) for s in shards]) if shards else None
        if groups is not None:  # builds under several CUDA majors: one set per major (aot.core.majorset)
            return merge_majors(groups, out, on_copy, _merge)
        return _merge(shards, out)(on_copy)


def _release(m: Manifest) -> str:
    return str(m.producer.get("cuda_cccl"))


def _check_releases(m: Manifest) -> None:
    """Every release an input names is a version (:func:`aot.core.manifest.is_release`): it becomes part of
    output paths (:func:`blob_path`) and of the wheel's cuda-cccl requirement, and a merge input comes from
    elsewhere (``"9/../../../../ESC"`` wrote outside ``--out``). ``load_manifest`` already holds every entry's
    ``cuda_cccl`` to these (or to ``producer``'s)."""
    where = m.root / MANIFEST_NAME
    if not is_release(m.producer.get("cuda_cccl")):
        raise ArtifactError(f"{where}: field 'cuda_cccl' of 'producer' is {short(m.producer.get('cuda_cccl'))}, "
                            f"not a cuda-cccl release (a version such as 1.2.1)")
    for rel in m.producers:
        if not is_release(rel):
            raise ArtifactError(f"{where}: field 'producers' names {short(rel)}, not a cuda-cccl release (a "
                                f"version such as 1.2.1)")


def _producers(manifests: Sequence[Manifest], shards: Sequence[Path]) -> dict[str, Mapping[str, Any]]:
    """Release -> producer over every input (a merged input brings several); the same release built with
    other versions, or releases differing beyond :data:`MAY_DIFFER`, is refused naming the fields."""
    found: dict[str, tuple[Mapping[str, Any], Path]] = {}
    first: tuple[Mapping[str, Any], Path] | None = None
    for m, d in zip(manifests, shards):
        for rel, prod in (dict(m.producers) or {_release(m): m.producer}).items():
            seen = found.get(rel)
            if seen is not None and dict(seen[0]) != dict(prod):
                diff = sorted(k for k in set(prod) | set(seen[0]) if prod.get(k) != seen[0].get(k))
                raise ArtifactError(f"{d}: built with other versions than {seen[1]} ({', '.join(diff)})")
            found.setdefault(rel, (prod, d))
            if first is None:
                first = (prod, d)
            diff = sorted(k for k in set(prod) | set(first[0])
                          if k not in MAY_DIFFER and prod.get(k) != first[0].get(k))
            if diff:
                raise ArtifactError(f"{d}: built with other versions than {first[1]} ({', '.join(diff)}); builds "
                                    f"of different cuda-cccl releases may differ only in "
                                    f"{', '.join(sorted(MAY_DIFFER))}")
    return {rel: found[rel][0] for rel in sorted(found, key=release_order)}


class _Source(NamedTuple):
    """One input's artifact for an output path: its (merged) entry, its manifest, its entry there, its release."""
    entry: dict
    manifest: Manifest
    src: Mapping[str, Any]
    release: str


def _conflict(prev: _Source, new: _Source) -> str | None:
    """Why ``prev`` and ``new`` (one output path, different file bytes) cannot both be merged, else ``None``.

    A CCCL blob has one path per release, so two at one path are one release's, and must be equal; so must
    anything else of one release. An NVRTC, numba or CuPy artifact loads under any cuda-cccl and is kept
    once: builds under two releases stamp their release into its header, and that is all that may differ
    (header and payload compared without it), unless the unit ``#include``s installed headers (cuda-cccl's:
    its bytes may change with the release, and so does its content key). Anything else is a conflict, never
    resolved by which input claims the newer release (a foreign input claiming 9.9.9 replaced the genuine
    cubin under the same content key, and every user of every release loaded it)."""
    a, b = prev.entry, new.entry
    line = (f"{a['path']} (content key {_keys(a, b)}) in {prev.manifest.root} (cuda-cccl {prev.release}) and "
            f"{new.manifest.root} (cuda-cccl {new.release})")
    if a["family"] == "cccl" or prev.release == new.release:
        return line
    same_key = a["content_key"] == b["content_key"]
    if _unstamped(prev, same_key) == _unstamped(new, same_key):
        return None
    spec = new.manifest.built.get(b["name"])
    if not same_key and isinstance(spec, NvrtcUnit) and spec.includes_installed_headers():
        return None
    return line


def _keys(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    ka, kb = a["content_key"][:16], b["content_key"][:16]
    return ka if ka == kb else f"{ka} vs {kb}"


def _unstamped(source: _Source, with_key: bool) -> dict:
    """The artifact's header without the release stamp (and the content key, unless ``with_key``); the
    header carries the payload's sha256, which :func:`aot.build.merge_inputs.header_of` checked against the payload."""
    header = header_of(source.manifest, source.src)
    header["producer"] = {k: v for k, v in header["producer"].items() if k != "cuda_cccl"}
    if not with_key:
        header.pop("content_key", None)
    return header


def blob_path(name: str, release: str, sm: int) -> str:
    """Where a set of several cuda-cccl releases keeps the CCCL blob of ``name`` for ``release`` and ``sm``."""
    return f"cccl/{name}/cuda-cccl-{release}/sm_{sm}.aot"


def _merge_cupy(manifests: Sequence[Manifest], shards: Sequence[Path], out: Path,
                schemas: tuple[dict[str, int] | None, list[str]]) -> Write:
    """CuPy-only inputs (:mod:`aot.build.merge_cupy`): shards checked per stack (per producer), specs alike."""
    from .merge_cupy import prepare_stacks
    by_stack: dict[str, list[Manifest]] = {}
    specs: dict = {}
    for m in manifests:
        if m.incomplete:
            raise ArtifactError(f"{m.root}: shard build was incomplete ({len(m.incomplete)} items failed)")
        by_stack.setdefault(repr(sorted(m.producer.items())), []).append(m)
        for name, definition in m.specs.items():
            if name in specs and specs[name] != definition:
                raise ArtifactError(f"{m.root}: spec {name!r} is defined differently than in another shard")
            specs[name] = definition
    for group in by_stack.values():
        _check_shards_complete(group)
    return prepare_stacks(manifests, shards, out, specs, schemas)


def _merge(shards: Sequence[Path], out: Path) -> Write:
    """Check the merge of ``shards`` into ``out``, writing nothing; the step that writes it (:data:`Write`)."""
    if not shards:
        raise UsageError("merge: name at least one shard directory")
    manifests: list[Manifest] = []
    for d in shards:
        m = load_manifest(d)
        problems = verify_files(m)
        if problems:
            raise ArtifactError(f"{d}: shard is damaged: {problems[0]}")
        manifests.append(m)
    from . import legacy_set, merge_cupy
    schemas = input_schemas(manifests, shards)  # its conflicts listed with the others, before anything is written
    legacy, legacy_files, legacy_conflicts = legacy_set.merge_legacy(manifests)
    # a set of cccl-legacy answers only (built under a release without serialize) brings no producer to check
    n_inputs = len(shards)
    keep = [i for i, m in enumerate(manifests) if not legacy_set.legacy_only(m)] or [legacy_set.first(manifests)]
    manifests, shards = [manifests[i] for i in keep], [shards[i] for i in keep]
    if merge_cupy.cupy_only(manifests) and not legacy:  # CuPy sets of several stacks: one artifact per CuPy key
        return _merge_cupy(manifests, shards, out, schemas)
    for m in manifests:
        _check_releases(m)
    producers = _producers(manifests, shards)
    several = len(producers) > 1
    newest = list(producers)[-1]
    by_release: dict[str, list[Manifest]] = {}
    for m in manifests:
        by_release.setdefault(_release(m), []).append(m)
    for group in by_release.values():
        _check_shards_complete(group)
    specs: dict = {}
    entries: dict[str, _Source] = {}  # output path -> where its bytes come from
    conflicts: list[str] = []
    sms: set = set()
    # Oldest release first: where an NVRTC or numba artifact's release stamp differs between releases (same
    # content otherwise, :func:`_conflict`), the newest one's stays.
    for m in sorted(manifests, key=lambda m: release_order(_release(m))):
        if m.incomplete:
            raise ArtifactError(f"{m.root}: shard build was incomplete ({len(m.incomplete)} items failed)")
        sms.update(m.sms or ())
        for name, definition in m.specs.items():
            if name in specs and specs[name] != definition:
                raise ArtifactError(f"{m.root}: spec {name!r} is defined differently than in another shard")
            specs[name] = definition
        for a in m.artifacts:
            entry = {k: v for k, v in a.items() if k not in WHERE_FIELDS}
            rel = m.release_of(a) or _release(m)
            if several:
                entry["cuda_cccl"] = rel
                if a["family"] == "cccl":
                    entry["path"] = blob_path(a["name"], rel, a["sm"])
            here = _Source(entry, m, a, rel)
            prev = entries.get(entry["path"])
            if prev is not None and prev.entry["sha256"] != entry["sha256"]:
                why = _conflict(prev, here)
                if why:
                    conflicts.append(why)
                    continue
                log.info("%s: cuda-cccl %s's copy replaces %s's (the same content, stamped with its release)",
                         entry["path"], rel, prev.release)
            entries[entry["path"]] = here
    conflicts += legacy_conflicts
    refuse_conflicts(schemas, conflicts, "artifact(s) conflict, one output path with different bytes (never "
                                         "resolved by a release claim)")
    targets = {path: safe_join(out, path) for path in entries}  # every write stays in --out, checked before any
    for path in legacy_files:
        safe_join(out, path)
    extra: dict = {"sms": sorted(sms)}
    if schemas[0] is not None:
        extra["key_schemas"] = schemas[0]
    if several:
        extra["producers"] = {rel: dict(p) for rel, p in producers.items()}
    if legacy:
        extra[legacy_set.FIELD] = legacy_set.to_json(legacy)

    def write(on_copy: Callable[[int, int], None]) -> dict:
        out.mkdir(parents=True, exist_ok=True)
        remove_manifest(out)
        legacy_set.copy_answers(legacy_files, out)
        for i, (path, source) in enumerate(entries.items()):
            on_copy(i, len(entries))
            copy_artifact(source.manifest, source.src, targets[path])
        on_copy(len(entries), len(entries))
        write_manifest(out, producer=producers[newest], specs=specs,
                       artifacts=[s.entry for s in entries.values()], extra=extra)
        return {"artifacts": len(entries), "bytes": sum(s.entry["size"] for s in entries.values()),
                "shards": n_inputs, "cuda_cccl": list(producers), "cccl_legacy": sorted(legacy)}
    return write
