"""The numpy references of aot.algorithms accept a correct implementation and reject a wrong one, on the
CPU: each check runs against a host stand-in for the device algorithm (tests/host_algorithms.py: CUB's
orders, numba's typing, written independently of the reference), through a GpuCheck whose "device arrays"
are host arrays. Every algorithm rejects a deliberately wrong result; struct types and operators from
code are covered; and the two false failures of issue 16 (a float32 -> float64 lambda, a struct float
sum in another order) are accepted. Guards the references the GPU verification relies on
(tests/test_gpu_algorithms.py, .ci/gpu/gate.sh)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from aot.algorithms import ALGORITHMS
from aot.verify.compare import Mismatch
from host_algorithms import (fake_binary, fake_histogram, fake_reduce, fake_scan, fake_search, fake_segmented_reduce_pair,
                             fake_segmented_sort, fake_select, fake_sort, fake_three_way, fake_unary, fake_unique,
                             fma_f64, run)

DATA = Path(__file__).resolve().parent / "data"
GATE = DATA / "gate"
PAIR = {"pair": (("w", "float64"), ("n", "int32"))}
F4, F8 = np.float32, np.float64


@pytest.fixture(autouse=True)
def gate_ops_on_path():
    """Operators from code (tests/data/gate/gate_ops.py, tests/data/aot_test_ops.py) import by name."""
    sys.path[:0] = [str(GATE), str(DATA)]
    yield
    for p in (str(GATE), str(DATA)):
        sys.path.remove(p)


def device_sq1(x):  # numba: x*x in float32 (fmul f32), fpext, + 1 in float64 (the literal is int64)
    return (x * x).astype(F8) + 1.0


def f32_everywhere(x):  # numpy's arithmetic with a weak literal: all float32 (the old reference's)
    return (x * x + F4(1)).astype(F8)


ISSUE_A = {"dtype": "float32", "out_dtype": "float64", "op": "lambda x: x * x + 1"}
ISSUE_B = {"dtype": "pair", "op": "gate_ops:add_pair", "init": [0, 0]}
NEG_U32 = {"dtype": "uint32", "out_dtype": "float64", "op": "lambda x: -x"}
F4SUM, F8SUM, I4SUM = ({"dtype": d, "op": "plus", "init": 0} for d in ("float32", "float64", "int32"))
SORT_P = {"dtype": "int32", "value_dtype": "int32", "order": "ascending"}
SEG_P = {"dtype": "int32", "value_dtype": "int32", "order": "ascending", "offset_dtype": "int64"}
MIX = {"dtype": "uint8", "dtype2": "int16", "out_dtype": "int32", "op": "lambda a, b: a * b - 7"}
TWP = {"dtype": "float64", "first_op": "lambda x: x * x < 0.25", "second_op": "lambda x: x > 0.5"}
first_tw, second_tw = (lambda v: v * v < 0.25), (lambda v: v > 0.5)


def _mix_device(a, b):
    return a.astype(np.int64) * b.astype(np.int64) - 7


#: (id, algorithm, params, types, fake device, expected verdict, n)
CASES = [
    # issue 16's false failures, and other correct devices the references must accept
    ("a: f32->f64 lambda, device typing", "unary_transform", ISSUE_A, None, fake_unary(device_sq1), "accept", 100_003),
    ("f64 lambda, FMA-contracted", "unary_transform", {"dtype": "float64", "op": "lambda x: x * x + 1"}, None,
     fake_unary(fma_f64), "accept", 3_001),
    ("b: struct segmented reduce, blocked order", "segmented_reduce", ISSUE_B, PAIR, fake_segmented_reduce_pair(),
     "accept", 5_003),
    ("b: struct segmented reduce, sequential", "segmented_reduce", ISSUE_B, PAIR,
     fake_segmented_reduce_pair(chunk=1_000), "accept", 5_003),
    ("struct reduce from code", "reduce", ISSUE_B, PAIR, fake_reduce(lambda a, b: (a[0] + b[0], a[1] + b[1])),
     "accept", 5_003),
    ("f32 sum, sequential", "reduce", F4SUM, None, fake_reduce(chunk=10**6), "accept", 100_003),
    ("f32 sum, CUB order", "reduce", F4SUM, None, fake_reduce(), "accept", 100_003),
    ("f32 exclusive scan, sequential chain", "exclusive_scan", F4SUM, None, fake_scan(inclusive=False), "accept", 20_003),
    ("f32 inclusive scan, sequential chain", "inclusive_scan", F4SUM, None, fake_scan(inclusive=True), "accept", 20_003),
    ("-x on uint32 -> f64 (wraps in uint32, as the H100 does)", "unary_transform", NEG_U32, None,
     fake_unary(lambda x: -x), "accept", 5_003),
    ("code op f32 -> f64", "unary_transform", {"dtype": "float32", "out_dtype": "float64",
                                               "op": "gate_ops:half_plus_one"}, None,
     fake_unary(lambda x: x.astype(F8) * 0.5 + 1.0), "accept", 5_003),
    ("counting i*0.25+1 -> f32", "unary_transform", {"dtype": "int32", "out_dtype": "float32", "input": "counting",
                                                    "op": "lambda i: i * 0.25 + 1"}, None,
     fake_unary(lambda i: i * 0.25 + 1.0), "accept", 5_003),
    ("uint8 * int16 - 7 -> int32", "binary_transform", MIX, None, fake_binary(_mix_device), "accept", 5_003),
    ("segmented sort, equal keys shuffled", "segmented_sort", SEG_P, None, fake_segmented_sort(False), "accept", 0),
    ("three-way, unselected reversed", "three_way_partition", TWP, None,
     fake_three_way(first_tw, second_tw, reverse_rest=True), "accept", 5_003),
    # every algorithm rejects a deliberately wrong result
    ("a: f32 arithmetic throughout", "unary_transform", ISSUE_A, None, fake_unary(f32_everywhere), "reject", 100_003),
    ("a: one element unwritten", "unary_transform", ISSUE_A, None, fake_unary(device_sq1, unwritten_at=777),
     "reject", 100_003),
    ("-x on uint32 not wrapped (int64)", "unary_transform", NEG_U32, None,
     fake_unary(lambda x: -x.astype(np.int64)), "reject", 5_003),
    ("uint8 * int16 in int16", "binary_transform", MIX, None,
     fake_binary(lambda a, b: (a.astype(np.int16) * b - 7).astype(np.int16)), "reject", 5_003),
    ("b: int field off by one", "segmented_reduce", ISSUE_B, PAIR, fake_segmented_reduce_pair(n_delta=1), "reject",
     5_003),
    ("b: init w off by 1e-9", "segmented_reduce", ISSUE_B, PAIR, fake_segmented_reduce_pair(w_init_delta=1e-9),
     "reject", 5_003),
    ("b: empty segments unwritten", "segmented_reduce", ISSUE_B, PAIR, fake_segmented_reduce_pair(skip_empty=True),
     "reject", 5_003),
    ("b: pair subtracted", "segmented_reduce", ISSUE_B, PAIR,
     fake_segmented_reduce_pair(op=lambda a, b: (a[0] - b[0], a[1] - b[1])), "reject", 5_003),
    ("f32 sum drops the last item", "reduce", F4SUM, None, fake_reduce(skip_last=True), "reject", 100_003),
    ("f32 sum with init 1", "reduce", F4SUM, None, fake_reduce(init_delta=1), "reject", 100_003),
    ("f64 sum accumulated in f32", "reduce", F8SUM, None, fake_reduce(accum="float32"), "reject", 100_003),
    ("f64 sum as max", "reduce", F8SUM, None, fake_reduce("maximum"), "reject", 5_003),
    ("i32 exclusive scan made inclusive", "exclusive_scan", I4SUM, None, fake_scan(inclusive=False, wrong_kind=True),
     "reject", 5_003),
    ("i32 exclusive scan, last unwritten", "exclusive_scan", I4SUM, None,
     fake_scan(inclusive=False, unwritten_at=5_002), "reject", 5_003),
    ("f32 inclusive scan made exclusive", "inclusive_scan", F4SUM, None, fake_scan(inclusive=True, wrong_kind=True),
     "reject", 5_003),
    ("f32 inclusive scan as max", "inclusive_scan", F4SUM, None, fake_scan("maximum", inclusive=True), "reject", 5_003),
    ("select: wrong predicate", "select", {"dtype": "int32", "op": "lambda x: x > 0"}, None,
     fake_select(lambda v: v >= 0), "reject", 5_003),
    ("select from code: count off by one", "select", {"dtype": "int64", "op": "gate_ops:is_multiple_of_3",
                                                      "input": "counting"}, None,
     fake_select(lambda i: i % 3 == 0, count_delta=1), "reject", 5_003),
    ("lower_bound as upper_bound", "lower_bound", {"dtype": "int32"}, None, fake_search("right"), "reject", 5_003),
    ("upper_bound as lower_bound", "upper_bound", {"dtype": "float32"}, None, fake_search("left"), "reject", 5_003),
    ("radix sort descending", "radix_sort", SORT_P, None, fake_sort(descending=True), "reject", 5_003),
    ("radix sort unstable", "radix_sort", SORT_P, None, fake_sort(unstable=True), "reject", 5_003),
    ("merge sort unstable", "merge_sort", {"dtype": "int32", "value_dtype": "int64", "op": "less"}, None,
     fake_sort(unstable=True), "reject", 5_003),
    ("merge sort, lambda comparator reversed", "merge_sort", {"dtype": "int32", "value_dtype": "int64",
                                                              "op": "lambda a, b: a > b"}, None,
     fake_sort(), "reject", 5_003),
    ("unique_by_key keeps the last", "unique_by_key", {"dtype": "int32", "value_dtype": "float64"}, None,
     fake_unique(keep_last=True), "reject", 5_003),
    ("segmented sort descending", "segmented_sort", SEG_P, None, fake_segmented_sort(True), "reject", 0),
    ("segmented sort, values not moved", "segmented_sort", SEG_P, None,
     fake_segmented_sort(False, values_not_moved=True), "reject", 0),
    ("histogram upper level + 1", "histogram_even", {"dtype": "float32", "num_levels": 11}, None,
     lambda **kw: fake_histogram(**{**kw, "h_upper_level": kw["h_upper_level"] + 1}), "reject", 5_003),
    ("three-way predicates swapped", "three_way_partition", TWP, None, fake_three_way(second_tw, first_tw),
     "reject", 5_003),
    ("three-way, unselected short", "three_way_partition", TWP, None,
     fake_three_way(first_tw, second_tw, drop_rest=True), "reject", 5_003),
]

CORRECT = {  # a correct device for every algorithm (besides those in CASES)
    "exclusive_scan": (I4SUM, None, fake_scan(inclusive=False)),
    "inclusive_scan": ({"dtype": "float64", "op": "maximum", "init": "-inf"}, None, fake_scan("maximum", inclusive=True)),
    "reduce": (F8SUM, None, fake_reduce()),
    "segmented_reduce": (ISSUE_B, PAIR, fake_segmented_reduce_pair()),
    "select": ({"dtype": "int64", "op": "gate_ops:is_multiple_of_3", "input": "counting"}, None,
               fake_select(lambda i: i % 3 == 0)),
    "lower_bound": ({"dtype": "int32"}, None, fake_search("left")),
    "upper_bound": ({"dtype": "float32"}, None, fake_search("right")),
    "radix_sort": ({**SORT_P, "order": "descending"}, None, fake_sort(descending=True)),
    "merge_sort": ({"dtype": "int32", "value_dtype": "int64", "op": "lambda a, b: a > b"}, None,
                   fake_sort(less=lambda a, b: a > b)),
    "unique_by_key": ({"dtype": "int32", "value_dtype": "float64"}, None, fake_unique()),
    "segmented_sort": ({**SEG_P, "order": "descending"}, None, fake_segmented_sort(True)),
    "unary_transform": (ISSUE_A, None, fake_unary(device_sq1)),
    "binary_transform": ({"dtype": "int32", "op": "bit_xor"}, None, fake_binary(np.bitwise_xor)),
    "histogram_even": ({"dtype": "int32", "num_levels": 11}, None, fake_histogram),
    "three_way_partition": (TWP, None, fake_three_way(first_tw, second_tw)),
}


def verdict(algo, params, types, device, n) -> str:
    try:
        run(algo, params, device, types, n=n or 5_003)
    except Mismatch as e:
        return f"reject: {e}"
    return "accept"


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_reference_verdict(case):
    _, algo, params, types, device, expected, n = case
    got = verdict(algo, params, types, device, n)
    assert got.split(":")[0] == expected, got


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_every_algorithm_accepts_a_correct_device_and_rejects_a_wrong_one(algo):
    params, types, device = CORRECT[algo]
    assert verdict(algo, params, types, device, 5_003) == "accept"
    assert any(c[1] == algo and c[5] == "reject" for c in CASES), f"no wrong {algo} device in CASES"


def test_the_issue_messages_name_what_differs():
    msg = verdict("unary_transform", ISSUE_A, None, fake_unary(f32_everywhere), 100_003)
    assert "unary_transform: " in msg and "of 100003 elements differ; first at [" in msg and "want" in msg
    msg = verdict("segmented_reduce", ISSUE_B, PAIR, fake_segmented_reduce_pair(n_delta=1), 5_003)
    assert "field 'n'" in msg, msg
    msg = verdict("unary_transform", ISSUE_A, None, fake_unary(device_sq1, unwritten_at=777), 100_003)
    assert "1 of 100003 elements never written (0xA5 poison); first at [777]" in msg, msg


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("values", [None, "int32"])
def test_segmented_sort_reference(descending, values):
    p = {"dtype": "float32", "value_dtype": values, "order": "descending" if descending else "ascending",
         "offset_dtype": "int64"}
    assert verdict("segmented_sort", p, None, fake_segmented_sort(descending), 0) == "accept"
    assert verdict("segmented_sort", p, None, fake_segmented_sort(not descending), 0).startswith("reject")


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8"])
def test_histogram_reference(dtype):
    assert verdict("histogram_even", {"dtype": dtype, "num_levels": 11}, None, fake_histogram, 5_003) == "accept"


def test_struct_bbox_reduce_and_code_select():
    types = {"bbox": (("xmin", "float64"), ("ymin", "float64"), ("xmax", "float64"), ("ymax", "float64"))}
    p = {"dtype": "bbox", "op": "aot_test_ops:bbox_union", "init": ["inf", "inf", "-inf", "-inf"]}
    union = fake_reduce(lambda a, b: (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])))
    assert verdict("reduce", p, types, union, 5_003) == "accept"
    wrong = fake_reduce(lambda a, b: (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), min(a[3], b[3])))
    assert "field 'ymax'" in verdict("reduce", p, types, wrong, 5_003)
    sel = {"dtype": "int64", "op": "aot_test_ops:is_multiple_of_7", "input": "counting"}
    assert verdict("select", sel, None, fake_select(lambda i: i % 7 == 0), 5_003) == "accept"
    assert verdict("select", sel, None, fake_select(lambda i: i % 5 == 0), 5_003).startswith("reject")


def test_every_algorithm_has_a_check():
    from aot.algorithms import AlgorithmBase
    for algo in ALGORITHMS.values():
        assert type(algo).check is not AlgorithmBase.check, algo.name


def test_operators_from_code_that_are_not_one_expression():
    """Called element by element (not typed): a correct device passes, a wrong one fails."""
    p = {**ISSUE_B, "op": "gate_ops:add_pair_in_steps"}
    assert verdict("segmented_reduce", p, PAIR, fake_segmented_reduce_pair(), 5_003) == "accept"
    assert "field 'n'" in verdict("segmented_reduce", p, PAIR, fake_segmented_reduce_pair(n_delta=1), 5_003)
    t = {"dtype": "float32", "out_dtype": "float64", "op": "gate_ops:half_plus_one_in_steps"}
    assert verdict("unary_transform", t, None, fake_unary(lambda x: x.astype(F8) * 0.5 + 1.0), 5_003) == "accept"
    assert verdict("unary_transform", t, None, fake_unary(lambda x: x.astype(F8) * 0.5 - 1.0), 5_003) != "accept"


def test_default_matrix_holds_every_algorithm():
    """The bundled build_matrix.yaml (what `verify --gpu --default` checks) covers all 15 algorithms."""
    from aot.build.matrix import load_matrix
    from aot.core.spec import CcclSpec
    algos = {s.algorithm for s in load_matrix().specs if isinstance(s, CcclSpec)}
    assert algos == set(ALGORITHMS), sorted(set(ALGORITHMS) - algos)
