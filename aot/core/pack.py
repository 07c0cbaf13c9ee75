"""The packed store: artifact files of one group compressed together, undone by the loader on first need.

A wheel that carries every SM of a CUDA major and several cuda-cccl releases holds one CCCL blob per (spec,
SM, release). The blobs of one spec and SM built under different releases share most of their bytes (the same
kernels, compiled by the same NVRTC from nearly the same headers), and deflate, which a wheel compresses each
file with on its own, sees none of it. A pack compresses a group of artifact files as one LZMA2 stream, so
what one member shares with the members before it costs almost nothing (docs/wheels.md, "Wheel size").

Layout (integers little-endian)::

    offset 0   8 bytes   magic  b"AOTPACK\\0"
    offset 8   4 bytes   u32    header length H (1 <= H <= MAX_HEADER_LEN)
    offset 12  H bytes          UTF-8 JSON object: format_version, codec, raw_size, members
    offset 12+H                 a raw LZMA2 stream (the reader's own filter chain) of the members' bytes,
                                back to back in the header's order

Each member is an artifact file exactly as ``aot build`` wrote it (magic header, payload): unpacking gives the
bytes the manifest's ``size`` and ``sha256`` describe, and everything after that is the artifact's own check.
Never pickle: a reader produces only a dict and bytes.

Untrusted input: the pack is read bounded (a regular file, at most :data:`MAX_PACK_FILE`), the header is
strict JSON whose members must tile ``raw_size`` exactly, and the stream is decoded with the reader's filter
chain (the file cannot ask for a larger dictionary) and only up to the end of the member asked for
(``max_length``): a pack that claims little and expands to much is cut off there, never held whole.

Deterministic: the same members in the same order give the same bytes (the header is sorted compact JSON;
the stream has no timestamps or names; the preset is fixed), so one content key gives one pack on any host
with the same liblzma. ``lzma`` is imported only when a pack is written or read: ``import aot`` never pays it.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Mapping, Sequence

from .errors import ArtifactError
from .format import MAX_FILE_LEN, MAX_HEADER_LEN, is_sha256_hex, loads_strict_json, read_file

PACK_MAGIC = b"AOTPACK\0"
PACK_VERSION = 1
CODEC = "lzma2"
#: LZMA2 preset 6 (8 MiB dictionary, about 9 MiB to decode): what xz uses by default; 9 gains ~1% here and
#: needs 65 MiB to decode.
PRESET = 6
#: How a pack file is named in an artifact folder.
PACK_SUFFIX = ".aotpack"
#: Largest pack file read, and most bytes one pack may unpack to (its members together).
MAX_PACK_FILE = MAX_FILE_LEN
MAX_PACK_RAW = 1 << 30
MAX_MEMBERS = 4096
MAX_MEMBER_PATH = 1024
_PREFIX = len(PACK_MAGIC) + 4


def _filters() -> list[dict[str, Any]]:
    import lzma  # 1-2 ms: only where a pack is written or read
    return [{"id": lzma.FILTER_LZMA2, "preset": PRESET}]


def encode_pack(members: Sequence[tuple[str, bytes]]) -> bytes:
    """One pack of ``members`` ((path, bytes), kept in this order: a reader decodes up to its member, so the
    likeliest first). The paths are the members' manifest paths; each must appear once."""
    import hashlib
    import lzma
    paths = [p for p, _ in members]
    if not members or len(members) > MAX_MEMBERS or len(set(paths)) != len(paths):
        raise ArtifactError(f"a pack holds 1 to {MAX_MEMBERS} distinct members, not {len(members)}")
    table, offset = [], 0
    for path, data in members:
        if not isinstance(path, str) or not path or len(path) > MAX_MEMBER_PATH:
            raise ArtifactError(f"pack member path {path!r} is not a short plain string")
        table.append({"path": path, "offset": offset, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        offset += len(data)
    if offset > MAX_PACK_RAW:
        raise ArtifactError(f"a pack of {offset} bytes is over the {MAX_PACK_RAW}-byte bound every reader applies")
    header = {"format": "aot-pack", "format_version": PACK_VERSION, "codec": CODEC, "preset": PRESET,
              "raw_size": offset, "members": table}
    raw = json.dumps(header, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(raw) > MAX_HEADER_LEN:
        raise ArtifactError(f"pack header of {len(raw)} bytes is over the {MAX_HEADER_LEN}-byte cap")
    body = lzma.compress(b"".join(data for _, data in members), format=lzma.FORMAT_RAW, filters=_filters())
    return PACK_MAGIC + struct.pack("<I", len(raw)) + raw + body


def decode_pack_header(data: bytes) -> tuple[dict[str, Any], int]:
    """The checked header of a pack and where its stream starts. ArtifactError says what is wrong."""
    if len(data) < _PREFIX or data[:len(PACK_MAGIC)] != PACK_MAGIC:
        raise ArtifactError("not an aot pack (bad magic or truncated)")
    (hlen,) = struct.unpack_from("<I", data, len(PACK_MAGIC))
    if not 1 <= hlen <= MAX_HEADER_LEN or _PREFIX + hlen > len(data):
        raise ArtifactError(f"pack header length {hlen} is outside the file or the {MAX_HEADER_LEN}-byte cap")
    try:
        h = loads_strict_json(data[_PREFIX:_PREFIX + hlen])
    except ValueError as e:
        raise ArtifactError(f"pack header is not valid JSON: {str(e)[:200]}") from None
    if not isinstance(h, dict) or h.get("format") != "aot-pack":
        raise ArtifactError("pack header is not an aot pack's")
    if h.get("format_version") != PACK_VERSION or h.get("codec") != CODEC or h.get("preset") != PRESET:
        raise ArtifactError(f"pack format {str(h.get('format_version'))[:20]}, codec {str(h.get('codec'))[:20]} "
                            f"(this aot reads version {PACK_VERSION}, {CODEC} preset {PRESET})")
    members, raw_size = h.get("members"), h.get("raw_size")
    if not isinstance(members, list) or not 1 <= len(members) <= MAX_MEMBERS or isinstance(raw_size, bool) \
            or not isinstance(raw_size, int) or not 0 <= raw_size <= MAX_PACK_RAW:
        raise ArtifactError("pack header: members or raw_size missing or out of bounds")
    offset = 0
    for i, m in enumerate(members):  # the members tile the stream exactly: no overlap, no gap, nothing past raw_size
        if not (isinstance(m, dict) and isinstance(m.get("path"), str) and is_sha256_hex(m.get("sha256"))
                and all(isinstance(m.get(k), int) and not isinstance(m.get(k), bool) for k in ("offset", "size"))
                and m["offset"] == offset and 0 <= m["size"] <= MAX_FILE_LEN):
            raise ArtifactError(f"pack header: member {i} is malformed or out of place")
        offset += m["size"]
    if offset != raw_size:
        raise ArtifactError(f"pack header: members add up to {offset} bytes, raw_size says {raw_size}")
    return h, _PREFIX + hlen


def unpack_member(data: bytes, path: str, size: int) -> bytes:
    """The bytes of member ``path`` (``size`` bytes, as the manifest says) of the pack ``data``, decoding the
    stream only up to that member's end."""
    import lzma
    h, start = decode_pack_header(data)
    member = next((m for m in h["members"] if m["path"] == path), None)
    if member is None:
        raise ArtifactError(f"pack holds no member {path[:200]!r}")
    if member["size"] != size:
        raise ArtifactError(f"pack member is {member['size']} bytes, the manifest says {size}")
    end = member["offset"] + size
    try:  # the reader's filters, not the file's: the dictionary and so the memory are ours to bound
        out = lzma.LZMADecompressor(format=lzma.FORMAT_RAW, filters=_filters()).decompress(
            memoryview(data)[start:], max_length=end)
    except (lzma.LZMAError, MemoryError) as e:
        raise ArtifactError(f"pack stream is corrupt ({e})") from None
    if len(out) != end:
        raise ArtifactError(f"pack stream ends after {len(out)} bytes, member needs {end} (truncated)")
    return out[member["offset"]:end]


def read_member(manifest: Any, entry: Mapping[str, Any]) -> bytes:
    """The artifact file of a packed manifest ``entry`` (its ``pack`` field names the pack, inside the
    manifest's folder), as bytes: the one place the loader reads a packed artifact."""
    rel = entry.get("pack")
    if not isinstance(rel, str) or not rel.endswith(PACK_SUFFIX):
        raise ArtifactError(f"manifest field 'pack' of {str(entry.get('path'))[:200]} is not a pack's path")
    pack_path = manifest.path_of({"path": rel})  # a plain relative path that stays inside the folder
    data = read_file(pack_path, max_size=MAX_PACK_FILE)
    try:
        return unpack_member(data, entry["path"], entry["size"])
    except ArtifactError as e:
        raise ArtifactError(f"{pack_path}: {e}") from None


def pack_problems(manifest: Any, entry: Mapping[str, Any]) -> str | None:
    """What is wrong with a packed entry's bytes (for ``aot verify``), else ``None``."""
    import hashlib
    try:
        data = read_member(manifest, entry)
    except ArtifactError as e:
        return str(e)
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        return "sha256 differs from the manifest"
    return None
