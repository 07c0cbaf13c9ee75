"""aot.core.format: the artifact codec. Round trips, every rejection path, and property tests."""

from __future__ import annotations

import hashlib
import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aot.core import format as fmt
from aot.core.errors import ArtifactError

PRODUCER = {"aot": "0.1.0", "cuda_cccl": "1.2.1", "cuda_major": "13", "nvrtc": "13.5", "nvjitlink": "13.5"}
PAYLOAD = b"\x7fELF" + bytes(range(256)) * 3


def header(payload: bytes = PAYLOAD, **over) -> dict:
    h = fmt.make_header(family="nvrtc", name="morton", content_key="ab" * 32, sm=80, payload_kind="cubin",
                        payload=payload, producer=PRODUCER, kernels=["morton_codes_2d"])
    h.update(over)
    return h


def raw(h, payload: bytes = PAYLOAD, *, hlen: int | None = None) -> bytes:
    """An artifact assembled by hand, bypassing encode()'s checks. ``h``: a dict or the header's bytes."""
    body = h if isinstance(h, bytes) else json.dumps(h).encode()
    return fmt.MAGIC + struct.pack("<I", len(body) if hlen is None else hlen) + body + payload


def rejects(data: bytes, *fragments: str) -> str:
    with pytest.raises(ArtifactError) as ei:
        fmt.decode(data)
    msg = str(ei.value)
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"
    return msg


# ------------------------------------------------------------------------------------------ round trip
def test_round_trip():
    h = header()
    data = fmt.encode(h, PAYLOAD)
    assert data.startswith(fmt.MAGIC)
    art = fmt.decode(data)
    assert art.header == h and art.payload == PAYLOAD
    assert art.sm == 80 and art.kind == "cubin"
    assert fmt.decode(memoryview(data)).payload == PAYLOAD  # bytes-like input works too


def test_round_trip_empty_payload_and_extra_fields():
    h = fmt.make_header(family="cccl", name="r", content_key="k", sm=90, payload_kind="cccl-blob", payload=b"",
                        producer={**PRODUCER, "extra": 1}, extra={"future_field": [1, 2]})
    art = fmt.decode(fmt.encode(h, b""))
    assert art.payload == b"" and art.header["future_field"] == [1, 2] and art.header["kernels"] == []


def test_encoding_is_deterministic():
    h = header()
    assert fmt.encode(h, PAYLOAD) == fmt.encode(dict(reversed(list(h.items()))), PAYLOAD)


def test_read_file(tmp_path):
    p = tmp_path / "a.aot"
    p.write_bytes(fmt.encode(header(), PAYLOAD))
    art = fmt.read(p)
    assert art.payload == PAYLOAD and art.header["name"] == "morton"
    p.write_bytes(p.read_bytes()[:-1])
    with pytest.raises(ArtifactError, match=r"a\.aot: payload is .* \(truncated\)"):
        fmt.read(p)
    with pytest.raises(ArtifactError, match="cannot read"):
        fmt.read(tmp_path / "missing.aot")
    with pytest.raises(ArtifactError, match="cannot read"):
        fmt.read(tmp_path)  # a directory


# -------------------------------------------------------------------------------------- framing errors
def test_bad_magic():
    data = bytearray(fmt.encode(header(), PAYLOAD))
    data[0] ^= 0xFF
    rejects(bytes(data), "bad magic")
    rejects(b"\x7fELF" + bytes(64), "bad magic")


@pytest.mark.parametrize("n", [0, 1, 7, 8, 11])
def test_truncated_below_prefix(n):
    rejects(fmt.encode(header(), PAYLOAD)[:n], "truncated", f"{n} bytes", "12-byte prefix")


def test_truncated_header():
    data = fmt.encode(header(), PAYLOAD)
    (hlen,) = struct.unpack_from("<I", data, 8)
    rejects(data[:fmt.PREFIX_LEN + hlen - 1], "truncated", f"header claims {hlen} bytes", f"{hlen - 1} present")


def test_header_length_zero():
    rejects(raw(b"", b""), "header length 0", f"1..{fmt.MAX_HEADER_LEN}")


@pytest.mark.parametrize("hlen", [fmt.MAX_HEADER_LEN + 1, 2**32 - 1])
def test_header_length_oversized(hlen):
    rejects(raw(header(), hlen=hlen), f"header length {hlen}", f"1..{fmt.MAX_HEADER_LEN}")


@pytest.mark.parametrize("body,fragment", [
    (b"not json", "not valid UTF-8 JSON: JSONDecodeError"),
    (b"{\"a\": ", "not valid UTF-8 JSON"),
    (b"\xff\xfe{}", "not valid UTF-8 JSON: UnicodeDecodeError"),
    (b"[" * 100_000 + b"]" * 100_000, None),  # too long for the cap, or too deep: either way ArtifactError
    (b"[1, 2]", "header is a JSON list, not an object"),
    (b"\"s\"", "header is a JSON str, not an object"),
    (b"null", "header is a JSON NoneType, not an object"),
])
def test_header_not_a_json_object(body, fragment):
    msg = rejects(raw(body))
    if fragment:
        assert fragment in msg


def test_deeply_nested_header_within_cap():
    rejects(raw(b"[" * 30_000 + b"]" * 30_000), "not valid UTF-8 JSON")


# --------------------------------------------------------------------------------------- header fields
@pytest.mark.parametrize("field", list(fmt.HEADER_FIELDS))
def test_missing_field(field):
    h = header()
    del h[field]
    rejects(raw(h), f"header lacks field {field!r}")


WRONG_TYPES = {"format_version": "1", "family": 1, "name": None, "content_key": ["k"], "sm": 80.0,
               "payload_kind": {"k": 1}, "payload_size": "768", "payload_sha256": 0, "kernels": "k",
               "producer": ["aot"]}


@pytest.mark.parametrize("field", list(fmt.HEADER_FIELDS))
def test_wrong_field_type(field):
    rejects(raw(header(**{field: WRONG_TYPES[field]})), f"header field {field!r} has type")


@pytest.mark.parametrize("field", ["format_version", "sm", "payload_size"])
def test_bool_is_not_an_int(field):
    rejects(raw(header(**{field: True})), f"header field {field!r} has type bool")


@pytest.mark.parametrize("over,fragment", [
    ({"format_version": 2}, "format version 2 (this aot reads 1)"),
    ({"format_version": 0}, "format version 0"),
    ({"family": "cuda"}, "unknown family 'cuda'"),
    ({"payload_kind": "ptxx"}, "payload kind 'ptxx' does not belong to family 'nvrtc'"),
    ({"payload_kind": "cccl-blob"}, "payload kind 'cccl-blob' does not belong to family 'nvrtc'"),
    ({"family": "cccl"}, "payload kind 'cubin' does not belong to family 'cccl'"),
    ({"sm": 9}, "implausible sm 9"),
    ({"sm": 1001}, "implausible sm 1001"),
    ({"payload_size": -1}, "payload size -1 out of range"),
    ({"payload_size": fmt.MAX_PAYLOAD_LEN + 1}, "out of range"),
    ({"payload_sha256": "AB" * 32}, "payload_sha256 is not 64 lowercase hex digits"),
    ({"payload_sha256": "ab" * 31}, "payload_sha256 is not 64 lowercase hex digits"),
    ({"kernels": ["ok", 3]}, "kernels must be a list of strings"),
    ({"producer": {"aot": "0.1.0"}}, "producer lacks 'cuda_cccl'"),
])
def test_bad_field_value(over, fragment):
    rejects(raw(header(**over)), fragment)


@pytest.mark.parametrize("missing", fmt.PRODUCER_FIELDS)
def test_producer_field_missing(missing):
    producer = {k: v for k, v in PRODUCER.items() if k != missing}
    rejects(raw(header(producer=producer)), f"producer lacks {missing!r}")


# ------------------------------------------------------------------------------------------- payload
def test_payload_truncated():
    data = fmt.encode(header(), PAYLOAD)
    rejects(data[:-1], f"payload is {len(PAYLOAD) - 1} bytes, header says {len(PAYLOAD)} (truncated)")
    rejects(data[:-len(PAYLOAD)], f"payload is 0 bytes, header says {len(PAYLOAD)} (truncated)")


def test_payload_trailing_bytes():
    data = fmt.encode(header(), PAYLOAD)
    rejects(data + b"\0", f"payload is {len(PAYLOAD) + 1} bytes, header says {len(PAYLOAD)} (trailing bytes)")


def test_payload_sha256_mismatch():
    data = bytearray(fmt.encode(header(), PAYLOAD))
    data[-1] ^= 1
    rejects(bytes(data), "sha256 mismatch")
    other = header(payload_sha256=hashlib.sha256(b"other").hexdigest())
    rejects(raw(other), "sha256 mismatch")


# ------------------------------------------------------------------------------------- encode refuses
def test_encode_refuses_mismatched_payload():
    h = header()
    with pytest.raises(ArtifactError, match=r"does not describe this payload \(size or sha256\)"):
        fmt.encode(h, PAYLOAD + b"x")
    with pytest.raises(ArtifactError, match="does not describe this payload"):
        fmt.encode(h, bytes(len(PAYLOAD)))  # same size, other bytes


def test_encode_refuses_invalid_header():
    with pytest.raises(ArtifactError, match="header lacks field 'producer'"):
        fmt.encode({k: v for k, v in header().items() if k != "producer"}, PAYLOAD)
    with pytest.raises(ArtifactError, match="unknown family"):
        fmt.encode(header(family="x"), PAYLOAD)


def test_encode_refuses_oversized_header():
    h = header(padding="x" * fmt.MAX_HEADER_LEN)
    with pytest.raises(ArtifactError, match="over the 65536-byte cap"):
        fmt.encode(h, PAYLOAD)


def test_make_header_validates():
    with pytest.raises(ArtifactError, match="does not belong"):
        fmt.make_header(family="cccl", name="n", content_key="k", sm=80, payload_kind="ptx", payload=b"",
                        producer=PRODUCER)
    with pytest.raises(ArtifactError, match="producer lacks"):
        fmt.make_header(family="cccl", name="n", content_key="k", sm=80, payload_kind="cccl-blob", payload=b"",
                        producer={})


# ------------------------------------------------------------------------------------------ properties
_json_scalars = st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=20)
_json = st.recursive(_json_scalars, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)


@st.composite
def artifacts(draw):
    family = draw(st.sampled_from(fmt.FAMILIES))
    kind = draw(st.sampled_from(fmt.PAYLOAD_KINDS[family]))
    payload = draw(st.binary(max_size=2048))
    producer = {k: draw(st.text(max_size=12)) for k in fmt.PRODUCER_FIELDS}
    producer.update(draw(st.dictionaries(st.text(max_size=8), _json, max_size=2)))
    extra = draw(st.dictionaries(st.text(min_size=1, max_size=10).filter(lambda k: k not in fmt.HEADER_FIELDS),
                                 _json, max_size=3))
    h = fmt.make_header(family=family, name=draw(st.text(max_size=40)), content_key=draw(st.text(max_size=70)),
                        sm=draw(st.integers(10, 1000)), payload_kind=kind, payload=payload, producer=producer,
                        kernels=draw(st.lists(st.text(max_size=20), max_size=4)), extra=extra)
    return h, payload


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(artifacts())
def test_property_round_trip(art):
    h, payload = art
    data = fmt.encode(h, payload)
    out = fmt.decode(data)
    assert out.header == h and out.payload == payload
    assert fmt.encode(out.header, out.payload) == data


@st.composite
def mutated(draw):
    h, payload = draw(artifacts())
    data = bytearray(fmt.encode(h, payload))
    (hlen,) = struct.unpack_from("<I", data, 8)
    header_region = range(fmt.PREFIX_LEN, fmt.PREFIX_LEN + hlen)
    op = draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete", "append"]))
    touched_header = False
    if op in ("flip", "set", "delete", "insert"):
        i = draw(st.integers(0, len(data) - 1))
        touched_header = i in header_region
        if op == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[i] = draw(st.integers(0, 255))
        elif op == "delete":
            del data[i]
        else:
            data.insert(i, draw(st.integers(0, 255)))
    elif op == "truncate":
        del data[draw(st.integers(0, len(data) - 1)):]
    else:
        data += draw(st.binary(min_size=1, max_size=8))
    return h, payload, bytes(data), touched_header


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_property_mutations_never_escape(case):
    """A mutated artifact decodes to the original or raises ArtifactError, never another exception.

    One exception, see test_header_corruption_is_detected: a change inside the JSON header that
    leaves valid JSON with valid field values (``"sm":80`` -> ``"sm":90``) decodes. The payload is
    still always the original one: its size and sha256 are checked.
    """
    h, payload, data, touched_header = case
    try:
        out = fmt.decode(data)
    except ArtifactError:
        return
    assert out.payload == payload
    if not touched_header:
        assert out.header == h


def test_header_semantics_are_checked_by_the_readers_not_the_codec(tmp_path):
    """decode() checks structure and the payload hash, not what a header says: '"sm":80' -> '"sm":90' is
    another valid header. Every reader adds that check: a packaged artifact must match its manifest entry's
    whole-file sha256 (verify_files, and the loader), a user-cache entry its expected name/SM/kind/key."""
    from aot.core.manifest import load_manifest, verify_files, write_manifest
    import hashlib
    data = fmt.encode(header(sm=80), PAYLOAD)
    bad = data.replace(b'"sm":80', b'"sm":90')
    assert bad != data and len(bad) == len(data)
    assert fmt.decode(bad).header["sm"] == 90  # the codec alone cannot tell
    h = fmt.decode(data).header
    (tmp_path / "a.aot").write_bytes(data)
    write_manifest(tmp_path, producer=h["producer"], specs={h["name"]: {"name": h["name"], "algorithm": "reduce",
                   "dtype": "int32", "op": "plus", "init": 0}},
                   artifacts=[{"path": "a.aot", "name": h["name"], "family": h["family"], "sm": 80,
                               "payload_kind": h["payload_kind"], "size": len(data),
                               "sha256": hashlib.sha256(data).hexdigest(), "content_key": h["content_key"]}])
    assert verify_files(load_manifest(tmp_path)) == []
    (tmp_path / "a.aot").write_bytes(bad)
    assert any("sha256" in p for p in verify_files(load_manifest(tmp_path)))
