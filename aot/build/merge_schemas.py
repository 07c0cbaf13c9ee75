"""The key schemas of a set ``aot merge`` makes (:mod:`aot.core.keyschemas`), for every merge path: the generic
one (:mod:`aot.build.merge`), CuPy stacks (:mod:`aot.build.merge_cupy`, handed them), and CUDA majors
(:mod:`aot.build.merge_majors`, which checks every major's inputs before it writes any major's set).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..core import keyschemas
from ..core.manifest import Manifest
from .legacy_set import legacy_only


def input_schemas(manifests: Sequence[Manifest], where: Sequence[Any]) -> tuple[dict[str, int] | None, list[str]]:
    """The merged set's ``key_schemas`` and the inputs' conflicts over them (:func:`aot.core.keyschemas.merged`).
    A set of cccl-legacy answers only that does not record the field (written before the build recorded it)
    takes no part: no listed schema keys an answer (each carries its own key schema)."""
    said = [(m.key_schemas, w) for m, w in zip(manifests, where) if m.key_schemas is not None or not legacy_only(m)]
    return keyschemas.merged([r for r, _ in said], [w for _, w in said])
