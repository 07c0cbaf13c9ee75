"""What adopting aot adds to a library's ``import`` (issue 42): each installed example package imported in fresh
processes, two ways, interleaved:

* ``aot``: the package as its wheel installs it (``import aot``, ``Registry.from_package`` attaching its numba and
  CuPy kernels);
* ``plain``: the same package with ``aot`` replaced by an empty stand-in module whose ``Registry.from_package``
  does nothing: the library's own imports alone, the floor an adopting library is measured against.

    python3 benchmarks/import_cost.py --site SITE [--package numba_mypkg --package cupy_mypkg ...] [--runs 15]
        [--json FILE]

SITE is where the packages are installed (``pip install --target SITE``). Each process times its own
``import PACKAGE`` with ``time.perf_counter`` (the interpreter's start is the same for both ways and left out);
the parent prints per package the median of each way, the difference in milliseconds and the ratio, the
difference in CPU time (``time.process_time``: steadier than the wall clock on a shared host), and ``aot own``: the
CPU time of aot's own parts inside the aot way (``import aot`` and ``Registry.from_package``, timed in the process).
A package that imports numba-cuda varies by tens of milliseconds from one process to the next (its import is
0.5-0.9 s), more than aot adds; ``aot own`` does not carry that variance. aot must be compiled
to bytecode, as pip installs it (``python -m compileall -q aot`` for a checkout): an import that compiled an aot
module from source is refused (``--allow-source``: timed anyway), since Python's compiler would take most of it. The target
(issue 42): at most +20 ms for a package of about 100 kernels across the families.
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
import sys, time
from importlib.machinery import SourceFileLoader
compiled = []  # aot modules Python compiled from source inside the clock: no bytecode, not aot's own cost
_to_code = SourceFileLoader.source_to_code
def _counted(self, data, path, *a, **k):
    if "/aot/" in str(path):
        compiled.append(str(path))
    return _to_code(self, data, path, *a, **k)
SourceFileLoader.source_to_code = _counted
t0, c0 = time.perf_counter(), time.process_time()
own = 0.0  # aot's own CPU ms: its import and Registry.from_package (the way with aot only)
if sys.argv[2] == "aot":
    import aot
    from aot.runtime.loader import registry
    own = (time.process_time() - c0) * 1e3
    from_package = registry.Registry.from_package.__func__
    def _timed(cls, *a, **k):
        global own
        c = time.process_time()
        try:
            return from_package(cls, *a, **k)
        finally:
            own += (time.process_time() - c) * 1e3
    registry.Registry.from_package = classmethod(_timed)
__import__(sys.argv[1])
t1, c1 = time.perf_counter(), time.process_time()
print((t1 - t0) * 1e3, (c1 - c0) * 1e3, len(compiled), own)
"""

STAND_IN = '''"""An empty stand-in for aot (benchmarks/import_cost.py): the library's imports without aot's."""


class Registry:
    @classmethod
    def from_package(cls, *a, **k):
        return cls()
'''


def one(package: str, path: str, cwd: str, way: str) -> tuple[float, float, int, float]:
    """``cwd``: an empty folder (``-c`` puts the working directory first on ``sys.path``: run from a checkout,
    its ``aot`` would shadow the stand-in, and both ways would import aot)."""
    env = {**os.environ, "PYTHONPATH": path}
    r = subprocess.run([sys.executable, "-W", "ignore::Warning", "-c", CHILD, package, way], env=env, cwd=cwd,
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"import {package} failed ({path}):\n{r.stderr[-2000:]}")
    wall, cpu, compiled, own = r.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu), int(compiled), float(own)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", type=Path, required=True)
    ap.add_argument("--package", action="append", default=[])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--allow-source", action="store_true", help="time even where aot's modules have no bytecode")
    a = ap.parse_args(argv)
    packages = a.package or ["numba_mypkg", "cupy_mypkg", "adopt_mypkg"]
    base = os.environ.get("PYTHONPATH", "")
    rows = []
    with tempfile.TemporaryDirectory(prefix="aot-import-cost-") as tmp:
        stub, empty = Path(tmp) / "stub", Path(tmp) / "cwd"
        (stub / "aot").mkdir(parents=True)
        empty.mkdir()
        (stub / "aot" / "__init__.py").write_text(STAND_IN)
        plain = os.pathsep.join(p for p in (str(stub), str(a.site), base) if p)
        with_aot = os.pathsep.join(p for p in (str(a.site), base, str(Path(__file__).resolve().parent.parent))
                                   if p)  # this checkout's aot unless PYTHONPATH or the environment has one
        for pkg in packages:
            one(pkg, with_aot, str(empty), "aot"), one(pkg, plain, str(empty), "plain")  # bytecode, page cache
            t_aot, t_plain = [], []
            for _ in range(a.runs):
                t_aot.append(one(pkg, with_aot, str(empty), "aot"))
                t_plain.append(one(pkg, plain, str(empty), "plain"))
            source = max(n for _, _, n, _ in t_aot)
            if source and not a.allow_source:  # 1-2 ms each inside the clock: Python's compiler, not aot
                raise SystemExit(f"import {pkg} compiled {source} aot modules from source: no bytecode, as a pip "
                                 f"install has; run 'python -m compileall -q aot' first (or --allow-source)")
            m_aot, m_plain = (statistics.median(x for x, *_ in t) for t in (t_aot, t_plain))
            c_aot, c_plain = (statistics.median(c for _, c, *_ in t) for t in (t_aot, t_plain))
            rows.append({"package": pkg, "aot_ms": round(m_aot, 2), "plain_ms": round(m_plain, 2),
                         "added_ms": round(m_aot - m_plain, 2), "ratio": round(m_aot / m_plain, 3),
                         "cpu_added_ms": round(c_aot - c_plain, 2), "runs": a.runs,
                         "aot_own_cpu_ms": round(statistics.median(o for *_, o in t_aot), 2),
                         "aot_all": [round(x, 2) for x, *_ in t_aot],
                         "plain_all": [round(x, 2) for x, *_ in t_plain]})
    print(f"{'package':<16} {'plain ms':>9} {'aot ms':>9} {'added':>8} {'ratio':>7} {'cpu added':>10} {'aot own':>8}")
    for r in rows:
        print(f"{r['package']:<16} {r['plain_ms']:>9.1f} {r['aot_ms']:>9.1f} {r['added_ms']:>+8.1f} {r['ratio']:>7.3f} "
              f"{r['cpu_added_ms']:>+10.1f} {r['aot_own_cpu_ms']:>8.1f}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
