"""One fresh process of .ci/gpu/triton_check.sh: examples/triton-mypkg's public calls (triton_mypkg/ops.py, torch
tensors, the kernels launched as the library launches them), each specialisation the matrix packages once, timed
from the call to its result (torch.cuda.synchronize), with what Triton compiled (its compilation listener: a cache
miss), a sha256 of each result's bytes, and the C modules (``cuda_utils``, ``__triton_launcher``) in Triton's cache
after the run (with an empty cache at the start: the ones Triton built with the host compiler in this process).

    python triton_check.py run OUT.json [assign] [unpackaged]   (TRITON_CACHE_DIR and PYTHONPATH set by the caller)
    python triton_check.py table JSON...                         (medians of the benchmark runs, one row per call)

``assign``: ``cfg.OFFSET`` is set to another value after the import (after aot's attach), before the first launch.
``unpackaged``: also ``add`` with BLOCK=512, which no artifact packages (Triton compiles it).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import sys
import time

#: The packaged specialisations (build_matrix.yaml) as calls (scale_tuned: the autotuner launches both configs).
CALLS = ["add.0", "add.1", "add.2", "add.3", "scale_shift", "softmax", "sum_rows", "scale_tuned"]


def run(out: str, flags: list[str]) -> None:
    t0 = time.perf_counter()
    import torch
    import triton
    import triton.language as tl
    from triton import knobs
    compiled: list[str] = []
    knobs.compilation.listener = lambda src, metadata, metadata_group, times, cache_hit: (
        None if cache_hit else compiled.append(src.fn.__name__))
    t_import = time.perf_counter()
    import triton_mypkg
    from triton_mypkg import cfg, ops
    t_attach = time.perf_counter()
    if "assign" in flags:
        cfg.OFFSET = tl.constexpr(0.75)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1 << 20, generator=g).cuda()
    y = torch.randn(1 << 20, generator=g).cuda()
    small_x, small_y = x[:1000].clone(), y[:1000].clone()
    h, k = x.half(), y.half()
    m = torch.randn(4096, 1024, generator=g).cuda()
    torch.cuda.synchronize()
    calls = {"add.0": lambda: ops.add(x, y), "add.1": lambda: ops.add(small_x, small_y),
             "add.2": lambda: ops.add(x, y, block=256), "add.3": lambda: ops.add(h, k),
             "scale_shift": lambda: ops.scale_shift(x), "softmax": lambda: ops.softmax(m),
             "sum_rows": lambda: ops.sum_rows(m), "scale_tuned": lambda: ops.scale_tuned(x)}
    if "unpackaged" in flags:
        calls["add.512"] = lambda: ops.add(x, y, block=512)
    rows = {}
    for name, call in calls.items():
        before = len(compiled)
        t = time.perf_counter()
        r = call()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t) * 1e3
        t2 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        rows[name] = {"ms": ms, "second_ms": (time.perf_counter() - t2) * 1e3, "compiled": compiled[before:],
                      "sha256": hashlib.sha256(r.cpu().numpy().tobytes()).hexdigest()}
    registry = getattr(triton_mypkg, "registry", None)
    import glob
    import os
    cache = os.environ.get("TRITON_CACHE_DIR") or ""  # with an empty cache at the start: built by this process
    built = sorted(os.path.basename(p) for p in glob.glob(os.path.join(cache, "*", "*.so"))) if cache else []
    json.dump({"rows": rows, "c_modules_in_cache": built, "import_triton_ms": (t_import - t0) * 1e3,
               "import_pkg_ms": (t_attach - t_import) * 1e3,
               "packaged": bool(registry and registry.names()), "triton": triton.__version__,
               "manager": getattr(knobs.cache.manager_class, "__name__", None)},
              open(out, "w"))


def table(paths: list[str]) -> None:
    by_mode: dict[str, list[dict]] = {}
    for p in paths:
        mode = p.rsplit("/", 1)[-1].split("-")[0]
        by_mode.setdefault(mode, []).append(json.load(open(p))["rows"])
    modes = [m for m in ("aot", "warm", "cold") if m in by_mode]
    print(f"first call, ms, median of {min(len(v) for v in by_mode.values())} fresh processes each")
    print("| call | " + " | ".join(modes) + " | aot/warm | aot/cold |")
    print("|---|" + "---:|" * (len(modes) + 2))
    tot = {m: 0.0 for m in modes}
    for c in CALLS:
        med = {m: statistics.median(r[c]["ms"] for r in by_mode[m]) for m in modes}
        for m in modes:
            tot[m] += med[m]
        ratio = [f"{med['aot'] / med[o]:.3f}" if "aot" in med and o in med else "-" for o in ("warm", "cold")]
        print(f"| {c} | " + " | ".join(f"{med[m]:.1f}" for m in modes) + " | " + " | ".join(ratio) + " |")
    ratio = [f"{tot['aot'] / tot[o]:.3f}" if "aot" in tot and o in tot else "-" for o in ("warm", "cold")]
    print(f"| all {len(CALLS)} | " + " | ".join(f"{tot[m]:.1f}" for m in modes) + " | " + " | ".join(ratio) + " |")


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3:])
    else:
        table(sys.argv[2:])
