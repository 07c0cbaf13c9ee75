"""GPU check of this package's NVRTC unit, run by `python -m aot verify --gpu --package mypkg_setuptools`."""

import numpy as np


def scale_offset(ctx):
    n = 100_003
    rng = np.random.default_rng(0)
    v = rng.uniform(-1, 1, n).astype(np.float32)
    v[::7] = -9999.0
    d_v = ctx.array(v)
    ctx.launch("scale_offset", n, d_v, np.float32(2.5), np.float32(1.0), np.float32(-9999.0), np.int32(n))
    want = np.where(v == -9999.0, v, v * np.float32(2.5) + np.float32(1.0))
    np.testing.assert_allclose(d_v.to_host(), want, rtol=1e-6, atol=1e-6)
