"""Wheels (issue 4): artifacts bundled by scikit-build-core, installed into a fresh venv and checked from
there; reproducible wheels and artifacts; sharded build + merge equals the unsharded build byte for byte."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from aot.build.builder import build, plan
from aot.build.merge import merge
from aot.core.errors import ArtifactError

ROOT = Path(__file__).resolve().parent.parent


def _pip_wheel(out: Path, **env) -> Path:
    e = dict(os.environ, SOURCE_DATE_EPOCH="1700000000", **env)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w",
                        str(out), str(ROOT)], env=e, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = out.glob("*.whl")
    return whl


@pytest.fixture(scope="module")
def wheels(small_build, tmp_path_factory):
    base = tmp_path_factory.mktemp("wheels")
    return [_pip_wheel(base / f"w{i}", AOT_WHEEL_ARTIFACTS=str(small_build.out)) for i in (1, 2)]


@pytest.fixture(scope="module")
def fresh_venv(wheels, tmp_path_factory) -> Path:
    """A new virtual environment with only the wheel (no dependencies: the checks below need none)."""
    d = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(d)
    py = d / "bin" / "python"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheels[0])],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return py


def _run(py: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(py), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_wheel_is_reproducible_and_tagged(wheels):
    a, b = wheels
    assert a.read_bytes() == b.read_bytes()
    assert re.fullmatch(r"cccl_aot-[0-9.]+-py3-none-linux_x86_64\.whl", a.name), a.name
    names = zipfile.ZipFile(a).namelist()
    assert "aot/artifacts/manifest.json" in names
    assert "cccl_patches/lib/libcuda.so.1" in names
    assert {f"cccl_patches/lib/lib{lib}.so.{major}" for lib in ("nvrtc", "nvJitLink", "cudart")
            for major in (12, 13)} <= set(names)  # the runtime-only install's stand-ins (tests/test_lean.py)
    assert "aot/default_specs.json" in names
    assert "aot/build_matrix.yaml" in names
    assert not [n for n in names if "__pycache__" in n or n.startswith("tests/")]


def test_installed_wheel_lists_and_verifies(fresh_venv, small_build, tmp_path):
    code = ("import aot, json; from aot.runtime.loader.registry import Registry; r = Registry.from_package('aot', 'artifacts');"
            "print(json.dumps([r.names(), str(r.root), len(r.manifest.artifacts)]))")
    out = _run(fresh_venv, "-c", code, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    names, root, n = json.loads(out.stdout)
    assert sorted(names) == sorted(s.name for s in small_build.specs)
    assert "site-packages" in root and n == len(plan(small_build.specs, list(small_build.sms)))
    ok = _run(fresh_venv, "-m", "aot", "verify", "--default", cwd=tmp_path)
    assert ok.returncode == 0 and "integrity OK" in ok.stdout, ok.stdout + ok.stderr


def test_changed_byte_in_installed_artifact_is_caught(fresh_venv, tmp_path):
    root = Path(_run(fresh_venv, "-c", "import aot, pathlib; print(pathlib.Path(aot.__file__).parent)",
                     cwd=tmp_path).stdout.strip()) / "artifacts"
    victim = root / "nvrtc" / "morton" / "sm_90.cubin.aot"
    data = bytearray(victim.read_bytes())
    data[-10] ^= 0x01
    original = victim.read_bytes()
    victim.write_bytes(bytes(data))
    try:
        bad = _run(fresh_venv, "-m", "aot", "verify", "--default", cwd=tmp_path)
        assert bad.returncode == 7, bad.stdout + bad.stderr
        assert "nvrtc/morton/sm_90.cubin.aot" in bad.stdout and "sha256" in bad.stdout
    finally:
        victim.write_bytes(original)


def test_verify_a_wheel_file_directly(wheels, capsys):
    from aot.cli.main import main
    assert main(["verify", str(wheels[0])]) == 0
    assert "integrity OK" in capsys.readouterr().out


def test_wheel_refuses_a_shard(small_build, tmp_path):
    shard = tmp_path / "shard"
    shutil.copytree(small_build.out, shard)
    doc = json.loads((shard / "manifest.json").read_text())
    doc["shard"] = "1/2"
    (shard / "manifest.json").write_text(json.dumps(doc))
    e = dict(os.environ, AOT_WHEEL_ARTIFACTS=str(shard))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w",
                        str(tmp_path / "w"), str(ROOT)], env=e, capture_output=True, text=True, timeout=600)
    assert r.returncode != 0
    assert "shard" in (r.stdout + r.stderr)


def _seed(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst)
    (dst / "manifest.json").unlink()


def test_sharded_build_merges_to_the_unsharded_bytes(small_build, tmp_path):
    shards = []
    for k in (1, 2):
        d = tmp_path / f"shard{k}"
        _seed(small_build.out, d)  # identical inputs, so every shard item is an incremental hit
        rep = build(small_build.specs, list(small_build.sms), d, jobs=1, shard=(k, 2))
        assert rep.items and all(r.status == "hit" for r in rep.items)
        shards.append(d)
    n1, n2 = (len(json.loads((d / "manifest.json").read_text())["artifacts"]) for d in shards)
    assert n1 + n2 == len(plan(small_build.specs, list(small_build.sms))) and abs(n1 - n2) <= 1
    merged = tmp_path / "merged"
    merge(shards, merged)
    assert (merged / "manifest.json").read_bytes() == (small_build.out / "manifest.json").read_bytes()
    for a in json.loads((merged / "manifest.json").read_text())["artifacts"]:
        assert (merged / a["path"]).read_bytes() == (small_build.out / a["path"]).read_bytes()


def test_merge_refuses_foreign_or_conflicting_shards(small_build, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(small_build.out, a)
    shutil.copytree(small_build.out, b)
    doc = json.loads((b / "manifest.json").read_text())
    doc["producer"]["nvrtc"] = "99.9"  # the same cuda-cccl release built with another NVRTC
    (b / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="other versions.*nvrtc"):
        merge([a, b], tmp_path / "m1")
    doc["producer"]["cuda_cccl"] = "9.9.9"  # and under another release: still only cuda_cccl/cuda_core may differ
    for e in doc["artifacts"]:
        if "cuda_cccl" in e:
            e["cuda_cccl"] = "9.9.9"
    (b / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="other versions.*nvrtc.*may differ only in cuda_cccl, cuda_core"):
        merge([a, b], tmp_path / "m1")
    doc["producer"] = json.loads((a / "manifest.json").read_text())["producer"]
    for e in doc["artifacts"]:
        if "cuda_cccl" in e:
            e["cuda_cccl"] = doc["producer"]["cuda_cccl"]
    entry = doc["artifacts"][0]
    p = b / entry["path"]
    p.write_bytes(p.read_bytes() + b"x")
    entry["size"] += 1
    entry["sha256"] = hashlib.sha256(p.read_bytes()).hexdigest()
    (b / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="different bytes"):
        merge([a, b], tmp_path / "m2")
    assert not (tmp_path / "m2" / "manifest.json").exists()


def test_cccl_artifacts_are_reproducible(small_specs, tmp_path):
    """Two fresh builds (separate worker processes) of one CCCL item give the same bytes, whatever the workers'
    PIDs. NVRTC named internal entities after a nonce and the compiling PID; aot zeroed both but kept the PID's
    length, so two workers whose PIDs straddled a power of ten (9999 and 10000; PIDs wrap at pid_max) wrote blobs
    of other sizes, and this test failed now and then on a busy host. Each program is now seeded from its own
    inputs (aot.build.nvrtc_seed): the names carry no PID at all."""
    spec = [s for s in small_specs if s.name == "reduce_sum_i32"]
    outs = []
    for i in (1, 2):
        build(spec, [90], tmp_path / f"r{i}", jobs=1, force=True)
        outs.append((tmp_path / f"r{i}" / "cccl" / "reduce_sum_i32" / "sm_90.aot").read_bytes())
    a, b = outs
    assert a == b
    assert re.search(rb"_INTERNAL_00000000_13_device_reduce_[0-9a-f]{8}[1-9]", a)  # seeded: no _<PID> field
    assert not re.search(rb"_INTERNAL_[0-9a-f]{8}_13_device_reduce_[0-9a-f]{8}_\d", a)


@pytest.mark.parametrize("variant, other", [("cu13", "cu12"), ("cu12", "cu13")])
def test_cuda_major_variant_of_pyproject(tmp_path, variant, other):
    import tomllib
    target = tmp_path / "pyproject.toml"
    shutil.copy(ROOT / "pyproject.toml", target)
    r = subprocess.run([sys.executable, str(ROOT / ".ci" / "variant.py"), variant, str(target)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    project = tomllib.loads(target.read_text())["project"]
    assert project["name"] == f"cccl-aot-{variant}"
    deps, extras = project["dependencies"], project["optional-dependencies"]
    # The runtime stays lean (no toolkit, no build tools, no cuda-cccl: NVRTC artifacts need none; [cccl] adds
    # it) and gets this major's cuda-bindings ...
    assert "cuda-core>=0.5.1,<2" in deps and not [d for d in deps if d.startswith("cuda-cccl")]
    assert extras["cccl"] == ["cuda-cccl==1.2.1"]
    assert [d for d in deps if d.startswith("cuda-bindings")] == [f"cuda-bindings>={variant[2:]}" +
                                                                  (".9.1,<13" if variant == "cu12" else ".0.0,<14")]
    assert not any(d.startswith(("PyYAML", "rich", "cuda-toolkit")) or "[" in d for d in deps), deps
    # ... and [jit] is this major's toolkit, without cuda-core's whole-toolkit extra.
    assert f"cuda-cccl[{variant}]==1.2.1" in extras["jit"] and not any(d.startswith("cuda-core") for d in extras["jit"])
    assert all(other not in d for d in extras["jit"])
    assert other not in extras and variant in extras and "build" in extras


def test_merge_refuses_missing_or_mismatched_shards(small_build, tmp_path):
    shards = []
    for k in (1, 2, 3):
        d = tmp_path / f"s{k}"
        _seed(small_build.out, d)
        build(small_build.specs, list(small_build.sms), d, jobs=1, shard=(k, 3))
        shards.append(d)
    with pytest.raises(ArtifactError, match=r"need shards 1..3 once each; missing \[3\]"):
        merge(shards[:2], tmp_path / "m")
    with pytest.raises(ArtifactError, match=r"repeated \[1\]"):
        merge([shards[0], shards[0], shards[1], shards[2]], tmp_path / "m")
    with pytest.raises(ArtifactError, match="mixing shard outputs"):
        merge([shards[0], small_build.out], tmp_path / "m")
    assert not (tmp_path / "m" / "manifest.json").exists()
    merge(shards, tmp_path / "ok")
    assert (tmp_path / "ok" / "manifest.json").read_bytes() == (small_build.out / "manifest.json").read_bytes()


def test_only_build_keeps_the_other_specs_in_the_manifest(small_build, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(small_build.out, out)
    morton = [s for s in small_build.specs if s.name == "morton"]
    build(morton, list(small_build.sms), out, jobs=1, force=True, prune=False)
    doc = json.loads((out / "manifest.json").read_text())
    assert {a["name"] for a in doc["artifacts"]} == {s.name for s in small_build.specs}
    assert (out / "manifest.json").read_bytes() == (small_build.out / "manifest.json").read_bytes()
