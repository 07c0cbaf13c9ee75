"""Another local user must never plant kernels or run code through aot (issue 8, items 1-3 and 11).

The attacks run as a second uid (4242) through ``setpriv`` where this run is root (else skipped): the
attacker plants self-consistent cache entries, a stand-in libcuda whose constructor leaves a marker, and
lock-file symlinks, in every place aot used to trust. The victim (this process) must never return a
planted entry, never load a planted library and never write through a planted link, with exactly one
warning that says why. Plus the cache basics: 0700 directories, ``aot cache`` info / clear / --stale,
the LRU size cap, one warning for an unusable cache path.

The JIT step is the counted fake of ``hostile_util.fake_jit`` (a real build costs seconds; the planted
entries are real artifacts encoded with :mod:`aot.core.format` under the victim's real cache key).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from aot.core import format as fmt
from aot.runtime.jit.cache import ArtifactCache, UnsafeCacheError, UnsafeEntryError, cache_root
from conftest import ROOT, repo_env
from hostile_util import SPEC_NAME, cache_key, fake_jit, jit, spec  # noqa: F401 (fixtures)

ATTACKER = 4242
SETPRIV = shutil.which("setpriv")
as_root = pytest.mark.skipif(os.geteuid() != 0 or SETPRIV is None,
                             reason="attacks run as a second uid: needs root and setpriv")

PLANTED = b"planted-max-reduction" * 50


def run_as_attacker(script: str, **env: str) -> subprocess.CompletedProcess:
    """``sh -c script`` as uid/gid 4242 with no supplementary groups."""
    proc = subprocess.run([SETPRIV, f"--reuid={ATTACKER}", f"--regid={ATTACKER}", "--clear-groups",
                           "sh", "-c", script], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", **env})
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def arena():
    """A world-traversable scratch directory (pytest's tmp_path is 0700: the attacker could not reach it)."""
    d = Path(tempfile.mkdtemp(prefix="aot-sec-"))
    closed = next((p for p in d.parents if not p.stat().st_mode & stat.S_IXOTH), None)
    if closed is not None:  # a TMPDIR of 0700 (or below one): no other uid reaches anything in it
        d.rmdir()
        pytest.skip(f"{closed} is closed to other users: the attacker cannot reach a folder in TMPDIR")
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def planted_entry(spec, sm: int = 90) -> bytes:
    """A self-consistent artifact for the victim's key: right header, right hashes, wrong kernel."""
    from aot.build.toolchain import versions
    key = cache_key(spec, sm)
    header = fmt.make_header(family="cccl", name=spec.name, content_key=key, sm=sm, payload_kind="cccl-blob",
                             payload=PLANTED, producer={k: versions()[k] for k in fmt.PRODUCER_FIELDS})
    return fmt.encode(header, PLANTED)


def stage(arena: Path, name: str, data: bytes) -> Path:
    p = arena / name
    p.write_bytes(data)
    p.chmod(0o644)
    return p


def owners(root: Path) -> set[int]:
    return {os.lstat(p).st_uid for p in root.rglob("*")}


# =============================================================================== 1. planted cache entries
def test_the_planted_entry_is_self_consistent(fake_jit, spec):
    """Control: in the victim's own cache the same bytes would be served. So a refusal below is the
    trust check at work, not a malformed plant."""
    ArtifactCache().put(cache_key(spec), planted_entry(spec))
    payload, source, _, warned = jit(spec)
    assert (payload, source, warned, fake_jit.calls) == (PLANTED, "cache", [], 0)


@as_root
def test_entry_planted_in_a_shared_1777_cache_is_never_served(fake_jit, spec, arena, monkeypatch):
    shared = arena / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    key = cache_key(spec)
    src = stage(arena, "entry.aot", planted_entry(spec))
    run_as_attacker(f"mkdir -p {shared}/cccl/{key[:2]} && cp {src} {shared}/cccl/{key[:2]}/{key}.aot")
    monkeypatch.setenv("AOT_CACHE_DIR", str(shared))
    payload, source, path, warned = jit(spec)
    assert source == "jit" and payload != PLANTED and path is None and fake_jit.calls == 1
    assert len(warned) == 1 and "writable by group and others (mode 1777)" in warned[0], warned
    again = jit(spec)  # once per process: the second lookup says nothing, and still never reads it
    assert again[1] == "jit" and again[3] == [] and again[0] != PLANTED
    assert owners(shared) == {ATTACKER}  # the victim wrote nothing there (no entry, no lock)


@as_root
def test_one_aot_warning_per_process_through_the_loader(fake_jit, arena, monkeypatch):
    """Two specs, NVRTC's cache too: the unsafe directory is reported once, and nothing is written there."""
    from aot.runtime.jit.jit import nvrtc_cache_dir
    from aot.runtime.loader.objects import AotWarning
    from aot.runtime.loader.registry import Registry
    from aot.build.matrix import load_matrix
    shared = arena / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setenv("AOT_CACHE_DIR", str(shared))
    specs = load_matrix().select([SPEC_NAME, "lower_bound_i32"])
    reg = Registry(arena / "no-artifacts", specs=specs, device_sm=90)
    with pytest.warns(AotWarning) as record:
        assert [reg._load(s.name).source for s in specs] == ["jit", "jit"]
        assert nvrtc_cache_dir() is None
    msgs = [str(w.message) for w in record if issubclass(w.category, AotWarning)]
    assert len(msgs) == 1 and "mode 1777" in msgs[0] and fake_jit.calls == 2, msgs
    assert list(shared.iterdir()) == []


@pytest.mark.parametrize("link_owner", ["victim", "attacker"])
@as_root
def test_cache_dir_symlinked_into_the_attackers_dir_is_refused(fake_jit, spec, arena, monkeypatch, link_owner):
    key = cache_key(spec)
    src = stage(arena, "entry.aot", planted_entry(spec))
    home = arena / "attacker"
    home.mkdir()
    os.chown(home, ATTACKER, ATTACKER)
    run_as_attacker(f"mkdir -p {home}/cache/cccl/{key[:2]} && cp {src} {home}/cache/cccl/{key[:2]}/{key}.aot"
                    f" && chmod -R go-w {home}/cache")  # even a tidy 0755 tree: the owner is what matters
    links = arena / "links"
    links.mkdir(mode=0o777)
    links.chmod(0o1777)
    link = links / "cache"
    if link_owner == "victim":
        link.symlink_to(home / "cache")
    else:
        run_as_attacker(f"ln -s {home}/cache {link}")
    monkeypatch.setenv("AOT_CACHE_DIR", str(link))
    with pytest.raises(UnsafeCacheError):  # the store itself refuses, typed
        ArtifactCache().get(key)
    payload, source, _, warned = jit(spec)
    assert source == "jit" and payload != PLANTED and len(warned) == 1, warned
    expect = "owned by uid 4242" if link_owner == "victim" else "symbolic link owned by uid 4242"
    assert expect in warned[0] and str(link) in warned[0], warned
    assert owners(home) == {ATTACKER}


@pytest.mark.parametrize("how", ["group-writable", "other-uid", "symlink"])
def test_untrusted_entry_in_our_own_cache_is_refused_and_kept(fake_jit, spec, tmp_path, how):
    """An entry nobody but us should be able to write, that somehow is: one warning naming it, served from
    JIT, and the file is neither deleted nor overwritten (it may be another user's)."""
    if how == "other-uid" and os.geteuid() != 0:
        pytest.skip("chown to another uid needs root")
    key = cache_key(spec)
    entry = ArtifactCache().put(key, planted_entry(spec))
    if how == "group-writable":
        entry.chmod(0o660)
    elif how == "other-uid":
        os.chown(entry, ATTACKER, ATTACKER)
    else:
        target = tmp_path / "elsewhere.aot"
        entry.rename(target)
        entry.symlink_to(target)
    with pytest.raises(UnsafeEntryError):
        ArtifactCache().get(key)
    before = os.lstat(entry)
    payload, source, path, warned = jit(spec)
    assert (source, path, fake_jit.calls) == ("jit", None, 1) and payload != PLANTED
    assert len(warned) == 1 and str(entry) in warned[0] and "not read" in warned[0], warned
    after = os.lstat(entry)
    assert (after.st_ino, after.st_mtime_ns, after.st_uid) == (before.st_ino, before.st_mtime_ns, before.st_uid)


# ========================================================================== 2. the stand-in libcuda
EVIL_C = r"""
#include <stdio.h>
__attribute__((constructor)) static void pwn(void) {
    FILE *f = fopen(MARKER, "w"); if (f) { fputs("owned", f); fclose(f); }
}
int aot_libcuda_stub = 1;
"""

VICTIM = r"""
import json, os, sys
from pathlib import Path
from aot.build.toolchain import stub_library, worker_setup
p = stub_library()
worker_setup(str(p))
out = {"path": str(p), "modes": {}}
for d in (p.parent, p.parent.parent):
    out["modes"][str(d)] = [os.stat(d).st_uid, oct(os.stat(d).st_mode & 0o7777)]
try:
    worker_setup(sys.argv[1])
    out["direct"] = "loaded"
except Exception as e:
    out["direct"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


@as_root
def test_planted_stand_in_libcuda_is_never_loaded(arena, tmp_path):
    import cccl_patches
    from aot.build.toolchain import _packaged_stub, stub_digest
    if _packaged_stub().is_file():
        pytest.skip("the installed package carries its own stand-in: no compiled one is looked up")
    digest = stub_digest()
    drop = arena / "drop"
    drop.mkdir()
    drop.chmod(0o1777)
    marker = drop / "marker"
    shared = arena / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    # The victim's temp dir is a shared one (as /tmp, 1777) in the arena, not this run's TMPDIR: a user whose
    # TMPDIR is private (0755) gives the attacker nowhere to plant there, and the attack is what is under test.
    victim_tmp = arena / "tmp"
    victim_tmp.mkdir()
    victim_tmp.chmod(0o1777)
    legacy = victim_tmp / f"aot-stub-{os.geteuid()}"  # the predictable name an old aot used in the temp dir
    src = stage(arena, "evil.c", EVIL_C.encode())
    plants = [legacy / "stub" / digest, shared / "stub" / digest]
    script = f"cc -shared -fPIC -DMARKER='\"{marker}\"' -Wl,-soname,libcuda.so.1 -o {drop}/evil.so {src}"
    for d in plants:
        script += f" && mkdir -p {d} && cp {drop}/evil.so {d}/libcuda.so.1 && chmod 755 {d}/libcuda.so.1"
    try:
        run_as_attacker(script, TMPDIR=str(drop))
        # the victim's own, otherwise safe cache, with a library some other uid owns in it
        own = tmp_path / "own"
        (own / "stub" / digest).mkdir(parents=True)
        shutil.copy(drop / "evil.so", own / "stub" / digest / "libcuda.so.1")
        os.chown(own / "stub" / digest / "libcuda.so.1", ATTACKER, ATTACKER)
        for env in ({"AOT_DISABLE_CACHE": "1"}, {"AOT_CACHE_DIR": str(shared)}, {"AOT_CACHE_DIR": str(own)}):
            planted = plants[0] if "AOT_DISABLE_CACHE" in env else (
                shared / "stub" / digest if env["AOT_CACHE_DIR"] == str(shared) else own / "stub" / digest)
            proc = subprocess.run([sys.executable, "-c", VICTIM, str(planted / "libcuda.so.1")], capture_output=True,
                                  text=True, cwd=ROOT, timeout=120, env=repo_env(TMPDIR=str(victim_tmp), **env))
            assert proc.returncode == 0, proc.stderr
            out = json.loads(proc.stdout.splitlines()[-1])
            assert not marker.exists(), (env, out)
            assert Path(out["path"]).parent != planted, (env, out)
            assert "ToolchainError" in out["direct"] and "uid 4242" in out["direct"], out
            for d, (uid, mode) in out["modes"].items():  # wherever it went: ours, private
                if d != str(victim_tmp):
                    assert uid == 0 and mode == "0o700", (d, uid, mode)
    finally:
        run_as_attacker(f"rm -rf {legacy}")
    assert not marker.exists()
    assert cccl_patches.STUB_SOURCE.is_file()


def test_stub_override_that_is_not_a_library_is_one_line_exit_3(tmp_path, monkeypatch, capsys):
    from aot.cli.main import main
    not_elf = tmp_path / "libcuda.so.1"
    not_elf.write_text("#!/bin/sh\necho hi\n")
    monkeypatch.setenv("AOT_STUB_LIBCUDA", str(not_elf))
    monkeypatch.setenv("AOT_FORCE_STUB_DRIVER", "1")
    rc = main(["build", "--only", SPEC_NAME, "--sm", "80", "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 3 and err.count("\n") == 1 and "not an ELF shared library" in err and "Traceback" not in err, err


# ================================================================================ 3. lock files
@as_root
def test_planted_lock_symlink_is_not_followed(fake_jit, spec, arena, monkeypatch):
    key = cache_key(spec)
    target = arena / "victim-would-create-this"
    drop = arena / "drop"
    drop.mkdir()
    drop.chmod(0o1777)
    # in a shared cache the victim takes no lock at all; in its own cache a link (planted by whoever could)
    shared = arena / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    run_as_attacker(f"mkdir -p {shared}/cccl/{key[:2]} && ln -s {target} {shared}/cccl/{key[:2]}/{key}.lock")
    monkeypatch.setenv("AOT_CACHE_DIR", str(shared))
    assert jit(spec)[1] == "jit" and not os.path.lexists(target)
    monkeypatch.setenv("AOT_CACHE_DIR", str(arena / "own"))
    shard = arena / "own" / "cccl" / key[:2]
    shard.mkdir(parents=True)
    (shard / f"{key}.lock").symlink_to(target)
    with ArtifactCache().lock(key) as locked:
        assert locked is False
    _, source, path, warned = jit(spec)
    assert source == "jit" and path and warned == [] and not os.path.lexists(target)
    (shard / f"{key}.lock").unlink()
    foreign = shard / f"{key}.lock"
    foreign.write_bytes(b"")
    os.chown(foreign, ATTACKER, ATTACKER)
    with ArtifactCache().lock(key) as locked:
        assert locked is False
    assert os.lstat(foreign).st_uid == ATTACKER and foreign.read_bytes() == b""


def test_lock_files_are_removed_after_the_build(fake_jit, spec):
    _, source, path, _ = jit(spec)
    assert source == "jit" and Path(path).exists()
    assert list(cache_root().rglob("*.lock")) == []
    with ArtifactCache().lock(cache_key(spec)) as locked:
        assert locked and len(list(cache_root().rglob("*.lock"))) == 1
    assert list(cache_root().rglob("*.lock")) == []


# ============================================================================ directories are private
def test_directories_aot_creates_are_0700_even_with_umask_0(fake_jit, spec, tmp_path, monkeypatch):
    root = tmp_path / "a" / "b" / "cache"
    monkeypatch.setenv("AOT_CACHE_DIR", str(root))
    old = os.umask(0)
    try:
        _, source, path, warned = jit(spec)
    finally:
        os.umask(old)
    assert source == "jit" and warned == []
    for d in (tmp_path / "a", tmp_path / "a" / "b", root, root / "cccl", Path(path).parent):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    from aot.runtime.jit.cache import NVRTC_DIR, private_dir
    assert stat.S_IMODE(os.stat(private_dir(NVRTC_DIR)).st_mode) == 0o700


# ============================================================================ 11. unusable cache path
@pytest.mark.parametrize("kind", ["ENAMETOOLONG", "ELOOP"])
def test_unusable_cache_path_is_one_warning(fake_jit, spec, tmp_path, monkeypatch, kind):
    if kind == "ENAMETOOLONG":
        root = tmp_path / ("x" * 300) / "cache"
    else:
        (tmp_path / "a").symlink_to(tmp_path / "b")
        (tmp_path / "b").symlink_to(tmp_path / "a")
        root = tmp_path / "a"
    monkeypatch.setenv("AOT_CACHE_DIR", str(root))
    _, source, path, warned = jit(spec)
    assert source == "jit" and path is None and len(warned) == 1, warned
    assert "using the JIT result in memory" in warned[0]
    assert ("too long" if kind == "ENAMETOOLONG" else "symbolic links") in warned[0]


ATTACKER_JIT = r"""
import json, sys, warnings
import aot.build.compile, cccl_patches
aot.build.compile.compile_cccl = lambda spec, sm: b"blob" * 100
from aot.build.matrix import load_matrix
from aot.runtime.jit.jit import cccl_from_cache_or_jit
spec = load_matrix().select([sys.argv[1]])[0]
errors, warned = [], []
payload, source, path = cccl_from_cache_or_jit(spec, 90, errors, warned.append)
print(json.dumps({"source": source, "path": path, "warned": warned}))
"""


@as_root
def test_no_permission_on_the_cache_path_is_one_warning(arena):
    private = arena / "root-only"
    private.mkdir(mode=0o700)
    proc = subprocess.run([SETPRIV, f"--reuid={ATTACKER}", f"--regid={ATTACKER}", "--clear-groups",
                           sys.executable, "-c", ATTACKER_JIT, SPEC_NAME], capture_output=True, text=True,
                          timeout=120, cwd=arena,
                          env=repo_env(AOT_CACHE_DIR=str(private / "cache"), PYTHONDONTWRITEBYTECODE="1",
                                       HOME="/nonexistent"))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["source"] == "jit" and out["path"] is None and len(out["warned"]) == 1, out
    assert "Permission denied" in out["warned"][0]


# ================================================================================= aot cache CLI
def _cli(capsys, *argv) -> tuple[int, str]:
    from aot.cli.main import main
    rc = main(list(argv))
    return rc, capsys.readouterr().out


def test_cache_info_clear_stale_and_cap(fake_jit, spec, capsys, monkeypatch):
    from aot.build.toolchain import versions
    paths = {sm: Path(jit(spec, sm)[2]) for sm in (80, 89, 90)}
    size = paths[90].stat().st_size
    assert {p.stat().st_size for p in paths.values()} == {size}
    rc, out = _cli(capsys, "cache")
    assert rc == 0 and f"{cache_root()} (safe); 3 CCCL entries" in out, out
    cccl = versions()["cuda_cccl"]
    for sm in (80, 89, 90):
        row = next(line.split() for line in out.splitlines() if f"sm_{sm}" in line)
        assert row[0] == SPEC_NAME and row[2] == cccl and row[4] == "1", row
        assert " ".join(row[5:]) == (f"{size / 1024:.1f} KiB" if size >= 1024 else f"{size} B"), row
    # a stale entry: another cuda-cccl wrote it (same key slot, re-encoded header)
    stale = fmt.decode(paths[80].read_bytes())
    hdr = {**stale.header, "producer": {**stale.header["producer"], "cuda_cccl": "0.0.1"}}
    ArtifactCache().put(cache_key(spec, 80), fmt.encode(hdr, stale.payload))
    rc, out = _cli(capsys, "cache", "info")
    assert "0.0.1" in out
    idle = paths[89].with_suffix(".lock")  # left by a killed build: nobody holds it
    idle.write_bytes(b"")
    rc, out = _cli(capsys, "cache", "clear", "--stale")
    assert rc == 0 and "2 files" in out and not paths[80].exists() and paths[89].exists() and paths[90].exists()
    assert not idle.exists()
    # LRU: room for two entries; reading 89 makes 90 the least recently used
    assert jit(spec, 89)[1] == "cache"
    monkeypatch.setenv("AOT_CACHE_MAX_BYTES", str(2 * size + size // 2))
    _, source, path80, _ = jit(spec, 80)
    assert source == "jit" and Path(path80).exists() and paths[89].exists() and not paths[90].exists()
    rc, out = _cli(capsys, "cache", "clear")
    assert rc == 0 and not any(cache_root().rglob("*.aot")) and not list(cache_root().rglob("*.lock"))
    rc, out = _cli(capsys, "doctor")
    assert rc == 0 and f"user cache: {cache_root()} (safe); 0 CCCL entries" in out, out


@as_root
def test_cache_clear_refuses_a_shared_directory(arena, monkeypatch, capsys):
    shared = arena / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    run_as_attacker(f"mkdir -p {shared}/cccl/ab && echo x > {shared}/cccl/ab/theirs.aot")
    monkeypatch.setenv("AOT_CACHE_DIR", str(shared))
    from aot.cli.main import main
    rc = main(["cache", "clear"])
    captured = capsys.readouterr()
    assert rc == 1 and "refusing to clear" in captured.err and (shared / "cccl/ab/theirs.aot").exists()
    rc, out = _cli(capsys, "cache")
    assert rc == 0 and "NOT USED" in out and "mode 1777" in out
