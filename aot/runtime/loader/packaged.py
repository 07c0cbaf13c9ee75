"""The checks a packaged artifact passes before anything loads it (:func:`check_packaged`), in a module of their own:
the Triton, numba and CuPy adapters serve inside a framework's launch and need these checks, not the loader's
driver, library and JIT modules (whose import is tens of milliseconds on a first launch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ...core import format as fmt
from ...core.errors import ArtifactError
from ...core.manifest import Manifest
from ...core.spec import Spec
from ...core.versions import check_producer


def check_packaged(manifest: Manifest | None, spec: Spec, entry: Mapping[str, Any], path: Path) -> fmt.Artifact:
    """Everything :func:`open_packaged` checks before it loads anything: the file (regular, bounded, size and
    sha256 as the manifest says), the header (against the entry and the payload), the content key (against
    the spec's definition) and the producer versions. No CUDA: a warmup runs this while cuda.compute
    imports. ArtifactError says why not."""
    if "pack" in entry:  # a packed store (aot.core.pack): lzma is imported only for a packed artifact
        from ...core.pack import read_member
        data = read_member(manifest, entry)
    else:
        data = fmt.read_file(path, expect_size=entry["size"])  # a regular file, bounded, never blocks
    import hashlib
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise ArtifactError("file differs from its manifest entry (size or sha256)")
    art = fmt.decode(data)
    h = art.header
    if (h["name"], h["family"], h["sm"], h["payload_kind"]) != \
            (spec.name, spec.family, entry["sm"], entry["payload_kind"]):
        raise ArtifactError("header does not match its manifest entry (name, family, SM or kind)")
    if h["content_key"] != entry["content_key"]:
        raise ArtifactError("content key differs from the manifest's")
    from ...core.spec import item_key
    if manifest is None:
        raise ArtifactError("no manifest: packaged artifacts are opened only through one")
    producer = manifest.producer_of(entry)
    if h["content_key"] != item_key(spec, entry["sm"], entry["payload_kind"], producer) and \
            h["content_key"] != item_key(spec, entry["sm"], entry["payload_kind"], producer, legacy=True):
        raise ArtifactError(f"built from another definition of {spec.name!r} (a stale artifact)")
    check_producer(h["producer"], h["family"])
    return art
