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

from .text import short


#: Schema name -> the version this aot computes. Each module that makes the key reads its version here.
SCHEMAS: Mapping[str, int] = {
    "numba_digest": 3,    # aot.runtime.adapters.numba_digest: what numba-cuda freezes into a kernel
    "cupy_key": 2,        # aot.runtime.adapters.cupy_key: the content of one CuPy compile
    "nvrtc_headers": 1,   # aot.runtime.adapters.hdrkey: the headers an NVRTC unit includes, as installed
    "item_key": 2,        # aot.core.spec.item_key of NVRTC units, numba and CuPy kernels (1 is still accepted)
    "triton_digest": 1,   # aot.runtime.adapters.triton_digest: what Triton compiles into a kernel
    "triton_aot_key": 1,  # aot.runtime.adapters.triton_pykey: a Triton key without the build's CPython
    "cccl_legacy_key": 1,  # aot.runtime.adapters.cccl_legacy.key_of: an NVRTC compile's or nvJitLink link's inputs
    "cccl_legacy_op": 1,   # aot.runtime.adapters.cccl_legacy_ops: an operator's numba compile to LTO-IR
}
#: Each schema in the words a warning or a merge conflict says it.
WORDS: Mapping[str, str] = {
    "numba_digest": "numba kernel digest", "cupy_key": "CuPy compile key", "nvrtc_headers": "NVRTC header digest",
    "item_key": "item key", "triton_digest": "Triton kernel digest", "triton_aot_key": "Triton key across CPythons",
    "cccl_legacy_key": "cccl-legacy compile key", "cccl_legacy_op": "cccl-legacy operator key",
}
#: The schemas each family's artifacts are found or checked by at a library's call: one that differs and the
#: family serves nothing of the set. Not ``triton_aot_key``: a set another one made still serves under Triton's
#: own key (the build's CPython), and its other keys cannot equal this aot's (the schema is hashed in).
FAMILY_SCHEMAS: Mapping[str, tuple[str, ...]] = {
    "numba": ("numba_digest",),
    "cupy": ("cupy_key",),
    "nvrtc": ("nvrtc_headers",),
    "triton": ("triton_digest",),
    "cccl_legacy": ("cccl_legacy_key", "cccl_legacy_op"),
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
    for name in FAMILY_SCHEMAS.get(family, ()):
        built = recorded.get(name)
        if built is not None and built != SCHEMAS[name]:
            return f"built by {WORDS[name]} v{built}, this aot computes v{SCHEMAS[name]}: rebuild the set"
    return None


def merged(recorded: Sequence[Mapping[str, int] | None], where: Sequence[Any]) -> tuple[dict[str, int] | None,
                                                                                       list[str]]:
    """The ``key_schemas`` of a set made from sets that record ``recorded`` (``aot merge``: their folders
    ``where``, in order), and every conflict among them, one line per input that differs from the first input
    naming that schema (the caller lists them with its other conflicts, before writing anything).

    The merged set names a schema where every input names it (all at one version, else that is a conflict): a
    schema only some name (an older aot's set, made before the schema was listed) is left unsaid, its keys
    compared as they are, never claimed for entries another aot made. An input without the field (older still)
    leaves the whole field unsaid. ``None`` in ``recorded`` is such an input; a caller leaves out an input whose
    entries no listed schema keys (a set of cccl-legacy answers only, written before it recorded the field)."""
    first: dict[str, tuple[int, Any]] = {}
    conflicts: list[str] = []
    for r, w in zip(recorded, where, strict=True):
        differ = []
        for name, version in sorted((r or {}).items()):
            seen = first.setdefault(name, (version, w))
            if seen[0] != version:
                differ.append(f"{WORDS.get(name) or 'schema ' + short(name)} v{version}, {seen[1]} by v{seen[0]}")
        if differ:
            conflicts.append(f"{w} by {', '.join(differ)} (rebuild them with this aot)")
    every = [r for r in recorded if r is not None]
    if not every or len(every) < len(recorded):
        return None, conflicts
    return {k: v for k, v in every[0].items() if all(k in r for r in every)}, conflicts


def said(conflicts: Sequence[str]) -> str:
    """:func:`merged`'s conflicts as one clause of a merge's error line."""
    return f"{len(conflicts)} input(s) built by different aot key schemas: " + "; ".join(conflicts)

