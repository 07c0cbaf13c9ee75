"""Hostile directories, foreign artifacts, disk trouble and bad command lines (CPU only).

* Path safety: a manifest naming anything outside its directory is refused, naming the path.
* Foreign and stale artifacts (another cuda-cccl, CUDA major, format version, SM family): each skipped with
  exactly one AotWarning, then the next source serves (the JIT step is stubbed: no GPU, no build).
* Disk trouble under the user cache (read-only, not a directory, full, I/O errors): the JIT payload is still
  returned, with exactly one warning, and nothing partial is left behind.
* Bad command lines: exit code and message, table-driven.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import warnings
import zipfile
from pathlib import Path

import pytest

from aot.core import format as fmt
from aot.core.fs import TMP_PREFIX
from aot.cli.main import main
from aot.core.errors import ArtifactError
from aot.core.versions import check_producer, runtime_versions as _runtime_versions
from aot.runtime.loader.objects import AotWarning
from aot.runtime.loader.registry import Registry
from aot.core.manifest import load_manifest, safe_join, verify_files

from hostile_util import (SPEC_NAME, entry_for, fake_cuda, fake_jit, jit, read_manifest,  # noqa: F401
                          restamp, spec, time_limit, write_manifest_doc)


def aot_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, AotWarning)]


@pytest.fixture
def recorded():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def seed_file(build_out: Path, rel: str) -> tuple[bytes, dict]:
    entry = next(a for a in read_manifest(build_out)["artifacts"] if a["path"] == rel)
    return (build_out / rel).read_bytes(), dict(entry)


def artifact_set(root: Path, build_out: Path, files: list[tuple[str, bytes, dict]]) -> Path:
    """A directory holding ``files`` ((path, bytes, base entry)) and a manifest describing them (size and
    sha256 always right, so whatever is wrong is found by the checks after the file check)."""
    doc = read_manifest(build_out)
    entries = []
    for rel, data, base in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        entries.append(entry_for(data, base, path=rel))
    write_manifest_doc(root, {**doc, "artifacts": entries,
                              "specs": {n: doc["specs"][n] for n in {e["name"] for e in entries}}})
    return root


# ============================================================================================ path safety
OUTSIDE_PATHS = ["../x", "/etc/passwd", "a/../../x", "..\\x", "cccl\\r\\sm_90.aot", "", "C:x", "C:\\x", ".",
                 "./", "..", "a/..", "//etc/passwd", "a\x00b", "\ud800.aot", "cccl/../../x"]


def minimal_set(root: Path, rel: str) -> Path:
    """One real-looking (but tiny) artifact at ``cccl/r/sm_90.aot`` and a manifest entry with path ``rel``."""
    payload = b"blob"
    h = fmt.make_header(family="cccl", name="r", content_key="c" * 64, sm=90, payload_kind="cccl-blob",
                        payload=payload, producer={k: "x" for k in fmt.PRODUCER_FIELDS})
    data = fmt.encode(h, payload)
    (root / "cccl" / "r").mkdir(parents=True, exist_ok=True)
    (root / "cccl" / "r" / "sm_90.aot").write_bytes(data)
    entry = {"path": rel, "name": "r", "family": "cccl", "sm": 90, "payload_kind": "cccl-blob",
             "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "content_key": "c" * 64}
    doc = {"format": "aot-manifest", "manifest_version": 1, "producer": {k: "x" for k in fmt.PRODUCER_FIELDS},
           "specs": {"r": {"name": "r", "algorithm": "reduce", "dtype": "int32", "op": "plus", "init": 0}},
           "artifacts": [entry]}
    write_manifest_doc(root, doc)
    return root


def test_minimal_set_is_valid(tmp_path):
    m = load_manifest(minimal_set(tmp_path, "cccl/r/sm_90.aot"))
    assert verify_files(m) == []


@pytest.mark.parametrize("rel", OUTSIDE_PATHS, ids=[repr(p) for p in OUTSIDE_PATHS])
def test_manifest_path_outside_is_rejected(tmp_path, rel):
    root = minimal_set(tmp_path / "set", rel)
    with pytest.raises(ArtifactError) as ei:
        load_manifest(root)
    assert repr(rel) in str(ei.value), str(ei.value)
    with pytest.raises(ArtifactError, match="manifest path"):
        safe_join(root, rel)


@pytest.mark.parametrize("kind", ["file-link-out", "dir-link-out", "abs-link-out", "link-to-root", "loop"])
def test_symlinks_leading_outside_are_rejected(tmp_path, kind):
    root = minimal_set(tmp_path / "set", "cccl/r/sm_90.aot")
    outside = tmp_path / "outside"
    shutil.copytree(root / "cccl", outside / "cccl")
    if kind == "file-link-out":  # a file inside the directory that is a symlink to a file outside
        (root / "evil.aot").symlink_to(os.path.relpath(outside / "cccl/r/sm_90.aot", root))
        rel = "evil.aot"
    elif kind == "dir-link-out":  # a directory inside that is a symlink to a directory outside
        shutil.rmtree(root / "cccl")
        (root / "cccl").symlink_to(outside / "cccl", target_is_directory=True)
        rel = "cccl/r/sm_90.aot"
    elif kind == "abs-link-out":
        (root / "passwd.aot").symlink_to("/etc/passwd")
        rel = "passwd.aot"
    elif kind == "link-to-root":
        (root / "self").symlink_to(".", target_is_directory=True)
        rel = "self"
    else:
        (root / "loop.aot").symlink_to("loop.aot")
        rel = "loop.aot"
    doc = read_manifest(root)
    doc["artifacts"][0]["path"] = rel
    write_manifest_doc(root, doc)
    with pytest.raises(ArtifactError) as ei:
        load_manifest(root)
    assert repr(rel) in str(ei.value)


def test_symlinks_inside_are_fine(tmp_path):
    """A symlink that stays inside (and a symlinked root) is not an escape."""
    real = minimal_set(tmp_path / "real", "cccl/r/sm_90.aot")
    (real / "alias.aot").symlink_to("cccl/r/sm_90.aot")
    doc = read_manifest(real)
    doc["artifacts"][0]["path"] = "alias.aot"
    write_manifest_doc(real, doc)
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    for root in (real, tmp_path / "link"):
        assert verify_files(load_manifest(root)) == []


def test_registry_over_escaping_manifest_warns_once_and_falls_back(tmp_path, jit_stub, recorded):
    root = minimal_set(tmp_path / "set", "../outside.aot")
    from aot.core.spec import CcclSpec
    s = CcclSpec("r", "reduce", {"dtype": "int32", "op": "plus", "init": 0})
    reg = Registry(root, specs=[s], device_sm=90)
    assert reg.manifest is None
    loaded = reg._load("r")
    msgs = aot_warnings(recorded)
    assert len(msgs) == 1 and "'../outside.aot'" in msgs[0] and "ignoring packaged artifacts" in msgs[0]
    assert loaded.source == "jit" and jit_stub == [("r", 90)]


def test_verify_cli_names_the_escaping_path(tmp_path, capsys):
    root = minimal_set(tmp_path / "set", "../../etc/passwd")
    assert main(["verify", str(root)]) == 7
    out, err = capsys.readouterr()
    assert "'../../etc/passwd'" in out + err


# ======================================================================================= foreign artifacts
def test_check_producer_messages():
    here = _runtime_versions()
    ok = {"aot": "0.1.0", "cuda_cccl": here["cuda_cccl"], "cuda_major": here["cuda_major"], "nvrtc": "13.0",
          "nvjitlink": "13.0"}
    check_producer(ok, "cccl")
    check_producer({**ok, "cuda_major": int(here["cuda_major"])}, "cccl")  # 13 == "13"
    check_producer({**ok, "cuda_cccl": "0.0.1"}, "nvrtc")  # cubins/PTX do not depend on cuda-cccl
    cases = [
        ({**ok, "cuda_cccl": "1.2.0"}, "cccl", f"built with cuda-cccl 1.2.0, installed is {here['cuda_cccl']}"),
        ({**ok, "cuda_cccl": None}, "cccl", "built with cuda-cccl None"),
        ({k: v for k, v in ok.items() if k != "cuda_cccl"}, "cccl", "built with cuda-cccl None"),
        ({**ok, "cuda_major": "12"}, "cccl", f"built for CUDA 12, this environment is CUDA {here['cuda_major']}"),
        ({**ok, "cuda_major": "12"}, "nvrtc", "built for CUDA 12"),
        ({**ok, "cuda_major": [13]}, "nvrtc", "built for CUDA [13]"),
    ]
    for producer, family, fragment in cases:
        with pytest.raises(ArtifactError) as ei:
            check_producer(producer, family)
        assert fragment in str(ei.value), (str(ei.value), fragment)


CCCL90 = "cccl/reduce_sum_i32/sm_90.aot"
FOREIGN = {
    "cuda-cccl": (dict(producer={"cuda_cccl": "1.1.0"}), "built with cuda-cccl 1.1.0"),
    "cuda-major": (dict(producer={"cuda_major": "12"}), "built for CUDA 12"),
    "format-version": (dict(format_version=2), "format version 2 (this aot reads 1)"),
    "sm80-as-sm90": (None, "header does not match its manifest entry"),
    "content-key": (dict(content_key="0" * 64), "content key differs"),
}


def foreign_file(build_out: Path, kind: str) -> tuple[bytes, dict]:
    data, entry = seed_file(build_out, CCCL90)
    if kind == "sm80-as-sm90":  # an sm_80 artifact filed as sm_90 (header says 80, entry says 90)
        data, _ = seed_file(build_out, "cccl/reduce_sum_i32/sm_80.aot")
        return data, entry
    return restamp(data, **FOREIGN[kind][0]), entry


@pytest.mark.parametrize("kind", list(FOREIGN))
def test_foreign_artifact_skipped_with_one_warning(small_build, tmp_path, jit_stub, recorded, kind):
    data, entry = foreign_file(small_build.out, kind)
    sm80, e80 = seed_file(small_build.out, "cccl/reduce_sum_i32/sm_80.aot")  # never a candidate on sm_90
    root = artifact_set(tmp_path / "set", small_build.out,
                        [(CCCL90, data, entry), ("cccl/reduce_sum_i32/sm_80.aot", sm80, e80)])
    with fake_cuda() as cuda_calls:
        reg = Registry(root, device_sm=90)
        assert [c.sm for c in reg.packaged_candidates(reg.spec(SPEC_NAME), 90)] == [90]
        loaded = reg._load(SPEC_NAME)
        again = reg._load(SPEC_NAME)
    msgs = aot_warnings(recorded)
    assert len(msgs) == 1, msgs
    assert str(root / CCCL90) in msgs[0] and FOREIGN[kind][1] in msgs[0], msgs[0]
    assert loaded is again and loaded.source == "jit" and jit_stub == [(SPEC_NAME, 90)]
    assert cuda_calls.calls == []  # nothing foreign reached cuda.compute
    assert reg.status()[SPEC_NAME].errors == msgs


def test_every_foreign_kind_then_a_good_one(small_build, tmp_path, jit_stub, recorded):
    """Five bad sm_90 candidates, then a good one: five warnings, one per file, and the good one serves."""
    files = [(f"cccl/reduce_sum_i32/{i}-{kind}.aot", *foreign_file(small_build.out, kind))
             for i, kind in enumerate(FOREIGN)]
    good, entry = seed_file(small_build.out, CCCL90)
    files.append(("cccl/reduce_sum_i32/z-good.aot", good, entry))
    root = artifact_set(tmp_path / "set", small_build.out, files)
    with fake_cuda() as cuda_calls:
        reg = Registry(root, device_sm=90)
        loaded = reg._load(SPEC_NAME)
    msgs = aot_warnings(recorded)
    assert len(msgs) == len(FOREIGN), msgs
    for (path, _, _), msg, (kind, (_, fragment)) in zip(files, msgs, FOREIGN.items()):
        assert str(root / path) in msg and fragment in msg, (kind, msg)
    assert loaded.source == "packaged" and loaded.path == str(root / "cccl/reduce_sum_i32/z-good.aot")
    assert jit_stub == [] and len(cuda_calls.calls) == 1 and cuda_calls.calls[0][1] == fmt.decode(good).payload


def test_only_foreign_ones_fall_back_after_one_warning_each(small_build, tmp_path, jit_stub, recorded):
    files = [(f"cccl/reduce_sum_i32/{i}-{kind}.aot", *foreign_file(small_build.out, kind))
             for i, kind in enumerate(FOREIGN)]
    root = artifact_set(tmp_path / "set", small_build.out, files)
    reg = Registry(root, device_sm=90)
    assert reg._load(SPEC_NAME).source == "jit"
    assert len(aot_warnings(recorded)) == len(FOREIGN) and jit_stub == [(SPEC_NAME, 90)]


@pytest.mark.parametrize("device,want", [(90, [90]), (89, [89, 80]), (86, [80]), (80, [80]), (87, [80]),
                                         (100, []), (120, []), (75, [])])
def test_cccl_candidates_never_cross_a_major(small_build, device, want):
    reg = Registry(small_build.out, device_sm=device)
    for name in ("reduce_sum_i32", "lower_bound_i32"):
        assert [c.sm for c in reg.packaged_candidates(reg.spec(name), device)] == want


def test_other_major_is_never_opened(small_build, jit_stub, recorded, monkeypatch):
    """On sm_100 no CCCL artifact of this set may even be read: the loader goes straight to cache/JIT."""
    reg = Registry(small_build.out, device_sm=100)
    opened = []
    monkeypatch.setattr(reg, "open_packaged", lambda *a: opened.append(a) or pytest.fail("opened"))
    assert reg._load(SPEC_NAME).source == "jit" and opened == [] and aot_warnings(recorded) == []


def test_nvrtc_foreign_cubin_falls_back_to_packaged_ptx(small_build, tmp_path, recorded):
    cubin, e_cubin = seed_file(small_build.out, "nvrtc/morton/sm_90.cubin.aot")
    ptx, e_ptx = seed_file(small_build.out, "nvrtc/morton/compute_80.ptx.aot")
    other_cccl = restamp(cubin, producer={"cuda_cccl": "9.9.9"})  # irrelevant to a cubin: still loads
    root = artifact_set(tmp_path / "a", small_build.out, [("nvrtc/morton/sm_90.cubin.aot", other_cccl, e_cubin),
                                                          ("nvrtc/morton/compute_80.ptx.aot", ptx, e_ptx)])
    with fake_cuda() as calls:
        loaded = Registry(root, device_sm=90)._load("morton")
    assert loaded.kind == "cubin" and aot_warnings(recorded) == [] and [w for w, _ in calls.calls] == ["cubin"]
    root = artifact_set(tmp_path / "b", small_build.out,
                        [("nvrtc/morton/sm_90.cubin.aot", restamp(cubin, producer={"cuda_major": "12"}), e_cubin),
                         ("nvrtc/morton/compute_80.ptx.aot", ptx, e_ptx)])
    with fake_cuda() as calls:
        loaded = Registry(root, device_sm=90)._load("morton")
    msgs = aot_warnings(recorded)
    assert len(msgs) == 1 and "sm_90.cubin.aot" in msgs[0] and "built for CUDA 12" in msgs[0]
    assert loaded.kind == "ptx" and loaded.source == "packaged" and [w for w, _ in calls.calls] == ["ptx"]


def test_stale_artifact_for_a_changed_spec_is_not_served(small_build, tmp_path, jit_stub, recorded):
    from aot.core.spec import CcclSpec
    root = tmp_path / "set"
    shutil.copytree(small_build.out, root)
    now = CcclSpec(SPEC_NAME, "reduce", {"dtype": "int32", "op": "maximum", "init": 0})  # the matrix moved on
    with fake_cuda() as calls:
        loaded = Registry(root, specs=[now], device_sm=90)._load(SPEC_NAME)
    assert calls.calls == [] and loaded.source == "jit" and jit_stub == [(SPEC_NAME, 90)]
    assert len(aot_warnings(recorded)) == 1


@pytest.mark.parametrize("kind", [
    "fifo",
    "directory",
])
def test_loader_refuses_special_files(small_build, tmp_path, kind):
    data, entry = seed_file(small_build.out, CCCL90)
    root = artifact_set(tmp_path / "set", small_build.out, [(CCCL90, data, entry)])
    (root / CCCL90).unlink()
    os.mkfifo(root / CCCL90) if kind == "fifo" else (root / CCCL90).mkdir()
    reg = Registry(root, device_sm=90)
    with time_limit(2), pytest.raises(ArtifactError):
        reg.open_packaged(reg.spec(SPEC_NAME), entry, root / CCCL90, 90)


# =========================================================================================== disk trouble
def _cache_dir_readonly(monkeypatch, cache: Path) -> str:
    """Make the cache unwritable: chmod where that binds, else (root) a read-only file system, else a patch."""
    if os.geteuid() != 0:
        cache.mkdir(parents=True)
        cache.chmod(0o500)
        return "chmod"
    probe = Path("/sys/aot-test-probe")
    try:
        probe.mkdir()
    except OSError as e:
        if e.errno in (errno.EPERM, errno.EACCES, errno.EROFS):  # sysfs refuses mkdir, even to root
            monkeypatch.setenv("AOT_CACHE_DIR", "/sys/aot-cache-test")
            return "sysfs"
    else:
        probe.rmdir()

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    import aot.core.fs
    monkeypatch.setattr(aot.core.fs.tempfile, "mkstemp", denied)
    return "patched mkstemp"


def _fault(kind: str, monkeypatch, tmp_path) -> None:
    import aot.core.fs
    cache = tmp_path / "cache"
    if kind == "read-only":
        _cache_dir_readonly(monkeypatch, cache)
    elif kind == "not-a-directory":  # mkdir fails with ENOTDIR however privileged we are
        (tmp_path / "file").write_text("x")
        monkeypatch.setenv("AOT_CACHE_DIR", str(tmp_path / "file" / "cache"))
    elif kind == "disk-full":  # the write gets half way, then ENOSPC
        real_fdopen = os.fdopen

        class HalfWriter:
            def __init__(self, f):
                self.f = f

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.f.close()

            def write(self, data):
                self.f.write(data[:len(data) // 2])
                self.f.flush()
                raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(aot.core.fs.os, "fdopen", lambda fd, *a, **k: HalfWriter(real_fdopen(fd, *a, **k)))
    elif kind == "quota":
        def quota(*a, **k):
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        monkeypatch.setattr(aot.core.fs.tempfile, "mkstemp", quota)
    elif kind == "fsync-eio":
        def eio(fd):
            raise OSError(errno.EIO, "Input/output error")
        monkeypatch.setattr(aot.core.fs.os, "fsync", eio)
    elif kind == "rename-fails":
        def exdev(a, b):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        monkeypatch.setattr(aot.core.fs.os, "replace", exdev)
    else:
        raise AssertionError(kind)


def _leftovers(cache_root: Path) -> list[Path]:
    """Temp files, or entries that do not decode, anywhere under the cache root."""
    if not cache_root.is_dir():
        return []
    bad = [p for p in cache_root.rglob(TMP_PREFIX + "*")]
    for p in cache_root.rglob("*.aot"):
        try:
            fmt.read(p)
        except ArtifactError:
            bad.append(p)
    return bad


DISK_FAULTS = ["read-only", "not-a-directory", "disk-full", "quota", "fsync-eio", "rename-fails"]


@pytest.mark.parametrize("kind", DISK_FAULTS)
def test_disk_trouble_serves_the_jit_result_with_one_warning(fake_jit, spec, tmp_path, monkeypatch, kind):
    with monkeypatch.context() as mp:
        _fault(kind, mp, tmp_path)
        from aot.runtime.jit.cache import cache_root
        root = cache_root()
        with time_limit(30):
            payload, source, path, warned = jit(spec)
        assert payload == f"blob:{SPEC_NAME}:90".encode() * 100 and source == "jit" and path is None
        assert len(warned) == 1 and "cannot persist" in warned[0] and "in memory" in warned[0], warned
        assert fake_jit.calls == 1
        assert _leftovers(root) == [] and not list(root.rglob("*.aot") if root.is_dir() else [])
    if kind == "read-only" and os.geteuid() != 0:
        (tmp_path / "cache").chmod(0o700)
    # the fault is gone: the next call builds and persists, the one after reads the cache
    _, s2, path2, w2 = jit(spec)
    assert (s2, w2, fake_jit.calls) == ("jit", [], 2) and path2
    _, s3, path3, w3 = jit(spec)
    assert (s3, w3, path3) == ("cache", [], path2) and fmt.read(path3).payload == payload


def test_disk_trouble_through_the_loader_is_one_aot_warning(fake_jit, spec, tmp_path, monkeypatch, recorded):
    _fault("not-a-directory", monkeypatch, tmp_path)
    reg = Registry(tmp_path / "none", specs=[spec], device_sm=90)
    loaded = reg._load(SPEC_NAME)
    msgs = aot_warnings(recorded)
    assert loaded.source == "jit" and loaded.payload and len(msgs) == 1 and "cannot persist" in msgs[0]
    assert reg.status()[SPEC_NAME].errors == msgs


def test_unreadable_entry_is_reported_not_deleted(fake_jit, spec, monkeypatch):
    payload, _, path, _ = jit(spec)
    import aot.runtime.jit.cache
    real = aot.runtime.jit.cache.fmt._read_regular
    state = {"deny": True}

    def maybe_denied(p, *a, **k):
        if state["deny"]:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(p, *a, **k)

    monkeypatch.setattr(aot.runtime.jit.cache.fmt, "_read_regular", maybe_denied)
    with pytest.raises(ArtifactError, match="cannot read user-cache entry: Permission denied"):
        aot.runtime.jit.cache.ArtifactCache().get(Path(path).stem)
    assert Path(path).exists()  # an unreadable entry is not proof of corruption
    _, source, _, warned = jit(spec)
    assert source == "jit" and len(warned) == 1 and "Permission denied" in warned[0]
    state["deny"] = False
    assert jit(spec)[1] == "cache"


def test_cache_disabled_never_touches_disk(fake_jit, spec, tmp_path, monkeypatch):
    monkeypatch.setenv("AOT_DISABLE_CACHE", "1")
    payload, source, path, warned = jit(spec)
    assert source == "jit" and path is None and warned == [] and not (tmp_path / "cache").exists()


# ============================================================================================ bad CLI input
def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def _bad_cli_setup(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "empty").mkdir()
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "manifest.json").write_bytes(b"\xff\xfe not json")
    (tmp_path / "garbage.bin").write_bytes(b"\x9f\x00garbage\xff" * 8)
    (tmp_path / "empty.yaml").write_bytes(b"")
    minimal_set(tmp_path / "escape", "../../etc/passwd")
    _wheel(tmp_path / "traversal.whl", {"aot/artifacts/manifest.json": b"{}", "aot/artifacts/../../evil": b"x"})
    _wheel(tmp_path / "noartifacts.whl", {"aot/__init__.py": b""})
    return {"tmp": str(tmp_path)}


BAD_CLI = [  # (id, argv, exit code, substring of stdout+stderr)
    ("sm-word", ["build", "--sm", "eighty"], 2, "'eighty' is not an SM"),
    ("sm-empty", ["build", "--sm", ""], 2, "empty SM list"),
    ("sm-one-digit", ["build", "--sm", "sm_8"], 2, "is not an SM"),
    ("sm-four-digits", ["build", "--sm", "1000"], 2, "is not an SM"),
    ("sm-double-comma", ["build", "--sm", "80,,90"], 2, "is not an SM"),
    ("sm-semicolon", ["build", "--sm", "80;90"], 2, "is not an SM"),
    ("sm-negative", ["build", "--sm=-80"], 2, "is not an SM"),
    ("sm-unsupported", ["build", "--sm", "50"], 2, "cannot target sm_50"),
    ("shard-zero", ["build", "--sm", "80", "--shard", "0/2"], 2, "need 1 <= K <= N"),
    ("shard-past-n", ["build", "--sm", "80", "--shard", "3/2"], 2, "need 1 <= K <= N"),
    ("shard-n-zero", ["build", "--sm", "80", "--shard", "1/0"], 2, "need 1 <= K <= N"),
    ("shard-word", ["build", "--sm", "80", "--shard", "x"], 2, "expected K/N"),
    ("shard-three-parts", ["build", "--sm", "80", "--shard", "1/2/3"], 2, "expected K/N"),
    ("shard-fullwidth-digits", ["build", "--sm", "80", "--shard", "\uff11/\uff12"], 2, "expected K/N"),
    ("shard-negative", ["build", "--sm", "80", "--shard=-1/2"], 2, "expected K/N"),
    ("jobs-negative", ["build", "--sm", "80", "--jobs", "-1"], 2, "--jobs must be >= 0"),
    ("jobs-word", ["build", "--sm", "80", "--jobs", "x"], 2, "invalid int value: 'x'"),
    ("only-typo", ["build", "--sm", "80", "--only", "reduce_sum_i33"], 2, "did you mean 'reduce_sum_i32'?"),
    ("only-unknown", ["build", "--sm", "80", "--only", "reduce_sum_i32,nonsense_xyz"], 2,
     "unknown spec 'nonsense_xyz'"),
    ("matrix-missing", ["build", "--sm", "80", "--matrix", "{tmp}/nope.yaml"], 2, "cannot read build matrix"),
    ("matrix-empty-file", ["validate", "--matrix", "{tmp}/empty.yaml"], 2, "must be a mapping"),
    ("matrix-is-a-directory", ["validate", "--matrix", "{tmp}/empty"], 2, "cannot read build matrix"),
    ("unknown-flag", ["build", "--sm", "80", "--frobnicate"], 2, "unrecognized arguments: --frobnicate"),
    ("unknown-command", ["frobnicate"], 2, "invalid choice: 'frobnicate'"),
    ("no-command", [], 2, "required"),
    ("verify-missing-dir", ["verify", "{tmp}/does-not-exist"], 2, "not a directory or a .whl file"),
    ("verify-no-manifest", ["verify", "{tmp}/empty"], 7, "cannot read manifest"),
    ("verify-garbage-manifest", ["verify", "{tmp}/garbage"], 7, "not valid JSON"),
    ("verify-escaping-manifest", ["verify", "{tmp}/escape"], 7, "'../../etc/passwd'"),
    ("verify-garbage-file", ["verify", "{tmp}/garbage.bin"], 2, "not a directory or a .whl file"),
    ("verify-traversal-wheel", ["verify", "{tmp}/traversal.whl"], 2, "unsafe path in wheel"),
    ("verify-wheel-without-artifacts", ["verify", "{tmp}/noartifacts.whl"], 2, "carries no artifacts"),
    ("inspect-garbage-file", ["inspect", "{tmp}/garbage.bin"], 2, "not a directory or a .whl file"),
    ("inspect-garbage-manifest", ["inspect", "{tmp}/garbage"], 5, "not valid JSON"),
    ("inspect-no-manifest", ["inspect", "{tmp}/empty"], 5, "cannot read manifest"),
    ("inspect-missing", ["inspect", "{tmp}/does-not-exist"], 2, "not a directory or a .whl file"),
]


@pytest.mark.parametrize("argv,code,fragment", [c[1:] for c in BAD_CLI], ids=[c[0] for c in BAD_CLI])
def test_bad_cli_input(tmp_path, capsys, argv, code, fragment):
    subs = _bad_cli_setup(tmp_path)
    out_dir = tmp_path / "out"
    argv = [a.format(**subs) for a in argv]
    if argv and argv[0] == "build":
        argv += ["--out", str(out_dir), "-q"]
    with time_limit(60):
        rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == code, (rc, out, err)
    assert fragment in out + err, (fragment, out, err)
    assert "Traceback" not in out + err
    if err.startswith("aot: error:"):
        assert err.count("\n") == 1  # one line, no stack
    assert not out_dir.exists()  # a refused build writes nothing


def test_bad_cli_env_var(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AOT_JOBS", "many")
    assert main(["build", "--sm", "80", "--out", str(tmp_path / "out"), "-q"]) == 2
    assert "environment variable AOT_JOBS" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_bad_cli_sm_native_without_gpu(tmp_path, capsys):
    from aot.build.toolchain import native_sm
    if native_sm() is not None:
        pytest.skip("a GPU is present: --sm native is valid here")
    assert main(["build", "--sm", "native", "--out", str(tmp_path / "out"), "-q"]) == 2
    assert "no usable GPU" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_bad_cli_garbage_wheel(tmp_path, capsys, command):
    (tmp_path / "garbage.whl").write_bytes(b"PK\x03\x04 not really a zip")
    assert main([command, str(tmp_path / "garbage.whl")]) == 2
    assert "garbage.whl" in capsys.readouterr().err


def test_bad_cli_non_utf8_matrix(tmp_path, capsys):
    (tmp_path / "m.yaml").write_bytes(b"\x9f\x00garbage\xff")
    assert main(["validate", "--matrix", str(tmp_path / "m.yaml")]) == 2
    assert "m.yaml" in capsys.readouterr().err
