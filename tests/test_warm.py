"""Warm means warm (issue 11, part 3), on the CPU: ``request_warmup`` returns at once and leaves every
CUDA import to its threads; warmup loads every kernel (through a fake driver that hands out sentinel
handles, so the CUlibrary read from cuda-cccl's build results is checked for real); a handle it cannot
reach costs a status note, never the spec. The GPU side: tests/test_gpu_warm.py.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aot.runtime import warm as _warm
from tests.conftest import GPU_ARTIFACTS, ROOT, SMALL_CCCL, SMALL_NVRTC, repo_env

#: Tags in the top bytes of the fake driver's handles (tests/fake_libcuda.c).
LIB_TAG, KRN_TAG = 0x4C4942, 0x4B524E
FAKE_KERNELS_PER_LIBRARY = 2

SLOW_IMPORT = textwrap.dedent("""
    import json, sys, threading, time, warnings
    warnings.simplefilter("ignore")
    import numpy
    import aot.runtime.registry as L, aot.runtime.sources as S, aot.runtime.warmup as W
    seen = []
    def slow_import():                        # cuda.compute takes 180-270 ms to import on the GPU machines
        seen.append(threading.current_thread().name)
        time.sleep(0.3)
        raise RuntimeError("no driver on this host")
    def no_jit(*a):
        raise RuntimeError("no JIT in this test")
    S.import_cuda_compute = W.import_cuda_compute = L.import_cuda_compute = slow_import
    S.require_jit = no_jit
    reg = L.Registry(sys.argv[1], device_sm=90)
    names = sys.argv[2].split(",")
    t = time.perf_counter()
    reg.request_warmup(names)
    ms = (time.perf_counter() - t) * 1e3
    after = {m: m in sys.modules for m in ("cuda.compute", "cuda.core", "cuda.bindings")}
    cold = reg.ensure_warm(timeout=60)
    print(json.dumps({"ms": ms, "after": after, "seen": seen, "cold": cold,
                      "errors": {n: s.errors for n, s in reg.status().items()}}))
""")

DEFAULT = textwrap.dedent("""
    import json, sys, time, warnings
    warnings.simplefilter("ignore")
    import numpy
    t = time.perf_counter()
    import aot
    aot.request_warmup(sys.argv[1].split(",") if len(sys.argv) > 1 else None)
    ms = (time.perf_counter() - t) * 1e3
    after = {m: m in sys.modules for m in ("cuda.compute", "cuda.core", "cuda.bindings")}
    try:
        cold, error = aot.ensure_warm(timeout=60), None
    except Exception as e:
        cold, error = None, f"{type(e).__name__}: {e}"
    print(json.dumps({"ms": ms, "after": after, "cold": cold, "error": error}))
""")

FAKE = textwrap.dedent("""
    import ctypes, json, os, sys, warnings
    warnings.simplefilter("ignore")
    fake = ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL)   # the "driver", before anything CUDA
    from aot.runtime import warm as _warm
    if sys.argv[3] == "other-cccl":
        _warm._cccl_version = lambda: "0.0.1"
    from aot.runtime.registry import Registry
    reg = Registry(sys.argv[2], device_sm=90)
    reg.request_warmup()
    cold = reg.ensure_warm(timeout=120)
    handles = {}
    for n in reg.names():
        if reg.spec(n).family == "cccl":
            try:
                handles[n] = _warm.cccl_library_handle(_warm.build_result_of(reg._loaded[n].obj))
            except _warm.KernelsNotLoaded as e:
                handles[n] = str(e)
    print(json.dumps({"cold": cold, "calls": list((ctypes.c_ulong * 8).in_dll(fake, "fake_calls")),
                      "kernels": {n: s.kernels for n, s in reg.status().items()},
                      "errors": {n: s.errors for n, s in reg.status().items()},
                      "families": {n: reg.spec(n).family for n in reg.names()},
                      "nvrtc_kernels": {n: len(reg.spec(n).kernels) for n in reg.names()
                                        if reg.spec(n).family == "nvrtc"},
                      "handles": handles, "caller_device": _warm.caller_device()}))
""")


def run_child(code: str, *args: str, timeout: int = 180) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=repo_env(), cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the fake driver")
    out = tmp_path_factory.mktemp("fake-driver") / "libcuda.so.1"
    subprocess.run([cc, "-O1", "-shared", "-fPIC", "-fvisibility=hidden", "-Wl,-soname,libcuda.so.1", "-o",
                    str(out), str(ROOT / "tests" / "fake_libcuda.c"), "-ldl"], check=True, capture_output=True)
    return out


def test_request_warmup_returns_at_once_and_imports_in_the_background(small_build):
    """With cuda.compute's import made slow (0.3 s), request_warmup still returns within milliseconds,
    and neither cuda.compute nor cuda.core/cuda.bindings is imported in the caller's thread."""
    names = ",".join(SMALL_CCCL)
    r = run_child(SLOW_IMPORT, small_build.out, names)
    print(f"request_warmup: {r['ms']:.2f} ms (2 specs, device_sm forced, import patched slow)")
    assert r["ms"] < 50, r  # the target is 5 ms; 50 keeps a loaded CI machine from failing it
    assert r["after"] == {"cuda.compute": False, "cuda.core": False, "cuda.bindings": False}, r
    assert r["seen"] and all(t.startswith("aot-warmup") for t in r["seen"]), r["seen"]
    assert r["cold"] == sorted(SMALL_CCCL), r
    for n in SMALL_CCCL:
        assert any("no driver on this host" in e for e in r["errors"][n]), r["errors"][n]


def test_default_request_warmup_builds_the_registry_in_the_background():
    """``aot.request_warmup()`` (the default registry) returns within milliseconds too: reading the
    manifest and the specs happens in a thread. Here there is no device: ensure_warm reports every spec
    cold; an unknown name is raised by ensure_warm."""
    r = run_child(DEFAULT)
    print(f"aot.request_warmup() after import aot: {r['ms']:.2f} ms")
    assert r["ms"] < 50, r
    assert r["after"]["cuda.compute"] is False and r["after"]["cuda.core"] is False, r
    assert r["error"] is None and set(SMALL_CCCL + SMALL_NVRTC) <= set(r["cold"]), r
    r = run_child(DEFAULT, "reduce_sum_i32,no_such_spec")
    assert r["error"] is not None and "AotError" in r["error"] and "no_such_spec" in r["error"], r


def layout_sets(small_build) -> list[Path]:
    """The session build, and the whole default matrix where one was built (``AOT_GPU_ARTIFACTS`` or
    ``.gpu/default``, as the GPU tests): every algorithm's build-result layout gets checked there."""
    sets = [small_build.out]
    if (GPU_ARTIFACTS / "manifest.json").is_file():
        sets.append(GPU_ARTIFACTS)
    return sets


def test_warmup_loads_every_kernel_through_a_fake_driver(small_build, fake_libcuda):
    """Real artifacts, real cuda.compute, a fake driver: warmup reads each CUlibrary from cuda-cccl's
    build result (the fake's sentinel, so the offset is right), enumerates its kernels and calls
    cuKernelGetFunction on each; NVRTC units get cuKernelGetFunction per kernel."""
    for root in layout_sets(small_build):
        r = run_child(FAKE, fake_libcuda, root, "verified")
        cccl = sorted(n for n, f in r["families"].items() if f == "cccl")
        assert r["cold"] == [], r
        assert not any(r["errors"].values()), r["errors"]
        for n in cccl:
            handle = r["handles"][n]
            assert isinstance(handle, int) and handle >> 40 == LIB_TAG, (root, n, handle)
            assert r["kernels"][n] == FAKE_KERNELS_PER_LIBRARY, (n, r["kernels"])
        for n, count in r["nvrtc_kernels"].items():
            assert r["kernels"][n] == count, (n, r["kernels"])
        calls = r["calls"]
        assert calls[3] == len(cccl), calls  # one cuLibraryEnumerateKernels per CCCL spec
        assert calls[4] >= FAKE_KERNELS_PER_LIBRARY * len(cccl) + sum(r["nvrtc_kernels"].values()), calls
        assert r["caller_device"] == 0  # the driver is loaded and a context current: its device


def test_unreachable_handle_costs_a_note_not_the_spec(small_build, fake_libcuda):
    """On a cuda-cccl whose layout was not checked, warmup does not touch the struct: the specs are still
    warm (loaded, library loaded), kernels load at the first call, and status says why."""
    r = run_child(FAKE, fake_libcuda, small_build.out, "other-cccl")
    assert r["cold"] == [], r
    for n in SMALL_CCCL:
        assert r["kernels"][n] is None, r["kernels"]
        assert any("kernels not preloaded" in e and "0.0.1" in e for e in r["errors"][n]), r["errors"][n]
    assert r["calls"][3] == 0, r["calls"]  # never enumerated a library it could not vouch for
    for n in SMALL_NVRTC:
        assert r["kernels"][n] == r["nvrtc_kernels"][n], r["kernels"]


class DeviceFakeBuildResult:
    """Looks like a cuda.compute build result from Python, but its memory holds no C struct."""
    __slots__ = ("_loaded", "a", "b", "c", "d", "e")
    __module__ = "fake._bindings_impl"

    def __init__(self, loaded: bool = True):
        self._loaded = loaded

    def _get_cubin(self) -> bytes:
        return b"x" * 12345


@pytest.mark.parametrize("obj, version, reason", [
    (object(), "1.2.1", "is not a cuda.compute build result"),
    (DeviceFakeBuildResult(), "1.2.1", "layout check failed"),
    (DeviceFakeBuildResult(loaded=False), "1.2.1", "is not loaded"),
    (DeviceFakeBuildResult(), "1.3.0", "not 1.3.0"),
])
def test_library_handle_refuses_what_it_cannot_vouch_for(monkeypatch, obj, version, reason):
    monkeypatch.setattr(_warm, "_cccl_version", lambda: version)
    with pytest.raises(_warm.KernelsNotLoaded, match=reason):
        _warm.cccl_library_handle(obj)


def test_build_result_of_an_unknown_object():
    with pytest.raises(_warm.KernelsNotLoaded, match="no build_results"):
        _warm.build_result_of(object())


def test_caller_device_without_a_context():
    """No context current in this thread (here: no driver at all): None, the warmup's default device."""
    assert _warm.caller_device() is None


def test_warm_benchmark_summary_and_table():
    spec = importlib.util.spec_from_file_location("warm_bench", ROOT / "benchmarks" / "warm.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    run = {"mode": "warm", "import_aot_ms": 1.0, "request_warmup_ms": 0.2, "cold": [], "ready_ms": 250.0,
           "kernels": {"a": 3, "b": 1}, "cuda_compute_imported_by_caller": False,
           "calls": {"a": [0.9, 0.5], "b": [3.0, 1.0]}}
    s = bench.summarize([run, {"mode": "nowarm", "import_aot_ms": 1.0, "calls": {"a": [9.0, 0.5]}},
                         {"mode": "nowarm", "error": "boom"}])
    assert s["warm"]["within_2x"] == 1 and s["warm"]["specs"]["b"]["ratio"] == 3.0
    assert s["nowarm"]["runs"] == 1 and s["nowarm"]["specs"]["a"]["ratio"] == 18.0
    text = bench.table(s)
    assert "1 of 2 specs" in text and "250 ms" in text and "18.00" in text
