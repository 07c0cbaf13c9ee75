"""Regenerate ``aot/default_specs.json`` from ``build_matrix.yaml`` (the runtime reads the JSON, never the
YAML; see :mod:`aot.runtime.loader.default_specs`). Run after editing the matrix or a bundled kernel::

    python -m aot.build.defaults
"""

from __future__ import annotations

import json

from ..core.fs import atomic_write
from ..core.spec import Spec
from .builder import manifest_definitions
from ..runtime.loader.default_specs import PATH, VERSION
from .matrix import load_matrix


def render(specs: list[Spec]) -> str:
    """The file's text for ``specs`` (deterministic: sorted keys, one trailing newline)."""
    return json.dumps({"version": VERSION, "specs": manifest_definitions(specs)}, indent=1, sort_keys=True) + "\n"


def main() -> None:
    atomic_write(PATH, render(list(load_matrix().specs)).encode())


if __name__ == "__main__":
    main()
