"""cccl-legacy answers as part of an artifact set (issue 44): written into a set's manifest by the build
(:mod:`aot.build.cccl_legacy_build`), carried by ``aot merge`` and by the bundle (the package folder).

The manifest lists each release's answers (:mod:`aot.core.legacy_manifest`); the answer files sit at
``cccl-legacy/cuda-cccl-<release>/<key>.aot``. A set built only for these releases (no ``serialize`` blob, no
other family) is "legacy-only": its manifest has no specs or artifacts, and its top-level producer (the
toolchain of that environment) takes no part in a merge's producer checks, which hold for the artifacts
that are keyed by producer; each answer's key already covers its compilers' bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..core.fs import atomic_write
from ..core.legacy_manifest import (FIELD, LegacyRelease, answer_path, entries, producer_order,  # noqa: F401
                                   to_json)
from ..core.manifest import MANIFEST_NAME, Manifest, load_manifest, safe_join, write_manifest


def producer() -> dict[str, str]:
    """Who records the answers: aot's producer fields, and the numba that compiles the operators' LTO-IR."""
    import platform

    from ..core.versions import dist_version, producer_versions
    return {**producer_versions(), "numba": dist_version("numba"), "numba_cuda": dist_version("numba-cuda"),
            "python": platform.python_version()}


def legacy_only(m: Manifest) -> bool:
    """A set carrying cccl-legacy answers and nothing else."""
    return bool(m.legacy) and not m.artifacts and not m.specs


def first(manifests: Sequence[Manifest]) -> int:
    """Which of sets of answers only gives a merge of them its top-level fields: the one whose producer
    comes first in :func:`producer_order`, whatever the order of the inputs (the same inputs, the same bytes)."""
    order = producer_order(m.producer for m in manifests)
    return next(i for i, m in enumerate(manifests) if dict(m.producer) == order[0])


def add_answers(out: Path, release: str, made_by: Mapping[str, str], sm: int, specs: Sequence[str],
                got: Sequence[tuple[str, str, str, bytes]]) -> int:
    """Add ``got`` ((key, kind, spec, encoded answer file)) for ``release`` and ``sm`` to the set at ``out``
    (its manifest created where there is none): each file written atomically, the manifest last. An answer
    already there stays (NVRTC's output differs from run to run, and each link answer is keyed by the LTO-IR
    its run produced: the set keeps consistent pairs). A set whose answers for ``release`` another toolchain
    built gains this one beside them (each answer's key holds its compilers' bytes). Returns the answers
    added."""
    out.mkdir(parents=True, exist_ok=True)
    have = load_manifest(out) if (out / MANIFEST_NAME).is_file() else None
    old = have.legacy.get(release) if have else None
    answers = {a["path"]: a for a in (old.answers if old else ())}
    added = 0
    for key, kind, spec, data in got:
        path = answer_path(release, key)
        if path in answers:
            continue
        dst = safe_join(out, path)
        dst.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(dst, data)
        answers[path] = {"path": path, "key": key, "kind": kind, "spec": spec, "size": len(data),
                         "sha256": hashlib.sha256(data).hexdigest()}
        added += 1
    section = dict(have.legacy) if have else {}
    section[release] = LegacyRelease(
        release, producer_order([*(old.producers if old else ()), made_by]),
        tuple(sorted({*(old.sms if old else ()), sm})),
        tuple(dict.fromkeys([*(old.specs if old else ()), *specs])), tuple(answers.values()))
    _write(out, have, section, made_by)
    return added


def _write(out: Path, have: Manifest | None, section: Mapping[str, LegacyRelease],
           made_by: Mapping[str, str]) -> None:
    extra: dict[str, Any] = {FIELD: to_json(section)}
    if have is None:
        prod = {k: v for k, v in made_by.items() if k not in ("numba", "numba_cuda", "python")}
        # the schemas of the aot that wrote it, as a build records them: a merge with it keeps the set's
        from ..core.keyschemas import SCHEMAS
        write_manifest(out, producer=prod, specs={}, artifacts=[], extra={**extra, "sms": [],
                                                                          "key_schemas": dict(SCHEMAS)})
        return
    import json
    doc = json.loads((out / MANIFEST_NAME).read_text())  # checked by load_manifest above; keeps every field
    doc.pop("format", None), doc.pop("manifest_version", None)
    producer_, specs, artifacts = doc.pop("producer"), doc.pop("specs"), doc.pop("artifacts")
    doc.update(extra)
    write_manifest(out, producer=producer_, specs=specs, artifacts=artifacts, extra=doc)


def merge_legacy(manifests: Sequence[Manifest]) -> tuple[dict[str, LegacyRelease], dict[str, Path], list[str]]:
    """Every input's answers in one section: (release -> answers, output path -> source file, conflicts).

    One release's answers may come from several toolchains (sets built under each NVRTC, nvJitLink or numba a
    library's users may get): the merged release lists every input's producers, and a user's install picks the
    answers of its own, since each answer's key holds its compilers' bytes. One path (release and key) must
    hold the same bytes in every input that carries it: anything else is a conflict, each one listed."""
    merged: dict[str, LegacyRelease] = {}
    files: dict[str, Path] = {}
    where: dict[str, Path] = {}
    conflicts: list[str] = []
    for m in manifests:
        for rel, r in m.legacy.items():
            prev = merged.get(rel)
            answers = {a["path"]: a for a in (prev.answers if prev else ())}
            for a in r.answers:
                seen = answers.get(a["path"])
                if seen is not None and seen["sha256"] != a["sha256"]:
                    conflicts.append(f"{a['path']} (cuda-cccl {rel}, {a['kind']} of {a['spec']}) differs in "
                                     f"{where[rel]} and {m.root}")
                    continue
                answers.setdefault(a["path"], a)
                files.setdefault(a["path"], m.path_of(a))
            where.setdefault(rel, m.root)
            merged[rel] = LegacyRelease(rel, producer_order([*(prev.producers if prev else ()), *r.producers]),
                                        tuple(sorted({*(prev.sms if prev else ()), *r.sms})),
                                        tuple(dict.fromkeys([*(prev.specs if prev else ()), *r.specs])),
                                        tuple(answers.values()))
    return merged, files, conflicts


def copy_answers(files: Mapping[str, Path], out: Path) -> None:
    """Each answer file into ``out`` at its path (checked inside ``out`` before any is written)."""
    targets = {path: safe_join(out, path) for path in files}
    for path, src in files.items():
        dst = targets[path]
        if src.resolve() != dst.resolve():
            dst.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(dst, src.read_bytes())
