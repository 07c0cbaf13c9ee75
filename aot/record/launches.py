"""Kernel launches kept by ``aot record`` (issue 36.3): a family-agnostic hook of the recorded processes, and the
store it fills beside the matrix, which ``aot verify --gpu`` replays (:mod:`aot.verify.replay`).

**Where launches are seen.** Every kernel a Python library launches reaches the driver through one of two
Python-level calls, whatever compiled it: cuda.core's ``launch(stream, config, kernel, *args)`` (NVRTC units
compiled with ``cuda.core.Program``, and numba-cuda, whose ``_Kernel.launch`` flattens each argument into it)
and cuda.bindings' ``cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, (values, types), extra)`` (raw
NVRTC callers). This module wraps both (``TARGETS``: the modules that define them, patched right after they
load) and keeps, per kernel (symbol and parameter sizes), the first :data:`MAX_PER_KERNEL` launch(es) it can
replay: grid, block, dynamic shared memory, each argument's bytes, and for each argument that is a device
address, the whole allocation it points into (the driver's ``cuMemGetAddressRange``) before the launch and
after it (the context synchronized). A value the driver does not know as a device address is kept as a value.

**What is not kept** (each a ``why`` in the records, listed by ``aot record``): an allocation over
:data:`MAX_BUFFER` bytes, a launch over :data:`MAX_LAUNCH_BYTES`, an explicit buffer (a cuda.core ``Buffer``)
the driver cannot size, an argument of a type whose bytes are not known, a structure passed by value through
a raw ``void**`` ``kernelParams`` (whose entries are read with the sizes the driver reports for the kernel's
parameters), a launch into a graph being captured, and a process past :data:`MAX_PROCESS_BYTES`. CuPy's own
launches happen in C (not seen here).

**Cost and safety.** A kept launch costs two context synchronizations and the copies; the launch itself runs
once, with the caller's arguments, and its exceptions pass through unchanged. A failure of the keeping is a
``skipped`` record, never the command's error. Stdlib only (numpy is not needed): the record hook loads this
file by path (``FAMILY_HOOKS``); :mod:`aot.record.launch_store` writes what it kept beside the matrix.

**The store** (``<matrix>.launches/``): ``index.json`` (``{"format": "aot-launches", "version": 1,
"launches": [...], "skipped": [...]}``, written last) and one ``<n>.bin`` per launch: each buffer's bytes
before, then after, in buffer order (``2 * sum(size)`` bytes). An entry: ``symbol``, ``via``, ``grid``,
``block``, ``shmem``, ``buffers`` (``size``, ``dtype`` or null), ``args`` (``{"kind": "pointer", "buffer":
j, "offset": k}`` or ``{"kind": "scalar", "type": T, "hex": bytes}``), ``params`` (each parameter's size, as
the driver reports it, when it does), ``file``, ``sha256`` and, for a numba-cuda launch, ``numba``
(``kernel`` ``pkg.mod:qualname``, ``argtypes``). No pickle anywhere.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib
import os
import re
import struct
import sys
from typing import Any, Callable

#: The modules whose import triggers :func:`patch` (``hook.FAMILY_HOOKS``; none is another hook's).
TARGETS = ("cuda.core._launcher", "cuda.bindings.driver")
#: Modules that bind the launch functions by name (``from cuda.core import launch``).
_REBOUND = ("cuda.core", "cuda.core.experimental", "numba.cuda.dispatcher", "cuda.bindings.driver")
#: Launches kept per kernel (its symbol and parameter sizes: one source rendered per dtype is one symbol) in one
#: process and in the store; tries per kernel before giving up.
MAX_PER_KERNEL = 1
MAX_TRIES = 4
#: One allocation, one launch (before and after), one process: bytes kept at most.
MAX_BUFFER = 1 << 20
MAX_LAUNCH_BYTES = 4 << 20
MAX_PROCESS_BYTES = 32 << 20
MAX_ARGS = 512
INDEX = "index.json"
FORMAT = "aot-launches"
VERSION = 1
#: Scalar types a kept argument may have, and their sizes: ctypes names, numpy dtype names, Python's own.
SCALARS = {"c_bool": 1, "c_int8": 1, "c_uint8": 1, "c_int16": 2, "c_uint16": 2, "c_int32": 4, "c_uint32": 4,
           "c_int64": 8, "c_uint64": 8, "c_float": 4, "c_double": 8, "c_void_p": 8,
           "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
           "uint64": 8, "float16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16,
           "py_int": 8, "py_float": 8, "py_bool": 1}
#: ctypes spell some types by platform aliases (``c_long`` is ``c_int64`` here): their canonical names.
_CTYPE_ALIAS = {"c_byte": "c_int8", "c_ubyte": "c_uint8", "c_short": "c_int16", "c_ushort": "c_uint16",
                "c_int": "c_int32", "c_uint": "c_uint32", "c_long": "c_int64", "c_ulong": "c_uint64",
                "c_longlong": "c_int64", "c_ulonglong": "c_uint64", "c_size_t": "c_uint64", "c_ssize_t": "c_int64",
                "c_char": "c_int8"}
#: Element types a buffer may be compared as (from ``__cuda_array_interface__`` typestrs).
DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
          "float64", "complex64", "complex128")
#: A raw parameter's bytes by its size, as the ctypes type that keeps them (a float's bits travel as-is).
_BY_SIZE = {1: ctypes.c_uint8, 2: ctypes.c_uint16, 4: ctypes.c_uint32, 8: ctypes.c_uint64}
_TYPESTR = re.compile(r"^[<|=]([biufc])(1|2|4|8|16)$")

_state: dict[str, Any] = {"folder": None, "kept": {}, "tries": {}, "bytes": 0, "n": 0}


class Skip(Exception):
    """A launch this module cannot keep; the message says why (it becomes the record's ``why``)."""


# ------------------------------------------------------------------------------------------ the driver
class Driver:
    """The driver calls a kept launch needs (cuda.bindings), behind four methods the CPU tests replace."""

    def __init__(self, drv: Any):
        self.drv = drv

    def _ok(self, res: Any) -> Any:
        res = res if isinstance(res, tuple) else (res,)
        if int(res[0]) != 0:
            raise Skip(f"the driver said {res[0]!r}")
        return res[1:]

    def allocation(self, ptr: int) -> tuple[int, int] | None:
        """(base, size) of the device allocation holding address ``ptr``; None when it is not one."""
        try:
            res = self.drv.cuMemGetAddressRange(ptr)
        except Exception:  # noqa: BLE001 - a value the bindings refuse as an address is not one
            return None
        if int(res[0]) != 0:
            return None
        return int(res[1]), int(res[2])

    def known(self, ptr: int) -> bool:
        """Whether the driver knows ``ptr`` as an address at all (pinned or registered host memory included)."""
        attr = getattr(getattr(self.drv, "CUpointer_attribute", None), "CU_POINTER_ATTRIBUTE_MEMORY_TYPE", None)
        if attr is None:
            return False
        try:
            return int(self.drv.cuPointerGetAttribute(attr, ptr)[0]) == 0
        except Exception:  # noqa: BLE001 - a value the bindings refuse as a pointer is not one
            return False

    def to_host(self, base: int, size: int) -> bytes:
        buf = bytearray(size)
        self._ok(self.drv.cuMemcpyDtoH(ctypes.addressof((ctypes.c_char * size).from_buffer(buf)), base, size))
        return bytes(buf)

    def sync(self) -> None:
        self._ok(self.drv.cuCtxSynchronize())

    def capturing(self, stream: Any) -> bool:
        """Whether ``stream`` is capturing a graph (then nothing may synchronize); unknown streams: no."""
        try:
            res = self.drv.cuStreamIsCapturing(stream)
        except Exception:  # noqa: BLE001 - not a stream handle the bindings take (0, None: the legacy stream)
            return False
        return int(res[0]) == 0 and int(res[1]) != 0

    def param_sizes(self, handle: Any) -> list[int] | None:
        """The size of each of the kernel's parameters (``cu{Kernel,Func}GetParamInfo``); None if unknown."""
        getter = getattr(self.drv, "cuKernelGetParamInfo" if type(handle).__name__ == "CUkernel"
                         else "cuFuncGetParamInfo", None)
        if getter is None:
            return None
        sizes: list[int] = []
        while len(sizes) <= MAX_ARGS:
            res = getter(handle, len(sizes))
            if int(res[0]) != 0:
                return sizes or None  # none at all: a kernel without parameters, or a driver that cannot say
            sizes.append(int(res[2]))
        return None

    def symbol(self, handle: Any) -> str:
        """The kernel's symbol (its mangled name) from a ``CUkernel`` or ``CUfunction`` handle."""
        kind = type(handle).__name__
        getter = self.drv.cuKernelGetName if kind == "CUkernel" else self.drv.cuFuncGetName
        name = self._ok(getter(handle))[0]
        return name.decode("utf-8", "replace") if isinstance(name, (bytes, bytearray)) else str(name)


# --------------------------------------------------------------------------------------- the capture
def describe_args(args: list, drv: Driver, dtypes: dict[int, str]) -> tuple[list[dict], list[dict], list]:
    """(args, buffers, [(base, size)]) of a launch's arguments, or :class:`Skip`. Each argument is a value
    (its type and bytes) or a pointer into an allocation the driver sizes (kept whole, once per allocation)."""
    if len(args) > MAX_ARGS:
        raise Skip(f"{len(args)} arguments (more than {MAX_ARGS})")
    out: list[dict] = []
    buffers: list[dict] = []
    where: dict[int, int] = {}
    spans: list = []
    for i, a in enumerate(args):
        kind, raw, maybe_ptr, explicit = _scalar(i, a)
        ptr = int.from_bytes(raw, "little") if maybe_ptr or explicit else 0
        found = drv.allocation(ptr) if ptr else None
        if found is None:
            if explicit:
                raise Skip(f"argument {i} is a buffer the driver cannot size (a pointer of no known allocation)")
            if ptr and drv.known(ptr):  # host memory the device reads: its address means nothing in a replay
                raise Skip(f"argument {i} points to memory the driver knows but cannot size (host memory)")
            out.append({"kind": "scalar", "type": kind, "hex": raw.hex()})
            continue
        base, size = found
        if size > MAX_BUFFER:
            raise Skip(f"argument {i} points into an allocation of {size} bytes (more than {MAX_BUFFER})")
        if base not in where:
            where[base] = len(buffers)
            buffers.append({"size": size, "dtype": dtypes.get(base)})
            spans.append((base, size))
        out.append({"kind": "pointer", "buffer": where[base], "offset": ptr - base})
    if 2 * sum(b["size"] for b in buffers) > MAX_LAUNCH_BYTES:
        raise Skip(f"its buffers pass {MAX_LAUNCH_BYTES // 2} bytes")
    return out, buffers, spans


def _scalar(i: int, a: Any) -> tuple[str, bytes, bool, bool]:
    """(type, little-endian bytes, may be a pointer, is an explicit pointer) of one argument."""
    cls = type(a)
    if cls is bool:
        return "py_bool", bytes([int(a)]), False, False
    if cls is int:
        return "py_int", (a & (1 << 64) - 1).to_bytes(8, "little"), True, False
    if cls is float:
        return "py_float", struct.pack("<d", a), False, False
    if isinstance(a, ctypes._SimpleCData):
        name = _CTYPE_ALIAS.get(cls.__name__, cls.__name__)
        if name not in SCALARS or not name.startswith("c_"):
            raise Skip(f"argument {i} is a ctypes {cls.__name__}")
        raw = bytes(a) if name != "c_void_p" else int(a.value or 0).to_bytes(8, "little")
        return name, raw, SCALARS[name] == 8 and name != "c_double", False
    if cls.__module__ == "numpy" and hasattr(a, "dtype"):
        name = str(a.dtype)
        if name not in SCALARS or name.startswith(("c_", "py_")):
            raise Skip(f"argument {i} is a numpy {name}")
        return name, a.tobytes(), a.dtype.kind in "iu" and a.dtype.itemsize == 8, False
    handle = getattr(a, "handle", None) if hasattr(a, "size") else None
    if handle is not None:  # a cuda.core Buffer: its address, always a pointer
        return "py_int", int(handle).to_bytes(8, "little"), True, True
    cai = getattr(a, "__cuda_array_interface__", None)
    if isinstance(cai, dict) and isinstance(cai.get("data"), tuple):
        return "py_int", int(cai["data"][0] or 0).to_bytes(8, "little"), True, True
    raise Skip(f"argument {i} is a {cls.__module__}.{cls.__qualname__}, whose bytes are not known")


def keep(symbol: str, grid: Any, block: Any, shmem: int, args: list, run: Callable[[], Any], drv: Driver,
         via: str, numba: dict | None = None, dtypes: dict[int, str] | None = None) -> tuple[dict, bytes | None]:
    """Run the launch (``run()``, once) keeping it: (record, the ``.bin`` bytes or None with the record's
    ``why``). ``run``'s result is not returned: the caller's wrapper returns it. ``run``'s exceptions pass."""
    rec: dict[str, Any] = {"kind": "launch", "family": "raw", "via": via, "symbol": symbol,
                           "grid": _dims(grid), "block": _dims(block), "shmem": int(shmem or 0)}
    if numba:
        rec["numba"] = numba
    try:
        rec["args"], rec["buffers"], spans = describe_args(args, drv, dtypes or {})
        need = 2 * sum(s for _, s in spans)
        if _state["bytes"] + need > MAX_PROCESS_BYTES:
            raise Skip(f"this process kept {MAX_PROCESS_BYTES} bytes of launches already")
        drv.sync()
        before = [drv.to_host(b, s) for b, s in spans]
    except Skip as e:
        run()
        rec["why"] = str(e)
        return rec, None
    run()
    try:
        drv.sync()
        after = [drv.to_host(b, s) for b, s in spans]
    except Skip as e:
        rec["why"] = f"after the launch: {e}"
        return rec, None
    _state["bytes"] += need
    blob = b"".join(x for pair in zip(before, after) for x in pair)
    rec["sha256"] = hashlib.sha256(blob).hexdigest()
    return rec, blob


def _dims(d: Any) -> list[int]:
    d = tuple(d) if isinstance(d, (tuple, list)) else (d,)
    return [int(x) for x in d] + [1] * (3 - len(d))


def _numba_caller() -> tuple[dict | None, dict[int, str]]:
    """A numba-cuda ``_Kernel.launch`` calling cuda.core's launch: its kernel (``pkg.mod:qualname``), argument
    types, and the element type of each device array it was given (by address)."""
    f: Any = sys._getframe(2)
    for _ in range(4):
        if f is None:
            break
        me = f.f_locals.get("self") if f.f_code.co_name == "launch" else None
        if me is not None and hasattr(me, "argument_types") and hasattr(me, "py_func"):
            py = me.py_func
            dtypes: dict[int, str] = {}
            for a in f.f_locals.get("args") or ():
                cai: Any = getattr(a, "__cuda_array_interface__", None)
                if not isinstance(cai, dict):
                    continue
                m = _TYPESTR.match(str(cai.get("typestr")))
                if m and isinstance(cai.get("data"), tuple):
                    name = {"b": "bool", "i": "int", "u": "uint", "f": "float", "c": "complex"}[m[1]]
                    bits = "" if m[1] == "b" else str(8 * int(m[2]))
                    if name + bits in DTYPES:
                        dtypes[int(cai["data"][0] or 0)] = name + bits
            return ({"kernel": f"{getattr(py, '__module__', '')}:{getattr(py, '__qualname__', '?')}",
                     "argtypes": [str(t) for t in me.argument_types]}, dtypes)
        f = f.f_back
    return None, {}


# ----------------------------------------------------------------------------------------- the patches
def _kept_one(api: Any, key: str, rec: dict, blob: bytes | None) -> None:
    """Write the launch's file (into the private folder) and its record."""
    if blob is not None:
        _state["n"] += 1
        name = f"{os.getpid()}-{_state['n']}.bin"
        with open(os.path.join(_state["folder"], name), "xb") as f:
            f.write(blob)
        rec["file"] = name
        _state["kept"][key] = _state["kept"].get(key, 0) + 1
    api.write(rec)


def _named(drv: Driver, handle: Any) -> tuple[str, list[int] | None]:
    """The kernel's symbol and parameter sizes, asked of the driver once per handle (every launch asks)."""
    try:
        hkey = int(handle)  # the driver's handle value (an object's id could be another's after it is freed)
    except (TypeError, ValueError):
        return drv.symbol(handle), drv.param_sizes(handle)
    names = _state.setdefault("names", {})
    got = names.get(hkey)
    if got is None:
        got = (drv.symbol(handle), drv.param_sizes(handle))
        if len(names) < 100000:
            names[hkey] = got
    return got


def _wanted(key: str) -> bool:
    """Whether to keep this launch of the kernel ``key`` (its symbol and parameter sizes)."""
    if _state["kept"].get(key, 0) >= MAX_PER_KERNEL or _state["tries"].get(key, 0) >= MAX_TRIES:
        return False
    _state["tries"][key] = _state["tries"].get(key, 0) + 1
    return True


def _wrap(original: Any, api: Any, drv: Driver, via: str, unpack: Callable[..., Any]) -> Any:
    """``original`` keeping a launch per :func:`_wanted` symbol; ``unpack(*a, **k)`` gives (handle, grid,
    block, shmem, args) or raises :class:`Skip`. The launch runs exactly once whatever happens here."""

    @functools.wraps(original)
    def launch(*a: Any, **k: Any) -> Any:
        if api.busy():
            return original(*a, **k)
        try:
            with api.quiet():
                handle, grid, block, shmem, args = unpack(drv, *a, **k)
                symbol, sizes = _named(drv, handle)
                key = f"{symbol}{tuple(sizes or ())}"  # one source per dtype: one symbol, other sizes
                wanted = _wanted(key)
        except Exception as e:  # noqa: BLE001 - a launch this module cannot read is the command's, unchanged
            _note(api, f"a launch ({via}) was not kept: {type(e).__name__ + ': ' if not isinstance(e, Skip) else ''}"
                       f"{e}")
            return original(*a, **k)
        if not wanted:
            return original(*a, **k)
        result: list = []
        state: list[str] = []

        def run() -> None:
            state.append("started")
            result.append(original(*a, **k))

        try:
            with api.quiet():
                numba, dtypes = _numba_caller() if via == "cuda.core" else (None, {})
                if sizes is not None and len(sizes) != len(args):
                    raise Skip(f"{len(args)} arguments for a kernel of {len(sizes)} parameters")
                rec, blob = keep(symbol, grid, block, shmem, args, run, drv, via, numba, dtypes)
                if sizes is not None:
                    rec["params"] = sizes
                _kept_one(api, key, rec, blob)
        except Exception as e:  # noqa: BLE001 - keeping failed; the launch's own error passes unchanged
            if state and not result:
                raise
            _note(api, f"keeping a launch of {symbol[:120]} ({via}) failed: {type(e).__name__}: {e}")
            if not state:
                return original(*a, **k)
        return result[0] if result else None

    launch._aot_recorded = True  # type: ignore[attr-defined]
    return launch


def _note(api: Any, why: str) -> None:
    """One ``skipped`` record per reason and process (a loop of unreadable launches is one line)."""
    notes = _state.setdefault("notes", set())
    if why not in notes and len(notes) < 100:
        notes.add(why)
        api.write({"kind": "skipped", "why": why[:300]})


def _core_args(drv: Driver, stream: Any, config: Any, kernel: Any, *args: Any) -> tuple:
    if getattr(config, "cluster", None) is not None:
        raise Skip("a cluster launch")
    if type(stream).__name__ == "GraphBuilder" or drv.capturing(getattr(stream, "handle", stream)):
        raise Skip("a launch into a graph being captured (synchronizing would end the capture)")
    handle = getattr(kernel, "handle", kernel)
    return handle, config.grid, config.block, getattr(config, "shmem_size", 0) or 0, list(args)


def _driver_args(drv: Driver, f: Any, gx: Any, gy: Any, gz: Any, bx: Any, by: Any, bz: Any, shmem: Any, stream: Any,
                 params: Any = None, extra: Any = None) -> tuple:
    if params is None:
        args: list = []
    elif isinstance(params, tuple) and len(params) == 2 and isinstance(params[1], (tuple, list)):
        values, types = params
        if len(values) != len(types):
            raise Skip("kernelParams with more values than types (or fewer)")
        args = [int(v) if t is None else (v if isinstance(v, t) else t(v)) for v, t in zip(values, types)]
    elif isinstance(params, int) and params:  # a void**: each argument's size from the kernel's parameters
        sizes = drv.param_sizes(f)
        if sizes is None:
            raise Skip("kernelParams given as a raw void** and the driver does not say the parameters' sizes")
        args = []
        for i, size in enumerate(sizes):
            if size not in _BY_SIZE:
                raise Skip(f"parameter {i} is {size} bytes (a structure by value)")
            addr = ctypes.c_void_p.from_address(params + 8 * i).value
            args.append(_BY_SIZE[size].from_buffer_copy(ctypes.string_at(addr or 0, size)) if addr else None)
        if None in args:
            raise Skip("a NULL entry in kernelParams")
    else:
        raise Skip("kernelParams given as a raw void** (its argument sizes are not known)")
    if extra not in (None, 0):
        raise Skip("arguments passed through extra")
    if drv.capturing(stream):
        raise Skip("a launch into a graph being captured (synchronizing would end the capture)")
    return f, (int(gx), int(gy), int(gz)), (int(bx), int(by), int(bz)), int(shmem or 0), args


def _driver_module() -> Any:
    """cuda.bindings' driver module (the CPU tests give a stand-in)."""
    return importlib.import_module("cuda.bindings.driver")


def patch(name: str, mod: Any, api: Any) -> None:
    """Wrap cuda.core's ``launch`` or cuda.bindings' ``cuLaunchKernel`` (only while ``aot record`` keeps
    launches: ``AOT_RECORD_LAUNCHES`` names its private folder)."""
    folder = os.environ.get("AOT_RECORD_LAUNCHES")
    if not folder:
        return
    _state["folder"] = folder
    drv = Driver(_driver_module())
    attr, via, unpack = (("launch", "cuda.core", _core_args) if name == "cuda.core._launcher"
                         else ("cuLaunchKernel", "cuLaunchKernel", _driver_args))
    original = getattr(mod, attr, None)
    if original is None or getattr(original, "_aot_recorded", False):
        return
    wrapped = _wrap(original, api, drv, via, unpack)
    setattr(mod, attr, wrapped)
    for other in _REBOUND:  # bound before the patch (a module imported before the hook): rebound too
        m = sys.modules.get(other)
        if m is not None and getattr(m, attr, None) is original:
            setattr(m, attr, wrapped)
