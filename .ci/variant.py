"""Turn the source tree's pyproject.toml into one CUDA major's distribution: cccl-aot-cu12 or cccl-aot-cu13.

The import name stays ``aot``; the distribution name says the CUDA major (as cupy-cuda12x and the
NVIDIA wheels do). The base dependencies stay the lean runtime (the cuda-core range without extras, so no
compiler, and no cuda-cccl: NVRTC artifacts need none) plus that major's cuda-bindings range; ``[jit]`` becomes
that major's toolkit (the ``cuXX`` extra without cuda-core's full toolkit and the build tools),
``[jit-nvrtc]`` that major's NVRTC and nvJitLink alone (the ``cuda-toolkit`` version of its ``cuXX`` extra);
``[cccl]`` (the exact cuda-cccl) is the same for both; the other major's extra is dropped (a cccl-aot-cu13
wheel never offers cu12 packages). Run by CI before cibuildwheel:

    python .ci/variant.py cu13 [PYPROJECT]
"""

import json
import re
import sys
from pathlib import Path

import tomllib

MAJORS = ("cu12", "cu13")
#: The distribution name ("aot" on PyPI is an unrelated project); the import package stays ``aot``.
DIST = "cccl-aot"
#: The runtime's cuda-bindings per major: ranges (cuda-cccl's and numba-cuda's own lower bounds for cu12/cu13;
#: cu13's lower bound is installed and loaded by the environment matrix, noxfile.py).
BINDINGS = {"cu12": "cuda-bindings>=12.9.1,<13", "cu13": "cuda-bindings>=13.0.0,<14"}
#: Entries of the cuXX extra that JIT does not need: cuda-core's extra pulls the whole toolkit; build tools.
NOT_JIT = ("cuda-core", "PyYAML", "rich", "packaging", "tomli", "numba-cuda", "numpy", "cupy-cuda")
#: The ``numba`` extra's numba-cuda, per major (the cu12 distribution must not pull CUDA 13's toolkit).
NUMBA = {"cu12": "numba-cuda[cu12]", "cu13": "numba-cuda[cu13]"}


def make_variant(text: str, variant: str) -> str:
    text, n = re.subn(rf'(?m)^name = "{DIST}"', f'name = "{DIST}-{variant}"', text)
    if n != 1:
        raise SystemExit(f"pyproject.toml: expected one line 'name = \"{DIST}\"'")
    text, n = re.subn(r'(?m)^(  "cuda-core[<>=!~][^"]*",\n)', rf'\1  "{BINDINGS[variant]}",\n', text, count=1)
    if n != 1:
        raise SystemExit("pyproject.toml: no cuda-core dependency line")
    extras = tomllib.loads(text)["project"]["optional-dependencies"]
    jit = [d for d in extras[variant] if not d.startswith(NOT_JIT)]
    text, n = re.subn(r"(?m)^jit = \[.*\]$", lambda _: f"jit = {json.dumps(jit)}", text)
    if n != 1:
        raise SystemExit("pyproject.toml: expected one 'jit = [...]' extra")
    toolkit = [d for d in extras[variant] if d.startswith("cuda-toolkit[")]
    if len(toolkit) != 1:
        raise SystemExit(f"pyproject.toml: expected one cuda-toolkit[...] entry in the '{variant}' extra")
    nvrtc = [f"cuda-toolkit[nvrtc,nvjitlink]=={toolkit[0].split('==', 1)[1]}"]
    text, n = re.subn(r"(?m)^jit-nvrtc = \[.*\]$", lambda _: f"jit-nvrtc = {json.dumps(nvrtc)}", text)
    if n != 1:
        raise SystemExit("pyproject.toml: expected one 'jit-nvrtc = [...]' extra")
    text = re.sub(r'(?m)^(numba = \[")numba-cuda\[cu1[23]\]', lambda m: m.group(1) + NUMBA[variant], text)
    text = re.sub(r'(?m)^(cupy = \[")cupy-cuda1[23]x', lambda m: m.group(1) + f"cupy-cuda{variant[2:]}x", text)
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
