"""An NVRTC unit that includes a header, served by source only where the caller's header is the build's (issue 46).

Builds one unit here (``scale``: ``#include "mylib/scale.h"``, the header defining FACTOR 2.0f), then asks
``aot.by_source`` for it with ``-I`` folders holding header A (the build's) and header B (FACTOR 3.0f): A must
be served packaged, B compiled here; each kernel's result must equal the library's own compile
(``cupy.RawKernel`` with the same ``-I``). Prints a table last; exit 1 on a failed row."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

SRC = '#include "mylib/scale.h"\nextern "C" __global__ void scale(float* x) { x[threadIdx.x] *= FACTOR; }\n'
HEADERS = {"A (the build's)": "#pragma once\n#define FACTOR 2.0f\n",
           "B (other text)": "#pragma once\n#define FACTOR 3.0f\n"}


def main() -> int:
    import cupy
    out = Path(os.environ.get("OUT", "/tmp/aot-gpu-out")) / "nvrtc-headers"
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="aot-nvrtc-headers-"))
    os.environ.setdefault("AOT_CACHE_DIR", str(work / "cache"))
    import aot
    from aot.build.builder import build
    from aot.build.isolated import expose_build_env_toolkit
    from aot.build.matrix import load_matrix
    expose_build_env_toolkit()
    sm = int(cupy.cuda.Device().compute_capability)
    proj = work / "proj"
    (proj / "include" / "mylib").mkdir(parents=True)
    (proj / "include" / "mylib" / "scale.h").write_text(HEADERS["A (the build's)"])
    (proj / "scale.cu").write_text(SRC)
    (proj / "m.yaml").write_text("version: 1\nnvrtc:\n"
                                 "  - {name: scale, source: scale.cu, include_dirs: [include], kernels: [scale]}\n")
    build(load_matrix(proj / "m.yaml").specs, [sm], proj / "out", jobs=1)
    lookup = aot.by_source("unused", registry=aot.Registry(proj / "out"))
    rows, ok = [], True
    for tag, text in HEADERS.items():
        folder = work / tag.split()[0]
        (folder / "mylib").mkdir(parents=True)
        (folder / "mylib" / "scale.h").write_text(text)
        opts = ["-I" + str(folder)]
        unit, where = lookup.source_of(SRC, ["scale"], opts)
        x = cupy.ones(32, dtype=cupy.float32)
        lookup.cupy_kernel(SRC, "scale", opts)((1,), (32,), (x,))
        y = cupy.ones(32, dtype=cupy.float32)
        cupy.RawKernel(SRC, "scale", options=tuple(opts))((1,), (32,), (y,))
        got, want = float(x[0]), float(y[0])
        expect = "packaged" if tag.startswith("A") else "compiled"
        passed = (where == "packaged") == (expect == "packaged") and got == want
        ok = ok and passed
        rows.append({"header": tag, "expected": expect, "served": where, "unit": unit, "aot": got, "own": want,
                     "ok": passed})
    (out / "rows.json").write_text(json.dumps(rows, indent=1))
    print(f"{'header':16} {'expected':9} {'served':9} {'aot':>5} {'own':>5}  ok")
    for r in rows:
        print(f"{r['header']:16} {r['expected']:9} {r['served']:9} {r['aot']:5} {r['own']:5}  "
              f"{'PASS' if r['ok'] else 'FAIL'}")
    import shutil
    shutil.rmtree(work, ignore_errors=True)
    print("nvrtc headers:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
