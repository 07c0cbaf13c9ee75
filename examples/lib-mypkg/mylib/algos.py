"""mylib's cuda.compute (CCCL) call sites. Each builder takes the arrays it will run on; ``warm`` builds
them all ahead of a run from cuda.compute's ``ProxyArray`` placeholders (no data, no GPU needed when a
``compute_capability`` is given)."""

from __future__ import annotations

import numpy as np
import cuda.compute as cc


def is_positive(x):
    """The compaction predicate (a module function: the matrix names it ``mylib.algos:is_positive``)."""
    return x > 0


def build_total(d_in, d_out, **build):
    """A sum reduction of ``d_in`` into ``d_out[0]``."""
    return cc.make_reduce_into(d_in=d_in, d_out=d_out, op=cc.OpKind.PLUS, h_init=np.zeros(1, d_in.dtype), **build)


def build_positive(d_in, d_out, d_count, **build):
    """The positive elements of ``d_in``."""
    return cc.make_select(d_in=d_in, d_out=d_out, d_num_selected_out=d_count, cond=is_positive, **build)


def build_doubled(d_in, d_out, **build):
    """``2 * x``, elementwise."""
    return cc.make_unary_transform(d_in=d_in, d_out=d_out, op=lambda x: x * 2, **build)


def build_index_squares(d_out, **build):
    """sum(i * i for i in range(n)): a reduction over a transformed counting iterator, no input array."""
    squares = cc.TransformIterator(cc.CountingIterator(np.int64(0)), lambda i: i * i)
    return cc.make_reduce_into(d_in=squares, d_out=d_out, op=cc.OpKind.PLUS, h_init=np.zeros(1, np.int64), **build)


def build_scaled(d_in, d_out, factor: float, **build):
    """``factor * x``: the operator closes over a local, so it cannot be named ahead of time."""
    return cc.make_unary_transform(d_in=d_in, d_out=d_out, op=lambda x: x * factor, **build)


def warm(compute_capability=None) -> list:
    """Build every algorithm mylib uses, from placeholders (what a warmup step or a CPU test runs)."""
    f64, i32, i64 = (cc.ProxyArray(np.dtype(t)) for t in ("float64", "int32", "int64"))
    kw = {"compute_capability": compute_capability} if compute_capability else {}
    return [build_total(f64, f64, **kw), build_positive(i32, i32, i64, **kw), build_doubled(f64, f64, **kw),
            build_index_squares(i64, **kw), build_scaled(f64, f64, 0.5, **kw)]


def _run_twice(algo, **call) -> None:
    import cupy as cp
    nbytes = algo(temp_storage=None, **call)
    algo(temp_storage=cp.empty(max(int(nbytes or 0), 1), np.uint8), **call)


def total(d_x) -> float:
    """Sum of a device array (CuPy) of float64."""
    import cupy as cp
    out = cp.empty(1, d_x.dtype)
    _run_twice(build_total(d_x, out), d_in=d_x, d_out=out, op=cc.OpKind.PLUS, num_items=int(d_x.size),
               h_init=np.zeros(1, d_x.dtype))
    return float(out.get()[0])


def positive(d_x):
    """The positive elements of an int32 device array, in order."""
    import cupy as cp
    out, count = cp.empty_like(d_x), cp.zeros(1, np.int64)
    _run_twice(build_positive(d_x, out, count), d_in=d_x, d_out=out, d_num_selected_out=count, cond=is_positive,
               num_items=int(d_x.size))
    return out[:int(count.get()[0])]


def doubled(d_x):
    import cupy as cp
    out = cp.empty_like(d_x)
    # cuda.compute 1.2.1 takes the operator again at call time (for its state; this one has none)
    build_doubled(d_x, out)(d_in=d_x, d_out=out, op=lambda x: x * 2, num_items=int(d_x.size))
    return out
