"""Triton under ``AOT_NO_JIT`` and ``aot gate`` on the driverless host: a Triton compile for an explicit target trips
``AOT_NO_JIT=raise`` before anything compiles, named ``module:qualname[specialisation]``; a kernel Triton's cache
manager answers (its own cache here; aot's served kernels answer there too: tests/test_triton.py) does not; the
name a spec is listed under by the gate is the name the compile and the launch carry; the gate's hook wraps
Triton's launch entry point (``JITFunction.run``) when Triton is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT, repo_env

triton = pytest.importorskip("triton")

EXAMPLE = ROOT / "examples" / "triton-mypkg"
ADD = "triton_mypkg.kernels:add[x_ptr:*fp32/16, y_ptr:*fp32/16, out_ptr:*fp32/16, n:i32/16, BLOCK=1024; w4 s3 c1]"

SCRIPT = textwrap.dedent("""
    import json, sys, warnings
    warnings.simplefilter("ignore")
    import aot
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton_mypkg import kernels as k
    div = [["tt.divisibility", 16]]
    def compile_add():
        src = ASTSource(k.add, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                "BLOCK": "constexpr"}, {(4,): 1024}, {(i,): div for i in range(4)})
        triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 3})
    out = {}
    try:
        compile_add()
        out["first"] = "compiled"
    except aot.JitForbiddenError as e:
        out["first"] = str(e)
    aot.no_jit("off")
    compile_add()          # into Triton's cache, unwatched
    aot.no_jit("raise")
    compile_add()          # Triton's cache answers: no compile
    out["report"] = aot.jit_report()["lines"]
    print(json.dumps(out))
""")


def test_a_triton_compile_trips_no_jit_and_a_cache_answer_does_not(tmp_path):
    cache = tmp_path / "triton-cache"
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, check=False,
                       env=repo_env(AOT_NO_JIT="raise", TRITON_CACHE_DIR=str(cache),
                                    PYTHONPATH=f"{EXAMPLE}{os.pathsep}{ROOT}"))
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["first"].startswith(f"aot: triton compile of {ADD} (via Triton compile) after startup under "
                                   f"AOT_NO_JIT=raise"), out
    # one compile counted (the raised one); the later compile under "off" and the cache's answer are not
    assert len(out["report"]) == 1 and out["report"][0].startswith(f"triton {ADD} (via Triton compile, 1x"), out
    assert sorted(p.name for p in cache.rglob("*.cubin")) == ["add.cubin"]  # compiled once: after "off"


def test_a_spec_is_named_as_its_compile_is(monkeypatch):
    """The gate lists a spec under the name its launch carries: the spec's fields through Triton's own binder
    (``specialize``) give the name the compile of the same specialisation gives (above)."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    from aot.build.triton_build import parse_triton, specialize
    from aot.runtime.adapters.triton_attach import resolve_kernel
    from aot.runtime.adapters.triton_names import kernel_name
    e = {"name": "add", "kernel": "triton_mypkg.kernels:add",
         "signature": {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
         "constexprs": {"BLOCK": 1024}, "divisible_by_16": ["x_ptr", "y_ptr", "out_ptr", "n"]}
    (spec,) = parse_triton(e, "add", EXAMPLE)
    kernel = resolve_kernel(spec.kernel)
    _, sig, consts, attrs, options = specialize(kernel, spec, 90)
    assert kernel_name(kernel, sig, consts, attrs, options) == ADD
    one = parse_triton({**e, "divisible_by_16": [], "equal_to_1": ["n"]}, "add", EXAMPLE)[0]
    _, sig, consts, attrs, options = specialize(kernel, one, 90)
    assert kernel_name(kernel, sig, consts, attrs, options) == (
        "triton_mypkg.kernels:add[x_ptr:*fp32, y_ptr:*fp32, out_ptr:*fp32, n=1, BLOCK=1024; w4 s3 c1]")


def test_the_gate_hook_wraps_triton_s_launch(tmp_path):
    """Under ``aot gate``'s hook (loaded by path, as its sitecustomize does), importing Triton wraps
    ``JITFunction.run``; the autotuner's benchmark is wrapped too (its timing launches are not logged)."""
    log = tmp_path / "gate.jsonl"
    log.touch()
    probe = textwrap.dedent(f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("_aot_gate_hook", {str(ROOT / "aot/verify/gate_hook.py")!r})
        hook = importlib.util.module_from_spec(spec); sys.modules["_aot_gate_hook"] = hook
        spec.loader.exec_module(hook); hook.install()
        import triton
        from triton.runtime.jit import JITFunction
        from triton.runtime.autotuner import Autotuner
        print(getattr(JITFunction.run, "_aot_gate", False), getattr(Autotuner._bench, "_aot_gate", False))
    """)
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False,
                       env=repo_env(AOT_GATE_LOG=str(log)))
    assert r.stdout.split() == ["True", "True"], r.stderr[-3000:]
    assert not [ln for ln in log.read_text().splitlines() if '"unseen"' in ln], log.read_text()


@pytest.mark.filterwarnings("ignore:TRITON_DEFAULT_FP_FUSION")  # Triton 3.9's own notice, once per process
def test_a_launched_kernel_is_named_as_its_compile_is(tmp_path, monkeypatch):
    """The gate's hook names a launch by the ``CompiledKernel`` ``JITFunction.run`` returns (its ``src`` and
    ``metadata``): a real one, compiled for an explicit target, gives the name of its compile and of its spec."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from aot.runtime.adapters.triton_attach import resolve_kernel
    from aot.runtime.adapters.triton_names import source_name
    add = resolve_kernel("triton_mypkg.kernels:add")
    div = [["tt.divisibility", 16]]
    src = ASTSource(add, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                    {(4,): 1024}, {(i,): div for i in range(4)})
    with knobs.cache.scope():
        knobs.cache.dir = str(tmp_path / "cache")
        knobs.cache.manager_class = None
        compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "num_stages": 3})
    assert source_name(compiled.src, compiled.metadata) == ADD
