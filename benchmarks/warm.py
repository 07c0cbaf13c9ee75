"""Warm means warm (issue 11, part 3): what ``request_warmup`` + ``ensure_warm`` buy (GPU; the lent machine).

Each run is a fresh process with numpy imported first. Modes, interleaved run by run:
  warm    ``import aot``; ``Registry(DIR).request_warmup()`` (its call time is reported); ``ensure_warm()``:
          "ready" is measured from before ``import aot``; then every CCCL spec's first and second call;
  nowarm  the same calls with no warmup: ``cccl(name)`` loads the spec just before its first call (the
          kernels then load lazily inside that call: what warmup removes).
A "call" is one pass of ``aot.verify.context.check_cccl`` on 2^20 items (segmented reductions: 2000 segments),
timing only the algorithm invocations (temp-storage query and run, each followed by a device sync), not
the data preparation or the numpy check around them. Targets: warm first call <= 2x the second for every
spec; the whole matrix warm within 300 ms of ``import aot``.

    python benchmarks/warm.py DIR [--runs 3] [--json benchmarks/results/warm.json]
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
    import numpy as np
    mode, root = sys.argv[1], sys.argv[2]
    t0 = time.perf_counter()
    import aot
    import_aot_ms = (time.perf_counter() - t0) * 1e3
    reg = aot.Registry(root)
    out = {"mode": mode, "import_aot_ms": import_aot_ms}
    if mode == "warm":
        t1 = time.perf_counter()
        reg.request_warmup()
        out["request_warmup_ms"] = (time.perf_counter() - t1) * 1e3
        out["cuda_compute_imported_by_caller"] = "cuda.compute" in sys.modules
        out["cold"] = reg.ensure_warm(timeout=120)
        out["ready_ms"] = (time.perf_counter() - t0) * 1e3
        out["kernels"] = {n: s.kernels for n, s in reg.status().items()}
        out["errors"] = {n: s.errors for n, s in reg.status().items() if s.errors}
    from cuda.core import Device
    from aot.verify.context import check_cccl
    dev = Device()
    dev.set_current()

    class Timed:  # only the algorithm invocations, each up to the end of its GPU work
        def __init__(self, obj):
            self.obj, self.s = obj, 0.0
        def __call__(self, **kw):
            t = time.perf_counter()
            r = self.obj(**kw)
            dev.sync()
            self.s += time.perf_counter() - t
            return r

    calls = {}
    for name in reg.names():
        spec = reg.spec(name)
        if spec.family != "cccl":
            continue
        timed = Timed(reg.cccl(name))
        ms = []
        for seed in (0, 1):
            timed.s = 0.0
            check_cccl(timed, spec, dev, n=1 << 20, seed=seed)
            ms.append(timed.s * 1e3)
        calls[name] = ms
    out["calls"] = calls
    print(json.dumps(out))
""")


def child(mode: str, root: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(root)], capture_output=True, text=True,
                          timeout=600, check=False)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()
        return {"mode": mode, "error": tail[-1] if tail else f"rc={proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summarize(runs: list[dict]) -> dict:
    """Medians per mode: the whole-matrix numbers and, per spec, first / second call and their ratio."""
    out: dict = {}
    for mode in ("warm", "nowarm"):
        ok = [r for r in runs if r["mode"] == mode and "error" not in r]
        if not ok:
            continue
        names = sorted(ok[0]["calls"])
        specs = {}
        for n in names:
            first = statistics.median(r["calls"][n][0] for r in ok)
            second = statistics.median(r["calls"][n][1] for r in ok)
            specs[n] = {"first_ms": first, "second_ms": second, "ratio": first / second if second else None}
        m = {"runs": len(ok), "specs": specs,
             "import_aot_ms": statistics.median(r["import_aot_ms"] for r in ok)}
        if mode == "warm":
            m["ready_ms"] = statistics.median(r["ready_ms"] for r in ok)
            m["ready_ms_all"] = [r["ready_ms"] for r in ok]
            m["request_warmup_ms"] = statistics.median(r["request_warmup_ms"] for r in ok)
            m["request_warmup_ms_max"] = max(r["request_warmup_ms"] for r in ok)
            m["cold"] = sorted({n for r in ok for n in r["cold"]})
            m["kernels"] = ok[0]["kernels"]
            m["errors"] = ok[0].get("errors", {})
            m["within_2x"] = sum(1 for s in specs.values() if s["ratio"] is not None and s["ratio"] <= 2.0)
            m["cuda_compute_imported_by_caller"] = any(r["cuda_compute_imported_by_caller"] for r in ok)
        out[mode] = m
    return out


def table(summary: dict) -> str:
    warm, nowarm = summary.get("warm", {}), summary.get("nowarm", {})
    names = sorted(set(warm.get("specs", {})) | set(nowarm.get("specs", {})))
    lines = [(f"{'spec':28} {'warm 1st ms':>11} {'2nd ms':>8} {'ratio':>6} {'kernels':>7} | "
              f"{'no warmup 1st ms':>16} {'2nd ms':>8} {'ratio':>6}")]
    for n in names:
        w, c = warm.get("specs", {}).get(n), nowarm.get("specs", {}).get(n)
        cols = [f"{n:28}"]
        cols.append(f"{w['first_ms']:11.2f} {w['second_ms']:8.2f} {w['ratio']:6.2f}" if w else f"{'-':>27}")
        cols.append(f"{warm.get('kernels', {}).get(n)!s:>7} |")
        cols.append(f"{c['first_ms']:16.2f} {c['second_ms']:8.2f} {c['ratio']:6.2f}" if c else f"{'-':>32}")
        lines.append(" ".join(cols))
    if warm:
        lines.append(f"warm: whole matrix ready {warm['ready_ms']:.0f} ms after `import aot` (median of "
                     f"{warm['runs']}; target 300), request_warmup {warm['request_warmup_ms']:.2f} ms "
                     f"(max {warm['request_warmup_ms_max']:.2f}; target 5), first call <= 2x second for "
                     f"{warm['within_2x']} of {len(warm['specs'])} specs, cold: {warm['cold'] or 'none'}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("artifacts", type=Path, help="an artifact directory (manifest.json inside)")
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per mode (default 3)")
    ap.add_argument("--modes", default="warm,nowarm")
    ap.add_argument("--json", type=Path, default=Path(__file__).with_name("results") / "warm.json")
    args = ap.parse_args()
    if not (args.artifacts / "manifest.json").is_file():
        print(f"warm.py: error: no manifest.json in {args.artifacts}", file=sys.stderr)
        return 2
    runs = []
    for _ in range(args.runs):
        for mode in args.modes.split(","):  # interleaved: both modes see the same machine state
            r = child(mode, args.artifacts)
            runs.append(r)
            print(json.dumps({k: v for k, v in r.items() if k in ("mode", "error", "ready_ms", "request_warmup_ms")}),
                  flush=True)
    summary = summarize(runs)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"summary": summary, "runs": runs}, indent=1))
    print(table(summary))
    errors = [r for r in runs if "error" in r]
    for r in errors:
        print(f"{r['mode']}: {r['error']}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
