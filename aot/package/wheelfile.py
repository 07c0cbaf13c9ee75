"""Add a bundled artifact folder to a finished wheel: what :mod:`aot.package.setuptools_backend` does to the pure
wheel setuptools builds, so that the wheel a setuptools project ships is the one the hatchling hook makes; and add
to its sdist what a wheel build from it needs (:func:`build_inputs`, :func:`add_to_sdist`).

The wheel is rewritten, never edited in place: the artifact files go in under ``<package>/<folder>/``, the
``WHEEL`` file says ``Root-Is-Purelib: false`` and the tag of :mod:`aot.package.tags` (a py3 wheel with the
platform of the distribution that decides it), ``METADATA`` gains ``Requires-Dist`` lines (what loading the
artifacts needs, and the ``jit`` extra's), ``RECORD`` is computed again, and the file gets the name its tag
says. Every entry keeps its bytes and time stamp; the new ones take the time of setuptools' own ``WHEEL`` entry
(``SOURCE_DATE_EPOCH`` where it is set), so the same sources give the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import os
import zipfile
from pathlib import Path
from typing import Iterable, Sequence

from ..core.errors import UsageError

#: What aot writes into an artifact folder; a wheel that already holds anything else there is refused.
_OURS = ("manifest.json", "hit-index.json", "aot-package.json", "build-report.json", ".aot-lock")


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _with_tag(wheel_text: str, tag: str) -> str:
    """``WHEEL`` with ``Root-Is-Purelib: false`` and one ``Tag:`` line per platform of ``tag``."""
    py, abi, plats = tag.split("-")
    lines = [ln for ln in wheel_text.splitlines() if not ln.startswith(("Root-Is-Purelib:", "Tag:"))]
    while lines and not lines[-1].strip():
        lines.pop()
    lines.append("Root-Is-Purelib: false")
    lines += [f"Tag: {py}-{abi}-{p}" for p in plats.split(".")]
    return "\n".join(lines) + "\n\n"


def _with_requirements(metadata: str, requires: Iterable[str]) -> str:
    """``METADATA`` with ``Requires-Dist`` lines added at the end of its headers (before the description)."""
    head, sep, body = metadata.partition("\n\n")
    have = set(head.splitlines())
    added = [f"Requires-Dist: {r}" for r in requires if f"Requires-Dist: {r}" not in have]
    return head.rstrip("\n") + "".join(f"\n{a}" for a in added) + (sep + body if sep else "\n")


def requirements_of(metadata: str) -> tuple[list[str], dict[str, list[str]]]:
    """The ``Requires-Dist`` lines of ``METADATA``: those without an ``extra`` marker, and per ``Provides-Extra``
    those whose marker names it (the pin check reads both, as it reads ``[project]`` and its extras)."""
    head = metadata.partition("\n\n")[0]
    reqs = [ln.split(":", 1)[1].strip() for ln in head.splitlines() if ln.startswith("Requires-Dist:")]
    extras = [ln.split(":", 1)[1].strip() for ln in head.splitlines() if ln.startswith("Provides-Extra:")]
    base = [r for r in reqs if "extra" not in r.partition(";")[2]]
    return base, {x: [r for r in reqs if "extra" in r.partition(";")[2]] for x in extras}


def wheel_metadata(whl: Path) -> str:
    with zipfile.ZipFile(whl) as z:
        name = next(n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
        return z.read(name).decode("utf-8")


def add_artifacts(whl: Path, out_dir: Path, stage: Path, prefix: str, tag: str, requires: Sequence[str]) -> Path:
    """Write ``whl`` again into ``out_dir`` with the files of ``stage`` under ``prefix`` (``mypkg/artifacts``),
    the tag ``tag`` and ``requires`` added to its requirements; returns the new wheel's path. A wheel that
    already holds files under ``prefix`` that aot did not write (package data of the same name) is refused."""
    parts = whl.name[:-len(".whl")].split("-")
    out = Path(out_dir) / ("-".join(parts[:-3]) + f"-{tag}.whl")
    files = sorted((p.relative_to(stage).as_posix(), p) for p in stage.rglob("*") if p.is_file())
    with zipfile.ZipFile(whl) as src:
        infos = src.infolist()
        info_dir = next(i.filename.split("/")[0] for i in infos if i.filename.endswith(".dist-info/WHEEL")
                        and i.filename.count("/") == 1)
        clash = [i.filename for i in infos if i.filename.startswith(prefix + "/")]
        foreign = [n for n in clash if not (n.rsplit("/", 1)[-1] in _OURS or n.endswith((".aot", ".aotpack")))]
        if foreign:
            raise UsageError(f"the wheel setuptools built already holds {', '.join(foreign[:3])}: {prefix}/ is the "
                             f"folder aot fills; move those files, or set [tool.aot] folder to another name")
        when = src.getinfo(f"{info_dir}/WHEEL").date_time
        entries: list[tuple[zipfile.ZipInfo, bytes]] = []
        meta: list[tuple[zipfile.ZipInfo, bytes]] = []
        for i in infos:
            if i.filename in clash or i.filename == f"{info_dir}/RECORD":
                continue
            data = src.read(i)
            if i.filename == f"{info_dir}/WHEEL":
                data = _with_tag(data.decode("utf-8"), tag).encode("utf-8")
            elif i.filename == f"{info_dir}/METADATA":
                data = _with_requirements(data.decode("utf-8"), requires).encode("utf-8")
            (meta if i.filename.startswith(info_dir + "/") else entries).append((i, data))
    for rel, path in files:
        zi = zipfile.ZipInfo(f"{prefix}/{rel}", date_time=when)
        zi.external_attr = 0o644 << 16
        zi.compress_type = zipfile.ZIP_DEFLATED
        entries.append((zi, path.read_bytes()))
    entries += meta
    record = "".join(_record_line(i.filename, d) + "\n" for i, d in entries) + f"{info_dir}/RECORD,,\n"
    rec = zipfile.ZipInfo(f"{info_dir}/RECORD", date_time=when)
    rec.external_attr = 0o644 << 16
    rec.compress_type = zipfile.ZIP_DEFLATED
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for i, data in [*entries, (rec, record.encode("utf-8"))]:
                z.writestr(i, data)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def build_inputs(matrix: Path, project: Path) -> list[Path]:
    """The files a wheel build from an sdist needs that setuptools leaves out of it (it packs packages, not data
    beside them): the matrix, and every file a spec names by path inside the project (``source:`` of NVRTC units
    and CuPy kernels, the contents of ``include_dirs``). Sources named as code (``pkg.mod:SRC``) live in the
    packages, which the sdist holds already. Read as plain YAML: nothing is imported."""
    import yaml
    found = [matrix]
    try:
        doc = yaml.safe_load(matrix.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        doc = None  # the wheel build names the problem; the sdist carries the matrix as it is
    for section in (doc.values() if isinstance(doc, dict) else ()):
        for entry in section if isinstance(section, list) else ():
            if not isinstance(entry, dict):
                continue
            src = entry.get("source")
            if isinstance(src, str) and ":" not in src:
                found.append(matrix.parent / src)
            for d in entry.get("include_dirs") or () if isinstance(entry.get("include_dirs"), list) else ():
                if isinstance(d, str) and (matrix.parent / d).is_dir():
                    found += sorted(p for p in (matrix.parent / d).rglob("*") if p.is_file())
    root = project.resolve()
    return sorted({p for p in found if p.is_file() and p.resolve().is_relative_to(root)})


def add_to_sdist(sdist: Path, project: Path, files: Sequence[Path]) -> None:
    """Write ``sdist`` (a ``.tar.gz``) again with ``files`` (inside ``project``) added where the sdist lacks them,
    in place. New members take the time stamp of its ``PKG-INFO``; the gzip header carries that time too."""
    import gzip
    import io
    import tarfile
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    with tarfile.open(sdist, "r:gz") as src:  # setuptools' own sdist, just written: small, read whole
        for m in src.getmembers():
            f = src.extractfile(m) if m.isfile() else None
            members.append((m, f.read() if f is not None else None))
        fmt = src.format
    base = members[0][0].name.split("/")[0]
    have = {m.name for m, _ in members}
    info = next((m for m, _ in members if m.name == f"{base}/PKG-INFO"), members[0][0])
    added: list[tuple[tarfile.TarInfo, bytes | None]] = []
    for p in files:
        name = f"{base}/{p.resolve().relative_to(project.resolve()).as_posix()}"
        if name in have:
            continue
        m = tarfile.TarInfo(name)
        text = p.read_bytes()
        m.size, m.mtime, m.mode, m.uid, m.gid, m.uname, m.gname = len(text), info.mtime, 0o644, 0, 0, "", ""
        added.append((m, text))
    if not added:
        return
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=int(info.mtime)) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=fmt) as out:
            for m, body in [*members, *added]:
                out.addfile(m, io.BytesIO(body) if body is not None else None)
    tmp = sdist.with_name(f".{sdist.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(buf.getvalue())
        os.replace(tmp, sdist)
    finally:
        tmp.unlink(missing_ok=True)
