"""numba-cuda kernels shipped ahead of time (issue 31), on a GPU: numba_mypkg's @cuda.jit kernels launched through
their own dispatchers, with numba-cuda's compile calls counted, results checked against numpy, and the first
launch of each kernel timed in fresh processes.

    python3 numba_check.py check SITE            # SITE holds numba_mypkg/ with artifacts/: zero compiles, numpy
    python3 numba_check.py first MODE SITE       # one process: first-launch ms of each kernel (JSON on stdout)
    python3 numba_check.py bench SITE JITSITE N  # N fresh processes per mode: packaged, cache=True warm, cold JIT

MODE: packaged (SITE's numba_mypkg, artifacts attached), jit (JITSITE: the same package without artifacts, numba-cuda
compiles), cache (JITSITE with numba-cuda's cache=True, NUMBA_CACHE_DIR already filled: warm).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

if not hasattr(np, "row_stack"):  # numba-cuda 0.30.4's JIT registers an overload of it; numpy >= 2.5 dropped it
    np.row_stack = np.vstack  # seen on the lent H100: every numba-cuda JIT failed with AttributeError without it
    print(f"numpy {np.__version__}: np.row_stack aliased for numba-cuda's JIT (the numba extra bounds numpy < 2.5)")

COMPILES = []


def count_compiles() -> None:
    """Count numba-cuda's kernel compiles: every JIT of a kernel goes through dispatcher.compile_cuda."""
    import numba.cuda.dispatcher as d
    real = d.compile_cuda

    def counted(*a, **k):
        COMPILES.append(getattr(a[0], "__name__", "?"))
        return real(*a, **k)
    d.compile_cuda = counted


def inputs():
    from numba import cuda
    rng = np.random.default_rng(0)
    n = 100_003
    f32 = [rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2)]
    f64 = [rng.uniform(-1, 1, n) for _ in range(2)]
    ints = rng.integers(-1000, 1000, n).astype(np.int64)
    dev = {"f32": [cuda.to_device(a) for a in f32], "f64": [cuda.to_device(a) for a in f64],
           "out32": cuda.device_array(n, np.float32), "out64": cuda.device_array(n, np.float64),
           "ints": cuda.to_device(ints), "sums": cuda.device_array((n + 255) // 256, np.int64),
           "scale": cuda.to_device(f32[0])}
    cuda.synchronize()
    return n, f32, f64, ints, dev


def launches(k, n, dev):
    """Each kernel's first launch, in the library's own words."""
    from numba import cuda
    g = (n + 255) // 256
    return {
        "axpy_f32": lambda: k.axpy[g, 256](dev["out32"], dev["f32"][0], dev["f32"][1], np.float32(2.5)),
        "axpy_f64": lambda: k.axpy[g, 256](dev["out64"], dev["f64"][0], dev["f64"][1], np.float64(2.5)),
        "scale_inplace": lambda: k.scale_inplace[64, 128](dev["scale"], np.float32(3.0), np.int64(n)),
        "smooth": lambda: k.smooth[g, 256](dev["out64"], dev["f64"][0], -0.5, 0.5),
        "block_sum": lambda: k.block_sum[g, 256](dev["sums"], dev["ints"]),
    }, cuda.synchronize


def check(site: str) -> int:
    sys.path.insert(0, site)
    count_compiles()
    import numba_mypkg  # noqa: F401 - its __init__ (Registry.from_package) attaches the packaged kernels
    from numba_mypkg import kernels as k
    print("attached:", {n: type(getattr(k, n)._cache).__name__ for n in ("axpy", "scale_inplace", "smooth",
                                                                          "block_sum")})
    n, f32, f64, ints, dev = inputs()
    run, sync = launches(k, n, dev)
    bad = []

    def expect(name, got, want, rtol=1e-6, atol=1e-6):
        try:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        except AssertionError as e:
            bad.append(f"{name}: {str(e).splitlines()[3] if len(str(e).splitlines()) > 3 else e}")
    run["axpy_f32"]()
    sync()
    expect("axpy_f32", dev["out32"].copy_to_host(), np.float32(2.5) * f32[0] + f32[1])
    run["axpy_f64"]()
    sync()
    expect("axpy_f64", dev["out64"].copy_to_host(), 2.5 * f64[0] + f64[1], rtol=1e-12, atol=1e-12)
    run["scale_inplace"]()
    sync()
    expect("scale_inplace", dev["scale"].copy_to_host(), f32[0] * np.float32(3.0))
    run["smooth"]()
    sync()
    t = np.clip((f64[0] + 0.5) / 1.0, 0, 1)
    expect("smooth", dev["out64"].copy_to_host(), t * t * (3 - 2 * t), rtol=1e-12, atol=1e-12)
    run["block_sum"]()
    sync()
    pad = np.concatenate([ints, np.zeros(len(dev["sums"]) * 256 - n, np.int64)]).reshape(-1, 256)
    expect("block_sum", dev["sums"].copy_to_host(), pad.sum(axis=1), rtol=0, atol=0)
    packaged_compiles = list(COMPILES)
    print(f"packaged launches: {len(packaged_compiles)} numba-cuda compiles {packaged_compiles}")
    # an unpackaged signature: int32 arrays (axpy was packaged for float32 and float64 only)
    xi = np.arange(1000, dtype=np.int32)
    out = k.axpy.__class__  # noqa: F841 - the same dispatcher object serves it
    from numba import cuda
    d_out = cuda.device_array(1000, np.int32)
    k.axpy[4, 256](d_out, cuda.to_device(xi), cuda.to_device(xi), np.int32(3))
    sync()
    expect("axpy_i32 (JIT)", d_out.copy_to_host(), 3 * xi + xi, rtol=0, atol=0)
    jit = COMPILES[len(packaged_compiles):]
    print(f"unpackaged signature: {len(jit)} numba-cuda compile(s) {jit}")
    ok = not bad and not packaged_compiles and len(jit) == 1
    print("\n".join(["FAILED: " + b for b in bad]) or "all results match numpy")
    print("RESULT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def first(mode: str, site: str) -> int:
    t0 = time.perf_counter()
    sys.path.insert(0, site)
    import numba_mypkg  # noqa: F401 - packaged: attaches here
    from numba_mypkg import kernels as k
    if mode == "cache":
        for name in ("axpy", "scale_inplace", "smooth", "block_sum"):
            getattr(k, name).enable_caching()
    t_import = (time.perf_counter() - t0) * 1e3
    count_compiles()
    n, _, _, _, dev = inputs()
    run, sync = launches(k, n, dev)
    ms = {}
    for name, fn in run.items():
        t = time.perf_counter()
        fn()
        sync()
        ms[name] = (time.perf_counter() - t) * 1e3
    print(json.dumps({"mode": mode, "import_ms": t_import, "first_ms": ms, "compiles": len(COMPILES)}))
    return 0


def bench(site: str, jit_site: str, n: int) -> int:
    env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(os.environ.get("TMPDIR", "/tmp"), "aot-numba-cache"))
    me = os.path.abspath(__file__)
    subprocess.run([sys.executable, me, "first", "cache", jit_site], env=env, check=True, capture_output=True)
    rows: dict[str, list[dict]] = {"packaged": [], "cache": [], "jit": []}
    for _ in range(n):
        for mode in rows:
            out = subprocess.run([sys.executable, me, "first", mode, site if mode == "packaged" else jit_site],
                                 env=env, check=True, capture_output=True, text=True).stdout
            rows[mode].append(json.loads(out.strip().splitlines()[-1]))
    names = list(rows["packaged"][0]["first_ms"])
    print(f"first launch of each kernel, ms, median of {n} fresh processes (compiles per process in brackets)")
    print(f"{'kernel':16}" + "".join(f"{m:>22}" for m in rows))
    for name in names:
        print(f"{name:16}" + "".join(f"{statistics.median(r['first_ms'][name] for r in rs):22.2f}"
                                     for rs in rows.values()))
    print(f"{'import (+attach)':16}" + "".join(f"{statistics.median(r['import_ms'] for r in rs):22.2f}"
                                              for rs in rows.values()))
    print(f"{'compiles':16}" + "".join(f"{statistics.median(r['compiles'] for r in rs):22.0f}"
                                      for rs in rows.values()))
    print("JSON", json.dumps(rows))
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "check":
        sys.exit(check(sys.argv[2]))
    if cmd == "first":
        sys.exit(first(sys.argv[2], sys.argv[3]))
    sys.exit(bench(sys.argv[2], sys.argv[3], int(sys.argv[4])))
