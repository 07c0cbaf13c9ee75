"""Issue 37 (3): the loader serves the running library's text, never a cubin of a stale one (GPU).

A package whose ``__init__`` sets what its kernel module reads (``config.VALUE = 256``), and imports a
dependency the build environment lacks, so the build reads ``livelib/kernels.py`` with bare parents and
cannot compare: the packaged cubin writes 128. At run time the library is imported as its users do (the
``__init__`` runs, ``VALUE`` is 256); ``Registry.kernel`` must warn once and launch a kernel that writes 256.
Before issue 37 it served the packaged cubin: 128.

    python .ci/gpu/live_text.py   # prints: packaged '128', live 256, served 256, warnings 1, served from jit, OK

Needs aot, cuda.core and a GPU; builds with ``python -m aot build`` (NVRTC only) into a temporary folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path


def main() -> int:
    root = Path(tempfile.mkdtemp(prefix="aot-live-text-", dir=os.environ["AOT_CACHE_DIR"]))
    pkg, dep = root / "proj" / "livelib", root / "runtime_only"
    pkg.mkdir(parents=True)
    dep.mkdir()
    (dep / "livelib_runtime_dep.py").write_text("")  # on sys.path at run time only
    (pkg / "__init__.py").write_text("import livelib_runtime_dep\nfrom . import config\nconfig.VALUE = 256\n")
    (pkg / "config.py").write_text("VALUE = 128\n")
    (pkg / "kernels.py").write_text(
        "from . import config\n"
        "SRC = f'extern \"C\" __global__ void k(int* x) {{ x[0] = {config.VALUE}; }}\\n'\n")
    (root / "proj" / "build_matrix.yaml").write_text(
        'version: 1\nnvrtc:\n  - {name: k, source: "livelib.kernels:SRC", kernels: [k]}\n')
    out = root / "out"
    r = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(root / "proj" / "build_matrix.yaml"),
                        "--sm", "native", "--out", str(out), "-q"], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout + r.stderr)
        return 1
    import json
    manifest = json.loads((out / "manifest.json").read_text())
    packaged = manifest["specs"]["k"]["source"]

    sys.path[:0] = [str(root / "proj"), str(dep)]
    import livelib.kernels  # the library as its users import it: the __init__ runs
    from cuda.core import Device, LaunchConfig, launch

    import aot
    from aot.verify.devarray import DeviceArray
    import numpy as np
    dev = Device()
    dev.set_current()
    reg = aot.Registry(str(out))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        k = reg.kernel("k", "k")
    x = DeviceArray.from_host(np.zeros(1, np.int32), dev)
    launch(dev.default_stream, LaunchConfig(grid=1, block=1), k, x.buffer)
    dev.sync()
    served = int(x.to_host()[0])
    ours = [w for w in seen if "is not the text its artifacts were built from" in str(w.message)]
    live = "256" if "= 256" in livelib.kernels.SRC else "?"
    source = reg.status()["k"].source
    ok = served == 256 and len(ours) == 1 and source != "packaged"
    print(f"packaged {'128' if '= 128' in packaged else packaged[:40]!r}, live {live}, served {served}, "
          f"warnings {len(ours)}, served from {source}, {'OK' if ok else 'FAILED'}")
    for w in ours:
        print(f"  {w.message}")
    return 0 if ok else 1


if __name__ == "__main__":
    import shutil
    cache = os.environ["AOT_CACHE_DIR"] = tempfile.mkdtemp(prefix="aot-live-cache-")  # a new user's cache
    try:
        rc = main()
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    sys.exit(rc)
