"""First use of every spec in a fresh process: cuda.compute JIT vs the aot loader (GPU; run on the lent machine).

For each spec, ``--runs`` fresh processes per mode, side by side (interleaved), medians reported:
  jit      cuda.compute ``make_*`` on this device with real arrays, then the first call, to the result;
  artifact ``aot.Registry(DIR).cccl(name)`` (read, check, deserialize), then the first call, to the result.
Both exclude the one-time ``import cuda.compute`` (~100 ms), reported separately. Also measured: the whole
matrix ready through ``request_warmup`` + ``ensure_warm`` in one process, ``import aot``, and the
steady-state call time of a JIT-built vs an artifact-loaded object (median of 200 calls each).

    python benchmarks/first_use.py --artifacts DIR [--runs 3] [--json benchmarks/results/first_use.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

CHILD = textwrap.dedent(r"""
    import json, sys, time, warnings
    warnings.simplefilter("ignore")
    mode, root, name = sys.argv[1:4]
    t_imp = time.perf_counter()
    import numpy as np
    import cuda.compute
    from cuda.core import Device
    dev = Device(); dev.set_current()
    import_ms = (time.perf_counter() - t_imp) * 1e3
    from aot.runtime.loader.registry import Registry
    from aot.verify.context import check_cccl
    from aot.build.compile import algorithm_kwargs
    from aot.verify.devarray import DeviceArray
    reg = Registry(root)
    spec = reg.spec(name)

    class Timed:  # times only the algorithm calls, not the test-data preparation around them
        def __init__(self, obj):
            self.obj, self.s = obj, 0.0
        def __call__(self, **kw):
            t = time.perf_counter()
            r = self.obj(**kw)
            self.s += time.perf_counter() - t
            return r

    DeviceArray(1, np.uint8, dev)  # the memory pool exists before timing starts, in both modes
    t0 = time.perf_counter()
    if mode == "jit":
        factory, kw = algorithm_kwargs(spec, lambda dt: DeviceArray(16, dt, dev))
        obj = getattr(cuda.compute, factory)(**kw)
    else:
        obj = reg.cccl(name)
    ready_ms = (time.perf_counter() - t0) * 1e3
    timed = Timed(obj)
    check_cccl(timed, spec, dev, n=1000)  # the first call (temp-size query + run), checked against numpy
    call_ms = timed.s * 1e3
    print(json.dumps({"import_ms": import_ms, "ready_ms": ready_ms, "first_call_ms": call_ms,
                      "first_result_ms": ready_ms + call_ms}))
""")

WARM_ALL = textwrap.dedent(r"""
    import json, sys, time, warnings
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    import aot
    t_import = (time.perf_counter() - t0) * 1e3
    from aot.runtime.loader.registry import Registry
    import cuda.compute
    from cuda.core import Device
    Device().set_current()
    t1 = time.perf_counter()
    reg = Registry(sys.argv[1])
    reg.request_warmup()
    cold = reg.ensure_warm(timeout=60)
    objs = [reg.cccl(n) if reg.spec(n).family == "cccl" else None for n in reg.names()]
    ready = (time.perf_counter() - t1) * 1e3
    print(json.dumps({"import_aot_ms": t_import, "all_ready_ms": ready, "cold": cold, "n": len(reg.names())}))
""")

STEADY = textwrap.dedent(r"""
    import json, sys, time, statistics, warnings
    warnings.simplefilter("ignore")
    import numpy as np, cuda.compute
    from cuda.core import Device
    from aot.runtime.loader.registry import Registry
    from aot.build.compile import algorithm_kwargs, init_value, operator
    from aot.verify.devarray import DeviceArray
    dev = Device(); dev.set_current()
    reg = Registry(sys.argv[1])
    name = sys.argv[2]
    spec = reg.spec(name)
    n = 1 << 20
    x = DeviceArray.from_host(np.ones(n, spec.params["dtype"]), dev)
    out = DeviceArray(1, spec.params["dtype"], dev)
    init = init_value(spec.params["dtype"], spec.params["init"])
    op = operator(spec.params["op"])
    factory, kw = algorithm_kwargs(spec, lambda dt: DeviceArray(16, dt, dev))
    wrapped = reg.cccl(name)
    objs = {"jit": getattr(cuda.compute, factory)(**kw), "artifact_raw": wrapped.raw, "artifact_aot": wrapped}
    tmp = {}
    for mode, obj in objs.items():
        nb = obj(temp_storage=None, d_in=x, d_out=out, num_items=n, op=op, h_init=init)
        tmp[mode] = DeviceArray(max(1, int(nb)), np.uint8, dev)
    times = {m: [] for m in objs}
    for rnd in range(60):  # interleaved blocks, so clock and cache drift hit every mode alike
        for mode, obj in objs.items():
            for _ in range(10):
                t = time.perf_counter()
                obj(temp_storage=tmp[mode], d_in=x, d_out=out, num_items=n, op=op, h_init=init)
                dev.sync()
                if rnd >= 5:
                    times[mode].append((time.perf_counter() - t) * 1e6)
    print(json.dumps({m: statistics.median(v) for m, v in times.items()}))
""")


def child(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"rc={out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--artifacts", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default=None)
    ap.add_argument("--only-summary", action="store_true", help="only the whole-matrix and steady-state rows")
    ap.add_argument("--json", type=Path, default=Path(__file__).with_name("results") / "first_use.json")
    args = ap.parse_args()
    from aot.core.manifest import load_manifest
    m = load_manifest(args.artifacts)
    names = sorted(n for n, d in m.specs.items() if "algorithm" in d)
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    # The whole-matrix and steady-state rows first: quick, and they survive a time limit on the long loop.
    warm = [child(WARM_ALL, str(args.artifacts)) for _ in range(max(3, args.runs))]
    steady = child(STEADY, str(args.artifacts), "reduce_sum_f64") if "reduce_sum_f64" in names else {}
    if args.only_summary:
        print(json.dumps({"warm_all": warm, "steady_us": steady}, indent=1))
        args.json.write_text(json.dumps({"warm_all": warm, "steady_us": steady}, indent=1))
        return 0
    print(json.dumps({"warm_all": warm, "steady": steady}), flush=True)
    rows = []
    for name in names:
        runs = {"jit": [], "artifact": []}
        errors = {}
        for _ in range(args.runs):
            for mode in ("jit", "artifact"):  # interleaved: both modes see the same machine state
                r = child(CHILD, mode, str(args.artifacts), name)
                if "error" in r:
                    errors[mode] = r["error"]
                else:
                    runs[mode].append(r)
        med = {mode: (statistics.median(x["first_result_ms"] for x in v) if v else None) for mode, v in runs.items()}
        ready = {mode: (statistics.median(x["ready_ms"] for x in v) if v else None) for mode, v in runs.items()}
        imp = [x["import_ms"] for v in runs.values() for x in v]
        row = {"spec": name, "jit_ms": med["jit"], "artifact_ms": med["artifact"],
               "jit_ready_ms": ready["jit"], "artifact_ready_ms": ready["artifact"],
               "speedup": (med["jit"] / med["artifact"]) if med["jit"] and med["artifact"] else None,
               "import_ms": statistics.median(imp) if imp else None, "runs": args.runs, "errors": errors}
        rows.append(row)
        print(json.dumps(row), flush=True)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "warm_all": warm, "steady": steady}, indent=1))
    from rich.console import Console
    from rich.table import Table
    t = Table(title=f"first use per spec, fresh processes, median of {args.runs}")
    for col in ("spec", "JIT ms", "artifact ms", "of which load ms", "speedup"):
        t.add_column(col, justify="left" if col == "spec" else "right")
    for r in rows:
        t.add_row(r["spec"], f"{r['jit_ms']:.0f}" if r["jit_ms"] else "n/a: " + r["errors"].get("jit", "")[:60],
                  f"{r['artifact_ms']:.2f}" if r["artifact_ms"] else "err",
                  f"{r['artifact_ready_ms']:.2f}" if r["artifact_ready_ms"] else "-",
                  f"{r['speedup']:.0f}x" if r["speedup"] else "-")
    console = Console(width=140)
    console.print(t)
    ok_warm = [w for w in warm if "error" not in w]
    summary = {
        "import_cuda_compute_ms_median": statistics.median([r["import_ms"] for r in rows if r["import_ms"]] or [0]),
        "import_aot_ms_median": statistics.median([w["import_aot_ms"] for w in ok_warm]) if ok_warm else None,
        "all_specs_ready_ms_median": statistics.median([w["all_ready_ms"] for w in ok_warm]) if ok_warm else None,
        "warm_errors": [w for w in warm if "error" in w],
        "steady_state_us_median": steady,
    }
    console.print(summary)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
