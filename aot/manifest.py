"""The per-output index of artifacts, written last as the build's commit marker.

A directory is a usable artifact set only if its ``manifest.json`` parses and every entry it names is
present with the recorded size and sha256. The build deletes the old manifest first and writes the
new one atomically after every artifact is in place, so an interrupted build never leaves a manifest
naming missing or partial files. Paths in a manifest are checked to stay inside its directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

from ._fs import atomic_write
from .errors import ArtifactError
from .format import _read_regular, is_sha256_hex, loads_strict_json

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "aot-manifest"
MANIFEST_VERSION = 1
MAX_MANIFEST_LEN = 16 * 1024 * 1024
ENTRY_FIELDS: dict[str, type] = {"path": str, "name": str, "family": str, "sm": int, "payload_kind": str,
                                 "size": int, "sha256": str, "content_key": str}


@dataclass(frozen=True)
class Manifest:
    root: Path
    producer: Mapping[str, Any]
    specs: Mapping[str, Mapping[str, Any]]
    artifacts: tuple[Mapping[str, Any], ...]

    def entries_for(self, name: str) -> list[Mapping[str, Any]]:
        return [a for a in self.artifacts if a["name"] == name]

    def path_of(self, entry: Mapping[str, Any]) -> Path:
        return safe_join(self.root, entry["path"])


def safe_join(root: Path, rel: str) -> Path:
    """``root / rel`` only if ``rel`` is a plain relative path that stays inside ``root`` (symlinks too)."""
    if not isinstance(rel, str):
        raise ArtifactError(f"manifest path {rel!r} is not a string")
    pp = PurePosixPath(rel)
    if not rel or not pp.parts or pp.is_absolute() or "\\" in rel or "\0" in rel \
            or any(part in ("..", "") for part in pp.parts) or rel.startswith("/") or ":" in pp.parts[0]:
        raise ArtifactError(f"manifest path {rel!r} is not a plain relative path inside {root}")
    p = root / Path(*pp.parts)
    try:
        real_root = root.resolve()
        real = p.resolve()
    except (OSError, RuntimeError, ValueError) as e:  # ValueError: a name the file system cannot encode
        raise ArtifactError(f"manifest path {rel!r}: cannot resolve: {e}") from None
    if real_root == real or real_root not in real.parents:
        raise ArtifactError(f"manifest path {rel!r} leads outside {root} (to {real})")
    return p


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    with open(fd, "rb") as f:  # O_NONBLOCK: a FIFO put in a file's place cannot hang the reader
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ArtifactError(f"{path}: not a regular file")
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(root: Path, *, producer: Mapping[str, Any], specs: Mapping[str, Mapping[str, Any]],
                   artifacts: list[Mapping[str, Any]], extra: Mapping[str, Any] | None = None) -> Path:
    doc = {
        "format": MANIFEST_FORMAT,
        "manifest_version": MANIFEST_VERSION,
        "producer": dict(producer),
        "specs": {k: dict(v) for k, v in sorted(specs.items())},
        "artifacts": sorted((dict(a) for a in artifacts), key=lambda a: a["path"]),
    }
    if extra:
        doc.update(extra)
    path = root / MANIFEST_NAME
    atomic_write(path, (json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n").encode())
    return path


def remove_manifest(root: Path) -> None:
    try:
        os.unlink(root / MANIFEST_NAME)
    except FileNotFoundError:
        pass


def spec_definition_problem(name: str, d: Any) -> str | None:
    """What is wrong with a spec definition as a manifest stores it (``Spec.definition()``), else ``None``:
    the matrix's own rules (:func:`aot.spec.definition_problem`), so a hostile manifest is refused here
    with one clear error instead of failing later in the loader."""
    from .spec import definition_problem
    if not isinstance(d, dict) or d.get("name") != name:
        return f"not an object named {name!r}"
    if "algorithm" not in d and not isinstance(d.get("source"), str):
        return "an NVRTC unit needs string 'source' and 'source_path'"
    return definition_problem(d)


def load_manifest(root: str | os.PathLike) -> Manifest:
    """Parse and structurally check ``root/manifest.json`` (not the artifacts: see :func:`verify_files`)."""
    root = Path(root)
    path = root / MANIFEST_NAME
    try:
        raw = _read_regular(path, MAX_MANIFEST_LEN)
    except OSError as e:
        raise ArtifactError(f"{path}: cannot read manifest: {e.strerror or e}") from None
    except ArtifactError as e:
        raise ArtifactError(f"{path}: cannot read manifest: {e}") from None
    try:
        doc = loads_strict_json(raw)
    except (ValueError, RecursionError) as e:
        raise ArtifactError(f"{path}: manifest is not valid JSON: {type(e).__name__}: "
                            f"{str(e)[:200]}") from None
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise ArtifactError(f"{path}: not an aot manifest")
    if doc.get("manifest_version") != MANIFEST_VERSION:
        raise ArtifactError(f"{path}: manifest version {doc.get('manifest_version')!r}, this aot reads "
                            f"{MANIFEST_VERSION}")
    producer, specs, artifacts = doc.get("producer"), doc.get("specs"), doc.get("artifacts")
    if not isinstance(producer, dict) or not isinstance(specs, dict) or not isinstance(artifacts, list):
        raise ArtifactError(f"{path}: manifest lacks producer/specs/artifacts")
    for name, d in specs.items():  # the loader rebuilds specs (and their content keys) from these
        problem = spec_definition_problem(name, d)
        if problem:
            raise ArtifactError(f"{path}: spec {name!r}: {problem}")
    for i, a in enumerate(artifacts):
        if not isinstance(a, dict):
            raise ArtifactError(f"{path}: artifact entry {i} is not an object")
        for key, typ in ENTRY_FIELDS.items():
            if isinstance(a.get(key), bool) or not isinstance(a.get(key), typ):
                raise ArtifactError(f"{path}: artifact entry {i} field {key!r} missing or not {typ.__name__}")
        if a["size"] < 0 or not is_sha256_hex(a["sha256"]):
            raise ArtifactError(f"{path}: artifact entry {i} ({a['path']!r}) has a bad size or sha256")
        safe_join(root, a["path"])
        if a["name"] not in specs:
            raise ArtifactError(f"{path}: artifact entry {i} names spec {a['name']!r} the manifest does not define")
    return Manifest(root=root, producer=producer, specs=specs, artifacts=tuple(artifacts))


def verify_files(m: Manifest) -> list[str]:
    """Every problem with the files a manifest names (missing, size, sha256); empty when all is well."""
    problems = []
    for a in m.artifacts:
        p = m.path_of(a)
        try:
            st = p.stat()
        except OSError:
            problems.append(f"{a['path']}: missing")
            continue
        if not stat.S_ISREG(st.st_mode):
            problems.append(f"{a['path']}: not a regular file")
        elif st.st_size != a["size"]:
            problems.append(f"{a['path']}: {st.st_size} bytes, manifest says {a['size']}")
        else:
            try:
                digest = file_sha256(p)
            except (OSError, ArtifactError) as e:
                problems.append(f"{a['path']}: cannot read: {getattr(e, 'strerror', None) or e}")
                continue
            if digest != a["sha256"]:
                problems.append(f"{a['path']}: sha256 differs from the manifest")
    return problems
