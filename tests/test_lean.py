"""The runtime-only install (issue 11): stand-in NVRTC / nvJitLink / cudart, cuda.compute without the
toolkit, one clear error where JIT would be needed, and a runtime that imports neither PyYAML nor rich.

The oracle for the stand-ins' exports is the installed cuda-cccl itself: every symbol its
``libcccl.c.parallel.so`` (cu12 and cu13 both ship in the wheel) imports from NVRTC / nvJitLink must be
exported by the stand-in under the same symbol version. Loading checks run in subprocesses, with the
driver stand-in preloaded (this host has no driver) and ``AOT_FORCE_STUB_TOOLCHAIN=1`` (the real toolkit
is installed here; the variable makes aot load its stand-ins anyway, as a lean install would).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, repo_env

from aot.runtime.loader import default_specs as _default_specs
from aot.runtime.loader.stand_ins import LIBS, MAJORS, build, soname

pytestmark = pytest.mark.skipif(shutil.which("nm") is None or shutil.which("cc") is None and
                                shutil.which("gcc") is None, reason="needs nm and a C compiler")

#: Functions returning a string instead of an error code.
STRING_RESULT = {"nvrtcGetErrorString", "cudaGetErrorString", "cudaGetErrorName"}


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> dict[int, dict[str, Path]]:
    return {major: build(major, tmp_path_factory.mktemp(f"stand-ins-{major}")) for major in MAJORS}


def _nm(path: Path, *flags: str) -> list[str]:
    out = subprocess.run(["nm", "-D", *flags, str(path)], capture_output=True, text=True, check=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.split()]


def _cccl_imports(major: int) -> dict[str, set[str]]:
    """lib -> the versioned symbols (``name@libX.so.N``) cuda-cccl's C library imports from it."""
    origin = Path(importlib.util.find_spec("cuda.cccl").origin).parent.parent / "compute"
    lib = origin / f"cu{major}" / "cccl" / "libcccl.c.parallel.so"
    if not lib.is_file():
        pytest.skip(f"{lib} is not installed")
    wanted: dict[str, set[str]] = {"nvrtc": set(), "nvJitLink": set()}
    for sym in _nm(lib, "--undefined-only"):
        for name, syms in wanted.items():
            if sym.endswith(f"@{soname(name, major)}"):
                syms.add(sym)
    return wanted


@pytest.mark.parametrize("major", MAJORS)
def test_stand_ins_export_what_cccl_imports_under_its_versions(stand_ins, major):
    imports = _cccl_imports(major)
    assert len(imports["nvrtc"]) >= 10 and len(imports["nvJitLink"]) >= 10, imports
    for lib in LIBS:
        path = stand_ins[major][lib]
        assert path.name == soname(lib, major)
        exported = _nm(path, "--defined-only")
        # Every exported symbol carries the real library's version node, as the default (@@) version.
        assert all(s.endswith(f"@@{soname(lib, major)}") for s in exported if s != soname(lib, major)), exported
        assert f"aot_stub_calls@@{soname(lib, major)}" in exported
        missing = {s.replace("@", "@@", 1) for s in imports.get(lib, ())} - set(exported)
        assert not missing, f"{path.name} lacks {sorted(missing)}"


CALL_ALL = textwrap.dedent("""
    import ctypes, json, sys
    lib = ctypes.CDLL(sys.argv[1])
    strings = set(json.loads(sys.argv[2]))
    counter = lib.aot_stub_calls
    counter.restype = ctypes.c_ulong
    results = {}
    for name in json.loads(sys.argv[3]):
        fn = getattr(lib, name)
        fn.restype = ctypes.c_char_p if name in strings else ctypes.c_int
        results[name] = fn(*([None] * 8)) if name not in strings else fn(0).decode()
    print(json.dumps({"results": results, "calls": counter()}))
""")


@pytest.mark.parametrize("major", MAJORS)
def test_every_entry_point_returns_an_error_and_is_counted(stand_ins, major):
    """Each function is called with NULL for every pointer (what a confused caller might pass): it must
    return an error code (or a message), never crash, and the counter must count every call."""
    for lib in LIBS:
        path = stand_ins[major][lib]
        funcs = [s.split("@")[0] for s in _nm(path, "--defined-only")
                 if re.match(r"^_*(nvrtc|nvJitLink|cuda)", s)]
        assert funcs
        r = subprocess.run([sys.executable, "-c", CALL_ALL, str(path), json.dumps(sorted(STRING_RESULT)),
                            json.dumps(funcs)], capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["calls"] == len(funcs), out
        for name, res in out["results"].items():
            if name in STRING_RESULT:
                assert "aot stand-in" in res or "Stub" in res, (name, res)
            else:
                assert res != 0, f"{path.name}: {name} returned success"


PROBE = textwrap.dedent("""
    import ctypes, json, sys
    from aot.build.toolchain import stub_library
    ctypes.CDLL(str(stub_library()), mode=ctypes.RTLD_GLOBAL)  # this host has no driver
    from aot.runtime.loader import lean as _lean
    from aot.runtime.loader.default_specs import load
    from aot.core.errors import ToolchainError
    from aot.runtime.loader.registry import Registry
    if sys.argv[2] == "hide-toolkit":  # cuda-pathfinder "finds nothing", as in a venv without the toolkit
        _lean._find_real = lambda lib, major: None
    from aot.runtime.loader.default import default_registry
    n_default = len(default_registry().names())   # the bundled specs, read from JSON
    reg = Registry(sys.argv[1], specs=load(), device_sm=90)
    loaded = reg._load("reduce_sum_i32")          # check + cuda.compute.deserialize of a packaged artifact
    algo = reg.cccl("reduce_sum_i32")              # the per-thread object with its operator bound
    error = None
    if sys.argv[2] != "as-is":
        try:
            reg.cccl("reduce_sum_f64")             # not in this artifact set: would need JIT
        except ToolchainError as e:
            error = str(e)
    st = _lean.state()
    maps = open("/proc/self/maps").read()
    print(json.dumps({
        "n_default": n_default, "source": loaded.source, "algo": type(algo.raw).__name__, "error": error, "jit": st.jit,
        "forced": st.forced, "stand_ins": sorted(st.stand_ins), "describe": st.describe(),
        "calls": _lean.stub_calls(),
        "real_libs_mapped": sorted({l.split("/")[-1] for l in maps.splitlines()
                                    if "/nvidia/" in l and re.search("lib(nvrtc|nvJitLink|cudart)", l)}),
        "heavy": sorted(m for m in sys.modules if m.split(".")[0] in ("yaml", "rich", "numba", "numba_cuda_mlir")),
    }))
""").replace("import ctypes, json, sys", "import ctypes, json, re, sys")


def _probe(out: Path, mode: str, **env: str) -> dict:
    r = subprocess.run([sys.executable, "-c", PROBE, str(out), mode], cwd=ROOT, env=repo_env(**env),
                       capture_output=True, text=True, timeout=180, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode, env", [("forced", {"AOT_FORCE_STUB_TOOLCHAIN": "1"}), ("hide-toolkit", {})])
def test_packaged_artifacts_load_with_stand_ins_and_jit_is_one_clear_error(small_build, mode, env):
    out = _probe(small_build.out, mode, **env)
    assert out["source"] == "packaged" and out["algo"] == "_Reduce", out
    assert out["stand_ins"] == sorted(LIBS) and out["jit"] is False
    assert out["forced"] is (mode == "forced")
    # The real toolkit (installed on this host) was never mapped: cuda.compute took the stand-ins.
    assert out["real_libs_mapped"] == [], out["real_libs_mapped"]
    # Loading and deserializing never called a stand-in.
    assert out["calls"] == {lib: 0 for lib in LIBS}, out["calls"]
    # A spec with no fitting artifact: one error naming the spec, the SM and the extra to install.
    assert out["error"] and "reduce_sum_f64" in out["error"] and "sm_90" in out["error"], out["error"]
    assert re.search(r"pip install '[\w.-]+\[jit\]'", out["error"]), out["error"]
    if mode == "hide-toolkit":
        assert "[jit]" in out["describe"]
    assert out["heavy"] == [], out["heavy"]  # the runtime imported neither PyYAML nor rich (nor numba)
    assert out["n_default"] == len(_default_specs.load()) > 0


def test_with_the_toolkit_the_real_libraries_are_used(small_build):
    out = _probe(small_build.out, "as-is")
    assert out["source"] == "packaged" and out["jit"] is True and out["stand_ins"] == [], out
    assert "JIT fallback available" in out["describe"]
    assert "libnvrtc.so.13" in out["real_libs_mapped"] or "libnvrtc.so.12" in out["real_libs_mapped"], out
    assert out["heavy"] == [], out["heavy"]


def test_default_specs_json_is_the_bundled_matrix():
    """aot/default_specs.json must say what build_matrix.yaml says (regenerate: python -m aot.build.defaults)."""
    from aot.build.matrix import load_matrix
    matrix = {s.name: s for s in load_matrix().specs}
    assert {s.name: s for s in _default_specs.load()} == matrix
    from aot.build.defaults import render
    assert _default_specs.PATH.read_text() == render(list(matrix.values()))


def test_a_damaged_default_spec_file_is_one_artifact_error(tmp_path):
    from aot.core.errors import ArtifactError
    p = tmp_path / "default_specs.json"
    for text in ('{"version": 1, "specs": {"x": {"name": "x", "algorithm": "nope"}}}', '{"version": 2}', "[",
                 '{"version": 1, "specs": {}, "specs": {}}'):
        p.write_text(text)
        with pytest.raises(ArtifactError, match="default_specs.json"):
            _default_specs.load(p)
    assert _default_specs.load(tmp_path / "absent.json") == []


def test_build_commands_without_pyyaml_say_which_extra():
    """A runtime-only install has no PyYAML/rich: `aot validate` is one line naming the [build] extra."""
    code = ("import sys; sys.modules['yaml'] = None; sys.modules['rich'] = None\n"
            "from aot.cli.main import main; sys.exit(main(['validate']))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=repo_env(), capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 3, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "PyYAML" in lines[0] and "[build]'" in lines[0], r.stderr
