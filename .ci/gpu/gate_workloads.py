#!/usr/bin/env python3
"""The commands .ci/gpu/gate_all.sh runs under ``aot gate`` and ``AOT_NO_JIT=raise``: each example library's
own calls, on deterministic inputs, as its users make them (nothing here knows about aot but ``unpackaged``).

    python3 .ci/gpu/gate_workloads.py numba        numba-mypkg: every kernel at every packaged signature
    python3 .ci/gpu/gate_workloads.py adopt        adopt-mypkg: its NVRTC kernels, both compile paths
    python3 .ci/gpu/gate_workloads.py cccl         gate_cccl: its two cuda.compute algorithms on CuPy arrays
    python3 .ci/gpu/gate_workloads.py triton       triton-mypkg: every packaged specialisation (torch tensors)
    python3 .ci/gpu/gate_workloads.py unpackaged   numba-mypkg's axpy at int32 (not packaged: must compile)

(CuPy's is the example's own: ``python3 -m cupy_mypkg.workload float32 float64``.)
"""

from __future__ import annotations

import sys

import numpy as np

N = 100_003
TPB = 256


def numba() -> None:
    from numba import cuda

    import numba_mypkg  # noqa: F401 - attaches the packaged kernels
    from numba_mypkg import kernels as k
    rng = np.random.default_rng(41)
    blocks = (N + TPB - 1) // TPB
    for dt in (np.float32, np.float64):
        x, y = cuda.to_device(rng.uniform(-1, 1, N).astype(dt)), cuda.to_device(rng.uniform(-1, 1, N).astype(dt))
        out = cuda.device_array(N, dt)
        k.axpy[blocks, TPB](out, x, y, dt(2.5))
        print(dt.__name__, "axpy", float(out.copy_to_host().sum()))
    v = cuda.to_device(rng.uniform(-1, 1, N).astype(np.float32))
    k.scale_inplace[64, TPB](v, np.float32(1.5), N)
    x64, out64 = cuda.to_device(rng.uniform(-1, 2, N)), cuda.device_array(N, np.float64)
    k.smooth[blocks, TPB](out64, x64, 0.0, 1.0)
    xi, sums = cuda.to_device(rng.integers(-1000, 1000, N).astype(np.int64)), cuda.device_array(blocks, np.int64)
    k.block_sum[blocks, TPB](sums, xi)
    print("scale", float(v.copy_to_host().sum()), "smooth", float(out64.copy_to_host().sum()),
          "block_sum", int(sums.copy_to_host().sum()))


def adopt() -> None:
    from adopt_mypkg import ops
    ops.context()
    rng = np.random.default_rng(41)
    x32, y32 = rng.uniform(-1, 1, N).astype(np.float32), rng.uniform(-1, 1, N).astype(np.float32)
    x64, xi = rng.uniform(-10, 10, N), rng.integers(-1000, 1000, N).astype(np.int32)
    for path in ("nvrtc", "core"):
        print(path, float(ops.saxpy(2.5, x32, y32, path).sum()), float(ops.scale(1.5, x32, path).sum()),
              float(ops.scale(1.5, x64, path).sum()), int(ops.block_sums(xi, path).sum()))


def cccl() -> None:
    import cupy as cp

    from gate_cccl import registry
    rng = np.random.default_rng(41)

    def twice(call):  # cuda.compute's two phases: the temporary storage's size, then the work
        nbytes = call(None)
        call(cp.empty(max(int(nbytes or 1), 1), cp.uint8))

    xi = cp.asarray(rng.integers(-1000, 1000, N).astype(np.int64))
    total = cp.empty(1, cp.int64)
    reduce = registry.cccl("gate_sum_i64")
    twice(lambda t: reduce(temp_storage=t, d_in=xi, d_out=total, num_items=N, h_init=np.zeros(1, np.int64)))
    xf, run = cp.asarray(rng.standard_normal(N)), cp.empty(N, cp.float64)
    scan = registry.cccl("gate_cummax_f64")
    lowest = np.array([np.finfo(np.float64).min])  # the spec's init (min), passed as cuda.compute takes it
    twice(lambda t: scan(temp_storage=t, d_in=xf, d_out=run, init_value=lowest, num_items=N))
    print("sum", int(total.get()[0]), "cummax", float(run.get()[-1]))


def unpackaged() -> None:
    from numba import cuda

    import numba_mypkg  # noqa: F401
    from numba_mypkg import kernels as k
    a = cuda.to_device(np.arange(N, dtype=np.int32))
    out = cuda.device_array(N, np.int32)
    k.axpy[(N + TPB - 1) // TPB, TPB](out, a, a, np.int32(2))  # int32: no packaged signature, numba-cuda compiles
    print("unpackaged", int(out.copy_to_host()[-1]))


def triton() -> None:
    """triton-mypkg's public calls at each packaged specialisation; the autotuned kernel's configs launched one by
    one through its inner kernel (the autotuner picks a config by timing: two runs could launch different ones)."""
    import torch
    import triton as tr
    from triton_mypkg import kernels, ops
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(1 << 20, generator=g).cuda(), torch.randn(1 << 20, generator=g).cuda()
    m = torch.randn(4096, 1024, generator=g).cuda()
    outs = [ops.add(x, y), ops.add(x[:1000].clone(), y[:1000].clone()), ops.add(x, y, block=256),
            ops.add(x.half(), y.half()), ops.scale_shift(x), ops.softmax(m), ops.sum_rows(m)]
    n = x.numel()
    for c in kernels.scale_tuned.configs:
        out = torch.empty_like(x)
        kernels.scale_tuned.fn[(tr.cdiv(n, c.kwargs["BLOCK"]),)](x, out, n, num_warps=c.num_warps,
                                                                 num_stages=c.num_stages, **c.kwargs)
        outs.append(out)
    torch.cuda.synchronize()
    print("triton:", len(outs), "results", [float(o.float().sum()) for o in outs[:3]])


if __name__ == "__main__":
    {"numba": numba, "adopt": adopt, "cccl": cccl, "triton": triton, "unpackaged": unpackaged}[sys.argv[1]]()
