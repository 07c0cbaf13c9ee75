"""The versions of aot's key and digest schemas, in one table, recorded in every manifest a build writes
(``key_schemas``).

A key a loader computes at a library's call (numba-cuda's kernel digest, CuPy's compile key, an NVRTC unit's
header digest) is compared with the one the build recorded. When the schema itself changed between the aot that
built a set and the one serving it, every key differs though nothing of the library did; without the recorded
version that read as "the kernel's source changed". With it the loader says what happened, once: the set was
built by digest vN, this aot computes vM, rebuild it (and the library JIT-compiles meanwhile). A manifest
without the field (written before aot recorded it) keeps the old behaviour: keys are compared as they are.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from .errors import ArtifactError

#: Schema name -> the version this aot computes. Each module that makes the key reads its version here.
SCHEMAS: Mapping[str, int] = {
    "numba_digest": 3,   # aot.runtime.adapters.numba_digest: what numba-cuda freezes into a kernel
    "cupy_key": 2,       # aot.runtime.adapters.cupy_key: the content of one CuPy compile
    "nvrtc_headers": 1,  # aot.runtime.adapters.hdrkey: the headers an NVRTC unit includes, as installed
    "item_key": 2,       # aot.core.spec.item_key of NVRTC units, numba and CuPy kernels (1 is still accepted)
}
#: What each family's artifacts are found or checked by at a library's call, in the words of the warning.
FAMILY_SCHEMAS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "numba": (("numba_digest", "numba kernel digest"),),
    "cupy": (("cupy_key", "CuPy compile key"),),
    "nvrtc": (("nvrtc_headers", "NVRTC header digest"),),
}
#: Bounds on the field as read from a manifest (untrusted input).
MAX_SCHEMAS = 64
MAX_NAME_LEN = 64


def check(value: Any) -> dict[str, int] | None:
    """``value`` (a manifest's ``key_schemas``) as a mapping of schema name to version, or ``None`` where it is
    not one (the caller names the file and the field)."""
    if not isinstance(value, dict) or len(value) > MAX_SCHEMAS:
        return None
    if not all(isinstance(k, str) and 0 < len(k) <= MAX_NAME_LEN and isinstance(v, int) and not isinstance(v, bool)
               and 0 <= v < 1 << 31 for k, v in value.items()):
        return None
    return dict(value)


def mismatch(recorded: Mapping[str, int] | None, family: str) -> str | None:
    """Why ``family``'s artifacts of a set whose manifest records ``recorded`` cannot match this aot's keys
    (``"built by numba kernel digest v2, this aot computes v3: rebuild the set"``), else ``None``: the field
    absent (an older manifest) or a schema it does not name leaves the keys to be compared as they are."""
    if recorded is None:
        return None
    for name, words in FAMILY_SCHEMAS.get(family, ()):
        built = recorded.get(name)
        if built is not None and built != SCHEMAS[name]:
            return f"built by {words} v{built}, this aot computes v{SCHEMAS[name]}: rebuild the set"
    return None


def common(recorded: Sequence[Mapping[str, int] | None], where: Sequence[Any]) -> dict[str, int] | None:
    """The ``key_schemas`` of a set made from sets that record ``recorded`` (``aot merge``, in the order of
    their folders ``where``): theirs where all agree; ``None`` (not recorded: keys compared as they are) where
    one does not say. Sets that say different versions cannot be one set: :class:`ArtifactError` naming the
    first two that differ."""
    first = recorded[0] if recorded else None
    if first is None or any(r is None for r in recorded):
        return None
    for r, w in zip(recorded[1:], where[1:], strict=True):
        if r != first:
            raise ArtifactError(f"merge: {where[0]} and {w} were built by different aot key schemas "
                                f"({dict(first)} vs {dict(r or {})}): rebuild the older with this aot")
    return dict(first)
