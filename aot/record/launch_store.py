"""The store of the launches ``aot record`` kept (:mod:`aot.record.launches`, whose docstring describes the
format), written beside the matrix: ``<matrix>.launches/`` with one ``NNNN.bin`` per launch and ``index.json``
written last, so a reader never sees an index naming a file not yet written. :mod:`aot.verify.replay` reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from ..core.errors import ArtifactError
from ..core.format import _read_regular
from .launches import FORMAT, INDEX, MAX_PER_KERNEL, VERSION

#: Largest launch index any reader reads (this one and :mod:`aot.verify.replay`, both stores).
MAX_INDEX_BYTES = 8 << 20


def store(records: list[dict], files: dict[str, bytes], folder: Any) -> list[str]:
    """Write the kept launches of a recorded run (its ``records`` and the launch files read back, name ->
    bytes) into ``folder`` (``<matrix>.launches/``): at most :data:`MAX_PER_KERNEL` per kernel, the ``.bin``
    files first, ``index.json`` last; files an earlier index named and this one does not are removed. Returns
    one note per launch not kept (symbol and why)."""
    folder = Path(folder)
    launches: list[dict] = []
    blobs: dict[str, bytes] = {}
    notes: list[str] = []
    per: dict[str, int] = {}
    for r in records:
        if r.get("kind") != "launch" or r.get("family") != "raw":
            continue
        symbol = str(r.get("symbol"))
        key = f"{symbol}{tuple(r.get('params') or ())}"
        data = files.get(str(r.get("file")))
        if r.get("why") or data is None:
            if len(notes) < 1000:
                notes.append(f"a launch of {symbol[:120]} was not kept: {r.get('why') or 'its file is missing'}")
            continue
        if per.get(key, 0) >= MAX_PER_KERNEL or hashlib.sha256(data).hexdigest() != r.get("sha256"):
            continue
        per[key] = per.get(key, 0) + 1
        name = f"{len(launches):04d}.bin"
        entry = {k: r[k] for k in ("symbol", "via", "grid", "block", "shmem", "args", "buffers", "numba", "params")
                 if k in r}
        entry.update(file=name, sha256=r["sha256"])
        launches.append(entry)
        blobs[name] = data
    if not launches and not (folder / INDEX).is_file():
        return notes  # nothing kept, nothing there before: no folder
    folder.mkdir(parents=True, exist_ok=True)
    old = _old_files(folder / INDEX)
    for name, data in blobs.items():
        _atomic(folder / name, data)
    doc = {"format": FORMAT, "version": VERSION, "launches": launches, "skipped": notes[:200]}
    _atomic(folder / INDEX, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
    for name in old - set(blobs):
        (folder / name).unlink(missing_ok=True)
    return notes


def old_index(path: Any) -> Any:
    """The index a store's folder held before this recording (to remove the files only it named), read bounded
    (a regular file of at most :data:`MAX_INDEX_BYTES`: a FIFO or ``/dev/zero`` in its place cannot hang or
    fill memory); ``None`` when there is none or it cannot be read."""
    try:
        return json.loads(_read_regular(path, MAX_INDEX_BYTES))
    except (OSError, ValueError, RecursionError, ArtifactError):
        return None


def _old_files(index: Any) -> set[str]:
    try:
        doc = old_index(index)
        return {e["file"] for e in doc["launches"] if re.fullmatch(r"\d{4,6}\.bin", str(e.get("file")))}
    except (KeyError, TypeError, AttributeError):
        return set()


def _atomic(path: Any, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
