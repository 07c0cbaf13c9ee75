"""What a Triton launch costs on the host before the GPU on a driverless host, aot-served against Triton's warm cache
and cold: examples/triton-mypkg built here (``aot build --sm 90``), then, in fresh processes, for seven packaged
specialisations, ``kernel.warmup(...)`` (Triton's own ``JITFunction.run`` up to its compile or cache hit; a stand-in
driver names an SM 90 device, nothing launches) and then Triton's own ``CudaLauncher`` of the compiled kernel (its C
launcher looked up in its cache, served by aot or built with the host compiler; loaded against a stub
``libcuda.so.1``, as nothing calls it). The first includes Triton's one-off ``triton_key()`` (hashing its build);
the others are the per-kernel cost, as a GPU's first call of each pays it on top of the module load and launch.

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
sys.path.insert(0, str(ROOT))
EXAMPLE = ROOT / "examples" / "triton-mypkg"
ONE = r'''
import json, os, sys, time
sys.setdlopenflags(os.RTLD_LAZY | os.RTLD_GLOBAL)  # the stub libcuda.so.1 defines nothing: no call is made
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
from triton.backends.nvidia import driver as nv
f32, f16 = tl.float32, tl.float16
ms = []
for call in (lambda: k.add.warmup(T(f32), T(f32), T(f32), 1 << 20, BLOCK=1024, grid=(1,)),
             lambda: k.add.warmup(T(f32), T(f32), T(f32), 1000, BLOCK=1024, grid=(1,)),
             lambda: k.add.warmup(T(f32), T(f32), T(f32), 1 << 20, BLOCK=256, grid=(1,)),
             lambda: k.add.warmup(T(f16), T(f16), T(f16), 1 << 20, BLOCK=1024, grid=(1,)),
             lambda: k.scale_shift.warmup(T(f32), T(f32), 1 << 20, BLOCK=1024, grid=(1,)),
             lambda: k.softmax_rows.warmup(T(f32), T(f32), 1024, 1024, BLOCK=1024, num_warps=4, grid=(1,)),
             lambda: k.sum_rows.warmup(T(f32), T(f32), 1024, 1024, BLOCK=1024, num_warps=8, grid=(1,))):
    t = time.perf_counter()
    c = call()
    t1 = time.perf_counter()
    nv.CudaLauncher(c.src, c.metadata)
    ms.append([(t1 - t) * 1e3, (time.perf_counter() - t1) * 1e3])
print(json.dumps(ms))
'''
NAMES = ("add.0 (first: triton_key)", "add.1", "add.2", "add.3", "scale_shift", "softmax", "sum_rows")


def _run(site: Path, cache: Path) -> list[list[float]]:
    stub = str(site.parent / "stub")
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache), PYTHONPATH=f"{site}{os.pathsep}{ROOT}",
               LD_LIBRARY_PATH=stub, TRITON_LIBCUDA_PATH=stub)
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
        from aot.build.triton_launcher import _stub  # the benchmark runs from the checkout
        (work / "stub").mkdir()
        _stub(str(work / "stub"), [])
        _run(work / "jit", work / "warm")  # Triton's cache, warm for every warm run (kernels and launchers)
        rows: dict[str, list[list[list[float]]]] = {"aot": [], "warm": [], "cold": []}
        for i in range(n):
            rows["aot"].append(_run(work / "aot", work / f"a{i}"))
            rows["warm"].append(_run(work / "jit", work / "warm"))
            rows["cold"].append(_run(work / "jit", work / f"c{i}"))
        print(f"host side of a first call in ms (warmup + CudaLauncher), median of {n} fresh processes; aot: an "
              f"empty Triton cache")
        print("| call | aot | Triton warm | Triton cold | aot: warmup + launcher |")
        print("|---|---:|---:|---:|---:|")
        for j, name in enumerate(NAMES):
            med = [statistics.median(sum(r[j]) for r in rows[m]) for m in ("aot", "warm", "cold")]
            parts = [statistics.median(r[j][p] for r in rows["aot"]) for p in (0, 1)]
            print(f"| {name} | " + " | ".join(f"{v:.1f}" for v in med) + f" | {parts[0]:.1f} + {parts[1]:.1f} |")
        rest = [statistics.median(sum(sum(c) for c in r[1:]) for r in rows[m]) for m in ("aot", "warm", "cold")]
        print("| add.1 to sum_rows (the 6 after the first) | " + " | ".join(f"{v:.1f}" for v in rest) + " | |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
