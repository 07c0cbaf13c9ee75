"""One fresh process of .ci/gpu/cccl_legacy.sh: `jit` or `served` for one reduce spec under the installed
cuda-cccl (< 1.1). Times the spec's first call as a library makes it (make_reduce_into, then the call) after
the imports, and prints one JSON line: seconds, the result, the shims' (hits, misses) when served."""

import json
import sys
import time
from importlib import metadata


def main(mode: str, spec: str) -> None:
    t0 = time.perf_counter()
    if mode == "served":
        import aot  # noqa: F401  the import hook (an installed wheel's .pth does this at interpreter start)
    from cuda.compute import algorithms  # before CuPy, as the shims need (a library may import either first)

    import cupy as cp
    import numpy as np

    from aot.build.cccl_legacy_build import OPS  # the build's operators: their LTO-IR names the module
    imports = time.perf_counter() - t0
    _, dtype, op, init = spec.split(":")
    n = 1 << 20
    x = (np.arange(n) % 1000).astype(dtype)
    d_in, d_out = cp.asarray(x), cp.zeros(1, dtype=dtype)
    h_init = np.array([init], dtype=dtype)
    t = time.perf_counter()
    r = algorithms.make_reduce_into(d_in=d_in, d_out=d_out, op=OPS[op], h_init=h_init)
    kw = dict(d_in=d_in, d_out=d_out, op=OPS[op], num_items=n, h_init=h_init)
    size = r(temp_storage=None, **kw)
    r(temp_storage=cp.empty(size, dtype=np.uint8), **kw)
    cp.cuda.runtime.deviceSynchronize()
    first = time.perf_counter() - t
    counts = None
    if mode == "served":
        from aot.runtime.adapters import cccl_legacy_activate
        counts = cccl_legacy_activate._active.counts() if cccl_legacy_activate._active else None
    print(json.dumps({"mode": mode, "spec": spec, "cuda_cccl": metadata.version("cuda-cccl"),
                      "imports_s": round(imports, 3), "first_call_s": round(first, 3),
                      "result": d_out.get().tolist(), "counts": counts}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
