"""Operators from code: ``op: "mypkg.ops:bbox_union"`` names a numba-compilable function in an installed
package. The content key covers the function's source (sha256 of ``inspect.getsource``), so editing it
invalidates its artifacts and cache entries.

Importing a module runs its code, so *who* may name one matters: the matrix being built (the user's own
file) may name any module; at JIT time a registry resolves references only inside the package that owns
the artifacts (:meth:`aot.runtime.loader.registry.Registry.from_package`). This module only resolves; the loader
decides.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from typing import Any, Callable


class OpRefError(ValueError):
    pass


def resolve(ref: str) -> Callable[..., Any]:
    """The function ``ref`` names (imports its module)."""
    from .oplang import code_ref_problem
    problem = code_ref_problem(ref)
    if problem:
        raise OpRefError(problem)
    mod, _, func = ref.partition(":")
    try:
        module = importlib.import_module(mod)
    except Exception as e:  # noqa: BLE001 - any import failure is "cannot resolve", said in one line
        raise OpRefError(f"operator {ref!r}: cannot import {mod!r} ({type(e).__name__}: {e})") from None
    fn = getattr(module, func, None)
    if not callable(fn):
        raise OpRefError(f"operator {ref!r}: {mod} has no function {func!r}")
    return fn


def source_digest(ref: str) -> str:
    """sha256 of the source of the function ``ref`` names."""
    fn = resolve(ref)
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError) as e:
        raise OpRefError(f"operator {ref!r}: its source cannot be read ({e}); aot keys artifacts by it") from None
    return hashlib.sha256(src.encode()).hexdigest()


def check_digests(spec) -> None:
    """Refuse to build ``spec`` when an operator's source differs from the one its definition records."""
    for ref, digest in spec.code.items():
        now = source_digest(ref)
        if now != digest:
            raise OpRefError(f"{spec.name}: the source of operator {ref!r} changed since the spec was read "
                             f"(sha256 {now[:12]}, recorded {digest[:12]})")


def module_of(ref: str) -> str:
    return ref.partition(":")[0]


def inside(ref: str, package: str) -> bool:
    """Whether ``ref``'s module is ``package`` or one of its submodules."""
    mod = module_of(ref)
    return mod == package or mod.startswith(package + ".")
