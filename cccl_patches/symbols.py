"""Reproducible iterator symbol names: hash an iterator's *content*, never an object's memory address.

cuda-cccl 1.2.1 names every iterator's device functions ``<Class>_advance_<suffix>`` (and ``_input_deref_``,
``_output_deref_``), where ``suffix = sha256(str(iterator.kind))[:16]`` (``iterators/_base.py``,
``_deterministic_suffix``). The ``kind`` of a ``TransformIterator`` holds its operator adapter
(``_StatelessOp``, ``_StatefulOp``, ``_WellKnownOp`` or ``RawOp``), none of which defines ``__repr__``,
so ``str(kind)`` contains ``<cuda.compute._jit._StatelessOp object at 0x7f...>``: the suffix, and with
it the blob, changes from build to build. Evidence (sm_90, ``reduce_into`` over
``TransformIterator(array, lambda x: x * x)``, two processes, aot's symbol normalization applied):
32,701 bytes differed; with :func:`stable_kind` the two blobs are byte-identical
(``tests/test_cccl_patches.py`` checks every iterator kind and stateful operators, two processes each).

:func:`stable_kind` maps a kind to an equal-shaped value whose ``str`` has no address: every operator
becomes a digest of what it compiles from (a Python function's bytecode, constants, names, the values
it reads from its globals and closure; a stateful op's state names, dtypes and shapes; a ``RawOp``'s code,
name, state size and alignment). A kind with no operator in it maps to itself, so the suffix of every
other iterator (``CountingIterator``, pointers, zips of those...) is exactly cuda-cccl's, and artifacts
built before this patch keep their bytes.
"""

from __future__ import annotations

import hashlib
import re
import types
from typing import Any

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_MAX_DEPTH = 12  # functions referencing functions: bounded, and cycles end here


def stable_kind(kind: Any) -> Any:
    """``kind`` with every operator adapter replaced by a content digest (see the module docstring)."""
    if isinstance(kind, tuple):
        return tuple(stable_kind(k) for k in kind)
    if isinstance(kind, list):
        return [stable_kind(k) for k in kind]
    from cuda.compute.op import OpAdapter
    if isinstance(kind, OpAdapter):
        return f"op:{hashlib.sha256(_op_content(kind).encode()).hexdigest()}"
    return kind


def content(v: Any) -> str:
    """A string for ``v`` that is the same in every process for the same content (no address, no path)."""
    return _value(v, 0)


def _op_content(op: Any) -> str:
    from cuda.compute.op import RawOp
    if isinstance(op, RawOp):
        ident = op._identity  # (ltoir, name, len(state), alignment, extra ltoirs): what compiles
        return "RawOp" + _value(ident, 0)
    kind = getattr(op, "_kind", None)
    if kind is not None:  # _WellKnownOp
        return f"OpKind.{kind.name}"
    func = getattr(op, "_func", None)
    if func is None:
        raise TypeError(f"cccl_patches.symbols: no stable content for operator {type(op).__qualname__}")
    text = f"{type(op).__name__}:{_value(func, 0)}"
    state = getattr(op, "_state", None)
    if state is not None:  # _StatefulOp: names, dtypes and shapes are what its wrapper bakes in
        text += f"|state:{_value(state.get_cache_key(), 0)}"
    return text


def _code(code: types.CodeType, depth: int) -> str:
    consts = ",".join(_value(c, depth + 1) for c in code.co_consts)
    return (f"code({code.co_name};{code.co_code.hex()};[{consts}];{code.co_names};{code.co_varnames};"
            f"{code.co_freevars};{code.co_cellvars};{code.co_argcount};{code.co_kwonlyargcount};"
            f"{code.co_flags})")


def _function(func: types.FunctionType, depth: int) -> str:
    code = func.__code__
    cells = []
    for name, cell in zip(code.co_freevars, func.__closure__ or ()):
        try:
            cells.append(f"{name}={_value(cell.cell_contents, depth + 1)}")
        except ValueError:  # an empty cell
            cells.append(f"{name}=<empty>")
    missing = object()
    refs = []
    for name in code.co_names:
        val = func.__globals__.get(name, missing)
        refs.append(f"{name}=" + ("<unbound>" if val is missing else _value(val, depth + 1)))
    defaults = _value(func.__defaults__, depth + 1)
    return f"fn({func.__qualname__};{_code(code, depth)};[{','.join(cells)}];[{','.join(refs)}];{defaults})"


def _value(v: Any, depth: int) -> str:
    """A string for ``v`` that is the same in every process for the same content."""
    if depth > _MAX_DEPTH:
        return "<deep>"
    if v is None or isinstance(v, (bool, int, float, complex, str)):
        return repr(v)
    if isinstance(v, (bytes, bytearray)):
        return f"bytes:{hashlib.sha256(bytes(v)).hexdigest()}"
    if isinstance(v, (tuple, list)):
        return "(" + ",".join(_value(x, depth + 1) for x in v) + ")"
    if isinstance(v, (frozenset, set)):
        return "{" + ",".join(sorted(_value(x, depth + 1) for x in v)) + "}"
    if isinstance(v, dict):
        return "{" + ",".join(sorted(f"{_value(k, depth + 1)}:{_value(x, depth + 1)}" for k, x in v.items())) + "}"
    if isinstance(v, types.CodeType):
        return _code(v, depth)
    if isinstance(v, types.FunctionType):
        return _function(v, depth)
    if isinstance(v, types.ModuleType):
        return f"module:{v.__name__}"
    if isinstance(v, type):
        return f"type:{v.__module__}.{v.__qualname__}"
    op_bytes = getattr(v, "op_bytes", None)
    if isinstance(op_bytes, bytes):  # cuda.compute DeviceCode
        return f"code:{getattr(v, 'kind', '')}:{_value(op_bytes, depth + 1)}"
    cai = getattr(type(v), "__cuda_array_interface__", None)
    if cai is not None:  # a device array (or placeholder): its type, dtype and shape, never its address
        iface = v.__cuda_array_interface__
        return f"array:{type(v).__qualname__}:{iface.get('typestr')}:{tuple(iface.get('shape', ()))}"
    if hasattr(v, "dtype") and hasattr(v, "shape") and hasattr(v, "tobytes"):  # numpy arrays and scalars
        return f"np:{v.dtype.str}:{tuple(v.shape)}:{_value(v.tobytes(), depth + 1)}"
    name = getattr(v, "name", None)
    if isinstance(name, str) and type(v).__module__ not in ("builtins",) and hasattr(type(v), "__members__"):
        return f"enum:{type(v).__qualname__}.{name}"  # OpKind, CacheModifier, ...
    return f"{type(v).__module__}.{type(v).__qualname__}:" + _ADDRESS.sub("", repr(v))


def install() -> None:
    """Make ``iterators._base._deterministic_suffix`` hash :func:`stable_kind` of the kind (idempotent)."""
    import cuda.compute.iterators._base as base
    if getattr(base._deterministic_suffix, "_aot_stable", False):
        return
    original = base._deterministic_suffix

    def _deterministic_suffix(kind):
        return original(stable_kind(kind))

    _deterministic_suffix._aot_stable = True  # type: ignore[attr-defined]
    _deterministic_suffix._aot_original = original  # type: ignore[attr-defined]  # tests show it is needed
    base._deterministic_suffix = _deterministic_suffix
