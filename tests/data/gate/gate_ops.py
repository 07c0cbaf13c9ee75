"""Operators from code for the release-gate matrix (tests/data/gate/build_matrix.yaml; tests and
.ci/gpu/gate.sh put this folder on the path). ``sub_pair`` is not in the matrix: .ci/gpu/make_mutants.py
builds a mutant with it in place of ``add_pair`` (an operator swapped at build time under the same name)."""


def add_pair(a, b):
    """The issue's struct {w: float64, n: int32}: both fields added (float64 sums reassociate on a GPU)."""
    return (a.w + b.w, a.n + b.n)


def sub_pair(a, b):
    return (a.w - b.w, a.n - b.n)


def is_multiple_of_3(i):
    return i % 3 == 0


def half_plus_one(x):
    """float32 in, float64 arithmetic (numba types the literals as float64): stored as the spec's out_dtype."""
    return x * 0.5 + 1
