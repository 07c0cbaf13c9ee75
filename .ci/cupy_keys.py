"""aot's CuPy keys of examples/cupy-mypkg's 23 recorded compiles under this environment's CuPy, NVRTC and CUDA
headers, built on the driverless host (docs/cupy.md, "Which stacks one build serves"). One JSON line:

    PYTHONPATH=<repo> <venv>/bin/python .ci/cupy_keys.py [MATRIX]

``keys``: entry -> aot's key (what a user's CuPy call is found by); ``cubins``: entry -> sha256 of the cubin
this NVRTC makes (another NVRTC: other bytes, the same key where the input is the same).
"""

from __future__ import annotations

import hashlib
import json
import sys
from importlib import metadata
from pathlib import Path

import yaml

from aot.build.cupy_build import compile_cupy_item, parse_cupy


def main() -> None:
    matrix = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[1] / "examples" / "cupy-mypkg"
                  / "build_matrix.yaml")
    doc = yaml.safe_load(matrix.read_text())
    from cupy.cuda import nvrtc
    keys, cubins = {}, {}
    for e in doc["cupy"]:
        spec = parse_cupy(e, e["name"], matrix.parent)
        payload, extra = compile_cupy_item(spec, 90)
        keys[e["name"]], cubins[e["name"]] = extra["cupy_key"], hashlib.sha256(payload).hexdigest()
    dists = {d: metadata.version(d) for d in ("cupy-cuda13x", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime",
                                              "nvidia-cuda-crt") if _has(d)}
    print(json.dumps({"dists": dists, "nvrtc": list(nvrtc.getVersion()), "keys": keys, "cubins": cubins}))


def _has(dist: str) -> bool:
    try:
        metadata.version(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


if __name__ == "__main__":
    main()
