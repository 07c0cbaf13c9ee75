"""numba-cuda-mlir's typing of Python operators, as rules on numpy dtypes.

cuda.compute 1.2.1 compiles a spec's Python operator (a lambda, or an operator from code) with
numba-cuda-mlir 0.5.4, which types every node of the expression by numba's rules, not numpy's: integer
arithmetic is 64-bit, Python literals are strongly typed (``1`` is int64, ``0.5`` float64), ``float32``
with ``uint16`` is ``float64``. A reference that evaluated the lambda with numpy's rules (NEP 50: Python
scalars are "weak") computed ``x * x + 1`` on float32 entirely in float32, while the device adds the
literal in float64: the first false failure of issue 16. These functions give numba's result type of each
operator for operand dtypes; :mod:`aot.verify.typed` evaluates an expression with them. They were
tabulated from the real compiler for every operator and dtype pair (tests/test_typing.py checks a sample
against it live where numba-cuda-mlir imports).
"""

from __future__ import annotations

import numpy as np

from .compare import NoReference

B, I1, I2, I4, I8 = np.dtype(bool), np.dtype("i1"), np.dtype("i2"), np.dtype("i4"), np.dtype("i8")
U1, U2, U4, U8, F4, F8 = np.dtype("u1"), np.dtype("u2"), np.dtype("u4"), np.dtype("u8"), np.dtype("f4"), np.dtype("f8")
#: Integer types that numba combines with float32 into float32 (uint16 is *not* one: numba gives float64,
#: numpy float32 -- the one place numba's float promotion differs from numpy's).
_F4_PARTNERS = (B, I1, I2, U1, F4)


class NumbaTypingError(NoReference):
    """numba refuses this combination (the spec could not have been built)."""


def _k(t: np.dtype) -> str:
    return "b" if t == B else t.kind


def _float_result(ta: np.dtype, tb: np.dtype) -> np.dtype:
    if F8 in (ta, tb):
        return F8
    other = tb if ta == F4 else ta
    return F4 if other in _F4_PARTNERS else F8


def arith_type(ta, tb) -> np.dtype:
    """``+ - * // %`` (and the integer part of ``**``): any float -> the float rule; otherwise integer
    arithmetic is 64-bit, unsigned only if both operands are unsigned (bool counts as signed)."""
    ta, tb = np.dtype(ta), np.dtype(tb)
    if "f" in (ta.kind, tb.kind):
        return _float_result(ta, tb)
    return U8 if _k(ta) == "u" and _k(tb) == "u" else I8


def truediv_type(ta, tb) -> np.dtype:
    ta, tb = np.dtype(ta), np.dtype(tb)
    if B in (ta, tb):
        raise NumbaTypingError("numba does not type '/' with a bool operand")
    return _float_result(ta, tb) if "f" in (ta.kind, tb.kind) else F8


def pow_type(ta, tb) -> np.dtype:
    """float ** int keeps the float's type (libdevice powi); float ** float by the float rule; int ** int
    64-bit as arithmetic; int ** float and bool operands are refused by numba."""
    ta, tb = np.dtype(ta), np.dtype(tb)
    if B in (ta, tb) or (ta.kind in "iu" and tb.kind == "f"):
        raise NumbaTypingError(f"numba does not type {ta} ** {tb}")
    if ta.kind == "f" and tb.kind in "iu":
        return ta
    return arith_type(ta, tb)


def unify(ta, tb) -> np.dtype:
    """The type of ``a if c else b`` / ``a or b``: numpy's promotion table (bool joins anything)."""
    ta, tb = np.dtype(ta), np.dtype(tb)
    if ta == B:
        return tb
    if tb == B:
        return ta
    return np.result_type(ta, tb)


def compare_type(ta, tb) -> np.dtype:
    """Both operands are converted to this before comparing: numpy's promotion (uint64 with a signed
    integer compares in float64 in both), except float32 with uint16 (numba float64)."""
    ta, tb = np.dtype(ta), np.dtype(tb)
    if (ta == B) != (tb == B):
        raise NumbaTypingError("numba does not compare a bool with a number")
    if {ta, tb} == {F4, U2}:
        return F8
    return unify(ta, tb)


def bitwise_type(ta, tb) -> np.dtype:
    """``& | ^``: the wider width, signed if either is signed (bool: signed, 8 bits); bool & bool = bool."""
    ta, tb = np.dtype(ta), np.dtype(tb)
    if "f" in (ta.kind, tb.kind):
        raise NumbaTypingError("bitwise operators on floats")
    if ta == B and tb == B:
        return B
    width = max(ta.itemsize, tb.itemsize)
    signed = _k(ta) in "bi" or _k(tb) in "bi"
    return np.dtype(f"{'i' if signed else 'u'}{width}")


def shift_type(ta, tb) -> np.dtype:
    ta, tb = np.dtype(ta), np.dtype(tb)
    if _k(ta) not in "iu" or _k(tb) not in "iu":
        raise NumbaTypingError("shifts need integer operands")
    return I8 if ta.kind == "i" else U8


def neg_type(t) -> np.dtype:
    t = np.dtype(t)
    if t == B:
        raise NumbaTypingError("-bool")
    return t if t.kind == "f" or t == U8 else I8


def invert_type(t) -> np.dtype:
    t = np.dtype(t)
    if t.kind == "f":
        raise NumbaTypingError("~float")
    return B if t == B else (U8 if t.kind == "u" else I8)


def const_type(value) -> np.dtype:
    """A literal: bool -> bool, int -> int64 (uint64 from 2**63 up), float -> float64. numba types Python
    constants strongly (numpy 2 treats Python scalars as 'weak', NEP 50: the root cause of the issue)."""
    if isinstance(value, bool):
        return B
    if isinstance(value, int):
        return U8 if value >= 2 ** 63 else I8
    if isinstance(value, float):
        return F8
    raise NoReference(f"constant {value!r}")

