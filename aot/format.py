"""The artifact codec: ``magic | u32 header_len | JSON header | payload``. Pure bytes, no CUDA.

Layout (all integers little-endian)::

    offset 0   8 bytes   magic  b"CCCLCCH\\0"
    offset 8   4 bytes   u32    header length H (1 <= H <= MAX_HEADER_LEN)
    offset 12  H bytes          UTF-8 JSON object (the header)
    offset 12+H                 payload: exactly header["payload_size"] bytes, sha256 = header["payload_sha256"]

Why not pickle: artifacts are read on every end user's machine; a reader that can only produce a
dict and a bytes object cannot be made to run code. Every bound is checked before it is trusted, the
header length is capped, and the payload's size and hash must match the header exactly.
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any, Mapping

from .errors import ArtifactError

MAGIC = b"CCCLCCH\0"
FORMAT_VERSION = 1
MAX_HEADER_LEN = 64 * 1024
MAX_PAYLOAD_LEN = 256 * 1024 * 1024
PREFIX_LEN = len(MAGIC) + 4

FAMILIES = ("cccl", "nvrtc")
PAYLOAD_KINDS = {"cccl": ("cccl-blob",), "nvrtc": ("cubin", "ptx")}

#: Required header fields and their JSON types. Extra fields are allowed (forward compatible).
HEADER_FIELDS: dict[str, type | tuple[type, ...]] = {
    "format_version": int,
    "family": str,
    "name": str,
    "content_key": str,
    "sm": int,
    "payload_kind": str,
    "payload_size": int,
    "payload_sha256": str,
    "kernels": list,
    "producer": dict,
}
PRODUCER_FIELDS = ("aot", "cuda_cccl", "cuda_major", "nvrtc", "nvjitlink")


@dataclass(frozen=True)
class Artifact:
    header: Mapping[str, Any]
    payload: bytes

    @property
    def sm(self) -> int:
        return self.header["sm"]

    @property
    def kind(self) -> str:
        return self.header["payload_kind"]


def make_header(*, family: str, name: str, content_key: str, sm: int, payload_kind: str, payload: bytes,
                producer: Mapping[str, Any], kernels: list[str] | None = None,
                extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    header = {
        "format_version": FORMAT_VERSION,
        "family": family,
        "name": name,
        "content_key": content_key,
        "sm": sm,
        "payload_kind": payload_kind,
        "payload_size": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
        "kernels": list(kernels or []),
        "producer": dict(producer),
    }
    if extra:
        header.update(extra)
    validate_header(header)
    return header


def encode(header: Mapping[str, Any], payload: bytes) -> bytes:
    """Serialize; the header is validated against the payload first, so a bad artifact is never written."""
    validate_header(header)
    if header["payload_size"] != len(payload) or header["payload_sha256"] != hashlib.sha256(payload).hexdigest():
        raise ArtifactError("header does not describe this payload (size or sha256)")
    raw = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    if len(raw) > MAX_HEADER_LEN:
        raise ArtifactError(f"header is {len(raw)} bytes, over the {MAX_HEADER_LEN}-byte cap")
    return MAGIC + struct.pack("<I", len(raw)) + raw + payload


def validate_header(h: Any) -> None:
    """Type- and range-check a header dict; raises :class:`ArtifactError` naming the first bad field."""
    if not isinstance(h, dict):
        raise ArtifactError(f"header is a JSON {type(h).__name__}, not an object")
    for key, typ in HEADER_FIELDS.items():
        if key not in h:
            raise ArtifactError(f"header lacks field {key!r}")
        value = h[key]
        if isinstance(value, bool) or not isinstance(value, typ):
            raise ArtifactError(f"header field {key!r} has type {type(value).__name__}")
    if h["format_version"] != FORMAT_VERSION:
        raise ArtifactError(f"format version {h['format_version']} (this aot reads {FORMAT_VERSION})")
    if h["family"] not in FAMILIES:
        raise ArtifactError(f"unknown family {h['family']!r}")
    if h["payload_kind"] not in PAYLOAD_KINDS[h["family"]]:
        raise ArtifactError(f"payload kind {h['payload_kind']!r} does not belong to family {h['family']!r}")
    if not 10 <= h["sm"] <= 1000:
        raise ArtifactError(f"implausible sm {h['sm']}")
    if not 0 <= h["payload_size"] <= MAX_PAYLOAD_LEN:
        raise ArtifactError(f"payload size {h['payload_size']} out of range")
    sha = h["payload_sha256"]
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise ArtifactError("payload_sha256 is not 64 lowercase hex digits")
    if not all(isinstance(k, str) for k in h["kernels"]):
        raise ArtifactError("kernels must be a list of strings")
    for key in PRODUCER_FIELDS:
        if key not in h["producer"]:
            raise ArtifactError(f"producer lacks {key!r}")


def decode_header(data: bytes) -> tuple[dict[str, Any], int]:
    """Parse magic, length and header from the first bytes; returns (header, payload offset)."""
    if len(data) < PREFIX_LEN:
        raise ArtifactError(f"truncated: {len(data)} bytes, shorter than the {PREFIX_LEN}-byte prefix")
    if data[:len(MAGIC)] != MAGIC:
        raise ArtifactError("bad magic (not an aot artifact)")
    (hlen,) = struct.unpack_from("<I", data, len(MAGIC))
    if hlen == 0 or hlen > MAX_HEADER_LEN:
        raise ArtifactError(f"header length {hlen} outside 1..{MAX_HEADER_LEN}")
    if PREFIX_LEN + hlen > len(data):
        raise ArtifactError(f"truncated: header claims {hlen} bytes, {len(data) - PREFIX_LEN} present")
    try:
        header = json.loads(bytes(data[PREFIX_LEN:PREFIX_LEN + hlen]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ArtifactError(f"header is not valid UTF-8 JSON: {type(e).__name__}") from None
    validate_header(header)
    return header, PREFIX_LEN + hlen


def decode(data: bytes) -> Artifact:
    """Parse and fully check an artifact (bounds, sizes, sha256). Never returns a partial result."""
    header, offset = decode_header(data)
    payload = bytes(data[offset:])
    if len(payload) != header["payload_size"]:
        raise ArtifactError(f"payload is {len(payload)} bytes, header says {header['payload_size']}"
                            + (" (truncated)" if len(payload) < header["payload_size"] else " (trailing bytes)"))
    if hashlib.sha256(payload).hexdigest() != header["payload_sha256"]:
        raise ArtifactError("payload sha256 mismatch (corrupt artifact)")
    return Artifact(header=header, payload=payload)


def read(path) -> Artifact:
    """Read and decode a file; size-capped so a huge file is refused before it is read."""
    import os
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_PAYLOAD_LEN + MAX_HEADER_LEN + PREFIX_LEN:
                raise ArtifactError(f"{path}: file is {size} bytes, larger than any artifact can be")
            data = f.read()
    except OSError as e:
        raise ArtifactError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        return decode(data)
    except ArtifactError as e:
        raise ArtifactError(f"{path}: {e}") from None
