"""The driver-loaded NVRTC units on a real GPU (issue 29): warm the library-shaped set, then launch one unit's
kernels through every handle kind a library uses, and check the results against numpy.

    python .ci/gpu/warm_handles.py LIBSET_DIR [--json FILE]

LIBSET_DIR: the sm_90 build of ``benchmarks/gen_libset.py``'s matrix. Checks: every spec warm with its
kernels loaded; the units were loaded by the driver (``DriverLibrary``) and warm before ``cuda.compute``
was imported (the warmup's phase marks); ``Registry.kernel`` (a ``cuda.core.Kernel`` made from the loaded
handle, launched with ``cuda.core.launch``), ``aot.cufunction`` (``cuLaunchKernel``) and
``aot.cupy_kernel`` each compute ``lib_op<U, K>`` as numpy does. Exit status 0 ok, 1 a check failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

import numpy as np


def expected(x: np.ndarray, unit: int, k: int) -> np.ndarray:
    v = x.astype(np.float32).copy()
    for r in range((k % 7) + 1):
        v = v * np.float32(1.0 + unit * 1e-3) + np.float32(k + r)
    return v


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("libset")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    import aot
    from aot.runtime.loader import threads
    from aot.runtime.loader.library import DriverLibrary
    reg = aot.Registry(a.libset)
    reg.request_warmup()
    cold = reg.ensure_warm(timeout=300)
    warm_ms = (time.perf_counter() - t0) * 1e3
    phases = {k: round((v - t0) * 1e3, 1) for k, v in sorted(threads.TIMELINE.items(), key=lambda kv: kv[1])}
    st = reg.status()
    rows: dict = {"warm_ms": warm_ms, "cold": cold, "phases_ms": phases, "checks": {}}
    checks = rows["checks"]
    checks["all_warm"] = not cold and all(st[n].kernels and not st[n].errors for n in reg.names())
    units = [n for n in reg.names() if reg.spec(n).family == "nvrtc"]
    checks["units_driver_loaded"] = all(isinstance(reg._loaded[n].obj, DriverLibrary) for n in units)
    checks["units_warm_before_cuda_compute"] = phases.get("last_nvrtc_warm", 1e9) < phases.get(
        "cuda_compute_imported", 0) or None  # None: not before (reported, not failed: timing)

    import cupy
    from cuda.bindings import driver
    from cuda.core import Device, LaunchConfig, launch
    dev = Device(0)
    dev.set_current()
    n = 1 << 16
    x = cupy.arange(n, dtype=cupy.float32) / 7
    hx = cupy.asnumpy(x)
    name = "lib_unit_045"  # 26 kernels
    spec = reg.spec(name)
    unit = int(name.rsplit("_", 1)[1])
    results = {}
    for kname in (spec.kernels[0], spec.kernels[-1]):
        k = int(kname.split(",")[1].strip(" >"))
        want = expected(hx, unit, k)
        def via_core(kname=kname, want=want):  # cuda.core.Kernel, made from the loaded CUkernel
            y = cupy.zeros(n, dtype=cupy.float32)
            kern = reg.kernel(name, kname)
            stream = dev.default_stream
            launch(stream, LaunchConfig(grid=(n + 255) // 256, block=256), kern, x.data.ptr, y.data.ptr,
                   np.uint32(n))
            stream.sync()
            return bool(np.allclose(cupy.asnumpy(y), want, rtol=1e-5))

        def via_cufunction(kname=kname, want=want):  # CUfunction through the driver
            y2 = cupy.zeros(n, dtype=cupy.float32)
            f = aot.cufunction(name, kname, registry=reg)
            args = [np.array([x.data.ptr], dtype=np.uint64), np.array([y2.data.ptr], dtype=np.uint64),
                    np.array([n], dtype=np.uint32)]
            ptrs = np.array([arg.ctypes.data for arg in args], dtype=np.uint64)
            err, = driver.cuLaunchKernel(f, (n + 255) // 256, 1, 1, 256, 1, 1, 0, 0, ptrs.ctypes.data, 0)
            cupy.cuda.Device(0).synchronize()
            return int(err) == 0 and bool(np.allclose(cupy.asnumpy(y2), want, rtol=1e-5))

        def via_cupy(kname=kname, want=want):  # CuPy, over the same image
            y3 = cupy.zeros(n, dtype=cupy.float32)
            ck = aot.cupy_kernel(name, kname, registry=reg)
            ck(((n + 255) // 256,), (256,), (x, y3, np.uint32(n)))
            return bool(np.allclose(cupy.asnumpy(y3), want, rtol=1e-5))

        t = time.perf_counter()
        reg.kernel(name, kname)
        handle_ms = (time.perf_counter() - t) * 1e3
        got = {}
        for label, fn in (("cuda_core", via_core), ("cufunction", via_cufunction), ("cupy", via_cupy)):
            try:
                got[label] = fn()
            except Exception as e:  # noqa: BLE001 - reported per handle kind
                got[label] = f"{type(e).__name__}: {e}"
        results[kname] = {**got, "kernel_handle_ms": round(handle_ms, 3)}
    rows["launches"] = results
    checks["launches"] = all(all(v is True for k, v in r.items() if k != "kernel_handle_ms") for r in results.values())
    print(json.dumps(rows, indent=1))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if all(v is not False for v in checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
