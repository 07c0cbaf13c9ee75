"""One artifact of a stateful ``select`` serves different masks in one process (issue 20), on the GPU.

The gate set's ``gate_state_mask_select`` (a lambda ``mask[i] != 0`` over the indices) and
``gate_cpp_mask_select`` (the same as a C++ operator reading the mask through its state pointer) are loaded
once each from the packaged artifacts, with aot's stand-in NVRTC / nvJitLink forced (nothing can be
compiled), and called with two different masks of different lengths at their own live addresses, and the
first mask again. Every result must equal numpy's ``flatnonzero``. Run on the lent GPU machine::

    AOT_GATE_ARTIFACTS=.gpu/gate pytest -m gpu tests/test_gpu_state.py

(the gate set: ``PYTHONPATH=tests/data/gate python -m aot build --matrix tests/data/gate/build_matrix.yaml
--sm 90 --out .gpu/gate`` on the CPU host).
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
from conftest import ROOT

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(native_sm() is None, reason="needs a CUDA GPU and driver")]
GATE_ARTIFACTS = Path(os.environ.get("AOT_GATE_ARTIFACTS", ROOT / ".gpu" / "gate"))

TWO_MASKS = textwrap.dedent("""
    import json, sys
    import numpy as np
    from aot.runtime.loader import lean
    lean.prepare()                                  # stand-ins before anything touches CUDA libraries
    import cupy as cp
    from aot.runtime.loader.registry import Registry
    reg = Registry(sys.argv[1])
    rng = np.random.default_rng(20)
    masks = [(rng.random(100_003) < 0.3).astype(np.uint8), (rng.random(200_006) < 0.7).astype(np.uint8)]
    masks.append(masks[0])                          # the first again, after the second
    out = {}
    for spec in ("gate_state_mask_select", "gate_cpp_mask_select"):
        select = reg.cccl(spec)
        rows = []
        for h_mask in masks:
            d_mask = cp.asarray(h_mask)
            n = h_mask.size
            # host-made buffers: CuPy compiles its fill kernels with NVRTC, which the stand-ins refuse
            d_out, d_count = cp.asarray(np.full(n, -1, np.int32)), cp.asarray(np.zeros(1, np.int64))
            call = lambda t: select(temp_storage=t, d_in=0, d_out=d_out, d_num_selected_out=d_count,
                                    num_items=n, state={"mask": d_mask})
            nbytes = call(None)
            call(cp.empty(max(int(nbytes or 0), 1), np.uint8))
            count = int(d_count.get()[0])
            want = np.flatnonzero(h_mask).astype(np.int32)
            rows.append({"n": n, "address": int(d_mask.data.ptr), "count": count, "want": int(want.size),
                         "equal": bool(count == want.size and np.array_equal(d_out.get()[:count], want))})
        st = reg.status()[spec]
        out[spec] = {"same_object": reg.cccl(spec) is select, "source": st.source, "rows": rows}
    out["calls"] = lean.stub_calls()
    print(json.dumps(out))
""")


def test_one_stateful_select_artifact_serves_two_masks():
    if not (GATE_ARTIFACTS / "manifest.json").exists():
        pytest.skip(f"no gate artifact set at {GATE_ARTIFACTS}")
    env = dict(os.environ, AOT_FORCE_STUB_TOOLCHAIN="1")
    r = subprocess.run([sys.executable, "-c", TWO_MASKS, str(GATE_ARTIFACTS)], env=env, capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    print(json.dumps(out, indent=1))
    for spec in ("gate_state_mask_select", "gate_cpp_mask_select"):
        res = out[spec]
        assert res["source"] == "packaged" and res["same_object"], res
        rows = res["rows"]
        assert rows[0]["address"] != rows[1]["address"] and rows[0]["n"] != rows[1]["n"]
        assert all(row["equal"] for row in rows), rows
    assert not any(out["calls"].values()), out["calls"]  # nothing was compiled
