"""The references type operators as the device does (aot.verify.numba_types / aot.verify.typed), and
compare with tolerances that say why (aot.verify.compare). CPU only.

* numba-cuda-mlir's result types, asked live from the compiler cuda.compute uses (where it imports), for a
  sample of operators x dtype pairs, literals and unary operators;
* fixed cases of the typing table of issue 16 (numba vs numpy) that hold without the compiler;
* values: the float32 -> float64 lambda bit for bit, FMA contraction inside the deviation bound, comparisons
  don't-care only where rounding could flip them;
* close(): struct fields, poison, NaN; the reassociation bound holds for a sequential float32 sum.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

from aot.verify import numba_types as T
from aot.verify.compare import Mismatch, close, reassociation_tol
from aot.verify.reference import expect_reduce, expect_transform, np_operator
from aot.verify.typed import binop, compare, evaluate, leaf, vet_lambda

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "bool"]
OPNAME = {"+": "Add", "-": "Sub", "*": "Mult", "/": "Div", "//": "FloorDiv", "%": "Mod", "**": "Pow",
          "&": "BitAnd", "|": "BitOr", "^": "BitXor", "<<": "LShift", ">>": "RShift"}


def ours(src: str, dtypes) -> str:
    """Our result type of lambda ``src`` for argument ``dtypes``, named as numba names it ("ERR": refused)."""
    tree = vet_lambda(src)
    env = {a.arg: leaf(np.ones(2, np.dtype(d))) for a, d in zip(tree.args.args, dtypes)}
    try:
        t = evaluate(tree.body, env).dtype
    except T.NumbaTypingError:
        return "ERR"
    return "bool" if t == np.dtype(bool) else str(t)


@pytest.fixture(scope="module")
def numba_infer():
    """numba-cuda-mlir's typing of a lambda, without a GPU (cuda.compute's own compiler)."""
    warnings.simplefilter("ignore")
    try:
        from numba_cuda_mlir import compiler, types as nt
        import cuda.compute._mlir as m
        m.refresh_contexts()
        target = m._target_without_a_device
    except Exception as e:  # noqa: BLE001 - not this cuda.compute / numba-cuda-mlir: the fixed cases still run
        pytest.skip(f"numba-cuda-mlir typing unavailable: {type(e).__name__}: {e}")
    names = {d: getattr(nt, "boolean" if d == "bool" else d) for d in DTYPES}

    def infer(src, dtypes):
        try:
            with target((9, 0)):
                r = compiler._compile_only(eval(src), tuple(names[d] for d in dtypes), {"device": True})  # noqa: S307
        except Exception:  # noqa: BLE001 - numba refuses the combination
            return "ERR"
        return str(r.signature.return_type)
    return infer


def test_binary_operators_match_numba(numba_infer):
    """Every operator with every pair of a sample of dtypes (both orders, ~1100 typings), against the
    compiler; a combination numba refuses must be refused here too (such a spec could not have built)."""
    sample = ["int8", "int32", "uint8", "uint16", "uint32", "uint64", "int64", "float32", "float64", "bool"]
    bad = []
    for op in ["+", "-", "*", "/", "//", "%", "**", "<", "==", "&", ">>"]:
        for a, b in itertools.product(sample, sample):
            src = f"lambda a, b: a {op} b"
            want, got = numba_infer(src, [a, b]), ours(src, [a, b])
            if got != want:
                bad.append(f"{a} {op} {b}: numba {want}, ours {got}")
    assert not bad, f"{len(bad)} mismatches: {bad[:10]}"


@pytest.mark.parametrize("form", ["a * a + 1", "a + 1.0", "1 - a", "a / 2", "a // 3", "a % 3", "a ** 2",
                                  "a ** 0.5", "-a", "~a", "a & 1", "a >> 1", "a if a > 0 else 0", "a > 0 and a",
                                  "(a > 0) + 1", "a + 3000000000", "a == 0.1", "not a"])
def test_literals_and_unary_operators_match_numba(numba_infer, form):
    bad = [f"{d}: numba {w}, ours {g}" for d in DTYPES
           if (w := numba_infer(f"lambda a: {form}", [d])) != (g := ours(f"lambda a: {form}", [d]))]
    assert not bad, f"{form}: {bad}"


#: (expression, input dtypes, numba's result type): the typing table of issue 16, where numpy differs
FIXED = [("lambda x: x * x + 1", ["float32"], "float64"), ("lambda x: x * x + 1", ["int32"], "int64"),
         ("lambda x: x * x + 1", ["uint64"], "int64"), ("lambda x: x * 2.5", ["float32"], "float64"),
         ("lambda a, b: a + b", ["int64", "uint64"], "int64"), ("lambda a, b: a + b", ["float32", "uint16"], "float64"),
         ("lambda a, b: a + b", ["int8", "int8"], "int64"), ("lambda a, b: a * b", ["uint8", "uint8"], "uint64"),
         ("lambda x: -x", ["uint32"], "int64"), ("lambda x: -x", ["uint64"], "uint64"),
         ("lambda x: x ** 2", ["float32"], "float32"), ("lambda x: x ** 0.5", ["float32"], "float64"),
         ("lambda a, b: a & b", ["int8", "uint8"], "int8"), ("lambda x: ~x", ["uint16"], "uint64"),
         ("lambda x: x if x > 0 else 0", ["uint32"], "int64"), ("lambda x: x > 0 and x", ["float32"], "float32"),
         ("lambda x: (x > 0) + 1", ["float32"], "int64"), ("lambda x: x / 2", ["int8"], "float64")]


@pytest.mark.parametrize("src,dtypes,want", FIXED, ids=[f"{s[10:]}|{','.join(d)}" for s, d, _ in FIXED])
def test_fixed_numba_types(src, dtypes, want):
    assert ours(src, dtypes) == want


def test_the_issue_transform_is_bit_for_bit_the_device():
    x = np.random.default_rng(0).uniform(-1, 1, 100_003).astype(np.float32)
    e = expect_transform("lambda x: x * x + 1", np.float64, x)
    assert np.array_equal(e.want, (x * x).astype(np.float64) + 1.0) and not e.dont_care.any()
    assert not np.any(e.tol)  # float32 product, float64 add: nothing the device may contract


def test_fma_contraction_is_inside_the_bound_and_nothing_else_is():
    from fractions import Fraction
    x = np.random.default_rng(2).uniform(-1, 1, 3000)
    fma = np.array([float(Fraction(float(v)) ** 2 + 1) for v in x])
    e = expect_transform("lambda x: x * x + 1", np.float64, x)
    assert (fma != e.want).any()  # contraction changes some results ...
    close(fma, e.want, "fma", tol=e.tol, dont_care=e.dont_care)  # ... within the bound
    with pytest.raises(Mismatch):
        close(e.want + 4 * np.spacing(e.want), e.want, "4 ulp", tol=e.tol)


def test_comparisons_are_dont_care_only_where_rounding_could_flip_them():
    x = np.array([0.1, 0.5, 2.0])
    e = expect_transform("lambda x: x * x + 0.5 > 0.51", np.dtype(bool), x)  # an FMA may flip [0]
    assert e.dont_care.tolist() == [True, False, False] and e.want[1:].tolist() == [True, True]
    assert not expect_transform("lambda x: x * 3 > 0.3", np.dtype(bool), x.astype(np.float32)).dont_care.any()
    e = expect_transform("lambda x: x == 0.1", np.dtype(bool), x.astype(np.float32))
    assert e.want.tolist() == [False, False, False]  # float32(0.1) != double 0.1, as on the device


def test_np_operator_is_typed_like_the_device():
    x = np.array([3, 70000], np.uint32)
    # typed int64, but negated in uint32 first as the H100 does (-851 gave 4294966445.0 in the gate run)
    assert np_operator("lambda x: -x")(x).tolist() == [2 ** 32 - 3, 2 ** 32 - 70000]
    assert np_operator("lambda a, b: a * b")(np.array([200], np.uint8), np.array([3], np.uint8)).tolist() == [600]


def test_binop_and_compare_direct():
    a, b = leaf(np.array([2**31 - 1], np.int32)), leaf(np.array([1], np.int32))
    assert binop("Add", a, b).v.tolist() == [2**31] and binop("Add", a, b).dtype == np.int64
    assert compare("Lt", leaf(np.array([-1], np.int64)), leaf(np.array([1], np.uint64))).v.tolist() == [True]


def test_close_struct_fields_poison_nan():
    dt = np.dtype([("w", "f8"), ("n", "i4")], align=True)
    want = np.array([(1.0, 3), (2.0, 4)], dt)
    got = want.copy()
    got["w"][1] += 1e-13
    close(got, want, "s", tol={"w": np.array([0.0, 1e-12])})
    with pytest.raises(Mismatch, match="field 'w'"):
        close(got, want, "s", tol={"w": 0.0})
    got["n"][0] += 1
    with pytest.raises(Mismatch, match="field 'n'"):
        close(got, want, "s", tol={"w": 1.0})
    poisoned = np.zeros(4, np.float32)
    poisoned.view(np.uint8)[4:8] = 0xA5  # -2.9e-16: inside any tolerance around 0, and still an error
    with pytest.raises(Mismatch, match="never written"):
        close(poisoned, np.zeros(4, np.float32), "p", tol=1e-3, dont_care=np.ones(4, bool))
    close(np.array([np.nan, np.inf, -np.inf]), np.array([np.nan, np.inf, -np.inf]), "n")
    with pytest.raises(Mismatch):
        close(np.array([np.inf]), np.array([-np.inf]), "n", tol=1e300)


def test_a_sequential_float32_sum_is_far_inside_the_reassociation_bound():
    x = np.random.default_rng(5).uniform(-1, 1, 100_003).astype(np.float32)
    seq = np.float32(0)
    for v in x:
        seq = np.float32(seq + v)
    e = expect_reduce("plus", np.float32, np.concatenate([[np.float32(0)], x]))
    assert abs(float(seq) - float(e.want[0])) < e.tol[0] / 10
    assert e.tol[0] <= reassociation_tol(np.float32, np.abs(x).sum(), len(x) + 1) * 1.01
    exact = expect_reduce("plus", np.int32, np.arange(1000, dtype=np.int32))
    assert exact.want.tolist() == [499500] and not np.any(exact.tol)  # integers: exact
    assert not np.any(expect_reduce("maximum", np.float64, x.astype(np.float64)).tol)  # selections: exact
    assert not np.any(expect_reduce("minimum", np.float32, x).tol)  # float32 too
