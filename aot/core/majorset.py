"""A set carrying the artifacts of several CUDA majors: one ordinary set per major side by side (``cu12/``,
``cu13/``, each with its own ``manifest.json``), and at the top a ``manifest.json`` that only names them.

Why this shape: a library ships ONE wheel per platform and lets the user pick the CUDA major with an extra
(``pip install "lib[cu12]"``), as cuda-cccl, numba-cuda and cuda-core do; that wheel must then carry what each
major's users load. A major's artifacts cannot be shared with the other's (NVRTC 12 and 13 write different code
from different headers; a CCCL blob loads only under the cuda-cccl release and major that built it), so nothing is
merged across majors: each major keeps its own set, built and checked as one, its content keys unchanged. The
loader reads the installed major's set (``cuda-bindings``' major, :func:`aot.core.versions.runtime_versions`) and
never opens the other: a major that is not installed is ignored, not an error. A set without the installed major
keeps its spec definitions (so the caller's names resolve and JIT), with no artifact.

The index is untrusted like any manifest: read bounded, every major a CUDA major number, and each folder is
``cu<major>`` by construction, never a path the file names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from .errors import ArtifactError
from .text import short

MAJORS_FORMAT = "aot-majors"
MAJORS_VERSION = 1
MAX_INDEX_LEN = 64 * 1024
#: The index takes the place of a set's manifest (:data:`aot.core.manifest.MANIFEST_NAME`, which imports this).
INDEX_NAME = "manifest.json"


def major_dir(major: int) -> str:
    """The folder of one major's set inside a set of several: ``cu12``."""
    return f"cu{int(major)}"


def is_index(doc: Any) -> bool:
    """Whether a parsed ``manifest.json`` is the index of a set of several majors (not a set itself)."""
    return isinstance(doc, dict) and doc.get("format") == MAJORS_FORMAT


def index_majors(path: Path, doc: Mapping[str, Any]) -> tuple[int, ...]:
    """The CUDA majors the index ``doc`` (read from ``path``) names, sorted; ArtifactError naming the field."""
    if doc.get("manifest_version") != MAJORS_VERSION:
        raise ArtifactError(f"{path}: majors index version {short(doc.get('manifest_version'))}, this aot reads "
                            f"{MAJORS_VERSION}")
    majors = doc.get("majors")
    if not isinstance(majors, dict) or not 1 <= len(majors) <= 8 or not all(
            isinstance(k, str) and k.isascii() and k.isdigit() and len(k) <= 3 and 10 <= int(k) <= 99
            and v == major_dir(int(k)) for k, v in majors.items()):
        raise ArtifactError(f"{path}: field 'majors' must map each CUDA major to its folder "
                            f"({{\"12\": \"cu12\", \"13\": \"cu13\"}}), not {short(majors)}")
    return tuple(sorted(int(k) for k in majors))


def read_index(root: str | Path) -> tuple[int, ...] | None:
    """The majors of the set at ``root`` if it is a set of several majors, else ``None`` (an ordinary set, or no
    readable manifest: whoever reads it next says why)."""
    from .format import _read_regular, loads_strict_json
    path = Path(root) / INDEX_NAME
    try:
        raw = _read_regular(path, MAX_INDEX_LEN)
        doc = loads_strict_json(raw)
    except (OSError, ArtifactError, ValueError, RecursionError, MemoryError):
        return None  # too large for an index, not JSON, missing: not an index
    return index_majors(path, doc) if is_index(doc) else None


def write_index(root: Path, majors: Mapping[int, Any]) -> Path:
    """Write the index naming ``majors`` (each with its set at ``root/cu<major>``), atomically: written last by
    whoever fills the folders, so an interrupted write leaves no index naming a missing set."""
    from .fs import atomic_write
    doc = {"format": MAJORS_FORMAT, "manifest_version": MAJORS_VERSION,
           "majors": {str(m): major_dir(m) for m in sorted(majors)}}
    path = root / INDEX_NAME
    atomic_write(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
    return path


def installed_major() -> str:
    """The CUDA major whose artifacts this process can load (``cuda-bindings``' major; ``"missing"``: none)."""
    from .versions import cuda_major
    return cuda_major()


def pick(root: Path, majors: tuple[int, ...], major: str | None) -> tuple[Path, bool]:
    """(the folder of the set to read, whether its artifacts may be served): the installed ``major``'s set; where
    the index has none, the first one's, for its spec definitions only (served: False)."""
    here = str(major)
    for m in majors:
        if str(m) == here:
            return root / major_dir(m), True
    return root / major_dir(majors[0]), False


def sets_of(root: str | Path) -> list[tuple[Path, int | None]]:
    """The ordinary sets at ``root``: ``[(root, None)]``, or each major's ``(root/cu<major>, major)`` for a set of
    several majors (what ``aot verify`` and ``aot inspect`` walk)."""
    root = Path(root)
    majors = read_index(root)
    return [(root, None)] if majors is None else [(root / major_dir(m), m) for m in majors]
