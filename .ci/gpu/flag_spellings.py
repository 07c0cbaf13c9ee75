"""Issue 37, item 1 on a GPU (branch lookup): flags passed to ``aot.by_source(...)`` as any iterable launch the
kernel built WITH them. The red team's run on the H100: an iterator of ``["-DN=2"]`` launched the unit built
without it, which wrote 7 (6 cases of 6).

    python .ci/gpu/flag_spellings.py prepare OUT   # here (no GPU): builds OUT/set for sm_90
    python .ci/gpu/flag_spellings.py check OUT     # on the GPU host: one table, last line JSON; exit 0 when all hold

The set: one source, two NVRTC units, ``n7`` (no flags: the source defaults N to 7) and ``n2`` (``-DN=2``), a
cubin and PTX each. ``check`` launches ``write_n`` through ``kernels()``, ``cufunctions()`` (cuLaunchKernel)
and, where CuPy is installed, ``cupy_kernel()``, once per flavour of the flag (list, tuple, itertools.chain,
generator, iter, map, reversed, bytes, a string, a ProgramOptions, a mapping with ("N", 2)), each on a fresh
lookup and then the list spelling again on the same lookup (the memo must not hold a wrong answer); and the
JIT fallback (a source the set lacks, compiled here) with an iterator. Every cell must read 2; a cell that
reads 7 is the bug.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

SRC = '#ifndef N\n#define N 7\n#endif\nextern "C" __global__ void write_n(int* out) { *out = N; }\n'
MATRIX = """version: 1
nvrtc:
  - {name: n7, source: k.cu, kernels: [write_n]}
  - {name: n2, source: k.cu, kernels: [write_n], options: ["-DN=2"]}
"""


def prepare(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "k.cu").write_text(SRC)
    (out / "build_matrix.yaml").write_text(MATRIX)
    r = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", "build_matrix.yaml", "--sm", "90",
                        "--jobs", "1", "--out", "set"], cwd=out, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def flavours() -> dict:
    """Fresh objects per call (iterators are single-use)."""
    from cuda.core import ProgramOptions
    return {
        "list": ["-DN=2"], "tuple": ("-DN=2",), "chain": itertools.chain(["-DN=2"]),
        "generator": (f for f in ["-DN=2"]), "iter": iter(["-DN=2"]), "map": map(str, ["-DN=2"]),
        "reversed": reversed(["-DN=2"]), "bytes": [b"-DN=2"], "text": "-DN=2",
        "ProgramOptions": ProgramOptions(arch="sm_90", define_macro="N=2"), "dict-pair": {"define_macro": ("N", 2)},
    }


def check(out: Path) -> int:
    import os
    os.environ.setdefault("AOT_CACHE_DIR", str(out / "cache"))  # the JIT rows: a fresh user cache per OUT
    import numpy as np
    from cuda.bindings import driver
    from cuda.core import Device, LaunchConfig, launch
    import aot
    from aot.verify.devarray import DeviceArray
    dev = Device()
    dev.set_current()
    try:
        import cupy
    except ImportError:
        cupy = None

    def run(path: str, lookup, src: str, name: str, opts) -> int:
        d = DeviceArray(1, np.int32, dev)  # poisoned: an unwritten cell reads -1515870811
        if path == "kernels":
            k = lookup.kernels(src, [name], opts)[name]
            launch(dev.default_stream, LaunchConfig(grid=1, block=1), k, d.buffer)
        elif path == "cufunctions":
            import ctypes
            f = lookup.cufunctions(src, [name], opts)[name]
            args = ((d.ptr,), (ctypes.c_void_p,))
            (err,) = driver.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, driver.CUstream(0), args, 0)
            assert int(err) == 0, err
        else:
            k = lookup.cupy_kernel(src, name, opts)
            buf = cupy.zeros(1, dtype=cupy.int32)
            k((1,), (1,), (buf,))
            return int(buf.get()[0])
        dev.sync()
        return int(d.to_host()[0])

    paths = ["kernels", "cufunctions"] + (["cupy_kernel"] if cupy is not None else [])
    table: dict = {}
    for path in paths:
        for flavour in flavours():
            lookup = aot.by_source("unused", registry=aot.Registry(out / "set"))
            first = run(path, lookup, SRC, "write_n", flavours()[flavour])
            again = run(path, lookup, SRC, "write_n", ["-DN=2"])
            served = lookup.source_of(SRC, ["write_n"], ["-DN=2"])[0]
            table[f"{path}/{flavour}"] = (first, again, served)
    jit_src = SRC.replace("write_n", "write_jit")
    for flavour in ("chain", "generator", "dict-pair"):
        lookup = aot.by_source("unused", registry=aot.Registry(out / "set"))
        got = run("kernels", lookup, jit_src, "write_jit", flavours()[flavour])
        table[f"jit/{flavour}"] = (got, got, lookup.source_of(jit_src, ["write_jit"], ["-DN=2"])[1])
    bad = {k: v for k, v in table.items() if v[0] != 2 or v[1] != 2 or v[2] not in ("n2", "jit", "cache")}
    print(f"{'path/flavour':28} first  list-again  served")
    for k, (first, again, served) in table.items():
        print(f"{k:28} {first:5}  {again:10}  {served}")
    print(json.dumps({"cases": len(table), "wrote_2": len(table) - len(bad), "bad": bad, "ok": not bad,
                      "device": dev.name}))
    return 0 if not bad else 1


if __name__ == "__main__":
    mode, where = sys.argv[1], Path(sys.argv[2]).resolve()
    if mode == "prepare":
        prepare(where)
        sys.exit(0)
    sys.exit(check(where))
