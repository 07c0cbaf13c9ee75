"""The numpy references of aot.algorithms accept a correct implementation and reject a wrong one, on the
CPU: each check runs against a host-side stand-in for the device algorithm written independently of the
reference (plain Python/numpy), through a GpuCheck whose "device arrays" are host arrays. Guards the
references the GPU verification relies on (tests/test_gpu_algorithms.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from aot.algorithms import ALGORITHMS
from aot.verify.context import GpuCheck

DATA = Path(__file__).resolve().parent / "data"


class HostArray:
    def __init__(self, a):
        self.a = a

    def to_host(self):
        return self.a.copy()


class Counting:
    def __init__(self, start):
        self.start = start


class HostCheck(GpuCheck):
    """Check with host arrays: outputs start as 0xA5 bytes, as on the device."""

    def __init__(self, types=None, n=5_003):
        super().__init__(None, n=n, seed=3, types=types)

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
    return np.arange(x.start, x.start + n) if isinstance(x, Counting) else x.a


def fake_segmented_sort(descending, *, temp_storage, d_in_keys, d_out_keys, d_in_values, d_out_values, num_items,
                        num_segments, start_offsets_in, end_offsets_in):
    if temp_storage is None:
        return 0
    k, b, e = d_in_keys.a, start_offsets_in.a, end_offsets_in.a
    for s in range(num_segments):
        idx = sorted(range(b[s], e[s]), key=lambda i: k[i], reverse=descending)
        d_out_keys.a[b[s]:e[s]] = k[idx]
        if d_in_values is not None:
            d_out_values.a[b[s]:e[s]] = d_in_values.a[idx]
    return 0


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


def fake_three_way(first, second, *, temp_storage, d_in, d_first_part_out, d_second_part_out, d_unselected_out,
                   d_num_selected_out, num_items, **_):
    if temp_storage is None:
        return 0
    x = host(d_in, num_items)
    parts = ([], [], [])
    for v in x.tolist():
        parts[0 if first(v) else 1 if second(v) else 2].append(v)
    for out, p in zip((d_first_part_out, d_second_part_out, d_unselected_out), parts):
        out.a[:len(p)] = p
    d_num_selected_out.a[:] = [len(parts[0]), len(parts[1])]
    return 0


def fake_reduce(op, *, temp_storage, d_in, d_out, num_items, h_init, **_):
    if temp_storage is None:
        return 0
    acc = h_init[0]
    for v in d_in.a:
        acc = op(acc, v)
    d_out.a[0] = acc
    return 0


def fake_select(pred, *, temp_storage, d_in, d_out, d_num_selected_out, num_items, **_):
    if temp_storage is None:
        return 0
    kept = [v for v in host(d_in, num_items).tolist() if pred(v)]
    d_out.a[:len(kept)] = kept
    d_num_selected_out.a[0] = len(kept)
    return 0


def run(algo, params, obj, types=None):
    from aot.algorithms import ALGORITHMS as A
    full = {**A[algo].fields, **params}
    bound = A[algo].bound_arguments(full)  # what the loader binds (operators: the fakes close over their own)
    A[algo].check(lambda **kw: obj(**{**bound, **kw}), full, HostCheck(types))


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("values", [None, "int32"])
def test_segmented_sort_reference(descending, values):
    order = "descending" if descending else "ascending"
    p = {"dtype": "float32", "value_dtype": values, "order": order, "offset_dtype": "int64"}
    run("segmented_sort", p, lambda **kw: fake_segmented_sort(descending, **kw))
    with pytest.raises(AssertionError):  # the other order is wrong
        run("segmented_sort", p, lambda **kw: fake_segmented_sort(not descending, **kw))


def test_segmented_sort_reference_catches_unsorted_values():
    def values_not_moved(**kw):
        fake_segmented_sort(False, **kw)
        if kw["temp_storage"] is not None:
            kw["d_out_values"].a[:] = kw["d_in_values"].a
    with pytest.raises(AssertionError, match="pairs"):
        run("segmented_sort", {"dtype": "int32", "value_dtype": "int64"}, values_not_moved)


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
def test_histogram_reference(dtype):
    run("histogram_even", {"dtype": dtype, "num_levels": 11}, fake_histogram)
    with pytest.raises(AssertionError):
        run("histogram_even", {"dtype": dtype, "num_levels": 11},
            lambda **kw: fake_histogram(**{**kw, "h_upper_level": kw["h_upper_level"] + 1}))


def test_three_way_partition_reference():
    p = {"dtype": "int32", "first_op": "lambda x: x < -10", "second_op": "lambda x: x % 2 == 0"}
    run("three_way_partition", p, lambda **kw: fake_three_way(lambda v: v < -10, lambda v: v % 2 == 0, **kw))
    with pytest.raises(AssertionError):
        run("three_way_partition", p, lambda **kw: fake_three_way(lambda v: v % 2 == 0, lambda v: v < -10, **kw))


def test_transform_references():
    def unary(*, d_in, d_out, num_items):
        d_out.a[:] = [v * 3 + 1 for v in host(d_in, num_items).tolist()]
    run("unary_transform", {"dtype": "int32", "out_dtype": "int64", "op": "lambda i: i * 3 + 1", "input": "counting"},
        unary)

    def binary(*, d_in1, d_in2, d_out, num_items):
        d_out.a[:] = [a ^ b for a, b in zip(d_in1.a.tolist(), d_in2.a.tolist())]
    run("binary_transform", {"dtype": "int32", "op": "bit_xor"}, binary)
    with pytest.raises(AssertionError):
        run("binary_transform", {"dtype": "int32", "op": "bit_or"}, binary)


def test_struct_reduce_and_code_select_references():
    sys.path.insert(0, str(DATA))
    try:
        types = {"bbox": (("xmin", "float64"), ("ymin", "float64"), ("xmax", "float64"), ("ymax", "float64"))}
        p = {"dtype": "bbox", "op": "aot_test_ops:bbox_union", "init": ["inf", "inf", "-inf", "-inf"]}

        run("reduce", p, lambda **kw: fake_reduce(lambda a, b: np.array(
            (min(a["xmin"], b["xmin"]), min(a["ymin"], b["ymin"]), max(a["xmax"], b["xmax"]),
             max(a["ymax"], b["ymax"])), dtype=a.dtype), **kw), types)
        run("select", {"dtype": "int64", "op": "aot_test_ops:is_multiple_of_7", "input": "counting"},
            lambda **kw: fake_select(lambda i: i % 7 == 0, **kw))
        with pytest.raises(AssertionError):
            run("select", {"dtype": "int64", "op": "aot_test_ops:is_multiple_of_7", "input": "counting"},
                lambda **kw: fake_select(lambda i: i % 5 == 0, **kw))
    finally:
        sys.path.remove(str(DATA))


def test_every_algorithm_has_a_check():
    from aot.algorithms import AlgorithmBase
    for algo in ALGORITHMS.values():
        assert type(algo).check is not AlgorithmBase.check, algo.name
