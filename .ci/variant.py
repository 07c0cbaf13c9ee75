"""Turn the source tree's pyproject.toml into one CUDA major's distribution: cccl-aot-cu12 or cccl-aot-cu13.

The import name stays ``aot``; the distribution name says the CUDA major (as cupy-cuda12x and the
NVIDIA wheels do); the base dependencies take that major's pinned cuda-cccl / cuda-core, so
``pip install cccl-aot-cu13`` pulls exactly the cuda-cccl its artifacts were built with; the other major's
extra is dropped (a cccl-aot-cu13 wheel never offers cu12 packages). Run by CI before cibuildwheel:

    python .ci/variant.py cu13 [PYPROJECT]
"""

import re
import sys
from pathlib import Path

MAJORS = ("cu12", "cu13")
#: The distribution name ("aot" on PyPI is an unrelated project); the import package stays ``aot``.
DIST = "cccl-aot"


def make_variant(text: str, variant: str) -> str:
    text, n = re.subn(rf'(?m)^name = "{DIST}"', f'name = "{DIST}-{variant}"', text)
    if n != 1:
        raise SystemExit(f"pyproject.toml: expected one line 'name = \"{DIST}\"'")
    for dist in ("cuda-cccl", "cuda-core"):
        text, n = re.subn(rf'"{dist}==', f'"{dist}[{variant}]==', text, count=1)
        if n != 1:
            raise SystemExit(f"pyproject.toml: no pinned {dist} dependency")
    for other in MAJORS:
        if other != variant:
            text, n = re.subn(rf"(?m)^{other} = \[.*\]\n", "", text)
            if n != 1:
                raise SystemExit(f"pyproject.toml: expected one '{other} = [...]' extra")
    return text


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or sys.argv[1] not in MAJORS:
        raise SystemExit(f"usage: {sys.argv[0]} cu12|cu13 [PYPROJECT]")
    path = Path(sys.argv[2]) if len(sys.argv) == 3 else Path(__file__).resolve().parent.parent / "pyproject.toml"
    path.write_text(make_variant(path.read_text(), sys.argv[1]))
    print(f"{path} -> {DIST}-{sys.argv[1]}")
