"""GPU checks of this package's NVRTC units, run by `python -m aot verify --gpu --package mypkg_skbuild`."""

import numpy as np


def clamp(ctx):
    n = 100_003
    v = np.random.default_rng(0).uniform(-3, 3, n).astype(np.float32)
    d_v = ctx.array(v)
    ctx.launch("clamp_f32", n, d_v, np.float32(-1), np.float32(1), np.int32(n))
    np.testing.assert_array_equal(d_v.to_host(), np.clip(v, np.float32(-1), np.float32(1)))
