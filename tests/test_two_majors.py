"""Issue 40: one wheel warm for the users of both CUDA majors. A library with a ``cu12`` and a ``cu13`` extra ships
one wheel (as cuda-cccl, numba-cuda and cuda-core do); before, that wheel carried only the building major's
artifacts, so every ``lib[cu12]`` user of a wheel built under CUDA 13 JIT-compiled everything (the loader refused
the set: "built for CUDA 13, this environment is CUDA 12"), and ``aot merge`` refused builds of two majors.

Now ``aot merge`` of a build under each major makes a set of several majors (one set per major side by side,
:mod:`aot.core.majorset`), the hatch hook bundles it (``AOT_WHEEL_ARTIFACTS``) with each major's pins under its
extra, and the loader reads the installed major's set and ignores the other.

Real components: the cu13 set is built here by this environment's NVRTC 13 from examples/majors-mypkg; the cu12
set is ``tests/data/majors-cu12``, the same matrix built by NVRTC 12.9 (cuda-bindings 12.9, cuda-cccl 1.2.1) in a
venv of ``pip install ".[cu12]"``; regenerate it there with
``python -m aot build --matrix examples/majors-mypkg/build_matrix.yaml --sm 75,80,90 --out tests/data/majors-cu12``
(drop its build-report.json); the slow test below rebuilds it under ``AOT_TEST_CU12_PYTHON`` and compares.
The wheel is built by pip with the real hook; pip's resolver resolves both extras offline (test_majors' stand-ins).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, repo_env
from example_wheels import EXAMPLES

CU12_SET = ROOT / "tests" / "data" / "majors-cu12"
PKG = "majors_mypkg"


def _aot(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aot", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env=repo_env())


@pytest.fixture(scope="module")
def two_majors(tmp_path_factory) -> dict:
    """The cu13 build, the merged set of both majors, and the example's wheel carrying it (each major's SMs as
    the example's ``[tool.aot] sm`` names them: cu12 75,80,90, cu13 80,90,100)."""
    tmp = tmp_path_factory.mktemp("two-majors")
    project = tmp / "majors-mypkg"
    shutil.copytree(EXAMPLES / "majors-mypkg", project, ignore=shutil.ignore_patterns("build", "artifacts",
                                                                                      "__pycache__"))
    r = _aot("build", "--matrix", str(project / "build_matrix.yaml"), "--sm", "80,90,100", "--out", str(tmp / "cu13"),
             "-j", "1", "--quiet", cwd=tmp)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = _aot("merge", str(CU12_SET), str(tmp / "cu13"), "--out", str(tmp / "merged"), cwd=tmp)
    assert r.returncode == 0 and "one set per CUDA major: cu12, cu13" in r.stdout, r.stdout + r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w",
                        str(tmp / "dist"), str(project)], capture_output=True, text=True, timeout=600, cwd=tmp,
                       env=repo_env(AOT_WHEEL_ARTIFACTS=str(tmp / "merged"), SOURCE_DATE_EPOCH="1700000000"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = (tmp / "dist").glob("*.whl")
    unpacked = tmp / "unpacked"
    with zipfile.ZipFile(whl) as z:
        z.extractall(unpacked, [n for n in z.namelist() if n.startswith(f"{PKG}/")])
    return {"tmp": tmp, "merged": tmp / "merged", "wheel": whl, "folder": unpacked / PKG / "artifacts"}


def test_the_wheel_carries_both_majors_sets_each_pinned_under_its_extra(two_majors, tmp_path):
    z = zipfile.ZipFile(two_majors["wheel"])
    art = sorted(n.split("/artifacts/", 1)[1] for n in z.namelist() if "/artifacts/" in n)
    assert art == ["aot-package.json", "cu12/aot-package.json", "cu12/hit-index.json", "cu12/manifest.json",
                   "cu12/nvrtc/scale/compute_75.ptx.aot", "cu12/nvrtc/scale/sm_75.cubin.aot",
                   "cu12/nvrtc/scale/sm_80.cubin.aot", "cu12/nvrtc/scale/sm_90.cubin.aot",
                   "cu13/aot-package.json", "cu13/hit-index.json", "cu13/manifest.json",
                   "cu13/nvrtc/scale/compute_80.ptx.aot",
                   "cu13/nvrtc/scale/sm_100.cubin.aot", "cu13/nvrtc/scale/sm_80.cubin.aot",
                   "cu13/nvrtc/scale/sm_90.cubin.aot", "manifest.json"], art
    index = json.loads(z.read(f"{PKG}/artifacts/manifest.json"))
    assert index == {"format": "aot-majors", "manifest_version": 1, "majors": {"12": "cu12", "13": "cu13"}}
    info = json.loads(z.read(f"{PKG}/artifacts/aot-package.json"))
    assert {m: i["producer"]["nvrtc"] for m, i in info["majors"].items()} == {"12": "12.9", "13": "13.0"}
    meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    requires = [line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    for major in (12, 13):
        assert f'cccl-aot-cu{major}>=0.1.0,<0.2; extra == "cu{major}"' in requires, requires
        assert f'cuda-bindings>={major},<{major + 1}; extra == "cu{major}"' in requires, requires
    assert not [r for r in requires if "cuda-cccl" in r], requires  # NVRTC units only: no cuda-cccl
    from test_majors import _index, _resolve
    index_dir = _index(tmp_path / "index")
    cu12 = _resolve(two_majors["wheel"], "cu12", index_dir, tmp_path)
    cu13 = _resolve(two_majors["wheel"], "cu13", index_dir, tmp_path)
    assert cu12["cuda-bindings"] == "12.9.1" and "cccl-aot-cu13" not in cu12, cu12
    assert cu13["cuda-bindings"] == "13.0.0" and "cccl-aot-cu12" not in cu13, cu13


def _as_major(monkeypatch, major: str) -> None:
    """This process as an install of CUDA ``major`` (cuda-bindings' major: what the loader reads)."""
    from aot.core import versions
    here = dict(versions.runtime_versions())
    monkeypatch.setattr(versions, "runtime_versions", lambda: {**here, "cuda_major": major})
    monkeypatch.setattr(versions, "cuda_major", lambda: major)


@pytest.mark.parametrize("major,nvrtc", [("12", "12.9"), ("13", "13.0")])
def test_each_majors_install_serves_its_own_majors_artifacts(two_majors, monkeypatch, major, nvrtc):
    """Before: the wheel's one set was of the building major, and an install of the other refused every artifact
    ("built for CUDA 13, this environment is CUDA 12"): all JIT. Now the lookup of each install picks its major's."""
    from aot.core import format as fmt
    from aot.runtime.loader.registry import Registry
    from aot.runtime.loader.sources import check_packaged, packaged_candidates
    _as_major(monkeypatch, major)
    folder = two_majors["folder"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the other major's set: ignored, no warning
        reg = Registry(folder)
        assert reg.names() == ["scale"] and reg.manifest.root == folder / f"cu{major}"
        spec = reg.spec("scale")
        best, *_ = cands = packaged_candidates(reg.manifest, spec, 90)
        assert [(c.sm, c.kind) for c in cands][:1] == [(90, "cubin")]
        for c in cands:
            path = reg.manifest.path_of(c.ref)
            assert path.is_relative_to(folder / f"cu{major}")
            art = check_packaged(reg.manifest, spec, c.ref, path)  # key, producer: what the loader checks
            assert art.header["producer"]["cuda_major"] == major and art.header["producer"]["nvrtc"] == nvrtc
        assert fmt.read(reg.manifest.path_of(best.ref)).kind == "cubin"


@pytest.mark.parametrize("major", ["14", "missing"])
def test_a_set_without_the_installed_major_is_ignored_not_an_error(two_majors, monkeypatch, major):
    """No set for this major (or no cuda-bindings at all): the spec names resolve (they JIT), no artifact is
    offered, and nothing warns."""
    from aot.runtime.loader.registry import Registry
    from aot.runtime.loader.sources import packaged_candidates
    _as_major(monkeypatch, major)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = Registry(two_majors["folder"])
        assert reg.names() == ["scale"]
        assert packaged_candidates(reg.manifest, reg.spec("scale"), 90) == []


def test_verify_for_wheel_checks_this_majors_set_and_the_others_integrity(two_majors):
    r = _aot("verify", str(two_majors["wheel"]), "--for-wheel", cwd=two_majors["tmp"])  # as docs/wheels.md runs it
    assert r.returncode == 0, r.stdout + r.stderr
    assert "folder majors_mypkg/artifacts/cu13: covers 1 specs x SMs 80,90,100" in r.stdout, r.stdout
    assert "cu12: CUDA 12's set, integrity only" in r.stdout and "cu12: 4 artifacts, integrity OK" in r.stdout
    damaged = two_majors["tmp"] / "damaged"
    shutil.copytree(two_majors["folder"], damaged)
    (damaged / "cu12" / "nvrtc" / "scale" / "sm_80.cubin.aot").write_bytes(b"AOT")
    r = _aot("verify", str(damaged), cwd=two_majors["tmp"])
    assert r.returncode != 0 and "cu12" in r.stdout + r.stderr and "sm_80.cubin.aot" in r.stdout + r.stderr


def test_a_build_under_cuda_13_merging_the_cu12_set_carries_both(tmp_path):
    """The other way to the same wheel: the hook builds under this major and merges the other's set in
    (``AOT_WHEEL_MERGE``); the pin check skips the other major's releases before the build and reads each major's
    set after the merge."""
    project = tmp_path / "majors-mypkg"
    shutil.copytree(EXAMPLES / "majors-mypkg", project, ignore=shutil.ignore_patterns("build", "artifacts",
                                                                                      "__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w",
                        str(tmp_path / "dist"), str(project)], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path, env=repo_env(AOT_WHEEL_MERGE=str(CU12_SET), SOURCE_DATE_EPOCH="1700000000"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = (tmp_path / "dist").glob("*.whl")
    z = zipfile.ZipFile(whl)
    info = json.loads(z.read(f"{PKG}/artifacts/aot-package.json"))
    assert {m: (i["producer"]["nvrtc"], i["sms"]) for m, i in info["majors"].items()} == {
        "12": ("12.9", [75, 80, 90]), "13": ("13.0", [80, 90, 100])}, info
    meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert 'Requires-Dist: cuda-bindings>=12,<13; extra == "cu12"' in meta, meta


# ------------------------------------------------------------------------------ untrusted input, merge
def test_a_crafted_index_is_refused_in_one_line_and_the_loader_warns_and_jits(tmp_path, monkeypatch):
    from aot.core.errors import ArtifactError
    from aot.core.manifest import load_manifest
    from aot.runtime.loader.registry import Registry
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "aot-majors", "manifest_version": 1,
                                                        "majors": {"13": "../../elsewhere"}}))
    with pytest.raises(ArtifactError, match="field 'majors' must map each CUDA major to its folder"):
        load_manifest(tmp_path, major="13")
    _as_major(monkeypatch, "13")
    with pytest.warns(Warning, match="ignoring packaged artifacts: .*field 'majors'"):
        assert Registry(tmp_path).names() == []
    nested = tmp_path / "nested"
    (nested / "cu13").mkdir(parents=True)
    for d in (nested, nested / "cu13"):
        (d / "manifest.json").write_text(json.dumps({"format": "aot-majors", "manifest_version": 1,
                                                     "majors": {"13": "cu13"}}))
    with pytest.raises(ArtifactError, match="a set of CUDA majors 13, one folder each"):
        load_manifest(nested, major="13")  # an index inside an index: never followed


def test_merge_keeps_majors_apart_and_refuses_a_major_that_is_no_number(two_majors, tmp_path):
    from aot.build.merge import merge
    from aot.core.errors import ArtifactError
    again = merge([two_majors["merged"], CU12_SET], tmp_path / "again")  # a merged set is an input like any
    assert again["cuda_majors"] == [12, 13] and again["artifacts"] == 8
    assert sorted(p.name for p in (tmp_path / "again").iterdir()) == ["cu12", "cu13", "manifest.json"]
    crafted = tmp_path / "crafted"
    shutil.copytree(CU12_SET, crafted)
    doc = json.loads((crafted / "manifest.json").read_text())
    doc["producer"]["cuda_major"] = "1/../../x"
    (crafted / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="field 'cuda_major' of 'producer' is .*not a CUDA major"):
        merge([crafted, two_majors["tmp"] / "cu13"], tmp_path / "out")
    assert not (tmp_path / "out" / "manifest.json").exists() and not (tmp_path / "x").exists()
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "cu12").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(ArtifactError, match="cu12 is a link or a file"):
        merge([CU12_SET, two_majors["tmp"] / "cu13"], tmp_path / "linked")
    assert not (tmp_path / "elsewhere").exists()


# ------------------------------------------------------------------------------ pins per extra, as data
P12 = {"aot": "0.1.0", "cuda_cccl": "1.2.1", "cuda_major": "12", "nvrtc": "12.9"}
P13 = {"aot": "0.1.0", "cuda_cccl": "1.2.1", "cuda_major": "13", "nvrtc": "13.0"}


def test_each_majors_extra_is_checked_against_its_own_sets_pins():
    from aot.package.extras import marked_pins_majors, pin_conflicts_majors
    parts = {12: (P12, True, ["1.2.1"]), 13: (P13, False, None)}
    good = {"cu12": ["cuda-python>=12,<13"], "cu13": ["cuda-python>=13,<14"]}
    assert pin_conflicts_majors(["numpy"], parts, require=False, optional=good) == []
    bad = {"cu12": ["cuda-python>=13", "cuda-cccl<1.2"], "cu13": ["cuda-python<13"]}
    problems = pin_conflicts_majors(["numpy"], parts, require=False, optional=bad)
    assert {p.split(": '")[0] + ": '" + p.split(": '")[1].split("'")[0] for p in problems} == {
        "[project.optional-dependencies] cu12: 'cuda-python>=13", "[project.optional-dependencies] cu12: "
        "'cuda-cccl<1.2", "[project.optional-dependencies] cu13: 'cuda-python<13"}, problems
    (none,) = pin_conflicts_majors(["numpy"], parts, require=False, optional={})
    assert "CUDA 12 and 13, one set each" in none and "'cu12' or 'cu13' extra" in none
    assert marked_pins_majors({12: ["a"], 13: ["b"]}, "0.1.0", (12, 13), ["n"]) == \
        ['a; extra == "cu12"', 'b; extra == "cu13"', "n"]


# ------------------------------------------------------------------------------ the setuptools backend
def test_the_setuptools_backend_reads_cu12_and_cu13_extras_as_the_hook_does(tmp_path):
    """Before: the setuptools backend read a cu12/cu13 project as one of the building major and refused it
    ("'cuda-python>=12,<13': excludes CUDA 13"), one conflict at a time ("and N more")."""
    from test_newcomer45 import _bdist_wheel_ok, _pip_wheel
    if not _bdist_wheel_ok():
        pytest.skip("setuptools >= 70.1 (the test extra) builds wheels without the `wheel` package")
    project = tmp_path / "setuptools-mypkg"
    shutil.copytree(EXAMPLES / "setuptools-mypkg", project,
                    ignore=shutil.ignore_patterns("build", "artifacts", "dist", "*.egg-info"))
    text = (project / "pyproject.toml").read_text()
    text = text.replace('dependencies = ["cccl-aot-cu13", "numpy"]', 'dependencies = ["numpy"]')
    text = text.replace('jit = ["cccl-aot-cu13[jit-nvrtc]"]', 'cu12 = ["cuda-python>=13"]\n'
                        'cu13 = ["cuda-python<13"]')
    (project / "pyproject.toml").write_text(text)
    r = _pip_wheel(project, tmp_path / "dist")
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "2 requirements cannot install beside the artifacts" in out, out[-3000:]
    assert "more)" not in out
    assert "[project.optional-dependencies] cu12: 'cuda-python" in out and \
        "[project.optional-dependencies] cu13: 'cuda-python" in out, out[-3000:]
    text = text.replace('cu12 = ["cuda-python>=13"]', 'cu12 = ["cuda-python>=12,<13"]')
    (project / "pyproject.toml").write_text(text.replace('cu13 = ["cuda-python<13"]', 'cu13 = ["cuda-python>=13"]'))
    r = _pip_wheel(project, tmp_path / "dist")
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    (whl,) = (tmp_path / "dist").glob("*.whl")
    z = zipfile.ZipFile(whl)
    meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    requires = [line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    assert 'cccl-aot-cu13>=0.1.0,<0.2; extra == "cu13"' in requires and \
        'cuda-bindings>=13,<14; extra == "cu13"' in requires and \
        'cccl-aot-cu12>=0.1.0,<0.2; extra == "cu12"' in requires, requires
    assert not [r for r in requires if "extra ==" not in r and r != "numpy"], requires


# ------------------------------------------------------------------------------ the cu12 set, rebuilt
@pytest.mark.slow
def test_the_cu12_set_is_what_nvrtc_12_builds(tmp_path):
    """``AOT_TEST_CU12_PYTHON``: the python of a venv of ``pip install ".[cu12]"`` (NVRTC 12.9)."""
    py = os.environ.get("AOT_TEST_CU12_PYTHON")
    if not py:
        pytest.skip("AOT_TEST_CU12_PYTHON names no CUDA 12 python")
    project = tmp_path / "majors-mypkg"
    shutil.copytree(EXAMPLES / "majors-mypkg", project, ignore=shutil.ignore_patterns("build", "artifacts"))
    r = subprocess.run([py, "-m", "aot", "build", "--matrix", str(project / "build_matrix.yaml"), "--sm", "75,80,90",
                        "--out", str(tmp_path / "cu12"), "-j", "1", "--quiet"], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path, env=repo_env())
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]

    def entries(d: Path) -> list:
        return sorted((a["path"], a["sha256"], a["content_key"]) for a in
                      json.loads((d / "manifest.json").read_text())["artifacts"])
    assert entries(tmp_path / "cu12") == entries(CU12_SET)
