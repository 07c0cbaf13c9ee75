"""examples/cupy-mypkg as its users get it (issue 35): the matrix recorded on a GPU machine is committed with the
kernels' sources, validates, and the project's wheel (the aot hatch hook, built on this driverless host by
``pip wheel --no-build-isolation``) carries a cubin per entry for the SMs asked, the same bytes and keys as
``aot build`` of that matrix; the wheel requires CuPy as a range, as a library declares it.

CuPy finding those keys on a GPU is ``.ci/gpu/cupy_check.sh --wheel`` (docs/cupy.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile

import pytest

from conftest import ROOT, repo_env

EXAMPLE = ROOT / "examples" / "cupy-mypkg"
#: What the GPU machine's recording gave (CuPy 14.2.0, NVRTC 13.0.88): float32 and float64 of every public call.
ENTRIES = 23


def test_the_recorded_matrix_is_committed_with_its_sources_and_validates():
    from aot.build.matrix import load_matrix
    text = (EXAMPLE / "build_matrix.yaml").read_text()
    assert text.startswith("# Written by `aot record` from: python3 -m cupy_mypkg.workload float32 float64\n")
    assert f"{ENTRIES} CuPy compiles seen, {ENTRIES} entries" in text.splitlines()[1]
    specs = load_matrix(EXAMPLE / "build_matrix.yaml").specs
    assert len(specs) == ENTRIES and {s.family for s in specs} == {"cupy"}
    assert {s.cupy for s in specs} == {"14.2.0"}
    sources = sorted(p.name for p in (EXAMPLE / "cupy-kernels").glob("*.cu"))
    assert sources == sorted(f"{s.name}.cu" for s in specs)
    # the library's own kernels are among them, per dtype; int32 is left to CuPy (the GPU check's unpackaged case)
    names = {s.name for s in specs}
    assert {"cupy_mypkg_saxpy.0", "cupy_mypkg_saxpy.1", "cupy_cub_mypkg_sumsq_pass1.0"} <= names
    assert not any("int32_int32" in n for n in names)


def test_the_project_declares_the_hook_and_cupy_as_a_range():
    from packaging.requirements import Requirement
    from aot.package.config import load_config
    doc = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    assert "hatch" in doc["tool"] and "aot" in doc["tool"]["hatch"]["build"]["hooks"]
    cfg = load_config(EXAMPLE)
    assert cfg.package == "cupy_mypkg" and cfg.matrix == EXAMPLE / "build_matrix.yaml"
    reqs = {Requirement(r).name: Requirement(r) for r in doc["project"]["dependencies"]}
    cupy = reqs["cupy-cuda13x"]
    assert cupy.specifier.contains("14.2.0") and cupy.specifier.contains("14.3.0")   # a range, not the build's pin
    assert "cccl-aot-cu13" in reqs
    # `pip wheel --no-build-isolation` needs these in the build environment; isolated builds get CuPy through
    # cccl-aot-cu13's cu13 extra (the exact release the matrix was recorded with)
    assert any(r.startswith("cccl-aot-cu13[cu13") for r in doc["build-system"]["requires"])
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["cu13"]
    assert "cupy-cuda13x==14.2.0" in extra


def _dist_of_cupy() -> str:
    from importlib.metadata import PackageNotFoundError, version
    for name in ("cupy-cuda13x", "cupy-cuda12x", "cupy"):
        try:
            return f"{name}=={version(name)}"
        except PackageNotFoundError:
            continue
    return ""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The example's wheel for SM 90, built as the GPU check's wheel is built, from a copy (the hook stages under
    the project's build/); and `aot build` of the committed matrix for SM 90, for comparison."""
    pytest.importorskip("cupy")
    pytest.importorskip("hatchling")
    if _dist_of_cupy() != "cupy-cuda13x==14.2.0":   # the matrix's release: the build refuses others
        pytest.skip(f"{_dist_of_cupy()} is not the matrix's cupy-cuda13x==14.2.0")
    from example_wheels import example_wheel
    tmp = tmp_path_factory.mktemp("cupy-example")
    whl = example_wheel(tmp_path_factory, "cupy-mypkg", "90")  # one build per session (tests/test_majors.py too)
    r = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(EXAMPLE / "build_matrix.yaml"),
                        "--sm", "90", "--jobs", "1", "-q", "--out", str(tmp / "rebuild")], env=repo_env(),
                       capture_output=True, text=True, timeout=600, cwd=tmp)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return whl, tmp / "rebuild"


def test_the_wheel_carries_every_entry_for_sm90_and_the_same_keys_as_a_rebuild(wheel):
    from aot.core.manifest import load_manifest
    whl, rebuild = wheel
    z = zipfile.ZipFile(whl)
    names = z.namelist()
    art = "cupy_mypkg/artifacts/"
    assert {n for n in names if not n.startswith(art + "cupy/")} >= {
        "cupy_mypkg/__init__.py", "cupy_mypkg/ops.py", "cupy_mypkg/workload.py", art + "manifest.json",
        art + "aot-package.json"}
    assert not any("cupy-kernels" in n or n.endswith(".cu") for n in names)   # sources stay in the sdist
    man = json.loads(z.read(art + "manifest.json"))
    info = json.loads(z.read(art + "aot-package.json"))
    assert info["complete"] and info["sms"] == [90] and info["package"] == "cupy_mypkg"
    assert len(man["artifacts"]) == ENTRIES
    assert {(a["family"], a["sm"], a["payload_kind"]) for a in man["artifacts"]} == {("cupy", 90, "cubin")}
    assert sorted(n for n in names if n.startswith(art + "cupy/")) == sorted(
        art + a["path"] for a in man["artifacts"])
    # the wheel's kernels are `aot build`'s of the committed matrix: the same bytes, content keys and CuPy keys
    ref = load_manifest(rebuild)
    key = ("name", "sm", "sha256", "content_key", "cupy_key", "path")
    assert sorted(tuple(a[k] for k in key) for a in man["artifacts"]) == sorted(
        tuple(a[k] for k in key) for a in ref.artifacts)
    for a in man["artifacts"]:
        assert z.read(art + a["path"]) == (rebuild / a["path"]).read_bytes()
    # what installing it requires: CuPy as the project wrote it, aot's runtime range from the hook
    meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    requires = [line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Requires-Dist: ")]
    assert "cupy-cuda13x>=13.6" in requires and any(r.startswith("cccl-aot-cu13>=") for r in requires)
    assert not any(r.startswith("cuda-cccl") for r in requires)   # no CCCL artifact, no cuda-cccl pin


def test_the_installed_wheel_attaches_its_kernels_at_cupys_compile_call_without_a_gpu(wheel, tmp_path):
    """``pip install --target`` as .ci/gpu/cupy_check.sh --wheel installs it: importing the package makes its
    registry (23 specs) and puts aot's observer on CuPy's hash; nothing asks for a device."""
    whl, _ = wheel
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
                        str(site), str(whl)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    code = ("import cupy_mypkg; from cupy.cuda import compiler; "
            "print(len(cupy_mypkg.registry.names()), compiler._hash_hexdigest.__module__.split('.')[0])")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path,
                       env=repo_env(PYTHONPATH=f"{site}{os.pathsep}{ROOT}"), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.split() == [str(ENTRIES), "aot"], r.stdout + r.stderr


def test_the_ci_examples_job_builds_every_example_package():
    """.github/workflows/ci.yml's examples job lists every example with a pyproject.toml (this one included)."""
    import yaml
    job = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())["jobs"]["examples"]
    listed = job["strategy"]["matrix"]["example"]
    from isolated_env import BUILT_ELSEWHERE  # built in a job of their own (their build stack excludes aot's cu13)
    assert sorted(listed) == sorted(p.parent.name for p in (ROOT / "examples").glob("*/pyproject.toml")
                                    if p.parent.name not in BUILT_ELSEWHERE)
    assert any("cupy_mypkg" in s.get("run", "") for s in job["steps"] if "cupy-mypkg" in s.get("if", ""))
