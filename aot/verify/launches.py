"""Recorded launches as checks (issue 36.3): ``aot record`` on a GPU keeps one small launch per numba-cuda
kernel signature beside the matrix (``build_matrix.launches/<spec>.npz`` and ``launches.json``:
:mod:`aot.record.record`); ``aot verify --gpu --package PKG --launches DIR`` replays each through the
packaged artifact (:func:`launch_check`, run by :mod:`aot.verify.numba_gate` like a package's own check)
and compares every array the kernel could write with what the recorded launch left there.

Comparison: integers and booleans bit for bit; floating point within :data:`TOLERANCE` (relative, absolute;
NaN equal to NaN), for the same GPU kind may still round differently between a JIT compile and the packaged
cubin when ``fastmath`` contracts differently. Files are read with ``allow_pickle=False`` and checked
against the index's sha256 before use.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..core.errors import AotError

#: (rtol, atol) per floating dtype kind and size; integers and booleans are compared bit for bit.
TOLERANCE = {2: (1e-3, 1e-3), 4: (1e-5, 1e-6), 8: (1e-12, 1e-12), 16: (1e-12, 1e-12)}
INDEX = "launches.json"


class LaunchMismatch(AotError, AssertionError):
    """A replayed launch wrote other values than the recorded one: the message names the argument and the
    first differing element."""

    return_code = 7


def read_index(folder: Path) -> dict[str, dict]:
    """The kept launches of ``folder`` (spec -> entry); an unreadable index is one error naming the file."""
    path = Path(folder) / INDEX
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise AotError(f"{path}: cannot read the recorded launches ({type(e).__name__})") from None
    launches = doc.get("launches") if isinstance(doc, dict) else None
    if doc.get("version") != 1 or not isinstance(launches, dict):
        raise AotError(f"{path}: not a launches index of version 1")
    return {str(k): v for k, v in launches.items() if isinstance(v, dict)}


def launch_check(folder: Path, entry: dict) -> Callable[[Any], None]:
    """A check (``check(ctx)``, :class:`aot.verify.numba_gate.NumbaCheckContext`) replaying ``entry``."""
    def check(ctx: Any) -> None:
        arrays = _load(Path(folder), entry)
        args, outs = _arguments(arrays, entry)
        device = {i: ctx.array(a) for i, a in args.items() if i in outs}
        call = [device.get(i, a) for i, a in sorted(args.items())]
        grid, block = tuple(entry["grid"]), tuple(entry["block"])
        ctx.kernel[grid, block, 0, int(entry.get("sharedmem") or 0)](*call)
        ctx.sync()
        for i, want in sorted(outs.items()):
            compare(f"argument {i}", device[i].copy_to_host(), want)
    return check


def _load(folder: Path, entry: dict) -> dict[str, np.ndarray]:
    name = entry.get("file")
    if not isinstance(name, str) or "/" in name or name.startswith("."):
        raise AotError(f"{folder / INDEX}: a launch file name {name!r} outside the folder")
    data = (folder / name).read_bytes()
    if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        raise AotError(f"{folder / name}: its sha256 is not the index's")
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _arguments(arrays: dict[str, np.ndarray], entry: dict) -> tuple[dict[int, Any], dict[int, np.ndarray]]:
    """The launch's arguments (arrays as recorded before it, scalars as numpy scalars) and the arrays after."""
    meta = entry.get("args") or []
    args: dict[int, Any] = {}
    outs: dict[int, np.ndarray] = {}
    for i, m in enumerate(meta):
        a = arrays.get(f"in{i}")
        if a is None:
            raise AotError(f"{entry.get('file')}: argument {i} is missing")
        if m.get("array"):
            args[i] = a
            if f"out{i}" not in arrays:
                raise AotError(f"{entry.get('file')}: argument {i}'s values after the launch are missing")
            outs[i] = arrays[f"out{i}"]
        else:
            args[i] = a[()]
    return args, outs


def compare(what: str, got: np.ndarray, want: np.ndarray) -> None:
    """``got`` equals ``want``: bit for bit for integers and booleans, within :data:`TOLERANCE` for floats."""
    if got.shape != want.shape or got.dtype != want.dtype:
        raise LaunchMismatch(f"{what}: {got.dtype}{list(got.shape)} after the replay, {want.dtype}{list(want.shape)} "
                             f"recorded")
    if want.dtype.kind in "fc":
        rtol, atol = TOLERANCE.get(want.dtype.itemsize if want.dtype.kind == "f" else want.dtype.itemsize // 2,
                                   (1e-12, 1e-12))
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:  # integers and booleans: equal values are equal bits
        bad = np.asarray(got != want)
    if np.any(bad):
        idx = tuple(int(x) for x in np.argwhere(bad)[0])
        raise LaunchMismatch(f"{what}: {int(np.count_nonzero(bad))} of {want.size} elements differ from the recorded "
                             f"launch; first at {list(idx)}: got {got[idx].item()!r}, recorded {want[idx].item()!r}")
