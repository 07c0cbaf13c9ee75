"""The runtime-only install on a GPU (issue 11): with aot's stand-in NVRTC / nvJitLink / cudart forced
(``AOT_FORCE_STUB_TOOLCHAIN=1``), every packaged artifact loads, runs and matches numpy, and the stand-ins
count zero calls; a spec with no fitting artifact is one ToolchainError naming the spec, the SM and the
extra. Run on the lent GPU machine: ``AOT_GPU_ARTIFACTS=DIR pytest -m gpu tests/test_gpu_lean.py``
(default DIR: .gpu/default, as tests/test_gpu_loader.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aot.build.toolchain import native_sm

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(native_sm() is None, reason="needs a CUDA GPU and driver")]


RUN_ALL = textwrap.dedent("""
    import json, re, sys
    from aot.runtime.loader import lean as _lean
    st = _lean.prepare()                      # stand-ins in place before anything touches CUDA libraries
    from aot.runtime.loader.registry import Registry
    from aot.verify.gpu import verify_gpu
    reg = Registry(sys.argv[1])
    rows = verify_gpu(reg)
    maps = open("/proc/self/maps").read()
    real = sorted({l.split()[-1] for l in maps.splitlines()
                   if re.search(r"/lib(nvrtc|nvJitLink)[^/]*\\.so", l) and "aot-stand-ins" not in l
                   and "cccl_patches" not in l})
    print(json.dumps({"rows": [[r.spec, r.kind, r.sm, r.source, r.ok, r.detail] for r in rows],
                      "stand_ins": sorted(st.stand_ins), "calls": _lean.stub_calls(), "real_mapped": real}))
""")

NO_FIT = textwrap.dedent("""
    import json, sys, warnings
    from aot.core.errors import ToolchainError
    from aot.runtime.loader.registry import Registry
    warnings.simplefilter("ignore")
    reg = Registry(sys.argv[1])
    try:
        reg.cccl(sys.argv[2])
        print(json.dumps({"error": None}))
    except ToolchainError as e:
        print(json.dumps({"error": str(e)}))
""")


def _run(code: str, *args: str, cache: Path) -> dict:
    env = dict(os.environ, AOT_FORCE_STUB_TOOLCHAIN="1", AOT_CACHE_DIR=str(cache))
    r = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=540, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_every_packaged_spec_runs_and_never_calls_the_stand_ins(gpu_artifacts, tmp_path):
    out = _run(RUN_ALL, str(gpu_artifacts), cache=tmp_path / "cache")
    rows = out["rows"]
    assert rows, "no artifact fits this GPU"
    failed = [r for r in rows if not r[4]]
    assert not failed, failed
    assert all(r[3] == "packaged" for r in rows), rows
    specs = json.loads((gpu_artifacts / "manifest.json").read_text())["specs"]
    assert {r[0] for r in rows} == set(specs)  # every spec of the set, each from a packaged artifact
    assert out["stand_ins"] == ["cudart", "nvJitLink", "nvrtc"], out["stand_ins"]
    assert out["real_mapped"] == [], out["real_mapped"]
    assert out["calls"] == {"nvrtc": 0, "nvJitLink": 0, "cudart": 0}, out["calls"]
    print(f"{len(rows)} artifacts ran with stand-ins; stand-in calls {out['calls']}")


def test_no_fitting_artifact_without_toolkit_is_one_error(gpu_artifacts, tmp_path):
    sm = native_sm()
    for p in (gpu_artifacts / "cccl" / "reduce_sum_f64").glob("*.aot"):
        p.unlink()
    out = _run(NO_FIT, str(gpu_artifacts), "reduce_sum_f64", cache=tmp_path / "cache")
    err = out["error"]
    assert err and "reduce_sum_f64" in err and f"sm_{sm}" in err and "[jit]'" in err, err
