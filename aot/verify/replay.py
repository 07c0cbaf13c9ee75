"""Recorded launches as checks (issue 36.3): ``aot verify --gpu --launches DIR`` replays each launch ``aot record``
kept (:mod:`aot.record.launches`: the store's format) against the packaged image of its kernel and
compares what it leaves in memory with what the recorded launch left there.

**Which spec a launch checks.** A launch names its kernel by symbol (the mangled name the driver reports). An
NVRTC unit's kernels are looked up in the packaged image by the names the matrix lists and their symbols read
from the driver; a numba-cuda artifact's header names its entry symbol, and a launch made by numba-cuda also
names the kernel (``pkg.mod:qualname``) and its argument types, which match the spec's signature when the
recorded process compiled the kernel under another symbol. A launch matching no packaged kernel checks
nothing. Replaying imports nothing: the packaged image is loaded by symbol (cuda.core), the arguments are
bytes.

**Replay.** Each recorded allocation is allocated again at its size and filled with its recorded bytes from
before the launch; each pointer argument is the new allocation's address plus the recorded offset; each value
argument is passed as the type it was recorded as. Same grid, block and dynamic shared memory; the device is
synchronized, every allocation read back and compared with its bytes after the recorded launch.

**Comparison** (:func:`compare_buffer`): integers, booleans and buffers of unknown element type bit for bit;
floating point (an element type known from ``__cuda_array_interface__``) within :data:`TOLERANCE` per element
size, NaN equal to NaN, for the recorded process may have run a JIT build that contracts or orders
differently than the packaged cubin. A kernel whose output depends on the order of atomics is not
reproducible bit for bit: write it a check (``[tool.aot.checks]``).

**The store is input** (it may come from elsewhere): ``index.json`` is read bounded and strictly, every field
checked against :data:`aot.record.launches.SCALARS`, the sizes and the offsets, each ``.bin`` read
bounded and checked against its sha256 and its length before use; the first problem is one
:class:`LaunchStoreError` line naming the file and the field.
"""

from __future__ import annotations

import hashlib
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..record.launch_store import MAX_INDEX_BYTES
from ..record.launches import DTYPES, FORMAT, INDEX, MAX_ARGS, MAX_BUFFER, MAX_LAUNCH_BYTES, SCALARS, VERSION
from ..core.errors import ArtifactError
from ..core.format import _read_regular, loads_strict_json
from .compare import Mismatch

#: (rtol, atol) per floating element size in bytes (complex: per component); integers compare bit for bit.
TOLERANCE = {2: (1e-3, 1e-3), 4: (1e-5, 1e-6), 8: (1e-12, 1e-12)}
MAX_LAUNCHES = 4096
MAX_SYMBOL = 4096
#: Largest grid dimension and total threads a stored launch may ask for (the driver's own limits).
MAX_GRID = (1 << 31) - 1
MAX_THREADS = 1 << 36
#: A ctypes scalar type's numpy twin (same width, same bytes).
_NUMPY_OF = {"c_bool": "bool", "c_int8": "int8", "c_uint8": "uint8", "c_int16": "int16", "c_uint16": "uint16",
             "c_int32": "int32", "c_uint32": "uint32", "c_int64": "int64", "c_uint64": "uint64", "c_float": "float32",
             "c_double": "float64", "c_void_p": "uint64"}
#: :data:`aot.verify.gpu.UNRUN` (that module imports this one).
_UNRUN = "loaded, not executed"
_FILE = re.compile(r"^[0-9]{4,6}\.bin$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class LaunchStoreError(ArtifactError):
    """A launch store that is not what :mod:`aot.record.launches` writes: one line, file and field."""


@dataclass(frozen=True)
class Arg:
    kind: str            # "pointer" | "scalar"
    buffer: int = -1
    offset: int = 0
    type: str = ""
    raw: bytes = b""

    def value(self) -> Any:
        """The argument as cuda.core's ``launch`` takes it, with the recorded bytes: Python's own types as
        themselves, a ctypes or numpy scalar as the numpy scalar of its width and kind."""
        t = self.type
        if t == "py_int":
            return int.from_bytes(self.raw, "little", signed=True)
        if t == "py_float":
            return struct.unpack("<d", self.raw)[0]
        if t == "py_bool":
            return bool(self.raw[0])
        return np.frombuffer(self.raw, dtype=np.dtype(_NUMPY_OF.get(t, t)))[0]


@dataclass(frozen=True)
class Launch:
    """One stored launch (fields as in :mod:`aot.record.launches`); ``folder`` holds its ``file``."""

    index: int
    symbol: str
    via: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shmem: int
    buffers: tuple[tuple[int, str | None], ...]
    args: tuple[Arg, ...]
    file: str
    sha256: str
    folder: Path
    numba: dict = field(default_factory=dict)
    #: Each kernel parameter's size as the recording driver reported it (None: not reported).
    params: tuple[int, ...] | None = None

    def states(self) -> list[tuple[bytes, bytes]]:
        """Each buffer's (before, after) bytes, read bounded and checked against the index's sha256."""
        path = self.folder / self.file
        data = read_bounded(path, MAX_LAUNCH_BYTES, 2 * sum(s for s, _ in self.buffers))
        if hashlib.sha256(data).hexdigest() != self.sha256:
            raise LaunchStoreError(f"{path}: its sha256 is not the one {INDEX} records")
        out, at = [], 0
        for size, _ in self.buffers:
            out.append((data[at:at + size], data[at + size:at + 2 * size]))
            at += 2 * size
        return out


def read_bounded(path: Path, limit: int, expect: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` (exactly ``expect`` when given), refused before
    anything is read: a symlink to ``/dev/zero``, a FIFO or a 400 MB file from elsewhere is one
    :class:`LaunchStoreError` line naming it. Both launch stores read through this (and :mod:`aot.verify.launches`)."""
    try:
        return _read_regular(path, limit, expect)
    except OSError as e:
        raise LaunchStoreError(f"{path}: cannot read: {e.strerror or e}") from None
    except ArtifactError as e:  # names the path already
        raise LaunchStoreError(str(e) if str(e).startswith(str(path)) else f"{path}: {e}") from None


def read_index_json(path: Path) -> Any:
    """A launch store's index (``index.json`` or numba's ``launches.json``): bounded, strict JSON."""
    try:
        return loads_strict_json(_read_regular(path, MAX_INDEX_BYTES))
    except (OSError, ValueError, RecursionError, ArtifactError) as e:
        raise LaunchStoreError(f"{path}: not a readable launch index ({type(e).__name__}: "
                               f"{str(e).splitlines()[0][:200] if str(e) else ''})") from None


def read_store(folder: str | Path) -> list[Launch]:
    """The launches of ``folder`` (``<matrix>.launches/``), every field checked; raises
    :class:`LaunchStoreError` naming the file and the field of the first problem."""
    folder = Path(folder)
    path = folder / INDEX
    doc = read_index_json(path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise LaunchStoreError(f"{path}: not an {FORMAT} index of version {VERSION}")
    entries = doc.get("launches")
    if not isinstance(entries, list) or len(entries) > MAX_LAUNCHES:
        raise LaunchStoreError(f"{path}: launches: not a list of at most {MAX_LAUNCHES}")
    launches = [_launch(path, i, e) for i, e in enumerate(entries)]
    files = [x.file for x in launches]
    if len(set(files)) != len(files):
        raise LaunchStoreError(f"{path}: two launches name one file")
    return launches


def _launch(path: Path, i: int, e: Any) -> Launch:
    where = f"{path}: launches[{i}]"

    def bad(what: str, why: str) -> LaunchStoreError:
        return LaunchStoreError(f"{where}.{what}: {why}")

    if not isinstance(e, dict):
        raise LaunchStoreError(f"{where}: not an object")
    symbol, via = e.get("symbol"), e.get("via", "")
    if not isinstance(symbol, str) or not 0 < len(symbol) <= MAX_SYMBOL or not symbol.isprintable():
        raise bad("symbol", "not a kernel symbol")
    if not isinstance(via, str) or len(via) > 64:
        raise bad("via", "not a short text")
    dims = {}
    for name in ("grid", "block"):
        d = e.get(name)
        if not (isinstance(d, list) and len(d) == 3 and all(_int(x, 1, MAX_GRID) for x in d)):
            raise bad(name, f"not three integers in 1..{MAX_GRID}")
        dims[name] = (d[0], d[1], d[2])
    if np.prod(dims["grid"], dtype=object) * np.prod(dims["block"], dtype=object) > MAX_THREADS:
        raise bad("grid", f"more than {MAX_THREADS} threads")
    shmem = e.get("shmem", 0)
    if not _int(shmem, 0, MAX_BUFFER):
        raise bad("shmem", f"not an integer in 0..{MAX_BUFFER}")
    bufs = e.get("buffers")
    if not isinstance(bufs, list) or len(bufs) > MAX_ARGS:
        raise bad("buffers", f"not a list of at most {MAX_ARGS}")
    buffers = []
    for j, b in enumerate(bufs):
        if not isinstance(b, dict) or not _int(b.get("size"), 1, MAX_BUFFER):
            raise bad(f"buffers[{j}].size", f"not an integer in 1..{MAX_BUFFER}")
        if b.get("dtype") is not None and b.get("dtype") not in DTYPES:
            raise bad(f"buffers[{j}].dtype", f"not one of {', '.join(DTYPES)}")
        buffers.append((b["size"], b.get("dtype")))
    if 2 * sum(s for s, _ in buffers) > MAX_LAUNCH_BYTES:
        raise bad("buffers", f"more than {MAX_LAUNCH_BYTES} bytes in all")
    raw_args = e.get("args")
    if not isinstance(raw_args, list) or len(raw_args) > MAX_ARGS:
        raise bad("args", f"not a list of at most {MAX_ARGS}")
    args = [_arg(a, buffers, lambda w, y, j=j: bad(f"args[{j}]{w}", y)) for j, a in enumerate(raw_args)]
    file, sha = e.get("file"), e.get("sha256")
    if not isinstance(file, str) or not _FILE.match(file):
        raise bad("file", "not a NNNN.bin name in the folder")
    if not isinstance(sha, str) or not _HEX64.match(sha):
        raise bad("sha256", "not 64 hex digits")
    numba = e.get("numba") or {}
    if not isinstance(numba, dict) or not isinstance(numba.get("kernel", ""), str) or not (
            isinstance(numba.get("argtypes", []), list) and all(isinstance(t, str) for t in numba.get("argtypes", []))):
        raise bad("numba", "not {kernel: text, argtypes: [text]}")
    params = e.get("params")
    if params is not None and not (isinstance(params, list) and len(params) <= MAX_ARGS
                                   and all(_int(x, 1, 1 << 16) for x in params)):
        raise bad("params", f"not a list of at most {MAX_ARGS} parameter sizes")
    return Launch(i, symbol, via, dims["grid"], dims["block"], shmem, tuple(buffers), tuple(args), file, sha,
                  path.parent, numba, None if params is None else tuple(params))


def _arg(a: Any, buffers: list, bad: Any) -> Arg:
    if not isinstance(a, dict):
        raise bad("", "not an object")
    if a.get("kind") == "pointer":
        j: Any = a.get("buffer")
        if not _int(j, 0, len(buffers) - 1):
            raise bad(".buffer", "not a buffer of this launch")
        if not _int(a.get("offset"), 0, buffers[j][0] - 1):
            raise bad(".offset", f"not inside buffer {j} ({buffers[j][0]} bytes)")
        return Arg("pointer", buffer=j, offset=a["offset"])
    if a.get("kind") == "scalar":
        t, h = a.get("type"), a.get("hex")
        if t not in SCALARS:
            raise bad(".type", "not a known scalar type")
        if not isinstance(h, str) or len(h) != 2 * SCALARS[t] or not re.fullmatch(r"[0-9a-f]*", h):
            raise bad(".hex", f"not {SCALARS[t]} bytes in hex")
        return Arg("scalar", type=t, raw=bytes.fromhex(h))
    raise bad(".kind", "neither pointer nor scalar")


def _int(x: Any, lo: int, hi: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi


# ------------------------------------------------------------------------------------------ comparison
def compare_buffer(what: str, got: bytes, want: bytes, dtype: str | None) -> None:
    """``got`` equals ``want``: bit for bit, or within :data:`TOLERANCE` for floating ``dtype``. Raises
    :class:`aot.verify.compare.Mismatch` naming the first differing element."""
    dt = np.dtype(dtype) if dtype and len(want) % np.dtype(dtype).itemsize == 0 else np.dtype(np.uint8)
    if len(got) != len(want):
        raise Mismatch(what, message=f"{len(got)} bytes read back, {len(want)} recorded")
    g, w = np.frombuffer(got, dt), np.frombuffer(want, dt)
    if dt.kind in "fc":
        rtol, atol = TOLERANCE.get(dt.itemsize // (2 if dt.kind == "c" else 1), (0.0, 0.0))
        gw = g.astype(np.complex128 if dt.kind == "c" else np.float64)
        ww = w.astype(gw.dtype)
        bad = ~np.isclose(gw, ww, rtol=rtol, atol=atol, equal_nan=True)
    else:
        bad = g != w
    n = int(np.count_nonzero(bad))
    if n:
        k = int(np.argmax(bad))
        raise Mismatch(what + ("" if dtype else " (bytes)"), n, w.size, k, g[k], w[k], reason="differ from the "
                       "recorded launch")


# ---------------------------------------------------------------------------------------------- replay
class CudaCoreRunner:
    """The GPU side of a replay: allocations, copies and the launch through cuda.core and cuda.bindings."""

    def __init__(self, device: Any):
        from cuda.bindings import driver
        from cuda.core import LaunchConfig, launch
        self.device, self.drv, self._config, self._launch = device, driver, LaunchConfig, launch
        self._keep: list = []

    def alloc(self, data: bytes) -> int:
        buf = self.device.allocate(len(data), stream=self.device.default_stream)  # keyword-only in cuda.core 1.x
        self._keep.append(buf)
        self.device.sync()  # a stream-ordered allocation is usable by the synchronous copy below
        host = np.frombuffer(data, np.uint8).copy()
        self._check(self.drv.cuMemcpyHtoD(int(buf.handle), host.ctypes.data, len(data)))
        return int(buf.handle)

    def launch(self, kernel: Any, grid: tuple, block: tuple, shmem: int, args: list) -> None:
        stream = self.device.default_stream
        self._launch(stream, self._config(grid=grid, block=block, shmem_size=shmem), kernel, *args)
        stream.sync()

    def read(self, ptr: int, size: int) -> bytes:
        host = np.empty(size, np.uint8)
        self._check(self.drv.cuMemcpyDtoH(host.ctypes.data, ptr, size))
        return host.tobytes()

    def close(self) -> None:
        for buf in self._keep:
            buf.close()
        self._keep.clear()

    @staticmethod
    def _check(res: Any) -> None:
        err = res[0] if isinstance(res, tuple) else res
        if int(err) != 0:
            raise RuntimeError(f"the driver said {err!r}")


def replay(launch: Launch, kernel: Any, runner: Any) -> None:
    """Run ``launch`` on ``kernel`` (the packaged image's) through ``runner`` and compare every buffer."""
    states = launch.states()
    try:
        ptrs = [runner.alloc(before) for before, _ in states]
        args = [ptrs[a.buffer] + a.offset if a.kind == "pointer" else a.value() for a in launch.args]
        runner.launch(kernel, launch.grid, launch.block, launch.shmem, args)
        for j, ((_, after), (size, dtype)) in enumerate(zip(states, launch.buffers)):
            arg = next((i for i, a in enumerate(launch.args) if a.kind == "pointer" and a.buffer == j), j)
            compare_buffer(f"launch {launch.index} argument {arg}", runner.read(ptrs[j], size), after, dtype)
    finally:
        runner.close()


def kernel_symbol(kernel: Any) -> tuple[str, tuple[int, ...] | None]:
    """The symbol and parameter sizes the driver reports for a cuda.core ``Kernel`` (as the recorder read them)."""
    from cuda.bindings import driver
    from ..record.launches import Driver
    drv, handle = Driver(driver), getattr(kernel, "handle", kernel)
    sizes = drv.param_sizes(handle)
    return drv.symbol(handle), None if sizes is None else tuple(sizes)


def numba_match(launch: Launch, spec: Any) -> bool:
    """Whether a numba-cuda launch was of ``spec``'s kernel at ``spec``'s signature (by name and types)."""
    if launch.numba.get("kernel") != spec.kernel:
        return False
    try:
        from cccl_patches.numba_cuda import argtypes_of
        return [str(t) for t in argtypes_of(spec.signature)] == list(launch.numba.get("argtypes") or ())
    except Exception:  # noqa: BLE001 - a signature numba cannot read here matches nothing
        return False


def matching(launches: Iterable[Launch], symbols: dict[str, tuple[int, ...] | None] | Iterable[str],
             spec: Any = None) -> list[Launch]:
    """The launches of ``symbols`` (a packaged image's kernels: symbol -> parameter sizes, where known; a
    launch whose recorded sizes differ is of another kernel of that name), or (numba) of ``spec``'s kernel at
    its argument types."""
    want = symbols if isinstance(symbols, dict) else dict.fromkeys(symbols)
    return [x for x in launches
            if (x.symbol in want and (want[x.symbol] is None or x.params is None or want[x.symbol] == x.params))
            or (spec is not None and x.numba and numba_match(x, spec))]


def claimants(launch: Launch, specs: Iterable[Any]) -> list[str]:
    """The specs of a set that name ``launch``'s kernel: an NVRTC unit listing its symbol as a kernel name (an
    ``extern "C"`` kernel), a numba kernel at its argument types. Two or more: the launch is ambiguous (one
    source built twice with other macros), and a replay that does not reproduce it fails no one."""
    out = []
    for spec in specs:
        if spec.family == "nvrtc" and launch.symbol in spec.kernels:
            out.append(spec.name)
        elif spec.family == "numba" and launch.numba and numba_match(launch, spec):
            out.append(spec.name)
    return out


# ------------------------------------------------------------------------------------------------ gate
def unchecked(rows: Iterable[Any]) -> list[str]:
    """The specs with a row that ran nothing (``loaded, not executed``): neither a check nor a recorded launch."""
    return sorted({r.spec for r in rows if r.status == _UNRUN})


def unchecked_line(names: list[str], allowed: bool) -> str:
    """The line under the ``verify --gpu`` table saying how many kernels nothing checked, and what it means."""
    shown = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
    return (f"{len(names)} unchecked (neither a check nor a recorded launch): {shown}; "
            + ("allowed (--allow-unchecked)" if allowed else "the gate fails (pass --allow-unchecked to accept them, "
               "or record launches: aot record, or check every kernel with the library's own command: aot gate)"))
