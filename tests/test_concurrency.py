"""Concurrency and crashes around the per-user cache (CPU only).

* Real builds: 8 processes x 4 threads ask for the same uncached CCCL spec at the same moment, through the
  loader's own single-flight path (``Registry._load``) and the cache's file lock: exactly one JIT build in
  all, one intact cache file, identical bytes for every caller.
* Writers killed by SIGKILL in the middle of ``aot.core.fs.atomic_write`` never leave an entry that loads, and
  their temp files are swept.
* A corrupt entry is deleted and rebuilt; an entry a racing builder has just replaced is not deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from aot.core import format as fmt
from aot.core.fs import TMP_PREFIX, atomic_write, sweep_temp
from aot.runtime.jit.cache import ArtifactCache
from aot.core.errors import ArtifactError

from conftest import ROOT, repo_env
from hostile_util import SPEC_NAME, cache_key, fake_jit, jit, spec  # noqa: F401 (fixtures)

N_PROCS = 8
N_THREADS = 4

CHILD = textwrap.dedent("""
    import hashlib, json, os, sys, threading, time
    from pathlib import Path
    from aot.build.toolchain import choose_driver, worker_setup
    worker_setup(choose_driver().path)          # cuda.compute imports on a driverless host
    import aot.build.compile
    real_build = aot.build.compile.build_cccl
    log = Path(sys.argv[1])

    def counting_build(spec, sm):                # every real cuda.compute build, in any process
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\\n")
        return real_build(spec, sm)

    aot.build.compile.build_cccl = counting_build
    from aot.runtime.loader.registry import Registry
    from aot.build.matrix import load_matrix
    spec = load_matrix().select([sys.argv[2]])[0]
    reg = Registry(Path(sys.argv[3]), specs=[spec], device_sm=90)   # no manifest: cache or JIT
    n_threads = int(sys.argv[5])
    Path(sys.argv[4], f"ready-{os.getpid()}").touch()
    go = Path(sys.argv[4], "go")
    while not go.exists():
        time.sleep(0.005)
    results = [None] * n_threads

    def one(i):
        loaded = reg._load(spec.name)
        results[i] = {"source": loaded.source, "path": loaded.path,
                      "sha": hashlib.sha256(loaded.payload).hexdigest(), "size": len(loaded.payload)}

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(results))
""")


def test_one_jit_across_processes_and_threads(tmp_path):
    cache_dir = tmp_path / "cache"
    sync = tmp_path / "sync"
    sync.mkdir()
    log = tmp_path / "builds.log"
    log.touch()
    empty = tmp_path / "no-artifacts"
    empty.mkdir()
    env = repo_env(AOT_CACHE_DIR=str(cache_dir))
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(log), SPEC_NAME, str(empty), str(sync),
                               str(N_THREADS)], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(N_PROCS)]
    try:
        deadline = time.monotonic() + 180
        while len(list(sync.glob("ready-*"))) < N_PROCS:  # all imported and waiting: start together
            assert time.monotonic() < deadline, "children did not get ready"
            assert all(p.poll() is None for p in procs), [p.communicate()[1][-2000:] for p in procs
                                                          if p.poll() is not None]
            time.sleep(0.02)
        (sync / "go").touch()
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
        assert "aot:" not in err, err[-3000:]  # no warnings: nothing was skipped or failed to persist
    per_proc = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    results = [r for rs in per_proc for r in rs]
    assert len(results) == N_PROCS * N_THREADS and all(r is not None for r in results)
    builds = log.read_text().split()
    sources = [rs[0]["source"] for rs in per_proc]
    assert len(builds) == 1, f"{len(builds)} JIT builds: {builds}"
    assert sorted(sources) == ["cache"] * (N_PROCS - 1) + ["jit"], sources
    for rs in per_proc:  # threads of one process share one load
        assert len({json.dumps(r, sort_keys=True) for r in rs}) == 1
    assert len({r["sha"] for r in results}) == 1 and results[0]["size"] > 0
    entries = list((cache_dir / "cccl").rglob("*.aot"))
    assert len(entries) == 1 and {r["path"] for r in results} == {str(entries[0])}
    art = fmt.read(entries[0])  # intact, and holds exactly what every caller got
    assert hashlib.sha256(art.payload).hexdigest() == results[0]["sha"]
    assert not list(cache_dir.rglob(TMP_PREFIX + "*"))
    print(f"{N_PROCS} processes x {N_THREADS} threads: 1 JIT build, {N_PROCS - 1} cache hits, "
          f"{len(art.payload)} bytes")


# ------------------------------------------------------------------------------- in-process, fake build
def test_threads_share_one_build(fake_jit, spec, tmp_path):
    from aot.runtime.loader.registry import Registry
    fake_jit.delay = 0.3
    reg = Registry(tmp_path / "none", specs=[spec], device_sm=90)
    got = []
    threads = [threading.Thread(target=lambda: got.append(reg._load(SPEC_NAME))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert fake_jit.calls == 1 and len(got) == 8 and all(g is got[0] for g in got)
    assert got[0].source == "jit"


def test_corrupt_entry_is_deleted_and_rebuilt(fake_jit, spec):
    payload, source, path, warned = jit(spec)
    assert source == "jit" and warned == [] and fake_jit.calls == 1
    p = Path(path)
    data = bytearray(p.read_bytes())
    data[-1] ^= 0xFF
    p.write_bytes(bytes(data))
    payload2, source2, path2, warned2 = jit(spec)
    assert source2 == "jit" and fake_jit.calls == 2 and payload2 == payload
    assert len(warned2) == 1 and "corrupt user-cache entry deleted" in warned2[0] and "sha256" in warned2[0]
    assert fmt.read(p).payload == payload  # rebuilt, intact
    payload3, source3, _, warned3 = jit(spec)
    assert (source3, warned3, fake_jit.calls) == ("cache", [], 2)


@pytest.mark.parametrize("damage", ["truncate", "empty", "garbage", "other-key", "directory", "fifo"])
def test_damaged_entry_kinds(fake_jit, spec, damage):
    payload, _, path, _ = jit(spec)
    p = Path(path)
    good = p.read_bytes()
    p.unlink()
    if damage == "truncate":
        p.write_bytes(good[:len(good) // 2])
    elif damage == "empty":
        p.write_bytes(b"")
    elif damage == "garbage":
        p.write_bytes(os.urandom(1000))
    elif damage == "other-key":  # a valid artifact filed under the wrong key
        h, off = fmt.decode_header(good)
        p.write_bytes(fmt.encode({**h, "content_key": "0" * 64}, good[off:]))
    elif damage == "directory":
        p.mkdir()
    elif damage == "fifo":
        os.mkfifo(p)
    from hostile_util import time_limit
    with time_limit(20):
        payload2, source2, _, warned = jit(spec)
    assert payload2 == payload and source2 == "jit"
    if damage == "directory":  # cannot be deleted or replaced: served from memory, two clear warnings
        assert len(warned) == 2 and "could not be deleted" in warned[0] and "cannot persist" in warned[1]
        return
    assert len(warned) == 1, warned
    assert fmt.read(p).payload == payload


def test_entry_replaced_while_checked_is_kept(fake_jit, spec, monkeypatch):
    """A reader that finds a corrupt entry must not delete the good one a racing builder just renamed in."""
    import aot.runtime.jit.cache
    payload, _, path, _ = jit(spec)
    p = Path(path)
    good = p.read_bytes()
    p.write_bytes(good[:-1])  # corrupt
    real_decode = fmt.decode
    calls = []

    def decode_then_race(data):
        if not calls:
            calls.append(1)
            atomic_write(p, good)  # the other process's rename lands between our read and our delete
        return real_decode(data)

    monkeypatch.setattr(aot.runtime.jit.cache.fmt, "decode", decode_then_race)
    cache = ArtifactCache()
    with pytest.raises(ArtifactError, match="left alone"):
        cache.get(cache_key(spec))
    monkeypatch.setattr(aot.runtime.jit.cache.fmt, "decode", real_decode)
    assert cache.get(cache_key(spec)).payload == payload


def test_unlockable_cache_still_builds(fake_jit, spec, monkeypatch):
    import fcntl

    def no_locks(fd, op):
        raise OSError(37, "No locks available")  # ENOLCK, as on some network file systems

    monkeypatch.setattr(fcntl, "flock", no_locks)
    payload, source, path, warned = jit(spec)
    assert source == "jit" and path and warned == []
    assert fmt.read(path).payload == payload


def test_stale_temp_files(fake_jit, spec):
    """A `.tmp-aot-*` left by a killed writer is never read as an entry, and is swept once it is old."""
    cache = ArtifactCache()
    key = cache_key(spec)
    entry = cache._path(key)
    entry.parent.mkdir(parents=True)
    partial = entry.parent / (TMP_PREFIX + "abc123")
    partial.write_bytes(b"CCCLCCH\0" + b"\x10\x00\x00\x00" + b'{"partial":')  # a torn write
    assert cache.get(key) is None
    assert cache.sweep() == 0 and partial.exists()  # young: may belong to a live writer
    old = time.time() - 2 * 3600
    os.utime(partial, (old, old))
    fresh = entry.parent / (TMP_PREFIX + "live")
    fresh.write_bytes(b"x")
    payload, source, path, warned = jit(spec)  # a JIT that persists also sweeps old temp files
    assert source == "jit" and warned == [] and not partial.exists() and fresh.exists()
    assert sweep_temp(cache.root, older_than_s=0) == 1 and not fresh.exists()


# --------------------------------------------------------------------------------- SIGKILLed writers
WRITER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    import aot.core.fs
    mode, target, size = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    from aot.core import format as fmt
    payload = os.urandom(1024) * (size // 1024)
    header = fmt.make_header(family="cccl", name="r", content_key="k" * 64, sm=90, payload_kind="cccl-blob",
                             payload=payload, producer={k: "1" for k in fmt.PRODUCER_FIELDS})
    data = fmt.encode(header, payload)
    if mode == "block-in-fsync":   # written, not yet renamed: hang in fsync until killed
        def stuck(fd):
            print("in-fsync", flush=True)
            time.sleep(600)
        aot.core.fs.os.fsync = stuck
    print("writing", flush=True)
    aot.core.fs.atomic_write(target, data)
    print("done", flush=True)
    time.sleep(600)
""")


def _spawn_writer(mode: str, target: Path, size: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, mode, str(target), str(size)], env=repo_env(),
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kill(w: subprocess.Popen) -> None:
    w.send_signal(signal.SIGKILL)
    w.wait()
    w.stdout.close()
    w.stderr.close()


def _check_after_kill(target: Path) -> str:
    """Either no entry, or a complete one; never a torn entry that loads."""
    if not target.exists():
        with pytest.raises(ArtifactError, match="cannot read"):
            fmt.read(target)
        return "absent"
    art = fmt.read(target)  # raises if torn
    assert len(art.payload) == art.header["payload_size"]
    return "complete"


def test_writer_killed_before_rename(tmp_path):
    target = tmp_path / "cccl" / "ab" / ("ab" * 32 + ".aot")
    w = _spawn_writer("block-in-fsync", target, 8 << 20)
    try:
        assert w.stdout.readline().strip() == "writing"
        assert w.stdout.readline().strip() == "in-fsync", w.stderr.read()
        temps = list(target.parent.glob(TMP_PREFIX + "*"))
        assert len(temps) == 1 and temps[0].stat().st_size > 8 << 20  # all bytes written, not renamed
    finally:
        _kill(w)
    assert _check_after_kill(target) == "absent"
    assert ArtifactCache(tmp_path / "cccl").get("ab" * 32) is None
    assert sweep_temp(tmp_path) == 0  # young temp files are left to their (possibly live) writer
    old = time.time() - 7200
    os.utime(temps[0], (old, old))
    assert ArtifactCache(tmp_path / "cccl").sweep() == 1 and not temps[0].exists()


def test_writers_killed_at_random_moments(tmp_path):
    rng = random.Random(1234)
    seen = []
    for i in range(6):
        target = tmp_path / f"t{i}" / "x.aot"
        w = _spawn_writer("plain", target, 64 << 20)
        try:
            assert w.stdout.readline().strip() == "writing"
            time.sleep(rng.uniform(0.0, 0.15))
        finally:
            _kill(w)
        seen.append(_check_after_kill(target))
        sweep_temp(target.parent, older_than_s=0)
        assert not list(target.parent.glob(TMP_PREFIX + "*"))
    print(f"killed writers left: {seen}")
