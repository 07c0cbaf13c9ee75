"""examples/numba-mypkg on the GPU (issue 31): its @cuda.jit kernels launched through the library's own dispatchers
with numba-cuda's compiles counted, its warmup, and the gate (``aot verify --gpu`` passes the package and FAILS a
mutant whose kernel body changed after the build under the same key). Each check runs in a fresh process.

The package comes from ``AOT_GPU_NUMBA_SITE`` (a folder where its wheel is installed, as .ci/gpu/numba.sh gets it),
else it is bundled here for this GPU's SM (``aot.package.bundle``, as the hatchling hook does). numba-cuda 0.30.4's
own JIT needs numpy < 2.5 (the ``numba`` extra's bound); with a newer numpy the JIT checks skip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from aot.build.toolchain import native_sm
from conftest import ROOT, repo_env

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(native_sm() is None, reason="needs a CUDA GPU and driver")]
pytest.importorskip("numba.cuda")

EXAMPLE = ROOT / "examples" / "numba-mypkg"
CHECKS = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["tool"]["aot"]["checks"]
JIT_OK = tuple(int(x) for x in np.__version__.split(".")[:2]) < (2, 5)

#: Run in a fresh process with ``numba_mypkg`` importable: counts numba-cuda's kernel compiles (every JIT of a
#: kernel calls dispatcher.compile_cuda), launches every kernel as the library does, compares with numpy.
PROBE = r'''
import json, sys
import numpy as np
import numba.cuda.dispatcher as d
compiles = []
real = d.compile_cuda
d.compile_cuda = lambda *a, **k: (compiles.append(a[0].__name__), real(*a, **k))[1]
from numba import cuda
import numba_mypkg
from numba_mypkg import kernels as k
caches = lambda: sorted(type(getattr(k, n)._cache).__name__ for n in ("axpy", "scale_inplace", "smooth", "block_sum"))
out = {"at_import": caches()}
if sys.argv[1] == "warm":
    numba_mypkg.registry.request_warmup()
    out["cold"] = numba_mypkg.registry.ensure_warm(60)
    out["kernels"] = {n: s.kernels for n, s in numba_mypkg.registry.status().items()}
    out["overloads_before_launch"] = sum(len(getattr(k, n).overloads) for n in ("axpy", "scale_inplace", "smooth", "block_sum"))
rng = np.random.default_rng(0)
n, TPB = 100_003, 256
g = (n + TPB - 1) // TPB
res = {}
for dt in (np.float32, np.float64):
    x, y = rng.uniform(-1, 1, n).astype(dt), rng.uniform(-1, 1, n).astype(dt)
    o = cuda.device_array(n, dt)
    k.axpy[g, TPB](o, cuda.to_device(x), cuda.to_device(y), dt(2.5))
    res[f"axpy_{dt.__name__}"] = bool(np.allclose(o.copy_to_host(), dt(2.5) * x + y, rtol=1e-6, atol=1e-6))
x = rng.uniform(-1, 1, n).astype(np.float32)
dx = cuda.to_device(x)
k.scale_inplace[64, 128](dx, np.float32(3.0), np.int64(n))
res["scale_inplace"] = bool(np.allclose(dx.copy_to_host(), x * np.float32(3.0), rtol=1e-6))
x = rng.uniform(-1, 1, n)
o = cuda.device_array(n, np.float64)
k.smooth[g, TPB](o, cuda.to_device(x), -0.5, 0.5)
t = np.clip(x + 0.5, 0, 1)
res["smooth"] = bool(np.allclose(o.copy_to_host(), t * t * (3 - 2 * t), rtol=1e-12, atol=1e-12))
xi = rng.integers(-1000, 1000, n).astype(np.int64)
o = cuda.device_array(g, np.int64)
k.block_sum[g, TPB](o, cuda.to_device(xi))
res["block_sum"] = bool((o.copy_to_host() == np.concatenate([xi, np.zeros(g * TPB - n, np.int64)]).reshape(-1, TPB).sum(1)).all())
out["packaged"], out["packaged_compiles"], out["attached"] = res, list(compiles), caches()
if sys.argv[1] == "jit":  # a signature that was not packaged: axpy on int32
    xi = np.arange(1000, dtype=np.int32)
    o = cuda.device_array(1000, np.int32)
    k.axpy[4, 256](o, cuda.to_device(xi), cuda.to_device(xi), np.int32(3))
    out["jit_right"] = bool((o.copy_to_host() == 4 * xi).all())
    out["jit_compiles"] = compiles[len(out["packaged_compiles"]):]
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder holding ``numba_mypkg`` with its artifact folder (manifest, artifacts, aot-package.json)."""
    given = os.environ.get("AOT_GPU_NUMBA_SITE")
    if given:
        return Path(given)
    if not JIT_OK:  # building here compiles with numba-cuda, whose 0.30.4 needs np.row_stack
        pytest.skip(f"numpy {np.__version__}: numba-cuda 0.30.4 cannot compile here (np.row_stack is gone); "
                    f"set AOT_GPU_NUMBA_SITE to an installed numba_mypkg (.ci/gpu_checks.sh does)")
    from aot.package.bundle import bundle
    from aot.package.config import load_config
    tmp = tmp_path_factory.mktemp("numba-site")
    shutil.copytree(EXAMPLE / "numba_mypkg", tmp / "numba_mypkg", ignore=shutil.ignore_patterns("artifacts", "__pycache__"))
    sys.path.insert(0, str(EXAMPLE))
    try:
        bundle(load_config(EXAMPLE), tmp / "numba_mypkg" / "artifacts", sm=str(native_sm()), work=tmp / "work",
               require_pins=False)
    finally:
        sys.path.remove(str(EXAMPLE))
    shutil.rmtree(tmp / "work")
    return tmp


def _env(site: Path) -> dict:
    env = repo_env()
    env["PYTHONPATH"] = f"{site}{os.pathsep}{env.get('PYTHONPATH', '')}"
    return env


def _probe(site: Path, mode: str, tmp_path: Path) -> dict:
    r = subprocess.run([sys.executable, "-c", PROBE, mode], env=_env(site), cwd=tmp_path, capture_output=True, text=True,
                       timeout=100)
    assert r.returncode == 0 and r.stdout.strip(), r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_packaged_kernels_launch_through_their_dispatchers_with_zero_compiles(site, tmp_path):
    got = _probe(site, "packaged", tmp_path)
    assert got["attached"] == ["_PackagedCache"] * 4, got  # attached at numba-cuda's first compile
    assert "_PackagedCache" not in got["at_import"], got  # not at import (issue 42: numba_lazy)
    assert got["packaged"] == dict.fromkeys(["axpy_float32", "axpy_float64", "scale_inplace", "smooth", "block_sum"],
                                            True), got
    assert got["packaged_compiles"] == [], got


@pytest.mark.skipif(not JIT_OK, reason=f"numpy {np.__version__}: numba-cuda 0.30.4's JIT fails (np.row_stack is "
                                       f"gone); the numba extra bounds numpy < 2.5")
def test_an_unpackaged_signature_jit_compiles_once_and_is_right(site, tmp_path):
    got = _probe(site, "jit", tmp_path)
    assert got["packaged_compiles"] == [] and all(got["packaged"].values()), got
    assert got["jit_compiles"] == ["axpy"] and got["jit_right"] is True, got


def test_warmup_attaches_every_packaged_kernel(site, tmp_path):
    got = _probe(site, "warm", tmp_path)
    assert got["cold"] == [], got  # attached by the warmup (their cubins load at the first launch)
    assert got["kernels"] == dict.fromkeys(["axpy.0", "axpy.1", "block_sum", "scale_inplace", "smooth"], 0), got
    assert all(got["packaged"].values()) and got["packaged_compiles"] == [], got


def _verify(site: Path, tmp_path: Path, name: str, *extra: str) -> tuple[int, list[dict], str]:
    out = tmp_path / f"{name}.json"
    r = subprocess.run([sys.executable, "-m", "aot", "verify", "--gpu", "--quiet", "--package", "numba_mypkg", "--json",
                        str(out), *extra], env=_env(site), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    rows = json.loads(out.read_text()) if out.is_file() else []
    return r.returncode, rows, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.skipif(not JIT_OK, reason=f"numpy {np.__version__}: the mutant is compiled here by numba-cuda 0.30.4, "
                                       f"which needs np.row_stack (.ci/gpu/numba.sh runs the gate with a mutant "
                                       f"built on the build host)")
def test_the_gate_passes_the_package_and_fails_a_mutant_kernel_body(site, tmp_path):
    rc, rows, log = _verify(site, tmp_path, "base")
    assert rc == 0 and rows, log
    assert {r["spec"] for r in rows} == set(CHECKS) and all(r["status"] == "ok" for r in rows), log
    assert {r["kind"] for r in rows} >= {"cubin", "ptx"}, log  # the PTX fallback ran too
    mutant = tmp_path / "mutsite"
    shutil.copytree(site / "numba_mypkg", mutant / "numba_mypkg", ignore=shutil.ignore_patterns("artifacts"))
    r = subprocess.run([sys.executable, str(ROOT / ".ci" / "gpu" / "numba_mutant.py"), "--project", str(EXAMPLE),
                        "--base", str(site / "numba_mypkg" / "artifacts"), "--spec", "axpy.0", "--edit",
                        "a * x[i] + y[i]", "a * x[i] - y[i]", "--out", str(mutant / "numba_mypkg" / "artifacts")],
                       env=repo_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    rc, rows, log = _verify(mutant, tmp_path, "mutant", "--only", "axpy.0")
    assert rc != 0 and rows and all(r["spec"] == "axpy.0" and r["status"] == "failed" for r in rows), log
    assert "Not equal to tolerance" in rows[0]["detail"], rows[0]  # the check ran the mutant and caught it
