"""Issue 30's red-team cases on a GPU (branch i30-harden): `verify --gpu` of a foreign set imports nothing
its manifest names, and compile errors print no `Program.__dealloc__` tracebacks.

    python .ci/gpu/foreign_set.py prepare OUT   # here (no GPU): builds OUT/set for sm_90 (one C++ operator spec)
    python .ci/gpu/foreign_set.py check OUT     # on the GPU host: prints one JSON line, exit 0 when all hold

`check` runs `aot verify --gpu` on OUT/set three ways from OUT (an evilmod.py there and in the set): without
--matrix/--package (the row must be "loaded, not executed" and evilmod never imported), with --matrix (the
reference runs: "ok"), then `aot build --jobs 2 --keep-going` of two bad C++ operators and a bad NVRTC unit
(no "Exception ignored" in its output).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TWICE_CU = 'extern "C" __device__ void twice(void* a, void* r) { *(float*)r = *(float*)a * 2.0f; }\n'
EVIL = "import pathlib\npathlib.Path('PWNED').write_text('imported')\n\ndef twice(x):\n    return x * 2\n"
MATRIX = """version: 1
cccl:
  - {name: evil, algorithm: unary_transform, dtype: float32,
     op: {cpp: ops/twice.cu, function: twice, reference: "evilmod:twice"}}
"""
BAD = """version: 1
cccl:
  - {name: badop, algorithm: unary_transform, dtype: float32, op: {cpp: ops/bad.cu, function: twice}}
  - {name: badop2, algorithm: unary_transform, dtype: float64, op: {cpp: ops/bad.cu, function: twice}}
nvrtc:
  - {name: badunit, source: bad.cu, kernels: [k]}
"""


def aot(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aot", *argv], cwd=cwd, capture_output=True, text=True, timeout=900)


def prepare(out: Path) -> None:
    (out / "ops").mkdir(parents=True, exist_ok=True)
    (out / "ops" / "twice.cu").write_text(TWICE_CU)
    (out / "ops" / "bad.cu").write_text('extern "C" __device__ void twice(void* a, void* r) { oops; }\n')
    (out / "bad.cu").write_text('extern "C" __global__ void k(int* a) { oops; }\n')
    (out / "build_matrix.yaml").write_text(MATRIX)
    (out / "bad.yaml").write_text(BAD)
    r = aot("build", "--matrix", "build_matrix.yaml", "--sm", "90", "--jobs", "1", "--out", "set", cwd=out)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (out / "set" / "evilmod.py").write_text(EVIL)
    (out / "evilmod.py").write_text(EVIL)


def check(out: Path) -> int:
    res: dict = {}
    (out / "PWNED").unlink(missing_ok=True)
    # --allow-unchecked: the refused reference leaves the spec unchecked (exit 7 without it, issue 36.3)
    foreign = aot("verify", "--gpu", "set", "--allow-unchecked", "--json", "foreign.json", cwd=out)
    rows = json.loads((out / "foreign.json").read_text()) if (out / "foreign.json").exists() else []
    res["foreign"] = {"rc": foreign.returncode, "status": [r["status"] for r in rows],
                      "imported": (out / "PWNED").exists()}
    own = aot("verify", "--gpu", "set", "--matrix", "build_matrix.yaml", "--json", "own.json", cwd=out)
    rows = json.loads((out / "own.json").read_text()) if (out / "own.json").exists() else []
    res["own_matrix"] = {"rc": own.returncode, "status": [r["status"] for r in rows], "tail": own.stdout[-300:]}
    bad = aot("build", "--matrix", "bad.yaml", "--sm", "90", "--jobs", "2", "--keep-going", "--out", "bad-out",
              cwd=out)
    text = bad.stdout + bad.stderr
    res["bad_build"] = {"rc": bad.returncode, "dealloc_tracebacks": text.count("Exception ignored"),
                        "tracebacks": text.count("Traceback")}
    ok = (res["foreign"]["status"] and set(res["foreign"]["status"]) == {"loaded, not executed"}
          and not res["foreign"]["imported"] and res["foreign"]["rc"] == 0
          and res["own_matrix"]["status"] and set(res["own_matrix"]["status"]) == {"ok"}
          and res["bad_build"]["dealloc_tracebacks"] == 0 and res["bad_build"]["tracebacks"] == 0)
    res["ok"] = bool(ok)
    print(json.dumps(res))
    return 0 if ok else 1


if __name__ == "__main__":
    mode, where = sys.argv[1], Path(sys.argv[2]).resolve()
    if mode == "prepare":
        prepare(where)
    else:
        sys.exit(check(where))
