"""Every public call of cupy_mypkg on inputs made on the host (copying them in compiles nothing), for recording
(``python -m aot record ... -- python -m cupy_mypkg.workload float32 float64``), the GPU check and the benchmark.

``python -m cupy_mypkg.workload DTYPE...`` runs all calls for each dtype."""

import sys

import numpy as np


def inputs(dtype: str, n: int = 1 << 20):
    """Host arrays for every call (deterministic), as numpy: the caller copies them to the device."""
    rng = np.random.default_rng(35)
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    m = rng.standard_normal((256, n // 256)).astype(dtype)
    return x, y, m


def calls(dtype: str, n: int = 1 << 20):
    """``[(name, thunk)]``: each public call on device inputs copied now (no kernel compiles in the copy)."""
    import cupy as cp
    from . import ops
    x, y, m = (cp.asarray(a) for a in inputs(dtype, n))
    cp.cuda.Device().synchronize()
    return [("normalize", lambda: ops.normalize(x)), ("total", lambda: ops.total(x)),
            ("running", lambda: ops.running(x)), ("peak", lambda: ops.peak(x)),
            ("saxpy", lambda: ops.saxpy(2, x, y)), ("sumsq", lambda: ops.sumsq(x)),
            ("row_max", lambda: ops.row_max(m))]


def run(dtype: str, n: int = 1 << 20) -> dict:
    """Every call's result, on the host."""
    import cupy as cp
    return {name: cp.asnumpy(f()) for name, f in calls(dtype, n)}


if __name__ == "__main__":
    for d in sys.argv[1:] or ["float32"]:
        run(d)
