"""Fuzzing with hypothesis: mutated artifacts and manifests through ``aot.core.format.decode``, ``aot.core.manifest``
and the loader's packaged-artifact path (``Registry.open_packaged``, run to its end with recording stand-ins
for ``cuda.compute`` / ``cuda.core``, so no GPU is needed).

Seeds are the real artifacts and manifest of the session build (``small_build``). The contract: every input
ends in :class:`aot.core.errors.ArtifactError`, or decodes to exactly a valid artifact (re-parsed independently
here) whose payload is one the seeds hold (random corruption never manufactures a new payload) or the one a
mutation deliberately re-hashed. Any other exception, a hang (SIGALRM limit per input, plus hypothesis'
deadline) or a wrong result fails the test; the totals are printed at the end of the module:
``fuzz: N artifacts, M manifests, 0 crashes``.

``tests/corpus`` keeps small interesting cases found or built while writing this; they are replayed first.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import stat
import struct
import tracemalloc
import warnings
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aot.core import format as fmt
from aot.runtime.jit.cache import ArtifactCache
from aot.core.errors import ArtifactError
from aot.runtime.loader.objects import AotWarning
from aot.runtime.loader.registry import Registry
from aot.core.manifest import MANIFEST_NAME, load_manifest, verify_files

from hostile_util import Hang, Seed, copy_build, fake_cuda, seeds, time_limit

CORPUS = Path(__file__).resolve().parent / "corpus"
HANG_S = 10.0  # per input, wall: generous for a loaded 2-core machine; a real hang is forever
DEADLINE = timedelta(seconds=5)

#: Totals over the module (printed by the module fixture's teardown and checked by test_fuzz_totals).
STATS: Counter = Counter()
RAN: set = set()
CRASHES: list = []  # (input kind, traceback) of the first few crashes, printed with the totals


def crashed(kind: str) -> None:
    import traceback
    STATS["crashes"] += 1
    if len(CRASHES) < 5:
        CRASHES.append((kind, traceback.format_exc(limit=-6)))

MIN_ARTIFACTS = 10_000
MIN_MANIFESTS = 2_000


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def fuzz_settings(n: int):
    return settings(max_examples=n, deadline=DEADLINE, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.large_base_example])


# ------------------------------------------------------------------------------------------ environment
@dataclass
class Env:
    root: Path                # a private copy of the session build (manifest rewritten by manifest fuzzing)
    seeds: list[Seed]
    registry: Registry        # over the intact copy, device sm_90
    calls: object             # the fake CUDA layer's recorder
    payload_shas: frozenset   # every payload the seeds hold
    manifest_doc: dict
    special_ok: bool          # the loader refuses FIFOs/dirs with ArtifactError without blocking

    def __repr__(self) -> str:  # short: hypothesis prints it with every failing example
        return f"Env({self.root}, {len(self.seeds)} seeds)"

    def _repr_pretty_(self, p, cycle) -> None:  # hypothesis' pretty printer
        p.text(repr(self))


@pytest.fixture(scope="module")
def env(small_build, tmp_path_factory):
    root = copy_build(small_build.out, tmp_path_factory.mktemp("fuzz") / "root")
    (root / "fuzz").mkdir()
    # special files a hostile manifest may name (inside the directory, so path checks pass)
    os.mkfifo(root / "fuzz" / "fifo.aot")
    (root / "fuzz" / "dir.aot").mkdir()
    (root / "fuzz" / "empty.aot").write_bytes(b"")
    ss = seeds(root)
    with fake_cuda() as calls:
        reg = Registry(root, device_sm=90)
        special_ok = _loader_refuses_special_files(reg, root, ss)
        yield Env(root, ss, reg, calls, frozenset(sha(s.payload) for s in ss),
                  json.loads((root / MANIFEST_NAME).read_text()), special_ok)
    print("\n" + summary_line())


def summary_line() -> str:
    line = (f"fuzz: {STATS['artifacts']} artifacts ({STATS['loader inputs']} through the loader path), "
            f"{STATS['manifests']} manifests, {STATS['crashes']} crashes, {STATS['wrong results']} wrong results; "
            + ", ".join(f"{k}: {v}" for k, v in sorted(STATS.items())
                        if k not in ("artifacts", "manifests", "crashes", "wrong results", "loader inputs")))
    for kind, tb in CRASHES:
        line += f"\n--- crash ({kind}):\n{tb}"
    return line


class _Summary:
    """Prints the totals in pytest's terminal summary (registered when the fuzz module runs)."""

    def pytest_terminal_summary(self, terminalreporter):
        if STATS:
            terminalreporter.write_line(summary_line())


@pytest.fixture(scope="module", autouse=True)
def _report_totals(request):
    pm = request.config.pluginmanager
    if not pm.has_plugin("aot-fuzz-summary"):
        pm.register(_Summary(), "aot-fuzz-summary")
    yield


def _loader_refuses_special_files(reg: Registry, root: Path, ss: list[Seed]) -> bool:
    """Probe: does ``open_packaged`` refuse a FIFO with ArtifactError, quickly? (aot.runtime.loader.sources reads with
    ``path.read_bytes()`` before checking anything, which blocks on a FIFO; see test_hostile.py.) Special
    files are left out of the loader part of manifest fuzzing until it does."""
    seed = ss[0]
    try:
        with time_limit(1.0):
            reg.open_packaged(reg.spec(seed.entry["name"]), seed.entry, root / "fuzz" / "fifo.aot", 90)
    except ArtifactError:
        return True
    except (Hang, Exception):  # noqa: BLE001
        return False
    return False


# ---------------------------------------------------------------------------------------------- oracles
def feed_decode(data: bytes, allowed_payload_shas) -> str:
    """Decode ``data``: ArtifactError, or exactly a valid artifact whose payload's sha256 is allowed."""
    STATS["artifacts"] += 1
    try:
        with time_limit(HANG_S):
            art = fmt.decode(data)
    except ArtifactError as e:
        assert str(e)
        STATS["decode: ArtifactError"] += 1
        return "rejected"
    except BaseException:
        crashed("input")
        raise
    ok = False
    try:
        check_exact(data, art)
        assert sha(art.payload) in allowed_payload_shas, "decode produced a payload no seed holds"
        ok = True
    finally:
        if not ok:
            STATS["wrong results"] += 1
    STATS["decode: valid"] += 1
    return "valid"


def check_exact(data: bytes, art: fmt.Artifact) -> None:
    """``art`` is exactly what ``data`` says, parsed here independently of aot.core.format."""
    assert data[:8] == fmt.MAGIC
    (hlen,) = struct.unpack_from("<I", data, 8)
    header = json.loads(data[12:12 + hlen].decode("utf-8"))
    payload = data[12 + hlen:]
    assert art.header == header and art.payload == payload
    assert isinstance(header["payload_size"], int) and len(payload) == header["payload_size"]
    assert sha(payload) == header["payload_sha256"]
    fmt.validate_header(header)
    again = fmt.decode(fmt.encode(art.header, art.payload))
    assert again.header == art.header and again.payload == art.payload


def feed_loader(env: Env, seed: Seed, data: bytes, entry: dict, allowed_payload_shas, *,
                count: bool = True) -> str:
    """``data`` as the packaged artifact behind ``entry`` for ``seed``'s spec, through ``open_packaged``."""
    if count:
        STATS["artifacts"] += 1
    STATS["loader inputs"] += 1
    path = env.root / "fuzz" / "x.aot"
    path.write_bytes(data)
    return open_packaged(env, env.registry, env.registry.spec(seed.entry["name"]), entry, path,
                         allowed_payload_shas)


def open_packaged(env: Env, reg: Registry, spec, entry: dict, path: Path, allowed_payload_shas) -> str:
    env.calls.clear()
    try:
        with time_limit(HANG_S):
            loaded = reg.open_packaged(spec, entry, path, 90)
    except ArtifactError as e:
        assert str(e)
        assert env.calls.calls == [], "a rejected artifact reached the CUDA layer"
        STATS["loader: ArtifactError"] += 1
        return "rejected"
    except BaseException:
        crashed("input")
        raise
    ok = False
    try:
        data = path.read_bytes()
        assert len(env.calls.calls) == 1, env.calls.calls
        (what, payload), = env.calls.calls
        assert len(data) == entry["size"] and sha(data) == entry["sha256"]
        art = fmt.decode(data)
        check_exact(data, art)
        h = art.header
        assert payload == art.payload
        assert (h["name"], h["family"], h["sm"], h["payload_kind"], h["content_key"]) == \
            (spec.name, spec.family, entry["sm"], entry["payload_kind"], entry["content_key"])
        assert what == {"cccl-blob": "deserialize", "cubin": "cubin", "ptx": "ptx"}[h["payload_kind"]]
        assert loaded.source == "packaged" and loaded.sm == h["sm"] and loaded.kind == h["payload_kind"]
        assert sha(payload) in allowed_payload_shas, "the loader accepted a payload no seed holds"
        ok = True
    finally:
        if not ok:
            STATS["wrong results"] += 1
    STATS["loader: reached CUDA"] += 1
    return "loaded"


# --------------------------------------------------------------------------------------- hostile values
HUGE_INT_TEXT = b"1" + b"0" * 5000  # beyond Python's int-from-text digit limit
DEEP_LIST = b"[" * 5000 + b"]" * 5000
DEEP_OBJ = b'{"a":' * 3000 + b"1" + b"}" * 3000

#: JSON values of the wrong type or range for integer/string fields (type confusion).
HOSTILE_VALUES = [
    "90", "", "sm_90", "0x5a", True, False, None, 90.0, 90.5, -0.0, 1e308, -1e308, 10 ** 30, 2 ** 63, 2 ** 64,
    -2 ** 63, 4 * 2 ** 30, -1, 0, 9, 10, 1000, 1001, [], {}, [90], {"sm": 90}, "x" * 1000, [[[[[]]]]],
    float("nan"), float("inf"), float("-inf"), "\u00e9\u4e2d\U0001f600", "\ud800", "a\x00b", "../etc/passwd",
]
hostile_value = (st.sampled_from(HOSTILE_VALUES) | st.integers() | st.text(max_size=12)
                 | st.floats(allow_nan=True, allow_infinity=True)).map(copy.deepcopy)  # never share mutables

#: Raw JSON tokens spliced into header/manifest text in place of a field's value.
TOKENS = [
    b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e999", b"1E400", HUGE_INT_TEXT, b"-0", b"0.0", b"90.0",
    b"9e1", b'"90"', b"true", b"null", b"[]", b"{}", b"0x5a", b"090", b"+90", b".5", b'"\\ud800"',
    b'"\\udfff\\ud800"', b'"a\\u0000b"', DEEP_LIST, DEEP_OBJ, b"\xff", b'"\xc3\x28"', b'"\xed\xa0\x80"',
    b'"\xf4\x90\x80\x80"', b'"\xc0\xaf"', b"4294967296", b"268435457", b"18446744073709551616", b"",
]

INTERESTING_U32 = [0, 1, 2, 11, 12, 13, 255, 256, 4095, 4096, 65535, fmt.MAX_HEADER_LEN, fmt.MAX_HEADER_LEN + 1,
                   2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1]
HUGE_SIZES = [2 ** 32, 4 * 2 ** 30, 4 * 2 ** 30 - 1, 2 ** 63, 2 ** 64, fmt.MAX_PAYLOAD_LEN, fmt.MAX_PAYLOAD_LEN + 1,
              -1, -(2 ** 63)]


@st.composite
def text_mutation(draw, text: bytes, fields) -> bytes:
    """Mutate JSON text: splice a hostile token in for a field, duplicate a key, insert bytes (non-UTF-8 too),
    truncate, add a BOM or trailing data, or replace the whole document."""
    op = draw(st.sampled_from(["none", "none", "token", "dup", "insert", "truncate", "bom", "trailing", "flip",
                               "replace"]))
    if op == "none":
        return text
    if op in ("token", "dup"):
        field = draw(st.sampled_from(fields))
        key = json.dumps(field).encode()
        value = draw(st.sampled_from(TOKENS)) if op == "token" else b"80"
        if op == "token":  # drop the field's own occurrence first, so the token is its only value
            doc = json.loads(text)
            if isinstance(doc, dict):
                doc.pop(field, None)
                text = json.dumps(doc, allow_nan=True).encode()
        i = text.find(b"{")
        if i < 0:
            return text
        return text[:i + 1] + key + b":" + value + (b"," if text[i + 1:i + 2] not in (b"}", b"") else b"") \
            + text[i + 1:]
    if op == "insert":
        i = draw(st.integers(0, len(text)))
        return text[:i] + draw(st.sampled_from([b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\x00", b"\\", b'"',
                                                b",", b"}", b"]"]) | st.binary(min_size=1, max_size=4)) + text[i:]
    if op == "truncate":
        return text[:draw(st.integers(0, max(0, len(text) - 1)))]
    if op == "bom":
        return b"\xef\xbb\xbf" + text
    if op == "trailing":
        return text + draw(st.sampled_from([b" ", b"\n", b"{}", b"x", b"\x00", b",", b"]"]))
    if op == "flip":
        if not text:
            return text
        i = draw(st.integers(0, len(text) - 1))
        b = bytearray(text)
        b[i] ^= 1 << draw(st.integers(0, 7))
        return bytes(b)
    return draw(st.sampled_from([b"", b"null", b"[]", b"1", b'"s"', b"{}", DEEP_LIST, DEEP_OBJ, b"NaN",
                                 b"\xff\xfe{\x00}\x00"]))


# ------------------------------------------------------------------------------ artifact mutations
BYTE_OPS = ["flip", "flip", "set", "insert", "delete", "truncate", "extend", "hlen", "hlen_delta", "splice",
            "magic", "duplicate"]


@st.composite
def byte_mutation(draw, ss: list[Seed]):
    """A seed with 1-4 byte-level edits, biased towards the prefix and the JSON header."""
    seed = draw(st.sampled_from(ss))
    data = bytearray(seed.data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(BYTE_OPS))
        region = draw(st.sampled_from(["prefix", "header", "header", "any"]))
        hi = {"prefix": fmt.PREFIX_LEN, "header": seed.header_end, "any": len(data)}[region]
        hi = max(1, min(hi, len(data)))
        i = draw(st.integers(0, hi - 1))
        if op == "flip" and data:
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and data:
            data[i] = draw(st.integers(0, 255))
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete":
            del data[i:i + draw(st.integers(1, 16))]
        elif op == "truncate":
            del data[i:]
        elif op == "extend":
            data += draw(st.binary(min_size=1, max_size=64))
        elif op == "hlen" and len(data) >= 12:
            data[8:12] = draw(st.sampled_from(INTERESTING_U32) | st.integers(0, 2 ** 32 - 1)).to_bytes(4, "little")
        elif op == "hlen_delta" and len(data) >= 12:
            (h,) = struct.unpack_from("<I", data, 8)
            data[8:12] = ((h + draw(st.integers(-64, 64))) % 2 ** 32).to_bytes(4, "little")
        elif op == "splice":
            other = draw(st.sampled_from(ss))
            j = draw(st.integers(0, len(other.data)))
            data[i:] = other.data[j:]
        elif op == "magic":
            data[:8] = draw(st.sampled_from([b"CCCLCCH\x01", b"cccLCCH\x00", b"\x7fELF\x02\x01\x01\x00", b"\0" * 8]))
        elif op == "duplicate":
            data += data[i:i + draw(st.integers(1, 4096))]
    return seed, bytes(data)


HEADER_OPS = ["set", "set", "delete", "extra", "producer", "payload_size", "sha", "payload", "resize"]


@st.composite
def header_mutation(draw, ss: list[Seed]):
    """A seed whose JSON header was edited as data (type confusion, huge sizes, producer changes, extra
    fields, NaN), re-serialized, then edited as text; the payload may be changed and (sometimes) re-hashed.
    Returns (seed, artifact bytes, sha256 a successful decode may yield besides the seeds' payloads)."""
    seed = draw(st.sampled_from(ss))
    h = copy.deepcopy(seed.header)
    payload = seed.payload
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(HEADER_OPS))
        if op == "set":
            h[draw(st.sampled_from(list(fmt.HEADER_FIELDS)))] = draw(hostile_value)
        elif op == "delete":
            h.pop(draw(st.sampled_from(list(fmt.HEADER_FIELDS))), None)
        elif op == "extra":
            h[draw(st.text(max_size=10))] = draw(hostile_value)
        elif op == "producer":
            prod = h.get("producer")
            if isinstance(prod, dict) and draw(st.booleans()):
                key = draw(st.sampled_from(list(fmt.PRODUCER_FIELDS)))
                if draw(st.booleans()):
                    prod.pop(key, None)
                else:
                    prod[key] = draw(st.sampled_from(["12", "14", "1.2.0", "1.2.1 ", "", "13"]) | hostile_value)
            else:
                h["producer"] = draw(hostile_value)
        elif op == "payload_size":
            h["payload_size"] = draw(st.sampled_from(HUGE_SIZES) | st.integers(-10, 2 ** 40))
        elif op == "sha":
            good = seed.header["payload_sha256"]
            h["payload_sha256"] = draw(st.sampled_from([good.upper(), good[:-1], good + "0", "g" * 64, "",
                                                        sha(b"other"), good[::-1]]))
        elif op == "payload":
            b = bytearray(payload)
            if b:
                b[draw(st.integers(0, len(b) - 1))] ^= 1 << draw(st.integers(0, 7))
            payload = bytes(b)
        elif op == "resize":
            n = draw(st.integers(0, len(payload) + 8))
            payload = (payload + b"\0" * 8)[:n]
    extra_sha = None
    if payload != seed.payload and draw(st.booleans()):  # re-hash: a consistent, deliberately new artifact
        h["payload_size"], h["payload_sha256"] = len(payload), sha(payload)
        extra_sha = sha(payload)
    text = json.dumps(h, allow_nan=True, sort_keys=draw(st.booleans())).encode()
    text = draw(text_mutation(text, list(fmt.HEADER_FIELDS)))
    hlen = len(text)
    if draw(st.integers(0, 9)) == 0:
        hlen = draw(st.sampled_from(INTERESTING_U32))
    data = fmt.MAGIC + struct.pack("<I", hlen % 2 ** 32) + text + payload
    return seed, data, extra_sha


# ------------------------------------------------------------------------------------- artifact tests
def _allowed(env: Env, extra_sha=None) -> frozenset:
    return env.payload_shas | ({extra_sha} if extra_sha else set())


def test_seeds_decode(env):
    """The seed corpus itself is valid and loads (through the fake CUDA layer) on sm_90 where it should."""
    assert len(env.seeds) >= 12
    for s in env.seeds:
        assert feed_decode(s.data, env.payload_shas) == "valid"
        assert feed_loader(env, s, s.data, s.entry, env.payload_shas, count=False) == "loaded"
    RAN.add("seeds")


@fuzz_settings(4500)
@given(case=st.data())
def test_fuzz_decode_bytes(env, case):
    seed, data = case.draw(byte_mutation(env.seeds))
    feed_decode(data, env.payload_shas)
    RAN.add("decode_bytes")


@fuzz_settings(4000)
@given(case=st.data())
def test_fuzz_decode_headers(env, case):
    seed, data, extra = case.draw(header_mutation(env.seeds))
    feed_decode(data, _allowed(env, extra))
    RAN.add("decode_headers")


@fuzz_settings(1500)
@given(case=st.data())
def test_fuzz_loader_bytes(env, case):
    """Byte-mutated files behind a manifest entry that either still describes the original (the file check
    must catch it) or was updated to the mutated file's size and sha256 (the checks after it must)."""
    seed, data = case.draw(byte_mutation(env.seeds))
    consistent = case.draw(st.booleans())
    entry = {**seed.entry, "size": len(data), "sha256": sha(data)} if consistent else seed.entry
    feed_loader(env, seed, data, entry, env.payload_shas)
    RAN.add("loader_bytes")


@fuzz_settings(1500)
@given(case=st.data())
def test_fuzz_loader_headers(env, case):
    seed, data, extra = case.draw(header_mutation(env.seeds))
    entry = {**seed.entry, "size": len(data), "sha256": sha(data)}
    feed_loader(env, seed, data, entry, _allowed(env, extra))
    RAN.add("loader_headers")


# ------------------------------------------------------------------------------------- manifest fuzzing
HOSTILE_PATHS = [
    "../x", "/etc/passwd", "a/../../x", "..\\x", "cccl\\reduce_sum_i32\\sm_90.aot", "", ".", "./", "C:x",
    "C:\\x", "cccl/reduce_sum_i32/", "cccl", "manifest.json", "a\x00b", "\ud800", "//etc/passwd", "~/x",
    "cccl/../cccl/reduce_sum_i32/sm_90.aot", "x" * 300, "/".join(["a"] * 2000), "missing.aot",
    "cccl/./reduce_sum_i32/sm_90.aot", "cccl/reduce_sum_i32/sm_90.aot", "cccl/reduce_sum_i32/sm_80.aot",
    "nvrtc/morton/sm_90.cubin.aot", "fuzz/fifo.aot", "fuzz/dir.aot", "fuzz/empty.aot", "fuzz",
    "\u00e9.aot", "a/\n/b", " ", "cccl/reduce_sum_i32/sm_90.aot ",
]
ENTRY_KEYS = ["path", "name", "family", "sm", "payload_kind", "size", "sha256", "content_key"]
MANIFEST_OPS = ["top_set", "top_delete", "entry_set", "entry_path", "entry_delete", "entry_dup",
                "entry_replace", "entry_swap", "spec_set", "spec_replace", "spec_delete", "spec_rename",
                "producer", "artifacts_replace", "entry_sm"]


@st.composite
def manifest_mutation(draw, doc: dict) -> bytes:
    d = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(MANIFEST_OPS))
        arts = d.get("artifacts")
        arts = arts if isinstance(arts, list) and arts else None
        specs = d.get("specs") if isinstance(d.get("specs"), dict) and d.get("specs") else None
        if op == "top_set":
            d[draw(st.sampled_from(["format", "manifest_version", "producer", "specs", "artifacts", "sms"]))] = \
                draw(hostile_value)
        elif op == "top_delete":
            d.pop(draw(st.sampled_from(["format", "manifest_version", "producer", "specs", "artifacts"])), None)
        elif op in ("entry_set", "entry_path", "entry_delete", "entry_dup", "entry_replace", "entry_swap",
                    "entry_sm") and arts:
            i = draw(st.integers(0, len(arts) - 1))
            if op == "entry_set" and isinstance(arts[i], dict):
                arts[i][draw(st.sampled_from(ENTRY_KEYS + ["extra"]))] = draw(hostile_value)
            elif op == "entry_path" and isinstance(arts[i], dict):
                arts[i]["path"] = draw(st.sampled_from(HOSTILE_PATHS) | st.text(max_size=20))
            elif op == "entry_sm" and isinstance(arts[i], dict):  # plausible but false claims
                arts[i][draw(st.sampled_from(["sm", "payload_kind", "family", "name"]))] = draw(
                    st.sampled_from([90, 80, 89, 100, "cubin", "ptx", "cccl-blob", "cccl", "nvrtc", "morton",
                                     "reduce_sum_i32", "lower_bound_i32"]))
            elif op == "entry_delete":
                del arts[i]
            elif op == "entry_dup":
                arts.append(copy.deepcopy(arts[i]))
            elif op == "entry_replace":
                arts[i] = draw(hostile_value)
            elif op == "entry_swap":
                j = draw(st.integers(0, len(arts) - 1))
                if isinstance(arts[i], dict) and isinstance(arts[j], dict):
                    arts[i]["path"], arts[j]["path"] = arts[j].get("path"), arts[i].get("path")
        elif op in ("spec_set", "spec_replace", "spec_delete", "spec_rename") and specs:
            name = draw(st.sampled_from(sorted(specs)))
            if op == "spec_set" and isinstance(specs[name], dict):
                specs[name][draw(st.sampled_from(["name", "algorithm", "dtype", "op", "init", "kernels",
                                                  "source", "options", "source_path"]))] = draw(hostile_value)
            elif op == "spec_replace":
                specs[name] = draw(st.sampled_from(["algorithm", "kernels", [], 5]) | hostile_value)
            elif op == "spec_delete":
                del specs[name]
            elif op == "spec_rename":
                specs[draw(st.text(max_size=8))] = specs.pop(name)
        elif op == "producer":
            prod = d.get("producer")
            if isinstance(prod, dict):
                prod[draw(st.sampled_from(list(fmt.PRODUCER_FIELDS)))] = draw(hostile_value)
        elif op == "artifacts_replace":
            d["artifacts"] = draw(hostile_value)
    text = json.dumps(d, allow_nan=True).encode()
    return draw(text_mutation(text, ["format", "manifest_version", "producer", "specs", "artifacts"]))


def feed_manifest(env: Env, text: bytes) -> str:
    STATS["manifests"] += 1
    root = env.root
    (root / MANIFEST_NAME).write_bytes(text)
    try:
        with time_limit(HANG_S):
            m = load_manifest(root)
            problems = verify_files(m)
    except ArtifactError as e:
        assert str(e)
        STATS["manifest: ArtifactError"] += 1
        outcome = "rejected"
        m = None
    except BaseException:
        crashed("input")
        raise
    if m is not None:
        ok = False
        try:
            real_root = os.path.realpath(root)
            for a in m.artifacts:
                p = m.path_of(a)
                assert os.path.commonpath([real_root, os.path.realpath(p)]) == real_root
                assert os.path.realpath(p) != real_root
            if not problems:
                for a in m.artifacts:
                    p = m.path_of(a)
                    assert stat.S_ISREG(os.stat(p).st_mode)
                    assert sha(p.read_bytes()) == a["sha256"] and p.stat().st_size == a["size"]
            ok = True
        finally:
            if not ok:
                STATS["wrong results"] += 1
        outcome = "problems" if problems else "valid"
        STATS[f"manifest: {outcome}"] += 1
    # the loader over the same directory: construction never raises, every candidate ends cleanly
    try:
        with warnings.catch_warnings(record=True) as caught, time_limit(HANG_S):
            warnings.simplefilter("always")
            reg = Registry(root, device_sm=90)
            manifest = reg.manifest  # read on first need: its warnings come here
            assert all(issubclass(w.category, AotWarning) for w in caught), [str(w.message) for w in caught]
            if manifest is None:
                return outcome
            for name in reg.names():
                spec = reg.spec(name)
                for cand in reg.packaged_candidates(spec, 90):
                    path = reg.manifest.path_of(cand.ref)
                    if not env.special_ok and not _plain_file(path):
                        continue  # known loader gap (FIFO, dir, unopenable name): see test_hostile.py
                    open_packaged(env, reg, spec, cand.ref, path, env.payload_shas)
    except (ArtifactError, AssertionError):
        raise
    except BaseException:
        crashed("input")
        raise
    return outcome


def _plain_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False


@fuzz_settings(2500)
@given(case=st.data())
def test_fuzz_manifests(env, case):
    try:
        feed_manifest(env, case.draw(manifest_mutation(env.manifest_doc)))
    finally:
        (env.root / MANIFEST_NAME).write_text(json.dumps(env.manifest_doc, indent=1))
    RAN.add("manifests")


# --------------------------------------------------------------------- bounded allocation, by tracemalloc
def _peak(fn) -> tuple[int, object]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        try:
            result = fn()
        except ArtifactError as e:
            result = e
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, result


def _huge_claim(size: int) -> bytes:
    h = fmt.make_header(family="cccl", name="r", content_key="k" * 64, sm=90, payload_kind="cccl-blob",
                        payload=b"x", producer={k: "1" for k in fmt.PRODUCER_FIELDS})
    h["payload_size"] = size
    raw = json.dumps(h).encode()
    return fmt.MAGIC + struct.pack("<I", len(raw)) + raw + b"x"


@pytest.mark.parametrize("size", [4 * 2 ** 30, 2 ** 64, fmt.MAX_PAYLOAD_LEN, fmt.MAX_PAYLOAD_LEN + 1])
def test_huge_payload_claim_allocates_nothing(size):
    peak, result = _peak(lambda: fmt.decode(_huge_claim(size)))
    assert isinstance(result, ArtifactError), result
    assert peak < 256 * 1024, f"decode of a {size}-byte claim peaked at {peak} bytes"
    STATS["artifacts"] += 1


def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def test_huge_files_are_refused_before_reading(tmp_path):
    big = _sparse(tmp_path / "big.aot", 4 * 2 ** 30)
    peak, result = _peak(lambda: fmt.read(big))
    assert isinstance(result, ArtifactError) and "refused before reading" in str(result), result
    assert peak < 256 * 1024, peak
    (tmp_path / "m").mkdir()
    _sparse(tmp_path / "m" / MANIFEST_NAME, 4 * 2 ** 30)
    peak, result = _peak(lambda: load_manifest(tmp_path / "m"))
    assert isinstance(result, ArtifactError) and "refused before reading" in str(result), result
    assert peak < 256 * 1024, peak
    cache = ArtifactCache(tmp_path / "cache")
    key = "ab" * 32
    cache._path(key).parent.mkdir(parents=True)
    _sparse(cache._path(key), 4 * 2 ** 30)
    peak, result = _peak(lambda: cache.get(key))
    assert isinstance(result, ArtifactError) and "deleted" in str(result), result
    assert peak < 256 * 1024 and not cache._path(key).exists()
    STATS["artifacts"] += 2
    STATS["manifests"] += 1


def test_loader_refuses_huge_file_before_reading(env, tmp_path, monkeypatch):
    seed = next(s for s in env.seeds if s.entry["sm"] == 90 and s.entry["family"] == "cccl")
    big = _sparse(env.root / "fuzz" / "big.aot", 4 * 2 ** 30)
    real_read_bytes = Path.read_bytes

    def guarded(self):  # never really read 4 GB: fail the way an unbounded read would, cheaply
        if self.stat().st_size > fmt.MAX_FILE_LEN:
            raise MemoryError(f"unbounded read of {self}")
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", guarded)
    try:
        peak, result = _peak(lambda: env.registry.open_packaged(env.registry.spec(seed.entry["name"]),
                                                                 seed.entry, big, 90))
    finally:
        big.unlink()
    assert isinstance(result, ArtifactError), result
    assert peak < 256 * 1024


# ------------------------------------------------------------------------------------ corpus replay
CORPUS_FILES = sorted(p for p in CORPUS.glob("*") if p.suffix in (".aot", ".json"))


def test_corpus_is_small():
    assert CORPUS_FILES, "tests/corpus is empty"
    total = sum(p.stat().st_size for p in CORPUS.iterdir())
    assert total < 50 * 1024, f"tests/corpus holds {total} bytes"


@pytest.mark.parametrize("path", CORPUS_FILES, ids=[p.name for p in CORPUS_FILES])
def test_corpus_replay(path, tmp_path):
    """Artifacts (``*.aot``): ``reject-*`` must raise ArtifactError, ``valid-*`` decode exactly. Manifests
    (``*.json``): ``reject-*`` must raise ArtifactError from load_manifest, ``problem-*`` must load and have
    verify_files report problems; either way a Registry over the directory constructs with warnings only."""
    data = path.read_bytes()
    expect = path.name.split("-")[0]
    if path.suffix == ".aot":
        with time_limit(HANG_S):
            if expect == "reject":
                with pytest.raises(ArtifactError):
                    fmt.decode(data)
            else:
                assert expect == "valid"
                check_exact(data, fmt.decode(data))
        return
    root = tmp_path / "set"
    (root / "cccl" / "r").mkdir(parents=True)
    (root / "cccl" / "r" / "sm_90.aot").write_bytes(b"not an artifact")
    (root / MANIFEST_NAME).write_bytes(data)
    with time_limit(HANG_S):
        if expect == "reject":
            with pytest.raises(ArtifactError):
                load_manifest(root)
        else:
            assert expect == "problem"
            assert verify_files(load_manifest(root))
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            reg = Registry(root, device_sm=90)
            reg.names()  # the manifest is read (and warned about) on first need
        for name in reg.names():
            for cand in reg.packaged_candidates(reg.spec(name), 90):
                with pytest.raises((ArtifactError, OSError)):
                    reg.open_packaged(reg.spec(name), cand.ref, reg.manifest.path_of(cand.ref), 90)


# ---------------------------------------------------------------------------------------------- totals
def test_fuzz_totals(env):
    """Runs last in this module: the required volumes were reached, with no crash and no wrong result."""
    needed = {"seeds", "decode_bytes", "decode_headers", "loader_bytes", "loader_headers", "manifests"}
    if not needed <= RAN:
        pytest.skip(f"only part of the fuzz module ran ({sorted(RAN)})")
    assert STATS["crashes"] == 0 and STATS["wrong results"] == 0, dict(STATS)
    assert STATS["artifacts"] >= MIN_ARTIFACTS, dict(STATS)
    assert STATS["manifests"] >= MIN_MANIFESTS, dict(STATS)
    print(f"fuzz: {STATS['artifacts']} artifacts, {STATS['manifests']} manifests, {STATS['crashes']} crashes")
