"""GPU checks of the packaged kernels, named in pyproject.toml's ``[tool.aot] checks``: ``aot verify --gpu
--package numba_mypkg`` runs each against every packaged artifact this GPU can load (``ctx.kernel`` launches
exactly that artifact, and cannot compile). Output buffers come from ``ctx.empty`` (0xA5 bytes), so an element
the kernel never wrote shows. Imported only by verify, never by the library."""

import numpy as np

N = 100_003  # not a multiple of the block: the tail is checked too
TPB = 256


def _blocks(n: int) -> int:
    return (n + TPB - 1) // TPB


def _axpy(ctx, dtype, rtol):
    rng = np.random.default_rng(1)
    x, y = rng.uniform(-1, 1, N).astype(dtype), rng.uniform(-1, 1, N).astype(dtype)
    out = ctx.empty(N, dtype)
    ctx.kernel[_blocks(N), TPB](out, ctx.array(x), ctx.array(y), dtype(2.5))
    np.testing.assert_allclose(out.copy_to_host(), dtype(2.5) * x + y, rtol=rtol, atol=rtol)


def axpy_f32(ctx):
    _axpy(ctx, np.float32, 1e-6)


def axpy_f64(ctx):
    _axpy(ctx, np.float64, 1e-12)


def scale_inplace(ctx):
    x = np.random.default_rng(2).uniform(-1, 1, N).astype(np.float32)
    d = ctx.array(x)
    ctx.kernel[64, 128](d, np.float32(3.0), np.int64(N))  # a small grid: the grid-stride loop covers the rest
    np.testing.assert_allclose(d.copy_to_host(), x * np.float32(3.0), rtol=1e-6)


def smooth(ctx):
    x = np.random.default_rng(3).uniform(-1, 1, N)
    out = ctx.empty(N, np.float64)
    ctx.kernel[_blocks(N), TPB](out, ctx.array(x), -0.5, 0.5)
    t = np.clip((x + 0.5) / 1.0, 0.0, 1.0)
    np.testing.assert_allclose(out.copy_to_host(), t * t * (3.0 - 2.0 * t), rtol=1e-12, atol=1e-12)


def block_sum(ctx):
    x = np.random.default_rng(4).integers(-1000, 1000, N).astype(np.int64)
    out = ctx.empty(_blocks(N), np.int64)
    ctx.kernel[_blocks(N), TPB](out, ctx.array(x))  # one block per TPB elements: the kernel's tile
    pad = np.concatenate([x, np.zeros(_blocks(N) * TPB - N, np.int64)]).reshape(-1, TPB)
    np.testing.assert_array_equal(out.copy_to_host(), pad.sum(axis=1))
