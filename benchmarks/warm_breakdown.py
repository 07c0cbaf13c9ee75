"""Where a whole-matrix warmup's time goes, phase by phase, in one fresh process (run it on the GPU).

    python benchmarks/warm_breakdown.py ARTIFACT_DIR [--json FILE]

Serial on purpose (no warmup threads): the import of cuda.core + cuda.compute, the CUDA context,
reading/checking/deserializing every spec, and loading every kernel (aot.runtime.warm). Prints a table and
writes the numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("artifacts", type=Path)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    import numpy  # noqa: F401 - the benchmark's premise: numpy already imported
    from aot.runtime import warm as _warm
    from aot.runtime.registry import Registry
    reg = Registry(args.artifacts)
    t1 = time.perf_counter()
    import cuda.compute  # noqa: F401
    import cuda.core
    t2 = time.perf_counter()
    cuda.core.Device(0).set_current()
    t3 = time.perf_counter()
    load = kernels = 0.0
    for name in reg.names():
        a = time.perf_counter()
        loaded = reg._load(name)
        b = time.perf_counter()
        spec = reg.spec(name)
        if spec.family == "cccl":
            _warm.warm_cccl(loaded.obj)
        else:
            _warm.warm_nvrtc(loaded.obj, spec.kernels)  # type: ignore[union-attr]
        load, kernels = load + (b - a), kernels + (time.perf_counter() - b)
    total = time.perf_counter() - t0
    phases = {"import_cuda_ms": (t2 - t1) * 1e3, "context_ms": (t3 - t2) * 1e3, "load_ms": load * 1e3,
              "kernels_ms": kernels * 1e3, "total_ms": total * 1e3, "specs": len(reg.names())}
    for k, v in phases.items():
        print(f"{k:16} {v:9.1f}")
    if args.json:
        args.json.write_text(json.dumps(phases, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
