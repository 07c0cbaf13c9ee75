"""One fresh process of .ci/gpu/cccl_legacy.sh: ``jit`` or ``served`` for one spec of examples/legacy-mypkg,
installed from its wheel (built on the CPU host) in a venv with a cuda-cccl release without ``serialize``.
The spec's first call is the library's own (``legacy_mypkg.algos``), timed after the imports; prints one
JSON line: seconds, the result (a reduce's value, a transform's output digest), the shims' (hits, misses).

``jit`` runs with AOT_IMPORT_HOOK=0 and AOT_JIT_ONLY=1 (set by the caller): nothing of aot serves.
"""

import hashlib
import json
import sys
import time
from importlib import metadata


def main(mode: str, spec: str) -> None:
    t0 = time.perf_counter()
    import legacy_mypkg  # noqa: F401  its registry: the shims load from its manifest (served), or nothing (jit)
    from cuda.compute import algorithms  # noqa: F401
    import numpy as np
    from numba import cuda

    from legacy_mypkg import algos, ops
    imports = time.perf_counter() - t0
    family, dtype, *fields = spec.split(":")
    offsets = fields.pop(0) if family == "segmented_reduce" else None  # its offsets' dtype comes first
    op, rest = fields[0], fields[1:]
    n = 1 << 20
    x = (np.arange(n) % 1000).astype(dtype)
    d_in = cuda.to_device(x)
    fn = getattr(ops, op.rpartition(".")[2])
    if family == "binary_transform":
        d_b = cuda.to_device(x[::-1].copy())
    elif family == "segmented_reduce":  # segments of 1000 items
        starts = np.arange(0, n, 1000, dtype=offsets)
        d_starts, d_ends = cuda.to_device(starts), cuda.to_device(np.minimum(starts + 1000, n).astype(offsets))
    t = time.perf_counter()
    if family == "reduce":
        d_out = cuda.device_array(1, dtype=dtype)
        algos.reduce_into(d_in, d_out, op=fn, init=float(rest[0]))
    elif family == "unary_transform":
        d_out = cuda.device_array(n, dtype=dtype)
        algos.negate(d_in, d_out)
    elif family == "binary_transform":
        d_out = cuda.device_array(n, dtype=dtype)
        algos.add_arrays(d_in, d_b, d_out)
    elif family == "segmented_reduce":
        d_out = cuda.device_array(len(starts), dtype=dtype)
        algos.segment_sums(d_in, d_out, d_starts, d_ends)
    else:
        raise SystemExit(f"{spec}: no call for family {family}")
    cuda.synchronize()
    first = time.perf_counter() - t
    host = d_out.copy_to_host()
    result = host.tolist() if host.size == 1 else hashlib.sha256(host.tobytes()).hexdigest()[:16]
    counts = None
    if mode == "served":
        from aot.runtime.adapters import cccl_legacy_activate
        counts = cccl_legacy_activate._active.counts() if cccl_legacy_activate._active else None
    print(json.dumps({"mode": mode, "spec": spec, "cuda_cccl": metadata.version("cuda-cccl"),
                      "imports_s": round(imports, 3), "first_call_s": round(first, 3),
                      "result": result, "counts": counts}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
