"""A library-sized NVRTC matrix: 200 units from Python code, built for 8 SMs (CPU; no GPU needed).

Writes a throw-away package whose kernels are Python strings, the way GPU Python libraries keep them:
``--constants`` ``str`` constants and ``--functions`` functions rendered for float32 and float64
(``source: "scalepkg.kernels_NN:render"`` with ``params: {dtype: [float32, float64]}``): 120 + 2 x 40 = 200
units, each a small elementwise ``extern "C"`` kernel. Then, each in a fresh process, imports included:

  validate   ``aot validate``: the matrix read, every module imported, every variant rendered;
  build      ``aot build --sm <8 SMs> --jobs N`` with its progress bar and report (the CLI as users run it);
  rebuild    the same command again: every item a hit;
  first use  ``aot.Registry(out).names()`` then ``.spec(one)``: the manifest read and every spec
             checked by the validator (the registry's first-use cost), median of ``--runs`` processes;

and the size of ``manifest.json``, the artifacts and the report.

    python benchmarks/nvrtc_scale.py [--jobs 2] [--runs 5] [--baseline /path/to/other/aot/checkout]
                                     [--json benchmarks/results/nvrtc_scale.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMS = "75,80,86,89,90,100,110,120"

KERNEL = '''extern "C" __global__ void {name}(const {t}* __restrict__ x, const {t}* __restrict__ y,
                                     {t}* __restrict__ out, {t} a, long long n) {{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {{
        {t} v = x[i] * a + y[i] * ({t}){k};
        out[i] = v > ({t})0 ? v : -v;
    }}
}}
'''


def write_package(root: Path, constants: int, functions: int) -> Path:
    """The package (one module per 10 kernels, as libraries split them) and its build_matrix.yaml."""
    pkg = root / "scalepkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    lines = ["version: 1", "nvrtc:"]
    for i in range(constants):
        mod = f"consts_{i // 10:02d}"
        with open(pkg / f"{mod}.py", "a") as f:
            f.write(f"K{i:03d} = {KERNEL.format(name=f'k{i:03d}', t='float', k=i)!r}\n")
        lines.append(f'  - {{name: k{i:03d}, source: "scalepkg.{mod}:K{i:03d}", kernels: [k{i:03d}], '
                     f'options: ["-std=c++17"]}}')
    for j in range(functions):
        mod = f"render_{j:02d}"
        (pkg / f"{mod}.py").write_text(textwrap.dedent(f"""\
            _T = {{"float32": "float", "float64": "double"}}
            _SRC = {KERNEL!r}

            def render(dtype):
                return _SRC.format(name="f{j:03d}", t=_T[dtype], k={j})
            """))
        lines.append(f'  - {{name: f{j:03d}, source: "scalepkg.{mod}:render", params: {{dtype: [float32, float64]}}, '
                     f'kernels: [f{j:03d}], options: ["-std=c++17"]}}')
    matrix = root / "build_matrix.yaml"
    matrix.write_text("\n".join(lines) + "\n")
    return matrix


def run(cmd: list[str], cwd: Path, aot_root: Path = ROOT) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(aot_root), str(cwd)])}
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    s = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return s, p.stdout + p.stderr


FIRST_USE = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    import aot
    reg = aot.Registry(sys.argv[1])
    names = reg.names()
    t1 = time.perf_counter()
    reg.spec(names[-1])
    print(json.dumps({"ms": (t1 - t0) * 1e3, "specs": len(names)}))
""")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--constants", type=int, default=120)
    ap.add_argument("--functions", type=int, default=40)
    ap.add_argument("--sm", default=SMS)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--baseline", type=Path, help="another aot checkout: its Registry first use, interleaved")
    a = ap.parse_args(argv)
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        matrix = write_package(root, a.constants, a.functions)
        out = root / "out"
        validate_s, text = run([py, "-m", "aot", "validate", "--matrix", str(matrix)], root)
        build_s, build_log = run([py, "-m", "aot", "build", "--matrix", str(matrix), "--sm", a.sm, "--out", str(out),
                                  "--jobs", str(a.jobs)], root)
        report = json.loads((out / "build-report.json").read_text())
        rebuild_s, _ = run([py, "-m", "aot", "build", "--matrix", str(matrix), "--sm", a.sm, "--out", str(out),
                            "--jobs", str(a.jobs), "--quiet"], root)
        rebuild_counts = json.loads((out / "build-report.json").read_text()).get("counts")
        first, base = [], []
        for _ in range(a.runs):  # fresh processes, this checkout and the baseline interleaved
            first.append(json.loads(run([py, "-c", FIRST_USE, str(out)], root)[1].strip().splitlines()[-1]))
            if a.baseline:
                base.append(json.loads(run([py, "-c", FIRST_USE, str(out)], root, a.baseline)[1]
                                       .strip().splitlines()[-1]))
        manifest = (out / "manifest.json").stat().st_size
        files = [p for p in out.rglob("*.aot")]
        result = {
            "units": first[0]["specs"], "sms": [int(s) for s in a.sm.split(",")], "jobs": a.jobs,
            "cpus": os.cpu_count(), "items": len(report.get("items", [])),
            "validate_s": round(validate_s, 2), "build_s": round(build_s, 1), "rebuild_all_hits_s": round(rebuild_s, 2),
            "build_report_counts": report.get("counts"), "rebuild_report_counts": rebuild_counts,
            "manifest_bytes": manifest, "artifact_files": len(files),
            "artifact_bytes": sum(p.stat().st_size for p in files),
            "registry_first_use_ms_median": round(statistics.median(r["ms"] for r in first), 1),
            "registry_first_use_ms_runs": [round(r["ms"], 1) for r in first],
            "baseline": str(a.baseline) if a.baseline else None,
            "baseline_commit": subprocess.run(["git", "-C", str(a.baseline), "rev-parse", "--short", "HEAD"],
                                              capture_output=True, text=True).stdout.strip() if a.baseline else None,
            "commit": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip(),
            "baseline_first_use_ms_median": round(statistics.median(r["ms"] for r in base), 1) if base else None,
            "baseline_first_use_ms_runs": [round(r["ms"], 1) for r in base],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "build_log_tail": build_log.strip().splitlines()[-4:],
            "command": f"python benchmarks/nvrtc_scale.py --jobs {a.jobs} --runs {a.runs}"
                       + (f" --baseline {a.baseline}" if a.baseline else ""),
        }
    print(json.dumps(result, indent=1))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
