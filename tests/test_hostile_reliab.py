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
    """Run the CLI in-process; an error is one bounded line on stderr with no traceback. Returns (rc, line)."""
    with time_limit(limit):
        rc = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    if rc != 0:
        assert err.startswith("aot: error: ") and err.count("\n") == 1, err
        assert len(err) < 1200, f"{len(err)} characters: {err[:300]}..."
    return rc, err.strip()


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
    rc, line = cli(capsys, "validate", "--matrix", str(m), limit=10)
    assert rc == 2 and f"nested deeper than {MAX_DEPTH} levels" in line, line


def test_an_include_dir_with_too_many_entries_stops_early(tmp_path):
    from aot.build.includes import IncludeError
    inc = tmp_path / "inc"
    inc.mkdir()
    for i in range(50):
        (inc / f"f{i}.txt").write_text("")
    with pytest.raises(IncludeError, match="more than 20 entries"):
        header_files(tmp_path, "inc", (".h",), max_entries=20)
