"""GPU checks of this package's NVRTC units, run by `python -m aot verify --gpu --package pystr_mypkg`."""

import numpy as np


def saxpy(ctx):
    n = 100_003
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, n).astype(np.float32), rng.uniform(-1, 1, n).astype(np.float32)
    d_y = ctx.array(y)
    ctx.launch("saxpy", n, np.float32(2.5), ctx.array(x), d_y, np.int32(n))
    np.testing.assert_allclose(d_y.to_host(), np.float32(2.5) * x + y, rtol=1e-6, atol=1e-6)


def scale_shift_f32(ctx):
    _scale_shift(ctx, np.float32)


def scale_shift_f64(ctx):
    _scale_shift(ctx, np.float64)


def _scale_shift(ctx, dtype):
    n = 50_001
    x = np.random.default_rng(1).uniform(-10, 10, n).astype(dtype)
    out = ctx.empty(n, dtype)
    ctx.launch("scale_shift", n, ctx.array(x), out, dtype(1.5), dtype(-0.25), np.int64(n))
    got, want = out.to_host(), x * dtype(1.5) + dtype(-0.25)
    # NVRTC contracts x * a + b into one fused multiply-add (one rounding, numpy rounds twice), so where the
    # terms cancel the relative error is large: bound the error by the terms' size instead.
    bound = 2 * np.finfo(dtype).eps * (np.abs(x * dtype(1.5)) + dtype(0.25))
    bad = np.flatnonzero(~(np.abs(got - want) <= bound))
    assert bad.size == 0, f"{bad.size} of {n} differ, first at {bad[0]}: {got[bad[0]]!r} vs {want[bad[0]]!r}"


def block_sum(ctx):
    n, block = 70_000, 256
    x = np.random.default_rng(2).integers(-1000, 1000, n).astype(np.int32)
    blocks = (n + block - 1) // block
    sums = ctx.empty(blocks, np.int64)
    ctx.launch("block_sum", n, ctx.array(x), sums, np.int32(n), block=block)
    want = np.concatenate([x, np.zeros(blocks * block - n, np.int32)]).reshape(blocks, block).sum(axis=1, dtype=np.int64)
    np.testing.assert_array_equal(sums.to_host(), want)
