"""Issue 37's import-rule items. (3) Bare parents never change a source silently: a parent ``__init__`` that
sets what a kernel module reads makes ``validate``/``build`` refuse, naming the spec; where the parents cannot be
imported at build time, the loader compares the running library's text with the packaged one and JIT-compiles
the running text after one warning. (8) Only the named modules' top-level packages come from the matrix's folder
(a ``json.py`` or ``cuda/`` beside it is never imported), and a module that calls ``os._exit()`` at import or
never returns is its specs' error, named, bounded.

CLI runs are subprocesses: importing a library's modules changes ``sys.modules``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from conftest import repo_env

CONFIG_INIT = "from . import config\nconfig.BLOCK = 256\n"  # the library's __init__ sets what kernels read
CONFIG = "BLOCK = 128\n"
KERNELS = textwrap.dedent('''\
    from . import config
    SRC = f'extern "C" __global__ void k(float* x) {{ x[0] = {config.BLOCK}; }}\\n'

    def render(dtype):
        return f'extern "C" __global__ void k_{dtype}({dtype}* x) {{ x[0] = {config.BLOCK}; }}\\n'
''')


def config_project(root: Path, pkg: str, matrix: str, init: str = CONFIG_INIT) -> Path:
    (root / pkg).mkdir(parents=True)
    (root / pkg / "__init__.py").write_text(init)
    (root / pkg / "config.py").write_text(CONFIG)
    (root / pkg / "kernels.py").write_text(KERNELS)
    path = root / "build_matrix.yaml"
    path.write_text("version: 1\n" + matrix.replace("PKG", pkg))
    return path


def aot(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aot", *args], cwd=cwd, env=repo_env(), capture_output=True,
                          text=True, timeout=timeout)


# ------------------------------------------------------------------------------------------ (3) bare parents
@pytest.mark.parametrize("entry", [
    '{name: k, source: "PKG.kernels:SRC", kernels: [k]}',
    '{name: "k_{dtype}", source: "PKG.kernels:render", params: {dtype: [float]}, kernels: ["k_{dtype}"]}',
])
def test_a_parent_init_that_changes_the_text_is_refused(tmp_path, entry):
    """Before: exit 0 and ``x[0] = 128`` built, while the library (its __init__ run) compiles 256."""
    m = config_project(tmp_path / "proj", "cfglib_a", f"nvrtc:\n  - {entry}\n")
    r = aot("validate", "--matrix", str(m), cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("aot: error: ")]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "build_matrix.yaml:3: spec 'k" in lines[0] and "field 'source'" in lines[0], lines[0]
    assert "gives another text when the __init__ of its parent packages runs" in lines[0], lines[0]
    assert "import-parents = true" in lines[0], lines[0]
    # with import-parents the library's own text is built, and validates
    (m.parent / "pyproject.toml").write_text('[tool.aot]\npackage = "cfglib_a"\nimport-parents = true\n')
    r = aot("validate", "--matrix", str(m), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_parent_init_that_changes_nothing_is_fine(tmp_path):
    """A parent ``__init__`` that runs code but leaves the text alone: no refusal (the comparison ran)."""
    m = config_project(tmp_path / "proj", "cfglib_b", 'nvrtc:\n  - {name: k, source: "PKG.kernels:SRC", '
                       'kernels: [k]}\n', init="from . import config\nVERSION = '1'\n")
    r = aot("validate", "--matrix", str(m), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def _unit(source_path: str, text: str):
    from aot.core.spec import NvrtcUnit
    return NvrtcUnit(name="k", source_path=source_path, source=text, kernels=("k",), options={})


def test_the_loader_serves_the_running_librarys_text(tmp_path, monkeypatch):
    """Where the build could not import the parents (their dependencies missing there), the packaged text is the
    bare one. At run time the library's module is imported with its ``__init__``: the loader compares, warns once
    and compiles the running text; it never opens the packaged (stale) artifact. Before: the stale cubin served."""
    from aot.runtime.loader import sources
    from aot.runtime.loader.objects import SpecStatus
    sys.path.insert(0, str(tmp_path))
    monkeypatch.setattr(sys, "path", sys.path)
    config_project(tmp_path, "cfglib_rt", "")
    import cfglib_rt.kernels as live  # the library, imported as its users do: the __init__ ran
    assert "= 256" in live.SRC
    try:
        stale = _unit("cfglib_rt.kernels:SRC", live.SRC.replace("256", "128"))  # what a bare build packaged
        opened, compiled, warned = [], [], []

        class Host:
            manifest, _owner = None, None

            def device_sm(self):
                return 90

            def packaged_candidates(self, spec, sm):
                from aot.core.arch import Candidate
                return [Candidate(90, "cubin", "packaged", {"sm": 90})]

            def open_packaged(self, spec, entry, path, sm):
                opened.append(spec)
                raise AssertionError("the stale artifact was opened")

            def _warn(self, msg):
                warned.append(msg)

        monkeypatch.setattr(sources, "require_driver", lambda what: None)
        monkeypatch.setattr(sources, "require_jit", lambda *a: None)
        import aot.runtime.jit.jit as jit
        monkeypatch.setattr(jit, "nvrtc_from_cache_or_jit", lambda spec, sm: compiled.append(spec) or
                            (object(), "jit", None))
        loaded = sources.search(Host(), stale, SpecStatus("k"))
        assert loaded.source == "jit" and not opened
        assert [s.source for s in compiled] == [live.SRC]
        assert len(warned) == 1 and "cfglib_rt.kernels:SRC in this process is not the text its artifacts were " \
            "built from" in warned[0], warned
        # the same text: nothing to say, the packaged artifact is what is opened
        same = _unit("cfglib_rt.kernels:SRC", live.SRC)
        assert sources.live_unit(same, None) == (same, None)
        # a rendered unit: the function is called with its recorded arguments only inside the owner package
        rendered = _unit("cfglib_rt.kernels:render(dtype='float')", live.render("float").replace("256", "128"))
        assert sources.live_unit(rendered, None)[1] is None  # no owner: nothing called
        unit, why = sources.live_unit(rendered, "cfglib_rt")
        assert why is not None and unit.source == live.render(dtype="float")
        # a module not imported here is not checked (nothing is imported)
        assert sources.live_unit(_unit("cfglib_never.kernels:SRC", "x"), "cfglib_never") == \
            (_unit("cfglib_never.kernels:SRC", "x"), None)
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "cfglib_rt"]:
            del sys.modules[name]


# ------------------------------------------------------------------------------------------ (8) what is imported
SHADOWS = ("json", "numpy", "zipfile", "cccl_patches", "yaml")


def test_only_the_named_roots_come_from_the_matrix_folder(tmp_path):
    """``json.py``, ``numpy.py``, ``cccl_patches.py``, ``cuda/`` or ``aot/`` beside the matrix used to replace the
    real ones for aot and the modules it imported (some runs ended in tracebacks)."""
    proj = tmp_path / "proj"
    config_project(proj, "cfglib_c", 'nvrtc:\n  - {name: k, source: "PKG.kernels:SRC", kernels: [k]}\n',
                   init="")
    (proj / "cfglib_c" / "kernels.py").write_text(
        "import json, zipfile\nimport numpy\nSRC = 'extern \"C\" __global__ void k() {}\\n'\n")
    shadow = "raise RuntimeError('the matrix folder shadowed a module')\n"
    for name in SHADOWS:
        (proj / f"{name}.py").write_text(shadow)
    for pkg in ("cuda", "aot"):
        (proj / pkg).mkdir()
        (proj / pkg / "__init__.py").write_text(shadow)
    r = aot("validate", "--matrix", str(proj / "build_matrix.yaml"), cwd=tmp_path)
    assert r.returncode == 0 and "shadowed" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert "1 specs OK" in r.stdout or "1 spec OK" in r.stdout, r.stdout


def test_a_module_that_ends_the_process_at_import_fails_its_specs(tmp_path):
    """``os._exit(0)`` at import: before, ``validate`` exited 0 having checked nothing."""
    proj = tmp_path / "proj"
    config_project(proj, "cfglib_d", 'nvrtc:\n  - {name: k, source: "PKG.kernels:SRC", kernels: [k]}\n'
                   '  - {name: bye, source: "PKG.bye:SRC", kernels: [k]}\n', init="")
    (proj / "cfglib_d" / "kernels.py").write_text("SRC = 'extern \"C\" __global__ void k() {}\\n'\n")
    (proj / "cfglib_d" / "bye.py").write_text("import os\nos._exit(0)\n")
    r = aot("validate", "--matrix", str(proj / "build_matrix.yaml"), cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    failed = [ln for ln in r.stdout.splitlines() if ln.startswith("FAILED ")]
    assert len(failed) == 1 and "spec 'bye'" in failed[0], r.stdout
    assert "importing 'cfglib_d.bye' ended the Python process (exit status 0" in failed[0], failed[0]
    assert "1 spec cannot be read: bye" in r.stderr and "1 specs OK" in r.stderr, r.stderr


def test_a_module_that_never_returns_is_bounded(tmp_path):
    """An import that never returns: before, ``validate`` hung. Bounded here at 3 s (IMPORT_TIMEOUT_S)."""
    proj = tmp_path / "proj"
    config_project(proj, "cfglib_e", 'nvrtc:\n  - {name: hang, source: "PKG.hangs:SRC", kernels: [k]}\n'
                   '  - {name: k, source: "PKG.kernels:SRC", kernels: [k]}\n', init="")
    (proj / "cfglib_e" / "kernels.py").write_text("SRC = 'extern \"C\" __global__ void k() {}\\n'\n")
    (proj / "cfglib_e" / "hangs.py").write_text("import time\nwhile True:\n    time.sleep(1)\n")
    code = ("import sys, aot.build.codeimport as c; c.IMPORT_TIMEOUT_S = 3\n"
            "from aot.build.matrix import load_matrix\n"
            "m = load_matrix(sys.argv[1], partial=True)\n"
            "print(m.names()); print(m.unreadable[0].error)\n")
    r = subprocess.run([sys.executable, "-c", code, str(proj / "build_matrix.yaml")], cwd=tmp_path,
                       env=repo_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    names, error = r.stdout.splitlines()[:2]
    assert names == "['k']", r.stdout
    assert "spec 'hang'" in error and "importing 'cfglib_e.hangs' did not return within 3 s" in error, error


def test_a_probe_child_never_outlives_the_read(tmp_path):
    """The children that import first end with the read (no process left behind)."""
    import os

    from aot.build.codeimport import CodeImports
    proj = tmp_path / "proj"
    config_project(proj, "cfglib_f", "", init="")
    imports = CodeImports(proj, driver=False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert imports.attribute("cfglib_f.kernels:SRC").startswith("extern")
        pids = [p._proc.pid for p in imports._probes.values() if p._proc is not None]
        assert pids
    finally:
        imports.close()
        for name in [n for n in sys.modules if n.split(".")[0] == "cfglib_f"]:
            del sys.modules[name]
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped already


def test_build_workers_import_an_operator_from_the_matrix_folder(tmp_path):
    """The matrix's folder is not on ``sys.path``: a ``spawn``ed build worker still imports the named package
    from it (its ``sys.path`` carries the named roots' entries; it installs their finder itself)."""
    proj = tmp_path / "proj"
    (proj / "cfglib_op" / "ops").mkdir(parents=True)
    (proj / "cfglib_op" / "__init__.py").write_text("")
    (proj / "cfglib_op" / "ops" / "__init__.py").write_text("")
    (proj / "cfglib_op" / "ops" / "fns.py").write_text("def add3(a, b):\n    return a + b + 3\n")
    (proj / "build_matrix.yaml").write_text('version: 1\ncccl:\n  - {name: red_code, algorithm: reduce, dtype: int32, '
                                            'op: "cfglib_op.ops.fns:add3", init: 0}\n')
    r = aot("build", "--matrix", str(proj / "build_matrix.yaml"), "--sm", "90", "--jobs", "1", "-q", "--out",
            str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "out" / "manifest.json").is_file()
