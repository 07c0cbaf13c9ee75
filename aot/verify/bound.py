"""An operator bound to the state it reads, for the numpy references (:mod:`aot.verify.typed`).

A spec with ``state:`` has operators that read the caller's arrays: the check (:mod:`aot.verify.forms`)
generates that state, uploads it for the device and hands the references the same values as numpy
arrays and scalars, bound to each operator by :class:`Bound`.
"""

from __future__ import annotations

import contextlib
import contextvars
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping

import numpy as np

from .compare import NoReference


@dataclass(frozen=True)
class Bound:
    """An operator with the state it reads (numpy arrays and scalars by name): a lambda source (evaluated
    with the state in scope), or an operator from code (called as a copy whose globals hold the state)."""

    op: Any
    state: Mapping[str, Any]

    def arrays(self) -> tuple[str, ...]:
        return tuple(k for k, v in self.state.items() if isinstance(v, np.ndarray))

    def scalars(self) -> tuple[str, ...]:
        return tuple(k for k, v in self.state.items() if not isinstance(v, np.ndarray))

    def function(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` (the operator from code) with the state as its module globals."""
        return types.FunctionType(fn.__code__, {**fn.__globals__, **self.state}, fn.__name__, fn.__defaults__,
                                  fn.__closure__)


def is_lambda(op: Any) -> bool:
    """A lambda source, bare or :class:`Bound` to its state."""
    op = op.op if isinstance(op, Bound) else op
    return isinstance(op, str) and op.lstrip().startswith("lambda")


#: Inside :func:`only_code`: the references :func:`vetted` lets through (``None``: any, the caller vetted).
_ALLOWED_CODE: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar("aot_allowed_code",
                                                                                     default=None)


@contextlib.contextmanager
def only_code(refs: Iterable[str]) -> Iterator[None]:
    """Within the block a reference resolves (:func:`aot.verify.typed.resolve_code`) only if it is one of
    ``refs``, what ``verify --gpu`` vetted for the spec it checks: a second line of defence, so a check that
    reaches an operator nobody vetted refuses it instead of importing its module."""
    token = _ALLOWED_CODE.set(frozenset(refs))
    try:
        yield
    finally:
        _ALLOWED_CODE.reset(token)


def vetted(ref: str) -> str:
    """``ref`` itself, or NoReference when an enclosing :func:`only_code` does not allow it."""
    allowed = _ALLOWED_CODE.get()
    if allowed is not None and ref not in allowed:
        raise NoReference(f"operator {ref!r}: not imported (this check may import only {sorted(allowed)})")
    return ref
