"""adopt-mypkg on the GPU (issue 28): its kernels through its unchanged launch path (the library's own
compile function, now ``aot.by_source``) and through ``cuda.core.Program(...).compile(cache=
aot.program_cache(...))``, checked against numpy, with every NVRTC compile counted.

NVRTC calls are counted where both paths reach NVRTC from Python: ``cuda.core._program.
_program_compile_uncached`` (cuda.core's own seam: every ``Program.compile`` that compiles, with or without
``cache=``) and ``cuda.bindings.nvrtc.nvrtcCompileProgram`` (raw bindings, the library's old path).

    python .ci/gpu/adopt_check.py packaged            every kernel, both paths: results == numpy, 0 NVRTC calls
    python .ci/gpu/adopt_check.py unpackaged TAG N    a source the wheel does not carry (TAG makes it unique):
                                                      expects N NVRTC calls (1 in a first process, 0 in the next)

Prints one JSON object (``ok`` among its fields); exits 1 when a check fails.
"""

from __future__ import annotations

import json
import sys

import numpy as np

CALLS = {"nvrtc": 0}


def count_nvrtc() -> None:
    import cuda.core._program as prog
    from cuda.bindings import nvrtc
    uncached, raw = prog._program_compile_uncached, nvrtc.nvrtcCompileProgram

    def counted_uncached(*a, **k):
        CALLS["nvrtc"] += 1
        return uncached(*a, **k)

    def counted_raw(*a, **k):
        CALLS["nvrtc"] += 1
        return raw(*a, **k)

    prog._program_compile_uncached = counted_uncached
    nvrtc.nvrtcCompileProgram = counted_raw


def packaged() -> dict:
    import aot
    from adopt_mypkg import kernels, ops
    ops.context()
    rng = np.random.default_rng(28)
    n = 100_003
    x32, y32 = rng.uniform(-1, 1, n).astype(np.float32), rng.uniform(-1, 1, n).astype(np.float32)
    x64 = rng.uniform(-10, 10, n)
    xi = rng.integers(-1000, 1000, n).astype(np.int32)
    pad = np.concatenate([xi, np.zeros(-n % 256, np.int32)]).reshape(-1, 256)
    results = {}
    for path in ("nvrtc", "core"):
        results[f"saxpy/{path}"] = bool(np.allclose(ops.saxpy(2.5, x32, y32, path), np.float32(2.5) * x32 + y32,
                                                    rtol=1e-6, atol=1e-6))
        results[f"scale_f32/{path}"] = bool(np.allclose(ops.scale(1.5, x32, path), x32 * np.float32(1.5), rtol=1e-6))
        results[f"scale_f64/{path}"] = bool(np.allclose(ops.scale(1.5, x64, path), x64 * 1.5, rtol=1e-14))
        results[f"block_sum/{path}"] = bool(np.array_equal(ops.block_sums(xi, path),
                                                           pad.sum(axis=1, dtype=np.int64)))
    lookup = aot.by_source("adopt_mypkg")
    served = {name: lookup.source_of(src, [k], kernels.OPTIONS)
              for name, src, k in (("saxpy", kernels.SAXPY, "saxpy"), ("block_sum", kernels.BLOCK_SUM, "block_sum"),
                                   ("scale_f32", kernels.scale_source("float32"), "scale"))}
    counts = aot.program_cache("adopt_mypkg").counts
    ok = all(results.values()) and CALLS["nvrtc"] == 0 and counts["packaged"] == 4 and counts["miss"] == 0 \
        and all(s == "packaged" for _, s in served.values())
    return {"ok": ok, "results": results, "nvrtc_calls": CALLS["nvrtc"], "program_cache": counts,
            "by_source": {k: list(v) for k, v in served.items()}}


def unpackaged(tag: str, expect: int) -> dict:
    """A source the wheel does not carry, through both paths: compiled once, then served from the user cache."""
    from adopt_mypkg import ops
    from adopt_mypkg._compile import compile_kernels
    from adopt_mypkg.core_path import kernel
    ops.context()
    src = f"// {tag}\n" + 'extern "C" __global__ void twice(float* x, int n) {' \
        " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }\n"
    compile_kernels(src, ["twice"])           # the library's own path: aot.by_source, a miss
    kernel(src, "twice")                      # cuda.core's path: the same key, so the same user-cache entry
    import aot
    from adopt_mypkg.kernels import OPTIONS  # the flags compile_kernels passes: the same lookup, no new compile
    where = aot.by_source("adopt_mypkg").source_of(src, ["twice"], OPTIONS)[1]
    want = "jit" if expect else "cache"
    return {"ok": CALLS["nvrtc"] == expect and where == want, "nvrtc_calls": CALLS["nvrtc"], "expected": expect,
            "served_from": where, "program_cache": aot.program_cache("adopt_mypkg").counts}


def main(argv: list[str]) -> int:
    count_nvrtc()
    out = packaged() if argv[0] == "packaged" else unpackaged(argv[1], int(argv[2]))
    print(json.dumps(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
