"""What the cccl-legacy key's hashing costs the imports it runs beside (issue 44's remainder, issue 42's import
target): in fresh processes, interleaved, ``import MODULES`` timed alone, beside
``cccl_legacy_files.sha256_many`` hashing FILES in a child Python (how the shims hash since 2026-11-29), and
beside the same hashing in threads of the importing process (how they hashed before). Prints each way's median
import time, its ratio to the import alone, and when the hashing finished.

    python3 benchmarks/hash_beside_import.py --files DIR [--files DIR ...] [--modules numba.cuda,cupy] [--runs 7]

DIR: folders whose every file is hashed (the CUDA wheels' ``nvidia/`` folder holds the compilers, NVVM and the
headers the key reads: on the H200 about the key's size). Needs aot importable (``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_ONE = r"""
import json, os, sys, threading, time
way, modules, listing = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
from aot.runtime.adapters import cccl_legacy_files as F
paths = open(listing).read().split("\0")
done = {}
def hash_them():
    F.sha256_many(paths, child=(way == "child"))
    done["t"] = time.perf_counter()
t0 = time.perf_counter()
if way != "alone":
    worker = threading.Thread(target=hash_them, daemon=True)
    worker.start()
for m in modules:
    __import__(m)
imported = time.perf_counter() - t0
if way != "alone":
    worker.join()
print(json.dumps({"way": way, "import_ms": imported * 1e3,
                  "hashed_ms": (done["t"] - t0) * 1e3 if done else None}))
"""
WAYS = ("alone", "child", "threads")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", action="append", required=True, help="a folder whose every file is hashed")
    ap.add_argument("--modules", default="numba.cuda,cupy", help="comma-separated modules to import")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--listing", default=None, help="where to write the file list (default: beside $TMPDIR)")
    args = ap.parse_args(argv)
    paths = sorted((os.path.join(d, f) for root in args.files for d, _, fs in os.walk(root) for f in fs
                    if os.path.isfile(os.path.join(d, f))), key=lambda p: -os.path.getsize(p))
    size = sum(os.path.getsize(p) for p in paths)
    import tempfile
    fd, listing = tempfile.mkstemp(prefix="aot-hash-listing-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write("\0".join(paths))
        rows: dict[str, list[dict]] = {w: [] for w in WAYS}
        for i in range(args.runs + 1):  # the first round warms the page cache: left out
            for way in WAYS:
                r = subprocess.run([sys.executable, "-W", "ignore", "-c", _ONE, way, args.modules, listing],
                                   capture_output=True, text=True, timeout=600)
                if r.returncode != 0:
                    raise SystemExit(f"{way}: {r.stderr[-2000:]}")
                if i:
                    rows[way].append(json.loads(r.stdout.strip().splitlines()[-1]))
    finally:
        os.unlink(listing)
    print(f"{len(paths)} files, {size / 1e6:.0f} MB hashed beside `import {args.modules}`, "
          f"{args.runs} fresh processes a way, interleaved; cpus {len(os.sched_getaffinity(0))}")
    alone = statistics.median(r["import_ms"] for r in rows["alone"])
    for way in WAYS:
        imp = statistics.median(r["import_ms"] for r in rows[way])
        hashed = [r["hashed_ms"] for r in rows[way] if r["hashed_ms"] is not None]
        tail = f", hashing done at {statistics.median(hashed):.0f} ms" if hashed else ""
        print(f"{way:8} import {imp:7.1f} ms median (range {min(r['import_ms'] for r in rows[way]):.0f}-"
              f"{max(r['import_ms'] for r in rows[way]):.0f}), {imp / alone:.2f}x of alone{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
