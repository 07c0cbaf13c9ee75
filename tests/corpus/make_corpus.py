"""Regenerate the regression corpus replayed by tests/test_fuzz.py::test_corpus_replay.

    python tests/corpus/make_corpus.py

File names say what must happen: ``reject-*.aot`` raise ArtifactError from ``aot.core.format.decode``,
``valid-*.aot`` decode exactly; ``reject-*.json`` (as ``manifest.json``) raise ArtifactError from
``load_manifest``, ``problem-*.json`` load but ``verify_files`` reports problems. The manifests are replayed
in a directory holding one file, ``cccl/r/sm_90.aot`` (not an artifact). Cases marked "crashed before" made
the code of commit 0dc2452 raise something other than ArtifactError (or hang).
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAGIC = b"CCCLCCH\0"
PAYLOAD = bytes(range(64))
PRODUCER = {"aot": "0.1.0", "cuda_cccl": "1.2.1", "cuda_major": "13", "nvrtc": "13.0", "nvjitlink": "13.0"}


def header(**over) -> dict:
    h = {"format_version": 1, "family": "nvrtc", "name": "morton", "content_key": "ab" * 32, "sm": 90,
         "payload_kind": "cubin", "payload_size": len(PAYLOAD), "payload_sha256": hashlib.sha256(PAYLOAD).hexdigest(),
         "kernels": ["morton_codes_2d"], "producer": dict(PRODUCER)}
    h.update(over)
    return h


def art(h, payload: bytes = PAYLOAD, *, hlen: int | None = None) -> bytes:
    body = h if isinstance(h, bytes) else json.dumps(h, sort_keys=True).encode()
    return MAGIC + struct.pack("<I", len(body) if hlen is None else hlen) + body + payload


def with_token(field: str, token: bytes) -> bytes:
    """Header JSON text with ``field``'s value replaced by a raw token."""
    h = header()
    h.pop(field, None)
    return b'{"' + field.encode() + b'":' + token + b"," + json.dumps(h)[1:].encode()


GOOD = header()
ARTIFACTS = {
    "valid-minimal": art(GOOD),
    "valid-pretty-header-extra-fields": art(json.dumps({**GOOD, "future": {"a": [1, None]}, "emoji": "\U0001f600"},
                                                      indent=2).encode()),
    "reject-hlen-zero": art(GOOD, hlen=0),
    "reject-hlen-u32-max": art(GOOD, hlen=2 ** 32 - 1),
    "reject-hlen-past-end": art(GOOD, hlen=len(json.dumps(GOOD, sort_keys=True)) + len(PAYLOAD) + 1),
    "reject-hlen-short": art(GOOD, hlen=len(json.dumps(GOOD, sort_keys=True)) - 1),
    "reject-payload-size-4GB": art(header(payload_size=4 * 2 ** 30)),
    "reject-payload-size-2pow64": art(header(payload_size=2 ** 64)),
    "reject-payload-size-negative": art(header(payload_size=-1)),
    "reject-sm-string": art(header(sm="90")),
    "reject-sm-bool": art(header(sm=True)),
    "reject-sm-float": art(header(sm=90.0)),
    "reject-sm-huge-int": art(header(sm=10 ** 30)),
    "reject-sm-5000-digits": art(with_token("sm", b"1" + b"0" * 4400)),
    "reject-sm-nan": art(with_token("sm", b"NaN")),
    "reject-sm-infinity": art(with_token("sm", b"Infinity")),
    "reject-nan-in-extra-field": art(with_token("extra", b"NaN")),             # accepted before
    "reject-1e999-in-extra-field": art(with_token("extra", b"1e999")),         # accepted before (inf)
    "reject-duplicate-key-sm": art(with_token("sm", b"80")[:-1] + b',"sm":90}'),  # accepted before
    "reject-lone-surrogate-name": art(with_token("name", b'"\\ud800"')),       # accepted before
    "reject-non-utf8-header": art(with_token("name", b'"\xff\xfe"')),
    "reject-encoded-surrogate": art(with_token("name", b'"\xed\xa0\x80"')),
    "reject-bom-header": art(b"\xef\xbb\xbf" + json.dumps(GOOD).encode()),
    "reject-deep-nesting": art(with_token("extra", b"[" * 1500 + b"]" * 1500)),
    "reject-header-is-array": art(b"[1,2]"),
    "reject-producer-not-object": art(header(producer="13")),
    "reject-producer-lacks-nvrtc": art(header(producer={k: v for k, v in PRODUCER.items() if k != "nvrtc"})),
    "reject-format-version-2": art(header(format_version=2)),
    "reject-kind-of-other-family": art(header(payload_kind="cccl-blob")),
    "reject-sha-uppercase": art(header(payload_sha256=hashlib.sha256(PAYLOAD).hexdigest().upper())),
    "reject-trailing-bytes": art(GOOD) + b"\0",
    "reject-truncated-payload": art(GOOD)[:-1],
    "reject-truncated-prefix": art(GOOD)[:11],
    "reject-elf-magic": b"\x7fELF\x02\x01\x01\x00" + art(GOOD)[8:],
}

SHA = "0" * 64
ENTRY = {"path": "cccl/r/sm_90.aot", "name": "r", "family": "cccl", "sm": 90, "payload_kind": "cccl-blob",
         "size": 15, "sha256": SHA, "content_key": "c" * 64}
SPEC = {"name": "r", "algorithm": "reduce", "dtype": "int32", "op": "plus", "init": 0}


def manifest(entries=None, specs=None, **over) -> dict:
    d = {"format": "aot-manifest", "manifest_version": 1, "producer": dict(PRODUCER), "sms": [90],
         "specs": {"r": dict(SPEC)} if specs is None else specs, "artifacts": [ENTRY] if entries is None else entries}
    d.update(over)
    return d


def m_path(p: str) -> dict:
    return manifest([{**ENTRY, "path": p}])


def m_entry(**over) -> dict:
    return manifest([{**ENTRY, **over}])


def enc(d) -> bytes:
    return json.dumps(d).encode()


MANIFESTS = {
    "reject-path-dotdot": enc(m_path("../x")),
    "reject-path-absolute": enc(m_path("/etc/passwd")),
    "reject-path-inner-dotdot": enc(m_path("a/../../x")),
    "reject-path-backslash": enc(m_path("..\\x")),
    "reject-path-empty": enc(m_path("")),
    "reject-path-dot": enc(m_path(".")),                      # crashed before (IndexError)
    "reject-path-dot-slash": enc(m_path("./")),               # crashed before (IndexError)
    "reject-path-nul": enc(m_path("a\x00b")),                 # crashed before (ValueError)
    "reject-path-lone-surrogate": enc(m_path("\ud800.aot")),  # crashed before (UnicodeEncodeError)
    "reject-path-drive": enc(m_path("C:x")),
    "reject-path-not-a-string": enc(m_path(["cccl", "r"])),
    "reject-sm-string": enc(m_entry(sm="90")),
    "reject-size-bool": enc(m_entry(size=True)),
    "reject-size-negative": enc(m_entry(size=-1)),
    "reject-size-nan": enc(m_entry(size=float("nan"))),
    "reject-sha-not-hex": enc(m_entry(sha256="z" * 64)),
    "reject-duplicate-keys": enc(manifest())[:-1] + b', "format": "aot-manifest"}',  # accepted before
    "reject-spec-not-object": enc(manifest(specs={"r": dict(SPEC), "x": "algorithm"})),  # crashed Registry()
    "reject-spec-name-mismatch": enc(manifest(specs={"r": {**SPEC, "name": "other"}})),
    "reject-unknown-spec": enc(m_entry(name="nope")),
    "reject-manifest-version-2": enc(manifest(manifest_version=2)),
    "reject-artifacts-not-list": enc(manifest(artifacts={"a": 1})),
    "reject-deep-nesting": b'{"format": "aot-manifest", "x": ' + b"[" * 1500 + b"]" * 1500 + b"}",
    "reject-not-utf8": enc(manifest()).replace(b'"r"', b'"\xff"', 1),
    "reject-truncated": enc(manifest())[:-20],
    "problem-sha-mismatch": enc(manifest()),
    "problem-missing-file": enc(m_path("cccl/r/sm_80.aot")),
    "problem-directory": enc(m_path("cccl/r")),
}


def main() -> None:
    for old in HERE.glob("*"):
        if old.suffix in (".aot", ".json"):
            old.unlink()
    for name, data in ARTIFACTS.items():
        (HERE / f"{name}.aot").write_bytes(data)
    for name, data in MANIFESTS.items():
        (HERE / f"{name}.json").write_bytes(data)
    total = sum(p.stat().st_size for p in HERE.iterdir())
    print(f"{len(ARTIFACTS)} artifacts, {len(MANIFESTS)} manifests, {total} bytes")


if __name__ == "__main__":
    main()
