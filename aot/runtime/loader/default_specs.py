"""The bundled matrix's specs as JSON (``aot/default_specs.json``), so the runtime never parses YAML.

The default registry needs every default spec's definition (to rank packaged artifacts, recompute their
content keys and JIT what is missing). Parsing ``build_matrix.yaml`` for that would make PyYAML (and the
matrix validator) runtime dependencies; this file holds the same definitions in the manifest's format
(``spec.definition()``, NVRTC sources included), read with the strict JSON reader. A test keeps it equal
to the matrix; after editing ``build_matrix.yaml`` or a kernel, regenerate it:

    python -m aot.build.defaults
"""

from __future__ import annotations

from pathlib import Path

from ...core.errors import ArtifactError
from ...core.spec import Spec
from ...core.rules import spec_from_definition

PATH = Path(__file__).parents[2] / "default_specs.json"  # aot/, beside the package
VERSION = 1


def load(path: Path = PATH) -> list[Spec]:
    """The default specs (``[]`` when the file is missing: a registry then serves what its manifest has)."""
    from ...core.format import loads_strict_json, read_file
    if not path.exists():
        return []
    try:
        doc = loads_strict_json(read_file(path))
    except ArtifactError:
        raise
    except (ValueError, RecursionError) as e:
        raise ArtifactError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("specs"), dict):
        raise ArtifactError(f"{path}: not a version-{VERSION} default spec file")
    try:
        return [spec_from_definition(d) for d in doc["specs"].values()]
    except (KeyError, TypeError, ValueError) as e:
        raise ArtifactError(f"{path}: a spec definition is unusable ({e})") from None
