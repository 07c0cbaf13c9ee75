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


def install(naming: str = "make_wrapper_name") -> None:
    """Name wrappers from content (idempotent). Without numba-cuda-mlir no Python operator is compiled.

    ``naming`` is how the installed cuda-cccl draws a wrapper's name (:data:`cccl_patches.CHECKED`): through
    ``_odr_helpers._make_wrapper_name`` (1.2.x), or inline in ``_create_void_ptr_wrapper`` as
    ``wrapped_<name>_{next(_wrapper_name_counter)}`` (1.1.x), where the counter itself is replaced by one
    that yields the content digest while a wrapper is being made (:class:`ContentCounter`). Either way the
    name is ``wrapped_<name>_<digest>[_<n>]``."""
    try:
        import cuda.compute._odr_helpers as odr
        import cuda.compute._jit as jit
    except ImportError:
        return
    if naming == "counter":
        _install_counter(odr, jit)
        return
    if getattr(odr._make_wrapper_name, "_aot_content_named", False):
        return
    counter_name = odr._make_wrapper_name

    def _make_wrapper_name(name: str) -> str:
        digest = getattr(_state, "digest", None)
        if digest is None:
            return counter_name(name)
        base = f"wrapped_{odr.sanitize_identifier(name)}_{digest}"
        return _numbered(base)

    _make_wrapper_name._aot_content_named = True  # type: ignore[attr-defined]
    odr._make_wrapper_name = _make_wrapper_name
    odr.create_op_void_ptr_wrapper = _named(odr.create_op_void_ptr_wrapper, lambda op, sig: _digest(op, sig))
    stateful = _named(odr.create_stateful_op_void_ptr_wrapper,
                      lambda op, sig, dtypes, shapes: _digest(op, sig, tuple(map(str, dtypes)), tuple(shapes)))
    odr.create_stateful_op_void_ptr_wrapper = stateful
    jit.create_stateful_op_void_ptr_wrapper = stateful  # _jit imported the name at its top


def _numbered(base: str) -> str:
    """``base`` the first time in this program, then ``base_1``, ``base_2``..."""
    with _lock:
        n = _seen.get(base, 0)
        _seen[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


class ContentCounter:
    """cuda-cccl 1.1.x's ``_odr_helpers._wrapper_name_counter`` (``next()`` gives a wrapper's suffix): while a
    wrapper is made from an operator (:func:`_named`), the content digest, numbered per program as
    :func:`_numbered` does; otherwise cuda-cccl's own count. Replaced in place of the ``itertools.count``, so
    :func:`cccl_patches.restart_names` restarts its count instead of replacing it."""

    def __init__(self) -> None:
        self._count = 0

    def __iter__(self) -> "ContentCounter":
        return self

    def __next__(self) -> str | int:
        digest = getattr(_state, "digest", None)
        if digest is None:
            n, self._count = self._count, self._count + 1
            return n
        name = getattr(_state, "name", "")
        return _numbered(f"{name}_{digest}")[len(name) + 1:]

    def restart(self) -> None:
        self._count = 0


def _install_counter(odr: Any, jit: Any) -> None:
    """The 1.1.x form of :func:`install` (see there)."""
    if isinstance(odr._wrapper_name_counter, ContentCounter):
        return
    odr._wrapper_name_counter = ContentCounter()

    def named(create, digest_of):
        inner = _named(create, digest_of)

        @functools.wraps(create)
        def wrapper(op, *args):  # the base name numbers per program, as 1.2.x's wrapped_<name>_<digest> does
            saved = getattr(_state, "name", None)
            _state.name = odr.sanitize_identifier(op.__name__)
            try:
                return inner(op, *args)
            finally:
                _state.name = saved
        return wrapper

    odr.create_op_void_ptr_wrapper = named(odr.create_op_void_ptr_wrapper, lambda op, sig: _digest(op, sig))
    stateful = named(odr.create_stateful_op_void_ptr_wrapper,
                     lambda op, sig, types_, info: _digest(op, sig, tuple(map(str, types_)), info))
    odr.create_stateful_op_void_ptr_wrapper = stateful
    jit.create_stateful_op_void_ptr_wrapper = stateful  # _jit imported the name at its top
