"""Which artifacts of a package folder go into packs (:mod:`aot.core.pack`), and writing them.

A wheel compresses each file alone (deflate), so the blobs of one CCCL spec built for twelve SMs under four
cuda-cccl releases cost 48 times one blob although they share most of their bytes: the releases compile
nearly the same kernels, and the SMs of one GPU major nearly the same machine code. Packed, they cost an
eighth of that (docs/wheels.md, "Wheel size": the full matrix of a library-shaped set from 74 MB to 10).

The groups, each one pack:

* a CCCL spec on one GPU major (``sm // 10``: sm_80 to sm_89 together, sm_100 and sm_103, ...): the blob of
  every SM of that major under every carried cuda-cccl release, newest release first. A device is served
  by an SM of its own major (:func:`aot.core.arch.rank`), so one pack answers it; the loader decodes a pack
  only up to the member it needs, and a user most often has the newest release: about 2 ms a spec;
* any other spec (NVRTC unit, numba-cuda, CuPy, Triton kernel): every SM's file in one pack, PTX last
  (they are small: a whole unit decodes in well under a millisecond).

``[tool.aot] pack`` decides whether a folder is packed: ``"auto"`` (the default) packs only a set whose
artifact files add up to more than :data:`AUTO_PACK_BYTES` unpacked (a smaller one cannot reach the index's
100 MB limit however the zip stores it, and stays as plain files), ``true`` always, ``false`` never.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, MutableMapping, Sequence

from ..core.manifest import Manifest, release_order
from ..core.pack import PACK_SUFFIX, encode_pack

#: Unpacked bytes over which ``pack = "auto"`` packs: the package index's default file limit (PyPI: 100 MB). A
#: zip never stores a file larger than it is (deflate falls back to storing), so a set under it fits unpacked.
AUTO_PACK_BYTES = 100 * 10 ** 6
PACK_SETTINGS = ("auto", True, False)


def should_pack(setting: Any, entries: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``entries`` are packed under ``[tool.aot] pack = setting``."""
    if setting == "auto":
        return sum(int(a["size"]) for a in entries) > AUTO_PACK_BYTES
    return bool(setting)


def _group(m: Manifest, a: Mapping[str, Any]) -> tuple[str, tuple]:
    """(pack path, sort key of the member in it: ascending) of one manifest entry."""
    if a["family"] == "cccl":  # every release's blob of this spec on one GPU major; newest release first
        rel = m.release_of(a) or ""
        return (f"cccl/{a['name']}/sm_{a['sm'] // 10}x{PACK_SUFFIX}",
                (_Newest(release_order(rel)), a["sm"], a["path"]))
    ptx = a["payload_kind"] == "ptx"
    return f"{a['family']}/{a['name']}/all{PACK_SUFFIX}", (ptx, a["sm"], a["path"])


class _Newest(tuple):
    """A release's sort key that orders newest first."""

    def __lt__(self, other: tuple) -> bool:
        return tuple.__gt__(self, other)


def write_packed(m: Manifest, entries: Sequence[MutableMapping[str, Any]], stage: Path) -> int:
    """Write the packs of ``entries`` (``m``'s, checked against it) under ``stage`` and add each entry's
    ``pack`` field; returns the bytes written. A member is the artifact file as built; a pack of one member
    is still a pack (one reader path)."""
    groups: dict[str, list[tuple[tuple, MutableMapping[str, Any]]]] = {}
    for a in entries:
        rel, place = _group(m, a)
        groups.setdefault(rel, []).append((place, a))
    total = 0
    for rel, members in sorted(groups.items()):
        members.sort(key=lambda x: x[0])
        data = encode_pack([(a["path"], _read_checked(m, a)) for _, a in members])
        dest = stage / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        total += len(data)
        for _, a in members:
            a["pack"] = rel
    return total


def _read_checked(m: Manifest, a: Mapping[str, Any]) -> bytes:
    """An artifact file of the set being bundled, as its manifest entry describes it (size and sha256): a
    pack is written only of the bytes the manifest promises."""
    import hashlib
    from ..core.errors import ArtifactError
    from ..core.format import read_file
    data = read_file(m.path_of(a), expect_size=a["size"])
    if hashlib.sha256(data).hexdigest() != a["sha256"]:
        raise ArtifactError(f"{m.path_of(a)}: sha256 differs from its manifest entry; not packed")
    return data
