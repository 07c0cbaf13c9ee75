"""What aot itself adds to a library's first packaged NVRTC hit, on a CPU host (issue 42: first operation at most
+2 ms over the library's own warm cuda.core cache). No GPU: nothing is launched, and ``by_source``'s load into the
device is stubbed (everything aot does before it, the index, the read and every check, is real).

Fresh processes, each: ``import aot`` and the library's kernels module, libnvrtc loaded (every way needs it: cuda.core's
key asks its version), ``--dists`` fake distributions on ``sys.path`` (the H200's Python has about 230: a metadata scan
there reads every one of them), then the clock around one first operation:

* ``own``: ``Program(src, "c++", ProgramOptions(...)).compile("cubin", cache=FileStreamProgramCache(warm folder))``;
* ``program_cache``: the same compile with ``cache=aot.program_cache(PACKAGE)``;
* ``by_source``: ``aot.by_source(PACKAGE).kernels(src, [kernel], flags)``, the driver's load stubbed.

One instrumented run per way counts what the first operation costs in things, not milliseconds (so a test can hold
it under any load): the aot modules it imports, the modules Python compiled from source for it (no valid bytecode:
``src``; an installed aot has none), metadata scans (``importlib.metadata`` ``Distribution.discover``), files opened
and their bytes, threads started, and the objects it leaves for the garbage collector (each brings the next
collection closer). Then ``--runs`` timed runs,
interleaved, each after a ``gc.collect()``: the median thread CPU time and wall time of the first operation, the
collections inside the clock, and what each way adds over ``own``.

    python benchmarks/first_hit_cpu.py --site SITE [--runs 15] [--dists 230] [--json FILE] [--profile FILE]

SITE holds the package as its wheel installs it (default adopt_mypkg: ``pip install --no-deps --target SITE
adopt_mypkg-*.whl``; or, without a wheel, ``cp -r examples/adopt-mypkg/adopt_mypkg SITE/`` and ``python -m aot bundle
--project examples/adopt-mypkg --out SITE/adopt_mypkg/artifacts --sm 90 --work /tmp/aot-work``). ``--profile``:
one more ``program_cache`` run under cProfile, the top 40 by cumulative time written to FILE. aot comes from
``PYTHONPATH`` or the environment; compile its modules to bytecode first, as pip installs them (``python -m
compileall -q aot``): a module without valid bytecode is compiled inside the clock, 1-2 ms each.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

WAYS = ("own", "program_cache", "by_source")

CHILD = r'''
import importlib, json, os, sys, time
cfg = json.loads(sys.argv[1])
way = cfg["way"]
from cuda.core import Program, ProgramOptions
from cuda.core.utils import FileStreamProgramCache
import aot
def ref(text):
    mod, attr = text.split(":")
    return getattr(importlib.import_module(mod), attr)
SRC, FLAGS = ref(cfg["source"]), ref(cfg["flags"])
from cuda.bindings import nvrtc
nvrtc.nvrtcVersion()  # libnvrtc loaded before the clock: every way loads it (cuda.core's key asks its version)
stubbed = []
if way == "by_source":  # no device here: the image checked by aot is handed to a stand-in for the driver's load
    from aot.runtime.loader import driver, library
    class Loaded:
        def __init__(self, name, payload, kind, kernels):
            self.kernels = {k: (name, len(payload), kind) for k in kernels}
        def get_kernel(self, k):
            return self.kernels[k]
    library.DriverLibrary = Loaded
    driver.require_driver = lambda what: None
    driver.ServedDevice.sm = lambda self: int(cfg["arch"].split("_")[1])
    stubbed = ["aot.runtime.loader.driver", "aot.runtime.loader.library"]
counts = None
if cfg["count"]:
    import _thread, builtins, importlib.metadata as md, threading
    counts = {"metadata_scans": 0, "files": [], "threads": 0}
    discover = md.Distribution.discover.__func__
    def counted_discover(cls, **kw):
        counts["metadata_scans"] += 1
        return discover(cls, **kw)
    md.Distribution.discover = classmethod(counted_discover)
    os_open, b_open = os.open, builtins.open
    def counted_os_open(path, *a, **k):
        counts["files"].append(os.fspath(path))
        return os_open(path, *a, **k)
    def counted_open(file, *a, **k):
        if not isinstance(file, int):
            counts["files"].append(os.fspath(file))
        return b_open(file, *a, **k)
    os.open, builtins.open = counted_os_open, counted_open
    start = _thread.start_new_thread
    def counted_start(*a, **k):
        counts["threads"] += 1
        return start(*a, **k)
    _thread.start_new_thread = threading._start_new_thread = counted_start
    counts["compiled"] = compiled = []
    from importlib.machinery import SourceFileLoader
    to_code = SourceFileLoader.source_to_code
    def counted_to_code(self, data, path, *a, **k):  # no valid bytecode: Python compiles the source
        compiled.append(os.fspath(path))
        return to_code(self, data, path, *a, **k)
    SourceFileLoader.source_to_code = counted_to_code
prof = None
if cfg["profile"]:
    import cProfile
    prof = cProfile.Profile()
import gc
gc.collect()  # the process's garbage paid before the clock, every way alike (benchmarks/first_op.py says why)
collections = []
def gc_watch(phase, info):
    if phase == "start":
        collections.append([info["generation"], time.perf_counter()])
    elif collections:
        collections[-1][1] = (time.perf_counter() - collections[-1][1]) * 1e3
gc.callbacks.append(gc_watch)
if counts is not None:  # the objects the first operation leaves behind for the collector: none collected meanwhile
    gc.disable()
    tracked = len(gc.get_objects())
before = set(sys.modules)
if prof is not None:
    prof.enable()
c0, t0 = time.thread_time(), time.perf_counter()
where = None
if way == "by_source":
    where = aot.by_source(cfg["package"]).kernels(SRC, [cfg["kernel"]], FLAGS)[cfg["kernel"]]
else:
    cache = FileStreamProgramCache(cfg["own_cache"]) if way == "own" else aot.program_cache(cfg["package"])
    Program(SRC, "c++", ProgramOptions(arch=cfg["arch"], **cfg["options"])).compile("cubin", cache=cache)
    where = dict(cache.counts) if way == "program_cache" else None
c1, t1 = time.thread_time(), time.perf_counter()
gc.callbacks.remove(gc_watch)
if counts is not None:
    counts["objects"] = len(gc.get_objects()) - tracked
    gc.enable()
if prof is not None:
    prof.disable()
    import io, pstats
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(40)
    with open(cfg["profile"], "w") as f:
        f.write(f"{way}: first operation {(t1 - t0) * 1e3:.3f} ms wall under cProfile\n" + text.getvalue())
new = sorted(set(sys.modules) - before)
aot_new = [m for m in new if m == "aot" or m.startswith("aot.")]
out = {"cpu_ms": (c1 - c0) * 1e3, "wall_ms": (t1 - t0) * 1e3, "gc_ms": sum(ms for _, ms in collections),
       "where": where, "aot_modules": aot_new,
       "other_modules": [m for m in new if m not in aot_new], "stubbed": stubbed}
if counts is not None:
    out.update(counts)
print(json.dumps(out, default=str))
'''


def fake_dists(where: Path, n: int) -> None:
    """``n`` distributions, as pip leaves them in site-packages (``<name>-<version>.dist-info/METADATA``)."""
    for i in range(n):
        d = where / f"aot_bench_dist{i}-1.0.{i}.dist-info"
        d.mkdir(parents=True)
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: aot-bench-dist{i}\nVersion: 1.0.{i}\n")
        (d / "top_level.txt").write_text(f"aot_bench_dist{i}\n")


def one(cfg: dict, env: dict) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], env=env, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"{cfg['way']} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def relative(files: list[str], site: Path) -> list[str]:
    """The files a first operation opened, relative to SITE where inside it."""
    out = []
    for f in files:
        try:
            out.append(Path(f).resolve().relative_to(site.resolve()).as_posix())
        except ValueError:
            out.append(f)
    return out


DEFAULTS = {"package": "adopt_mypkg", "source": "adopt_mypkg.kernels:SAXPY", "flags": "adopt_mypkg.kernels:OPTIONS",
            "kernel": "saxpy", "arch": "sm_90", "options": {"std": "c++17", "define_macro": "BLOCK=256"}}


@contextlib.contextmanager
def environment(site: Path, dists: int, **cfg) -> Iterator[tuple[dict, dict]]:
    """(the children's environment, their configuration) with ``dists`` fake distributions and a private aot cache
    and own cache, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="aot-first-hit-") as tmp:
        fake_dists(Path(tmp) / "dists", dists)
        base = os.environ.get("PYTHONPATH", "")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(site), base, str(Path(tmp) / "dists"))
                                                           if p),
               "AOT_CACHE_DIR": str(Path(tmp) / "aot-cache")}
        yield env, {**DEFAULTS, **cfg, "own_cache": str(Path(tmp) / "own-cache"), "count": False, "profile": None}


def counted(site: Path, way: str, env: dict, cfg: dict) -> dict:
    """One instrumented first operation of ``way`` (the module doc says what it counts), its files relative to
    ``site`` and their bytes."""
    r = one(dict(cfg, way=way, count=True), env)
    r["files"] = relative(r["files"], site)
    r["bytes_read"] = sum((site / f).stat().st_size for f in r["files"] if (site / f).is_file())
    return r


def measure(a: argparse.Namespace) -> dict:
    """``{"rows": [...], "counted": {way: the instrumented run}}``."""
    site = a.site.resolve()
    cfg = {k: getattr(a, k) for k in ("package", "source", "flags", "kernel", "arch")}
    with environment(site, a.dists, **cfg, options=json.loads(a.options)) as (env, cfg):
        for way in a.ways:  # uncounted: warms the own cache, the page cache and (where writable) bytecode
            one(dict(cfg, way=way), env)
        counted_runs = {way: counted(site, way, env, cfg) for way in a.ways}
        if a.profile is not None:
            one(dict(cfg, way="program_cache", profile=str(a.profile.resolve())), env)
        got: dict[str, list[dict]] = {w: [] for w in a.ways}
        for _ in range(a.runs):
            for way in a.ways:
                got[way].append(one(dict(cfg, way=way), env))
    own = statistics.median(r["cpu_ms"] for r in got["own"]) if "own" in got else 0.0
    own_wall = statistics.median(r["wall_ms"] for r in got["own"]) if "own" in got else 0.0
    rows = []
    for way, rs in got.items():
        cpu, wall = statistics.median(r["cpu_ms"] for r in rs), statistics.median(r["wall_ms"] for r in rs)
        c = counted_runs[way]
        rows.append({"way": way, "cpu_ms": round(cpu, 3), "added_cpu_ms": round(cpu - own, 3),
                     "gc_ms": round(statistics.median(r["gc_ms"] for r in rs), 3), "objects": c["objects"],
                     "wall_ms": round(wall, 3), "added_wall_ms": round(wall - own_wall, 3), "runs": a.runs,
                     "aot_modules": len(c["aot_modules"]), "from_source": len(c["compiled"]),
                     "metadata_scans": c["metadata_scans"], "files": len(c["files"]), "bytes_read": c["bytes_read"],
                     "threads": c["threads"], "where": c["where"] if way != "by_source" else str(c["where"])})
    return {"rows": rows, "counted": counted_runs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", type=Path, required=True)
    ap.add_argument("--package", default=DEFAULTS["package"])
    ap.add_argument("--source", default=DEFAULTS["source"], help="MODULE:ATTR, the library's source text")
    ap.add_argument("--flags", default=DEFAULTS["flags"], help="MODULE:ATTR, its NVRTC flags (by_source)")
    ap.add_argument("--options", default=json.dumps(DEFAULTS["options"]),
                    help="JSON: the ProgramOptions keywords of its own compile (besides arch)")
    ap.add_argument("--kernel", default=DEFAULTS["kernel"])
    ap.add_argument("--arch", default=DEFAULTS["arch"])
    ap.add_argument("--ways", default=",".join(WAYS), type=lambda s: tuple(s.split(",")))
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--dists", type=int, default=230, help="fake distributions on sys.path (default 230)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--profile", type=Path, help="cProfile top 40 (cumulative) of one program_cache first operation")
    a = ap.parse_args(argv)
    result = measure(a)
    print(f"{'way':<14} {'cpu ms':>8} {'added':>8} {'wall ms':>8} {'added':>8} {'gc ms':>6} {'aot mods':>8} {'src':>4} "
          f"{'md scans':>8} {'files':>5} {'bytes':>7} {'threads':>7} {'objects':>7}")
    for r in result["rows"]:
        print(f"{r['way']:<14} {r['cpu_ms']:>8.3f} {r['added_cpu_ms']:>+8.3f} {r['wall_ms']:>8.3f} "
              f"{r['added_wall_ms']:>+8.3f} {r['gc_ms']:>6.2f} {r['aot_modules']:>8} {r['from_source']:>4} "
              f"{r['metadata_scans']:>8} {r['files']:>5} {r['bytes_read']:>7} {r['threads']:>7} {r['objects']:>7}")
    for way, c in result["counted"].items():
        print(f"{way}: imported {', '.join(c['aot_modules']) or 'no aot module'}; opened {', '.join(c['files']) or '-'}")
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
