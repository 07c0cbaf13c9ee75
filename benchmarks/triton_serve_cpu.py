"""What a Triton launch's compile step costs on a driverless host, aot-served against Triton's warm cache and cold:
examples/triton-mypkg built here (``aot build --sm 90``), then, in fresh processes, ``kernel.warmup(...)`` (Triton's
own ``JITFunction.run`` up to its compile or cache hit; a stand-in driver names an SM 90 device, nothing launches)
for three kernels. The first includes Triton's one-off ``triton_key()`` (hashing its build); the others are the
per-kernel cost. No launcher is compiled (nothing launches): the GPU check measures whole first calls.

    python benchmarks/triton_serve_cpu.py [N]      (N fresh processes per mode, default 5)
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "triton-mypkg"
ONE = r'''
import json, time
t0 = time.perf_counter()
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver
class Driver:
    def get_current_device(self): return 0
    def get_current_stream(self, d): return 0
    def get_current_target(self): return GPUTarget("cuda", 90, 32)
driver.set_active(Driver())
class T:
    def __init__(self, dt): self.dtype = dt
    def data_ptr(self): return 1 << 20
import triton_mypkg
from triton_mypkg import kernels as k
f32 = tl.float32
ms = []
for call in (lambda: k.add.warmup(T(f32), T(f32), T(f32), 1 << 20, BLOCK=1024, grid=(1,)),
             lambda: k.scale_shift.warmup(T(f32), T(f32), 1 << 20, BLOCK=1024, grid=(1,)),
             lambda: k.softmax_rows.warmup(T(f32), T(f32), 1024, 1024, BLOCK=1024, num_warps=4, grid=(1,))):
    t = time.perf_counter(); call(); ms.append((time.perf_counter() - t) * 1e3)
print(json.dumps(ms))
'''


def _run(site: Path, cache: Path) -> list[float]:
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache), PYTHONPATH=f"{site}{os.pathsep}{ROOT}")
    out = subprocess.run([sys.executable, "-c", ONE], env=env, capture_output=True, text=True, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(n: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="aot-triton-bench-"))
    try:
        for s in ("aot", "jit"):
            shutil.copytree(EXAMPLE / "triton_mypkg", work / s / "triton_mypkg",
                            ignore=shutil.ignore_patterns("__pycache__", "artifacts"))
        subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(EXAMPLE / "build_matrix.yaml"), "--sm",
                        "90", "--jobs", "1", "--out", str(work / "aot" / "triton_mypkg" / "artifacts"), "--quiet"],
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True, capture_output=True, timeout=900)
        _run(work / "jit", work / "warm")  # Triton's cache, warm for every warm run
        rows: dict[str, list[list[float]]] = {"aot": [], "warm": [], "cold": []}
        for i in range(n):
            rows["aot"].append(_run(work / "aot", work / f"a{i}"))
            rows["warm"].append(_run(work / "jit", work / "warm"))
            rows["cold"].append(_run(work / "jit", work / f"c{i}"))
        print(f"warmup (compile step) in ms, median of {n} fresh processes; aot: an empty Triton cache")
        print("| kernel | aot | Triton warm | Triton cold |")
        print("|---|---:|---:|---:|")
        for j, name in enumerate(("add (first: triton_key)", "scale_shift", "softmax_rows")):
            med = [statistics.median(r[j] for r in rows[m]) for m in ("aot", "warm", "cold")]
            print(f"| {name} | " + " | ".join(f"{v:.1f}" for v in med) + " |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
