"""Warm at the floor: aot's whole-matrix warmup against what CUDA itself costs, in fresh processes (GPU).

    python benchmarks/warm_breakdown.py [--artifacts DIR] [--runs 5] [--json FILE]

Every number comes from a fresh ``python -c`` child with numpy imported first; the kinds of child
interleave run by run (drift and file caches hit every kind alike). Two cases:

  no-context    nothing CUDA before the measurement. The floor: ``import cuda.compute`` in one thread
                while another creates the CUDA context (cuInit + device 0's primary context through the
                driver, ctypes), until both are done; each leg is reported too.
  context-made  the child first makes a context (cupy if importable, else cuda.core
                ``Device(0).set_current()``; ``--context-maker``). The floor: ``import cuda.compute``.

aot, per case: ``import aot; reg = aot.Registry(DIR); reg.request_warmup()`` is the caller's blocking
time (wall, and the calling thread's CPU time; each step too), then ``reg.ensure_warm()``: "warm" is the
time from before ``import aot`` until it returns. The run counts only if no spec is cold, none has
errors and every spec has its kernels loaded (``status()[name].kernels``). The pipeline's phases come
from ``aot.runtime.loader.threads.TIMELINE`` (ms after ``import aot``). Then every CCCL spec's first and second
call on 2^20 items: one pass of ``aot.verify.context.check_cccl`` each, timing only the algorithm
invocations (temp-storage query and run, each followed by a device sync).

Prints medians per case (floor, warm, warm/floor, blocking, slowest first call) and writes JSON with
every run. Targets (issue 17): warm <= 1.25x floor in both cases, blocking <= 5 ms, first call <= 1.2 ms
for every CCCL spec. Exit status: 0; 1 a child failed or a warmup was incomplete; 2 bad arguments; 6 no
usable CUDA device.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

CASES = ("no-context", "context-made")
TARGET_RATIO, TARGET_BLOCKING_MS, TARGET_FIRST_CALL_MS = 1.25, 5.0, 1.2

PRELUDE = textwrap.dedent(r"""
    import ctypes, json, os, sys, threading, time, warnings
    warnings.simplefilter("ignore")
    import numpy
    case, maker = sys.argv[1], sys.argv[2]
    out = {"case": case}
    if case == "context-made":             # before anything timed (and before aot is imported)
        if maker == "cupy":
            import cupy
            cupy.cuda.Device(0).use()
            cupy.empty(1, dtype=cupy.uint8)   # an allocation: the primary context exists and is current
            cupy.cuda.Device(0).synchronize()
        else:
            from cuda.core import Device
            Device(0).set_current()
""")

PROBE = textwrap.dedent(r"""
    import ctypes, json
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise SystemExit(f"no NVIDIA driver: libcuda.so.1 cannot be loaded ({e})")
    if hasattr(cu, "aot_libcuda_stub"):
        raise SystemExit("no NVIDIA driver: libcuda.so.1 is aot's build-time stand-in")
    n, v, name = ctypes.c_int(0), ctypes.c_int(0), ctypes.create_string_buffer(256)
    err = cu.cuInit(0)
    if err or cu.cuDeviceGetCount(ctypes.byref(n)) or n.value < 1:
        raise SystemExit(f"no usable CUDA device (cuInit: {err}, devices: {n.value})")
    cu.cuDriverGetVersion(ctypes.byref(v))
    dev = ctypes.c_int(0)
    cu.cuDeviceGet(ctypes.byref(dev), 0)
    cu.cuDeviceGetName(name, 256, dev)
    import aot
    print(json.dumps({"device": name.value.decode(), "driver_cuda": v.value, "devices": n.value,
                      "aot": aot.__file__, "aot_version": aot.__version__}))
""")

FLOOR = PRELUDE + textwrap.dedent(r"""
    times = {}
    def imp():
        t = time.perf_counter(); import cuda.compute; times["import_ms"] = (time.perf_counter() - t) * 1e3
    def ctx():
        t = time.perf_counter()
        cu = ctypes.CDLL("libcuda.so.1")
        d, c = ctypes.c_int(0), ctypes.c_void_p(0)
        for r in (cu.cuInit(0), cu.cuDeviceGet(ctypes.byref(d), 0),
                  cu.cuDevicePrimaryCtxRetain(ctypes.byref(c), d), cu.cuCtxSetCurrent(c)):
            if r:
                raise SystemExit(f"driver error {r} while creating the context")
        times["context_ms"] = (time.perf_counter() - t) * 1e3
    t0 = time.perf_counter()
    if case == "no-context":
        th = threading.Thread(target=ctx); th.start(); imp(); th.join()
        if "context_ms" not in times:
            raise SystemExit("the context thread failed (see above)")
    else:
        imp()
    out["floor_ms"] = (time.perf_counter() - t0) * 1e3
    out.update(times)
    print(json.dumps(out))
""")

AOT = PRELUDE + textwrap.dedent(r"""
    root, n_items = sys.argv[3], int(sys.argv[4])
    t0, c0 = time.perf_counter(), time.thread_time()
    import aot
    t1 = time.perf_counter()
    reg = aot.Registry(root)
    t2 = time.perf_counter()
    reg.request_warmup()
    t3, c3 = time.perf_counter(), time.thread_time()
    cold = reg.ensure_warm(timeout=300)
    t4 = time.perf_counter()
    out.update(import_aot_ms=(t1 - t0) * 1e3, registry_ms=(t2 - t1) * 1e3, request_warmup_ms=(t3 - t2) * 1e3,
               blocking_ms=(t3 - t0) * 1e3, blocking_cpu_ms=(c3 - c0) * 1e3, warm_ms=(t4 - t0) * 1e3, cold=cold)
    from aot.runtime.loader.threads import TIMELINE
    out["phases_ms"] = {k: (v - t0) * 1e3 for k, v in sorted(TIMELINE.items(), key=lambda kv: kv[1])}
    st = reg.status()
    problems = [f"{n}: cold" for n in cold]
    for n in reg.names():
        s = st.get(n)
        if s is None:
            problems.append(f"{n}: never loaded")
        elif s.errors:
            problems.append(f"{n}: {s.errors[0]}")
        elif not s.kernels:
            problems.append(f"{n}: kernels not loaded ({s.kernels})")
    out["problems"], out["specs"] = problems, len(reg.names())
    out["kernels"] = sum(s.kernels or 0 for s in st.values())
    out["load_ms"] = {n: s.ms for n, s in st.items()}  # per spec: read, check, deserialize (not the kernels)
    if n_items <= 0:                       # --items 0: no calls (a dry run of the pipeline)
        print(json.dumps({**out, "calls": {}}))
        raise SystemExit(0)
    from cuda.core import Device
    from aot.verify.context import check_cccl
    dev = Device()
    dev.set_current()
    class Timed:                           # only the algorithm invocations, each up to the end of its GPU work
        def __init__(self, obj):
            self.obj, self.s = obj, 0.0
        def __call__(self, **kw):
            t = time.perf_counter(); r = self.obj(**kw); dev.sync(); self.s += time.perf_counter() - t
            return r
    calls = {}
    for n in reg.names():
        spec = reg.spec(n)
        if spec.family != "cccl":
            continue
        timed, ms = Timed(reg.cccl(n)), []
        for seed in (0, 1):
            timed.s = 0.0
            check_cccl(timed, spec, dev, n=n_items, seed=seed)
            ms.append(timed.s * 1e3)
        calls[n] = ms
    out["calls"] = calls
    print(json.dumps(out))
""")


def child(code: str, *args: str, timeout: float = 600) -> dict:
    try:
        p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if p.returncode != 0:
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()
        return {"error": tail[-1] if tail else f"exit status {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def med(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def summarize(floors: list[dict], aots: list[dict]) -> dict:
    """Medians of one case's floor and aot children (the JSON's ``summary``)."""
    s: dict = {"runs": len(aots), "floor_ms": med(floors, "floor_ms"), "floor_import_ms": med(floors, "import_ms"),
               "floor_context_ms": med(floors, "context_ms"), "warm_ms": med(aots, "warm_ms"),
               "blocking_ms": med(aots, "blocking_ms"), "blocking_cpu_ms": med(aots, "blocking_cpu_ms"),
               "blocking_ms_max": max((r["blocking_ms"] for r in aots), default=None),
               "steps_ms": {k: med(aots, k) for k in ("import_aot_ms", "registry_ms", "request_warmup_ms")},
               "floor_ms_all": [r["floor_ms"] for r in floors], "warm_ms_all": [r["warm_ms"] for r in aots]}
    s["ratio"] = s["warm_ms"] / s["floor_ms"] if s["warm_ms"] and s["floor_ms"] else None
    phases = sorted({k for r in aots for k in r.get("phases_ms", {})})
    s["phases_ms"] = {k: statistics.median(r["phases_ms"][k] for r in aots if k in r.get("phases_ms", {}))
                      for k in phases}
    names = sorted(set.intersection(*(set(r["calls"]) for r in aots))) if aots else []
    s["calls"] = {n: {"first_ms": statistics.median(r["calls"][n][0] for r in aots),
                      "second_ms": statistics.median(r["calls"][n][1] for r in aots),
                      "first_ms_max": max(r["calls"][n][0] for r in aots)} for n in names}
    if names:
        worst = max(names, key=lambda n: s["calls"][n]["first_ms"])
        s["max_first_ms"], s["max_first_spec"] = s["calls"][worst]["first_ms"], worst
    s["problems"] = sorted({p for r in aots for p in r.get("problems", [])})
    s["targets_met"] = {
        "warm_le_1.25x_floor": s["ratio"] is not None and s["ratio"] <= TARGET_RATIO,
        "blocking_le_5ms": s["blocking_ms"] is not None and s["blocking_ms"] <= TARGET_BLOCKING_MS,
        "first_call_le_1.2ms": bool(names) and all(c["first_ms"] <= TARGET_FIRST_CALL_MS for c in s["calls"].values())}
    return s


def table(summary: dict) -> str:
    def f(v, w, p=1):
        return f"{v:{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}}"
    lines = [f"{'case':13} {'runs':>4} {'floor ms':>9} {'(import':>8} {'ctx)':>6} {'warm ms':>8} {'warm/floor':>10} "
             f"{'block ms':>8} {'(cpu':>6} {'max)':>6} {'max 1st call ms':>16}"]
    for case, s in summary.items():
        lines.append(f"{case:13} {s['runs']:4d} {f(s['floor_ms'], 9)} {f(s['floor_import_ms'], 8)} "
                     f"{f(s['floor_context_ms'], 6)} {f(s['warm_ms'], 8)} {f(s['ratio'], 10, 2)} "
                     f"{f(s['blocking_ms'], 8, 2)} {f(s['blocking_cpu_ms'], 6, 2)} {f(s['blocking_ms_max'], 6, 2)} "
                     f"{f(s.get('max_first_ms'), 9, 2)} {s.get('max_first_spec', '')}")
    for case, s in summary.items():
        lines.append(f"{case}: phases (median ms after import aot): "
                     + ", ".join(f"{k} {v:.0f}" for k, v in sorted(s["phases_ms"].items(), key=lambda kv: kv[1])))
        lines.append(f"{case}: targets " + ", ".join(f"{k}: {'met' if ok else 'MISSED'}"
                                                      for k, ok in s["targets_met"].items()))
    return "\n".join(lines)


def default_artifacts() -> Path | None:
    found = importlib.util.find_spec("aot")  # the installed package, without importing it here
    locs = [Path(p) / "artifacts" for p in (found.submodule_search_locations or [])] if found else []
    return next((p for p in locs if (p / "manifest.json").is_file()), locs[0] if locs else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join((__doc__ or "").splitlines()[2:]))
    ap.add_argument("--artifacts", type=Path, default=None, help="artifact set (default: the installed aot's)")
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per kind of child and case (>= 1)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--context-maker", choices=("auto", "cupy", "cuda.core"), default="auto")
    ap.add_argument("--items", type=int, default=1 << 20, help="items per call (default 2^20; 0: no calls)")
    ap.add_argument("--json", type=Path, default=None, help="write the runs and the summary here")
    args = ap.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    if args.runs < 1 or not cases or any(c not in CASES for c in cases):
        ap.error(f"--runs must be >= 1 and --cases a list of {', '.join(CASES)}")
    root = args.artifacts or default_artifacts()
    if root is None or not (root / "manifest.json").is_file():
        print(f"warm_breakdown: no artifact set at {root} (no manifest.json); pass --artifacts DIR", file=sys.stderr)
        return 2
    root = root.resolve()
    probe = child(PROBE, timeout=120)
    if "error" in probe:
        print(f"warm_breakdown: {probe['error']}", file=sys.stderr)
        return 6
    maker = args.context_maker
    if maker == "auto":
        maker = "cupy" if importlib.util.find_spec("cupy") is not None else "cuda.core"
    print(f"{probe['device']} (driver CUDA {probe['driver_cuda']}), aot {probe['aot']}, artifacts {root}, "
          f"{args.runs} runs, context made by {maker}", flush=True)
    runs: list[dict] = []
    failed = None
    for i in range(args.runs):
        for case in cases:
            for kind, code, extra in (("floor", FLOOR, ()), ("aot", AOT, (str(root), str(args.items)))):
                r = child(code, case, maker, *extra)
                r.update(kind=kind, case=case, run=i)
                runs.append(r)
                if "error" in r:
                    failed = f"{kind} child ({case}, run {i}) failed: {r['error']}"
                    print(f"warm_breakdown: {failed}", file=sys.stderr)
                    break
                print(f"  run {i} {case:12} {kind:5} " + (f"floor {r['floor_ms']:.1f} ms" if kind == "floor" else
                      f"warm {r['warm_ms']:.1f} ms, blocking {r['blocking_ms']:.2f} ms "
                      f"(cpu {r['blocking_cpu_ms']:.2f})"), flush=True)
            if failed:
                break
        if failed:
            break
    ok = [r for r in runs if "error" not in r]
    summary = {c: summarize([r for r in ok if r["case"] == c and r["kind"] == "floor"],
                            [r for r in ok if r["case"] == c and r["kind"] == "aot"]) for c in cases}
    print(table(summary))
    problems = {c: s["problems"] for c, s in summary.items() if s["problems"]}
    for c, ps in problems.items():
        print(f"{c}: warmup incomplete: {'; '.join(ps[:5])}" + (f" (+{len(ps) - 5} more)" if len(ps) > 5 else ""))
    if args.json:
        args.json.write_text(json.dumps({"device": probe, "artifacts": str(root), "context_maker": maker,
                                         "items": args.items, "failed": failed, "summary": summary, "runs": runs},
                                        indent=1) + "\n")
    return 1 if problems or failed else 0


if __name__ == "__main__":
    sys.exit(main())
