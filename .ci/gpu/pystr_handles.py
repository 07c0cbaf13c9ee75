"""pystr-mypkg's kernels (Python strings, one rendered per dtype) launched through each handle aot hands
out, and checked against numpy (GPU; run on the lent machine with pystr_mypkg importable):

  kernel      ``registry.kernel(unit, k)``: a ``cuda.core.Kernel``, launched with ``cuda.core.launch``;
  cufunction  ``aot.cufunction(unit, k, registry)``: the ``CUfunction`` of the current context, launched
              with ``cuLaunchKernel`` through ``cuda.bindings.driver``;
  cupy        ``aot.cupy_kernel(unit, k, registry)``: a ``cupy.RawKernel`` over the packaged cubin (no
              recompiling: CuPy's compile cache is checked to stay unused), called with CuPy arrays.

With ``--jit`` the same again from a registry without artifacts (the package's specs, JIT-compiled for
this GPU), so the handles are checked over what JIT builds too. Prints a table (unit, handle, source,
result) and writes ``--json``; exits 1 when any check fails.

    python .ci/gpu/pystr_handles.py [--jit] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import tempfile
import time

import numpy as np


def cases(rng):
    """(unit, kernel, n, block, arrays in, output dtype and length, scalars before/after, reference)."""
    n = 100_003
    x32, y32 = rng.uniform(-1, 1, n).astype(np.float32), rng.uniform(-1, 1, n).astype(np.float32)
    x64 = rng.uniform(-10, 10, n).astype(np.float64)
    xi = rng.integers(-1000, 1000, n).astype(np.int32)
    blocks = (n + 255) // 256
    pad = np.concatenate([xi, np.zeros(blocks * 256 - n, np.int32)]).reshape(blocks, 256)
    return [
        # saxpy(a, x, y, n): y in place
        dict(unit="saxpy", kernel="saxpy", n=n, args=[np.float32(2.5), ("in", x32), ("inout", y32), np.int32(n)],
             want=np.float32(2.5) * x32 + y32, rtol=1e-6),
        dict(unit="scale_shift_f32", kernel="scale_shift", n=n,
             args=[("in", x32), ("out", np.float32, n), np.float32(1.5), np.float32(-0.25), np.int64(n)],
             want=x32 * np.float32(1.5) + np.float32(-0.25), rtol=1e-6),
        dict(unit="scale_shift_f64", kernel="scale_shift", n=n,
             args=[("in", x64), ("out", np.float64, n), np.float64(1.5), np.float64(-0.25), np.int64(n)],
             want=x64 * 1.5 - 0.25, rtol=1e-14),
        dict(unit="block_sum", kernel="block_sum", n=n,
             args=[("in", xi), ("out", np.int64, blocks), np.int32(n)],
             want=pad.sum(axis=1, dtype=np.int64), rtol=0),
    ]


_CTYPES = {np.float32: ctypes.c_float, np.float64: ctypes.c_double, np.int32: ctypes.c_int32,
           np.int64: ctypes.c_int64}


def run_case(c, handle, reg, dev):
    import aot
    from aot.verify.devarray import DeviceArray
    grid, block = (c["n"] + 255) // 256, 256
    t0 = time.perf_counter()
    if handle == "cupy":
        import cupy as cp
        k = aot.cupy_kernel(c["unit"], c["kernel"], reg)
        args, result = [], None
        for a in c["args"]:
            if isinstance(a, tuple):
                if a[0] == "out":  # poisoned, and without a CuPy kernel (that would compile one)
                    arr = cp.empty(a[2], dtype=a[1])
                    arr.data.memset_async(0xA5, arr.nbytes)
                else:
                    arr = cp.asarray(a[1])
                args.append(arr)
                if a[0] != "in":
                    result = arr
            else:
                args.append(a)
        k((grid,), (block,), tuple(args))
        cp.cuda.runtime.deviceSynchronize()
        got = cp.asnumpy(result)
    else:
        arrays, result = [], None
        for a in c["args"]:
            if isinstance(a, tuple):
                arr = DeviceArray.from_host(a[1], dev) if a[0] != "out" else DeviceArray(a[2], a[1], dev)
                arrays.append(arr)
                if a[0] != "in":
                    result = arr
            else:
                arrays.append(a)
        if handle == "kernel":
            from cuda.core import LaunchConfig, launch
            k = reg.kernel(c["unit"], c["kernel"])
            launch(dev.default_stream, LaunchConfig(grid=grid, block=block), k,
                   *[a.buffer if isinstance(a, DeviceArray) else a for a in arrays])
            dev.sync()
        else:
            from cuda.bindings import driver
            f = aot.cufunction(c["unit"], c["kernel"], reg)
            values = tuple(a.ptr if isinstance(a, DeviceArray) else a.item() for a in arrays)
            types = tuple(ctypes.c_void_p if isinstance(a, DeviceArray) else _CTYPES[type(a)] for a in arrays)
            (err,) = driver.cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, 0, (values, types), 0)
            assert int(err) == 0, err
            assert int(driver.cuCtxSynchronize()[0]) == 0
        got = result.to_host()
    ms = (time.perf_counter() - t0) * 1e3
    want = c["want"]
    if c["rtol"]:
        ok = bool(np.allclose(got, want, rtol=c["rtol"], atol=c["rtol"]))
        err = float(np.max(np.abs(got.astype(np.float64) - want)))
    else:
        ok, err = bool(np.array_equal(got, want)), float(np.count_nonzero(got != want))
    return {"unit": c["unit"], "kernel": c["kernel"], "handle": handle, "ok": ok, "max_abs_err": err,
            "ms": round(ms, 2), "n": c["n"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--jit", action="store_true", help="also from a registry without artifacts (JIT)")
    a = ap.parse_args(argv)
    cupy_cache = os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="cupy-cache-")  # must stay empty
    import pystr_mypkg
    from cuda.core import Device
    dev = Device()
    dev.set_current()
    import aot
    packaged = pystr_mypkg.registry
    registries = [packaged]
    if a.jit:  # the package's own specs, no manifest: every unit JIT-compiled for this device
        registries.append(aot.Registry(None, specs=[packaged.spec(n) for n in packaged.names()]))
    rows = []
    for reg in registries:
        for c in cases(np.random.default_rng(0)):
            for handle in ("kernel", "cufunction", "cupy"):
                try:
                    rows.append(run_case(c, handle, reg, dev))
                except Exception as e:  # noqa: BLE001 - one row per failure, the table still prints
                    rows.append({"unit": c["unit"], "kernel": c["kernel"], "handle": handle, "ok": False,
                                 "error": f"{type(e).__name__}: {str(e)[:300]}"})
                st = reg.status().get(c["unit"])
                rows[-1]["source"] = f"{st.source} sm_{st.sm}" if st and st.source else None
    reg = packaged
    import cupy
    compiled = sorted(os.listdir(cupy_cache))  # what CuPy compiled: nothing, the handles reuse the cubins
    doc = {"device": dev.name, "sm": reg.device_sm(), "cupy": cupy.__version__, "rows": rows,
           "cupy_compiled": compiled, "all_ok": all(r["ok"] for r in rows) and not compiled}
    print(f"{'unit':18} {'kernel':12} {'handle':11} {'source':16} {'result':8} {'max err':>10} {'ms':>8}")
    for r in rows:
        print(f"{r['unit']:18} {r['kernel']:12} {r['handle']:11} {str(r.get('source')):16} "
              f"{'ok' if r['ok'] else 'FAILED':8} {r.get('max_abs_err', float('nan')):10.3g} {r.get('ms', 0):8.2f}"
              + (f"  {r['error']}" if "error" in r else ""))
    print(f"{sum(r['ok'] for r in rows)} of {len(rows)} ok on {dev.name} (sm_{reg.device_sm()}); CuPy compiled "
          f"{len(compiled)} file(s)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0 if doc["all_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
