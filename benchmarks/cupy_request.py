"""What aot costs a CuPy request that CuPy's own cache answers (issue 42): the same compile asked of
``cupy.cuda.compiler._compile_module_with_cache`` again and again (CuPy's cache file read and its module loaded
each time), without aot and with aot's wrappers on CuPy's compiler, in alternating rounds of one process.

    python benchmarks/cupy_request.py [--rounds 15] [--calls 200] [--json OUT]

On a GPU each request ends with CuPy's ``Module.load``; without a device (``--no-device``: the driverless host)
it ends where the load fails, after everything CuPy and aot do before it (the architecture answered as on an
sm_90 device). Prints the medians per request and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

SOURCE = 'extern "C" __global__ void aot_request(float* x, float a) { x[threadIdx.x] *= a; }\n'


def _request(core) -> None:
    try:
        core.compile_with_cache(SOURCE)
    except Exception:  # noqa: BLE001 - no device: CuPy stops at its Module.load, after its cache answered
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--no-device", action="store_true", help="the driverless host: answer the architecture")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    cache = tempfile.mkdtemp(prefix="aot-cupy-request-")
    os.environ["CUPY_CACHE_DIR"] = cache
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import cupy  # noqa: F401
    from cupy._core import core
    from cupy.cuda import compiler
    if args.no_device:
        compiler._get_arch = lambda: "90"
        compiler._get_arch_for_options_for_nvrtc = compiler._get_arch_for_options_for_nvrtc.__wrapped__
    from aot.runtime.adapters import cupy_attach
    _request(core)  # CuPy compiles it once, into its cache: every request below is answered there
    assert any(f.endswith(".cubin") for f in os.listdir(cache)), "CuPy's cache holds nothing"

    class Registry:  # what attach_cupy needs of a registry with one CuPy kernel (never found: another key)
        manifest = True

        def names(self):
            return ["k"]

        def spec(self, name):
            from aot.core.spec import CupyKernel
            return CupyKernel(name="k", what="", source_sha256="0" * 64, options=(), name_expressions=None,
                              jitify=False, cupy="14.2.0")

    times: dict[str, list[float]] = {"cupy": [], "cupy + aot": []}
    for r in range(2 * args.rounds):
        mode = "cupy + aot" if r % 2 else "cupy"
        if mode == "cupy + aot":
            cupy_attach.attach_cupy(Registry())
        t0 = time.perf_counter()
        for _ in range(args.calls):
            _request(core)
        times[mode].append((time.perf_counter() - t0) / args.calls * 1e6)
        cupy_attach.detach_cupy()
    med = {k: statistics.median(v) for k, v in times.items()}
    # what aot's wrapper itself adds to CuPy's hash of a real key_src (min of repeats: robust on a busy host)
    import timeit
    seen: list = []
    real_hash = compiler._hash_hexdigest
    compiler._hash_hexdigest = lambda v: (seen.append(v), real_hash(v))[1]
    _request(core)
    compiler._hash_hexdigest = real_hash
    key_src = seen[0][:64]  # the wrapper's cost does not depend on the length; CuPy's sha1 does (noise)
    plain = min(timeit.repeat(lambda: compiler._hash_hexdigest(key_src), number=2000, repeat=7)) / 2000 * 1e6
    cupy_attach.attach_cupy(Registry())
    wrapped = min(timeit.repeat(lambda: compiler._hash_hexdigest(key_src), number=2000, repeat=7)) / 2000 * 1e6
    cupy_attach.detach_cupy()
    print(f"CuPy {cupy.__version__}; a request CuPy's cache answers ({'no device: up to Module.load' if args.no_device else 'GPU'}), "
          f"median of {args.rounds} rounds x {args.calls} calls (us per request)")
    print(f"{'mode':<12} {'median us':>10}")
    for k, v in med.items():
        print(f"{k:<12} {v:>10.2f}")
    print(f"aot adds {med['cupy + aot'] - med['cupy']:+.2f} us ({med['cupy + aot'] / med['cupy']:.3f}x)")
    print(f"CuPy's hash of {len(key_src)} bytes: {plain:.2f} us, observed by aot {wrapped:.2f} us "
          f"(aot's own cost on a request CuPy's cache answers: {wrapped - plain:+.2f} us)")
    if args.json:
        args.json.write_text(json.dumps({"cupy": cupy.__version__, "no_device": args.no_device, "median_us": med, "hash_us": {"cupy": plain, "cupy + aot": wrapped},
                                         "rounds_us": times}, indent=1) + "\n")
    import shutil
    shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
