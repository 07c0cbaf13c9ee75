"""Helpers shared by the hostile-input tests (test_fuzz, test_hostile, test_concurrency). CPU only.

* :func:`time_limit`: a hard per-call limit (SIGALRM), so a hang fails the test instead of stalling it.
* :func:`fake_cuda`: stand-ins for ``cuda.compute`` / ``cuda.core`` that record what the loader hands
  to ``deserialize`` / ``ObjectCode``: lets ``Registry.open_packaged`` run to its end without a GPU,
  and proves that every check before the CUDA call ran first.
* :func:`seeds`: the real artifacts of a build directory (the session's ``small_build``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import signal
import sys
import threading
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from aot.core import format as fmt


class Hang(BaseException):
    """Raised by :func:`time_limit`. A BaseException, so code under test cannot swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Interrupt the block after ``seconds`` (wall) with :class:`Hang`; main thread only (else no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise Hang(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class CudaCalls:
    """What reached the (fake) CUDA layer: one (what, payload) per call."""

    calls: list

    def payloads(self) -> list[bytes]:
        return [p for _, p in self.calls]

    def clear(self) -> None:
        self.calls.clear()


class _FakeObjectCode:
    def __init__(self, payload: bytes):
        self.payload = payload

    def get_kernel(self, name: str):
        return ("kernel", name)


@contextlib.contextmanager
def fake_cuda():
    """Replace ``cuda.compute``, ``cuda.core`` and the driver's library loader (as the loader reaches them)
    by recorders."""
    import cuda  # the namespace package: cheap, loads no driver

    import aot.runtime.loader.sources
    calls: list = []
    compute = types.ModuleType("cuda.compute")

    def deserialize(payload):
        calls.append(("deserialize", bytes(payload)))
        return ("deserialized", hashlib.sha256(bytes(payload)).hexdigest())

    compute.deserialize = deserialize
    core = types.ModuleType("cuda.core")

    class ObjectCode:
        @staticmethod
        def from_cubin(payload, name=None):
            calls.append(("cubin", bytes(payload)))
            return _FakeObjectCode(bytes(payload))

        @staticmethod
        def from_ptx(payload, name=None):
            calls.append(("ptx", bytes(payload)))
            return _FakeObjectCode(bytes(payload))

    core.ObjectCode = ObjectCode

    def driver_library(name, image, kind, kernels, symbols=None):  # packaged units load through the driver
        calls.append((kind, bytes(image)))
        return _FakeObjectCode(bytes(image))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(aot.runtime.loader.sources, "DriverLibrary", driver_library)
        mp.setitem(sys.modules, "cuda.compute", compute)
        mp.setattr(cuda, "compute", compute, raising=False)
        mp.setitem(sys.modules, "cuda.core", core)
        mp.setattr(cuda, "core", core, raising=False)
        mp.setattr(aot.runtime.loader.sources, "check_ptx_loadable", lambda producer: None)
        mp.setattr(aot.runtime.loader.sources, "require_driver", lambda what: None)  # the fake stack is its own driver
        yield CudaCalls(calls)


@dataclass(frozen=True)
class Seed:
    entry: dict           # its manifest entry
    data: bytes           # the whole file
    header: dict
    payload: bytes
    header_len: int       # the JSON header's length in bytes

    def __repr__(self) -> str:  # short: hypothesis prints drawn seeds with every failing example
        return f"Seed({self.entry['path']})"

    def _repr_pretty_(self, p, cycle) -> None:  # hypothesis' pretty printer
        p.text(repr(self))

    @property
    def header_end(self) -> int:
        return fmt.PREFIX_LEN + self.header_len


def seeds(root: Path) -> list[Seed]:
    doc = json.loads((root / "manifest.json").read_text())
    out = []
    for e in doc["artifacts"]:
        data = (root / e["path"]).read_bytes()
        art = fmt.decode(data)
        hlen = int.from_bytes(data[8:12], "little")
        out.append(Seed(dict(e), data, dict(art.header), art.payload, hlen))
    return out


def copy_build(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def read_manifest(root: Path) -> dict:
    return json.loads((root / "manifest.json").read_text())


def write_manifest_doc(root: Path, doc: Any) -> None:
    (root / "manifest.json").write_text(json.dumps(doc, indent=1))


def restamp(data: bytes, **header_changes) -> bytes:
    """The artifact ``data`` with header fields replaced (``producer`` may be a dict of changes), re-encoded
    without validation, so any header (another format_version too) can be produced."""
    art_header, offset = _raw_header(data)
    payload = data[offset:]
    for k, v in header_changes.items():
        if k == "producer" and isinstance(v, dict):
            art_header["producer"] = {**art_header["producer"], **v}
        else:
            art_header[k] = v
    raw = json.dumps(art_header, sort_keys=True, separators=(",", ":")).encode()
    return fmt.MAGIC + len(raw).to_bytes(4, "little") + raw + payload


def _raw_header(data: bytes) -> tuple[dict, int]:
    hlen = int.from_bytes(data[8:12], "little")
    return json.loads(data[12:12 + hlen]), 12 + hlen


def entry_for(data: bytes, entry: dict, **changes) -> dict:
    """``entry`` updated to describe ``data`` (size, sha256), plus ``changes``."""
    return {**entry, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), **changes}


# ------------------------------------------------------------------- cccl_from_cache_or_jit, fake build
SPEC_NAME = "reduce_sum_i32"  # reduce, int32, plus: the cheapest real CCCL build (~2.5 s)


@pytest.fixture
def fake_jit(monkeypatch, tmp_path):
    """``aot.runtime.jit.jit.cccl_from_cache_or_jit`` with a fake compiler (counted, optionally slow: ``.delay``) and a
    private ``AOT_CACHE_DIR`` (``tmp_path / "cache"``)."""
    import time

    import aot.build.compile
    import cccl_patches

    class Build:
        calls = 0
        delay = 0.0

        def payload(self, spec, sm) -> bytes:
            Build.calls += 1
            time.sleep(Build.delay)
            return f"blob:{spec.name}:{sm}".encode() * 100

    b = Build()

    class FakeAlgo:
        def __init__(self, spec, sm):
            self.spec, self.sm = spec, sm

        def serialize(self):
            return b.payload(self.spec, self.sm)

    monkeypatch.setattr(aot.build.compile, "compile_cccl", lambda spec, sm: b.payload(spec, sm), raising=False)
    monkeypatch.setattr(aot.build.compile, "build_cccl", FakeAlgo)
    monkeypatch.setattr(cccl_patches, "apply", lambda: None)
    monkeypatch.setenv("AOT_CACHE_DIR", str(tmp_path / "cache"))
    return b


@pytest.fixture
def spec():
    from aot.build.matrix import load_matrix
    return load_matrix().select([SPEC_NAME])[0]


def jit(spec, sm: int = 90):
    """(payload, source, path, warnings) of one ``cccl_from_cache_or_jit`` call."""
    from aot.runtime.jit.jit import cccl_from_cache_or_jit
    errors, warned = [], []
    payload, source, path = cccl_from_cache_or_jit(spec, sm, errors, warned.append)
    assert errors == warned, (errors, warned)
    return payload, source, path, warned


def cache_key(spec, sm: int = 90) -> str:
    from aot.core.spec import item_key
    from aot.build.toolchain import versions
    return item_key(spec, sm, "cccl-blob", versions())
