"""Field checks the family validators share (:mod:`aot.core.numbaspec`, :mod:`aot.core.cupyspec`,
:mod:`aot.core.tritonspec`): the same field is refused in the same words whichever family's spec holds it.

Pure Python and bounded like :mod:`aot.core.text`; each raises :class:`~aot.core.text.SpecError` naming the field.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from .format import is_sha256_hex
from .oplang import code_ref_problem
from .text import SpecError, hint, short

#: A release as a spec records it (``numba_cuda``, ``cupy``): a version's characters, bounded.
_RELEASE = re.compile(r"[0-9A-Za-z.+!_-]{1,64}")


def known_fields(d: Mapping[str, Any], allowed: Iterable[str], of: str | None = None) -> None:
    """Refuse the first key of ``d`` that is not ``allowed``: ``of`` names what a manifest definition describes
    ("a numba kernel"); without it (a matrix entry) the allowed keys are listed."""
    allowed = tuple(allowed)
    for key in d:
        if key not in allowed:
            where = f" for {of}{hint(key, allowed)}" if of else f"{hint(key, allowed)}; allowed: {', '.join(allowed)}"
            raise SpecError(f"unknown field{where}", str(key))


def sha256_field(value: Any, fld: str, of_what: str) -> str:
    """``value`` if it is a sha256 in hex (64 lowercase digits), else refused as the sha256 ``of_what``."""
    if not is_sha256_hex(value):
        raise SpecError(f"{fld} must be the sha256 of {of_what} (64 hex digits)", fld)
    return value


def release_field(value: Any, fld: str, what: str) -> str:
    """``value`` if it is spelled as a release (``what``: how the message names it, with an example)."""
    if not isinstance(value, str) or not _RELEASE.fullmatch(value):
        raise SpecError(f"{fld} must be {what}, got {short(value)}", fld)
    return value


def kernel_ref(ref: Any, fld: str = "kernel") -> str:
    """``pkg.mod:kernel``: where a family's kernel object lives (checked as text, never imported)."""
    problem = code_ref_problem(ref) if isinstance(ref, str) else "must be a string 'package.module:kernel'"
    if problem:
        raise SpecError(problem.replace("function", "kernel"), fld)
    return ref.strip()
