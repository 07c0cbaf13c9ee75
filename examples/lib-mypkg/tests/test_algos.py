"""CCCL call sites: each builds (wherever cuda.compute can build: a GPU, or a driverless host with a
stand-in driver); on a GPU they give numpy's answers."""

from __future__ import annotations

import numpy as np
import pytest
import cuda.compute

from mylib import algos

from conftest import ARCH

import importlib.util

needs_cccl = pytest.mark.skipif(not getattr(cuda.compute, "_BINDINGS_AVAILABLE", False)
                                or importlib.util.find_spec("numba_cuda_mlir") is None,
                                reason="cuda.compute cannot build here (no driver, or no numba-cuda-mlir to JIT "
                                       "Python operators)")


@needs_cccl
def test_every_algorithm_builds():
    built = algos.warm(compute_capability=int(ARCH.removeprefix("sm_")))
    assert len(built) == 5 and all(b is not None for b in built)


@pytest.mark.gpu
@needs_cccl
def test_total_positive_doubled():
    import cupy as cp
    x = np.random.default_rng(2).uniform(-1, 1, 100_003)
    assert algos.total(cp.asarray(x)) == pytest.approx(x.sum(), rel=1e-12)
    ints = np.random.default_rng(3).integers(-5, 5, 50_001).astype(np.int32)
    np.testing.assert_array_equal(algos.positive(cp.asarray(ints)).get(), ints[ints > 0])
    np.testing.assert_array_equal(algos.doubled(cp.asarray(x)).get(), 2 * x)
