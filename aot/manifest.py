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
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Mapping

from ._fs import atomic_write
from .errors import ArtifactError

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
    pp = PurePosixPath(rel)
    if not rel or pp.is_absolute() or "\\" in rel or any(part in ("..", "") for part in pp.parts) \
            or rel.startswith("/") or ":" in pp.parts[0]:
        raise ArtifactError(f"manifest path {rel!r} is not a plain relative path inside {root}")
    p = root / Path(*pp.parts)
    try:
        real_root = root.resolve()
        real = p.resolve()
    except (OSError, RuntimeError) as e:
        raise ArtifactError(f"manifest path {rel!r}: cannot resolve: {e}") from None
    if real_root != real and real_root not in real.parents:
        raise ArtifactError(f"manifest path {rel!r} leads outside {root} (to {real})")
    return p


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
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
    atomic_write(path, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
    return path


def remove_manifest(root: Path) -> None:
    try:
        os.unlink(root / MANIFEST_NAME)
    except FileNotFoundError:
        pass


def load_manifest(root: str | os.PathLike) -> Manifest:
    """Parse and structurally check ``root/manifest.json`` (not the artifacts: see :func:`verify_files`)."""
    root = Path(root)
    path = root / MANIFEST_NAME
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_MANIFEST_LEN + 1)
    except OSError as e:
        raise ArtifactError(f"{path}: cannot read manifest: {e.strerror or e}") from None
    if len(raw) > MAX_MANIFEST_LEN:
        raise ArtifactError(f"{path}: manifest larger than {MAX_MANIFEST_LEN} bytes")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ArtifactError(f"{path}: manifest is not valid JSON: {type(e).__name__}") from None
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise ArtifactError(f"{path}: not an aot manifest")
    if doc.get("manifest_version") != MANIFEST_VERSION:
        raise ArtifactError(f"{path}: manifest version {doc.get('manifest_version')!r}, this aot reads "
                            f"{MANIFEST_VERSION}")
    producer, specs, artifacts = doc.get("producer"), doc.get("specs"), doc.get("artifacts")
    if not isinstance(producer, dict) or not isinstance(specs, dict) or not isinstance(artifacts, list):
        raise ArtifactError(f"{path}: manifest lacks producer/specs/artifacts")
    for i, a in enumerate(artifacts):
        if not isinstance(a, dict):
            raise ArtifactError(f"{path}: artifact entry {i} is not an object")
        for key, typ in ENTRY_FIELDS.items():
            if isinstance(a.get(key), bool) or not isinstance(a.get(key), typ):
                raise ArtifactError(f"{path}: artifact entry {i} field {key!r} missing or not {typ.__name__}")
        safe_join(root, a["path"])
        if a["name"] not in specs or not isinstance(specs[a["name"]], dict):
            raise ArtifactError(f"{path}: artifact entry {i} names spec {a['name']!r} the manifest does not define")
    return Manifest(root=root, producer=producer, specs=specs, artifacts=tuple(artifacts))


def verify_files(m: Manifest) -> list[str]:
    """Every problem with the files a manifest names (missing, size, sha256); empty when all is well."""
    problems = []
    for a in m.artifacts:
        p = m.path_of(a)
        try:
            size = p.stat().st_size
        except OSError:
            problems.append(f"{a['path']}: missing")
            continue
        if size != a["size"]:
            problems.append(f"{a['path']}: {size} bytes, manifest says {a['size']}")
        elif file_sha256(p) != a["sha256"]:
            problems.append(f"{a['path']}: sha256 differs from the manifest")
    return problems
