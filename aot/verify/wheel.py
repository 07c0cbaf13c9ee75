"""Unpack the artifact folders of a wheel, bounded, for ``aot verify WHEEL`` and ``aot inspect WHEEL``.

A wheel is input from elsewhere. Every artifact folder it carries is unpacked (so a valid decoy folder
cannot hide a corrupt ``aot/artifacts``) and each is then checked like a directory. Members are streamed
with a running count of the bytes actually decompressed, per member and in total: the sizes a zip's
directory claims are never trusted. Paths leaving the folder and symlink members are refused.
"""

from __future__ import annotations

import stat
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from ..core.errors import UsageError
from ..core.format import MAX_FILE_LEN
from ..core.manifest import MANIFEST_NAME, MAX_MANIFEST_LEN

#: Most bytes unpacked from one wheel, and from one member (the largest artifact file or manifest).
MAX_UNPACKED = 2 * 1024 ** 3
MAX_MEMBER = max(MAX_FILE_LEN, MAX_MANIFEST_LEN)
#: Most members in the artifact folders of one wheel.
MAX_MEMBERS = 100_000
_CHUNK = 1 << 20
_MARK = "/artifacts/"


def artifact_folders(names: list[str]) -> list[str]:
    """The artifact folders (prefixes ending in '/', in name order) of a wheel: every folder holding a
    ``manifest.json`` (downstream packages name theirs in ``[tool.aot] folder``), and every
    ``*/artifacts/`` folder holding an artifact even without one. Every one is checked, whatever order the
    zip lists them in; a folder inside another is checked as part of the outer one."""
    found = set()
    for n in names:
        if n.endswith("/" + MANIFEST_NAME) and ".dist-info/" not in n:
            found.add(n[: -len(MANIFEST_NAME)])
        elif _MARK in n and n.endswith((".aot", ".aotpack")):
            found.add(n.split(_MARK, 1)[0] + _MARK)
    outer = [f for f in found if not any(f != g and f.startswith(g) for g in found)]
    return sorted(outer)


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def _safe_rel(wheel: Path, name: str, prefix: str) -> PurePosixPath:
    rel = name[len(prefix):]
    pp = PurePosixPath(rel)
    if not rel or rel.startswith("/") or "\\" in rel or "\0" in rel or ".." in rel.split("/") \
            or pp.is_absolute() or ":" in pp.parts[0]:
        raise UsageError(f"{wheel}: unsafe path in wheel: {name[:200]}")
    return pp


def _stream(z: zipfile.ZipFile, info: zipfile.ZipInfo, dest: Path, total: int, wheel: Path) -> int:
    """Copy one member to ``dest``, counting the bytes decompressed; returns the new running total."""
    written = 0
    with z.open(info) as src, open(dest, "xb") as out:
        while True:
            chunk = src.read(_CHUNK)  # small reads: decompression output is bounded per call
            if not chunk:
                break
            written += len(chunk)
            total += len(chunk)
            if written > MAX_MEMBER:
                raise UsageError(f"{wheel}: member {info.filename[:200]} unpacks to more than {MAX_MEMBER} "
                                 f"bytes; refusing")
            if total > MAX_UNPACKED:
                raise UsageError(f"{wheel}: artifacts unpack to more than {MAX_UNPACKED} bytes; refusing")
            out.write(chunk)
    return total


def extract_artifacts(wheel: Path, dest: Path) -> list[Path]:
    """Unpack every artifact folder of ``wheel`` under ``dest`` (``dest/<package>/<folder>``); returns
    those directories. Raises :class:`UsageError` (exit 2) for an unreadable or unsafe wheel."""
    try:
        z = zipfile.ZipFile(wheel)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as e:
        raise UsageError(f"{wheel}: not a readable wheel: {e}") from None
    try:
        with z:
            folders = artifact_folders([i.filename for i in z.infolist() if not i.is_dir()])
            if not folders:
                raise UsageError(f"{wheel}: the wheel carries no artifacts (no folder with a {MANIFEST_NAME})")
            infos = [i for i in z.infolist() if not i.is_dir() and i.filename.startswith(tuple(folders))]
            if len(infos) > MAX_MEMBERS:
                raise UsageError(f"{wheel}: {len(infos)} artifact members, over the limit of {MAX_MEMBERS}")
            roots = []
            total = 0
            for prefix in folders:
                rel_root = _safe_rel(wheel, prefix, "")
                root = dest.joinpath(*rel_root.parts)
                root.mkdir(parents=True, exist_ok=True)
                for info in infos:
                    if not info.filename.startswith(prefix):
                        continue
                    rel = _safe_rel(wheel, info.filename, prefix)
                    if _is_symlink(info):
                        raise UsageError(f"{wheel}: symlink member in wheel: {info.filename[:200]}")
                    out = root.joinpath(*rel.parts)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    total = _stream(z, info, out, total, wheel)
                roots.append(root)
            return roots
    except (zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError, RuntimeError, ValueError) as e:
        # RuntimeError: an encrypted member ("password required"); ValueError: a name zipfile cannot decode
        raise UsageError(f"{wheel}: not a readable wheel: {e}") from None
    except FileExistsError as e:  # two members with one name
        raise UsageError(f"{wheel}: member {e.filename} appears twice") from None
