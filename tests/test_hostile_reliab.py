"""Issue 23, items 2-6: hostile include dirs, deep JSON everywhere, a full disk, unbounded echo, and a
cache clear that meets other users' files or a racing writer. Each is one line and the documented exit
code, never a traceback. CPU only.

CLI cases run ``aot.cli.main`` in-process (an exception escaping it fails the test, as a traceback would
fail a user) unless a real process is the point (resource limits, another uid).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
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
    from aot.runtime.cache import ArtifactCache
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
