"""What ``aot gate`` installs in the Python processes of the command it runs (see :mod:`aot.verify.gate`).

Loaded by path from a ``sitecustomize`` the gate puts first on ``PYTHONPATH`` (no ``import aot``: that would
install aot's own hooks before the command does). After each kernel launch it can see, it synchronizes the
device and writes one JSON line to ``AOT_GATE_LOG``: the kernel, its launch number, and a digest of every
buffer the launch was given (:func:`digest`), so two runs of the command compare launch by launch. Seen:

* cuda.core ``launch`` and cuda.bindings ``cuLaunchKernel`` (NVRTC units, and numba-cuda, whose
  ``_Kernel.launch`` calls cuda.core's: the kernel is then named ``pkg.mod:qualname`` with its argument
  types), unpacked as ``aot record`` unpacks them (:mod:`aot.record.launches`);
* aot's ``CcclAlgorithm.__call__`` (a packaged or JIT cuda.compute algorithm, named by its spec), with every
  array argument but the temporary storage digested after the call;
* CuPy's compiles: CuPy launches from C, where no Python hook sees a launch, so its kernels are compared by
  image: for each kernel CuPy asks its cache for (``_compile_with_cache_cuda``), the digest of the cubin it
  got, and whether aot served it, CuPy's cache had it or CuPy compiled it. A served image equal to the one
  CuPy's own compile makes on this host computes what CuPy's would;
* Triton's ``JITFunction.run`` (a ``kernel[grid](...)`` launch, served or compiled), every tensor argument
  digested after it, named ``module:qualname[specialisation]`` (``gate_hook_triton.py``, loaded by path).

A buffer is the whole allocation a pointer argument points into (the driver's ``cuMemGetAddressRange``), or an
array's own extent (``__cuda_array_interface__``). CuPy's memory pool is switched off in these processes (its
chunks hold several arrays and stale bytes); every array is then an allocation of its own.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.abc
import importlib.util
import json
import os
import sys
import threading
from typing import Any

#: Samples of each buffer kept (evenly spaced elements): a differing launch names one of them.
SAMPLES = 16
#: Chunks each buffer is cut into, each hashed: a differing launch names the first differing range of elements.
CHUNKS = 64
#: Arguments of a cuda.compute call that are scratch space, not results.
SCRATCH = ("temp_storage", "d_temp_storage")
_local = threading.local()
_lock = threading.Lock()
_state: dict[str, Any] = {"fd": None, "counts": {}, "rl": None, "drv": None}


def _write(rec: dict) -> None:
    line = (json.dumps(rec, sort_keys=True, default=repr) + "\n").encode("utf-8", "backslashreplace")
    with _lock:
        if _state["fd"] is not None:
            os.write(_state["fd"], line)


def _next(kernel: str) -> int:
    with _lock:
        n = _state["counts"].get(kernel, 0)
        _state["counts"][kernel] = n + 1
        return n


class _Quiet:
    def __enter__(self) -> None:
        self.was = getattr(_local, "busy", False)
        _local.busy = True

    def __exit__(self, *exc: Any) -> None:
        _local.busy = self.was


def _busy() -> bool:
    return getattr(_local, "busy", False)


# ------------------------------------------------------------------------------------------------ digests
def digest(data: bytes, dtype: str | None) -> dict:
    """A buffer's digest: its size, a hash of the whole (BLAKE2b over the hashes of :data:`CHUNKS` chunks, one
    pass over the bytes), an order-insensitive hash of its elements (``multiset``: equal for
    two orders of the same values, as an atomic compaction writes them), :data:`SAMPLES` evenly spaced elements
    and, for a floating ``dtype`` (with none known: the float32 view, ``stats_dtype``), the order-insensitive
    moments a nondeterministic launch is compared by: sum, sum of magnitudes, sum of squares, the smallest and
    largest finite element and the NaN count (cheap: one pass each, no sort)."""
    item = _itemsize(dtype)
    step = max(1, -(-(len(data) // item) // CHUNKS)) * item
    chunks = [hashlib.blake2b(data[i:i + step], digest_size=16).digest() for i in range(0, len(data), step)]
    out: dict[str, Any] = {"size": len(data), "dtype": dtype, "chunk": step // item,
                           "digest": hashlib.blake2b(b"".join(chunks), digest_size=32).hexdigest(),
                           "chunks": [c[:8].hex() for c in chunks]}
    try:
        import numpy as np
    except ImportError:
        return out
    dt = np.dtype(dtype) if dtype and len(data) % np.dtype(dtype).itemsize == 0 else None
    if dt is None:
        dt = np.dtype(np.uint32) if len(data) % 4 == 0 else np.dtype(np.uint8)
    a = np.frombuffer(data, dt)
    if a.size == 0:
        return out
    if len(data) % 4 == 0:  # one 32-bit hash per element, over its words in order (per word for 1/2-byte types)
        words, per = np.frombuffer(data, np.uint32), max(1, dt.itemsize // 4)
    else:
        words, per = np.frombuffer(data, np.uint8).astype(np.uint32), 1
    with np.errstate(over="ignore"):
        h = np.zeros(words.size // per, np.uint32)
        for j in range(per):
            h = (h ^ words[j::per] ^ np.uint32(0x9E3779B9 + j)) * np.uint32(0x85EBCA6B)
            h ^= h >> np.uint32(13)
            h *= np.uint32(0xC2B2AE35)
            h ^= h >> np.uint32(16)
        out["multiset"] = format(int(h.sum(dtype=np.uint64)), "016x")
    idx = np.unique(np.linspace(0, a.size - 1, min(SAMPLES, a.size)).astype(np.int64))
    out["samples"] = [[int(i), a[i].tobytes().hex()] for i in idx]
    stats = dt if dt.kind == "f" else np.dtype(np.float32) if dtype is None and len(data) % 4 == 0 else None
    if stats is not None:  # a raw pointer's buffer (no element type known): its float32 view, NVRTC atomics' usual type
        out["stats_dtype"] = str(stats)
        v = np.frombuffer(data, stats)
        finite = np.isfinite(v)
        others = v.size - int(np.count_nonzero(finite))
        w = v[finite] if others else v
        out["sum"] = float(w.sum(dtype=np.float64))
        out["abssum"] = float(np.abs(w).sum(dtype=np.float64))
        out["sumsq"] = float(np.square(w, dtype=np.float64).sum())
        out["extremes"] = [float(w.min()), float(w.max())] if w.size else []
        out["nan"] = int(np.count_nonzero(np.isnan(v))) if others else 0
    return out


def _itemsize(dtype: str | None) -> int:
    digits = "".join(c for c in str(dtype or "") if c.isdigit())
    return 1 if dtype in (None, "bool") or not digits else int(digits) // 8


def _typestr(cai: dict) -> str | None:
    t = str(cai.get("typestr", ""))
    kinds = {"b": "bool", "i": "int", "u": "uint", "f": "float", "c": "complex"}
    if len(t) < 3 or t[1] not in kinds:
        return None
    return kinds[t[1]] if t[1] == "b" else f"{kinds[t[1]]}{8 * int(t[2:])}"


def _extent(cai: dict) -> tuple[int, int]:
    """(address, bytes) an array spans (strided arrays: first to last element)."""
    ptr = int((cai.get("data") or (0,))[0] or 0)
    shape = [int(s) for s in cai.get("shape") or ()]
    item = int(str(cai.get("typestr", "|u1"))[2:] or 1)
    strides = cai.get("strides")
    if any(s == 0 for s in shape):
        return ptr, 0
    if not strides:
        n = 1
        for s in shape:
            n *= s
        return ptr, n * item
    lo = hi = 0
    for s, st in zip(shape, strides):
        (lo, hi) = (lo + (s - 1) * st, hi) if st < 0 else (lo, hi + (s - 1) * st)
    return ptr + lo, hi - lo + item


# ---------------------------------------------------------------------------------------------- launches
def _rl() -> Any:
    """:mod:`aot.record.launches`, loaded by path (stdlib only): the launch unpacking and the driver."""
    if _state["rl"] is None:
        path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "record", "launches.py")
        spec = importlib.util.spec_from_file_location("_aot_gate_record_launches", path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _state["rl"] = mod
    return _state["rl"]


def _numba_caller() -> tuple[str | None, dict[int, tuple[int, str | None]]]:
    """A numba-cuda ``_Kernel.launch`` up the stack: its kernel name with argument types, and each array
    argument's extent (address -> (bytes, element type)). A kernel numba-cuda rebuilt from a cache (aot's packaged
    ones, ``cache=True``'s) holds no ``py_func``: its name is then its dispatcher's, the frame above."""
    f: Any = sys._getframe(2)
    kernel: Any = None
    arrays: dict[int, tuple[int, str | None]] = {}
    for _ in range(10):
        if f is None:
            break
        me = f.f_locals.get("self")
        if kernel is None and me is not None and f.f_code.co_name == "launch" and hasattr(me, "argument_types"):
            kernel = me
            for a in f.f_locals.get("args") or ():
                cai = getattr(a, "__cuda_array_interface__", None)
                if isinstance(cai, dict):
                    ptr, size = _extent(cai)
                    arrays[ptr] = (size, _typestr(cai))
        py = getattr(me, "py_func", None) if kernel is not None else None
        if py is not None:
            name = f"{getattr(py, '__module__', '')}:{getattr(py, '__qualname__', '?')}"
            return f"{name}({', '.join(str(t) for t in kernel.argument_types)})", arrays
        f = f.f_back
    return None, {}


def _buffers(args: list, drv: Any, arrays: dict[int, tuple[int, str | None]]) -> list[tuple[int, int, str | None]]:
    """(address, bytes, element type) of every buffer the launch's arguments point into, each once."""
    rl = _rl()
    seen: dict[int, tuple[int, int, str | None]] = {}
    for i, a in enumerate(args):
        try:
            kind, raw, maybe_ptr, explicit = rl._scalar(i, a)
        except rl.Skip:
            continue
        ptr = int.from_bytes(raw, "little") if maybe_ptr or explicit else 0
        if not ptr:
            continue
        if ptr in arrays:
            size, dtype = arrays[ptr]
            seen.setdefault(ptr, (ptr, size, dtype))
            continue
        found = drv.allocation(ptr)
        if found is not None:
            seen.setdefault(found[0], (found[0], found[1], None))
    return list(seen.values())


def _after(family: str, kernel: str, bufs: list[tuple[int, int, str | None]], drv: Any, extra: dict) -> None:
    drv.sync()
    rec = {"kind": "launch", "family": family, "kernel": kernel, "n": _next(kernel), "pid": os.getpid(),
           "buffers": [digest(drv.to_host(p, s) if s else b"", t) for p, s, t in bufs], **extra}
    _write(rec)


def nvrtc_name(symbol: str, sizes: Any) -> str:
    """An NVRTC kernel's name in the log: its symbol and its parameters' sizes (``scale(8,8,4,4)``), so a source
    rendered per dtype with one ``extern "C"`` name is one kernel per dtype."""
    return f"{symbol}({','.join(str(int(n)) for n in sizes)})" if sizes else symbol


def _wrap_launch(original: Any, via: str, unpack: Any) -> Any:
    drv = _state["drv"]

    @functools.wraps(original)
    def launch(*a: Any, **k: Any) -> Any:
        if _busy():
            return original(*a, **k)
        try:
            with _Quiet():
                handle, grid, block, shmem, args = unpack(drv, *a, **k)
                numba, arrays = _numba_caller() if via == "cuda.core" else (None, {})
                symbol, sizes = _rl()._named(drv, handle)  # one source per dtype: one symbol, other sizes
                bufs = _buffers(args, drv, arrays)
        except Exception as e:  # noqa: BLE001 - a launch this hook cannot read: noted, run unchanged
            _write({"kind": "unseen", "via": via, "why": f"{type(e).__name__}: {e}"[:300]})
            return original(*a, **k)
        result = original(*a, **k)
        try:
            with _Quiet():
                family, kernel = ("numba", numba) if numba else ("nvrtc", nvrtc_name(symbol, sizes))
                _after(family, kernel, bufs, drv, {"symbol": symbol, "grid": list(grid) if isinstance(grid, tuple)
                                                   else grid, "block": list(block) if isinstance(block, tuple)
                                                   else block})
        except Exception as e:  # noqa: BLE001 - the digest failed; the launch's result is the caller's
            _write({"kind": "unseen", "via": via, "kernel": symbol, "why": f"{type(e).__name__}: {e}"[:300]})
        return result

    launch._aot_gate = True  # type: ignore[attr-defined]
    return launch


def _patch_launch(name: str, mod: Any) -> None:
    rl = _rl()
    if _state["drv"] is None:
        _state["drv"] = rl.Driver(importlib.import_module("cuda.bindings.driver"))
    attr, via, unpack = (("launch", "cuda.core", rl._core_args) if name == "cuda.core._launcher"
                         else ("cuLaunchKernel", "cuLaunchKernel", rl._driver_args))
    original = getattr(mod, attr, None)
    if original is None or getattr(original, "_aot_gate", False):
        return
    wrapped = _wrap_launch(original, via, unpack)
    setattr(mod, attr, wrapped)
    for other in rl._REBOUND:
        m = sys.modules.get(other)
        if m is not None and getattr(m, attr, None) is original:
            setattr(m, attr, wrapped)
    twin = "cuda.bindings.driver" if name == "cuda.core._launcher" else "cuda.core._launcher"
    if twin in sys.modules:  # imported while this hook was busy (the driver, just above): patched now
        _patch_launch(twin, sys.modules[twin])


# -------------------------------------------------------------------------------------------------- CCCL
def _patch_objects(name: str, mod: Any) -> None:
    cls: Any = getattr(mod, "CcclAlgorithm", None)
    original: Any = cls.__dict__.get("__call__") if isinstance(cls, type) else None
    if original is None or getattr(original, "_aot_gate", False):
        return

    @functools.wraps(original)
    def __call__(self, **kwargs):  # noqa: ANN001, ANN202, N807
        result = original(self, **kwargs)
        if _busy() or ("temp_storage" in kwargs and kwargs["temp_storage"] is None):  # a size query writes nothing
            return result
        try:
            with _Quiet():
                if _state["drv"] is None:
                    _state["drv"] = _rl().Driver(importlib.import_module("cuda.bindings.driver"))
                bufs = []
                for key in sorted(kwargs):
                    cai = getattr(kwargs[key], "__cuda_array_interface__", None)
                    if key not in SCRATCH and isinstance(cai, dict):
                        ptr, size = _extent(cai)
                        bufs.append((ptr, size, _typestr(cai)))
                _after("cccl", f"{self.spec.name}", bufs, _state["drv"], {"args": sorted(kwargs)})
        except Exception as e:  # noqa: BLE001 - the digest failed; the call's result is the caller's
            _write({"kind": "unseen", "via": "CcclAlgorithm", "why": f"{type(e).__name__}: {e}"[:300]})
        return result

    __call__._aot_gate = True  # type: ignore[attr-defined]
    cls.__call__ = __call__


# -------------------------------------------------------------------------------------------------- CuPy
class _Observer:
    """CuPy's kernel cache backend, observed from outside whatever wraps it (aot's included)."""

    def __init__(self, inner: Any):
        self.inner = inner

    def load(self, name: str) -> Any:
        got = self.inner.load(name)
        if got is not None and not _busy():
            own = getattr(self.inner, "inner", None)  # aot's backend: CuPy's own cache is its inner one
            how = "cache" if own is None or own.load(name) is not None else "served"
            _cupy(name, got, how)
        return got

    def save(self, name: str, payload: Any, source: str) -> None:
        if not _busy():
            _cupy(name, payload, "compiled", source)
        self.inner.save(name, payload, source)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)


def code_digest(image: bytes) -> str | None:
    """sha256 over an ELF cubin's machine code alone: its ``.text.*`` sections' contents, sorted. Two compiles of
    one source on two hosts differ in the names NVRTC derives from CuPy's path-hashed file name (symbol and section
    names), never in the code; ``None`` for anything but a well-formed 64-bit little-endian ELF."""
    import struct
    if len(image) < 64 or image[:6] != b"\x7fELF\x02\x01":
        return None
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", image, 0x3A)
    if shentsize != 64 or not 0 < shnum <= 65535 or shstrndx >= shnum or shoff + shnum * 64 > len(image):
        return None
    heads = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * 64) for i in range(shnum)]
    str_off, str_size = heads[shstrndx][4], heads[shstrndx][5]
    if str_off + str_size > len(image):
        return None
    texts = []
    for name, kind, _flags, _addr, off, size, *_ in heads:
        end = image.find(b"\0", str_off + name, str_off + str_size)
        if end < 0 or (kind != 8 and off + size > len(image)):  # 8: SHT_NOBITS (.nv.shared, .nv.global)
            return None
        if image[str_off + name:end].startswith(b".text."):
            texts.append(hashlib.sha256(image[off:off + size]).digest())
    return hashlib.sha256(b"".join(sorted(texts))).hexdigest() if texts else None


def _cupy(name: str, payload: Any, how: str, source: str | None = None) -> None:
    rec = {"kind": "cupy", "family": "cupy", "kernel": name, "how": how, "pid": os.getpid(),
           "sha256": hashlib.sha256(bytes(payload)).hexdigest(), "size": len(payload),
           "code": code_digest(bytes(payload))}
    if source:
        import re
        m = re.search(r"__global__\s+void\s+(\w+)", source)
        rec["name"] = m.group(1) if m else ""
    _write(rec)


def _patch_cupy(name: str, mod: Any) -> None:
    original = getattr(mod, "_compile_with_cache_cuda", None)
    if original is None or getattr(original, "_aot_gate", False):
        return

    @functools.wraps(original)
    def _compile_with_cache_cuda(*a: Any, **k: Any) -> Any:
        if not isinstance(mod._kernel_cache_backend, _Observer):  # outermost, whoever wrapped it since
            mod._kernel_cache_backend = _Observer(mod._kernel_cache_backend)
        return original(*a, **k)

    _compile_with_cache_cuda._aot_gate = True  # type: ignore[attr-defined]
    mod._compile_with_cache_cuda = _compile_with_cache_cuda


def _patch_cupy_pool(name: str, mod: Any) -> None:
    """No memory pool (once CuPy's package has loaded): every array is an allocation the driver sizes."""
    mod.cuda.set_allocator(None)


def _patch_triton(name: str, mod: Any) -> None:
    """Triton's launch (``gate_hook_triton.py``, loaded by its path on first need: stdlib only)."""
    if _state.get("triton") is None:
        path = os.path.join(os.path.dirname(__file__), "gate_hook_triton.py")
        spec = importlib.util.spec_from_file_location("_aot_gate_hook_triton", path)
        assert spec is not None and spec.loader is not None
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        _state["triton"] = m
    _state["triton"].patch(name, mod, sys.modules[__name__])


_PATCHES = {"cupy": _patch_cupy_pool, "cuda.core._launcher": _patch_launch, "cuda.bindings.driver": _patch_launch,
            "aot.runtime.loader.objects": _patch_objects, "cupy.cuda.compiler": _patch_cupy,
            "triton.runtime.jit": _patch_triton, "triton.runtime.autotuner": _patch_triton}


def _apply(name: str, mod: Any) -> None:
    try:
        with _Quiet():
            _PATCHES[name](name, mod)
    except Exception as e:  # noqa: BLE001 - an API this hook does not know: noted, nothing changed
        _write({"kind": "unseen", "via": name, "why": f"cannot watch it: {type(e).__name__}: {e}"[:300]})


class _AfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):  # noqa: ANN001, ANN201
        if fullname not in _PATCHES or _busy():
            return None
        with _Quiet():
            spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module

        def exec_module(module):  # noqa: ANN001, ANN202
            original(module)
            _apply(fullname, module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Start digesting in this process (the ``sitecustomize`` calls it)."""
    path = os.environ.get("AOT_GATE_LOG")
    if not path or _state["fd"] is not None:
        return
    _state["fd"] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    _write({"kind": "process", "pid": os.getpid(), "argv": sys.argv[:8]})
    sys.meta_path.insert(0, _AfterImport())
    for name in list(_PATCHES):
        if name in sys.modules:
            _apply(name, sys.modules[name])
