"""CCCL blobs for a range of cuda-cccl (issue 34 item 2): one blob per release in one set, the loader picking
the installed release's, the wheel requiring the union of the releases it carries.

The default run uses synthetic sets (manifests whose blobs are a few bytes: merge, selection and pins read
no blob) and the session's real build restamped as a second release (real blobs loaded through the fake
driver). ``test_build_under_each_release`` builds under other cuda-cccl releases for real: it needs one
Python per release (``AOT_TEST_CCCL_PYTHONS``, see there) and is marked ``slow``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from aot.build.builder import manifest_definitions
from aot.build.merge import blob_path, merge
from aot.core import versions
from aot.core.errors import ArtifactError
from aot.core.manifest import MANIFEST_NAME, cccl_specifier, load_manifest, write_manifest
from aot.runtime.loader import default_specs, lean
from aot.runtime.loader.registry import Registry
from tests.conftest import ROOT, SMALL_CCCL, repo_env

CCCL = ("reduce_sum_i32", "lower_bound_i32")
UNIT = "morton"
KNOWN = ("1.1.0", "1.1.1", "1.2.0", "1.2.1")


def producer(release: str, **over: str) -> dict:
    return {"aot": "0.1.0", "cuda_cccl": release, "cuda_core": "1.2.2", "cuda_major": "13", "nvrtc": "13.0",
            "nvjitlink": "13.0", **over}


def fake_set(root: Path, release: str, *, unit_bytes: bytes = b"unit", shard: str | None = None,
             names: tuple[str, ...] = CCCL, prod: dict | None = None, unit_key: str = "0" * 64) -> Path:
    """A set as ``aot build`` under ``release`` writes it, with a few bytes in place of each blob; the NVRTC
    unit is an artifact of payload ``unit_bytes`` whose header is stamped with the release, as a build's is."""
    from aot.core import format as fmt
    specs = {s.name: s for s in default_specs.load()}
    prod = prod or producer(release)
    entries = []
    for name in names:
        data = f"blob {name} {release}".encode()
        entries.append(_entry(root, f"cccl/{name}/sm_90.aot", name, "cccl", "cccl-blob", data, release))
    unit = fmt.encode(fmt.make_header(family="nvrtc", name=UNIT, content_key=unit_key, sm=90, payload_kind="cubin",
                                      payload=unit_bytes, producer={k: prod[k] for k in fmt.PRODUCER_FIELDS},
                                      kernels=["morton"]), unit_bytes)
    entries.append(dict(_entry(root, f"nvrtc/{UNIT}/sm_90.cubin.aot", UNIT, "nvrtc", "cubin", unit, None),
                        content_key=unit_key))
    extra: dict = {"sms": [90]}
    if shard:
        extra.update(shard=shard, incomplete=[])
    write_manifest(root, producer=prod, specs=manifest_definitions(
        [specs[n] for n in (*names, UNIT)]), artifacts=entries, extra=extra)
    return root


def _entry(root: Path, path: str, name: str, family: str, kind: str, data: bytes, release: str | None) -> dict:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_bytes(data)
    e = {"path": path, "name": name, "family": family, "sm": 90, "payload_kind": kind, "size": len(data),
         "sha256": hashlib.sha256(data).hexdigest(), "content_key": "0" * 64}
    if release:
        e["cuda_cccl"] = release
    return e


@pytest.fixture
def installed(monkeypatch):
    """``installed("1.2.0")``: the loader sees that cuda-cccl installed."""
    def set_release(release: str) -> None:
        monkeypatch.setattr(versions, "runtime_versions", lambda: {"cuda_cccl": release, "cuda_major": "13"})
    return set_release


@pytest.fixture
def three(tmp_path) -> Path:
    """1.1.0, 1.2.0 and 1.2.1 merged (1.1.1 skipped)."""
    sets = [fake_set(tmp_path / r, r) for r in ("1.2.1", "1.1.0", "1.2.0")]
    merge(sets, tmp_path / "merged")
    return tmp_path / "merged"


# ------------------------------------------------------------------------------------------ the specifier
def test_specifier_is_the_union_of_the_releases_carried():
    from packaging.specifiers import SpecifierSet
    assert cccl_specifier(["1.2.1"], KNOWN) == "==1.2.1"
    assert cccl_specifier(["1.2.1", "1.1.0", "1.1.1", "1.2.0"], KNOWN) == ">=1.1.0,<=1.2.1"
    spec = cccl_specifier(["1.1.0", "1.2.0", "1.2.1"], KNOWN)
    assert spec == ">=1.1.0,<=1.2.1,!=1.1.1"
    assert [v for v in KNOWN if SpecifierSet(spec).contains(v)] == ["1.1.0", "1.2.0", "1.2.1"]
    assert cccl_specifier(["1.10.0", "1.9.0"], ()) == ">=1.9.0,<=1.10.0"  # numbers, not text


# ------------------------------------------------------------------------------------------ merge
def test_merge_keeps_one_blob_per_release(three):
    m = load_manifest(three)
    assert m.cccl_releases() == ("1.1.0", "1.2.0", "1.2.1")
    assert m.producer["cuda_cccl"] == "1.2.1" and sorted(m.producers) == ["1.1.0", "1.2.0", "1.2.1"]
    for name in CCCL:
        got = {m.release_of(e): e["path"] for e in m.entries_for(name)}
        assert got == {r: blob_path(name, r, 90) for r in ("1.1.0", "1.2.0", "1.2.1")}
        for e in m.entries_for(name):
            assert (three / e["path"]).read_bytes() == f"blob {name} {m.release_of(e)}".encode()
            assert m.producer_of(e)["cuda_cccl"] == m.release_of(e)
    units = m.entries_for(UNIT)  # an NVRTC unit loads under any cuda-cccl: one copy
    assert len(units) == 1 and units[0]["path"] == f"nvrtc/{UNIT}/sm_90.cubin.aot"
    again = three.parent / "again"  # a merged set merges again (with a fourth release) to the same layout
    merge([three, fake_set(three.parent / "1.1.1", "1.1.1")], again)
    assert load_manifest(again).cccl_releases() == KNOWN


def test_merge_of_one_release_stays_as_built(tmp_path):
    a = fake_set(tmp_path / "a", "1.2.1", shard="1/2", names=CCCL[:1])
    b = fake_set(tmp_path / "b", "1.2.1", shard="2/2", names=CCCL[1:])
    merge([a, b], tmp_path / "m")
    doc = json.loads((tmp_path / "m" / MANIFEST_NAME).read_text())
    assert "producers" not in doc
    assert sorted(e["path"] for e in doc["artifacts"]) == sorted(
        [f"cccl/{n}/sm_90.aot" for n in CCCL] + [f"nvrtc/{UNIT}/sm_90.cubin.aot"])


def test_merge_checks_shards_per_release(tmp_path):
    a1 = fake_set(tmp_path / "a1", "1.2.1", shard="1/2", names=CCCL[:1])
    a2 = fake_set(tmp_path / "a2", "1.2.1", shard="2/2", names=CCCL[1:])
    b = fake_set(tmp_path / "b", "1.1.0")
    merge([a1, b, a2], tmp_path / "ok")
    assert load_manifest(tmp_path / "ok").cccl_releases() == ("1.1.0", "1.2.1")
    with pytest.raises(ArtifactError, match=r"need shards 1..2 once each; missing \[2\]"):
        merge([a1, b], tmp_path / "missing")


def test_merge_refuses_what_one_release_cannot_explain(tmp_path):
    a = fake_set(tmp_path / "a", "1.2.1")
    other_nvrtc = fake_set(tmp_path / "b", "1.2.0", prod=producer("1.2.0", nvrtc="13.1"))
    with pytest.raises(ArtifactError, match="may differ only in cuda_cccl, cuda_core"):
        merge([a, other_nvrtc], tmp_path / "m1")
    same = fake_set(tmp_path / "c", "1.2.1", prod=producer("1.2.1", cuda_core="1.2.0"))
    with pytest.raises(ArtifactError, match=r"other versions.*\(cuda_core\)"):
        merge([a, same], tmp_path / "m2")
    core = fake_set(tmp_path / "d", "1.1.0", prod=producer("1.1.0", cuda_core="1.2.0"))
    merge([a, core], tmp_path / "m3")  # another release may bring another cuda-core


def test_merge_keeps_one_unit_where_only_its_release_stamp_differs(tmp_path):
    a = fake_set(tmp_path / "a", "1.2.1")
    b = fake_set(tmp_path / "b", "1.1.0")
    assert (a / f"nvrtc/{UNIT}/sm_90.cubin.aot").read_bytes() != (b / f"nvrtc/{UNIT}/sm_90.cubin.aot").read_bytes()
    merge([a, b], tmp_path / "m")
    m = load_manifest(tmp_path / "m")
    (unit,) = m.entries_for(UNIT)
    assert unit["cuda_cccl"] == "1.2.1"
    assert (tmp_path / "m" / unit["path"]).read_bytes() == (a / unit["path"]).read_bytes()


def test_manifest_refuses_an_entry_of_a_release_it_has_no_producer_for(three):
    doc = json.loads((three / MANIFEST_NAME).read_text())
    doc["artifacts"][0]["cuda_cccl"] = "1.1.1"
    (three / MANIFEST_NAME).write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="field 'cuda_cccl' names '1.1.1'"):
        load_manifest(three)


# ------------------------------------------------------------------------------------------ the loader's choice
@pytest.mark.parametrize("release", ["1.1.0", "1.2.0", "1.2.1"])
def test_loader_offers_the_installed_releases_blob(three, installed, release):
    installed(release)
    reg = Registry(three, device_sm=90)
    for name in CCCL:
        cands = reg.packaged_candidates(reg.spec(name), 90)
        assert [c.ref["path"] for c in cands] == [blob_path(name, release, 90)]
    assert lean.foreign_cccl(reg.manifest, "pkg") is None


def test_release_not_carried_is_one_line_then_jit(three, installed):
    installed("1.1.1")
    reg = Registry(three, device_sm=90)
    assert all(reg.packaged_candidates(reg.spec(n), 90) == [] for n in CCCL)  # no blob of another release
    foreign = lean.foreign_cccl(reg.manifest, "pkg")
    assert foreign is not None and "\n" not in foreign.warning
    assert "built with cuda-cccl 1.1.0, 1.2.0, 1.2.1, but cuda-cccl 1.1.1 is installed" in foreign.warning
    assert "JIT-compile" in foreign.warning and "install cuda-cccl>=1.1.0,<=1.2.1,!=1.1.1" in foreign.warning
    assert "pip install 'cuda-cccl>=1.1.0,<=1.2.1,!=1.1.1'" in foreign.error("reduce_sum_i32", 90)


def test_single_release_messages_keep_the_exact_pin(tmp_path, installed):
    installed("1.2.0")
    m = load_manifest(fake_set(tmp_path / "a", "1.2.1"))
    foreign = lean.foreign_cccl(m, "pkg")
    assert foreign is not None and "install cuda-cccl==1.2.1 " in foreign.warning


# ------------------------------------------------------------------------------------------ pins
def test_wheel_requires_the_union_and_the_check_reads_every_extra():
    from aot.package.bundle import pin_problems, required_pins
    prod, rels = producer("1.2.1"), ["1.1.0", "1.2.0", "1.2.1"]
    pin = "cuda-cccl>=1.1.0,<=1.2.1,!=1.1.1"
    assert required_pins(prod, releases=rels)[1] == pin
    assert pin_problems(["cccl-aot-cu13", pin], prod, releases=rels) == []
    assert pin_problems(["cccl-aot-cu13", "cuda-cccl[cu13]>=1.1.0,<=1.2.1,!=1.1.1"], prod, releases=rels) == []
    wide = pin_problems(["cccl-aot-cu13", "cuda-cccl>=1.1"], prod, releases=rels)
    assert len(wide) == 1 and "admits cuda-cccl 1.1.1, 1.2.2, 1.3.0, 2.0.0" in wide[0] and f'declare "{pin}"' in wide[0]
    # the hook adds the pin itself: a narrower requirement intersects; one admitting none of them cannot install
    assert pin_problems(["cuda-cccl>=1.2"], prod, require=False, releases=rels) == []
    extras = {"old": ["cuda-cccl<0.7"], "fine": ["cuda-cccl>=1.2"], "jit": ["cccl-aot-cu13[jit]"]}
    (one,) = pin_problems([], prod, require=False, releases=rels, optional=extras)
    assert one.startswith("[project.optional-dependencies] old: 'cuda-cccl<0.7' admits no cuda-cccl the "
                          "artifacts load under"), one
    assert "\n" not in one


def test_pin_check_names_the_file_and_the_requirement(tmp_path):
    from aot.package.bundle import PinError, _raise_pin_problems
    from aot.package.config import load_config
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "build_matrix.yaml").write_text("version: 1\n")
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [project]
        name = "mypkg"
        dependencies = ["cccl-aot-cu13", "cuda-cccl>=1.1.0,<=1.2.1,!=1.1.1"]
        [project.optional-dependencies]
        legacy = ["cuda-cccl<0.7"]
        [tool.aot]
        package = "mypkg"
        merge = ["cccl-1.1.0", "cccl-1.2.0"]
    """))
    cfg = load_config(tmp_path)
    assert cfg.merge == (tmp_path / "cccl-1.1.0", tmp_path / "cccl-1.2.0")
    with pytest.raises(PinError) as e:
        _raise_pin_problems(cfg, producer("1.2.1"), True, True, ["1.1.0", "1.2.0", "1.2.1"])
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'pyproject.toml'}: [project.optional-dependencies] legacy: 'cuda-cccl<0.7' "
                          f"admits no cuda-cccl"), msg
    assert "\n" not in msg


def test_wheel_merge_env_wins(tmp_path, monkeypatch):
    from aot.package.config import AotConfig
    cfg = AotConfig(project=tmp_path, pyproject=tmp_path / "pyproject.toml", package="p", package_dir=tmp_path,
                    matrix=tmp_path / "m.yaml", sm="90", folder="artifacts", prebuilt=None, allow_partial=False,
                    merge=(tmp_path / "x",))
    assert cfg.merge_dirs() == (tmp_path / "x",)
    monkeypatch.setenv("AOT_WHEEL_MERGE", os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")]))
    assert cfg.merge_dirs() == (tmp_path / "a", tmp_path / "b")


# ------------------------------------------------------------------------------------------ cccl_patches
def test_patches_name_each_checked_release():
    import cccl_patches
    assert tuple(cccl_patches.CHECKED) == cccl_patches.VERIFIED_CCCL_VERSIONS == KNOWN
    assert {r: c.wrapper_names for r, c in cccl_patches.CHECKED.items()} == {
        "1.1.0": "counter", "1.1.1": "counter", "1.2.0": "make_wrapper_name", "1.2.1": "make_wrapper_name"}


def test_release_1_1_wrapper_names_come_from_content():
    """cuda-cccl 1.1.x names a wrapper ``wrapped_<name>_{next(_wrapper_name_counter)}`` inline: the counter
    the patch puts there gives the content digest while a wrapper is made, numbered per program, and
    cuda-cccl's count elsewhere; ``restart_names`` restarts it (a stand-in of 1.1.0's module, no CUDA)."""
    from cccl_patches import wrapper_names
    odr = types.SimpleNamespace(_wrapper_name_counter=itertools.count(), sanitize_identifier=lambda n: n.strip("<>"))

    def create_op_void_ptr_wrapper(op, sig):  # 1.1.0's shape
        return f"wrapped_{odr.sanitize_identifier(op.__name__)}_{next(odr._wrapper_name_counter)}"

    def create_stateful_op_void_ptr_wrapper(op, sig, state_array_types, state_info):
        return f"wrapped_{odr.sanitize_identifier(op.__name__)}_{next(odr._wrapper_name_counter)}"

    odr.create_op_void_ptr_wrapper = create_op_void_ptr_wrapper
    odr.create_stateful_op_void_ptr_wrapper = create_stateful_op_void_ptr_wrapper
    jit = types.SimpleNamespace()
    wrapper_names._install_counter(odr, jit)  # type: ignore[arg-type]
    wrapper_names.restart()

    def add(a, b):
        return a + b

    first = odr.create_op_void_ptr_wrapper(add, "int32(int32, int32)")
    assert first.startswith("wrapped_add_") and len(first) == len("wrapped_add_") + 16
    assert odr.create_op_void_ptr_wrapper(add, "int32(int32, int32)") == first + "_1"  # same program: numbered
    assert odr.create_op_void_ptr_wrapper(add, "int64(int64, int64)") != first  # the signature is content
    assert next(odr._wrapper_name_counter) == 0 and next(odr._wrapper_name_counter) == 1  # outside: a count
    wrapper_names.restart()
    odr._wrapper_name_counter.restart()
    assert odr.create_op_void_ptr_wrapper(add, "int32(int32, int32)") == first  # a new program: the same name
    assert next(odr._wrapper_name_counter) == 0
    assert jit.create_stateful_op_void_ptr_wrapper is odr.create_stateful_op_void_ptr_wrapper
    stateful = odr.create_stateful_op_void_ptr_wrapper(add, "sig", ["array(int32, 1d, C)"], [{"shape": (4,)}])
    assert stateful.startswith("wrapped_add_") and stateful != first
    wrapper_names.restart()


# ------------------------------------------------------------------------------------------ real blobs
LOAD = textwrap.dedent("""
    import ctypes, json, os, sys, warnings
    ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL)  # the stand-in libcuda: this host has no driver
    from aot.core import versions
    from aot.runtime.loader import lean, sources
    from aot.runtime.loader.registry import Registry
    if sys.argv[3] != "installed":
        versions.runtime_versions = lambda: {"cuda_cccl": sys.argv[3], "cuda_major": "13"}
    def no_jit(name, sm, foreign=None):
        raise lean.ToolchainError(foreign.error(name, sm) if foreign else "no JIT in this test")
    sources.require_jit = no_jit
    reg = Registry(sys.argv[2], device_sm=90)
    out, errors = {}, {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in sys.argv[4].split(","):
            try:
                reg.cccl(name)
                st = reg.status()[name]
                out[name] = [st.source, st.path.split("/")[-2]]
            except Exception as e:
                errors[name] = str(e)
    print(json.dumps({"out": out, "errors": errors, "warnings": [str(w.message) for w in caught]}))
""")


def load_child(python: str, root: Path, release: str, names=SMALL_CCCL) -> dict:
    from aot.build.toolchain import stub_library
    r = subprocess.run([python, "-c", LOAD, str(stub_library()), str(root), release, ",".join(names)],
                       cwd=ROOT, env=repo_env(AOT_FORCE_STUB_TOOLCHAIN="1"), capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def restamp(src: Path, dst: Path, release: str) -> Path:
    """``src`` as if built under ``release`` (its manifest; the blobs stay the installed release's)."""
    shutil.copytree(src, dst)
    doc = json.loads((dst / MANIFEST_NAME).read_text())
    doc["producer"]["cuda_cccl"] = release
    for a in doc["artifacts"]:
        if a["family"] == "cccl":
            a["cuda_cccl"] = release
    (dst / MANIFEST_NAME).write_text(json.dumps(doc))
    return dst


def test_real_blobs_the_installed_release_loads_packaged(small_build, tmp_path):
    """The session's build (the installed cuda-cccl) merged with itself restamped as 1.1.0: under the installed
    release the loader deserializes its own blob (cuda.compute checks the version), through the stand-in
    driver; under 1.1.1, carried by neither, one warning and no blob is opened."""
    here = load_manifest(small_build.out).producer["cuda_cccl"]
    other = restamp(small_build.out, tmp_path / "other", "1.1.0")
    merged = tmp_path / "merged"
    merge([small_build.out, other], merged)
    r = load_child(sys.executable, merged, "installed")
    assert r["errors"] == {} and r["warnings"] == [], r
    assert r["out"] == {n: ["packaged", f"cuda-cccl-{here}"] for n in SMALL_CCCL}, r
    r = load_child(sys.executable, merged, "1.1.1")
    assert r["out"] == {} and len(r["warnings"]) == 1, r
    assert f"built with cuda-cccl 1.1.0, {here}, but cuda-cccl 1.1.1 is installed" in r["warnings"][0]
    assert all("pip install 'cuda-cccl>=1.1.0" in e for e in r["errors"].values()), r


# ------------------------------------------------------------------------------------------ several environments
def release_pythons() -> dict[str, str]:
    """``AOT_TEST_CCCL_PYTHONS``: ``os.pathsep``-separated Pythons, each of an environment with one cuda-cccl
    release and aot's build requirements (``.ci/cccl_envs.sh`` makes them); empty: the test skips."""
    found = {}
    for python in filter(None, os.environ.get("AOT_TEST_CCCL_PYTHONS", "").split(os.pathsep)):
        v = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('cuda-cccl'))"],
                           capture_output=True, text=True, check=True).stdout.strip()
        found[v] = python
    return found


@pytest.mark.slow
def test_build_under_each_release(tmp_path):
    """Build 2 CCCL specs for sm_90 under every release given (one environment each, like CI shards), merge,
    and load through the stand-in driver in each environment: each picks its own release's blob."""
    pythons = release_pythons()
    if len(pythons) < 2:
        pytest.skip("AOT_TEST_CCCL_PYTHONS names fewer than two environments of different cuda-cccl releases")
    matrix = tmp_path / "m.yaml"
    matrix.write_text("version: 1\ncccl:\n"
                      "  - {name: reduce_sum_i32, algorithm: reduce, dtype: int32, op: plus, init: 0}\n"
                      "  - {name: lower_bound_i32, algorithm: lower_bound, dtype: int32}\n")
    outs = []
    for release, python in sorted(pythons.items()):
        out = tmp_path / f"cccl-{release}"
        subprocess.run([python, "-m", "aot", "build", "--matrix", str(matrix), "--sm", "90", "--out", str(out),
                        "-q", "-j", "2"], cwd=ROOT, env=repo_env(), check=True, timeout=900)
        outs.append(out)
    merged = tmp_path / "merged"
    subprocess.run([sys.executable, "-m", "aot", "merge", "--out", str(merged), *map(str, outs), "-q"], cwd=ROOT,
                   env=repo_env(), check=True)
    m = load_manifest(merged)
    assert m.cccl_releases() == tuple(sorted(pythons, key=lambda r: tuple(map(int, r.split(".")))))
    for release, python in pythons.items():
        r = load_child(python, merged, "installed")
        assert r["errors"] == {} and r["warnings"] == [], (release, r)
        assert r["out"] == {n: ["packaged", f"cuda-cccl-{release}"] for n in SMALL_CCCL}, (release, r)
