"""The operators' LTO-IR on cuda-cccl < 1.1, served (issue 44).

Those releases compile each Python operator at its first call: ``_odr_helpers`` wraps it in a ``void*``
wrapper and ``numba.cuda.compile(wrapper, sig, output="ltoir")`` compiles both (about 0.5 s in a fresh process,
most of it numba's typing setup: on an H200 a served reduce spent 0.55 s of its 0.7 s there). The NVRTC compile
and the nvJitLink link are answered by the shims (:mod:`.cccl_legacy`); this answers numba's compile, from the
same table, under a key over everything that changes those bytes:

* the operator, as the numba family keys a device function (:func:`.numba_digest.kernel_digest` of the
  ``cuda.jit(device=True)`` dispatcher the wrapper calls: its source, defaults, the values it reads, the
  library's overloads it reaches), and the wrapper: its name (drawn from the operator's content,
  :mod:`cccl_patches.wrapper_names`), its code, the argument modes and types, the inner and outer signatures;
* the code that generates the wrapper's IR: the content of the installed ``cuda.compute._odr_helpers`` and
  ``_jit`` modules;
* the compile call's own arguments, numba's configuration values that change code (:data:`CONFIG`), the
  versions of numba, numba-cuda and llvmlite (as the numba family keys their code), the compute capability
  numba reads from its current device (these releases name none: numba-cuda 0.26 makes an H200 compute_90a);
* the content of the NVVM library and libdevice numba loads (hashed with the other compilers, once per
  process, :meth:`.cccl_legacy.Shims.nvvm_identity`); where numba would load another NVVM, nothing is served.

Anything the key cannot see (a stateful operator's state, a value the numba digest refuses) refuses: numba
compiles it as without aot. A served operator's bytes then enter the link's key as they entered the build's.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
from typing import Any, Callable

log = logging.getLogger("aot")
#: The record tag an operator's answer is recorded under (the kind ``numba-ltoir`` in a manifest).
OP_TAG = b"aot-numba-ltoir-1"
#: numba's configuration values that change the code it compiles (read where they exist).
CONFIG = ("OPT", "CUDA_DEBUGINFO_DEFAULT", "DEBUGINFO_DEFAULT", "BOUNDSCHECK", "CUDA_DEFAULT_PTX_CC",
          "EXTEND_VARIABLE_LIFETIMES")
#: The argument modes of a wrapper whose IR the key covers (a stateful operator's ``STATE`` is not).
_MODES = frozenset({"LOAD", "STORE", "PTR"})


class Refused(ValueError):
    """The operator holds something the key cannot cover: numba compiles it."""


_shims: Any = None
_recorder: Callable[[str, bytes], None] | None = None
_versions: str | None = None


def bind(shims: Any, recorder: Callable[[str, bytes], None] | None = None) -> None:
    """Serve from (and, building, record into) ``shims``: the shims' table and compilers' identity."""
    global _shims, _recorder
    _shims, _recorder = shims, recorder


def counts() -> tuple[int, int]:
    """(served, compiled) operators in this process."""
    return _counts[0], _counts[1]


_counts = [0, 0]


def _file_sha(module: str) -> str:
    import importlib
    path = getattr(importlib.import_module(module), "__file__", None)
    if not path:
        raise Refused(f"{module} has no file to key")
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _numba_versions() -> str:
    global _versions
    if _versions is None:
        from importlib import metadata
        _versions = ";".join(f"{d}={metadata.version(d)}" for d in ("numba", "numba-cuda", "llvmlite"))
    return _versions


def _nvvm_paths() -> tuple[str, str]:
    """The NVVM library and libdevice numba-cuda would load here (found, not loaded)."""
    try:
        from numba.cuda.cudadrv.libs import get_cudalib, get_libdevice
        return os.path.realpath(get_cudalib("nvvm")), os.path.realpath(get_libdevice())
    except Exception as e:  # noqa: BLE001 - a numba-cuda laid out otherwise: nothing is served
        raise Refused(f"where numba-cuda finds NVVM is not known here ({e})") from None


def key_of(pyfunc: Any, args: tuple, kwargs: dict, nvvm: dict[str, bytes]) -> str:
    """The content key of ``numba.cuda.compile(pyfunc, *args, **kwargs)`` for a release's operator wrapper
    (module docstring). ``nvvm``: realpath -> sha256 of the NVVM files hashed here. Raises :class:`Refused`."""
    from numba.core import config
    from numba.cuda.cudadrv import devices

    from ...core.errors import AotError
    from .numba_digest import kernel_digest
    g = getattr(pyfunc, "__globals__", {})
    try:
        func_device, inner_sig, specs = g["func_device"], g["inner_sig"], g["arg_specs"]
    except KeyError as e:
        raise Refused(f"{getattr(pyfunc, '__name__', '?')} is not a wrapper of these releases ({e})") from None
    modes = [(getattr(getattr(s, "mode", None), "name", None), str(getattr(s, "numba_type", None))) for s in specs]
    if any(m not in _MODES for m, _ in modes):
        raise Refused(f"{pyfunc.__name__} wraps a stateful operator")
    try:
        digest = kernel_digest(func_device)
    except AotError as e:
        raise Refused(str(e)) from None
    lib, libdevice = _nvvm_paths()
    if lib not in nvvm or libdevice not in nvvm:
        raise Refused(f"numba-cuda would load NVVM from {lib}, which aot did not hash")
    code = pyfunc.__code__
    call = {k: repr(v) for k, v in sorted(kwargs.items())}
    parts = [
        OP_TAG, pyfunc.__name__.encode(), code.co_code,
        repr((code.co_consts, code.co_names, code.co_varnames)).encode(),
        repr(modes).encode(), str(inner_sig).encode(), repr([str(a) for a in args]).encode(), repr(call).encode(),
        digest.encode(), _file_sha("cuda.compute._odr_helpers").encode(), _file_sha("cuda.compute._jit").encode(),
        repr([(c, getattr(config, c, None)) for c in CONFIG]).encode(), _numba_versions().encode(),
        repr(tuple(devices.get_context().device.compute_capability)).encode(), nvvm[lib], nvvm[libdevice],
    ]
    from ...core.keyschemas import SCHEMAS
    h = hashlib.sha256(b"aot-cccl-legacy-op-key-%d" % SCHEMAS["cccl_legacy_op"])
    for part in parts:
        h.update(struct.pack("<Q", len(part)) + part)
    return h.hexdigest()


def compile_or_serve(compile_: Callable, pyfunc: Any, args: tuple, kwargs: dict) -> Any:
    """``compile_(pyfunc, *args, **kwargs)``'s result, from the table where it holds the key (the wrapper's
    signature names its return type: void), else compiled (and recorded, building)."""
    key = None
    if _shims is not None:
        try:
            key = key_of(pyfunc, args, kwargs, _shims.nvvm_identity)
        except Exception as e:  # noqa: BLE001 - any failure to key: numba compiles, as without aot
            log.debug("aot: operator %s not served: %s", getattr(pyfunc, "__name__", "?"), e)
            if _recorder is not None:
                _shims.refusals.append(f"operator {getattr(pyfunc, '__name__', '?')}: {e}")
    resty = getattr(kwargs.get("sig", args[0] if args else None), "return_type", None)
    if key is not None and _recorder is None and resty is not None:
        ltoir = _shims.answer(key)
        if ltoir is not None:
            _counts[0] += 1
            return ltoir, resty
    result = compile_(pyfunc, *args, **kwargs)
    _counts[1] += 1
    if key is not None and _recorder is not None:
        _recorder(key, bytes(result[0]))
    return result
