"""cccl-legacy answers (cuda-cccl < 1.1, issue 44) as a manifest family: listed per release beside the
serialize blobs, carried by ``aot merge`` and the bundle, checked by ``aot verify``, activated from an
installed package's manifest. Real answer files (the shims' format) with stand-in payloads; the shims
themselves and a real build under cuda-cccl 0.6.0 are in tests/test_cccl_legacy.py and the slow test below."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from aot.build import legacy_set
from aot.build.merge import merge
from aot.core.errors import ArtifactError
from aot.core.manifest import load_manifest
from aot.runtime.adapters import cccl_legacy as L
from aot.runtime.adapters import cccl_legacy_activate as A
from aot.verify.gpu import verify_integrity
from tests.test_cccl_releases import fake_set

ROOT = Path(__file__).resolve().parents[1]
PROD = {"aot": "0.1.0", "cuda_cccl": "0.6.0", "cuda_major": "13", "nvrtc": "13.5", "nvjitlink": "13.5",
        "cuda_core": "0.7.0", "numba": "0.65.1", "numba_cuda": "0.26.0", "python": "3.11.7"}


def answers(release: str, spec: str, seed: str) -> list[tuple[str, str, str, bytes]]:
    """A compile and a link answer of ``spec`` as the build records them."""
    out = []
    for kind in ("nvrtc", "nvjitlink"):
        key = hashlib.sha256(f"{seed} {kind} {spec}".encode()).hexdigest()
        out.append((key, kind, spec, L.encode_entry(key, kind, release, f"{kind} {spec} {release}".encode())))
    return out


def legacy_only(root: Path, release: str, spec: str = "reduce:int32:plus:0", seed: str = "a") -> Path:
    legacy_set.add_answers(root, release, dict(PROD, cuda_cccl=release), 90, [spec], answers(release, spec, seed))
    return root


def test_answers_round_trip_merge_beside_blobs_and_a_corrupt_one_is_refused(tmp_path, caplog):
    a06 = legacy_only(tmp_path / "a06", "0.6.0")
    a07 = legacy_only(tmp_path / "a07", "0.7.0", spec="unary_transform:float32:negate", seed="b")
    m = load_manifest(a06)
    assert list(m.legacy) == ["0.6.0"] and len(m.legacy["0.6.0"].answers) == 2 and not m.artifacts
    assert verify_integrity(a06) == (2, [])
    # the manifest lists them per release, beside a serialize set's blobs: one set carries all three
    blobs = fake_set(tmp_path / "b121", "1.2.1")
    out = tmp_path / "merged"
    summary = merge([a06, blobs, a07], out)
    assert summary["cccl_legacy"] == ["0.6.0", "0.7.0"] and summary["cuda_cccl"] == ["1.2.1"]
    m = load_manifest(out)
    assert sorted(m.legacy) == ["0.6.0", "0.7.0"] and m.cccl_releases() == ("1.2.1",)
    assert m.producer["cuda_cccl"] == "1.2.1"  # the legacy-only sets' toolchains are no producer of the blobs
    n, problems = verify_integrity(out)  # (fake_set's blobs are a few bytes: their own problems, not these)
    assert not [p for p in problems if "legacy" in p or "cuda-cccl 0." in p] and n == len(m.artifacts) + 4
    # the runtime's table for the installed release: the manifest's answers for it, nothing else
    table = A.package_table(out, "0.7.0")
    assert len(table) == 2 and all(L.read_answer(p, k, "0.7.0") for k, p in table.items())
    assert A.package_table(out, "1.0.2") == {}
    # one release's answers from two builds that differ: every conflict listed, nothing written
    other = legacy_only(tmp_path / "other06", "0.6.0")
    victim = other / m.legacy["0.6.0"].answers[0]["path"]
    victim.write_bytes(victim.read_bytes()[:-3] + b"XYZ")
    assert any("sha256 differs" in p for p in verify_integrity(other)[1])
    with pytest.raises(ArtifactError, match=r"shard is damaged"):
        merge([a06, other], tmp_path / "refused")
    # a corrupt answer the manifest agrees with (rewritten manifest): verify names it, the loader warns once
    bad = tmp_path / "bad"
    legacy_set.add_answers(bad, "0.6.0", PROD, 90, ["reduce:int32:plus:0"],
                           [(k, kind, s, data[:-1] if kind == "nvrtc" else data)
                            for k, kind, s, data in answers("0.6.0", "reduce:int32:plus:0", "a")])
    problems = verify_integrity(bad)[1]
    assert len(problems) == 1 and "payload digest does not match" in problems[0], problems
    got = {k: L.read_answer(p, k, "0.6.0") for k, p in A.package_table(bad, "0.6.0").items()}
    assert sorted(v is None for v in got.values()) == [False, True]
    assert len([r for r in caplog.records if "runs for real" in r.getMessage()]) == 1


def test_merge_lists_every_conflict_of_one_release(tmp_path):
    a = legacy_only(tmp_path / "a", "0.6.0")
    b = tmp_path / "b"
    legacy_set.add_answers(b, "0.6.0", PROD, 90, ["reduce:int32:plus:0"],
                           [(k, kind, s, L.encode_entry(k, kind, "0.6.0", b"other bytes"))
                            for k, kind, s, _ in answers("0.6.0", "reduce:int32:plus:0", "a")])
    c = legacy_only(tmp_path / "c", "0.6.0", seed="c")
    with pytest.raises(ArtifactError) as e:
        merge([a, b, c], tmp_path / "out")
    msg = str(e.value)
    assert msg.startswith("merge: 2 artifact(s) conflict") and msg.count("differs in") == 2, msg
    assert str(b) in msg and "nvrtc of reduce:int32:plus:0" in msg
    assert not (tmp_path / "out" / "manifest.json").exists()


def toolchain(root: Path, seed: str, **versions: str) -> Path:
    """A set of 0.6.0's answers built under other compilers: other answers (their keys hold the compilers'
    bytes), another producer."""
    legacy_set.add_answers(root, "0.6.0", dict(PROD, **versions), 90, ["reduce:int32:plus:0"],
                           answers("0.6.0", "reduce:int32:plus:0", seed))
    return root


def test_one_release_built_by_several_toolchains_merges_whole_in_any_order(tmp_path):
    """pip gives a library's users the newest NVRTC its pins allow (cuda-cccl 0.6.0 asks cuda-toolkit 13.*):
    sets built under each toolchain a library expects merge into one, every answer kept, every toolchain
    listed; the same inputs in another order give the same bytes."""
    a = legacy_only(tmp_path / "a", "0.6.0")
    b = toolchain(tmp_path / "b", "b", nvrtc="13.5.37", nvjitlink="13.5.37")
    c = toolchain(tmp_path / "c", "c", numba="0.64.0")
    one, two = merge([a, b, c], tmp_path / "m1"), merge([c, a, b], tmp_path / "m2")
    assert one["cccl_legacy"] == two["cccl_legacy"] == ["0.6.0"]
    m = load_manifest(tmp_path / "m1")
    r = m.legacy["0.6.0"]
    assert len(r.answers) == 6 and len(r.producers) == 3 and r.producer == r.producers[0]
    assert sorted(p["nvrtc"] for p in r.producers) == ["13.5", "13.5", "13.5.37"]
    assert verify_integrity(tmp_path / "m1") == (6, [])
    assert (tmp_path / "m1" / "manifest.json").read_bytes() == (tmp_path / "m2" / "manifest.json").read_bytes()
    from aot.core.legacy_manifest import summary
    assert summary(m.legacy) == ["cccl-legacy answers for cuda-cccl 0.6.0: 1 specs, 6 answers, 0.0 MB, SMs 90, "
                                 "3 toolchains"]
    # the runtime's table holds every toolchain's answers: a user's install looks up the key its compilers give
    assert len(A.package_table(tmp_path / "m1", "0.6.0")) == 6
    # a set of one toolchain is written as before ("producers" only where there are several)
    assert "producers" not in json.loads((a / "manifest.json").read_text())["cccl_legacy"]["0.6.0"]
    # a build under another toolchain into a set that has answers adds beside them
    toolchain(a, "d", nvrtc="13.2.78")
    assert len(load_manifest(a).legacy["0.6.0"].producers) == 2 and verify_integrity(a) == (4, [])


@pytest.mark.parametrize("field, value, says", [
    ("release", "../../x", "not a cuda-cccl release"),
    ("path", "cccl-legacy/cuda-cccl-0.6.0/../../../etc.aot", "is not cccl-legacy/cuda-cccl-0.6.0/"),
    ("kind", "cubin", "kind 'cubin' is not one of nvrtc, nvjitlink"),
    ("spec", "histogram:int32", "names spec 'histogram:int32' the release does not list"),
    ("size", True, "field 'size' missing or not int"),
    ("producers", [{"cuda_cccl": "0.6.0"}], "'producers' must be a list of at most 64 toolchains, the first its"),
    ("producers", ["x"] * 65, "'producers' must be a list of at most 64"),
])
def test_a_manifest_from_elsewhere_is_parsed_with_bounds(tmp_path, field, value, says):
    root = legacy_only(tmp_path / "s", "0.6.0")
    doc = json.loads((root / "manifest.json").read_text())
    section = doc["cccl_legacy"]
    if field == "release":
        section[value] = section.pop("0.6.0")
    elif field == "producers":
        section["0.6.0"][field] = value
    else:
        section["0.6.0"]["answers"][0][field] = value
    (root / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="field 'cccl_legacy'") as e:
        load_manifest(root)
    assert says in str(e.value)


def test_the_package_folder_carries_the_answers_and_calls_them_its_own(tmp_path):
    from aot.package.bundle import foreign_files, write_package_folder
    src = merge([legacy_only(tmp_path / "a06", "0.6.0"), fake_set(tmp_path / "b", "1.2.1")], tmp_path / "m")
    out = tmp_path / "pkg" / "artifacts"
    n, size = write_package_folder(tmp_path / "m", out, {"sms": [90]}, names={"reduce_sum_i32"})
    m = load_manifest(out)
    assert list(m.legacy) == ["0.6.0"] and [a["name"] for a in m.artifacts] == ["reduce_sum_i32"]
    assert not [p for p in verify_integrity(out)[1] if "legacy" in p]
    assert [f for f in foreign_files(out) if "legacy" in f] == []  # (fake_set's few-byte blobs have no magic)
    assert src["cccl_legacy"] == ["0.6.0"]
    (out / "cccl-legacy" / "cuda-cccl-0.6.0" / "mine.aot").write_bytes(b"not ours")
    assert "cccl-legacy/cuda-cccl-0.6.0/mine.aot" in foreign_files(out)


def test_from_package_activates_only_under_a_release_without_serialize(tmp_path, monkeypatch):
    """families.attach_families: the shared venv's cuda-cccl 1.2.1 serializes, so nothing loads; under 0.6.0
    (a child with the metadata read faked) the package's answers reach the shims' table."""
    pkg = tmp_path / "lpkg"
    (pkg / "__init__.py").parent.mkdir()
    (pkg / "__init__.py").write_text("")
    legacy_only(pkg / "artifacts", "0.6.0")
    code = (
        "import sys, json\n"
        "from aot.runtime.adapters import cccl_legacy_activate as A\n"
        "started = []\n"
        "A._start = lambda release, table: started.append((release, sorted(table))) or 'shims'\n"
        "if sys.argv[1] == 'old':\n"
        "    A.metadata.version = lambda name: '0.6.0'\n"
        "    import aot.runtime.loader.import_hook as H; H._cccl_without_serialize = lambda: True\n"
        "import aot\n"
        "aot.Registry.from_package('lpkg')\n"
        "print(json.dumps(started))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
    got = {}
    for mode in ("new", "old"):
        r = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        got[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["new"] == []
    assert got["old"] == [["0.6.0", sorted(a["key"] for a in load_manifest(pkg / "artifacts").legacy["0.6.0"].answers)]]
    shutil.rmtree(pkg)


#: Run in the fresh venv the example wheel was installed into: the library imported first (its registry
#: activates the shims from its manifest), then each of its specs built in the reverse of the build's order,
#: on the driverless host (the stand-in libcuda; cuda.compute fails at the load after the link, as it does
#: when building).
_SERVE = """
import json, sys, tempfile
from pathlib import Path
from aot.build import cccl_legacy_build as b
tmp = Path(tempfile.mkdtemp(prefix="aot-legacy-serve-"))
b._stand_in_driver(tmp)
import legacy_mypkg  # noqa: F401  Registry.from_package: the shims load from the installed manifest
from aot.runtime.adapters import cccl_legacy_activate as A
b._target_cc(90)
for spec in reversed(sys.argv[1:]):
    b.build_spec(spec)
import shutil; shutil.rmtree(tmp)
print(json.dumps({"counts": A._active.counts() if A._active else None,
                  "refusals": A._active.refusals if A._active else None,
                  "where": str(Path(legacy_mypkg.__file__).parent)}))
"""


def all_answered(counts: dict | None, n: int) -> bool:
    """Every one of ``n`` specs' compile and link answered, and every operator compile numba ran (one per distinct
    operator and signature: cuda.compute compiles a repeated one once a process), none missed."""
    return bool(counts) and counts["nvrtc"] == [n, 0] and counts["nvJitLink"] == [n, 0] and \
        counts["numba"][0] >= 1 and counts["numba"][1] == 0


def _example_wheel(tmp_path: Path, build_py: Path, dist: Path, major: int = 13, **env_extra: str) -> Path:
    """examples/legacy-mypkg's wheel, built by the hook with ``build_py`` (``pip wheel --no-build-isolation``);
    ``major`` 12: the same library for CUDA 12 (its pyproject's ``cu13`` pins and extras made ``cu12``)."""
    proj = tmp_path / f"proj-{dist.name}"
    shutil.copytree(ROOT / "examples" / "legacy-mypkg", proj, ignore=shutil.ignore_patterns("build", "artifacts"))
    if major != 13:
        (proj / "pyproject.toml").write_text((proj / "pyproject.toml").read_text().replace("cu13", f"cu{major}"))
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000", PYTHONPATH="", **env_extra)
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(build_py), "wheel", "-q", "--no-build-isolation",
                        "--no-deps", "--no-index", "-w", str(dist), str(proj)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = dist.glob("legacy_mypkg-*.whl")
    return whl


def _served(tmp_path: Path, whl: Path, base: str, name: str, specs: list[str]) -> dict:
    """What the shims answered for ``specs`` in a fresh venv over ``base`` with ``whl`` installed."""
    from tests.legacy_envs import overlay_venv
    run_py = overlay_venv(tmp_path / name, base)
    env = dict(os.environ, PYTHONPATH="")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(run_py), "install", "-q", "--no-deps",
                        "--no-index", str(whl)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([str(run_py), "-c", _SERVE, *specs], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("AOT_CCCL060_PYTHON"), reason="AOT_CCCL060_PYTHON: a python with "
                    "cuda-cccl[cu13]==0.6.0, numba<0.66, hatchling, PyYAML and platformdirs (docs/build.md)")
def test_the_example_wheel_built_under_060_by_the_hook_serves_every_spec_in_a_fresh_venv(tmp_path):
    """examples/legacy-mypkg: `pip wheel --no-build-isolation` runs aot's hatch hook under cuda-cccl 0.6.0,
    which records its four cccl-legacy specs; installed into a fresh venv over the same stack, every compile
    and link of those specs is answered (0 misses), and cuda.compute's C library finishes its build."""
    import tomllib

    from tests.legacy_envs import overlay_venv
    base = os.environ["AOT_CCCL060_PYTHON"]
    specs = tomllib.loads((ROOT / "examples" / "legacy-mypkg" / "pyproject.toml").read_text())["tool"]["aot"][
        "cccl-legacy"]
    whl = _example_wheel(tmp_path, overlay_venv(tmp_path / "build-venv", base), tmp_path / "dist")
    r = subprocess.run([sys.executable, "-m", "aot", "verify", "--for-wheel", str(whl)], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert r.returncode == 0 and f"{len(specs)} specs, " in r.stdout, r.stdout + r.stderr
    out = _served(tmp_path, whl, base, "user-venv", specs)
    assert out["where"].startswith(str(tmp_path / "user-venv"))  # the installed wheel, not the source tree
    assert all_answered(out["counts"], len(specs)), out
    assert out["refusals"] == []


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("AOT_CCCL060_CU12_PYTHON"), reason="AOT_CCCL060_CU12_PYTHON: a python with "
                    "cuda-cccl[cu12]==0.6.0, numba<0.66, hatchling, PyYAML and platformdirs (docs/build.md)")
def test_the_example_for_cuda_12_is_served_under_cuda_12(tmp_path):
    """The same library pinning cuda-cccl[cu12] (cuda-bindings 12, NVRTC and nvJitLink 12.9, NVVM in
    ``nvidia/cuda_nvcc``): the hook records under CUDA 12's shims, and a fresh venv over that stack gets every
    compile, link and operator of its specs answered (0 misses)."""
    import tomllib

    from tests.legacy_envs import overlay_venv
    base = os.environ["AOT_CCCL060_CU12_PYTHON"]
    specs = tomllib.loads((ROOT / "examples" / "legacy-mypkg" / "pyproject.toml").read_text())["tool"]["aot"][
        "cccl-legacy"]
    build_py = overlay_venv(tmp_path / "build-venv", base)
    whl = _example_wheel(tmp_path, build_py, tmp_path / "dist", major=12)
    r = subprocess.run([str(build_py), "-m", "aot", "verify", "--for-wheel", str(whl)], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=""), timeout=300)  # checked under CUDA 12
    assert r.returncode == 0 and f"{len(specs)} specs, " in r.stdout, r.stdout + r.stderr
    out = _served(tmp_path, whl, base, "user-venv", specs)
    n = len(specs)
    assert all_answered(out["counts"], n) and out["refusals"] == [], out


@pytest.mark.slow
@pytest.mark.skipif(not (os.environ.get("AOT_CCCL060_PYTHON") and os.environ.get("AOT_CCCL060_OTHER_PYTHON")),
                    reason="AOT_CCCL060_PYTHON and AOT_CCCL060_OTHER_PYTHON: pythons with cuda-cccl[cu13]==0.6.0 "
                    "under two cuda-toolkit 13 releases (docs/build.md)")
def test_one_wheel_carries_the_answers_of_two_toolchains_and_serves_a_user_of_either(tmp_path):
    """cuda-cccl 0.6.0 asks cuda-toolkit 13.*: pip gives a new user the newest NVRTC and nvJitLink, not the
    build host's. The example's wheel is built under one toolkit with the set another toolkit's build made
    merged in (``AOT_WHEEL_MERGE``, the bundled folder of that build's wheel); a fresh venv over either toolkit
    gets every compile, link and operator of its specs answered (0 misses)."""
    import tomllib

    from tests.legacy_envs import overlay_venv
    one, other = os.environ["AOT_CCCL060_PYTHON"], os.environ["AOT_CCCL060_OTHER_PYTHON"]
    specs = tomllib.loads((ROOT / "examples" / "legacy-mypkg" / "pyproject.toml").read_text())["tool"]["aot"][
        "cccl-legacy"]
    versions = [subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('nvidia-cuda-nvrtc'))"],
                               capture_output=True, text=True, check=True).stdout.strip() for py in (one, other)]
    assert versions[0] != versions[1], versions  # two toolchains, or the test proves nothing
    # the other toolkit's answers, as a CI job under it builds them (docs/build.md): a set of answers only
    r = subprocess.run([str(overlay_venv(tmp_path / "other-build", other)), "-m", "aot.build.cccl_legacy_build",
                        "--sm", "90", "--out", str(tmp_path / "other-set"), *specs], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "examples" / "legacy-mypkg")), cwd=tmp_path,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    whl = _example_wheel(tmp_path, overlay_venv(tmp_path / "build", one), tmp_path / "dist",
                         AOT_WHEEL_MERGE=str(tmp_path / "other-set"))
    r = subprocess.run([sys.executable, "-m", "aot", "verify", "--for-wheel", str(whl)], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    n = len(specs)
    assert r.returncode == 0 and f"{n} specs, " in r.stdout and "2 toolchains" in r.stdout, \
        r.stdout + r.stderr
    for base, name in ((other, "user-other"), (one, "user-one")):
        out = _served(tmp_path, whl, base, name, specs)
        assert out["where"].startswith(str(tmp_path / name))
        assert all_answered(out["counts"], n) and out["refusals"] == [], (name, versions, out)


def test_the_config_key_and_the_bundle_step(tmp_path, monkeypatch):
    """``[tool.aot] cccl-legacy``: a list of specs, one line naming the key otherwise; the bundle's step does
    nothing under a release with serialize (the shared venv's 1.2.1), and under one without it a bad spec is
    one line naming the pyproject, the key, the release and the spec (from the recording process)."""
    from aot.package import legacy as P
    from aot.package.config import ConfigError, load_config
    proj = shutil.copytree(ROOT / "examples" / "legacy-mypkg", tmp_path / "proj")
    cfg = load_config(proj)
    assert cfg.cccl_legacy[0] == "reduce:int32:legacy_mypkg.ops.add:0" and len(cfg.cccl_legacy) == 6
    text = (proj / "pyproject.toml").read_text()
    (proj / "pyproject.toml").write_text(text.replace('cccl-legacy = ["reduce', 'cccl-legacy = [1, "reduce', 1))
    with pytest.raises(ConfigError, match=r"\[tool.aot\] key 'cccl-legacy': must be a list of specs"):
        load_config(proj)
    bad = text.replace('cccl-legacy = ["reduce', 'cccl-legacy = ["histogram:int32", "reduce', 1)
    (proj / "pyproject.toml").write_text(bad)
    cfg = load_config(proj)
    src = tmp_path / "set"
    assert P.with_legacy_answers(cfg, src, [90], tmp_path / "work") == src  # 1.2.1 serializes: nothing to do
    monkeypatch.setattr(P, "installed_release_without_serialize", lambda: "0.6.0")
    from aot.core.errors import BuildError
    with pytest.raises(BuildError, match=r"sm_90: .*histogram:int32: family 'histogram' is not built") as e:
        P.with_legacy_answers(cfg, src, [90], tmp_path / "work")
    assert str(e.value).startswith(f"{proj / 'pyproject.toml'}: [tool.aot] cccl-legacy under cuda-cccl 0.6.0, sm_90:")


@pytest.mark.parametrize("schema", ["cccl_legacy_key", "cccl_legacy_op"])
def test_answers_of_another_key_schema_are_said_once_not_missed_per_compile(tmp_path, caplog, schema):
    """A set of answers records aot's key schemas; one built by another version of the compile or operator key
    (whose keys cannot equal this aot's: the version is hashed in) gives no answers and says why once."""
    from aot.core.keyschemas import SCHEMAS
    root = legacy_only(tmp_path / "s", "0.6.0")
    assert load_manifest(root).key_schemas == dict(SCHEMAS)
    assert len(A.package_table(root, "0.6.0")) == 2
    doc = json.loads((root / "manifest.json").read_text())
    doc["key_schemas"][schema] = SCHEMAS[schema] + 1
    (root / "manifest.json").write_text(json.dumps(doc))
    assert A.package_table(root, "0.6.0") == {}
    said = [r.getMessage() for r in caplog.records if "rebuild the set" in r.getMessage()]
    assert len(said) == 1 and f"v{SCHEMAS[schema] + 1}, this aot computes v{SCHEMAS[schema]}" in said[0], said
