"""Host stand-ins for the device algorithms, for the CPU tests of the references (tests/test_references.py).

Each fake computes what cuda.compute's algorithm computes the way a GPU would (CUB's association orders,
numba's typing of operators), in plain Python loops and numpy scalars written independently of
aot.verify.reference, with switches that make it deliberately wrong. ``HostCheck`` is aot's GpuCheck with
host arrays: outputs start as 0xA5 bytes, as on the device.
"""

from __future__ import annotations

import bisect
import functools
from fractions import Fraction

import numpy as np

from aot.verify.context import GpuCheck


class HostArray:
    def __init__(self, a):
        self.a = a

    def to_host(self):
        return self.a.copy()


class Counting:
    def __init__(self, start):
        self.start = start


class HostCheck(GpuCheck):
    def __init__(self, types=None, n=5_003, seed=3):
        super().__init__(None, n=n, seed=seed, types=types)

    def up(self, host):
        return HostArray(np.array(host))

    def out(self, n, dtype):
        dt = self.np_dtype(dtype) if isinstance(dtype, str) else np.dtype(dtype)
        return HostArray(np.frombuffer(b"\xa5" * (n * dt.itemsize), dt).copy())

    def twice(self, call):
        call(None)
        call(object())

    def counting(self, dtype, start=0):
        return Counting(start)


def host(x, n):
    """The elements a fake reads: an array's, or a counting input's (a start, as the binder takes it)."""
    if isinstance(x, (int, np.integer)):
        return np.arange(int(x), int(x) + n)
    return np.arange(x.start, x.start + n) if isinstance(x, Counting) else x.a


def run(algo, params, obj, types=None, n=5_003):
    """Run algorithm ``algo``'s check (spec ``params``) against the fake ``obj``."""
    from aot.algorithms import ALGORITHMS
    full = {**ALGORITHMS[algo].fields, **params}
    bound = ALGORITHMS[algo].bound_arguments(full)  # what the loader binds (operators: fakes close over their own)
    ALGORITHMS[algo].check(lambda **kw: obj(**{**bound, **kw}), full, HostCheck(types, n=n))


def quiet(f):
    @functools.wraps(f)
    def g(*a, **k):
        with np.errstate(all="ignore"):
            return f(*a, **k)
    return g


SCALAR_OPS = {"plus": lambda a, b: a + b, "maximum": lambda a, b: max(a, b), "minimum": lambda a, b: min(a, b)}


# ------------------------------------------------------------------------------------------ reductions
def cub_fold(op, init, x, *, chunk=16):
    """CUB's shape: each 'thread' folds ``chunk`` consecutive items in order, the partials combine in a
    tree, init is applied last."""
    parts = []
    for s in range(0, len(x), chunk):
        acc = x[s]
        for v in x[s + 1: s + chunk]:
            acc = op(acc, v)
        parts.append(acc)
    while len(parts) > 1:
        parts = [op(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return op(init, parts[0]) if parts else init


def fake_reduce(op="plus", *, chunk=16, skip_last=False, accum=None, init_delta=0):
    @quiet
    def run_(*, temp_storage, d_in, d_out, num_items, h_init, **_):
        if temp_storage is None:
            return 0
        t = np.dtype(accum or d_out.a.dtype)
        f = op if callable(op) else (lambda a, b, g=SCALAR_OPS[op]: t.type(g(t.type(a), t.type(b))))
        x = list(d_in.a[: num_items - (1 if skip_last else 0)])
        init = h_init[0] if h_init.dtype.names else t.type(h_init[0] + init_delta)
        d_out.a[0] = cub_fold(f, init, [v if h_init.dtype.names else t.type(v) for v in x], chunk=chunk)
        return 0
    return run_


def pair_add(a, b):  # the struct {w: float64, n: int32}: Python floats, int32 fields wrap
    return (float(a[0]) + float(b[0]), np.int32(a[1]) + np.int32(b[1]))


def fake_segmented_reduce_pair(*, chunk=8, n_delta=0, w_init_delta=0.0, skip_empty=False, op=pair_add):
    @quiet
    def run_(*, temp_storage, d_in, d_out, num_segments, start_offsets_in, end_offsets_in, h_init, **_):
        if temp_storage is None:
            return 0
        x, b, e = d_in.a, start_offsets_in.a, end_offsets_in.a
        init = (float(h_init[0]["w"]) + w_init_delta, np.int32(h_init[0]["n"]))
        for s in range(num_segments):
            seg = [(float(v["w"]), np.int32(v["n"])) for v in x[b[s]:e[s]]]
            if not seg and skip_empty:
                continue
            w, n = cub_fold(op, init, seg, chunk=chunk)
            d_out.a[s] = (w, n + n_delta)
        return 0
    return run_


def fake_scan(op="plus", *, inclusive, wrong_kind=False, unwritten_at=None):
    """A sequential chain (the decoupled look-back's order, collapsed): the worst case for rounding."""
    @quiet
    def run_(*, temp_storage, d_in, d_out, init_value, num_items, **_):
        if temp_storage is None:
            return 0
        t = d_out.a.dtype
        f = SCALAR_OPS[op]
        acc = t.type(init_value[0])
        x = d_in.a
        keep = d_out.a[unwritten_at].copy() if unwritten_at is not None else None
        for i in range(num_items):
            if inclusive != wrong_kind:
                acc = t.type(f(acc, x[i]))
                d_out.a[i] = acc
            else:
                d_out.a[i] = acc
                acc = t.type(f(acc, x[i]))
        if unwritten_at is not None:
            d_out.a[unwritten_at] = keep
        return 0
    return run_


# ------------------------------------------------------------------------------------------ element-wise
def fake_unary(compute, *, unwritten_at=None):
    @quiet
    def run_(*, d_in, d_out, num_items):
        y = np.asarray(compute(host(d_in, num_items)))
        keep = d_out.a[unwritten_at].copy() if unwritten_at is not None else None
        d_out.a[:] = np.broadcast_to(y, (num_items,)).astype(d_out.a.dtype)
        if unwritten_at is not None:
            d_out.a[unwritten_at] = keep
    return run_


def fake_binary(compute):
    @quiet
    def run_(*, d_in1, d_in2, d_out, num_items):
        d_out.a[:] = np.asarray(compute(d_in1.a, d_in2.a)).astype(d_out.a.dtype)
    return run_


def fma_f64(x):
    """fma(x, x, 1.0) in float64, exactly rounded (Fraction): what a contracting device computes."""
    return np.array([float(Fraction(float(v)) * Fraction(float(v)) + 1) for v in x])


def fake_select(pred, *, count_delta=0):
    def run_(*, temp_storage, d_in, d_out, d_num_selected_out, num_items, **_):
        if temp_storage is None:
            return 0
        kept = [v for v in host(d_in, num_items).tolist() if pred(v)]
        d_out.a[:len(kept)] = kept
        d_num_selected_out.a[0] = len(kept) + count_delta
        return 0
    return run_


def fake_three_way(first, second, *, reverse_rest=False, drop_rest=False):
    def run_(*, temp_storage, d_in, d_first_part_out, d_second_part_out, d_unselected_out, d_num_selected_out,
             num_items, **_):
        if temp_storage is None:
            return 0
        parts = ([], [], [])
        for v in host(d_in, num_items).tolist():
            parts[0 if first(v) else 1 if second(v) else 2].append(v)
        rest = parts[2][::-1] if reverse_rest else parts[2]
        if drop_rest:
            rest = rest[:-1]
        for out, p in zip((d_first_part_out, d_second_part_out, d_unselected_out), (parts[0], parts[1], rest)):
            out.a[:len(p)] = p
        d_num_selected_out.a[:] = [len(parts[0]), len(parts[1])]
        return 0
    return run_


def fake_histogram(*, temp_storage, d_samples, d_histogram, h_num_output_levels, h_lower_level, h_upper_level,
                   num_samples):
    if temp_storage is None:
        return 0
    bins = int(h_num_output_levels[0]) - 1
    lo, hi = float(h_lower_level[0]), float(h_upper_level[0])
    counts = [0] * bins
    for v in d_samples.a.tolist():
        if lo <= v < hi:
            counts[int((v - lo) * bins // (hi - lo))] += 1
    d_histogram.a[:] = counts
    return 0


def fake_search(side):
    find = bisect.bisect_left if side == "left" else bisect.bisect_right

    def run_(*, d_data, num_items, d_values, num_values, d_out, **_):
        data = d_data.a.tolist()
        d_out.a[:] = [find(data, v) for v in d_values.a.tolist()]
    return run_


# ------------------------------------------------------------------------------------------ sorts
def _pairs_sort(keys, less, *, descending=False, unstable=False):
    """Indices of a stable sort by ``less`` (Python's sort is stable; ``reverse`` keeps equal keys' order)."""
    idx = sorted(range(len(keys)), key=functools.cmp_to_key(lambda i, j: -1 if less(keys[i], keys[j]) else
                                                           (1 if less(keys[j], keys[i]) else 0)),
                 reverse=descending)
    if unstable:  # swap the first two neighbours with equal keys
        for i in range(len(idx) - 1):
            if keys[idx[i]] == keys[idx[i + 1]]:
                idx[i], idx[i + 1] = idx[i + 1], idx[i]
                break
    return idx


def fake_sort(*, descending=False, unstable=False, less=lambda a, b: a < b):
    def run_(*, temp_storage, d_in_keys, d_out_keys, d_in_values, d_out_values, num_items, **_):
        if temp_storage is None:
            return 0
        k = d_in_keys.a.tolist()
        idx = _pairs_sort(k, less, descending=descending, unstable=unstable)
        d_out_keys.a[:] = d_in_keys.a[idx]
        if d_in_values is not None:
            d_out_values.a[:] = d_in_values.a[idx]
        return 0
    return run_


def fake_segmented_sort(descending, *, shuffle_equal=True, values_not_moved=False, seed=1):
    rng = np.random.default_rng(seed)

    def run_(*, temp_storage, d_in_keys, d_out_keys, d_in_values, d_out_values, num_items, num_segments,
             start_offsets_in, end_offsets_in):
        if temp_storage is None:
            return 0
        k, b, e = d_in_keys.a, start_offsets_in.a, end_offsets_in.a
        for s in range(num_segments):
            idx = list(range(b[s], e[s]))
            if shuffle_equal:  # not stable: equal keys in any order
                idx = [int(i) for i in rng.permutation(idx)]
            idx = sorted(idx, key=lambda i: k[i], reverse=descending)
            d_out_keys.a[b[s]:e[s]] = k[idx]
            if d_in_values is not None:
                d_out_values.a[b[s]:e[s]] = d_in_values.a[b[s]:e[s]] if values_not_moved else d_in_values.a[idx]
        return 0
    return run_


def fake_unique(*, keep_last=False):
    def run_(*, temp_storage, d_in_keys, d_in_items, d_out_keys, d_out_items, d_out_num_selected, num_items, **_):
        if temp_storage is None:
            return 0
        k, v = d_in_keys.a, d_in_items.a
        runs = []
        for i in range(num_items):
            if i == 0 or k[i] != k[i - 1]:
                runs.append([i, i])
            runs[-1][1] = i
        pick = [r[1] if keep_last else r[0] for r in runs]
        d_out_keys.a[:len(pick)] = k[pick]
        d_out_items.a[:len(pick)] = v[pick]
        d_out_num_selected.a[0] = len(pick)
        return 0
    return run_
