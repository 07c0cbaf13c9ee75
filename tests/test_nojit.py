"""No JIT after startup (``AOT_NO_JIT``, ``aot.no_jit``, issue 41) on the CPU: compiles that run without a GPU
(cuda.core's ``Program.compile`` and raw NVRTC, numba-cuda's ``compile_ptx``, CuPy's NVRTC call) trip it, once
per kernel with the caller's stack, or raise before anything compiles; unset, nothing is wrapped."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import repo_env

SRC = 'extern "C" __global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }'

SCRIPT = textwrap.dedent(f"""
    import json, sys, warnings
    warnings.simplefilter("always")
    import aot
    from aot import JitForbiddenError
    SRC = {SRC!r}
    out = {{"raised": []}}

    def attempt(name, fn):
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                fn()
            out[name] = [str(x.message).splitlines()[0] for x in w if "after startup" in str(x.message)]
        except JitForbiddenError as e:
            out["raised"].append([name, str(e)])
        except Exception as e:  # the CPU host: what runs after the compile needs a driver
            out[name + "_error"] = type(e).__name__

    def core():
        from cuda.core import Program, ProgramOptions
        Program(SRC, "c++", ProgramOptions(arch="sm_80")).compile("cubin")

    def raw():
        from cuda.bindings import nvrtc
        err, prog = nvrtc.nvrtcCreateProgram(SRC.encode(), b"k.cu", 0, [], [])
        nvrtc.nvrtcCompileProgram(prog, 1, [b"-arch=sm_80"])

    def numba():
        from numba import cuda
        def k(x):
            x[0] = 1
        cuda.compile_ptx(k, "void(float32[::1])", cc=(8, 0))

    def cupy():
        import cupy.cuda.compiler as cc
        cc.compile_using_nvrtc(SRC, arch=80)

    def cccl():  # a cuda.compute module's factory, as no_jit finds it in sys.modules (no driver here to import it)
        import types
        from aot.runtime.adapters import nojit
        fake = types.ModuleType("cuda.compute.algorithms._fake")
        def make_reduce_into(d_in, d_out, op, h_init):
            return "built"
        make_reduce_into.__module__ = fake.__name__
        fake.make_reduce_into = make_reduce_into
        sys.modules[fake.__name__] = fake
        nojit._patch_cccl(fake)
        import numpy as np
        fake.make_reduce_into(np.zeros(3, np.int32), np.zeros(1, np.int32), "plus", np.zeros(1, np.int32))

    for name in sys.argv[1].split(","):
        attempt(name, globals()[name])
        if name == "core":
            attempt("core_again", core)
    out["report"] = aot.jit_report()
    print(json.dumps(out))
""")


def run(families: str, **env: str) -> dict:
    r = subprocess.run([sys.executable, "-c", SCRIPT, families], env=repo_env(**env), capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_warn_once_per_kernel_with_the_caller_and_the_report(tmp_path):
    report = tmp_path / "jit.json"
    out = run("core,raw,numba", AOT_NO_JIT="warn", AOT_NO_JIT_REPORT=str(report))
    assert out["core"] == ["aot: nvrtc compile of scale (source sha1 " + out["core"][0].split("sha1 ")[1]]
    assert out["core_again"] == []  # once per kernel
    assert out["numba"] == ["aot: numba compile of __main__:numba.<locals>.k(array(float32, 1d, C)) (via numba-cuda compile_cuda) "
                            "after startup; the packaged artifacts lack it. Called from:"]
    kernels = {k["kernel"].split(" (")[0]: k for k in out["report"]["kernels"]}
    assert kernels["scale"]["count"] == 3 and kernels["scale"]["caller"].startswith("<string>:")  # 2 core + 1 raw
    assert kernels["__main__:numba.<locals>.k(array(float32, 1d, C))"]["family"] == "numba"
    assert out["report"]["compiles"] == 4
    at_exit = json.loads(report.read_text())  # written at exit
    assert at_exit["compiles"] == 4 and at_exit["mode"] == "warn"


def test_raise_stops_every_family_before_it_compiles():
    out = run("core,raw,numba,cupy,cccl", AOT_NO_JIT="raise")
    raised = dict(out["raised"])
    assert set(raised) == {"core", "core_again", "raw", "numba", "cupy", "cccl"}, out
    assert raised["cccl"].startswith("aot: cccl compile of make_reduce_into(int32, int32, str, int32) (via "
                                     "cuda.compute.make_reduce_into) after startup")
    assert raised["numba"].startswith("aot: numba compile of __main__:numba.<locals>.k(array(float32, 1d, C)) (via numba-cuda "
                                      "compile_cuda) after startup under AOT_NO_JIT=raise")
    assert "cupy compile of scale" in raised["cupy"] and "cupy_error" not in out  # before CuPy needed a driver


def test_unset_wraps_nothing():
    probe = ("import sys, aot; from cuda.bindings import nvrtc; import numba.cuda.compiler as c; "
             "print(getattr(nvrtc.nvrtcCompileProgram, '_aot_nojit', False), "
             "getattr(c.compile_cuda, '_aot_nojit', False), 'aot.runtime.adapters.nojit' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", probe], env=repo_env(), capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.stdout.split() == ["False", "False", "False"], r.stderr[-2000:]


def test_a_bad_setting_is_one_line():
    r = subprocess.run([sys.executable, "-c", "import aot"], env=repo_env(AOT_NO_JIT="sometimes"),
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode != 0 and "environment variable AOT_NO_JIT: expected warn, raise, report or off, got " \
        "'sometimes'" in r.stderr


def test_report_only_counts(tmp_path):
    """``report`` (aot gate's packaged run): no warning a test suite could turn into an error, the report at exit."""
    report = tmp_path / "jit.json"
    out = run("core,numba", AOT_NO_JIT="report", AOT_NO_JIT_REPORT=str(report))
    assert out["core"] == [] and out["numba"] == [] and out["raised"] == []
    assert json.loads(report.read_text())["compiles"] == 3
