"""examples/adopt-mypkg on the GPU as pytest (issue 28; the same checks as .ci/gpu/adopt.sh, from a checkout
instead of wheels): its matrix built here for this GPU into the package's ``artifacts/`` folder, then, each in
a fresh process (.ci/gpu/adopt_check.py): every kernel through the library's unchanged launch path and through
``Program.compile(cache=aot.program_cache(...))`` equals numpy with 0 NVRTC calls; a source the package does
not carry compiles once, and the next process reads it from the user cache (0 NVRTC calls)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from aot.build.toolchain import native_sm
from conftest import ROOT, repo_env

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(native_sm() is None, reason="needs a CUDA GPU and driver")]

EXAMPLE = ROOT / "examples" / "adopt-mypkg"
CHECK = ROOT / ".ci" / "gpu" / "adopt_check.py"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A folder holding ``adopt_mypkg`` with its artifacts for this GPU (as its wheel installs it)."""
    from aot.build.builder import build
    from aot.build.isolated import expose_build_env_toolkit
    from aot.build.matrix import load_matrix
    expose_build_env_toolkit()
    site = tmp_path_factory.mktemp("adopt-site")
    shutil.copytree(EXAMPLE / "adopt_mypkg", site / "adopt_mypkg")
    sys.path.insert(0, str(EXAMPLE))
    try:
        specs = load_matrix(EXAMPLE / "build_matrix.yaml").specs
    finally:
        sys.path.remove(str(EXAMPLE))
    build(specs, [native_sm()], site / "adopt_mypkg" / "artifacts", jobs=2)
    return site


def _check(site, cache, *args):
    env = repo_env(AOT_CACHE_DIR=str(cache))
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    r = subprocess.run([sys.executable, str(CHECK), *args], env=env, capture_output=True, text=True, timeout=300,
                       cwd=site)
    assert r.stdout.strip(), r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), r


def test_packaged_through_both_paths_with_no_nvrtc_call(installed, tmp_path):
    got, r = _check(installed, tmp_path / "cache", "packaged")
    assert all(got["results"].values()), got
    assert got["nvrtc_calls"] == 0 and got["program_cache"]["packaged"] == 4, got
    assert r.returncode == 0, got


def test_unpackaged_source_compiles_once_then_the_next_process_reads_the_user_cache(installed, tmp_path):
    first, _ = _check(installed, tmp_path / "cache", "unpackaged", "t28", "1")
    assert first["ok"] and first["nvrtc_calls"] == 1 and first["served_from"] == "jit", first
    second, _ = _check(installed, tmp_path / "cache", "unpackaged", "t28", "0")
    assert second["ok"] and second["nvrtc_calls"] == 0 and second["served_from"] == "cache", second
