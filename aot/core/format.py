"""The artifact codec: ``magic | u32 header_len | JSON header | payload``. Pure bytes, no CUDA.

Layout (all integers little-endian)::

    offset 0   8 bytes   magic  b"CCCLCCH\\0"
    offset 8   4 bytes   u32    header length H (1 <= H <= MAX_HEADER_LEN)
    offset 12  H bytes          UTF-8 JSON object (the header)
    offset 12+H                 payload: exactly header["payload_size"] bytes, sha256 = header["payload_sha256"]

Why not pickle: artifacts are read on every end user's machine; a reader that can only produce a
dict and a bytes object cannot be made to run code. Every bound is checked before it is trusted, the
header length is capped, and the payload's size and hash must match the header exactly. The header is
strict JSON (no NaN/Infinity, duplicate keys or lone surrogates: no two readers can disagree on it), and
:func:`read` refuses anything but a regular file of plausible size before reading a byte of it.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import struct
from typing import Any, Mapping

from .errors import ArtifactError

MAGIC = b"CCCLCCH\0"
FORMAT_VERSION = 1
MAX_HEADER_LEN = 64 * 1024
MAX_PAYLOAD_LEN = 256 * 1024 * 1024
PREFIX_LEN = len(MAGIC) + 4
#: No artifact file can be larger than this; :func:`read` refuses bigger files before reading them.
MAX_FILE_LEN = PREFIX_LEN + MAX_HEADER_LEN + MAX_PAYLOAD_LEN

FAMILIES = ("cccl", "nvrtc", "numba", "cupy", "triton")
PAYLOAD_KINDS = {"cccl": ("cccl-blob",), "nvrtc": ("cubin", "ptx"), "numba": ("cubin", "ptx"), "cupy": ("cubin",),
                 "triton": ("cubin",)}

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


class Artifact:
    """A decoded artifact: its checked header and payload. Immutable; a plain class, not a frozen dataclass, whose
    creation cost every process 0.5 ms at import (a library's first packaged hit imports this module: issue 42)."""

    __slots__ = ("header", "payload")
    header: Mapping[str, Any]
    payload: bytes

    def __init__(self, header: Mapping[str, Any], payload: bytes):
        object.__setattr__(self, "header", header)
        object.__setattr__(self, "payload", payload)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"an Artifact is immutable (cannot set {name!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Artifact):
            return NotImplemented
        return (self.header, self.payload) == (other.header, other.payload)

    __hash__ = None  # type: ignore[assignment]  # as the frozen dataclass of an unhashable header was

    def __repr__(self) -> str:
        return f"Artifact(header={self.header!r}, payload=<{len(self.payload)} bytes>)"

    @property
    def sm(self) -> int:
        return self.header["sm"]

    @property
    def kind(self) -> str:
        return self.header["payload_kind"]


def is_sha256_hex(value: object) -> bool:
    """64 lowercase hex digits: how payload hashes, file hashes and content keys are written."""
    return isinstance(value, str) and len(value) == 64 and not value.strip("0123456789abcdef")


def make_header(*, family: str, name: str, content_key: str, sm: int, payload_kind: str, payload: bytes,
                producer: Mapping[str, Any], kernels: list[str] | None = None,
                extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    import hashlib  # OpenSSL, 2-3 ms to import: not on a Registry's first use (names() reads no artifact)
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
    import hashlib  # OpenSSL, 2-3 ms to import: not on a Registry's first use (names() reads no artifact)
    if header["payload_size"] != len(payload) or header["payload_sha256"] != hashlib.sha256(payload).hexdigest():
        raise ArtifactError("header does not describe this payload (size or sha256)")
    try:  # strict JSON only (no NaN/Infinity, no lone surrogates): exactly what decode() accepts
        raw = json.dumps(header, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")
        json.dumps(header, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (ValueError, TypeError, RecursionError) as e:
        raise ArtifactError(f"header is not strict JSON: {type(e).__name__}: {e}") from None
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
    if not is_sha256_hex(sha):
        raise ArtifactError("payload_sha256 is not 64 lowercase hex digits")
    if not all(isinstance(k, str) for k in h["kernels"]):
        raise ArtifactError("kernels must be a list of strings")
    for key in PRODUCER_FIELDS:
        if key not in h["producer"]:
            raise ArtifactError(f"producer lacks {key!r}")


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses as inf
        raise ValueError(f"number {text[:20]} overflows a double")
    return value


def _unique_keys(pairs: list) -> dict:
    out = dict(pairs)  # in C: a manifest has hundreds of objects
    if len(out) != len(pairs):  # two readers could otherwise disagree on which value counts
        seen: set = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"duplicate key {dup!r}")
    return out


#: The only way a lone surrogate gets into text decoded from UTF-8: a ``\\uD800``-``\\uDFFF`` escape.
_SURROGATE_ESCAPE = r"\\u[dD][89a-fA-F]"


def loads_strict_json(raw: bytes) -> Any:
    """Parse UTF-8 JSON strictly: no NaN/Infinity, no overflowing numbers, no duplicate keys, no lone
    surrogates, nothing nested deeper than the interpreter's recursion limit. Raises ``ValueError`` only
    (``UnicodeDecodeError``, ``JSONDecodeError``; too deep: a plain ``ValueError``, never the
    ``RecursionError`` ``json`` raises), so every reader of untrusted JSON catches one type."""
    try:
        text = bytes(raw).decode("utf-8")
        obj = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float,
                         object_pairs_hook=_unique_keys)
        # only such an escape can make a lone surrogate (encoding all again costs 1 ms a manifest); compiled only then
        if "\\u" in text and re.search(_SURROGATE_ESCAPE, text):
            json.dumps(obj, ensure_ascii=False).encode("utf-8")  # lone surrogates ("\ud800") do not encode
    except UnicodeEncodeError:
        raise ValueError(f"string {(_first_unencodable(obj) or '')[:60]!r} holds a lone surrogate") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    return obj


def _first_unencodable(obj: Any) -> str | None:
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
        elif isinstance(o, str):
            try:
                o.encode("utf-8")
            except UnicodeEncodeError:
                return o
    return None


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
        header = loads_strict_json(data[PREFIX_LEN:PREFIX_LEN + hlen])
    except (ValueError, RecursionError) as e:
        raise ArtifactError(f"header is not valid UTF-8 JSON: {type(e).__name__}: "
                            f"{str(e)[:200]}") from None
    validate_header(header)
    return header, PREFIX_LEN + hlen


def decode(data: bytes) -> Artifact:
    """Parse and fully check an artifact (bounds, sizes, sha256). Never returns a partial result."""
    header, offset = decode_header(data)
    payload = bytes(data[offset:])
    if len(payload) != header["payload_size"]:
        raise ArtifactError(f"payload is {len(payload)} bytes, header says {header['payload_size']}"
                            + (" (truncated)" if len(payload) < header["payload_size"] else " (trailing bytes)"))
    import hashlib  # OpenSSL, 2-3 ms to import: not on a Registry's first use (names() reads no artifact)
    if hashlib.sha256(payload).hexdigest() != header["payload_sha256"]:
        raise ArtifactError("payload sha256 mismatch (corrupt artifact)")
    return Artifact(header=header, payload=payload)


def _read_regular(path, max_size: int, expect_size: int | None = None, *, dir_fd: int | None = None,
                  nofollow: bool = False, check=None) -> bytes:
    """The bytes of a regular file, bounded before anything is allocated. Raises ``OSError`` (cannot open or
    read) or :class:`ArtifactError` (not a regular file, too large, not ``expect_size``, changed while read).

    Opened ``O_NONBLOCK``: a FIFO or device planted where a file should be cannot block the reader (the
    flag does not affect regular files, and anything else is refused after ``fstat``).
    ``dir_fd``/``nofollow``/``check(st)``: for the user cache, which opens relative to a checked directory,
    refuses a symlink, and checks the owner on the descriptor it then reads (no check-then-open race).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if nofollow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except ValueError as e:  # embedded NUL, unencodable name
        raise ArtifactError(f"{path!r}: unusable file name: {e}") from None
    try:
        st = os.fstat(fd)
        if check is not None:
            check(st)
        if not stat.S_ISREG(st.st_mode):
            raise ArtifactError(f"{path}: cannot read: not a regular file")
        if st.st_size > max_size:
            raise ArtifactError(f"{path}: file is {st.st_size} bytes, over the {max_size}-byte limit "
                                f"(refused before reading)")
        if expect_size is not None and st.st_size != expect_size:
            raise ArtifactError(f"{path}: file is {st.st_size} bytes, expected {expect_size}")
        with open(fd, "rb", closefd=False) as f:
            data = f.read(st.st_size + 1)  # one byte more than stat said: detects a file still growing
        if len(data) != st.st_size:
            raise ArtifactError(f"{path}: file changed while it was read ({st.st_size} bytes by stat, "
                                f"{len(data)}{'+' if len(data) > st.st_size else ''} read)")
        return data
    finally:
        os.close(fd)


def read_file(path, *, max_size: int = MAX_FILE_LEN, expect_size: int | None = None) -> bytes:
    """The raw bytes of the file at ``path``, refusing (:class:`ArtifactError`) anything that is not a
    regular file, is over ``max_size`` bytes or (when given) is not exactly ``expect_size`` bytes, before
    reading it. For readers that check a manifest's size and sha256 before :func:`decode`."""
    try:
        return _read_regular(path, max_size, expect_size)
    except OSError as e:
        raise ArtifactError(f"{path}: cannot read: {e.strerror or e}") from None


def read(path) -> Artifact:
    """Read and decode a file; size-capped so a huge file is refused before it is read."""
    data = read_file(path)
    try:
        return decode(data)
    except ArtifactError as e:
        raise ArtifactError(f"{path}: {e}") from None
