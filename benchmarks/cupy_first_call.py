"""First call of each public function of examples/cupy-mypkg, in fresh processes: what a new user pays for CuPy's
own kernels (issue 35), three ways:

* ``cupy``: nothing packaged, CuPy's cache empty (a new user: CuPy compiles every kernel with NVRTC);
* ``warm``: nothing packaged, CuPy's cache already holds every kernel (a returning user);
* ``packaged``: the kernels packaged with aot, CuPy's cache empty.

    python3 benchmarks/cupy_first_call.py --site SITE --jit JITSITE [--runs 5] [--dtype float32] [--json FILE]

SITE holds ``cupy_mypkg`` with its built artifacts, JITSITE the same package without them (.ci/gpu/cupy_check.sh
makes both: from a recording and build there, or with ``--wheel`` from the example's wheel installed). Inputs are copied to the device before any timed region (the copy compiles nothing); each call is
timed to a device synchronize. Prints per function the median over ``--runs`` processes and the ratio of
``packaged`` to ``cupy`` and to ``warm``; ``import`` is the package's import (aot's ``from_package`` included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import cupy as cp
t1 = time.perf_counter()
import cupy_mypkg
t2 = time.perf_counter()
from cupy_mypkg import workload
calls = workload.calls(sys.argv[1])
out = {"import cupy": (t1 - t0) * 1e3, "import": (t2 - t1) * 1e3}
for name, f in calls:
    s = time.perf_counter()
    f()
    cp.cuda.Device().synchronize()
    out[name] = (time.perf_counter() - s) * 1e3
print(json.dumps(out))
"""


def run_once(site: Path, cache: Path, dtype: str) -> dict:
    env = {**os.environ, "CUPY_CACHE_DIR": str(cache),
           "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    r = subprocess.run([sys.executable, "-W", "ignore::Warning", "-c", CHILD, dtype], env=env, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"child failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", type=Path, required=True)
    ap.add_argument("--jit", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="cupy-bench-"))
    warm_cache = work / "warm"
    run_once(a.jit, warm_cache, a.dtype)  # fills the cache the warm runs reuse
    times: dict[str, list[dict]] = {"cupy": [], "warm": [], "packaged": []}
    for i in range(a.runs):  # interleaved: drift of the machine spreads over all modes alike
        times["cupy"].append(run_once(a.jit, work / f"cold{i}", a.dtype))
        times["warm"].append(run_once(a.jit, warm_cache, a.dtype))
        times["packaged"].append(run_once(a.site, work / f"packaged{i}", a.dtype))
    keys = list(times["cupy"][0])
    med = {mode: {k: statistics.median(r[k] for r in rows) for k in keys} for mode, rows in times.items()}
    calls = [k for k in keys if not k.startswith("import")]
    for mode in med:
        med[mode]["all calls"] = statistics.median(sum(r[k] for k in calls) for r in times[mode])
    print(f"first call, ms, median of {a.runs} fresh processes ({a.dtype}; CuPy cache empty unless warm)")
    print(f"{'call':<12} {'cupy':>9} {'warm':>9} {'packaged':>9} {'pkg/cupy':>9} {'pkg/warm':>9}")
    for k in [*keys, "all calls"]:
        c, w, p = med["cupy"][k], med["warm"][k], med["packaged"][k]
        print(f"{k:<12} {c:>9.2f} {w:>9.2f} {p:>9.2f} {p / c:>9.3f} {p / w:>9.3f}")
    if a.json:
        a.json.write_text(json.dumps({"runs": a.runs, "dtype": a.dtype, "median_ms": med, "raw": times},
                                     indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
