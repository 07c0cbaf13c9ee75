"""examples/lib-mypkg, a library shaped like the public GPU geospatial library of issue 27: its
``__init__`` imports a heavy dependency the build lacks (``heavydep``, a stub kept in ``stubs/`` and put
on PYTHONPATH only for the library's own tests) and ``cuda.compute``; 39 NVRTC units across seven modules
(constants, concatenations of shared device functions, per-dtype functions), one compile function; CCCL
call sites. Its matrix is what ``aot record`` wrote over its tests (tests/test_record.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from isolated_env import check_wheel, example_wheel
from test_record import EXAMPLE, example_copy, example_env, toolkit_env


def test_the_library_cannot_import_without_its_heavy_dependency(tmp_path):
    project = example_copy(tmp_path)
    env = toolkit_env()
    env["PYTHONPATH"] = f"{project}:{env['PYTHONPATH']}"
    r = subprocess.run([sys.executable, "-c", "import mylib"], cwd=project, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode != 0 and "No module named 'heavydep'" in r.stderr, r.stderr[-2000:]
    assert not (EXAMPLE / "mylib" / "heavydep").exists() and "heavydep" not in (EXAMPLE / "pyproject.toml").read_text() \
        .split("[tool.hatch.build.targets.wheel]")[1]


def test_the_library_tests_pass_on_the_cpu(tmp_path):
    """Its compile-only tests run here (NVRTC needs no GPU); GPU and CCCL-build tests skip themselves."""
    project = example_copy(tmp_path)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd=project,
                       env=example_env(project), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "3 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


def test_the_matrix_names_at_least_30_sources_in_several_modules():
    import yaml
    doc = yaml.safe_load((EXAMPLE / "build_matrix.yaml").read_text())
    units = sum(len(next(iter(e["params"].values()))) if isinstance(e.get("params"), dict) and
                isinstance(next(iter(e["params"].values())), list) else 1 for e in doc["nvrtc"])
    modules = {e["source"].split(":")[0] for e in doc["nvrtc"]}
    assert units == 39 and len(modules) == 7, (units, modules)
    assert any("params" in e for e in doc["nvrtc"]) and len(doc["cccl"]) == 4


@pytest.mark.slow  # one of every example's isolated wheels (tests/test_isolated.py): the slow job's
def test_the_wheel_builds_in_isolation_without_the_heavy_dependency(isolated):
    """`pip wheel .` from a bare environment (the session's wheelhouse, tests/isolated_env.py): only `[build-system]
    requires` is installed, so `heavydep` is absent. Needs the build to import `mylib.kernels.distance`
    without running `mylib/__init__.py` (issue 27 item 1, the import branch; in the default run:
    tests/test_matrix_imports.py, tests/test_import_rule.py)."""
    info = check_wheel(example_wheel(isolated, "lib-mypkg"))
    assert len(info["specs"]) == 43, sorted(info["specs"])
