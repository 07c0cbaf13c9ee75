"""Warm against the driver's own limit, and the first result with a warmup in flight (GPU; issues 24, 29).

    python benchmarks/warm_limit.py --set default=DIR [--set libset=DIR2 --set m100=DIR3 ...] [--runs 5]
        [--json FILE] [--variants new,today] [--name reduce_sum_f64]

The sets: the default matrix (``python -m aot build --sm 90 --out .gpu/default``), the library-shaped set
(``benchmarks/gen_libset.py``: 35 CCCL specs, 180 NVRTC units of 1-26 kernels) and the 100/1000-spec sets
(``benchmarks/warm_matrix.py``).

Every number comes from a fresh ``python -c`` child, numpy imported first; kinds of child interleave run by
run, and a first round of every kind (cold files, cupy's first import) is run and left out. Per artifact set:

  floor         ``import cuda.compute`` in one thread while another creates the context (ctypes, device 0's
                primary context): what any CUDA program pays first.
  driver        the driver's limit, measured: a thread creates the context, then loads exactly the cubins a
                warmup of the set loads (each spec's best artifact for the device; a CCCL spec's cubin as
                cuda.compute's build result holds it), serially, with plain driver calls through ctypes
                (``cuLibraryLoadData``, ``cuLibraryEnumerateKernels``, ``cuKernelGetFunction`` on every
                kernel), while the main thread imports cuda.compute. Wall until both are done.
  driver-alone  the same loads with no import beside them (no thread waits for the GIL between its driver
                calls): ``context + sum of loads``; the CCCL specs' loads are summed apart too.
  warm-VARIANT  aot's warm-all: before ``import aot`` until ``Registry(DIR).request_warmup()`` +
                ``ensure_warm()`` return, every spec served, none with errors, every kernel loaded.
  first-nowarm  an application's first result: ``import aot``, ``Registry(DIR)``, ``import cupy``, its input
                to the device (``cupy.asarray``), ``cccl(NAME)``, the temp-storage query and the run on 2^20
                items, the result on the host (checked against numpy); from before ``import aot``.
  first-VARIANT the same with ``request_warmup()`` (every spec) right after ``Registry(DIR)``: the warmup is
                in flight when the application asks for its spec.
  catalog       ``Registry(DIR)`` and its first use (``names()``: the manifest read and every spec checked).

The limit (issue 29) is ``max(import + sum of CCCL loads, context + sum of all loads)``, medians of the
``floor`` import leg and the ``driver-alone`` children: a CCCL blob cannot load before cuda.compute is
imported (its library is loaded by cuda-cccl's own C loader), an NVRTC unit can load as soon as the
context exists. The ``driver`` child (every load beside the import) is reported, not used. VARIANTs set
:class:`aot.runtime.loader.threads.Tuning` right after ``import aot``: ``new`` (the shipped defaults), ``today``
(before issue 24: 4 workers at full speed, no caller priority), ``eager`` (never polite), ``nograce``,
``sw`` (GIL switch interval 0.5 ms while warming), ``w2`` (2 workers), ``allw`` (every worker loads while
CUDA's packages import, as before issue 29's tuning).

Targets (issues 24, 29): first-VARIANT <= 1.05x first-nowarm; warm <= 1.15x the limit; the catalog's
first use of the library-shaped set <= 30 ms. Exit status 0; 1 a child
failed or a warmup was incomplete; 2 bad arguments; 6 no usable GPU.
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
from pathlib import Path

VARIANTS = {
    "new": {},
    "today": {"workers": 4, "polite": False, "caller_first": False, "grace": 0.0, "switch_interval": None},
    "eager": {"polite": False},
    "nograce": {"grace": 0.0},
    "sw": {"switch_interval": 0.0005},
    "w2": {"workers": 2},
    "allw": {"single_until_imported": False},
    "rel": {"gil_held_below": 0},  # every unit's driver call hands the GIL over (before issue 29's second pass)
    "yield": {"import_yield": 1e-4},  # the unit worker sleeps 0.1 ms before each unit while CUDA imports
    "pre": {"precheck_units_ahead": True},  # every unit prechecked in the request's thread (before the 3rd pass)
}
TARGET_FIRST, TARGET_LIMIT = 1.05, 1.15

EXTRACT = textwrap.dedent(r"""
    # Parent-side (untimed): the cubin each spec's warmup loads, for the driver children.
    import json, sys, warnings
    warnings.simplefilter("ignore")
    root, out = sys.argv[1], sys.argv[2]
    from aot.runtime.loader.registry import Registry
    from aot.runtime.warmup import warm as _warm
    from aot.core import format as fmt
    from cuda.core import Device
    cc = Device(0).compute_capability
    sm = 10 * cc[0] + cc[1]
    reg = Registry(root, device_sm=sm)
    index, blobs, pos = [], [], 0
    for name in reg.names():
        spec = reg.spec(name)
        cands = reg.packaged_candidates(spec, sm)
        if not cands:
            raise SystemExit(f"{name}: no packaged artifact for sm_{sm}")
        art = fmt.read(reg.manifest.path_of(cands[0].ref))
        if spec.family == "cccl":
            import cuda.compute
            obj = cuda.compute.deserialize(art.payload)
            holder = getattr(obj, "partitioner", obj)
            results = list(holder.build_results.values())
            if len(results) != 1:
                raise SystemExit(f"{name}: {len(results)} build results")
            cubin = results[0]._get_cubin()
        elif art.kind == "cubin":
            cubin = art.payload
        else:
            raise SystemExit(f"{name}: best artifact is {art.kind}, not a cubin")
        index.append([name, pos, len(cubin), spec.family])
        blobs.append(cubin)
        pos += len(cubin)
    with open(out, "wb") as f:
        f.write(b"".join(blobs))
    with open(out + ".json", "w") as f:
        json.dump(index, f)
    print(json.dumps({"specs": len(index), "bytes": pos}))
""")

PRELUDE = textwrap.dedent(r"""
    import ctypes, json, os, sys, threading, time, warnings
    warnings.simplefilter("ignore")
    import numpy
    kind, root, arg = sys.argv[1], sys.argv[2], sys.argv[3]
    out = {"kind": kind}
    def tune(variant):
        from aot.runtime.loader import threads
        for k, v in json.loads(variant).items():
            setattr(threads.TUNING, k, v)
""")

FLOOR = PRELUDE + textwrap.dedent(r"""
    times = {}
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
    th = threading.Thread(target=ctx); th.start()
    import cuda.compute
    times["import_ms"] = (time.perf_counter() - t0) * 1e3
    th.join()
    out["wall_ms"] = (time.perf_counter() - t0) * 1e3
    out.update(times)
    print(json.dumps(out))
""")

DRIVER = PRELUDE + textwrap.dedent(r"""
    index = json.load(open(arg + ".json"))
    data = open(arg, "rb").read()
    images = [ctypes.create_string_buffer(data[o:o + n], n) for _, o, n, _ in index]   # in memory before t0
    cccl = [fam == "cccl" for _, _, _, fam in index]
    cu = ctypes.CDLL("libcuda.so.1")
    P, U = ctypes.c_void_p, ctypes.c_uint
    times = {}
    def check(r, what):
        if r:
            raise SystemExit(f"driver error {r} in {what}")
    def loads():
        t = time.perf_counter()
        d, c = ctypes.c_int(0), P(0)
        check(cu.cuInit(0), "cuInit"); check(cu.cuDeviceGet(ctypes.byref(d), 0), "cuDeviceGet")
        check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(c), d), "cuDevicePrimaryCtxRetain")
        check(cu.cuCtxSetCurrent(c), "cuCtxSetCurrent")
        t1 = time.perf_counter()
        nk, cccl_s = 0, 0.0
        for img, is_cccl in zip(images, cccl):
            tl = time.perf_counter()
            lib, n = P(0), U(0)
            check(cu.cuLibraryLoadData(ctypes.byref(lib), img, None, None, U(0), None, None, U(0)), "cuLibraryLoadData")
            check(cu.cuLibraryGetKernelCount(ctypes.byref(n), lib), "cuLibraryGetKernelCount")
            ks = (P * n.value)()
            check(cu.cuLibraryEnumerateKernels(ks, n, lib), "cuLibraryEnumerateKernels")
            for k in ks:
                f = P(0)
                check(cu.cuKernelGetFunction(ctypes.byref(f), P(k)), "cuKernelGetFunction")
            nk += n.value
            if is_cccl:
                cccl_s += time.perf_counter() - tl
        t2 = time.perf_counter()
        times.update(context_ms=(t1 - t) * 1e3, loads_ms=(t2 - t1) * 1e3, cccl_loads_ms=cccl_s * 1e3, kernels=nk,
                     libraries=len(images), cccl_libraries=sum(cccl))
    t0 = time.perf_counter()
    if kind == "driver":
        th = threading.Thread(target=loads); th.start()
        import cuda.compute
        times["import_ms"] = (time.perf_counter() - t0) * 1e3
        th.join()
    else:
        loads()
    out["wall_ms"] = (time.perf_counter() - t0) * 1e3
    if "loads_ms" not in times:
        raise SystemExit("the loading thread failed (see above)")
    out.update(times)
    print(json.dumps(out))
""")

WARM = PRELUDE + textwrap.dedent(r"""
    t0, c0 = time.perf_counter(), time.thread_time()
    import aot
    tune(arg)
    reg = aot.Registry(root)
    reg.request_warmup()
    t1, c1 = time.perf_counter(), time.thread_time()
    cold = reg.ensure_warm(timeout=300)
    out["wall_ms"] = (time.perf_counter() - t0) * 1e3
    out.update(blocking_ms=(t1 - t0) * 1e3, blocking_cpu_ms=(c1 - c0) * 1e3)
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
    out.update(problems=problems, specs=len(reg.names()), kernels=sum(s.kernels or 0 for s in st.values()))
    print(json.dumps(out))
""")

FIRST = PRELUDE + textwrap.dedent(r"""
    name, n = os.environ["AOT_BENCH_NAME"], 1 << 20
    h = (numpy.arange(n) % 1000).astype(numpy.float64)
    want = float(h.sum())
    marks = {}
    def mark(k):
        marks[k] = (time.perf_counter() - t0) * 1e3
    t0, c0 = time.perf_counter(), time.thread_time()
    import aot
    reg = aot.Registry(root)
    if arg != "nowarm":
        tune(arg)
        reg.request_warmup()
    mark("request_done")
    import cupy
    mark("cupy_imported")
    x = cupy.asarray(h)
    d_out = cupy.empty(1, dtype=cupy.float64)
    mark("input_on_device")
    algo = reg.cccl(name)
    mark("cccl_returned")
    init = numpy.zeros(1, dtype=numpy.float64)
    nbytes = algo(temp_storage=None, d_in=x, d_out=d_out, num_items=n, h_init=init)
    tmp = cupy.empty(max(1, nbytes), dtype=cupy.uint8)
    algo(temp_storage=tmp, d_in=x, d_out=d_out, num_items=n, h_init=init)
    got = float(d_out.get()[0])
    out["wall_ms"] = (time.perf_counter() - t0) * 1e3
    out["caller_cpu_ms"] = (time.thread_time() - c0) * 1e3
    if got != want:
        raise SystemExit(f"{name}: result {got} != numpy's {want}")
    out["marks_ms"] = marks
    print(json.dumps(out))
""")

CATALOG = PRELUDE + textwrap.dedent(r"""
    t0 = time.perf_counter()
    import aot
    t1 = time.perf_counter()
    reg = aot.Registry(root)
    t2, c2 = time.perf_counter(), time.thread_time()
    names = reg.names()
    t3, c3 = time.perf_counter(), time.thread_time()
    out.update(import_aot_ms=(t1 - t0) * 1e3, registry_ms=(t2 - t1) * 1e3, catalog_ms=(t3 - t2) * 1e3,
               catalog_cpu_ms=(c3 - c2) * 1e3,
               specs=len(names), wall_ms=(t3 - t0) * 1e3)
    print(json.dumps(out))
""")


def child(code: str, *args: str, env: dict | None = None, timeout: float = 300) -> dict:
    try:
        p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if p.returncode != 0:
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()
        return {"error": tail[-1] if tail else f"exit status {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def med(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.median(vals) if vals else None


def summarize(rows: list[dict], variants: list[str]) -> dict:
    """Medians per kind, the limit and the ratios of one artifact set."""
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["kind"], []).append(r)
    s: dict = {k: {"runs": len(v), "wall_ms": med(v, "wall_ms"), "all_ms": [round(r["wall_ms"], 1) for r in v]}
               for k, v in by.items()}
    for k, v in by.items():
        for key in ("import_ms", "context_ms", "loads_ms", "cccl_loads_ms", "kernels", "libraries", "cccl_libraries",
                    "blocking_ms", "blocking_cpu_ms", "caller_cpu_ms", "catalog_ms", "catalog_cpu_ms", "registry_ms",
                    "import_aot_ms", "specs"):
            m = med(v, key)
            if m is not None:
                s[k][key] = m
        marks = sorted({m for r in v for m in r.get("marks_ms", {})})
        if marks:
            s[k]["marks_ms"] = {m: statistics.median(r["marks_ms"][m] for r in v if m in r.get("marks_ms", {}))
                                for m in marks}
        phases = sorted({p for r in v for p in r.get("phases_ms", {})})
        if phases:
            s[k]["phases_ms"] = {p: statistics.median(r["phases_ms"][p] for r in v if p in r.get("phases_ms", {}))
                                 for p in phases}
        probs = sorted({p for r in v for p in r.get("problems", [])})
        if probs:
            s[k]["problems"] = probs
    limit = None
    if "driver-alone" in s and "floor" in s:
        alone = s["driver-alone"]
        s["limit_import_leg_ms"] = s["floor"]["import_ms"] + alone.get("cccl_loads_ms", 0.0)
        s["limit_driver_leg_ms"] = alone["wall_ms"]
        limit = max(s["limit_import_leg_ms"], s["limit_driver_leg_ms"])
    s["limit_ms"] = limit
    nowarm = s.get("first-nowarm", {}).get("wall_ms")
    for v in variants:
        w, f = s.get(f"warm-{v}", {}).get("wall_ms"), s.get(f"first-{v}", {}).get("wall_ms")
        s[f"ratio_warm_{v}"] = w / limit if w and limit else None
        s[f"ratio_first_{v}"] = f / nowarm if f and nowarm else None
    return s


def table(name: str, s: dict, variants: list[str]) -> str:
    def f(v, p=1):
        return f"{v:.{p}f}" if isinstance(v, (int, float)) else "-"
    alone = s.get("driver-alone", {})
    lines = [f"[{name}] limit {f(s['limit_ms'])} ms = max(import + CCCL loads {f(s.get('limit_import_leg_ms'))}, "
             f"context + all loads {f(s.get('limit_driver_leg_ms'))}): floor import "
             f"{f(s.get('floor', {}).get('import_ms'))} ∥ context {f(s.get('floor', {}).get('context_ms'))}; CCCL loads "
             f"{f(alone.get('cccl_loads_ms'))} ({f(alone.get('cccl_libraries'), 0)} libraries); driver "
             f"beside the import {f(s.get('driver', {}).get('wall_ms'))} (context {f(s.get('driver', {}).get('context_ms'))}"
             f" + loads {f(s.get('driver', {}).get('loads_ms'))}); alone {f(s.get('driver-alone', {}).get('wall_ms'))} "
             f"(context {f(s.get('driver-alone', {}).get('context_ms'))} + loads "
             f"{f(s.get('driver-alone', {}).get('loads_ms'))}; {f(s.get('driver-alone', {}).get('libraries'), 0)} "
             f"libraries, {f(s.get('driver-alone', {}).get('kernels'), 0)} kernels)"]
    nowarm = s.get("first-nowarm", {})
    lines.append(f"[{name}] first result, no warmup {f(nowarm.get('wall_ms'))} ms (caller cpu "
                 f"{f(nowarm.get('caller_cpu_ms'))}); marks {nowarm.get('marks_ms')}")
    if "catalog" in s:
        c = s["catalog"]
        lines.append(f"[{name}] catalog: Registry() {f(c.get('registry_ms'), 2)} ms, first use (names(), "
                     f"{f(c.get('specs'), 0)} specs) {f(c.get('catalog_ms'))} ms (cpu {f(c.get('catalog_cpu_ms'))})")
    for v in variants:
        w, fr = s.get(f"warm-{v}", {}), s.get(f"first-{v}", {})
        lines.append(f"[{name}] {v:6} warm-all {f(w.get('wall_ms'))} ms = {f(s.get(f'ratio_warm_{v}'), 3)}x limit "
                     f"(blocking {f(w.get('blocking_ms'), 2)} ms, cpu {f(w.get('blocking_cpu_ms'), 2)}; "
                     f"{f(w.get('kernels'), 0)} kernels); first result with warmup {f(fr.get('wall_ms'))} ms = "
                     f"{f(s.get(f'ratio_first_{v}'), 3)}x no warmup (caller cpu {f(fr.get('caller_cpu_ms'))})")
        if fr.get("marks_ms"):
            lines.append(f"[{name}] {v:6}   first marks {fr['marks_ms']}")
        if w.get("phases_ms"):
            lines.append(f"[{name}] {v:6}   warm phases " + ", ".join(
                f"{k} {x:.0f}" for k, x in sorted(w["phases_ms"].items(), key=lambda kv: kv[1])))
        if w.get("problems"):
            lines.append(f"[{name}] {v:6}   INCOMPLETE: {'; '.join(w['problems'][:3])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join((__doc__ or "").splitlines()[2:]))
    ap.add_argument("--set", action="append", default=[], metavar="NAME=DIR", help="an artifact set (repeatable)")
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per kind and set, after one left out")
    ap.add_argument("--variants", default="new,today", help=f"of {', '.join(VARIANTS)}")
    ap.add_argument("--kinds", default="floor,driver-alone,warm,first,catalog",
                    help="which kinds of child (warm and first: one per variant, first also nowarm)")
    ap.add_argument("--name", default="reduce_sum_f64", help="the spec of the first-result children")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    variants = [v for v in a.variants.split(",") if v]
    sets = dict(s.split("=", 1) for s in a.set if "=" in s)
    if a.runs < 1 or not sets or any(v not in VARIANTS for v in variants):
        ap.error("need --set NAME=DIR, --runs >= 1, --variants from " + ", ".join(VARIANTS))
    wanted = set(a.kinds.split(","))
    tmp = Path(tempfile.mkdtemp(prefix="aot-warm-limit-"))
    plan: dict[str, list[tuple[str, str, str, str]]] = {}
    for sname, root in sets.items():
        root = str(Path(root).resolve())
        kinds: list[tuple[str, str, str, str]] = []
        if "floor" in wanted:
            kinds.append(("floor", FLOOR, root, "-"))
        if wanted & {"driver", "driver-alone"}:
            images = str(tmp / f"{sname}.cubins")
            r = child(EXTRACT, root, images)
            if "error" in r:
                print(f"warm_limit: extracting the cubins of {sname}: {r['error']}", file=sys.stderr)
                return 6 if "CUDA" in r["error"] or "driver" in r["error"].lower() else 1
            print(f"[{sname}] {r['specs']} cubins, {r['bytes'] / 1e6:.1f} MB", flush=True)
            kinds += [(k, DRIVER, root, images) for k in ("driver", "driver-alone") if k in wanted]
        if "first" in wanted:
            kinds.append(("first-nowarm", FIRST, root, "nowarm"))
        for v in variants:
            if "warm" in wanted:
                kinds.append((f"warm-{v}", WARM, root, json.dumps(VARIANTS[v])))
            if "first" in wanted:
                kinds.append((f"first-{v}", FIRST, root, json.dumps(VARIANTS[v])))
        if "catalog" in wanted:
            kinds.append(("catalog", CATALOG, root, "-"))
        plan[sname] = kinds
    rows: dict[str, list[dict]] = {s: [] for s in sets}
    failed = None
    env = {"AOT_BENCH_NAME": a.name}
    for i in range(a.runs + 1):  # round 0: cold files, cupy's caches; left out
        for sname, kinds in plan.items():
            for kind, code, root, arg in kinds:
                r = child(code, kind, root, arg, env=env)
                if "error" in r:
                    failed = f"{sname} {kind} (run {i}): {r['error']}"
                    print(f"warm_limit: {failed}", file=sys.stderr)
                    break
                r.update(kind=kind, run=i)
                if i:
                    rows[sname].append(r)
                print(f"  {sname} run {i} {kind:14} {r['wall_ms']:8.1f} ms", flush=True)
            if failed:
                break
        if failed:
            break
    summary = {s: summarize(rows[s], variants) for s in sets}
    for s in sets:
        print(table(s, summary[s], variants))
    if a.json:
        a.json.write_text(json.dumps({"sets": sets, "variants": {v: VARIANTS[v] for v in variants}, "failed": failed,
                                      "summary": summary, "runs": rows}, indent=1) + "\n")
    incomplete = any(s.get(f"warm-{v}", {}).get("problems") for s in summary.values() for v in variants)
    return 1 if failed or incomplete else 0


if __name__ == "__main__":
    sys.exit(main())
