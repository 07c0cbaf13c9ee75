"""Operators from code for tests/data/algorithms/build_matrix.yaml (tests put tests/data on sys.path),
and the numpy check of its templated NVRTC unit (``verify_gpu(checks=...)``)."""

import numpy as np


def bbox_union(a, b):
    """The smallest box holding two boxes (a struct-valued operator over the matrix's ``bbox`` type)."""
    return (min(a.xmin, b.xmin), min(a.ymin, b.ymin), max(a.xmax, b.xmax), max(a.ymax, b.ymax))


def is_multiple_of_7(i):
    return i % 7 == 0


def check_templated(ctx):
    rng = np.random.default_rng(1)
    n = 10_001
    for t, name in ((np.float32, "axpy<float>"), (np.float64, "axpy<double>")):
        x, y = rng.uniform(-1, 1, n).astype(t), rng.uniform(-1, 1, n).astype(t)
        d_y = ctx.array(y)
        ctx.launch(name, n, t(2.5), ctx.array(x), d_y, np.int32(n))
        # The GPU fuses a*x+y (one rounding), numpy rounds twice: compare against the exact result with
        # an absolute bound of a few ulps of the inputs' scale (seen on the H100: 4.5e-8 for float32).
        exact = 2.5 * x.astype(np.float64) + y.astype(np.float64)
        atol = 4 * float(np.finfo(t).eps) * 4.0
        np.testing.assert_allclose(d_y.to_host(), exact, rtol=1e-6, atol=atol)
    x = rng.integers(-10**6, 10**6, n).astype(np.int32)
    blocks = (n + 127) // 128
    d_out = ctx.empty(blocks, np.int32)
    ctx.launch("block_max<int, 128>", blocks * 128, ctx.array(x), np.int32(n), d_out, block=128)
    pad = np.concatenate([x, np.full(blocks * 128 - n, x[0], np.int32)]).reshape(blocks, 128)
    np.testing.assert_array_equal(d_out.to_host(), pad.max(axis=1))
