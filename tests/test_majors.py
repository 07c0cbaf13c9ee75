"""Issue 40: a library with a ``cu12`` and a ``cu13`` extra ships with aot's hook, its pins are checked before
anything compiles (every conflict listed, each naming its extra), and ``verify --package --for-wheel`` passes
in an end user's install of a wheel that carries no CCCL blob (no cuda-cccl there).

Real components: the hatchling hook run by pip on examples/majors-mypkg (one NVRTC unit, SM 90: seconds), pip's
resolver on the wheel it builds, the example wheels of adopt-mypkg, numba-mypkg and cupy-mypkg in venvs holding
only what their requirements name (tests/example_wheels.py). The resolver runs offline against a folder of
stand-in distributions whose requirements are those of the real ones that matter here (cccl-aot-cuXX as
.ci/variant.py writes them; cuda-python pinning its major's cuda-bindings, as cuda-python 12.9/13.0 do).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from conftest import repo_env
from example_wheels import EXAMPLES, example_wheel, lean_venv, runtime_requires

PRODUCER = {"aot": "0.1.0", "cuda_cccl": "1.2.1", "cuda_major": "13", "nvrtc": "13.0"}


# ------------------------------------------------------------------------------ the pin check, as data
def test_a_cu12_and_cu13_project_passes_and_each_extra_gets_its_majors_pins():
    from aot.package.extras import marked_pins, pin_conflicts
    from aot.package.pins import pin_problems, required_pins
    optional = {"cu12": ["cuda-python>=12,<13"], "cu13": ["cuda-python>=13,<14"], "test": ["pytest"]}
    assert pin_conflicts(["numpy"], PRODUCER, require=False, cccl=False, optional=optional) == []
    # what refused it before (and still refuses it for a project without major extras)
    assert "excludes CUDA 13" in pin_problems(["numpy"], PRODUCER, require=False, cccl=False, optional=optional)[0]
    pins = marked_pins(required_pins(PRODUCER, cccl=True), PRODUCER, (12, 13), ["numba-cuda>=0.23,<1"])
    assert pins == ['cccl-aot-cu13>=0.1.0,<0.2; extra == "cu13"', 'cuda-cccl==1.2.1; extra == "cu13"',
                    'cuda-bindings>=13,<14; extra == "cu13"', 'cccl-aot-cu12>=0.1.0,<0.2; extra == "cu12"',
                    "numba-cuda>=0.23,<1"]
    assert marked_pins(["a", "b"], PRODUCER, (), ["c"]) == ["a", "b", "c"]


def test_every_conflict_is_listed_each_naming_its_extra():
    from aot.package.extras import conflict_message, pin_conflicts
    deps = ["cccl-aot-cu13", "cuda-bindings>=13"]
    optional = {"cu12": ["cuda-python>=13", "cccl-aot-cu13", "numba-cuda[cu13]"],
                "cu13": ["cuda-cccl<0.7", "cuda-python<13"], "legacy": ["cuda-cccl>=2"]}
    problems = pin_conflicts(deps, PRODUCER, require=False, cccl=True, optional=optional)
    text = conflict_message("pyproject.toml", problems)
    assert "more)" not in text and len(problems) == len(text.splitlines()) - 1, text
    import re
    found = {re.match(r"(.*?): ('[^']*')", p).groups() for p in problems}
    expected = {("[project] dependencies", "'cccl-aot-cu13'"), ("[project] dependencies", "'cuda-bindings>=13'"),
                ("[project.optional-dependencies] cu12", "'cuda-python>=13'"),
                ("[project.optional-dependencies] cu12", "'cccl-aot-cu13'"),
                ("[project.optional-dependencies] cu12", "'numba-cuda[cu13]'"),
                ("[project.optional-dependencies] cu13", "'cuda-cccl<0.7'"),
                ("[project.optional-dependencies] cu13", "'cuda-python<13'"),
                ("[project.optional-dependencies] legacy", "'cuda-cccl>=2'")}
    assert found == expected, text
    # one conflict: one line, as before
    (one,) = pin_conflicts(["numpy"], PRODUCER, cccl=False, require=False, optional={"cu12": ["cuda-python>=13"],
                                                                                         "cu13": []})
    assert "\n" not in conflict_message("p", [one]) and "cu12" in one


def test_static_metadata_names_the_pins_in_the_artifacts_majors_extra():
    from aot.package.extras import pin_conflicts
    optional = {"cu12": ["cccl-aot-cu12"], "cu13": ["cccl-aot-cu13>=0.1.0,<0.2"]}
    (missing,) = pin_conflicts(["numpy"], PRODUCER, require=True, cccl=True, optional=optional)
    assert missing.startswith("[project.optional-dependencies] cu13: no cuda-cccl pin"), missing
    optional["cu13"].append("cuda-cccl==1.2.1")
    assert pin_conflicts(["numpy"], PRODUCER, require=True, cccl=True, optional=optional) == []
    (no_cu13,) = pin_conflicts(["numpy"], PRODUCER, require=False, cccl=False, optional={"cu12": []})
    assert "no 'cu13' extra" in no_cu13


# ------------------------------------------------------------------------------ the hook, for real
def _stub_wheel(folder: Path, name: str, version: str, requires: list[str] = ()) -> None:
    dist = f"{name.replace('-', '_')}-{version}"
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as z:
        z.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
        z.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}.dist-info/RECORD", "")


def _index(folder: Path) -> Path:
    """Stand-ins for the distributions an install of the example resolves (offline)."""
    from importlib.metadata import version
    from aot.core.version import __version__
    folder.mkdir()
    for major in ("cu12", "cu13"):
        _stub_wheel(folder, f"cccl-aot-{major}", __version__, runtime_requires(major))
    for v in ("12.9.1", "13.0.0"):
        _stub_wheel(folder, "cuda-bindings", v)
        _stub_wheel(folder, "cuda-python", v.rsplit(".", 1)[0] + ".0", [f"cuda-bindings~={v.rsplit('.', 1)[0]}.0"])
    for name in ("cuda-core", "numpy", "platformdirs"):
        _stub_wheel(folder, name, version(name))
    return folder


def _resolve(whl: Path, extra: str, index: Path, tmp: Path) -> dict[str, str]:
    report = tmp / f"report-{extra}.json"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-index",
                        "--find-links", str(index), "--report", str(report), "-q", f"{whl}[{extra}]"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"pip install '{whl.name}[{extra}]':\n" + r.stdout[-3000:] + r.stderr[-3000:]
    return {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}


def test_a_cu12_and_cu13_library_builds_with_the_hook_and_both_extras_resolve(tmp_path_factory, tmp_path):
    """examples/majors-mypkg: before, the hook refused it ('cuda-python>=12,<13': excludes CUDA 13) after compiling
    everything; now its wheel names each major's requirements under that major's extra and pip resolves both."""
    whl = example_wheel(tmp_path_factory, "majors-mypkg")
    z = zipfile.ZipFile(whl)
    meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    requires = [line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    assert 'cccl-aot-cu13>=0.1.0,<0.2; extra == "cu13"' in requires, requires
    assert 'cuda-bindings>=13,<14; extra == "cu13"' in requires and 'cccl-aot-cu12>=0.1.0,<0.2; extra == "cu12"' \
        in requires, requires
    assert not [r for r in requires if "extra ==" not in r and r != "numpy"], requires  # nothing of one major for all
    info = json.loads(z.read("majors_mypkg/artifacts/aot-package.json"))
    assert info["complete"] and info["sms"] == [90] and info["producer"]["cuda_major"] == "13"
    index = _index(tmp_path / "index")
    cu12 = _resolve(whl, "cu12", index, tmp_path)
    cu13 = _resolve(whl, "cu13", index, tmp_path)
    assert cu12["cccl-aot-cu12"] and cu12["cuda-bindings"] == "12.9.1" and "cccl-aot-cu13" not in cu12, cu12
    assert cu13["cccl-aot-cu13"] and cu13["cuda-bindings"] == "13.0.0" and "cccl-aot-cu12" not in cu13, cu13


def _cccl_project(where: Path) -> Path:
    """A project whose matrix holds a cuda.compute spec (minutes of compiling for every SM) and whose
    requirements conflict in four places."""
    project = where / "conflicts"
    shutil.copytree(EXAMPLES / "majors-mypkg", project, ignore=shutil.ignore_patterns("build", "artifacts"))
    text = (project / "pyproject.toml").read_text()
    text = text.replace('dependencies = ["numpy"]', 'dependencies = ["numpy", "cccl-aot-cu13"]')
    text = text.replace('cu12 = ["cuda-python>=12,<13"]', 'cu12 = ["cuda-python>=12,<13", "cuda-cccl[cu13]"]')
    text = text.replace('cu13 = ["cuda-python>=13,<14"]', 'cu13 = ["cuda-python>=13,<14", "cuda-cccl<0.7"]\n'
                        'legacy = ["cuda-bindings<13"]')
    (project / "pyproject.toml").write_text(text)
    with open(project / "build_matrix.yaml", "a") as f:
        f.write("cccl:\n  - {name: sum_i64, algorithm: reduce, dtype: int64, op: plus, init: 0}\n")
    return project


def test_conflicts_stop_the_hook_before_anything_compiles_all_listed(tmp_path):
    """Before, the hook compiled every item first (171 s for a library-shaped set) and then said one conflict
    "(and 3 more)". Now: seconds, nothing built, every conflict on its own line naming its extra."""
    project = _cccl_project(tmp_path)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w",
                        str(tmp_path / "dist"), str(project)], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path, env=repo_env(AOT_WHEEL_SM="all"))
    seconds = time.monotonic() - t0
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "4 requirements cannot install beside the artifacts" in out, out[-3000:]
    assert "more)" not in out
    for where, req in (("[project] dependencies", "'cccl-aot-cu13'"),
                       ("[project.optional-dependencies] cu12", "'cuda-cccl[cu13]'"),
                       ("[project.optional-dependencies] cu13", "'cuda-cccl<0.7'"),
                       ("[project.optional-dependencies] legacy", "'cuda-bindings<13'")):
        assert f"{where}: {req}" in out, (where, out[-3000:])
    assert not (project / "build" / "aot" / "manifest.json").exists()  # nothing was compiled
    assert seconds < 60, seconds


# ------------------------------------------------------------------------------ verify in an end user's install
@pytest.mark.parametrize("example,package", [("adopt-mypkg", "adopt_mypkg"), ("numba-mypkg", "numba_mypkg"),
                                             ("cupy-mypkg", "cupy_mypkg")])
def test_verify_for_wheel_passes_in_a_lean_install_without_cuda_cccl(tmp_path_factory, tmp_path, example, package):
    """Before: exit 7, 'built with cuda-cccl 1.2.1, installed is missing', in every end user's install of a wheel
    without CCCL blobs. The set asks only for what it needs: its CUDA major."""
    if example == "cupy-mypkg":
        pytest.importorskip("cupy")
        from test_cupy_example import _dist_of_cupy
        if _dist_of_cupy() != "cupy-cuda13x==14.2.0":   # the matrix's release: the build refuses others
            pytest.skip(f"{_dist_of_cupy()} is not the example matrix's cupy-cuda13x==14.2.0")
    whl = example_wheel(tmp_path_factory, example)
    py = lean_venv(tmp_path / "venv", [whl])
    check = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "check"], capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    clean = {k: v for k, v in repo_env().items() if k != "PYTHONPATH"}
    probe = subprocess.run([str(py), "-c", "import importlib.util as u; print(u.find_spec('cuda.compute'))"],
                           capture_output=True, text=True, env=clean, cwd=tmp_path, timeout=120)
    assert probe.stdout.strip() == "None", probe.stdout + probe.stderr   # no cuda-cccl: a lean install
    r = subprocess.run([str(py), "-m", "aot", "verify", "--package", package, "--for-wheel"], capture_output=True,
                       text=True, env=clean, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "integrity OK" in r.stdout and "covers" in r.stdout, r.stdout
    assert str(tmp_path / "venv") in r.stdout  # the installed package's folder, not this checkout's example


def test_a_set_with_cccl_blobs_still_asks_for_its_cuda_cccl(small_build, monkeypatch):
    """The other half of the rule: a set holding a CCCL blob of one release is packageable only where that exact
    cuda-cccl is installed (its wheel pins it); without one, no cuda-cccl is asked for."""
    from aot.core import versions
    from aot.core.errors import VerificationError
    from aot.verify.gpu import check_for_wheel
    here = dict(versions.runtime_versions())
    monkeypatch.setattr(versions, "runtime_versions", lambda: {**here, "cuda_cccl": "missing"})
    with pytest.raises(VerificationError, match=f"built with cuda-cccl {here['cuda_cccl']}, installed is missing"):
        check_for_wheel(small_build.out)
