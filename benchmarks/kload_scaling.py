"""Do deserializing and kernel loading scale over threads? (GPU; what sizes aot.runtime.loader.threads.TUNING.workers)

    python benchmarks/kload_scaling.py ARTIFACT_DIR [--workers 1,2,4,8] [--runs 3] [--json FILE]

Per (workers, run), a fresh process: import cuda.compute, make device 0's primary context current, read
and check every CCCL artifact (aot.core.format.read), then W threads take specs from one queue (largest
payload first) and, each with the context current, deserialize (GIL-bound Python), resolve the build
result (cuda.compute's library load: nogil but under its process-wide _LOAD_LOCK) and load every kernel
(cuLibraryEnumerateKernels + cuKernelGetFunction, aot.runtime.warmup.warm). Reports the wall time of that phase and the
per-stage sums; if the wall time does not fall with W, the driver serializes kernel loading and the
post-import tail of a warmup is about the W=1 number (the workers then only overlap deserializing with
loading). ``order`` lists each spec's library and kernel milliseconds in completion order: a first spec
far slower than the rest means a one-time cost in the driver that could be paid earlier, off the
critical path. Exit 6 without a usable GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(r"""
    import json, queue, sys, threading, time, warnings
    warnings.simplefilter("ignore")
    import numpy
    root, workers = sys.argv[1], int(sys.argv[2])
    t0 = time.perf_counter()
    import cuda.compute
    from cuda.core import Device
    t1 = time.perf_counter()
    Device(0).set_current()
    t2 = time.perf_counter()
    from aot.runtime.warmup import warm as _warm
    from aot.core import format as fmt
    from aot.core.manifest import load_manifest
    m = load_manifest(root)
    cc = Device(0).compute_capability
    arts = [fmt.read(m.path_of(a)) for a in m.artifacts if a["family"] == "cccl" and a["sm"] == 10 * cc[0] + cc[1]]
    arts.sort(key=lambda a: -len(a.payload))
    t3 = time.perf_counter()
    q = queue.Queue()
    for a in arts:
        q.put(a)
    sums = {"deserialize": 0.0, "library": 0.0, "kernels": 0.0, "count": 0}
    order = []                             # (spec, kernels, library ms, kernels ms) in completion order
    lock = threading.Lock()
    def work():
        Device(0).set_current()
        while True:
            try:
                a = q.get_nowait()
            except queue.Empty:
                return
            s = time.perf_counter(); obj = cuda.compute.deserialize(a.payload)
            d = time.perf_counter(); br = _warm.build_result_of(obj)
            l = time.perf_counter(); n = _warm.load_library_kernels(_warm.cccl_library_handle(br))
            k = time.perf_counter()
            with lock:
                sums["deserialize"] += d - s; sums["library"] += l - d; sums["kernels"] += k - l; sums["count"] += n
                order.append((a.header["name"], n, round((l - d) * 1e3, 2), round((k - l) * 1e3, 2)))
    ts = [threading.Thread(target=work) for _ in range(workers)]
    t4 = time.perf_counter()
    for t in ts: t.start()
    for t in ts: t.join()
    t5 = time.perf_counter()
    print(json.dumps({"workers": workers, "specs": len(arts), "kernels": sums["count"], "import_ms": (t1 - t0) * 1e3,
                      "context_ms": (t2 - t1) * 1e3, "read_check_ms": (t3 - t2) * 1e3, "phase_wall_ms": (t5 - t4) * 1e3,
                      **{f"sum_{k}_ms": v * 1e3 for k, v in sums.items() if k != "count"},
                      "order": order}))
""")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("artifacts")
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = []
    for _ in range(a.runs):
        for w in (int(x) for x in a.workers.split(",")):
            p = subprocess.run([sys.executable, "-c", CHILD, a.artifacts, str(w)], capture_output=True, text=True)
            if p.returncode:
                tail = (p.stderr.strip() or "no output").splitlines()[-1]
                print(f"kload_scaling: {tail}", file=sys.stderr)
                return 6 if "CUDA" in tail or "driver" in tail.lower() else 1
            rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    print(f"{'W':>3} {'wall ms':>8} {'deser sum':>9} {'library sum':>11} {'kernels sum':>11}")
    for w in sorted({r["workers"] for r in rows}):
        m = {k: statistics.median(r[k] for r in rows if r["workers"] == w)
             for k in ("phase_wall_ms", "sum_deserialize_ms", "sum_library_ms", "sum_kernels_ms")}
        print(f"{w:3d} {m['phase_wall_ms']:8.1f} {m['sum_deserialize_ms']:9.1f} {m['sum_library_ms']:11.1f} "
              f"{m['sum_kernels_ms']:11.1f}")
    if a.json:
        with open(a.json, "w") as f:
            f.write(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
