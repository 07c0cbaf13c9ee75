"""A library's first GPU operation with aot against the same operation from the library's own warm cache (issue
42: first operation at most +2 ms over the warm own cache; steady launches at most 1.01x). Needs a GPU.

Each run is a fresh process that imports cuda.core, numpy and the package, opens the device, makes a stream and
the buffers (the same for every way, not timed), then times its first operation: compile or look up ``saxpy`` of
examples/adopt-mypkg, get the kernel, launch it once and synchronise. Then ``--launches`` more launches and one
synchronisation (steady per-launch microseconds). Three ways, interleaved:

* ``own``: ``Program(src, "c++", ProgramOptions(arch, std, define_macro)).compile("cubin", cache=...)`` with
  cuda.core's own ``FileStreamProgramCache`` in a folder warmed by an uncounted first run (the library's warm
  cache: the floor);
* ``program_cache``: the same compile with ``cache=aot.program_cache("adopt_mypkg")`` (the packaged image);
* ``by_source``: ``aot.by_source("adopt_mypkg").kernels(src, ["saxpy"], OPTIONS)``.

    python benchmarks/first_op.py --site SITE [--runs 15] [--launches 2000] [--json FILE] [--profile FILE]
    python benchmarks/first_op.py --site SITE --cpu [--runs 15]      # no GPU: the lookups alone

The garbage collector: a process's first operation pays whatever collection its allocations trigger, and one that
allocates a few hundred objects (aot's first hit) lands on the debt of everything the process allocated before it:
on the CPU host a first hit's window held a generation-1 collection of 2-7 ms where ``own`` (16 objects) held none.
So each process runs ``gc.collect()`` just before the clock, every way alike (``--no-collect``: not), and each row
gives the median milliseconds of the collections that still ran inside the clock (``gc ms``).

``--cpu`` (a driverless host): nothing is opened or launched; ``own`` and ``program_cache`` time the compile call
with the cache (cuda.core keys it and the cache answers: no device needed), ``by_source`` its lookup
(``.unit(...)``: the key, the index, the check; the image's load needs a device). Each row also names the aot
modules the first operation imported (``imports``): what a library pays for on its first call.

SITE holds adopt_mypkg as its wheel installs it (``pip install --no-deps --target SITE adopt_mypkg-*.whl``;
.ci/gpu/prepare.sh builds the wheel into .whl/). aot itself comes from ``PYTHONPATH`` or the environment, compiled
to bytecode as pip installs it (``python -m compileall -q aot`` for a checkout): a first operation that compiled an
aot module from source is refused (``--allow-source`` times it anyway): Python's compiler would take most of the
time (issue 42, on the CPU host: a first hit's 11 aot modules cost 16 ms of CPU without bytecode, 4.5 ms with it). ``--profile FILE``: one more run of
``program_cache`` and of ``by_source`` under cProfile, the top 40 by cumulative time of each into FILE. Prints
per way the median first-operation milliseconds, the difference to ``own`` and the ratio, and the steady
per-launch microseconds and their ratio to ``own``.
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

WAYS = ("own", "program_cache", "by_source")

#: Both children's garbage collection: collected before the clock (``--no-collect``: not), each collection inside
#: the clock timed.
GC_WATCH = r'''import gc
if sys.argv[4] == "1":
    gc.collect()  # the process's garbage paid before the clock, in every way alike (see the module doc)
collections = []  # (generation, ms) of each collection inside the clock
def _gc_watch(phase, info):
    if phase == "start":
        collections.append([info["generation"], time.perf_counter()])
    elif collections:
        collections[-1][1] = (time.perf_counter() - collections[-1][1]) * 1e3
gc.callbacks.append(_gc_watch)
'''

#: Both children's count of aot modules Python compiles from source inside the clock (no valid bytecode).
SOURCE_WATCH = r'''from importlib.machinery import SourceFileLoader
compiled = []  # aot modules Python compiled from source inside the clock (no valid bytecode): not aot's own cost
_to_code = SourceFileLoader.source_to_code
def _counted_to_code(self, data, path, *a, **k):
    compiled.append(str(path))
    return _to_code(self, data, path, *a, **k)
SourceFileLoader.source_to_code = _counted_to_code
'''

CPU_CHILD = r"""
import json, sys, time
way, cache_dir = sys.argv[1], sys.argv[2]
""" + SOURCE_WATCH + r"""import numpy as np
from cuda.core import Program, ProgramOptions
from cuda.core.utils import FileStreamProgramCache
import aot
from adopt_mypkg.kernels import OPTIONS, SAXPY
before = set(sys.modules)
""" + GC_WATCH + r"""t0 = time.perf_counter()
if way == "by_source":
    where = aot.by_source("adopt_mypkg").unit(SAXPY, OPTIONS)
else:
    cache = FileStreamProgramCache(cache_dir) if way == "own" else aot.program_cache("adopt_mypkg")
    opts = ProgramOptions(arch="sm_90", std="c++17", define_macro="BLOCK=256")
    Program(SAXPY, "c++", opts).compile("cubin", cache=cache)
    where = dict(cache.counts) if way == "program_cache" else None
t1 = time.perf_counter()
gc.callbacks.remove(_gc_watch)
new = sorted(m for m in set(sys.modules) - before if m.startswith("aot.") or m in ("logging", "yaml", "rich"))
print(json.dumps({"first_ms": (t1 - t0) * 1e3, "launch_us": 1.0, "where": where, "imports": new,
                  "gc": [(g, ms) for g, ms in collections],
                  "from_source": [p for p in compiled if "/aot/" in p]}))
"""

CHILD = r"""
import json, sys, time
way, cache_dir, launches = sys.argv[1], sys.argv[2], int(sys.argv[3])
""" + SOURCE_WATCH + r"""import numpy as np
from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
from cuda.core.utils import FileStreamProgramCache
import aot
from adopt_mypkg.kernels import OPTIONS, SAXPY
before = set(sys.modules)
dev = Device()
dev.set_current()
cc = dev.compute_capability
stream = dev.create_stream()
n = 1 << 20
x = dev.allocate(4 * n, stream=stream)  # keyword-only in cuda.core 1.x
y = dev.allocate(4 * n, stream=stream)
cfg = LaunchConfig(grid=(n + 255) // 256, block=256)
args = (np.float32(2.0), x, y, np.int32(n))
stream.sync()
prof = None
if len(sys.argv) > 5:  # --profile: where the first operation's time goes (cProfile, cumulative, top 40)
    import cProfile
    prof = cProfile.Profile()
""" + GC_WATCH + r"""if prof is not None:
    prof.enable()
t0 = time.perf_counter()
if way == "by_source":
    kernel = aot.by_source("adopt_mypkg").kernels(SAXPY, ["saxpy"], OPTIONS)["saxpy"]
else:
    cache = FileStreamProgramCache(cache_dir) if way == "own" else aot.program_cache("adopt_mypkg")
    opts = ProgramOptions(arch=f"sm_{cc.major}{cc.minor}", std="c++17", define_macro="BLOCK=256")
    kernel = Program(SAXPY, "c++", opts).compile("cubin", cache=cache).get_kernel("saxpy")
launch(stream, cfg, kernel, *args)
stream.sync()
t1 = time.perf_counter()
gc.callbacks.remove(_gc_watch)
if prof is not None:
    prof.disable()
    import io, pstats
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)
    with open(sys.argv[5], "a") as f:  # every way profiled goes into the one file
        f.write(f"==== {way}: first operation {(t1 - t0) * 1e3:.3f} ms under cProfile\n{text.getvalue()}\n")
for _ in range(launches):
    launch(stream, cfg, kernel, *args)
stream.sync()
t2 = time.perf_counter()
where = None
if way == "program_cache":
    where = dict(aot.program_cache("adopt_mypkg").counts)
elif way == "by_source":
    where = aot.by_source("adopt_mypkg").source_of(SAXPY, ["saxpy"], OPTIONS)[1]
new = sorted(m for m in set(sys.modules) - before if m.startswith("aot.") or m in ("logging", "yaml", "rich"))
print(json.dumps({"first_ms": (t1 - t0) * 1e3, "launch_us": (t2 - t1) / max(launches, 1) * 1e6, "where": where,
                  "imports": new, "gc": [(g, ms) for g, ms in collections], "from_source": [p for p in compiled if "/aot/" in p]}))
"""


def one(way: str, cache_dir: str, launches: int, env: dict, profile: Path | None = None, cpu: bool = False,
        collect: bool = True) -> dict:
    extra = [str(profile)] if profile is not None else []
    child = CPU_CHILD if cpu else CHILD
    r = subprocess.run([sys.executable, "-c", child, way, cache_dir, str(launches), "1" if collect else "0", *extra],
                       env=env,
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"{way} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--cpu", action="store_true", help="no GPU: time the lookups alone (see the module doc)")
    ap.add_argument("--profile", type=Path, help="a file: one more run of program_cache and of by_source, each "
                    "first operation under cProfile, the top 40 by cumulative time of both written there (not counted)")
    ap.add_argument("--allow-source", action="store_true", help="time even where aot's modules have no bytecode")
    ap.add_argument("--no-collect", action="store_true", help="no gc.collect() before the clock (see the module doc)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="aot-first-op-") as tmp:
        base = os.environ.get("PYTHONPATH", "")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(a.site), base) if p),
               "AOT_CACHE_DIR": str(Path(tmp) / "aot-cache")}
        own_cache = str(Path(tmp) / "own-cache")
        for way in WAYS:  # uncounted: warms the own cache, the page cache and bytecode
            first = one(way, own_cache, 10, env, cpu=a.cpu)
            if way == "program_cache" and first["where"]["packaged"] != 1:
                raise SystemExit(f"program_cache did not serve the packaged image: {first['where']}")
            if way == "by_source" and first["where"] != ("saxpy" if a.cpu else "packaged"):
                raise SystemExit(f"by_source served from {first['where']}, not the package")
        if a.profile is not None and not a.cpu:
            a.profile.unlink(missing_ok=True)
            for way in WAYS[1:]:
                one(way, own_cache, 10, env, a.profile, collect=not a.no_collect)
        got: dict[str, list[dict]] = {w: [] for w in WAYS}
        for _ in range(a.runs):
            for way in WAYS:
                got[way].append(one(way, own_cache, a.launches, env, cpu=a.cpu, collect=not a.no_collect))
    source = sorted({p for rs in got.values() for r in rs for p in r.get("from_source", ())})
    if source and not a.allow_source:  # each costs 1-2 ms inside the clock: Python's compiler, not aot
        raise SystemExit(f"the timed processes compiled {len(source)} aot modules from source ({source[0]}, ...): "
                         f"no bytecode, as a pip install has; run 'python -m compileall -q aot' first "
                         f"(or --allow-source)")
    med = {w: (statistics.median(r["first_ms"] for r in rs), statistics.median(r["launch_us"] for r in rs))
           for w, rs in got.items()}
    own_first, own_launch = med["own"]
    rows = [{"way": w, "first_ms": round(f, 3), "added_ms": round(f - own_first, 3), "ratio": round(f / own_first, 3),
             "launch_us": round(lu, 3), "launch_ratio": round(lu / own_launch, 4), "runs": a.runs,
             "first_all": [round(r["first_ms"], 3) for r in got[w]], "imports": got[w][0].get("imports"),
             "gc_ms": round(statistics.median(sum(ms for _, ms in r["gc"]) for r in got[w]), 3),
             "gc_all": [r["gc"] for r in got[w]], "collected_before": not a.no_collect}
            for w, (f, lu) in med.items()]
    print(f"{'way':<14} {'first ms':>9} {'added':>8} {'ratio':>7} {'launch us':>10} {'ratio':>7} {'gc ms':>6}")
    for r in rows:
        print(f"{r['way']:<14} {r['first_ms']:>9.2f} {r['added_ms']:>+8.2f} {r['ratio']:>7.3f} {r['launch_us']:>10.2f} "
              f"{r['launch_ratio']:>7.4f} {r['gc_ms']:>6.2f}")
    for r in rows:
        print(f"{r['way']}: the first operation imported {len(r['imports'] or [])} aot modules: "
              f"{', '.join(r['imports'] or []) or 'none'}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
