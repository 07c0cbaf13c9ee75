"""Operators from code for the release-gate matrix (tests/data/gate/build_matrix.yaml; tests and
.ci/gpu/gate.sh put this folder on the path). ``sub_pair`` is not in the matrix: .ci/gpu/make_mutants.py
builds a mutant with it in place of ``add_pair`` (an operator swapped at build time under the same name)."""

import numpy as np


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


def add_pair_in_steps(a, b):
    """Not one expression: the references call it element by element (tests/test_references.py)."""
    w = a.w + b.w
    return (w, a.n + b.n)


def half_plus_one_in_steps(x):
    y = x * 0.5
    return y + 1


# Issue 20: a stateful operator from code (reads the declared state array ``flags``, bound per call by aot)
# and a tuple operator for a zip reduction.
flags = None


def is_flagged(i):
    return flags[i] != 0


def add_zpair(a, b):
    return (a[0] + b[0], a[1] + b[1])


def half_annotated(x: np.float32) -> np.float32:
    """Annotated (numba-cuda-mlir compiles an annotated function eagerly, for the current device, unless
    cccl_patches.annotated_ops applies): the build host has no device."""
    return x * 0.5
