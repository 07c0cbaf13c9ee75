"""Comparing a device's output with a reference: per struct field, with tolerances that say why.

:func:`close` is the one comparison every GPU check ends in. Integers and bools compare exactly; floats
within an absolute tolerance per element (and per struct field) that the reference derived from the
arithmetic (:mod:`aot.verify.typed`: 0 wherever the device cannot round differently) or from the order a
reduction may associate in (:func:`reassociation_tol`); NaN equals NaN. An element whose bytes still hold
the 0xA5 poison the output was filled with was never written, and fails whatever the tolerance.

A failure raises :class:`Mismatch`, an ``AssertionError`` that also carries what differs, how many
elements, the first index and the got/want values, so ``verify --gpu`` can print them as lines (and JSON).
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

POISON = 0xA5
F8 = np.dtype("f8")


class NoReference(Exception):
    """A spec with no reference: verification reports it and never says "ok"."""


class Mismatch(AssertionError):
    """The device's output differs from the reference. ``str()`` is the one-line message; the attributes
    are the same facts for tables and JSON: ``what`` (output and field), ``count`` of ``total`` elements
    differ, the ``index`` of the first, and its ``got`` / ``want`` values (as text)."""

    def __init__(self, what: str, count: int = 0, total: int = 0, index: int | None = None, got: Any = None,
                 want: Any = None, *, reason: str = "differ", field: str | None = None, message: str | None = None):
        self.what, self.count, self.total, self.index, self.reason = what, count, total, index, reason
        self.field = field
        self.got = None if got is None else _text(got)
        self.want = None if want is None else _text(want)
        if message is not None:  # not element-wise (a count, a permutation): the message is the whole story
            self.reason = message
            super().__init__(f"{what}: {message}")
            return
        msg = f"{what}: {count} of {total} elements {reason}"
        if index is not None:
            msg += f"; first at [{index}]" + (f" field {field!r}" if field else "") + ":"
            msg += (f" got {self.got}," if self.got is not None else "") + f" want {self.want}"
        super().__init__(msg)

    def to_json(self) -> dict:
        return {"what": self.what + (f".{self.field}" if self.field else ""), "count": self.count,
                "total": self.total, "index": self.index, "got": self.got, "want": self.want, "reason": self.reason}


def _text(v: Any) -> str:
    if isinstance(v, np.void):  # a struct element: its fields
        return "(" + ", ".join(f"{n}={_text(v[n])}" for n in v.dtype.names or ()) + ")"
    if isinstance(v, (np.floating, float)):
        return repr(float(v)) if np.dtype(type(v)) != np.float32 else f"{float(v)!r} (float32)"
    if isinstance(v, np.generic):
        return repr(v.item())
    return repr(v)


def fields(dt: np.dtype) -> list[tuple[str | None, np.dtype, int]]:
    """(name or None, dtype, byte offset) of every scalar leaf of a (possibly nested struct) dtype."""
    if not dt.names:
        return [(None, dt, 0)]
    out: list[tuple[str | None, np.dtype, int]] = []
    for name in dt.names:
        sub, off = dt.fields[name][:2]  # type: ignore[index]
        out += [((name if n is None else f"{name}.{n}"), t, off + o) for n, t, o in fields(sub)]
    return out


def field(a: np.ndarray, name: str | None) -> np.ndarray:
    if name is None:
        return a
    for part in name.split("."):
        a = a[part]
    return a


def unwritten(got: np.ndarray) -> np.ndarray:
    """Elements whose every field's bytes still hold 0xA5 (``DeviceArray``'s poison): never written."""
    raw = np.ascontiguousarray(got).view(np.uint8).reshape(len(got), got.dtype.itemsize)
    mask = np.ones(len(got), bool)
    for _, t, off in fields(got.dtype):
        mask &= (raw[:, off:off + t.itemsize] == POISON).all(axis=1)
    return mask


def close(got: np.ndarray, want: np.ndarray, what: str, *, tol: Any = None, dont_care: Any = None) -> None:
    """Raise :class:`Mismatch` unless ``got`` matches ``want`` (same shape and dtype): per scalar field of
    a struct, integers and bools exactly, floats within ``tol`` (absolute, an array per element or a
    scalar; for a struct a dict field name -> tolerance; default 0: exact), NaN == NaN, equal infinities.
    Elements in ``dont_care`` (where rounding could decide a comparison either way) are skipped, except
    that an element still holding the poison is always an error unless ``want`` is that bit pattern."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise Mismatch(what, message=f"shape {got.shape}, want {want.shape}")
    if got.dtype != want.dtype:
        raise Mismatch(what, message=f"dtype {got.dtype}, want {want.dtype}")
    n = got.shape[0] if got.ndim else 1
    got, want = got.reshape(n), want.reshape(n)
    if n == 0:
        return
    poisoned = unwritten(got) & ~unwritten(want)
    if poisoned.any():
        i = int(np.flatnonzero(poisoned)[0])
        raise Mismatch(what, int(poisoned.sum()), n, i, None, want[i], reason="never written (0xA5 poison)")
    skip = np.zeros(n, bool) if dont_care is None else np.broadcast_to(np.asarray(dont_care, bool), (n,))
    bad = np.zeros(n, bool)
    first: dict[int, str | None] = {}
    for name, t, _ in fields(got.dtype):
        g, w = field(got, name), field(want, name)
        if t.kind == "f":
            ft = tol.get(name, 0.0) if isinstance(tol, Mapping) else (0.0 if tol is None else tol)
            ft = np.broadcast_to(np.asarray(ft, F8), (n,))
            with np.errstate(all="ignore"):
                gf, wf = g.astype(F8), w.astype(F8)
                ok = (gf == wf) | (np.isnan(gf) & np.isnan(wf)) | (np.abs(gf - wf) <= ft)
        else:
            ok = g == w
        fb = ~ok & ~skip
        for i in np.flatnonzero(fb)[:1]:
            first.setdefault(int(i), name)
        bad |= fb
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        name = first.get(i)
        g, w = (got[i], want[i]) if name is None else (field(got, name)[i], field(want, name)[i])
        raise Mismatch(what, int(bad.sum()), n, i, g, w, field=name)


# ------------------------------------------------------------------------------- reassociation
#: Sequential additions a CUB thread may chain before any tree step (items per thread x tiles per thread
#: at the sizes verify uses; CUB's tuned policies take 8-24 items per thread).
SEQUENTIAL_DEPTH = 64


def tree_height(n: int, *, scan: bool = False) -> int:
    """An upper bound on the roundings along any leaf-to-root path of the order CUB combines ``n`` items
    in: a sequential per-thread run, then warp, block and grid trees (log2 n). A scan adds its decoupled
    look-back chain: one combination per preceding tile (tiles of at least 128 items)."""
    h = SEQUENTIAL_DEPTH + max(1, math.ceil(math.log2(max(n, 2))))
    return h + (math.ceil(n / 128) if scan else 0)


def reassociation_tol(dtype: Any, magnitude: Any, n: int, *, scan: bool = False) -> np.ndarray:
    """How far two float sums of the same ``n`` terms may lie apart when each associates in its own order
    of height <= H: both lie within gamma_H * M of the exact sum (M: the sum of the terms' magnitudes, init
    included), so ``H * eps * M``, per element of ``magnitude`` (per prefix for a scan)."""
    return tree_height(n, scan=scan) * float(np.finfo(dtype).eps) * np.asarray(magnitude, F8)
