"""Cost of finding a packaged NVRTC unit from a library's compile call (issue 28), on the CPU (no GPU needed):

* ``by_source(...).unit(source, flags)``: first call in a fresh process (reads and checks the manifest, builds
  the source-key index) and later calls (normalise the flags, sha256 the source, one dict hit);
* ``program_cache(...)[key]``: first lookup (builds the key index from the manifest's recorded keys, reads and
  checks the artifact) and later lookups (one dict hit, the checked payload memoised).

Builds examples/adopt-mypkg for sm_90 into a temporary folder first (about 2 s), removed afterwards.

    python benchmarks/lookup.py [--runs 5] [--calls 20000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "adopt-mypkg"

PROBE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
from adopt_mypkg import kernels
src, flags, calls = kernels.SAXPY, list(kernels.OPTIONS), int(sys.argv[3])
t0 = time.perf_counter()
import aot
lookup = aot.by_source("adopt_mypkg", registry=aot.Registry(sys.argv[1]))
t1 = time.perf_counter()
assert lookup.unit(src, flags) == "saxpy"
t2 = time.perf_counter()
for _ in range(calls):
    lookup.unit(src, flags)
t3 = time.perf_counter()
from cuda.core import ProgramOptions
from cuda.core.utils import make_program_cache_key
key = make_program_cache_key(code=src, code_type="c++", target_type="cubin",
                             options=ProgramOptions(arch="sm_90", std="c++17", define_macro="BLOCK=256"))
cache = aot.program_cache("adopt_mypkg", registry=lookup.registry)
t4 = time.perf_counter()
assert cache[key]
t5 = time.perf_counter()
for _ in range(calls):
    cache[key]
t6 = time.perf_counter()
print(json.dumps({"import_aot_and_registry_ms": (t1 - t0) * 1e3, "unit_first_ms": (t2 - t1) * 1e3,
                  "unit_later_us": (t3 - t2) / calls * 1e6, "program_cache_first_ms": (t5 - t4) * 1e3,
                  "program_cache_later_us": (t6 - t5) / calls * 1e6}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="aot-lookup-bench-"))
    try:
        out = tmp / "out"
        env = {"PYTHONPATH": f"{EXAMPLE}:{ROOT}", "AOT_CACHE_DIR": str(tmp / "cache")}
        import os
        env = {**os.environ, **env}
        subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(EXAMPLE / "build_matrix.yaml"),
                        "--sm", "90", "--out", str(out), "--jobs", "1", "-q"], env=env, check=True)
        runs = [json.loads(subprocess.run([sys.executable, "-c", PROBE, str(out), str(EXAMPLE), str(a.calls)],
                                          env=env, check=True, capture_output=True, text=True).stdout)
                for _ in range(a.runs)]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary = {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}
    print(json.dumps({"runs": a.runs, "calls": a.calls, "median": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
