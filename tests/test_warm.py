"""Warm means warm (issue 11, part 3), on the CPU: ``request_warmup`` returns at once and leaves every
CUDA import to its threads; warmup loads every kernel (through a fake driver that hands out sentinel
handles, so the CUlibrary read from cuda-cccl's build results is checked for real); a handle it cannot
reach costs a status note, never the spec. The GPU side: tests/test_gpu_warm.py.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aot.runtime.warmup import warm as _warm
from tests.conftest import GPU_ARTIFACTS, ROOT, SMALL_CCCL, SMALL_NVRTC, load_script, repo_env

#: Tags in the top bytes of the fake driver's handles (tests/fake_libcuda.c).
LIB_TAG, KRN_TAG = 0x4C4942, 0x4B524E
FAKE_KERNELS_PER_LIBRARY = 2

SLOW_IMPORT = textwrap.dedent("""
    import json, sys, threading, time, warnings
    warnings.simplefilter("ignore")
    import numpy
    import aot.runtime.loader.registry as L, aot.runtime.loader.sources as S, aot.runtime.warmup.warmup as W
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
    from aot.runtime.warmup import warm as _warm
    if sys.argv[3] == "other-cccl":
        _warm._cccl_version = lambda: "0.0.1"
    from aot.runtime.loader.registry import Registry
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


def run_child(code: str, *args: str, timeout: int = 180, env: dict | None = None) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env or repo_env(), cwd=ROOT, check=False)
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
    bench = load_script("warm_bench", "benchmarks/warm.py")
    run = {"mode": "warm", "import_aot_ms": 1.0, "request_warmup_ms": 0.2, "cold": [], "ready_ms": 250.0,
           "kernels": {"a": 3, "b": 1}, "cuda_compute_imported_by_caller": False,
           "calls": {"a": [0.9, 0.5], "b": [3.0, 1.0]}}
    s = bench.summarize([run, {"mode": "nowarm", "import_aot_ms": 1.0, "calls": {"a": [9.0, 0.5]}},
                         {"mode": "nowarm", "error": "boom"}])
    assert s["warm"]["within_2x"] == 1 and s["warm"]["specs"]["b"]["ratio"] == 3.0
    assert s["nowarm"]["runs"] == 1 and s["nowarm"]["specs"]["a"]["ratio"] == 18.0
    text = bench.table(s)
    assert "1 of 2 specs" in text and "250 ms" in text and "18.00" in text


# ----------------------------------------------------------------- issue 17: nothing heavy in the caller's thread
BLOCKING = textwrap.dedent("""
    import json, os, sys, time, warnings
    warnings.simplefilter("ignore")
    import numpy
    mode, root = sys.argv[1], sys.argv[2]
    sys.setswitchinterval(5.0)  # aot's threads wait for the GIL until this thread blocks: sys.modules is the caller's
    before = set(sys.modules)
    t0, c0 = time.perf_counter(), time.thread_time()
    if mode == "registry":
        import aot
        aot.Registry(root).request_warmup()
    elif mode == "default":
        import aot
        aot.request_warmup()
    else:  # a package that ships artifacts: its __init__ times import aot, from_package(__name__), request_warmup
        sys.path.insert(0, root)
        import warm_pkg
        t0, c0 = warm_pkg.t0, warm_pkg.c0
    cpu, wall = (time.thread_time() - c0) * 1e3, (time.perf_counter() - t0) * 1e3
    new = sorted(set(sys.modules) - before)
    import threading
    main = threading.main_thread() is threading.current_thread()
    time.sleep(0.05)  # let aot's threads start (and import what they import)
    main = main and threading.main_thread() is threading.current_thread()
    print(json.dumps({"cpu": cpu, "wall": wall, "new": new, "main": main}))
    sys.stdout.flush()
    os._exit(0)
""")

#: What the caller's thread must not import: the manifest reader and its stdlib, logging, CUDA.
HEAVY = ("pathlib", "json", "hashlib", "dataclasses", "logging", "importlib.metadata", "importlib.resources",
         "concurrent.futures", "tempfile", "subprocess", "queue", "cuda", "aot.core.manifest", "aot.core.format",
         "aot.core.spec", "aot.runtime.loader.catalog", "aot.runtime.loader.sources", "aot.runtime.warmup.warmup", "aot.runtime.loader.lean")

WARM_PKG = """import time
t0, c0 = time.perf_counter(), time.thread_time()
import aot
registry = aot.Registry.from_package(__name__)
registry.request_warmup()
"""


@pytest.mark.parametrize("mode", ["registry", "default", "package"])
def test_request_warmup_blocks_the_caller_for_milliseconds(small_build, tmp_path, mode):
    """``import aot`` + ``Registry(dir)`` (or ``from_package`` in a package's ``__init__``) + ``request_warmup()``,
    or ``aot.request_warmup()``, in fresh processes with compiled bytecode (as installed): the calling
    thread spends at most 10 ms of CPU (median of 5; about 3.5 ms on this 2-core host when it is not
    loaded, 90-165 ms before issue 17; the GPU host's target is 5 ms of wall time, measured by
    benchmarks/warm_breakdown.py) and imports nothing heavy: the manifest is read, the names checked and
    CUDA imported in aot's threads. ``threading`` is imported by the caller (the thread that first imports
    it becomes its ``main_thread()``)."""
    pkg = tmp_path / "pkgs" / "warm_pkg"
    pkg.mkdir(parents=True)
    (pkg / "artifacts").symlink_to(small_build.out, target_is_directory=True)
    (pkg / "__init__.py").write_text(WARM_PKG)
    root = str(tmp_path / "pkgs") if mode == "package" else str(small_build.out)
    env = repo_env(PYTHONPYCACHEPREFIX=str(tmp_path / "pyc"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    runs = [run_child(BLOCKING, mode, root, env=env) for _ in range(6)][1:]  # the first writes the bytecode
    cpu = statistics.median(r["cpu"] for r in runs)
    print(f"{mode}: caller CPU {cpu:.2f} ms (median of 5; {[round(r['cpu'], 2) for r in runs]}), wall "
          f"{[round(r['wall'], 2) for r in runs]} ms")
    assert cpu <= 10, runs
    for r in runs:
        heavy = [m for m in r["new"] if m.startswith(HEAVY)]
        assert heavy == [] and r["main"], (heavy, r["main"])


FAKE_OPEN = textwrap.dedent("""
    import ctypes, json, os, sys, warnings
    warnings.simplefilter("ignore")
    fake = ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL)   # the "driver", before anything CUDA
    import aot
    from aot.runtime.loader.threads import TIMELINE
    reg = aot.Registry(sys.argv[2])          # no device_sm: the warmup's device thread publishes the SM
    reg.request_warmup()
    cold = reg.ensure_warm(timeout=120)
    print(json.dumps({"cold": cold, "sm": reg.device_sm(), "device": reg._device.id,
                      "stages": sorted(TIMELINE), "prechecked_left": len(reg._prechecked),
                      "kernels": {n: s.kernels for n, s in reg.status().items()},
                      "errors": {n: s.errors for n, s in reg.status().items() if s.errors},
                      "calls": list((ctypes.c_ulong * 8).in_dll(fake, "fake_calls"))}))
""")


def test_warmup_opens_the_device_through_the_driver_and_prechecks(small_build, fake_libcuda):
    """No ``device_sm``, no context in the caller: the warmup's own thread initialises the driver (ctypes),
    publishes device 0's SM (the fake's sm_90) before making its primary context current in the workers;
    every artifact was read and checked ahead of its load (none left over); every kernel loaded.
    (cuda.core's ``Device()`` would abort the process with this fake driver: it is never asked.)"""
    r = run_child(FAKE_OPEN, fake_libcuda, small_build.out)
    assert r["cold"] == [] and r["errors"] == {}, r
    assert r["sm"] == 90 and r["device"] == 0, r
    assert {"warmup_started", "device_sm_known", "context_ready", "names_checked", "prechecked",
            "cuda_core_imported", "cuda_compute_imported", "first_task", "last_task_done"} <= set(r["stages"]), r
    assert r["prechecked_left"] == 0, r
    for n in SMALL_CCCL:
        assert r["kernels"][n] == FAKE_KERNELS_PER_LIBRARY, r["kernels"]


EXIT_EARLY = textwrap.dedent("""
    import ctypes, os, sys, time, warnings
    warnings.simplefilter("ignore")
    ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    import aot
    aot.Registry(sys.argv[2]).request_warmup()
    time.sleep(float(sys.argv[3]))           # then exit with the warmup wherever it is
    print("bye")
""")


@pytest.mark.parametrize("delay", [0.0, 0.3, 0.6])
def test_exit_during_warmup_is_clean(small_build, fake_libcuda, delay):
    """A process may end while its warmup runs: it exits at once, cleanly (no hang, no crash)."""
    proc = subprocess.run([sys.executable, "-c", EXIT_EARLY, str(fake_libcuda), str(small_build.out), str(delay)],
                          capture_output=True, text=True, timeout=60, env=repo_env(), cwd=ROOT, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "bye", proc.stderr[-2000:]


def test_warm_breakdown_summary_and_table():
    bench = load_script("warm_breakdown", "benchmarks/warm_breakdown.py")
    floors = [{"floor_ms": f, "import_ms": f - 10, "context_ms": 250.0} for f in (400.0, 410.0, 390.0)]
    aots = [{"warm_ms": w, "blocking_ms": 2.0, "blocking_cpu_ms": 1.5, "import_aot_ms": 1.0, "registry_ms": 0.5,
             "request_warmup_ms": 0.5, "phases_ms": {"cuda_compute_imported": 380.0, "last_task_done": w - 1},
             "calls": {"a": [0.9, 0.5], "b": [1.5, 1.0]}, "problems": []} for w in (480.0, 500.0, 490.0)]
    s = bench.summarize(floors, aots)
    assert s["floor_ms"] == 400.0 and s["warm_ms"] == 490.0 and round(s["ratio"], 3) == 1.225
    assert s["max_first_spec"] == "b" and s["targets_met"] == {
        "warm_le_1.25x_floor": True, "blocking_le_5ms": True, "first_call_le_1.2ms": False}
    text = bench.table({"no-context": s})
    assert "1.23" in text and "first_call_le_1.2ms: MISSED" in text and "cuda_compute_imported 380" in text


CALLER_FIRST = textwrap.dedent("""
    import ctypes, json, os, sys, threading, time, warnings
    warnings.simplefilter("ignore")
    fake = ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL)   # the "driver", before anything CUDA
    import aot
    from aot.runtime.loader import threads
    from aot.runtime.warmup import warm as W
    threads.TUNING.workers = 1                  # one worker: the queue's order is the order of the loads
    threads.TUNING.switch_interval = 0.0005     # (off by default: measured to buy nothing)
    log = []
    def slow(fn):
        def run(*a, **kw):                      # a load that holds the driver 150 ms (the GIL released)
            start = time.perf_counter()
            time.sleep(0.15)
            n = fn(*a, **kw)
            log.append((threading.current_thread().name, start, time.perf_counter()))
            return n
        return run
    W.warm_cccl, W.warm_nvrtc = slow(W.warm_cccl), slow(W.warm_nvrtc)
    reg = aot.Registry(sys.argv[2])
    default_interval = sys.getswitchinterval()
    reg.request_warmup()
    while "first_task" not in threads.TIMELINE:   # the worker is on its first spec (an NVRTC unit)
        time.sleep(0.005)
    during = sys.getswitchinterval()
    t0 = time.perf_counter()
    algo = reg.cccl(sys.argv[3])                # queued last (CCCL specs come after the units, largest first)
    t1 = time.perf_counter()
    cold = reg.ensure_warm(timeout=120)
    deadline = time.monotonic() + 5
    while sys.getswitchinterval() != default_interval and time.monotonic() < deadline:
        time.sleep(0.01)
    st = reg.status()
    print(json.dumps({"cold": cold, "t0": t0, "t1": t1, "log": log, "kernels": {n: s.kernels for n, s in st.items()},
                      "errors": {n: s.errors for n, s in st.items() if s.errors}, "default": default_interval,
                      "during": during, "after": sys.getswitchinterval(), "names": reg.names()}))
""")


def test_the_callers_spec_jumps_the_queue(small_build, fake_libcuda):
    """``cccl(name)`` during a warmup: the spec the queue would load last is loaded now, kernels included,
    in the caller's thread (it has a context current: the fake's), while the worker pauses at its next
    load; then the worker goes on with the rest, and every spec is warmed exactly once. The GIL switch
    interval, where asked for, is lowered while the warmup runs and restored after."""
    last = "reduce_sum_i32"  # the smaller CCCL spec: queued after lower_bound_i32
    r = run_child(CALLER_FIRST, fake_libcuda, small_build.out, last)
    assert r["cold"] == [] and r["errors"] == {}, r
    assert all(r["kernels"][n] for n in r["names"]), r["kernels"]
    loads = r["log"]
    assert len(loads) == len(r["names"]), loads  # one warm per spec, none twice
    mine = [x for x in loads if x[0] == "MainThread"]
    assert len(mine) == 1 and r["t0"] <= mine[0][1] and mine[0][2] <= r["t1"], (mine, r["t0"], r["t1"])
    workers = [x for x in loads if x[0] != "MainThread"]
    # no worker load started while the caller's spec loaded; the worker's loads before finished within one load
    assert not any(mine[0][1] < s < r["t1"] for _, s, _ in workers), loads
    assert r["t1"] - r["t0"] < 0.15 + 0.15 + 1.0, loads  # its own load, at most one in flight, slack
    # the units load from the context on (issue 29), while cuda.compute imports; lower_bound was still queued
    assert sum(1 for _, s, _ in workers if s > r["t1"]) >= 1, loads
    assert r["during"] == pytest.approx(0.0005) and r["after"] == r["default"], r


def test_switch_interval_is_restored_unless_changed(monkeypatch):
    from aot.runtime.loader import threads
    monkeypatch.setattr(threads.TUNING, "switch_interval", 0.0005)
    sw = threads._Switch()
    base = sys.getswitchinterval()
    try:
        sw.hold(2)
        assert sys.getswitchinterval() == pytest.approx(threads.TUNING.switch_interval)
        sw.release()
        assert sys.getswitchinterval() == pytest.approx(threads.TUNING.switch_interval)
        sw.release()
        assert sys.getswitchinterval() == base
        sw.hold()
        sys.setswitchinterval(0.002)  # the application's own choice meanwhile: kept
        sw.release()
        assert sys.getswitchinterval() == pytest.approx(0.002)
        monkeypatch.setattr(threads.TUNING, "switch_interval", 0.5)  # never raised
        sw.hold()
        assert sys.getswitchinterval() == pytest.approx(0.002)
        sw.release()
    finally:
        sys.setswitchinterval(base)


POLITE = textwrap.dedent("""
    import ctypes, json, os, sys, threading, time, warnings
    warnings.simplefilter("ignore")
    fake = ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    import aot
    from aot.runtime.loader import threads
    from aot.runtime.warmup import warm as W
    threads.TUNING.workers = 2
    log = []
    def slow(fn):
        def run(*a, **kw):                      # a load that holds the driver 200 ms, then the real (fake) one
            start = time.perf_counter()
            time.sleep(0.2)
            log.append((threading.current_thread().name, start, time.perf_counter()))
            return fn(*a, **kw)
        return run
    W.warm_cccl, W.warm_nvrtc = slow(W.warm_cccl), slow(W.warm_nvrtc)
    reg = aot.Registry(sys.argv[2])
    reg.request_warmup()
    while "first_task" not in threads.TIMELINE:
        time.sleep(0.005)
    time.sleep(1.0)                             # the application works; nobody waits for the warmup
    rush = time.perf_counter()
    cold = reg.ensure_warm(timeout=120)
    print(json.dumps({"cold": cold, "log": log, "rush": rush, "n": len(reg.names())}))
""")


def test_warmup_is_polite_until_someone_waits_for_it(small_build, fake_libcuda):
    """While the application works (nobody in ``ensure_warm``), one worker loads and rests after each
    step as long as it took; once the caller waits, the workers load at full speed (no rest)."""
    r = run_child(POLITE, fake_libcuda, small_build.out)
    assert r["cold"] == [] and len(r["log"]) == r["n"], r
    before = sorted((x for x in r["log"] if x[2] <= r["rush"]), key=lambda x: x[1])
    assert len(before) >= 2 and {x[0] for x in before} == {"aot-warmup-0"}, r["log"]
    for (_, _, end), (_, start, _) in zip(before, before[1:]):
        assert start - end >= 0.15, r["log"]  # rested about as long as the 200 ms load
    # Once the caller waits, nothing rests: each later load starts as soon as its worker is free (at the
    # rush, or at the end of that worker's load in flight). Which worker takes the last few items is
    # timing (a 2-core CI host once had one item left at the rush, taken by aot-warmup-0 at once).
    after = sorted((x for x in r["log"] if x[1] >= r["rush"]), key=lambda x: x[1])
    assert after, r["log"]
    for name, start, _ in after:
        free = max([r["rush"]] + [e for n, s, e in r["log"] if n == name and s < start])
        assert start - free < 0.1, r["log"]


def test_warm_limit_summary_and_table():
    """The limit is max(import + CCCL loads, context + all loads) (issue 29; the driver beside the import is
    reported, not used); ratios are warm-all over the limit and the first result with a warmup over the one
    without."""
    bench = load_script("warm_limit", "benchmarks/warm_limit.py")
    rows = []
    for w in (500.0, 520.0, 510.0):
        rows += [{"kind": "floor", "wall_ms": 300.0, "import_ms": 290.0, "context_ms": 240.0},
                 {"kind": "driver", "wall_ms": w, "import_ms": 290.0, "context_ms": 240.0, "loads_ms": w - 240},
                 {"kind": "driver-alone", "wall_ms": 480.0, "context_ms": 230.0, "loads_ms": 250.0, "kernels": 71,
                  "cccl_loads_ms": 150.0, "cccl_libraries": 24},
                 {"kind": "first-nowarm", "wall_ms": 600.0, "marks_ms": {"cccl_returned": 590.0}},
                 {"kind": "first-new", "wall_ms": 570.0, "marks_ms": {"cccl_returned": 560.0}},
                 {"kind": "warm-new", "wall_ms": 552.0, "blocking_ms": 3.0, "kernels": 71,
                  "phases_ms": {"cuda_compute_imported": 350.0}, "problems": []},
                 {"kind": "catalog", "wall_ms": 30.0, "catalog_ms": 25.0, "registry_ms": 1.0, "specs": 29}]
    s = bench.summarize(rows, ["new"])
    assert s["limit_ms"] == 480.0  # max(290 + 150, 480): the driver leg; the driver beside the import is not used
    assert s["limit_import_leg_ms"] == 440.0 and s["limit_driver_leg_ms"] == 480.0
    assert s["ratio_warm_new"] == pytest.approx(1.15) and s["ratio_first_new"] == pytest.approx(0.95)
    text = bench.table("default", s, ["new"])
    assert "limit 480.0 ms" in text and "1.150x limit" in text and "0.950x no warmup" in text, text
    assert "import + CCCL loads 440.0" in text and "(24 libraries)" in text, text
    for r in rows:  # a slower import: the import leg is the limit
        if r["kind"] == "floor":
            r["import_ms"] = 400.0
    assert bench.summarize(rows, ["new"])["limit_ms"] == 550.0
    assert "first use (names(), 29 specs) 25.0 ms" in text and "INCOMPLETE" not in text, text
    assert set(bench.VARIANTS["today"]) == {"workers", "polite", "caller_first", "grace", "switch_interval"}


UNITS_FIRST = textwrap.dedent("""
    import ctypes, json, os, sys, time, warnings
    warnings.simplefilter("ignore")
    fake = ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL)   # the "driver", before anything CUDA
    import aot
    import aot.runtime.loader.lean as lean
    real = lean.import_cuda_core
    def slow_core():                            # cuda.core takes 100-200 ms to import on the GPU machines
        time.sleep(0.5)
        return real()
    lean.import_cuda_core = slow_core
    from aot.runtime.loader import threads
    from aot.runtime.loader.library import DriverLibrary
    reg = aot.Registry(sys.argv[2])
    units = [n for n in reg.names() if reg.spec(n).family == "nvrtc"]
    reg.request_warmup(units)
    cold = reg.ensure_warm(timeout=120)
    warm_at = time.perf_counter()
    T = threads.TIMELINE
    unit = units[0]
    k = reg.kernel(unit, reg.spec(unit).kernels[0])   # the cuda.core handle, made now (after the import)
    print(json.dumps({"cold": cold, "units": units, "warm_at": warm_at, "timeline": T,
                      "driver_loaded": [isinstance(reg._loaded[n].obj, DriverLibrary) for n in units],
                      "kernels": {n: s.kernels for n, s in reg.status().items()},
                      "errors": {n: s.errors for n, s in reg.status().items() if s.errors},
                      "kernel_type": f"{type(k).__module__}.{type(k).__name__}", "handle": int(k.handle),
                      "calls": list((ctypes.c_ulong * 8).in_dll(fake, "fake_calls"))}))
""")


def test_units_load_through_the_driver_before_cuda_core_imports(small_build, fake_libcuda):
    """Issue 29: NVRTC units load from the moment the context exists, through plain driver calls
    (``cuLibraryLoadData``, ``cuLibraryGetKernel``, ``cuKernelGetFunction``), while cuda.core still imports
    (slowed to 0.5 s here); the ``cuda.core.Kernel`` is made from the loaded handle when first asked."""
    r = run_child(UNITS_FIRST, fake_libcuda, small_build.out)
    assert r["cold"] == [] and r["errors"] == {}, r
    assert r["units"] and all(r["driver_loaded"]), r
    t = r["timeline"]
    assert t["last_nvrtc_warm"] < t["cuda_core_imported"], t  # warm before cuda.core finished importing
    assert r["warm_at"] < t["cuda_core_imported"], t          # ensure_warm did not wait for it either
    assert all(r["kernels"][n] for n in r["units"]), r["kernels"]  # every unit's kernels in the (fake) context
    assert r["kernel_type"] == "cuda.core._module.Kernel", r
    assert r["handle"] >> 40 == KRN_TAG, hex(r["handle"])    # the fake driver's CUkernel, not a new load
    assert r["calls"][0] == len(r["units"]), r["calls"]       # one cuLibraryLoadData per unit, none from cuda.core


def test_the_queue_puts_cccl_specs_ahead_of_queued_units():
    """Once cuda.compute is imported its specs (the longest leg) go ahead of the units still queued."""
    from aot.runtime.warmup.warmup import _Queue
    q = _Queue()
    for n in ("u1", "u2"):
        q.put(n)
    q.put("c1", first=True)
    q.put("u3")
    q.put("c2", first=True)
    assert [q.get() for _ in range(5)] == ["c1", "c2", "u1", "u2", "u3"]


def test_manifest_entries_and_paths_are_indexed(small_build):
    """``entries_for`` (asked once per spec by a warmup) and ``path_of`` give what the plain scan and
    ``safe_join`` give."""
    from aot.core.manifest import load_manifest, safe_join
    m = load_manifest(small_build.out)
    for name in m.specs:
        assert m.entries_for(name) == [a for a in m.artifacts if a["name"] == name]
        for e in m.entries_for(name):
            assert m.path_of(e) == safe_join(m.root, e["path"])
    assert m.entries_for("no_such_spec") == []


CATALOG_ONLY = textwrap.dedent("""
    import json, sys
    from aot.runtime.loader.registry import Registry
    names = Registry(sys.argv[1]).names()
    print(json.dumps({"names": len(names), "imported": sorted(m for m in ("hashlib", "difflib") if m in sys.modules)}))
""")


def test_a_registrys_first_use_reads_no_artifact_and_resolves_no_path(small_build, monkeypatch):
    """Issue 29 (Registry first use <= 30 ms): ``names()`` neither imports hashlib/difflib (nothing is
    hashed until an artifact is opened) nor ``lstat``s an artifact path (``Manifest.path_of`` resolves
    each before it is opened); an entry that leads outside through a symlink is still refused there."""
    r = run_child(CATALOG_ONLY, small_build.out)
    assert r["names"] > 0 and r["imported"] == [], r
    import os as _os

    import aot.core.manifest as M
    seen = []
    real_islink = _os.path.islink
    monkeypatch.setattr(M.os.path, "islink", lambda p: seen.append(p) or real_islink(p))
    m = M.load_manifest(small_build.out, skip_bad_specs=True, resolve_paths=False)
    assert seen == [] and m.artifacts
    entry = m.artifacts[0]
    assert m.path_of(entry) == small_build.out / entry["path"] and seen  # resolved when opened


def test_small_cubins_load_with_the_gil_kept_and_cuinit_once(monkeypatch):
    """A unit's small cubin goes through the GIL-keeping handle (``cuctx.driver_gil``) for every call:
    each call that hands the GIL over waits up to 5 ms behind cuda.compute's import (issue 29); PTX
    (compiled by the driver) loads through the releasing one; ``cuInit`` runs once per process."""
    import ctypes as C

    from aot.runtime.loader import cuctx, library

    class Recorder:
        def __init__(self, tag, log):
            self.tag, self.log = tag, log

        def __getattr__(self, fn):
            def call(*args):
                self.log.append((self.tag, fn))
                if fn in ("cuLibraryLoadData", "cuLibraryGetKernel"):
                    C.cast(args[0], C.POINTER(C.c_void_p))[0] = 0x1000
                return 0
            return call

    log: list = []
    monkeypatch.setattr(cuctx, "driver", lambda: Recorder("release", log))
    monkeypatch.setattr(cuctx, "driver_gil", lambda: Recorder("keep", log))
    monkeypatch.setattr(library, "_initialised", [])
    lib = library.DriverLibrary("u", b"\x7fELF" + bytes(100), "cubin", ["k1", "k2"])
    assert lib.load_into_current() == 2
    assert library.DriverLibrary("v", b"\x7fELF", "cubin", ["k"]) is not None
    assert [c for c in log if c[1] == "cuInit"] == [("release", "cuInit")]  # once for both units
    assert all(tag == "keep" for tag, fn in log if fn != "cuInit"), log
    log.clear()
    ptx = library.DriverLibrary("p", b".version 8.0", "ptx", ["k"])
    ptx.load_into_current()
    assert ("release", "cuLibraryLoadData") in log and ("release", "cuKernelGetFunction") in log, log
    assert ("keep", "cuLibraryGetKernel") in log, log


UNITS_CHECKED_BY_WORKER = textwrap.dedent("""
    import ctypes, json, os, sys, threading, time, warnings
    warnings.simplefilter("ignore")
    fake = ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL)   # the "driver", before anything CUDA
    import aot
    import aot.runtime.loader.lean as lean
    import aot.runtime.loader.sources as S
    from aot.runtime.loader import threads
    real_core, real_check, real_lib = lean.import_cuda_core, S.check_packaged, S.DriverLibrary
    def slow_core():                            # cuda.core takes 100-200 ms to import on the GPU machines
        time.sleep(0.4)
        return real_core()
    events = []
    def check(manifest, spec, entry, path):
        events.append(("check", spec.name, spec.family, threading.current_thread().name,
                       threads.IMPORTS.importing()))
        return real_check(manifest, spec, entry, path)
    def load(name, *a, **k):
        events.append(("load", name, "nvrtc", threading.current_thread().name, threads.IMPORTS.importing()))
        return real_lib(name, *a, **k)
    def sleep(s):                               # threads.yield_to_import's sleep
        events.append(("yield", "", "", threading.current_thread().name, threads.IMPORTS.importing()))
        time.sleep(s)
    real_stamp = threads.stamp
    def stamp(stage, last=False):               # a context that takes 0.2 s (as a real one does)
        if stage == "context_ready":
            time.sleep(0.2)
        real_stamp(stage, last)
    lean.import_cuda_core, S.check_packaged, S.DriverLibrary = slow_core, check, load
    threads.stamp = stamp
    threads.time = type("T", (), {"sleep": staticmethod(sleep), "monotonic": staticmethod(time.monotonic),
                                  "perf_counter": staticmethod(time.perf_counter)})
    threads.TUNING.import_yield = 1e-4          # off by default: the mechanism, pinned
    reg = aot.Registry(sys.argv[2])
    reg.request_warmup()
    cold = reg.ensure_warm(timeout=120)
    print(json.dumps({"cold": cold, "events": events, "prechecked_left": len(reg._prechecked),
                      "families": {n: reg.spec(n).family for n in reg.names()},
                      "errors": {n: s.errors for n, s in reg.status().items() if s.errors}}))
""")


def test_units_are_checked_by_the_worker_that_loads_them_and_it_yields_to_the_import(small_build, fake_libcuda):
    """Issue 29, third pass: the request's thread reads and checks ahead only the CCCL specs' artifacts
    (their loads wait for cuda.compute anyway); each NVRTC unit's artifact is checked by the worker that
    loads it, just before its load, so the request's thread does no per-unit work beside the import (the
    context takes 0.2 s here, so the units are not queued yet while the CCCL specs are checked). While
    cuda.core/cuda.compute import (cuda.core slowed to 0.4 s here), with ``TUNING.import_yield`` set, the
    worker sleeps a tick before each unit, so that the import thread gets the GIL."""
    r = run_child(UNITS_CHECKED_BY_WORKER, fake_libcuda, small_build.out)

    def worker(thread: str) -> bool:
        return thread.startswith("aot-warmup-") and thread[len("aot-warmup-"):].isdigit()

    assert r["cold"] == [] and r["errors"] == {} and r["prechecked_left"] == 0, r
    units = sorted(n for n, f in r["families"].items() if f == "nvrtc")
    cccl = sorted(n for n, f in r["families"].items() if f == "cccl")
    ev = [tuple(e) for e in r["events"]]
    checks = {e[1]: e for e in ev if e[0] == "check"}
    assert sorted(checks) == sorted(units + cccl), ev  # every artifact checked once
    for n in cccl:
        assert checks[n][3] == "aot-warmup-start", ev  # ahead, in the request's thread
    for n in units:
        assert worker(checks[n][3]), ev  # a worker
        i = ev.index(checks[n])
        assert ev[i + 1][:2] == ("load", n) and ev[i + 1][3] == checks[n][3], ev  # then at once its load there
    assert not [e for e in ev if e[0] == "check" and e[2] == "nvrtc" and e[3] == "aot-warmup-start"], ev
    assert all(e[4] for e in ev if e[0] == "load"), ev  # the units loaded while cuda.core imported
    before = {e[1] for e in ev if e[0] == "load"}
    yields = [e for e in ev if e[0] == "yield" and worker(e[3])]
    assert len(yields) >= len(before) and all(e[4] for e in yields[:len(before)]), ev  # one before each unit
