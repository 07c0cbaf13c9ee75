"""Operator wrapper symbols named from content, not from a per-process counter.

cuda-cccl 1.2.1 names the ``void*`` wrapper it generates around every Python operator
``wrapped_<op name>_<n>``, ``n`` from one process-wide counter (``_odr_helpers._make_wrapper_name``), and
memoizes compiled stateless operators (``_jit._compile_op_impl``, an ``lru_cache``) with the name they got
first. A build worker builds many items in one process, so the name an item's operator gets depends on
what the worker built before it: bytes depended on worker order, and ``aot``'s per-item counter restart
(:func:`cccl_patches.restart_names`) then made two names meet. Evidence (sm_90, ``--jobs 1``, one worker):
``reduce`` with ``op: "lambda left, right: left + right"``, then the same with ``input: {transform: "lambda
x: x * x"}``: the second item's operator came from the memo as ``wrapped__lambda__0``, its transform was
compiled after the restart as ``wrapped__lambda__0`` too, and nvJitLink refused the link ("Linking globals
named 'wrapped__lambda__0': symbol multiply defined!"). ``tests/test_matrix_imports.py`` builds that pair,
in two folders.

The fix (:func:`install`): while cuda-cccl wraps an operator (``create_op_void_ptr_wrapper``,
``create_stateful_op_void_ptr_wrapper``), the name's suffix is a digest of what the wrapper compiles
from: the operator's content (:func:`cccl_patches.symbols.content`: bytecode, constants, the values it
reads, never an address or a file path), the signature, and a stateful operator's state dtypes and shapes.
The same content gets the same name in every process and order, as a memo hit already gave it within one.
Stateful operators are not memoized upstream, so one program may wrap the same content twice (two equal
transforms in a zip): the second and later of a program get ``_1``, ``_2``... in the order the program
compiles them; :func:`restart` (called per build item by :func:`cccl_patches.restart_names`) starts a new
program. Any other caller of ``_make_wrapper_name`` keeps cuda-cccl's counter.

Every wrapper symbol changes with this patch, so it bumped ``PATCH_VERSION`` (part of every CCCL content key).
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from typing import Any

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_state = threading.local()  # .digest: the content being wrapped in this thread, while it is
_lock = threading.Lock()
_seen: dict[str, int] = {}  # name -> times given in this program


def restart() -> None:
    """A new program: forget the names given (see the module docstring)."""
    with _lock:
        _seen.clear()


def _digest(op: Any, sig: Any, *extra: Any) -> str:
    from .symbols import content
    text = "|".join([content(op), _ADDRESS.sub("", str(sig)), *(content(e) for e in extra)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _named(create, digest_of):
    """``create`` with the content digest of its arguments visible to the name maker while it runs."""
    @functools.wraps(create)  # keeps annotated_ops' marker, so its install stays idempotent
    def wrapper(*args):
        saved = getattr(_state, "digest", None)
        _state.digest = digest_of(*args)
        try:
            return create(*args)
        finally:
            _state.digest = saved
    setattr(wrapper, "_aot_content_named", True)  # noqa: B010 - a mark read back by getattr, typed or not
    return wrapper


def install() -> None:
    """Name wrappers from content (idempotent). Without numba-cuda-mlir no Python operator is compiled."""
    try:
        import cuda.compute._odr_helpers as odr
        import cuda.compute._jit as jit
    except ImportError:
        return
    if getattr(odr._make_wrapper_name, "_aot_content_named", False):
        return
    counter_name = odr._make_wrapper_name

    def _make_wrapper_name(name: str) -> str:
        digest = getattr(_state, "digest", None)
        if digest is None:
            return counter_name(name)
        base = f"wrapped_{odr.sanitize_identifier(name)}_{digest}"
        with _lock:
            n = _seen.get(base, 0)
            _seen[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    _make_wrapper_name._aot_content_named = True  # type: ignore[attr-defined]
    odr._make_wrapper_name = _make_wrapper_name
    odr.create_op_void_ptr_wrapper = _named(odr.create_op_void_ptr_wrapper, lambda op, sig: _digest(op, sig))
    stateful = _named(odr.create_stateful_op_void_ptr_wrapper,
                      lambda op, sig, dtypes, shapes: _digest(op, sig, tuple(map(str, dtypes)), tuple(shapes)))
    odr.create_stateful_op_void_ptr_wrapper = stateful
    jit.create_stateful_op_void_ptr_wrapper = stateful  # _jit imported the name at its top
