"""Build-time benchmark: what ``python -m aot build`` costs, as users run it.

Rows:

* ``cccl``  -- 4 cuda.compute specs x 2 SMs (80, 90), ``--force``, into a fresh temp dir;
* ``nvrtc`` -- 2 NVRTC units x 3 SMs (80, 89, 90; plus one PTX each), ``--force``, fresh temp dir;
* ``subset``-- the two above together (their sum: one build takes one SM list, so they are two runs);

each with ``--jobs 1`` and ``--jobs 2``; then

* ``no-op`` -- a rebuild of the whole default matrix over an existing full build (``--full-out DIR``):
  every item must be a hit. The full build is copied to a temp dir first (so its ``build-report.json``
  is not overwritten) unless ``--in-place``.

Every measurement is a subprocess ``python -m aot build ... -q`` timed from outside (wall clock), repeated
``--repeat`` times (default: 1 for the build rows, 5 for the no-op row); the table shows medians.
Builds use a private AOT_CACHE_DIR; an untimed warm-up build first compiles the stand-in libcuda there.

    python benchmarks/build_bench.py --full-out .gpu/default [--repeat N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CCCL_SPECS = ("reduce_sum_i32", "lower_bound_i32", "upper_bound_i32", "exclusive_scan_i32")
CCCL_SMS = "80,90"
NVRTC_SPECS = ("morton", "segmented_compact")
NVRTC_SMS = "80,89,90"
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "build_bench.json"


def _env(cache_dir: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["AOT_CACHE_DIR"] = str(cache_dir)
    env.pop("AOT_JOBS", None)
    return env


def run_build(args: list[str], out: Path, env: dict) -> dict:
    """One timed ``python -m aot build``; returns wall seconds and what its build report says."""
    cmd = [sys.executable, "-m", "aot", "build", *args, "--out", str(out), "-q"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"benchmark build failed (exit {proc.returncode}): {' '.join(cmd)}\n{proc.stderr}")
    report = json.loads((out / "build-report.json").read_text())
    return {"wall_s": wall, "internal_s": report["seconds"], "counts": report["counts"],
            "items": len(report["items"]), "bytes": sum(i["bytes"] for i in report["items"]),
            "item_s_sum": sum(i["seconds"] for i in report["items"]), "driver": report["driver"],
            "versions": report["versions"]}


def summarize(name: str, jobs: int | None, runs: list[dict]) -> dict:
    walls = [r["wall_s"] for r in runs]
    return {"row": name, "jobs": jobs, "repeat": len(runs), "items": runs[0]["items"],
            "counts": runs[0]["counts"], "bytes": runs[0]["bytes"],
            "median_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls),
            "internal_median_s": statistics.median(r["internal_s"] for r in runs),
            "item_s_sum_median": statistics.median(r["item_s_sum"] for r in runs), "runs": walls}


def bench_subset(jobs_list: list[int], repeat: int, tmp: Path, env: dict) -> list[dict]:
    """Every --jobs value side by side: each repetition runs them one after the other (interleaved), so
    machine drift hits all of them alike."""
    runs = {(name, jobs): [] for name in ("cccl", "nvrtc") for jobs in jobs_list}
    for i in range(repeat):
        for jobs in jobs_list:
            for name, specs, sms in (("cccl", CCCL_SPECS, CCCL_SMS), ("nvrtc", NVRTC_SPECS, NVRTC_SMS)):
                out = tmp / f"{name}-j{jobs}-{i}"
                runs[(name, jobs)].append(run_build(["--only", ",".join(specs), "--sm", sms, "--jobs", str(jobs),
                                                     "--force"], out, env))
                shutil.rmtree(out)
    return [row for jobs in jobs_list for row in _subset_rows(jobs, runs[("cccl", jobs)], runs[("nvrtc", jobs)])]


def _subset_rows(jobs: int, cccl: list[dict], nvrtc: list[dict]) -> list[dict]:
    rows = {"cccl": cccl, "nvrtc": nvrtc}
    total = [{**c, "wall_s": c["wall_s"] + n["wall_s"], "internal_s": c["internal_s"] + n["internal_s"],
              "items": c["items"] + n["items"], "bytes": c["bytes"] + n["bytes"],
              "item_s_sum": c["item_s_sum"] + n["item_s_sum"],
              "counts": {k: c["counts"].get(k, 0) + n["counts"].get(k, 0) for k in {*c["counts"], *n["counts"]}}}
             for c, n in zip(rows["cccl"], rows["nvrtc"])]
    return [summarize(f"cccl {len(CCCL_SPECS)} specs x sm {CCCL_SMS}", jobs, rows["cccl"]),
            summarize(f"nvrtc {len(NVRTC_SPECS)} units x sm {NVRTC_SMS}", jobs, rows["nvrtc"]),
            summarize("subset total", jobs, total)]


def bench_noop(full: Path, repeat: int, tmp: Path, env: dict, in_place: bool) -> dict:
    manifest = json.loads((full / "manifest.json").read_text())
    sms = ",".join(str(s) for s in manifest["sms"])
    target = full
    if not in_place:
        target = tmp / "full-copy"
        shutil.copytree(full, target)
    runs = [run_build(["--sm", sms], target, env) for _ in range(repeat)]
    row = summarize(f"no-op, full default matrix x sm {sms}", None, runs)
    not_hits = {k: v for k, v in row["counts"].items() if k != "hit"}
    row["all_hits"] = not not_hits
    row["source"] = str(full)
    return row


def wait_for(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(5)
    return True


def print_table(rows: list[dict], notes: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table
    t = Table(title="aot build benchmark (wall clock of `python -m aot build ... -q`, medians)")
    for col, just in (("row", "left"), ("jobs", "right"), ("items", "right"), ("result", "left"),
                      ("n", "right"), ("median s", "right"), ("min s", "right"), ("max s", "right"),
                      ("items/s", "right"), ("speedup", "right")):
        t.add_column(col, justify=just)
    base = {r["row"]: r["median_s"] for r in rows if r["jobs"] == 1}
    for r in rows:
        speedup = f"{base[r['row']] / r['median_s']:.2f}x" if r["jobs"] and r["jobs"] > 1 and r["row"] in base else ""
        result = ", ".join(f"{v} {k}" for k, v in sorted(r["counts"].items()))
        t.add_row(r["row"], str(r["jobs"] or "-"), str(r["items"]), result, str(r["repeat"]),
                  f"{r['median_s']:.2f}", f"{r['min_s']:.2f}", f"{r['max_s']:.2f}",
                  f"{r['items'] / r['median_s']:.1f}", speedup)
    console = Console(width=max(150, shutil.get_terminal_size().columns))
    console.print(t)
    for n in notes:
        console.print(n)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=None,
                   help="repetitions per row (default: 1 for the build rows, 5 for the no-op row)")
    p.add_argument("--jobs", default="1,2", help="--jobs values to compare (default: 1,2)")
    p.add_argument("--full-out", type=Path, default=None,
                   help="an existing full default build (e.g. .gpu/default) for the no-op row")
    p.add_argument("--wait", type=float, default=0.0,
                   help="wait up to this many seconds for FULL_OUT/manifest.json to appear")
    p.add_argument("--in-place", action="store_true", help="run the no-op rebuild in FULL_OUT itself (no copy)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"results file (default: {DEFAULT_JSON})")
    args = p.parse_args(argv)
    build_repeat = args.repeat or 1
    noop_repeat = args.repeat or 5
    jobs_list = [int(j) for j in args.jobs.split(",")]

    rows: list[dict] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="aot-bench-") as tmp_s:
        tmp = Path(tmp_s)
        env = _env(tmp / "cache")
        warm = run_build(["--only", NVRTC_SPECS[0], "--sm", "80", "--jobs", "1"], tmp / "warmup", env)  # stub, page cache
        driver, versions = warm["driver"], warm["versions"]
        rows += bench_subset(jobs_list, build_repeat, tmp, env)
        if args.full_out is None:
            notes.append("no-op row skipped: no --full-out DIR given (an existing full default build)")
        elif not wait_for(args.full_out / "manifest.json", args.wait):
            notes.append(f"no-op row skipped: {args.full_out / 'manifest.json'} does not exist")
        else:
            row = bench_noop(args.full_out, noop_repeat, tmp, env, args.in_place)
            rows.append(row)
            if not row["all_hits"]:
                notes.append(f"[red]warning:[/red] the no-op rebuild was not all hits: {row['counts']}")

    result = {"host": {"cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
                       "driver": driver, "versions": versions},
              "subset": {"cccl": {"specs": CCCL_SPECS, "sms": CCCL_SMS},
                         "nvrtc": {"specs": NVRTC_SPECS, "sms": NVRTC_SMS}},
              "rows": rows, "notes": notes, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print_table(rows, notes + [f"results: {args.json}"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
