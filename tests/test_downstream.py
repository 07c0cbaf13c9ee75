"""Downstream packages ship their own kernels (issue 9): the example projects under examples/ built with
their real backends (hatchling + aot's build hook, scikit-build-core + aot's CMake module), installed into
a fresh environment and checked from there; [tool.aot] validation; pins; coverage; Registry.from_package.

The build backends find aot's hooks through entry points (hatch, cmake.module). In a source checkout
there is no installed aot carrying them, so the tests put a metadata-only dist-info on PYTHONPATH, next
to the checkout: the same thing an editable install does. One SM (AOT_WHEEL_SM=80) keeps it fast.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, repo_env

EXAMPLES = ROOT / "examples"
SM = "80"


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("shim")
    info = d / "cccl_aot-0.0.dev0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cccl-aot\nVersion: 0.0.dev0\n")
    (info / "entry_points.txt").write_text("[cmake.module]\naot = aot.cmake\n\n[hatch]\naot = aot._hatch\n")
    return d


def _env(shim: Path, **extra: str) -> dict:
    env = repo_env(AOT_WHEEL_SM=SM, SOURCE_DATE_EPOCH="1700000000", **extra)
    env["PYTHONPATH"] += os.pathsep + str(shim)
    return env


def _wheel(project: Path, out: Path, shim: Path) -> Path:
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w",
                        str(out), str(project)], env=_env(shim), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = out.glob("*.whl")
    return whl


@pytest.fixture(scope="module")
def wheels(tmp_path_factory, shim) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("downstream")
    out = {}
    for name in ("hatch-mypkg", "skbuild-mypkg"):
        project = base / name
        shutil.copytree(EXAMPLES / name, project, ignore=shutil.ignore_patterns("build", "artifacts"))
        out[name] = _wheel(project, base / f"wheel-{name}", shim)
    return out


@pytest.fixture(scope="module")
def fresh_env(wheels, tmp_path_factory) -> Path:
    """A new environment holding only the two example wheels; cuda-cccl & co. come from the test
    environment through a .pth file (after the new environment's own site-packages)."""
    d = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(d)
    py = d / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    outer = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "zz_outer.pth").write_text(outer + "\n")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                        "--no-index", *map(str, wheels.values())], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return py


def _run(py: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(py), *args], capture_output=True, text=True, cwd=cwd, env=repo_env(), timeout=300)


PKG = {"hatch-mypkg": "mypkg_hatch", "skbuild-mypkg": "mypkg_skbuild"}


@pytest.mark.parametrize("example", sorted(PKG))
def test_wheel_holds_only_manifest_and_artifacts_and_pins_cccl(wheels, example):
    from aot.compat import dist_version
    whl = wheels[example]
    assert whl.name.endswith("-py3-none-linux_x86_64.whl"), whl.name
    z = zipfile.ZipFile(whl)
    pkg = PKG[example]
    data = sorted(n for n in z.namelist() if n.startswith(f"{pkg}/artifacts/"))
    rest = [n[len(f"{pkg}/artifacts/"):] for n in data]
    assert "manifest.json" in rest and "aot-package.json" in rest
    assert all(n in ("manifest.json", "aot-package.json") or n.endswith(".aot") for n in rest), rest
    assert not [n for n in z.namelist() if "build-report" in n or "/build/" in n]
    manifest = json.loads(z.read(f"{pkg}/artifacts/manifest.json"))
    assert sorted(f"{pkg}/artifacts/{a['path']}" for a in manifest["artifacts"]) == \
        sorted(n for n in data if n.endswith(".aot"))
    assert "/tmp" not in z.read(f"{pkg}/artifacts/manifest.json").decode()
    info = json.loads(z.read(f"{pkg}/artifacts/aot-package.json"))
    assert info["complete"] and info["sms"] == [int(SM)] and info["cuda_major"] == "13"
    assert len(info["specs"]) == 3 and sum(s["family"] == "cccl" for s in info["specs"].values()) == 2
    meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    requires = [ln.split(":", 1)[1].strip() for ln in meta.splitlines() if ln.startswith("Requires-Dist:")]
    assert f"cuda-cccl[cu13]=={dist_version('cuda-cccl')}" in requires, requires


def test_examples_have_their_own_specs_and_a_lambda():
    from aot.matrix import load_matrix
    default = set(load_matrix().names())
    for example in PKG:
        m = load_matrix(EXAMPLES / example / "build_matrix.yaml")
        cccl = [s for s in m.specs if s.family == "cccl"]
        assert len(cccl) >= 2 and not {s.name for s in cccl} & default
        assert any(str(s.params.get("op", "")).startswith("lambda") for s in cccl)
        assert any(s.family == "nvrtc" for s in m.specs)


def test_installed_wheels_name_their_specs_and_verify(fresh_env, tmp_path):
    code = ("import json, mypkg_hatch, mypkg_skbuild; print(json.dumps([mypkg_hatch.registry.names(), "
            "mypkg_skbuild.registry.names(), str(mypkg_hatch.registry.root)]))")
    r = _run(fresh_env, "-W", "error", "-c", code, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    hatch, skb, root = json.loads(r.stdout)
    assert hatch == ["axpy", "product_i32", "running_max_i64"]
    assert skb == ["clamp", "max_f32", "select_positive_mult3_i64"]
    assert "site-packages" in root
    for pkg in PKG.values():
        v = _run(fresh_env, "-m", "aot", "verify", "--package", pkg, "--for-wheel", cwd=tmp_path)
        assert v.returncode == 0 and "integrity OK" in v.stdout, v.stdout + v.stderr
        i = _run(fresh_env, "-m", "aot", "inspect", "--package", pkg, cwd=tmp_path)
        assert i.returncode == 0 and "complete" in i.stdout and "cuda-cccl 1.2.1" in i.stdout, i.stdout + i.stderr


def test_inspect_a_wheel_is_titled_with_its_name(wheels, tmp_path):
    whl = wheels["hatch-mypkg"]
    r = subprocess.run([sys.executable, "-m", "aot", "inspect", str(whl)], capture_output=True, text=True,
                       env=repo_env(COLUMNS="200"), cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert whl.name in r.stdout and "aot-wheel-" not in r.stdout and "complete" in r.stdout


def test_hatch_wheel_is_reproducible(wheels, shim, tmp_path):
    """Same sources, SOURCE_DATE_EPOCH: the same bytes (the second build reuses the build folder)."""
    project = wheels["hatch-mypkg"].parent.parent / "hatch-mypkg"
    again = _wheel(project, tmp_path / "again", shim)
    assert again.read_bytes() == wheels["hatch-mypkg"].read_bytes()
