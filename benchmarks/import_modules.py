"""Where an adopting library's ``import`` differs with aot (issue 42): ``import PACKAGE`` in fresh processes, with
aot and with an empty stand-in (as benchmarks/import_cost.py), interleaved, under ``python -X importtime``; prints
each way's wall times, the modules whose median self time differs most, and the modules imported only with aot.
import_cost.py says how much; this says where (on the H200 a +96 ms median came out as process-to-process
variance spread over numpy's modules, no module imported only with aot).

    python3 benchmarks/import_modules.py SITE PACKAGE [--runs 5]

SITE holds the package and aot (``pip install --target SITE``; compile it to bytecode first, as pip would).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

STAND_IN = "class Registry:\n    @classmethod\n    def from_package(cls, *a, **k):\n        return cls()\n"
_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|\s*(\S+)")


def one(site: str, package: str, stand: str, way: str) -> tuple[float, dict[str, int]]:
    """(wall ms of the import, module -> self time in µs) of one fresh process."""
    path = site if way == "aot" else f"{stand}{os.pathsep}{site}"
    code = f"import time; t = time.perf_counter(); import {package}; print((time.perf_counter() - t) * 1e3)"
    r = subprocess.run([sys.executable, "-X", "importtime", "-W", "ignore", "-c", code], cwd=stand,
                       env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"import {package} failed ({way}):\n{r.stderr[-2000:]}")
    mods = {m.group(3): int(m.group(1)) for m in map(_LINE.match, r.stderr.splitlines()) if m}
    return float(r.stdout.strip().splitlines()[-1]), mods


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site")
    ap.add_argument("package")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aot-import-modules-") as stand:
        with open(os.path.join(stand, "aot.py"), "w") as f:
            f.write(STAND_IN)
        runs: dict[str, list[tuple[float, dict[str, int]]]] = {"aot": [], "plain": []}
        for _ in range(args.runs):
            for way in runs:
                runs[way].append(one(args.site, args.package, stand, way))
    for way, got in runs.items():
        print(f"{args.package} {way:5} wall ms {[round(w) for w, _ in got]}")
    seen = {way: set().union(*(m for _, m in got)) for way, got in runs.items()}
    rows = []
    for mod in seen["aot"] | seen["plain"]:
        a, p = (statistics.median(m.get(mod, 0) for _, m in runs[w]) for w in ("aot", "plain"))
        rows.append((a - p, a, p, mod))
    print("median self time (µs): aot - plain, aot, plain, module")
    for d, a, p, mod in sorted(rows, reverse=True)[:25]:
        print(f"{d:10.0f} {a:10.0f} {p:10.0f} {mod}")
    only = sorted(seen["aot"] - seen["plain"])
    print(f"only with aot: {len(only)} {only[:60]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
