"""Warm means warm, on the GPU (issue 11, part 3): after ``request_warmup`` + ``ensure_warm`` every kernel
is in the device, so each spec's first call on 2^20 items costs about what its second does. Run on the
lent machine: ``AOT_GPU_ARTIFACTS=DIR pytest -m gpu tests/test_gpu_warm.py`` (default DIR: .gpu/default).
The numbers, in a table: ``python benchmarks/warm.py DIR``.
"""

from __future__ import annotations

import importlib.util
import statistics

import pytest

from aot.build.toolchain import native_sm
from conftest import GPU_ARTIFACTS, load_script

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(native_sm() is None, reason="needs a CUDA GPU and driver")]

ARTIFACTS = GPU_ARTIFACTS
#: Absolute slack per spec: a first call may carry a few hundred microseconds of one-time Python work
#: (cuda.compute's per-type caches, the temp-storage query's first pass) that no warmup can remove.
FLOOR_MS = 1.0


def bench():
    return load_script("warm_bench", "benchmarks/warm.py")


@pytest.fixture(scope="module")
def warm_run() -> dict:
    if not (ARTIFACTS / "manifest.json").exists():
        pytest.skip(f"no artifact set at {ARTIFACTS}")
    r = bench().child("warm", ARTIFACTS)
    assert "error" not in r, r
    return r


def test_request_warmup_returns_at_once(warm_run):
    print(f"request_warmup {warm_run['request_warmup_ms']:.2f} ms, whole matrix warm "
          f"{warm_run['ready_ms']:.0f} ms after import aot")
    assert warm_run["request_warmup_ms"] < 50, warm_run["request_warmup_ms"]
    assert warm_run["cuda_compute_imported_by_caller"] is False
    assert warm_run["cold"] == [], warm_run


def test_every_kernel_was_loaded(warm_run):
    from aot.runtime.loader.registry import Registry
    reg = Registry(ARTIFACTS)
    assert not warm_run["errors"], warm_run["errors"]
    for name, count in warm_run["kernels"].items():
        spec = reg.spec(name)
        if spec.family == "nvrtc":
            assert count == len(spec.kernels), (name, count)
        else:
            assert count is not None and count >= 1, (name, count)


def test_first_call_after_warmup_costs_about_the_second(warm_run):
    calls = warm_run["calls"]
    assert calls
    slow = {n: (round(a, 3), round(b, 3)) for n, (a, b) in calls.items() if a > 2 * b + FLOOR_MS}
    ratios = [a / b for a, b in calls.values() if b > 0]
    print("first/second ms:", {n: (round(a, 2), round(b, 2)) for n, (a, b) in calls.items()})
    assert not slow, f"first call > 2x second + {FLOOR_MS} ms: {slow}"
    assert statistics.median(ratios) <= 2.0, ratios


def test_first_result_with_a_warmup_in_flight():
    """An application's first operation right after ``request_warmup()`` of every spec (cupy imported, its
    input on the device, ``cccl("reduce_sum_f64")``, one reduce on 2^20 items): the caller's spec jumps the
    queue and the result equals numpy's (``benchmarks/warm_limit.py``'s child checks it). Timing is the
    benchmark's business; here only that it works beside a full warmup."""
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("needs cupy")
    mod = load_script("warm_limit", "benchmarks/warm_limit.py")
    if not (ARTIFACTS / "manifest.json").exists():
        pytest.skip(f"no artifact set at {ARTIFACTS}")
    r = mod.child(mod.FIRST, "first-new", str(ARTIFACTS), "{}", env={"AOT_BENCH_NAME": "reduce_sum_f64"})
    assert "error" not in r, r
    assert r["marks_ms"]["cccl_returned"] <= r["wall_ms"], r
