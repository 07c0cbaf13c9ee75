"""numba-cuda across releases: the release table drives the internals aot calls (fast, faked on the installed
release), and the example's kernels built under one real release attach under every other one (slow; needs one
environment per release, named in ``AOT_NUMBA_RELEASE_ENVS``: ``.ci/numba_releases.py`` does the work)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba.cuda")

from conftest import repo_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: Python executables, one numba-cuda release each (os.pathsep-separated); the first and the last also build.
ENVS = [p for p in os.environ.get("AOT_NUMBA_RELEASE_ENVS", "").split(os.pathsep) if p]


@pytest.mark.parametrize("release, key, rebuild", [
    ("0.23.0", (9, 0), set()),
    ("0.24.0", (9, 0, ""), set()),
    ("0.28.1", (9, 0, ""), {"shared_memory_carveout"}),
    ("0.30.2", (9, 0, ""), {"shared_memory_carveout", "launch_config_sensitive"}),
])
def test_the_release_row_picks_the_device_key_and_the_rebuild_keywords(monkeypatch, release, key, rebuild):
    """What each range's code library and ``_Kernel._rebuild`` take (read from the releases' sources; the slow
    test below checks them against each installed release): here the installed release is faked."""
    from numba.cuda.dispatcher import _Kernel
    from cccl_patches import numba_cuda as nc
    monkeypatch.setattr(nc, "installed_version", lambda: release)
    assert nc.device_key((9, 0)) == key
    seen: list[dict] = []
    real = _Kernel._rebuild.__func__

    def spy(cls, **kw):
        seen.append(kw)
        return real(cls, **kw)
    monkeypatch.setattr(_Kernel, "_rebuild", classmethod(spy))

    class Dispatcher:
        targetoptions = {"fastmath": False, "opt": True}
        py_func = staticmethod(lambda out: None)
    kernel = nc.rebuild_kernel(Dispatcher(), "void(float32[::1])", "k", lambda cc: None)
    base = {"cooperative", "name", "signature", "codelibrary", "debug", "lineinfo", "call_helper", "extensions"}
    assert set(seen[0]) == base | rebuild and kernel.objectmode is False


@pytest.mark.slow
@pytest.mark.skipif(len(ENVS) < 2, reason="AOT_NUMBA_RELEASE_ENVS names fewer than two numba-cuda environments")
def test_kernels_built_under_one_release_attach_under_every_other(tmp_path):
    cmd = [sys.executable, str(ROOT / ".ci/numba_releases.py"), "--out", str(tmp_path), "--build", ENVS[0],
           "--build", ENVS[-1]]
    for env in ENVS:
        cmd += ["--attach", env]
    r = subprocess.run(cmd, env=repo_env(), capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0 and "RESULT PASS" in r.stdout, r.stdout[-4000:] + r.stderr[-2000:]
    assert r.stdout.count("attached under") == 2 * len(ENVS)
