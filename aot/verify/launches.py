"""Recorded launches as checks (issue 36.3): ``aot record`` on a GPU keeps one small launch per numba-cuda
kernel signature beside the matrix (``build_matrix.launches/<spec>.npz`` and ``launches.json``:
:mod:`aot.record.record`); ``aot verify --gpu --package PKG --launches DIR`` replays each through the
packaged artifact (:func:`launch_check`, run by :mod:`aot.verify.numba_gate` like a package's own check)
and compares every array the kernel could write with what the recorded launch left there.

Comparison: integers and booleans bit for bit; floating point within :data:`TOLERANCE` (relative, absolute;
NaN equal to NaN), for the same GPU kind may still round differently between a JIT compile and the packaged
cubin when ``fastmath`` contracts differently.

The store is input (a package's may come from elsewhere): it is read as the other store is
(:mod:`aot.verify.replay`: bounded, regular files only, strict JSON, every field checked), each ``.npz``
checked against the index's sha256, unpacked bounded and never with pickle; the first problem is one
:class:`~aot.verify.replay.LaunchStoreError` line naming the file and the field.
"""

from __future__ import annotations

import hashlib
import io
import re
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..record.hook_numba import MAX_LAUNCH_BYTES
from ..record.launches import MAX_ARGS, MAX_BUFFER
from ..core.errors import AotError
from ..core.format import is_sha256_hex
from ..core.text import short
from .replay import MAX_GRID, MAX_LAUNCHES, MAX_SYMBOL, MAX_THREADS, LaunchStoreError, read_bounded, read_index_json

#: (rtol, atol) per floating dtype kind and size; integers and booleans are compared bit for bit.
TOLERANCE = {2: (1e-3, 1e-3), 4: (1e-5, 1e-6), 8: (1e-12, 1e-12), 16: (1e-12, 1e-12)}
INDEX = "launches.json"
#: Largest ``.npz`` read, and the most its members may inflate to: every argument before the launch and every
#: array after it (:data:`aot.record.hook_numba.MAX_LAUNCH_BYTES` each), with room for numpy's headers.
MAX_NPZ_BYTES = 2 * MAX_LAUNCH_BYTES + (1 << 20)
MAX_ZIP_DIRECTORY = 1 << 20
_FILE = re.compile(r"^(?!\.)[\w.-]{1,250}\.npz$")  # a spec name (aot.core.rules) + .npz: no folder, no dotfile
_MEMBER = re.compile(r"^(in|out)[0-9]{1,4}\.npy$")


class LaunchMismatch(AotError, AssertionError):
    """A replayed launch wrote other values than the recorded one: the message names the argument and the
    first differing element."""

    return_code = 7


def read_index(folder: Path) -> dict[str, dict]:
    """The kept launches of ``folder`` (spec -> entry), every field checked: the store may come from elsewhere
    (a package's), so it is read as :mod:`aot.verify.replay` reads the other store (bounded, strict JSON, one
    :class:`~aot.verify.replay.LaunchStoreError` line naming the file, the spec and the field)."""
    path = Path(folder) / INDEX
    doc = read_index_json(path)
    launches = doc.get("launches") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(launches, dict):
        raise LaunchStoreError(f"{path}: not a launches index of version 1")
    if len(launches) > MAX_LAUNCHES:
        raise LaunchStoreError(f"{path}: launches: more than {MAX_LAUNCHES}")
    for name, entry in launches.items():
        problem = _entry_problem(entry)
        if problem:
            raise LaunchStoreError(f"{path}: launches[{short(name)}]{problem}")
    return dict(launches)


def _entry_problem(e: Any) -> str | None:
    """What is wrong with one index entry (``.field: why``), else ``None``: the fields :func:`launch_check` uses,
    as :func:`aot.record.record.kept_launches` writes them."""
    if not isinstance(e, dict):
        return ": not an object"
    dims = []
    for name in ("grid", "block"):
        d = e.get(name)
        if not (isinstance(d, list) and 1 <= len(d) <= 3 and all(_int(x, 1, MAX_GRID) for x in d)):
            return f".{name}: not one to three integers in 1..{MAX_GRID}"
        dims.extend(d)
    if np.prod(dims, dtype=object) > MAX_THREADS:
        return f".grid: more than {MAX_THREADS} threads"
    if not _int(e.get("sharedmem", 0), 0, MAX_BUFFER):
        return f".sharedmem: not an integer in 0..{MAX_BUFFER}"
    args = e.get("args")
    if not isinstance(args, list) or len(args) > MAX_ARGS:
        return f".args: not a list of at most {MAX_ARGS}"
    for j, a in enumerate(args):
        if not isinstance(a, dict) or not isinstance(a.get("array", False), bool):
            return f".args[{j}]: not an object saying whether it is an array"
    file, sha = e.get("file"), e.get("sha256")
    if not isinstance(file, str) or not _FILE.match(file):
        return ".file: not a .npz name in the folder"
    if not isinstance(sha, str) or not is_sha256_hex(sha):
        return ".sha256: not 64 hex digits"
    for name in ("kernel", "signature"):
        if not isinstance(e.get(name, ""), str) or len(e.get(name, "")) > MAX_SYMBOL:
            return f".{name}: not a text of at most {MAX_SYMBOL} characters"
    return None


def _int(x: Any, lo: int, hi: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi


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
    """The arrays of ``entry``'s ``.npz``: read bounded (:func:`aot.verify.replay.read_bounded`), checked against
    the index's sha256, then unpacked with every member's size known before it is inflated and every array's
    size checked against the bytes that hold it (a 2 MB zip bomb inflated to 2 GiB; a header may claim 2**40
    elements), never with pickle."""
    name = entry.get("file")
    if not isinstance(name, str) or not _FILE.match(name):
        raise LaunchStoreError(f"{folder / INDEX}: a launch file name {short(name)} outside the folder")
    path = folder / name
    data = read_bounded(path, MAX_NPZ_BYTES)
    if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
        raise LaunchStoreError(f"{path}: its sha256 is not the index's")
    try:
        return _arrays(data)
    except LaunchStoreError as e:
        raise LaunchStoreError(f"{path}: {e}") from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, RuntimeError, OverflowError) as e:
        raise LaunchStoreError(f"{path}: not a launch file numpy wrote ({type(e).__name__}: "
                               f"{str(e).splitlines()[0][:200] if str(e) else ''})") from None


def _arrays(data: bytes) -> dict[str, np.ndarray]:
    end = data.rfind(b"PK\x05\x06", max(0, len(data) - 22 - 0xFFFF))
    if end < 0 or int.from_bytes(data[end + 12:end + 16], "little") > MAX_ZIP_DIRECTORY:
        raise LaunchStoreError(f"not a zip file with a central directory of at most {MAX_ZIP_DIRECTORY} bytes")
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        infos = z.infolist()
        if len(infos) > 2 * MAX_ARGS or not all(_MEMBER.match(i.filename) for i in infos):
            raise LaunchStoreError(f"members are not at most {2 * MAX_ARGS} inN.npy/outN.npy")
        if sum(i.file_size for i in infos) > MAX_NPZ_BYTES:
            raise LaunchStoreError(f"its members inflate past {MAX_NPZ_BYTES} bytes")
        out = {}
        for info in infos:
            raw = z.read(info)  # zipfile inflates no more than the size it was told (then checks the CRC)
            f = io.BytesIO(raw)
            version = np.lib.format.read_magic(f)
            header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = header(f)
            need = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if dtype.hasobject or need != len(raw) - f.tell():
                raise LaunchStoreError(f"{info.filename}: its header claims {dtype}{list(shape)}, "
                                       f"{len(raw) - f.tell()} bytes hold it")
            f.seek(0)
            out[info.filename[:-4]] = np.lib.format.read_array(f, allow_pickle=False)
        return out


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
