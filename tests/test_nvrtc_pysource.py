"""NVRTC units where libraries keep them (issue 21): sources named in Python code (a ``str`` constant, or a
function rendered per parameter set), NVRTC command-line flags, the validator's refusals, incremental
rebuilds when a Python string changes, a manifest that never makes aot import anything, and the handle
functions' CPU-side behaviour (their GPU proof: .ci/gpu/pystr_handles.py)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, repo_env

from aot.build.matrix import load_matrix
from aot.core.errors import AotError, MatrixError

_COUNT = itertools.count()

KERNELS = textwrap.dedent('''
    import os
    if os.environ.get("PYSTR_SENTINEL"):  # the manifest-never-imports test: importing leaves a trace
        open(os.environ["PYSTR_SENTINEL"], "a").write(__name__ + "\\n")

    SCALE = 'extern "C" __global__ void scale(float* x, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }'
    NEG = 'extern "C" __global__ void neg(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = -x[i]; }'
    NOT_SOURCE = 42
    _T = {"float32": "float", "float64": "double", "int32": "int"}

    def axpy(dtype, unroll=1):
        t = _T[dtype]
        return f'extern "C" __global__ void axpy_{dtype}({t} a, const {t}* x, {t}* y, int n) {{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i] * {unroll}; }}'
''')


def make_project(tmp_path: Path, matrix: str, kernels: str = KERNELS) -> tuple[Path, str]:
    """A project folder with a uniquely named package (``sys.modules`` is per process) and its matrix."""
    pkg = f"pystr_t{next(_COUNT)}_{abs(hash(str(tmp_path))) % 10_000}"
    (tmp_path / pkg).mkdir(parents=True)
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "kernels.py").write_text(kernels)
    (tmp_path / "build_matrix.yaml").write_text("version: 1\nnvrtc:\n" + matrix.replace("PKG", pkg))
    return tmp_path / "build_matrix.yaml", pkg


GOOD = """\
  - {name: scale, source: "PKG.kernels:SCALE", kernels: [scale]}
  - {name: neg, source: "PKG.kernels:NEG", kernels: [neg], options: ["-std=c++17", "-DN=4", "--use_fast_math"]}
  - {name: axpy, source: "PKG.kernels:axpy", params: {dtype: [float32, float64]}, kernels: ["axpy_{dtype}"]}
"""


def test_constants_and_rendered_variants(tmp_path):
    m, pkg = make_project(tmp_path, GOOD + '  - {name: "ax_{dtype}_u{unroll}", source: "PKG.kernels:axpy", '
                          'params: [{dtype: int32, unroll: 2}, {dtype: float32, unroll: 4}], kernels: ["axpy_{dtype}"]}\n')
    specs = {s.name: s for s in load_matrix(m).specs}
    assert list(specs) == ["scale", "neg", "axpy_f32", "axpy_f64", "ax_i32_u2", "ax_f32_u4"]
    assert specs["scale"].source_path == f"{pkg}.kernels:SCALE" and "x[i] *= a" in specs["scale"].source
    assert specs["axpy_f64"].source_path == f"{pkg}.kernels:axpy(dtype='float64')"
    assert specs["axpy_f64"].kernels == ("axpy_float64",) and "double a" in specs["axpy_f64"].source
    assert specs["ax_i32_u2"].source_path == f"{pkg}.kernels:axpy(dtype='int32', unroll=2)"
    assert "* 4;" in specs["ax_f32_u4"].source
    # the rendered text is the unit's definition, so a manifest carries it for JIT elsewhere
    from aot.core.rules import spec_from_definition
    d = {**specs["axpy_f32"].definition(), "source": specs["axpy_f32"].source}
    assert spec_from_definition(d).content_key() == specs["axpy_f32"].content_key()


def test_flags_give_the_content_key_of_program_options_fields(tmp_path):
    m, _ = make_project(tmp_path, GOOD + """\
  - {name: neg2, source: "PKG.kernels:NEG", kernels: [neg], options: {std: c++17, define_macro: N=4, use_fast_math: true}}
  - {name: neg3, source: "PKG.kernels:NEG", kernels: [neg], options: [--std=c++17, -D, N=4, -use_fast_math]}
  - {name: neg4, source: "PKG.kernels:NEG", kernels: [neg], options: [-lineinfo, --maxrregcount, "32", -DA, -DB=2]}
  - {name: neg5, source: "PKG.kernels:NEG", kernels: [neg], options: {lineinfo: true, max_register_count: 32, define_macro: [A, B=2]}}
""")
    specs = {s.name: s for s in load_matrix(m).specs}
    assert specs["neg"].options == {"define_macro": "N=4", "std": "c++17", "use_fast_math": True}
    assert specs["neg"].content_key() == specs["neg2"].content_key() == specs["neg3"].content_key()
    assert specs["neg4"].content_key() == specs["neg5"].content_key() != specs["neg"].content_key()


def test_include_flag_joins_include_dirs(tmp_path):
    m, _ = make_project(tmp_path, '  - {name: inc, source: "PKG.kernels:SCALE", kernels: [scale], '
                        'options: ["-Iinclude"]}\n')
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "helpers.cuh").write_text("#pragma once\n")
    (spec,) = load_matrix(m).specs
    assert dict(spec.headers) == {"helpers.cuh": "#pragma once\n"} and spec.options == {}


@pytest.mark.parametrize("entry, field, fragment", [
    ('{name: u, source: "PKG/kernels.py", kernels: [scale]}', "source",
     "is a Python file, not CUDA C++ source; name the string in it as 'package.module:ATTR'"),
    ('{name: u, source: "PKG/kernels.py:SCALE", kernels: [scale]}', "source",
     "is a Python file path; name the string by module: 'PKG.kernels:SCALE'"),
    ('{name: u, source: "PKG.kernels:NOT_SOURCE", kernels: [scale]}', "source",
     "'PKG.kernels:NOT_SOURCE' is an int, not CUDA C++ source text (a str)"),
    ('{name: u, source: "PKG.kernels:MISSING", kernels: [scale]}', "source", "has no attribute 'MISSING'"),
    ('{name: u, source: "PKG.kernels:axpy", kernels: [scale]}', "source", "is a function; give its arguments in 'params'"),
    ('{name: u, source: "PKG.kernels:SCALE", params: {dtype: float32}, kernels: [scale]}', "params", "not a function"),
    ('{name: u, source: "PKG.kernels:axpy", params: {dtype: [float16]}, kernels: ["axpy_{dtype}"]}', "params",
     "axpy(dtype='float16')\" raised KeyError"),
    ('{name: u, source: kernels.cu, params: {dtype: float32}, kernels: [scale]}', "params", "must name a function"),
    ('{name: u, source: "PKG.kernels:SCALE", kernels: [scale], options: ["--gpu-architecture=sm_90"]}', "options",
     "aot sets the GPU architecture itself, from 'aot build --sm'"),
    ('{name: u, source: "PKG.kernels:SCALE", kernels: [scale], options: ["-arch", "sm_90"]}', "options",
     "aot sets the GPU architecture itself"),
    ('{name: u, source: "PKG.kernels:SCALE", kernels: [scale], options: ["--fast-math"]}', "options",
     "unknown NVRTC flag '--fast-math' (did you mean"),
    ('{name: "structural-depth-{[-}]", source: "PKG.kernels:SCALE", kernels: [scale]}', "name",
     "(try 'structural-depth')"),
    ('{name: "ax {dtype}", source: "PKG.kernels:axpy", params: {dtype: [float32]}, kernels: ["axpy_{dtype}"]}',
     "name", "(try 'ax_f32')"),
    ('{name: "ax_{dt}", source: "PKG.kernels:axpy", params: {dtype: [float32]}, kernels: [axpy_float32]}', "name",
     "{dt} names no parameter; parameters: dtype"),
    ('{name: ax, source: "PKG.kernels:axpy", params: [{dtype: float32}, {dtype: float32}], kernels: ["axpy_{dtype}"]}',
     "name", "duplicate spec name"),
])
def test_validator_refuses_in_one_line_naming_spec_and_field(tmp_path, entry, field, fragment):
    m, pkg = make_project(tmp_path, f"  - {entry}\n")
    (tmp_path / "kernels.cu").write_text('extern "C" __global__ void scale() {}\n')
    with pytest.raises(MatrixError) as e:
        load_matrix(m)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{m}:3: spec ") and f"field '{field}':" in msg, msg
    assert fragment.replace("PKG", pkg) in msg, msg


def test_a_grid_over_the_spec_limit_stops_at_its_entry(tmp_path, monkeypatch):
    import aot.build.matrix as matrix
    monkeypatch.setattr(matrix, "MAX_SPECS", 3)
    m, _ = make_project(tmp_path, '  - {name: ax, source: "PKG.kernels:axpy", params: {dtype: [float32, float64], '
                        'unroll: [1, 2]}, kernels: ["axpy_{dtype}"]}\n')
    with pytest.raises(MatrixError, match=r":3: spec 'ax': field 'params': the matrix defines more than 3 specs"):
        load_matrix(m)


def test_manifest_validator_refuses_a_py_source_path():
    from aot.core.rules import spec_from_definition
    from aot.core.text import SpecError
    d = {"name": "u", "source_path": "mypkg/kernels.py", "source": 'extern "C" __global__ void k() {}',
         "kernels": ["k"], "options": {}}
    with pytest.raises(SpecError, match="is a Python file") as e:
        spec_from_definition(d)
    assert e.value.field == "source"


# ------------------------------------------------------------------ builds: incremental, never imported after
def _build(matrix: Path, out: Path, cwd: Path, *extra: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(matrix), "--sm", "80", "--out",
                        str(out), "--jobs", "2", "-q", *extra], cwd=cwd, env=repo_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads((out / "build-report.json").read_text())
    return {(i["name"], i["kind"]): i["status"] for i in report["items"]}


@pytest.fixture(scope="module")
def pystr_build(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pystr")
    m, pkg = make_project(tmp, GOOD)
    out = tmp / "out"
    first = _build(m, out, tmp)
    return tmp, m, pkg, out, first


def test_editing_a_python_string_rebuilds_exactly_its_units(pystr_build, tmp_path):
    tmp, m, pkg, out, first = pystr_build
    assert set(first.values()) == {"built"} and len(first) == 8  # 4 units x (cubin sm_80 + ptx)
    import shutil
    proj = tmp_path / "proj"
    shutil.copytree(tmp, proj, ignore=shutil.ignore_patterns("__pycache__"))
    kernels = proj / pkg / "kernels.py"
    kernels.write_text(kernels.read_text().replace("x[i] = -x[i]", "x[i] = -(x[i])"))  # NEG only
    again = _build(proj / "build_matrix.yaml", proj / "out", proj)
    assert {k for k, v in again.items() if v == "built"} == {("neg", "cubin"), ("neg", "ptx")}, again
    assert all(v == "hit" for k, v in again.items() if k[0] != "neg"), again
    kernels.write_text(kernels.read_text().replace("* {unroll}", "* ({unroll})"))  # the function: both dtypes
    again = _build(proj / "build_matrix.yaml", proj / "out", proj)
    assert {k[0] for k, v in again.items() if v == "built"} == {"axpy_f32", "axpy_f64"}, again


def test_a_manifest_naming_code_never_imports_it(pystr_build, tmp_path):
    """The consumer side: the module the manifest names is importable and leaves a trace when imported, yet
    reading the registry, every spec, verify and inspect import nothing (the manifest carries the text)."""
    tmp, m, pkg, out, _ = pystr_build
    sentinel = tmp_path / "imported.txt"
    code = textwrap.dedent(f"""
        import json, sys, aot
        reg = aot.Registry({str(out)!r})
        specs = {{n: reg.spec(n) for n in reg.names()}}
        assert reg.manifest.specs["neg"]["source_path"] == "{pkg}.kernels:NEG"
        print(json.dumps({{"names": sorted(specs), "loaded": sorted(m for m in sys.modules if m.startswith("{pkg}"))}}))
    """)
    env = repo_env(PYSTR_SENTINEL=str(sentinel))
    env["PYTHONPATH"] += f":{tmp}"  # importable: only a decision of aot's could import it
    probe = subprocess.run([sys.executable, "-c", f"import {pkg}.kernels"], env=env, cwd=tmp_path)
    assert probe.returncode == 0 and sentinel.read_text() == f"{pkg}.kernels\n"  # the trace works
    sentinel.unlink()
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc == {"names": ["axpy_f32", "axpy_f64", "neg", "scale"], "loaded": []}
    for cmd in (["verify", str(out)], ["inspect", str(out)]):
        v = subprocess.run([sys.executable, "-m", "aot", *cmd], env=env, cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
        assert v.returncode == 0, v.stdout + v.stderr
    assert not sentinel.exists()


# ------------------------------------------------------------------ handles (CPU side)
def test_handles_resolve_lazily_and_check_before_loading(pystr_build):
    _, _, _, out, _ = pystr_build
    code = textwrap.dedent(f"""
        import sys, aot
        fns = (aot.cufunction, aot.cupy_module, aot.cupy_kernel)
        assert "aot.runtime.adapters.handles" in sys.modules and "cupy" not in sys.modules, sorted(sys.modules)
        assert not [m for m in sys.modules if m.startswith("cuda.")], [m for m in sys.modules if m.startswith("cuda.")]
        reg = aot.Registry({str(out)!r})
        for call in (lambda: aot.cufunction("neg", "nope", reg), lambda: aot.cupy_kernel("neg", "nope", reg),
                     lambda: aot.cupy_module("nope", reg)):
            try:
                call()
            except aot.AotError as e:
                print(type(e).__name__, e)
        print("cupy" in sys.modules)
    """)
    r = subprocess.run([sys.executable, "-c", code], env=repo_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("AotError unit 'neg' has no kernel 'nope'; it has neg"), lines
    assert lines[1].startswith("AotError unit 'neg' has no kernel 'nope'"), lines
    assert "unknown spec 'nope'" in lines[2] and lines[3] == "False", lines


def test_handles_refuse_a_cccl_spec(small_build):
    import aot
    reg = aot.Registry(small_build.out)
    with pytest.raises(AotError, match="is a CCCL spec"):
        aot.cupy_kernel("reduce_sum_i32", "k", reg)
    with pytest.raises(AotError, match="is a CCCL spec"):
        aot.cufunction("reduce_sum_i32", "k", reg)


def test_the_example_matrix_validates():
    specs = load_matrix(ROOT / "examples" / "pystr-mypkg" / "build_matrix.yaml").specs
    assert [s.name for s in specs] == ["saxpy", "scale_shift_f32", "scale_shift_f64", "block_sum"]


@pytest.mark.gpu
def test_handles_launch_on_the_gpu(pystr_build):
    """A unit from a Python string, through each handle: cuda.core Kernel, CUfunction + cuLaunchKernel,
    cupy.RawKernel (skipped without CuPy); each checked against numpy."""
    import ctypes

    import numpy as np
    from cuda.bindings import driver
    from cuda.core import Device, LaunchConfig, launch

    import aot
    from aot.verify.devarray import DeviceArray
    out = pystr_build[3]
    dev = Device()
    dev.set_current()
    reg = aot.Registry(out)
    n = 10_001
    grid = (n + 255) // 256
    x = np.random.default_rng(0).uniform(-1, 1, n).astype(np.float32)
    want = x * np.float32(3)
    d = DeviceArray.from_host(x, dev)
    launch(dev.default_stream, LaunchConfig(grid=grid, block=256), reg.kernel("scale", "scale"), d.buffer,
           np.float32(3), np.int32(n))
    dev.sync()
    np.testing.assert_array_equal(d.to_host(), want)
    d = DeviceArray.from_host(x, dev)
    f = aot.cufunction("scale", "scale", reg)
    args = ((d.ptr, 3.0, n), (ctypes.c_void_p, ctypes.c_float, ctypes.c_int))
    (err,) = driver.cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, 0, args, 0)
    assert int(err) == 0, err
    np.testing.assert_array_equal(d.to_host(), want)
    assert reg.status()["scale"].source == "packaged"
    cp = pytest.importorskip("cupy")
    k = aot.cupy_kernel("scale", "scale", reg)
    dx = cp.asarray(x)
    k((grid,), (256,), (dx, np.float32(3), np.int32(n)))
    np.testing.assert_array_equal(cp.asnumpy(dx), want)
