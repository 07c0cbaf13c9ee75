"""A registry's first packaged NVRTC hit without reading its manifest (issue 42).

:func:`index_of` reads the set's ``hit-index.json`` (:mod:`aot.core.hitindex`: derived from the manifest when it
was written, bound to its sha256) and :func:`read_image` reads and checks one image it names: the file regular,
bounded, inside the set, of the size and sha256 the manifest gave; the header's name, family, SM, kind and
content key the entry's (the content key was checked against the unit's definition when the index was derived);
the producer's CUDA major this install's. Imports :mod:`aot.core.hitindex`, :mod:`aot.core.format` and
:mod:`aot.core.versions`; no manifest, spec, rule or form module.

Used only where the manifest path would read this very manifest and serve this very image: a registry with no
caller specs (those could redefine a unit), packaged artifacts not disabled, not ``AOT_JIT_ONLY``. Anything
else, and an index that is stale or not an index (one warning), falls back to the manifest.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from .registry import Registry

def index_of(reg: Registry) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]] | None:
    """``reg``'s index where the manifest path would serve exactly what it says (see the module doc), else
    ``None``; read once per registry (memoised on it)."""
    memo = reg._hit_index
    if memo is not False:
        return memo
    found = None
    if reg._source is not None and not reg._caller_specs and reg._specs_from is None and reg._cat is None:
        from ...core.env import DISABLE_PACKAGED, JIT_ONLY
        if not (DISABLE_PACKAGED.get() or JIT_ONLY.get()):
            from ...core import format as fmt
            from ...core.hitindex import Stale, load
            try:
                found = load(reg._source, lambda p, n: fmt.read_file(p, max_size=n))
            except Stale as e:
                reg._warn(f"aot: ignoring the first-hit index: {e}; reading the manifest")
            except Exception as e:  # noqa: BLE001 - unreadable (ArtifactError, OSError): the manifest decides
                reg._warn(f"aot: ignoring the first-hit index of {reg._source}: {e}; reading the manifest")
    reg._hit_index = found
    return found


def read_image(root: str, unit: str, entry: Mapping[str, Any]) -> Any:
    """The checked :class:`aot.core.format.Artifact` of ``entry`` (an index entry of unit ``unit``);
    :class:`aot.core.errors.ArtifactError` says why not."""
    import hashlib

    from ...core import format as fmt
    from ...core.errors import ArtifactError
    from ...core.versions import check_producer
    path = os.path.join(root, entry["path"])
    real_root = os.path.realpath(root)
    if not os.path.realpath(path).startswith(real_root + os.sep):
        raise ArtifactError(f"{path}: outside the artifact folder")
    data = fmt.read_file(path, expect_size=entry["size"])
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ArtifactError("file differs from its manifest entry (size or sha256)")
    art = fmt.decode(data)
    h = art.header
    if (h["name"], h["family"], h["sm"], h["payload_kind"]) != (unit, "nvrtc", entry["sm"], entry["payload_kind"]):
        raise ArtifactError("header does not match its manifest entry (name, family, SM or kind)")
    if h["content_key"] != entry["content_key"]:
        raise ArtifactError("content key differs from the manifest's")
    check_producer(h["producer"], h["family"])
    return art
