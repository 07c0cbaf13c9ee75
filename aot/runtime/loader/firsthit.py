"""A registry's first packaged NVRTC hit without reading its manifest (issue 42).

:func:`index_of` reads the set's ``hit-index.json`` (:mod:`aot.core.hitindex`: derived from the manifest when it
was written, bound to its sha256) and :func:`read_image` reads and checks one image it names: the file (or the
pack holding it: :mod:`aot.core.pack`, imported only then) regular, bounded, inside the set, of the size and sha256
the manifest gave; the header's name, family, SM, kind and content key the entry's (the content key was checked
against the unit's definition when the index was derived); the producer's CUDA major this install's.
:func:`load_unit` loads a unit's best image for the device, as the manifest path does. Imports
:mod:`aot.core.hitindex`, :mod:`aot.core.format` and :mod:`aot.core.versions` (and, to load, :mod:`aot.core.arch`
and the driver library); no manifest, spec, rule or form module.

What the lean path does not do, because nothing it serves needs it: the headers' digest (an indexed unit
includes nothing), symbol mappings (it has no name expressions), and the check of a library's own live text
against the packaged one (:func:`aot.runtime.loader.sources.live_unit`): a lookup by source has matched the
caller's own text already. A unit served this way is the lookup's, not in :meth:`aot.Registry.status`.

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
        if not (_set("AOT_DISABLE_PACKAGED") or _set("AOT_JIT_ONLY")):
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


def _set(name: str) -> bool:
    """Whether ``AOT_DISABLE_PACKAGED`` / ``AOT_JIT_ONLY`` is on: parsed by its registry entry (:mod:`aot.core.env`)
    only where it is set at all, so a first hit imports no registry of variables."""
    if not os.environ.get(name):
        return False
    from ...core import env
    return bool(env.VARS[name].get())


def read_image(root: str, unit: str, entry: Mapping[str, Any]) -> Any:
    """The checked :class:`aot.core.format.Artifact` of ``entry`` (an index entry of unit ``unit``): its file, or
    its member of the pack the entry names (decoded up to that member, as the manifest path reads it);
    :class:`aot.core.errors.ArtifactError` says why not."""
    import hashlib

    from ...core import format as fmt
    from ...core.errors import ArtifactError
    from ...core.versions import check_producer
    packed = entry.get("pack")
    path = os.path.join(root, packed if packed is not None else entry["path"])
    real_root = os.path.realpath(root)
    if not os.path.realpath(path).startswith(real_root + os.sep):
        raise ArtifactError(f"{path}: outside the artifact folder")
    if packed is None:
        data = fmt.read_file(path, expect_size=entry["size"])
    else:
        from ...core.pack import MAX_PACK_FILE, unpack_member  # only a packed set's first hit
        try:
            data = unpack_member(fmt.read_file(path, max_size=MAX_PACK_FILE), entry["path"], entry["size"])
        except ArtifactError as e:
            raise ArtifactError(f"{path}: {e}") from None
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


def load_unit(reg: Registry, name: str, kernels: list[str], entries: list[dict[str, Any]]) -> Any:
    """Unit ``name``'s best image of the index for this device, checked (:func:`read_image`) and loaded with
    every one of ``kernels`` resolved (:class:`aot.runtime.loader.library.DriverLibrary`), as the manifest path
    loads it; ``None`` (each skipped image warned once) where none loads: the caller then takes that path."""
    from ...core.arch import Candidate, rank
    from ...core.errors import NoDeviceError
    from .driver import check_ptx_loadable, require_driver
    from .library import DriverLibrary
    from .threads import IMPORTS
    require_driver(f"loading NVRTC unit {name!r}")
    root = reg._source
    assert root is not None  # an index is read from a folder
    for cand in rank(reg.device_sm(), [Candidate(e["sm"], e["payload_kind"], "packaged", e) for e in entries
                                       if e["name"] == name]):
        entry: Mapping[str, Any] = cand.ref  # type: ignore[assignment]  # the index entry put there above
        try:
            art = read_image(root, name, entry)
            if art.kind == "ptx":
                IMPORTS.settle()  # cuda.bindings: not while a warmup's thread imports cuda.core
                check_ptx_loadable(art.header["producer"])
            return DriverLibrary(name, art.payload, art.kind, kernels)
        except NoDeviceError:
            raise
        except Exception as e:  # noqa: BLE001 - as the manifest path: the next image, said once
            reg._warn(f"aot: skipping {os.path.join(root, entry['path'])}: {e}")
    return None


class SourceIndex:
    """The index as a lookup by source reads it (:mod:`aot.runtime.adapters.bysource`): ``keys`` (source_key ->
    unit), ``units`` (name -> source, options, kernels) and the image entries."""

    __slots__ = ("keys", "units", "entries")

    def __init__(self, units: dict[str, dict[str, Any]], entries: list[dict[str, Any]]):
        self.keys = {e["source_key"]: e["name"] for e in entries if "source_key" in e}
        self.units, self.entries = units, entries

    def load(self, reg: Registry, name: str, kernel_names: tuple[str, ...]) -> Any:
        """:func:`load_unit` of ``name`` where it has every one of ``kernel_names``, else ``None``."""
        kernels = self.units[name]["kernels"]
        if not set(kernel_names) <= set(kernels):
            return None
        return load_unit(reg, name, kernels, self.entries)
