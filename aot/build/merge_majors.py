"""``aot merge`` of sets built under different CUDA majors: one set per major, side by side, under an index
(:mod:`aot.core.majorset`), so one wheel carries what the users of each major load.

Nothing crosses majors: each major's inputs are merged by :func:`aot.build.merge.merge`'s own rules (shards,
cuda-cccl releases, CuPy stacks) into ``out/cu<major>``. Every major's merge is checked, its conflicts listed,
before any major's set is written (a conflict among the cu13 inputs left the cu12 set written behind it); the
index is written last, so an interrupted merge leaves no index naming a missing set. An input may itself be a
set of several majors (its majors' sets join theirs). What every major shares is the aot that serves it: the
inputs of all majors must agree on aot's key schemas (:mod:`aot.build.merge_inputs`).
Inputs are untrusted: the major an input's producer names must be a CUDA major number (it names a folder).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from ..core.errors import ArtifactError
from ..core.keyschemas import said
from ..core.majorset import major_dir, read_index, write_index
from ..core.manifest import MANIFEST_NAME, load_manifest, remove_manifest
from ..core.text import short
from .merge_inputs import input_schemas


def _major_of(d: Path) -> int:
    """The CUDA major of the ordinary set at ``d`` (its producer's), checked to be a major number."""
    value = load_manifest(d).producer.get("cuda_major")
    text = str(value)
    if not (isinstance(value, (str, int)) and text.isascii() and text.isdigit() and 10 <= int(text) <= 99):
        raise ArtifactError(f"{d / MANIFEST_NAME}: field 'cuda_major' of 'producer' is {short(value)}, not a CUDA "
                            f"major (12, 13)")
    return int(text)


def by_major(inputs: Sequence[Path]) -> dict[int, list[Path]] | None:
    """The inputs grouped per CUDA major (a set of several majors split into its majors' sets); ``None`` where
    they are ordinary sets of one major (the plain merge)."""
    groups: dict[int, list[Path]] = {}
    indexed = False
    for d in inputs:
        majors = read_index(d)
        if majors is not None:
            indexed = True
            for m in majors:
                groups.setdefault(m, []).append(Path(d) / major_dir(m))
        else:
            groups.setdefault(_major_of(Path(d)), []).append(Path(d))
    return groups if indexed or len(groups) > 1 else None


def _check_schemas(groups: dict[int, list[Path]]) -> None:
    """Every input of every major made by the same key schemas (:mod:`aot.core.keyschemas`), every one that differs
    listed. Across majors too: one wheel's sets are served by one aot, and a major made by another schema would
    serve nothing of its set."""
    dirs = [d for _, ds in sorted(groups.items()) for d in ds]
    _, conflicts = input_schemas([load_manifest(d) for d in dirs], dirs)
    if conflicts:
        raise ArtifactError(f"merge: {said(conflicts)}")


def merge_majors(groups: dict[int, list[Path]], out: Path, on_copy: Callable[[int, int], None],
                 prepare: Callable[[Sequence[Path], Path], Callable[[Callable[[int, int], None]], dict]]) -> dict:
    """Merge each major's inputs into ``out/cu<major>``, then write the index. ``prepare`` checks one major's
    merge and returns the step that writes it (:data:`aot.build.merge.Write`): every major is checked, and its
    conflicts listed, before any major's set is written."""
    for m in groups:  # every write stays in --out: a major's folder that is a link (to elsewhere) is refused
        if (out / major_dir(m)).is_symlink() or ((out / major_dir(m)).exists() and not (out / major_dir(m)).is_dir()):
            raise ArtifactError(f"merge: {out / major_dir(m)} is a link or a file, not a folder of --out")
    _check_schemas(groups)
    writes, problems = {}, []
    for m, dirs in sorted(groups.items()):
        try:
            writes[m] = prepare(dirs, out / major_dir(m))
        except ArtifactError as e:
            problems.append((m, e))
    if problems:
        raise ArtifactError("merge: " + "; ".join(f"{major_dir(m)}: {str(e).removeprefix('merge: ')}"
                                                  for m, e in problems))
    remove_manifest(out)  # an index (or an older set's manifest) goes first, and comes back last
    done = {m: write(on_copy) for m, write in writes.items()}
    write_index(out, done)
    return {"artifacts": sum(s["artifacts"] for s in done.values()),
            "bytes": sum(s["bytes"] for s in done.values()),
            "shards": sum(len(d) for d in groups.values()),
            "cuda_cccl": sorted({r for s in done.values() for r in s.get("cuda_cccl") or ()}),
            "cuda_majors": sorted(done)}
