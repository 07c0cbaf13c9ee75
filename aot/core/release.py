"""A cuda-cccl release as a manifest may name one (its ``producer``, its ``producers``, its cccl-legacy
answers): the pattern, the bound, and the order releases sort in. A release becomes part of output paths, so
nothing else may pass."""

from __future__ import annotations

import re
from typing import Any

#: A cuda-cccl release as a manifest may name one: a PEP 440 version in its plain spelling (no leading ``v``, no
#: spaces), or ``"missing"`` (built where cuda-cccl was not installed: :func:`aot.core.versions.producer_versions`).
#: ``aot merge`` builds output paths from it (:func:`aot.build.merge.blob_path`), so nothing else may pass.
_RELEASE = re.compile(r"(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
                      r"(?:\+[a-z0-9]+(?:\.[a-z0-9]+)*)?|missing", re.ASCII)
MAX_RELEASE_LEN = 64


def is_release(value: Any) -> bool:
    """Whether ``value`` is a cuda-cccl release string a manifest may carry (:data:`_RELEASE`, bounded)."""
    return isinstance(value, str) and len(value) <= MAX_RELEASE_LEN and _RELEASE.fullmatch(value) is not None


def release_order(release: str) -> tuple:
    """Sort key of a cuda-cccl release ("1.2.1" < "1.10.0"); a part that is no number sorts by its text."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in release.split("."))
