"""What every ``aot merge`` path reads of its inputs (the generic one, :mod:`aot.build.merge`; CuPy stacks,
:mod:`aot.build.merge_cupy`; CUDA majors, :mod:`aot.build.merge_majors`): the key schemas their entries were made
by (:mod:`aot.core.keyschemas`), and each artifact's bytes, from its file or, in a bundled folder whose artifacts
are packed (:mod:`aot.core.pack`: a wheel's), from its pack. A merged set is always plain files (the bundle packs
it again).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..core import format as fmt
from ..core import keyschemas
from ..core.errors import ArtifactError
from ..core.fs import atomic_write
from ..core.manifest import Manifest
from .legacy_set import legacy_only

#: Fields of an input's entry that say where its bytes are there, never copied into the merged set's entry.
WHERE_FIELDS = ("pack",)


def input_schemas(manifests: Sequence[Manifest], where: Sequence[Any]) -> tuple[dict[str, int] | None, list[str]]:
    """The merged set's ``key_schemas`` and the inputs' conflicts over them (:func:`aot.core.keyschemas.merged`).
    A set of cccl-legacy answers only that does not record the field (written before the build recorded it)
    takes no part: no listed schema keys an answer (each carries its own key schema)."""
    said = [(m.key_schemas, w) for m, w in zip(manifests, where) if m.key_schemas is not None or not legacy_only(m)]
    return keyschemas.merged([r for r, _ in said], [w for _, w in said])


def artifact_bytes(m: Manifest, a: Mapping[str, Any]) -> bytes:
    """The artifact file of input ``m``'s entry ``a``, from its pack where it is packed (checked whole by
    :func:`aot.core.manifest.verify_files` before the merge reads it)."""
    if "pack" in a:
        from ..core.pack import read_member
        return read_member(m, a)
    return m.path_of(a).read_bytes()


def header_of(m: Manifest, a: Mapping[str, Any]) -> dict[str, Any]:
    """The artifact header of input ``m``'s entry ``a`` (payload checked against it)."""
    try:
        data = artifact_bytes(m, a)
    except OSError as e:
        raise ArtifactError(f"{m.path_of(a)}: cannot read: {e.strerror or e}") from None
    try:
        return dict(fmt.decode(data).header)
    except ArtifactError as e:
        raise ArtifactError(f"{m.root / str(a['path'])}: {e}") from None


def copy_artifact(m: Manifest, a: Mapping[str, Any], dst: Path) -> None:
    """Write input ``m``'s artifact ``a`` at ``dst`` (atomically); nothing where ``dst`` is that very file (a merge
    into one of its inputs)."""
    if "pack" not in a and m.path_of(a).resolve() == dst.resolve():
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(dst, artifact_bytes(m, a))


def refuse_conflicts(schemas: Any, conflicts: list[str], what: str) -> None:
    """Raise every reason a merge stops, in one line: inputs built by other key schemas (``schemas[1]``, from
    :func:`input_schemas`) and ``conflicts``, ``what`` saying what conflicting means there. Returns where none."""
    if conflicts or schemas[1]:
        said = [keyschemas.said(schemas[1])] if schemas[1] else []
        if conflicts:
            said.append(f"{len(conflicts)} {what}: " + "; ".join(conflicts))
        raise ArtifactError("merge: " + "; ".join(said))

