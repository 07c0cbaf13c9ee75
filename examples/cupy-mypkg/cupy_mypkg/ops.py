"""cupy_mypkg's public functions: plain CuPy code, nothing aot-specific."""

import cupy as cp

#: The library's own kernels, made once at import (CuPy compiles one per dtype at the first call).
_saxpy = cp.ElementwiseKernel("T a, T x, T y", "T z", "z = a * x + y", "cupy_mypkg_saxpy")
_sumsq = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "cupy_mypkg_sumsq")


def normalize(x):
    """Ufuncs and reductions: (x - mean) / (std + eps)."""
    return (x - x.mean()) / (x.std() + x.dtype.type(1e-6))


def total(x):
    return cp.sum(x)


def running(x):
    return cp.cumsum(x)


def peak(x):
    return cp.argmax(x)


def saxpy(a, x, y):
    return _saxpy(x.dtype.type(a), x, y)


def sumsq(x):
    return _sumsq(x)


def row_max(m):
    """A reduction over the last axis of a 2-D array."""
    return cp.max(m, axis=1)


PUBLIC = ("normalize", "total", "running", "peak", "saxpy", "sumsq", "row_max")
