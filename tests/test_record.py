"""``aot record`` (issue 27): a command run with the recording hook gives the matrix of what it compiled,
each source named where it lives.

The tests over the example record examples/lib-mypkg's own test suite (NVRTC compile-only tests on the CPU, its CCCL
call sites built under the stand-in driver) and check the result against the committed matrix, ``aot
validate`` and a hand-written matrix's content keys. The fast ones record small scripts: cuda.core
``Program``, a CuPy stand-in, functions whose text cannot be named, the exit code passed on."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, repo_env

EXAMPLE = ROOT / "examples" / "lib-mypkg"
HAND = ROOT / "tests" / "data" / "record" / "lib_hand.yaml"


def toolkit_env(**extra: str) -> dict:
    """``repo_env`` where a plain process finds NVRTC: this checkout's dev venv keeps the toolkit wheels
    where cuda-pathfinder does not look, so their library folder goes on LD_LIBRARY_PATH (a user's venv
    needs nothing)."""
    env = repo_env(**extra)
    nvidia = importlib.util.find_spec("nvidia")
    libs = [str(Path(p) / "cu13" / "lib") for p in (nvidia.submodule_search_locations or [])] if nvidia else []
    env["LD_LIBRARY_PATH"] = os.pathsep.join([*libs, *filter(None, [env.get("LD_LIBRARY_PATH")])])
    return env


def example_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "lib-mypkg"
    shutil.copytree(EXAMPLE, dst, ignore=shutil.ignore_patterns("build", "dist", "*-dist", "__pycache__"))
    return dst


def example_env(project: Path) -> dict:
    """The library's own test environment: its heavy dependency's stub on PYTHONPATH, aot importable."""
    env = toolkit_env()
    env["PYTHONPATH"] = os.pathsep.join([str(project / "stubs"), str(project), env["PYTHONPATH"]])
    return env


KEYS = textwrap.dedent("""
    import json, sys
    from aot.build.matrix import load_matrix
    print(json.dumps({s.name: s.content_key() for s in load_matrix(sys.argv[1]).specs}))
""")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """examples/lib-mypkg's tests, recorded with the stand-in driver: (project copy, matrix, CLI output)."""
    project = example_copy(tmp_path_factory.mktemp("record"))
    out = project / "recorded.yaml"
    r = subprocess.run([sys.executable, "-m", "aot", "record", "--stand-in-driver", "--out", str(out), "--",
                        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                       cwd=project, env=example_env(project), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return project, out, r.stdout


def test_recording_the_example_gives_its_committed_matrix(recorded):
    project, out, stdout = recorded
    assert "40 NVRTC compiles, 0 numba-cuda kernel compiles, 5 cuda.compute builds seen" in stdout, stdout
    assert "32 NVRTC entries (39 units), 0 numba entries (0 signatures), 4 CCCL specs" in stdout, stdout
    got = out.read_text().splitlines()[1:]  # the first line quotes the command as it was typed
    assert got == (EXAMPLE / "build_matrix.yaml").read_text().splitlines()[1:]


def test_the_recorded_matrix_validates_and_names_every_source_in_place(recorded):
    project, out, stdout = recorded
    import yaml
    doc = yaml.safe_load(out.read_text())
    assert all(e["source"].startswith(("mylib.kernels.", "mylib.io.")) and ":" in e["source"] for e in doc["nvrtc"])
    assert {e["op"] for e in doc["cccl"]} == {"plus", "mylib.algos:is_positive", "lambda x: x * 2"}
    r = subprocess.run([sys.executable, "-m", "aot", "validate", "--matrix", str(out)], cwd=project,
                       env=example_env(project), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "43 specs OK" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    # What cannot be named is listed, in the output and at the top of the matrix, with the reason.
    header = [ln for ln in out.read_text().splitlines() if ln.startswith("#   - ")]
    assert len(header) == 2, header
    assert "gather_columns_kernels" in header[0] and "text built at run time" in header[0]
    assert "build_scaled" in header[1] and "closure over local name(s) factor" in header[1]
    assert "not named (2;" in stdout


def test_recorded_units_have_the_hand_written_matrix_content_keys(recorded):
    project, out, _ = recorded
    keys = {}
    for m in (out, HAND):
        r = subprocess.run([sys.executable, "-c", KEYS, str(m)], cwd=project, env=example_env(project),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        keys[m.name] = json.loads(r.stdout.strip().splitlines()[-1])
    hand, got = keys[HAND.name], keys[out.name]
    pairs = {"sum_f64": "total_f64", "keep_positive": "positive_i32", "twice": "doubled_f64",
             "sum_index_squares": "index_squares_i64", "great_circle": "haversine", "box_of_points": "point_bounds",
             "dist_f32": "euclidean_f32", "dist_f64": "euclidean_f64", "ring_area": "area_f64",
             "wkb_counts": "wkb_point_count"}
    assert set(pairs) == set(hand)
    for h, g in pairs.items():
        assert hand[h] == got[g], (h, g)


# ------------------------------------------------------------------------------------------------ fast
TINY = {
    "tinylib/__init__.py": "",
    "tinylib/k.py": '''
        import numpy as np
        SAXPY = 'extern "C" __global__ void saxpy(float a, float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= a; }'
        SHIFT = SAXPY.replace("saxpy", "shift").replace("*= a", "+= a")

        def scaled(dtype):
            return SAXPY.replace("float*", np.dtype(dtype).name.replace("float32", "float").replace("float64", "double") + "*")

        def nested():
            def inner():
                return SAXPY.replace("saxpy", "inner_k")
            return inner()
        ''',
    "cupy/__init__.py": '''
        class RawKernel:
            def __init__(self, code, name, options=(), **kw):
                self.code, self.name, self.options = code, name, options
        class RawModule:
            def __init__(self, code=None, *, options=(), name_expressions=None, path=None):
                self.code = code
        ''',
    "run.py": '''
        import hashlib, json, sys
        import numpy as np
        from cuda.core import Program, ProgramOptions
        import cupy
        from tinylib import k
        out = []
        for src in (k.SAXPY, k.scaled(np.float64), k.nested()):
            obj = Program(src, "c++", ProgramOptions(arch="sm_80", std="c++17")).compile("cubin")
            out.append(hashlib.sha256(bytes(obj.code)).hexdigest())
        cupy.RawKernel(k.SHIFT, "shift", options=("-std=c++17", "--use_fast_math"))
        print(json.dumps(out))
        ''',
}


def _tiny(tmp_path: Path) -> Path:
    for rel, text in TINY.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return tmp_path


def test_cuda_core_cupy_and_functions_are_named_and_results_unchanged(tmp_path):
    project = _tiny(tmp_path)
    env = toolkit_env()
    env["PYTHONPATH"] = os.pathsep.join([str(project), env["PYTHONPATH"]])
    plain = subprocess.run([sys.executable, "run.py"], cwd=project, env=env, capture_output=True, text=True,
                           timeout=300)
    assert plain.returncode == 0, plain.stderr[-3000:]
    out = project / "m.yaml"
    r = subprocess.run([sys.executable, "-m", "aot", "record", "--package", "tinylib", "--out", str(out), "--",
                        sys.executable, "run.py"], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # recording changes no result: the same cubins, byte for byte
    assert json.loads(r.stdout.splitlines()[0]) == json.loads(plain.stdout.strip())
    import yaml
    doc = yaml.safe_load(out.read_text())
    by_source = {e["source"]: e for e in doc["nvrtc"]}
    assert by_source["tinylib.k:SAXPY"]["options"] == {"std": "c++17"}            # cuda.core: its fields
    assert by_source["tinylib.k:scaled"]["params"] == {"dtype": "float64"}        # np.float64 -> its name, re-rendered
    assert by_source["tinylib.k:SHIFT"]["options"] == ["-std=c++17", "--use_fast_math"]  # CuPy: its flags
    assert by_source["tinylib.k:SHIFT"]["kernels"] == ["shift"]
    assert len(doc["nvrtc"]) == 3 and "4 NVRTC compiles" in r.stdout, r.stdout   # each compile recorded once
    assert "tinylib.k:nested.<locals>.inner, a nested function" in out.read_text()
    v = subprocess.run([sys.executable, "-m", "aot", "validate", "--matrix", str(out)], cwd=project, env=env,
                       capture_output=True, text=True, timeout=120)
    assert v.returncode == 0 and "3 specs OK" in v.stdout, v.stdout + v.stderr


def test_the_exit_code_is_passed_on_and_the_matrix_written(tmp_path, capsys):
    from aot.cli.main import main
    project = _tiny(tmp_path)
    out = tmp_path / "m.yaml"
    script = ("import sys; sys.path.insert(0, %r); import cupy; "
              "cupy.RawKernel('extern \"C\" __global__ void k() {}', 'k'); sys.exit(3)" % str(project))
    rc = main(["record", "--package", "nothing", "--out", str(out), "--", sys.executable, "-c", script])
    assert rc == 3
    assert "the command exited with 3" in capsys.readouterr().out
    assert out.read_text().startswith("# Written by `aot record` from: ") and "version: 1" in out.read_text()


def test_a_missing_command_is_one_line(tmp_path, capsys):
    from aot.cli.main import main
    assert main(["record", "--package", "x", "--out", str(tmp_path / "m.yaml"), "--", "no-such-command-xyz"]) == 2
    assert "command not found: no-such-command-xyz" in capsys.readouterr().err
    assert main(["record", "--package", "x", "--out", str(tmp_path / "m.yaml")]) == 2
    assert not (tmp_path / "m.yaml").exists()
