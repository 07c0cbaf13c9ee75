"""The first-hit index: the few facts a library's first packaged NVRTC hit needs, derived from the manifest.

Issue 42: a library's first ``Program.compile(cache=aot.program_cache(...))`` hit cost 19-23 ms over cuda.core's
own warm cache, all of it reading the manifest (every spec definition validated, the spec, rule and form modules
imported). ``hit-index.json`` beside ``manifest.json`` carries, for each NVRTC unit whose image can be served by
content alone (no headers, includes nothing, no name expressions), its source text, options and kernels and,
per image, what the manifest entry says of the file (path, size, sha256, SM, kind, content key, cuda.core's key)
and, for an image in a pack (:mod:`aot.core.pack`, a large set's wheel), the pack that holds it.

The manifest stays the source of truth. The index is derived from the very bytes :func:`aot.core.manifest.
write_manifest` writes (so ``aot build``, ``aot bundle`` and every merge write it), after the checks the loader
would make on the definitions: an entry whose content key is not the key of its own definition is left out
(the manifest path then refuses it, as before). It records the manifest's sha256, so a reader uses it only
beside that very manifest: an index left beside another manifest (a hand edit, a merge that copied files) is
stale and ignored with one warning, and anything that is not this format is foreign and ignored the same way.

Reading it (:func:`load`) imports ``json`` and ``hashlib`` only, and checks every field it returns.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

INDEX_NAME = "hit-index.json"
INDEX_FORMAT = "aot-hit-index"
#: Version 2 adds an image's ``pack`` (:mod:`aot.core.pack`: the image is a member of that pack, not a file of its
#: own); it is written only where an image is packed, so a reader of version 1 alone (an older aot) never meets a
#: packed entry: it says the index is not its version and reads the manifest, which unpacks.
INDEX_VERSION = 2
READ_VERSIONS = (1, 2)
#: Every reader refuses a larger index (the manifest's own bound: the index is a part of it).
MAX_INDEX_LEN = 16 * 1024 * 1024
#: ProgramOptions fields whose bytes name aot's file, not the library's (aot.runtime.adapters.progkey).
_NOT_SAME_BYTES = ("lineinfo", "debug")
_HEX = "0123456789abcdef"
#: :data:`aot.core.pack.PACK_SUFFIX`, without importing that module on a first hit.
PACKED = ".aotpack"


def derive(doc: Mapping[str, Any], manifest_bytes: bytes) -> bytes | None:
    """The index of manifest ``doc`` (written as ``manifest_bytes``); ``None`` where no NVRTC image qualifies."""
    import hashlib

    from .headerclosure import includes_anything
    from .rules import spec_from_definition
    from .spec import NvrtcUnit, item_key
    producer = doc.get("producer") or {}
    producers = doc.get("producers") or {}
    units: dict[str, dict[str, Any]] = {}
    entries: list[dict[str, Any]] = []
    for e in doc.get("artifacts", ()):
        name, kind = e.get("name"), e.get("payload_kind")
        if e.get("family") != "nvrtc" or kind not in ("cubin", "ptx") or not isinstance(e.get("sm"), int):
            continue
        try:
            spec = spec_from_definition(doc["specs"][name])
            if not isinstance(spec, NvrtcUnit) or spec.headers or spec.name_expressions() or \
                    includes_anything(spec.source):
                continue
            rel = e.get("cuda_cccl")
            made_by = producers.get(rel, producer) if isinstance(rel, str) else producer
            if e.get("content_key") not in (item_key(spec, e["sm"], kind, made_by),
                                            item_key(spec, e["sm"], kind, made_by, legacy=True)):
                continue  # a stale entry: the manifest path refuses it with its own warning
            if not all(k in e for k in ("path", "size", "sha256")) or "pack" in e and not _rel_path(e["pack"], PACKED):
                continue  # (a pack's path the manifest's reader refuses: that entry is refused there too)
        except (KeyError, ValueError, TypeError):  # an entry the manifest's reader refuses: not indexed either
            continue
        units[name] = {"source": spec.source, "options": dict(spec.options), "kernels": list(spec.kernels),
                       "program_cache": not any(spec.options.get(k) for k in _NOT_SAME_BYTES)}
        optional = ("progkey", "progkey_nvrtc", "source_key", "pack")
        entries.append({k: e[k] for k in ("name", "path", "size", "sha256", "sm", "payload_kind", "content_key")}
                       | {k: e[k] for k in optional if isinstance(e.get(k), str)})
    if not entries:
        return None
    index = {"format": INDEX_FORMAT, "version": INDEX_VERSION if any("pack" in e for e in entries) else 1,
             "manifest_sha256": hashlib.sha256(manifest_bytes).hexdigest(), "units": units, "entries": entries}
    return (json.dumps(index, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n").encode()


class Stale(ValueError):
    """The index is not this manifest's (or not an index): the reader warns once and reads the manifest."""


def load(root: str, read: Any) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]] | None:
    """``(units, entries)`` of ``root``'s index, checked field by field; ``None`` where ``root`` has none.
    ``read(path, max_size)`` reads a regular file, bounded (:func:`aot.core.format.read_file`). :class:`Stale`
    where the index is not the one of ``root``'s manifest, or not an index at all."""
    path = os.path.join(root, INDEX_NAME)
    if not os.path.exists(path):
        return None
    import hashlib
    data = read(path, MAX_INDEX_LEN)
    manifest = read(os.path.join(root, "manifest.json"), MAX_INDEX_LEN)
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        raise Stale(f"{path}: not JSON") from None
    version = doc.get("version") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("format") != INDEX_FORMAT or version not in READ_VERSIONS \
            or isinstance(version, bool):
        raise Stale(f"{path}: not an {INDEX_FORMAT} of version {' or '.join(map(str, READ_VERSIONS))}")
    if doc.get("manifest_sha256") != hashlib.sha256(manifest).hexdigest():
        raise Stale(f"{path}: derived from another manifest.json than the one beside it (stale)")
    units, entries = doc.get("units"), doc.get("entries")
    if not (isinstance(units, dict) and isinstance(entries, list)):
        raise Stale(f"{path}: no units or entries")
    for name, u in units.items():  # every field read later, checked here (unrolled: a large set's index has thousands)
        if not (isinstance(u, dict) and type(u.get("source")) is str and type(u.get("options")) is dict
                and type(u.get("kernels")) is list and all(type(k) is str for k in u["kernels"])
                and type(u.get("program_cache")) is bool):
            raise Stale(f"{path}: unit {name!r:.80} is malformed")
    for e in entries:
        if not (type(e) is dict and e.get("name") in units and _rel_path(e.get("path"))
                and ("pack" not in e or (version > 1 and _rel_path(e["pack"], PACKED)))
                and _count(e.get("size")) and _count(e.get("sm")) and e.get("payload_kind") in ("cubin", "ptx")
                and _hex(e.get("sha256")) and _hex(e.get("content_key"))
                and ("progkey" not in e or _hex(e["progkey"])) and ("source_key" not in e or _hex(e["source_key"]))
                and type(e.get("progkey_nvrtc", "")) is str):
            raise Stale(f"{path}: entry {str(e.get('path') if isinstance(e, dict) else e)!r:.120} is malformed")
    return units, entries


def _hex(v: Any) -> bool:
    return type(v) is str and len(v) == 64 and not v.strip(_HEX)


def _count(v: Any) -> bool:
    return type(v) is int and 0 <= v


def _rel_path(v: Any, suffix: str = ".aot") -> bool:
    """A plain relative path inside the set (``nvrtc/unit/sm_90.cubin.aot``, a pack's ``nvrtc/unit/all.aotpack``):
    no ``..``, no absolute path."""
    return isinstance(v, str) and 0 < len(v) < 4096 and not v.startswith("/") and "\\" not in v and "\0" not in v \
        and all(p not in ("", ".", "..") for p in v.split("/")) and v.endswith(suffix)
