"""How much a warmup's own Python work slows ``import cuda.compute`` beside it, on the CPU (issue 29).

The import is the critical leg of the library-shaped set's warmup, and it shares the GIL with the
catalog, the prechecks and the unit-loading worker. This runs fresh processes against aot's stand-in
driver (``tests/fake_libcuda.c``, each load spinning ``--delay-us`` like a real driver) and reports, as
medians, the wall time from ``t = 0`` until cuda.compute is imported:

* ``alone``: cuda.core, then cuda.compute, imported in one thread (what ``aot-warmup-import`` does);
* ``warm-V``: ``Registry(dir).request_warmup()`` at ``t = 0``, its ``cuda_compute_imported`` mark, with the
  last unit's mark and the whole warmup beside it, for each variant ``V`` of :data:`VARIANTS` (settings of
  ``aot.runtime.loader.threads.TUNING``): ``new`` as shipped, ``yield`` with the worker's sleep before each unit
  while CUDA imports, ``pre`` as before issue 29's third pass (every unit prechecked in the request's thread).

    python benchmarks/import_contention.py --artifacts /tmp/libset --fake /tmp/libcuda.so.1 --runs 9 \
        --variants new,yield,pre

Build the fake driver with ``cc -O1 -shared -fPIC -fvisibility=hidden -Wl,-soname,libcuda.so.1 -o
/tmp/libcuda.so.1 tests/fake_libcuda.c -ldl``. Only a comparison on one machine means anything.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap

VARIANTS = {
    "new": {},
    "yield": {"import_yield": 1e-4},
    "pre": {"precheck_units_ahead": True},
}
CHILD = textwrap.dedent("""
    import ctypes, json, os, sys, threading, time, warnings
    warnings.simplefilter("ignore")
    fake = ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    ctypes.c_ulong.in_dll(fake, "fake_delay_ns").value = int(float(sys.argv[4]) * 1000)
    import numpy
    import aot
    from aot.runtime.loader import threads
    for k, v in json.loads(sys.argv[5]).items():
        setattr(threads.TUNING, k, v)
    t0 = time.perf_counter()
    if sys.argv[3] == "alone":
        from aot.runtime.loader.lean import import_cuda_compute, import_cuda_core
        done = threading.Event()
        def run():
            import_cuda_core()
            try:
                import_cuda_compute()
            finally:
                done.set()
        threading.Thread(target=run).start()
        done.wait()
        out = {"import": (time.perf_counter() - t0) * 1e3}
    else:
        reg = aot.Registry(sys.argv[2])
        reg.request_warmup()
        cold = reg.ensure_warm(timeout=300)
        T = threads.TIMELINE
        out = {k: (T[s] - t0) * 1e3 for k, s in (("import", "cuda_compute_imported"),
               ("units", "last_nvrtc_warm"), ("prechecked", "prechecked"), ("names", "names_checked"))
               if s in T}
        out["all"] = (time.perf_counter() - t0) * 1e3
        out["cold"] = len(cold)
    print(json.dumps(out))
""")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--fake", required=True, help="the stand-in libcuda.so.1 built from tests/fake_libcuda.c")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--delay-us", type=float, default=20.0, help="each fake cuLibraryLoadData/cuKernelGetFunction")
    ap.add_argument("--variants", default="new,yield,pre", help=f"of {', '.join(VARIANTS)}")
    args = ap.parse_args()
    rows: dict[str, list[dict]] = {"alone": []}
    rows.update({f"warm-{v}": [] for v in args.variants.split(",")})
    for i in range(args.runs + 1):  # interleaved; the first round is left out (bytecode, page cache)
        for kind in rows:
            tuning = json.dumps(VARIANTS[kind[5:]] if kind.startswith("warm-") else {})
            proc = subprocess.run([sys.executable, "-c", CHILD, args.fake, args.artifacts, kind, str(args.delay_us),
                                   tuning], capture_output=True, text=True, check=True)
            if i:
                rows[kind].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    for kind, rs in rows.items():
        keys = sorted({k for r in rs for k in r})
        print(kind, " ".join(f"{k} {statistics.median(r[k] for r in rs if k in r):.1f}" for k in keys),
              f"(median of {len(rs)}; import {sorted(round(r['import']) for r in rs)})")
    a = statistics.median(r["import"] for r in rows["alone"])
    for kind in rows:
        if kind != "alone":
            w = statistics.median(r["import"] for r in rows[kind])
            print(f"{kind}: import beside the warmup / alone: {w / a:.3f}x ({w:.1f} / {a:.1f} ms)")


if __name__ == "__main__":
    main()
