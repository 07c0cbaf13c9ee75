"""Turn the source tree's pyproject.toml into one CUDA major's distribution: aot-cu12 or aot-cu13.

The import name stays ``aot``; the distribution name says the CUDA major (as cupy-cuda12x and the
NVIDIA wheels do), and the base dependencies take that major's pinned cuda-cccl / cuda-core, so
``pip install aot-cu13`` pulls exactly the cuda-cccl its artifacts were built with. Run by CI before
cibuildwheel:  python .ci/variant.py cu13
"""

import re
import sys
from pathlib import Path

variant = sys.argv[1]
if variant not in ("cu12", "cu13"):
    sys.exit(f"usage: {sys.argv[0]} cu12|cu13")
path = Path(__file__).resolve().parent.parent / "pyproject.toml"
text = path.read_text()
text, n = re.subn(r'(?m)^name = "aot"$', f'name = "aot-{variant}"', text)
if n != 1:
    sys.exit("pyproject.toml: expected one line 'name = \"aot\"'")
for dist in ("cuda-cccl", "cuda-core"):
    text, n = re.subn(rf'"{dist}==', f'"{dist}[{variant}]==', text, count=1)
    if n != 1:
        sys.exit(f"pyproject.toml: no pinned {dist} dependency")
path.write_text(text)
print(f"pyproject.toml -> aot-{variant}")
