"""GPU checks of this package's NVRTC units, run by `python -m aot verify --gpu --package mypkg_hatch`."""

import numpy as np


def axpy(ctx):
    n = 100_003
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, n).astype(np.float32), rng.uniform(-1, 1, n).astype(np.float32)
    d_y = ctx.array(y)
    ctx.launch("axpy", n, np.float32(2.5), ctx.array(x), d_y, np.int32(n))
    np.testing.assert_allclose(d_y.to_host(), np.float32(2.5) * x + y, rtol=1e-6, atol=1e-6)
