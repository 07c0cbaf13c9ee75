"""The example's wheel served at CuPy's compile call on the driverless host (docs/cupy.md, "Which stacks one build
serves"): each recorded compile handed to ``cupy.cuda.compiler._compile_module_with_cache`` as CuPy hands it, the
device's architecture answered as sm_90, with an empty CuPy cache; NVRTC calls counted. CuPy stops at its
``Module.load`` (no driver here), after it was served or compiled. One JSON line:

    PYTHONPATH=<site with the wheel>:<repo> <venv>/bin/python .ci/cupy_served.py [MATRIX]

MATRIX: the recorded matrix whose compiles are handed over (default the example's, recorded under CuPy 14.2;
``examples/cupy-mypkg/recorded-cupy-13.6/build_matrix.yaml`` for CuPy 13.6, which generates other code).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import yaml


def main() -> None:
    cache = tempfile.mkdtemp(prefix="aot-cupy-served-")
    os.environ["CUPY_CACHE_DIR"] = cache
    import atexit
    import shutil
    atexit.register(shutil.rmtree, cache, True)
    import cupy
    from cupy._core import core
    from cupy.cuda import compiler, nvrtc
    compiler._get_arch = lambda: "90"
    compiler._get_arch_for_options_for_nvrtc = compiler._get_arch_for_options_for_nvrtc.__wrapped__
    compiled: list[str] = []
    for fn in ("_compile_using_nvrtc_no_warning", "compile_using_nvrtc"):
        real = getattr(compiler, fn, None)
        if real is not None:
            setattr(compiler, fn, lambda *a, _real=real, **k: compiled.append(a[3]) or _real(*a, **k))
    import cupy_mypkg  # noqa: F401 - its registry: aot's wrappers go on CuPy's compiler
    from aot.runtime.adapters.cupy_attach import host_paths, substitute
    import sys
    matrix = (Path(sys.argv[1]) if len(sys.argv) > 1
              else Path(__file__).resolve().parents[1] / "examples" / "cupy-mypkg" / "build_matrix.yaml")
    entries = yaml.safe_load(matrix.read_text())["cupy"]
    paths = host_paths()
    for e in entries:
        source = (matrix.parent / e["source"]).read_text()
        try:
            compiler._compile_module_with_cache(source, substitute(e["options"], paths),
                                                extra_source=core._get_header_source())
        except Exception:  # noqa: BLE001 - no driver: CuPy's Module.load is where it stops
            pass
    print(json.dumps({"cupy": cupy.__version__, "nvrtc": list(nvrtc.getVersion()), "entries": len(entries),
                      "compiled": len(compiled)}))


if __name__ == "__main__":
    main()
