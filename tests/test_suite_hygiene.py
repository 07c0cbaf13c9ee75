"""The suite's own hygiene (issue 37): caches of the processes it starts stay inside the session folder, and its
end-of-run temp check fails on what the run left, never on another run's files of the same user."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import conftest


def test_caches_of_subprocesses_stay_in_the_session_folder(tmp_path):
    """Before: pip's wheel cache took 5 example wheels into ~/.cache/pip/wheels on every run."""
    session = Path(conftest._SYSTEM_TMP["session"]).resolve()
    code = ("import os, json; print(json.dumps({k: os.environ.get(k) for k in "
            "('XDG_CACHE_HOME', 'PIP_CACHE_DIR', 'UV_CACHE_DIR', 'NUMBA_CACHE_DIR', 'CUPY_CACHE_DIR')}))")
    import json
    seen = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                     check=True).stdout)
    for var, value in seen.items():
        assert value is not None and session in Path(value).resolve().parents, (var, value)
    pip = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True)
    if pip.returncode == 0:  # pip itself agrees
        assert session in Path(pip.stdout.strip()).resolve().parents, pip.stdout


def test_the_temp_check_fails_on_the_runs_leftovers_only(tmp_path):
    """A file another process of the same user makes in the system temp dir (another job's
    ``numba_cuda_mlir_error_*.log``) is named, not a failure; one left in the run's TMPDIR fails the run."""
    system, redirected = tmp_path / "system", tmp_path / "redirected"
    system.mkdir()
    redirected.mkdir()
    before = conftest._tmp_listing(system)
    (system / "numba_cuda_mlir_error_x.log").write_text("another job's\n")
    assert conftest.tmp_verdict(system, before, redirected) == ([], ["numba_cuda_mlir_error_x.log"])
    (redirected / "tmpabc").mkdir()
    assert conftest.tmp_verdict(system, before, redirected)[0] == ["tmpabc"]
    assert os.environ["TMPDIR"] == str(conftest._SYSTEM_TMP["tmp"])  # the folder the real check reads
