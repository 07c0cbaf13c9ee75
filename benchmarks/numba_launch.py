"""Steady-state launch cost of a numba-cuda kernel served by aot vs numba-cuda's own JIT kernel (issue 42: 84.8 vs
79.9 µs/launch, 1.06x; target <= 1.01x), side by side, each run a fresh process.

    python benchmarks/numba_launch.py prepare DIR [SM]      # build host: DIR/site/numba_launch_pkg + artifacts
    python3 benchmarks/numba_launch.py run DIR [--launches 2000] [--runs 7] [--profile]   # GPU host

Modes, each in ``--runs`` fresh processes, interleaved (aot, jit, jit+aot, aot, ...):

* ``aot``: the package's kernel attached (``aot.attach_numba``), its packaged cubin served (0 compiles);
* ``jit``: the same kernel, numba-cuda JIT-compiles it (aot never imported);
* ``jit+aot``: numba-cuda's JIT kernel in a process that also imported aot and attached another kernel: what a
  bigger process costs, apart from the kernel object aot builds;
* ``pair``: both in one process: the aot-served ``axpy`` and numba-cuda's own JIT of the same Python function (a
  second ``cuda.jit`` dispatcher of ``axpy.py_func``), launched in alternating blocks. Fresh processes on the lent
  H200 land on fast or slow cores (23-25 µs or 38-45 µs per launch, either way, either mode): a ratio across
  processes measures placement; the per-block ratio in one process measures aot (``pair_ratio``: median over
  blocks and processes).

Each process launches once (compile or load, then synchronize), then ``--launches`` launches back to back on device
arrays allocated before timing, and synchronizes once: µs per launch = that time / launches. It also times the same
with the garbage collector off, and the host side alone (the launch path down to ``kernel.launch``, the launch
replaced by nothing) to tell the dispatcher's Python from the driver's. Prints medians per mode and the ratios to
``jit``; ``--profile`` adds each mode's top functions (cProfile, by own time) over the launches. Writes
``$OUT/numba_launch.json`` when ``OUT`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PKG = "numba_launch_pkg"
#: The checkout this script belongs to: its ``aot`` builds and runs, first on every child's ``PYTHONPATH`` (a
#: venv's installed copy of aot may be another release, whose digests the checkout's attach refuses).
ROOT = Path(__file__).resolve().parents[1]


def tree_env() -> dict[str, str]:
    """This process's environment with this checkout first on ``PYTHONPATH``."""
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), path) if p))
KERNELS = '''\
from numba import cuda


@cuda.jit
def axpy(out, x, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + out[i]


@cuda.jit
def other(out):
    out[0] = 1
'''
SIGNATURES = {"axpy": "void(float32[::1], float32[::1], float32)", "other": "void(float32[::1])"}
MODES = ("aot", "jit", "jit+aot", "pair")
#: Alternating blocks per ``pair`` process (each ``--launches`` launches of one kernel, then of the other).
PAIR_BLOCKS = 10

CHILD = r"""
import cProfile, gc, io, json, pstats, sys, time
mode, site, launches, profile = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
import numpy as np
if not hasattr(np, "row_stack"):  # numba-cuda 0.30.4's JIT overloads it; numpy >= 2.5 dropped it
    np.row_stack = np.vstack
sys.path.insert(0, site)
from numba import cuda
import numba.cuda.dispatcher as d
compiles = []
real = d.compile_cuda
d.compile_cuda = lambda *a, **k: (compiles.append(1), real(*a, **k))[1]
import importlib
k = importlib.import_module("PKG.kernels")
if mode != "jit":
    import aot
    reg = aot.Registry(site + "/PKG/artifacts", owner="PKG")
    got = aot.attach_numba(reg, ["other"] if mode == "jit+aot" else ["axpy"])
    assert set(got.values()) == {"attached"}, got
n = 1 << 16
out = cuda.to_device(np.zeros(n, np.float32))
x = cuda.to_device(np.ones(n, np.float32))
a = np.float32(2.0)
launch = k.axpy[n // 256, 256]
launch(out, x, a)
cuda.synchronize()


def timed(count, launch=launch):
    cuda.synchronize()
    t = time.perf_counter()
    for _ in range(count):
        launch(out, x, a)
    cuda.synchronize()
    return (time.perf_counter() - t) / count * 1e6


res = {"compiles": len(compiles)}
if mode == "pair":  # numba-cuda's own JIT of the same function, beside the served one, alternating blocks
    own = cuda.jit(k.axpy.py_func)[n // 256, 256]
    own(out, x, a)
    cuda.synchronize()
    served, jitted = [], []
    for i in range(PAIR_BLOCKS):
        for which in ((launch, own) if i % 2 == 0 else (own, launch)):
            (served if which is launch else jitted).append(timed(launches, which))
    ratios = sorted(s / j for s, j in zip(served, jitted))
    res.update(pair_aot_us=sorted(served)[len(served) // 2], pair_jit_us=sorted(jitted)[len(jitted) // 2],
               pair_ratio=ratios[len(ratios) // 2])
res["us"] = timed(launches)
gc.disable()
res["us_gc_off"] = timed(launches)
gc.enable()
(kernel,) = k.axpy.overloads.values()
real_launch = type(kernel).launch
type(kernel).launch = lambda self, *a, **kw: None  # the host path alone: resolution, arguments not prepared
res["us_host_path"] = timed(launches)
type(kernel).launch = real_launch
res["kernel_class"] = type(kernel).__module__ + "." + type(kernel).__qualname__
res["library_class"] = type(kernel._codelibrary).__qualname__
if profile:
    p = cProfile.Profile()
    p.enable()
    timed(launches)
    p.disable()
    s = io.StringIO()
    pstats.Stats(p, stream=s).sort_stats("tottime").print_stats(12)
    res["profile"] = s.getvalue()[-4000:]
print(json.dumps(res))
"""


def prepare(folder: Path, sm: str) -> None:
    site = folder / "site"
    shutil.rmtree(folder, ignore_errors=True)
    (site / PKG).mkdir(parents=True)
    (site / PKG / "__init__.py").write_text("")
    (site / PKG / "kernels.py").write_text(KERNELS)
    matrix = folder / "build_matrix.yaml"
    matrix.write_text("version: 1\nnumba:\n" + "".join(
        f'  - {{name: {k}, kernel: "{PKG}.kernels:{k}", signatures: ["{s}"]}}\n' for k, s in SIGNATURES.items()))
    subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(matrix), "--sm", sm, "--jobs", "1",
                    "--out", str(site / PKG / "artifacts"), "-q"], check=True, cwd=site, env=tree_env())
    print(f"prepared {site / PKG} (artifacts for sm_{sm})")


def one(mode: str, site: Path, launches: int, profile: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        child = CHILD.replace("PKG", PKG).replace("PAIR_BLOCKS", str(PAIR_BLOCKS))
        r = subprocess.run([sys.executable, "-W", "ignore::Warning", "-c", child, mode,
                            str(site), str(launches), "1" if profile else "0"], capture_output=True, text=True,
                           timeout=600, cwd=tmp, env=dict(tree_env(), PYTHONDONTWRITEBYTECODE="1"))
    if r.returncode != 0:
        raise SystemExit(f"{mode}: rc={r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run(folder: Path, launches: int, runs: int, profile: bool) -> int:
    site = folder / "site"
    got: dict[str, list[dict]] = {m: [] for m in MODES}
    for i in range(runs):
        for mode in MODES:
            got[mode].append(one(mode, site, launches, profile and i == 0))
    keys = ("us", "us_gc_off", "us_host_path")
    med = {m: {k: statistics.median(r[k] for r in rows) for k in keys} for m, rows in got.items()}
    print(f"numba launch, {launches} launches back to back, median of {runs} fresh processes (µs/launch)")
    print(f"{'mode':9} {'launch':>8} {'gc off':>8} {'host path':>10} {'ratio':>6} {'compiles':>9}  kernel / library")
    for m in MODES:
        first = got[m][0]
        print(f"{m:9} {med[m]['us']:8.2f} {med[m]['us_gc_off']:8.2f} {med[m]['us_host_path']:10.2f} "
              f"{med[m]['us'] / med['jit']['us']:6.3f} {max(r['compiles'] for r in got[m]):9d}  "
              f"{first['kernel_class']} / {first['library_class']}")
    ratio = med["aot"]["us"] / med["jit"]["us"]
    pair = {k: statistics.median(r[k] for r in got["pair"]) for k in ("pair_aot_us", "pair_jit_us", "pair_ratio")}
    med["pair"].update(pair)
    print(f"aot/jit across processes: {ratio:.3f}; host path aot/jit: "
          f"{med['aot']['us_host_path'] / med['jit']['us_host_path']:.3f}")
    print(f"aot/jit in one process, alternating blocks: {pair['pair_aot_us']:.2f} / {pair['pair_jit_us']:.2f} µs = "
          f"{pair['pair_ratio']:.4f} (target <= 1.01)")
    if profile:
        for m in MODES:
            print(f"--- {m}: top functions by own time over {launches} launches ---\n{got[m][0].get('profile', '')}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "numba_launch.json").write_text(json.dumps({"medians": med, "runs": got}, indent=1))
    bad = got["aot"][0]["compiles"] != 0 or got["pair"][0]["compiles"] != 0
    if bad:
        print("FAILED: the aot mode compiled")
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cmd", choices=("prepare", "run"))
    p.add_argument("dir")
    p.add_argument("sm", nargs="?", default="90")
    p.add_argument("--launches", type=int, default=2000)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--profile", action="store_true")
    a = p.parse_args(argv)
    if a.cmd == "prepare":
        prepare(Path(a.dir).resolve(), a.sm)
        return 0
    return run(Path(a.dir).resolve(), a.launches, a.runs, a.profile)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
