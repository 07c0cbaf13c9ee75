"""Issue 23, items 2-6: hostile include dirs, deep JSON everywhere, a full disk, unbounded echo, and a
cache clear that meets other users' files or a racing writer. Each is one line and the documented exit
code, never a traceback. CPU only.

CLI cases run ``aot.cli.main`` in-process (an exception escaping it fails the test, as a traceback would
fail a user) unless a real process is the point (resource limits, another uid).
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hostile_util import time_limit

from aot.build.includes import MAX_DEPTH, header_files
from aot.cli.main import main

from conftest import ROOT, repo_env

GOOD_CU = '#include "util.cuh"\nextern "C" __global__ void good_kernel(int* a) { a[0] = ONE; }\n'


def cli(capsys, *argv: str, limit: float = 30) -> tuple[int, str]:
    """Run the CLI in-process; an error is one bounded line on stderr with no traceback. Returns (rc, the
    error line plus what was printed on stdout)."""
    with time_limit(limit):
        rc = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if rc != 0:
        assert err.startswith("aot: error: ") and err.count("\n") == 1, err
        assert len(err) < 1200, f"{len(err)} characters: {err[:300]}..."
    return rc, err.strip() + ("\n" + out if out else "")


def include_matrix(folder: Path, include: str = "inc") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "k.cu").write_text(GOOD_CU)
    m = folder / "m.yaml"
    m.write_text(f"version: 1\nnvrtc:\n  - name: u\n    source: k.cu\n    include_dirs: [{include}]\n"
                 f"    kernels: [good_kernel]\n")
    return m


# ------------------------------------------------------------------------------------ 2. include_dirs
def test_include_dir_inside_the_matrix_folder_still_works(tmp_path, capsys):
    m = include_matrix(tmp_path / "proj")
    (tmp_path / "proj" / "inc" / "sub").mkdir(parents=True)
    (tmp_path / "proj" / "inc" / "util.cuh").write_text("#define ONE 1\n")
    (tmp_path / "proj" / "inc" / "sub" / "more.h").write_text("// more\n")
    (tmp_path / "proj" / "inc" / "notes.txt").write_text("not a header\n")
    assert [rel for rel, _ in header_files(m.parent, "inc", (".h", ".cuh"))] == ["sub/more.h", "util.cuh"]
    rc, _ = cli(capsys, "validate", "--matrix", str(m))
    assert rc == 0


def test_include_dir_symlink_out_of_the_matrix_folder_is_refused(tmp_path, capsys):
    private = tmp_path / "private"
    private.mkdir()
    (private / "util.cuh").write_text("#define ONE 1 // SECRET-TEXT\n")
    m = include_matrix(tmp_path / "proj")
    (tmp_path / "proj" / "inc").symlink_to("../private")
    rc, line = cli(capsys, "validate", "--matrix", str(m))
    assert rc == 2 and "include_dirs" in line and "leaves the matrix folder" in line, line
    assert "SECRET" not in line


def test_include_dir_linked_to_root_is_refused_at_once(tmp_path, capsys):
    m = include_matrix(tmp_path / "proj")
    (tmp_path / "proj" / "inc").symlink_to("/")
    rc, line = cli(capsys, "validate", "--matrix", str(m), limit=5)
    assert rc == 2 and "leaves the matrix folder" in line, line


def test_links_inside_an_include_dir_are_not_followed(tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "stolen.h").write_text("// SECRET\n")
    m = include_matrix(tmp_path / "proj")
    inc = tmp_path / "proj" / "inc"
    inc.mkdir()
    (inc / "util.cuh").write_text("#define ONE 1\n")
    (inc / "stolen.h").symlink_to(outside / "stolen.h")
    (inc / "out").symlink_to(outside)
    (inc / "loop").symlink_to(inc)
    assert [rel for rel, _ in header_files(m.parent, "inc", (".h", ".cuh"))] == ["util.cuh"]


def test_a_thousand_level_nest_is_one_line(tmp_path, capsys):
    m = include_matrix(tmp_path / "proj")
    d = tmp_path / "proj" / "inc"
    d.mkdir()
    fd = os.open(d, os.O_RDONLY)
    try:  # 1,000 levels, made relative to a descriptor (the path would pass PATH_MAX)
        for _ in range(1000):
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)
    try:
        rc, line = cli(capsys, "validate", "--matrix", str(m), limit=10)
        assert rc == 2 and f"nested deeper than {MAX_DEPTH} levels" in line, line
    finally:  # pytest's own clean-up (shutil.rmtree) recurses and would fail on it; rm does not
        subprocess.run(["rm", "-rf", "--", str(d)], check=True)


def test_an_include_dir_with_too_many_entries_stops_early(tmp_path):
    from aot.build.includes import IncludeError
    inc = tmp_path / "inc"
    inc.mkdir()
    for i in range(50):
        (inc / f"f{i}.txt").write_text("")
    with pytest.raises(IncludeError, match="more than 20 entries"):
        header_files(tmp_path, "inc", (".h",), max_entries=20)


# ------------------------------------------------------------------------- 3. deep JSON, every reader
DEEP = b"[" * 2000 + b"]" * 2000
PRODUCER = {"aot": "0", "cuda_cccl": "0", "cuda_major": 13, "nvrtc": "0", "nvjitlink": "0"}


def empty_set(root: Path) -> Path:
    from aot.core.manifest import write_manifest
    root.mkdir(parents=True, exist_ok=True)
    write_manifest(root, producer=PRODUCER, specs={}, artifacts=[], extra={"sms": [90]})
    return root


def test_strict_reader_raises_only_value_error_for_depth():
    from aot.core.format import loads_strict_json
    with pytest.raises(ValueError, match="nested too deeply"):
        loads_strict_json(DEEP)


def test_deep_aot_package_json_in_a_wheel_is_one_line_exit_5(tmp_path, capsys):
    root = empty_set(tmp_path / "set")
    wheel = tmp_path / "pkg-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(root / "manifest.json", "pkg/artifacts/manifest.json")
        z.writestr("pkg/artifacts/aot-package.json", DEEP)
    rc, line = cli(capsys, "verify", "--gpu", str(wheel), "-q")
    assert rc == 5 and "aot-package.json" in line and "nested too deeply" in line, line


def test_deep_manifest_is_one_line_in_verify_inspect_and_merge(tmp_path, capsys):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_bytes(DEEP)
    for argv, codes in ((("verify", str(bad)), (5, 7)), (("inspect", str(bad)), (5,)),
                        (("merge", str(bad), "--out", str(tmp_path / "merged")), (5,))):
        rc, line = cli(capsys, *argv)
        assert rc in codes and "manifest.json" in line, (argv, line)


def test_deep_artifact_header_and_cache_entry_are_refused(tmp_path):
    import struct
    from aot.core import format as fmt
    from aot.core.errors import ArtifactError
    from aot.runtime.jit.cache import ArtifactCache
    data = fmt.MAGIC + struct.pack("<I", len(DEEP)) + DEEP
    with pytest.raises(ArtifactError, match="nested too deeply"):
        fmt.decode(data)
    key = "ab" * 32
    store = ArtifactCache(tmp_path / "cache" / "cccl")
    store.put(key, data)
    with pytest.raises(ArtifactError):
        store.get(key)


def test_a_deep_or_foreign_build_report_is_not_printed(tmp_path):
    from rich.console import Console
    from aot.cli.build_cmds import _print_report_file
    import io
    console = Console(file=io.StringIO())
    for text in (DEEP, b'{"items": 3}', b'{"items": [{"x": 1}], "counts": []}', b"\xff"):
        (tmp_path / "build-report.json").write_bytes(text)
        _print_report_file(tmp_path, console, quiet=False)  # returns quietly


# ------------------------------------------------------------------------------------ 4. a full disk
MORTON_MATRIX = "version: 1\nnvrtc:\n  - {name: morton, source: kernels/morton.cu, kernels: [morton_codes_2d]}\n"
LIMITED = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_FSIZE, ({0}, {0})); "
           "sys.argv = ['aot', *sys.argv[1:]]; runpy.run_module('aot', run_name='__main__')")


@pytest.fixture(scope="module")
def morton_set(tmp_path_factory) -> Path:
    """A one-unit NVRTC set (cubin + PTX for sm_80), built once for this module."""
    root = tmp_path_factory.mktemp("morton")
    m = root / "m.yaml"
    m.write_text(MORTON_MATRIX.replace("kernels/morton.cu", str(ROOT / "aot" / "kernels" / "morton.cu")))
    assert main(["build", "--matrix", str(m), "--sm", "80", "--out", str(root / "set"), "-q", "-j", "1"]) == 0
    return root


def limited(max_bytes: int, *argv: str) -> subprocess.CompletedProcess:
    """``python -m aot ARGV`` with RLIMIT_FSIZE: a write past ``max_bytes`` fails in the kernel with EFBIG
    (Python ignores SIGXFSZ), as a full disk fails with ENOSPC."""
    return subprocess.run([sys.executable, "-c", LIMITED.format(max_bytes), *argv], env=repo_env(),
                          capture_output=True, text=True, timeout=300)


def test_a_failed_write_names_the_file_and_what_aot_was_doing(morton_set, tmp_path, capsys, monkeypatch):
    import aot.core.fs as fs
    real = os.replace

    def full(src, dst, *a, **kw):
        if str(dst).endswith("build-report.json"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(fs.os, "replace", full)
    out = tmp_path / "out"
    rc, line = cli(capsys, "build", "--matrix", str(morton_set / "m.yaml"), "--sm", "80", "--out", str(out),
                   "-q", "-j", "1", limit=120)
    assert rc == 1 and line == f"aot: error: writing {out / 'build-report.json'}: No space left on device"
    assert not list(out.rglob(".tmp-aot-*"))


def test_merge_and_build_past_a_file_size_limit_name_the_file(morton_set, tmp_path):
    merged = tmp_path / "merged"
    proc = limited(2000, "merge", str(morton_set / "set"), "--out", str(merged))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"aot: error: writing {merged}/nvrtc/morton/") and \
        lines[0].endswith(": File too large"), lines[0]
    assert not (merged / "manifest.json").exists()
    out = tmp_path / "out"
    proc = limited(2000, "build", "--matrix", str(morton_set / "m.yaml"), "--sm", "80", "--out", str(out), "-q",
                   "-j", "1")
    assert proc.returncode in (1, 4) and "Traceback" not in proc.stderr, proc.stderr
    assert f"writing {out}/" in proc.stderr and "File too large" in proc.stderr, proc.stderr
    assert not (out / "manifest.json").exists()


# -------------------------------------------------------------------------- 6. cache clear: only ours
OTHER = 4242
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="planting another uid's files needs root")


def plant(path: Path, uid: int | None = None, data: bytes = b"x" * 100) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_bytes(data)
    if uid is not None:
        os.chown(path, uid, uid)
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    monkeypatch.setenv("AOT_CACHE_DIR", str(root))
    return root


@as_root
def test_clear_leaves_and_reports_what_another_user_owns(cache, capsys):
    ours = [plant(cache / "cccl" / "ab" / ("ab" * 32 + ".aot")), plant(cache / "nvrtc" / "x" / "y.bin"),
            plant(cache / "stub" / "d1" / "libcuda.so.1")]
    theirs = [plant(cache / "cccl" / "ab" / ("cd" * 32 + ".aot"), OTHER),
              plant(cache / "cccl" / "ab" / ("cd" * 32 + ".lock"), OTHER, b""),
              plant(cache / "cccl" / "ab" / ".tmp-aot-old", OTHER)]
    foreign_dir = cache / "stub" / "d2"
    plant(foreign_dir / "libcuda.so.1")
    os.chown(foreign_dir, OTHER, OTHER)  # a foreign folder: not entered, even for our file inside
    rc, text = cli(capsys, "cache", "clear")
    assert rc == 1 and "not fully cleared: 4 left" in text, text
    for p in theirs + [foreign_dir]:
        assert p.exists() and str(p) in text, (p, text)
    assert not any(p.exists() for p in ours)
    assert (foreign_dir / "libcuda.so.1").exists()
    assert "owned by uid 4242" in text


@as_root
def test_clear_stale_leaves_another_users_entries_locks_and_temp_files(cache, capsys):
    old = 0  # mtime 1970: an old temp file
    entry = plant(cache / "cccl" / "ab" / ("ab" * 32 + ".aot"), OTHER, b"not an artifact")
    lock = plant(cache / "cccl" / "ab" / ("ab" * 32 + ".lock"), OTHER, b"")
    tmp = plant(cache / "cccl" / "ab" / ".tmp-aot-x", OTHER)
    os.utime(tmp, (old, old))
    mine = plant(cache / "cccl" / "ab" / ("ef" * 32 + ".aot"), None, b"not an artifact either")
    my_tmp = plant(cache / "cccl" / "ab" / ".tmp-aot-y")
    os.utime(my_tmp, (old, old))
    rc, text = cli(capsys, "cache", "clear", "--stale")
    assert rc == 1 and "3 left" in text, text
    assert entry.exists() and lock.exists() and tmp.exists()
    assert not mine.exists() and not my_tmp.exists()


def test_clear_of_a_cache_of_our_own_is_complete(cache, capsys):
    for i in range(20):
        plant(cache / "cccl" / f"{i:02x}" / (f"{i:02x}" * 32 + ".aot"))
    (cache / "cccl" / "00" / "link").symlink_to("/etc/passwd")
    rc, text = cli(capsys, "cache", "clear")
    assert rc == 0 and "cleared: 21 files" in text, text
    assert os.path.exists("/etc/passwd") and not (cache / "cccl").exists()


def test_clear_racing_a_writer_retries_or_names_the_path(cache, capsys):
    """A writer keeps refilling the cache while it is cleared (8 trials): each clear either completes or says
    in one line, with the full path, what a writer kept refilling; never a bare errno."""
    import threading
    from aot.runtime.jit.cache import ArtifactCache
    store = ArtifactCache(cache / "cccl")
    for trial in range(8):
        stop = threading.Event()

        def writer(stop: threading.Event = stop) -> None:
            i = 0
            while not stop.is_set():
                try:
                    store.put(f"{i % 4:02x}" * 32, b"y" * 4096)
                except OSError:
                    pass
                i += 1

        plant(cache / "cccl" / "00" / ("00" * 32 + ".aot"))
        t = threading.Thread(target=writer)
        t.start()
        try:
            rc, text = cli(capsys, "cache", "clear")
        finally:
            stop.set()
            t.join()
        assert rc == 0 or (rc == 1 and str(cache) in text and "Errno" not in text), text


# ------------------------------------------------------------------- 7. no .aot-lock left (issue 22)
def test_finished_build_and_merge_leave_no_lock_file(morton_set, tmp_path, capsys):
    assert (morton_set / "set" / "manifest.json").exists() and not (morton_set / "set" / ".aot-lock").exists()
    rc, _ = cli(capsys, "merge", str(morton_set / "set"), "--out", str(tmp_path / "merged"))
    assert rc == 0 and not (tmp_path / "merged" / ".aot-lock").exists()


LOCKER = """
import os, sys, time
from pathlib import Path
from aot.build.outlock import output_lock
from aot.core.errors import BusyError
out, n, got = Path(sys.argv[1]), int(sys.argv[2]), 0
while got < n:
    try:
        with output_lock(out, "build"):
            fd = os.open(out / "holder", os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # fails if two hold it
            os.close(fd)
            time.sleep(0.0005)
            os.unlink(out / "holder")
            got += 1
    except BusyError:
        time.sleep(0.0002)
"""


def test_removing_the_lock_file_never_lets_two_writers_in(tmp_path):
    """4 processes x 150 lock/unlock cycles on one --out, the file removed at every release: never two
    holders at once (each creates a marker with O_EXCL while it holds the lock), and no lock file after."""
    out = tmp_path / "out"
    out.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", LOCKER, str(out), "150"], env=repo_env(),
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    assert not (out / ".aot-lock").exists() and not (out / "holder").exists()


# ------------------------------------------------------------------------------ 5. bounded echo
HUGE = 1_000_000


@pytest.mark.parametrize("argv", [
    ("build", "--sm", "9" * HUGE),
    ("build", "--sm", "80," + "x" * HUGE),
    ("build", "--only", "x" * HUGE),
    ("build", "--only", "," * HUGE),
    ("build", "--shard", "1/" + "9" * HUGE),
    ("build", "--matrix", "m" * HUGE),
    ("build", "--matrix", "/nonexistent/" + "m" * 200),
    ("build", "--out", "d/" * (HUGE // 2)),
    ("validate", "--matrix", "m" * HUGE),
    ("verify", "x" * HUGE),
    ("inspect", "x" * HUGE),
    ("merge", "x" * HUGE, "--out", "y" * HUGE),
    ("verify", "--only", "x" * HUGE, "."),
], ids=lambda a: " ".join(x[:12] for x in a))
def test_errors_quoting_huge_arguments_are_bounded(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, line = cli(capsys, *argv, "-q" if argv[0] in ("build", "merge") else "-v", limit=60)
    assert rc != 0 and len(line) < 1200
