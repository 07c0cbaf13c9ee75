"""The first-hit index (issue 42): derived by aot's manifest writer, bound to the manifest's bytes, and read by a
library's first packaged NVRTC hit instead of the manifest. Stale, foreign or malformed: one warning, the manifest
serves as before. Real builds (NVRTC), real cuda.core keys; no GPU."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

SRC = 'extern "C" __global__ void twice(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2; }\n'
MATRIX = """version: 1
nvrtc:
  - {name: twice, source: k.cu, kernels: [twice], options: {std: c++17}}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One NVRTC unit built for sm_90 (cubin + PTX)."""
    from aot.build.builder import build
    from aot.build.isolated import expose_build_env_toolkit
    from aot.build.matrix import load_matrix
    expose_build_env_toolkit()
    where = tmp_path_factory.mktemp("firsthit")
    (where / "k.cu").write_text(SRC)
    (where / "build_matrix.yaml").write_text(MATRIX)
    build(load_matrix(where / "build_matrix.yaml").specs, [90], where / "out", jobs=1)
    return where / "out"


@pytest.fixture
def copy(built, tmp_path) -> Path:
    dst = tmp_path / "set"
    shutil.copytree(built, dst)
    return dst


def _compile(root: Path, **kw):
    """``Program.compile(cache=aot.program_cache(...))`` of SRC; (the cache, every AotWarning said)."""
    import aot
    from cuda.core import Program, ProgramOptions
    cache = aot.program_cache("unused", registry=aot.Registry(root), **kw)
    cache._user = None  # no user cache: a miss must not write into ~/.cache
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        Program(SRC, "c++", ProgramOptions(arch="sm_90", std="c++17")).compile("cubin", cache=cache)
    return cache, [str(w.message) for w in said if issubclass(w.category, aot.AotWarning)]


def test_the_build_writes_the_index_of_its_manifest(built):
    import hashlib
    from aot.core.manifest import load_manifest
    doc = json.loads((built / "hit-index.json").read_bytes())
    assert doc["manifest_sha256"] == hashlib.sha256((built / "manifest.json").read_bytes()).hexdigest()
    m = load_manifest(built)
    assert sorted(e["path"] for e in doc["entries"]) == sorted(e["path"] for e in m.artifacts)
    for e in doc["entries"]:
        full = next(a for a in m.artifacts if a["path"] == e["path"])
        assert all(e[k] == full[k] for k in ("size", "sha256", "sm", "payload_kind", "content_key", "progkey"))
    assert doc["units"]["twice"]["source"] == m.built["twice"].source


def test_a_first_hit_is_served_from_the_index(copy, monkeypatch):
    """The manifest is never read: a registry whose catalog raises still serves the packaged image."""
    from aot.runtime.loader import registry as regmod
    monkeypatch.setattr(regmod.Registry, "_catalog", lambda self: pytest.fail("the manifest was read"))
    cache, said = _compile(copy)
    assert cache.counts == {"packaged": 1, "user": 0, "miss": 0} and said == []


@pytest.mark.parametrize("how", ["stale", "foreign", "not-json", "outside"])
def test_a_bad_index_is_one_warning_and_the_manifest_serves(copy, how):
    path = copy / "hit-index.json"
    doc = json.loads(path.read_bytes())
    if how == "stale":  # the manifest edited after the index was derived
        (copy / "manifest.json").write_text((copy / "manifest.json").read_text() + " ")
    elif how == "foreign":
        path.write_text(json.dumps({"format": "something-else", "version": 1}))
    elif how == "not-json":
        path.write_bytes(b"\x00garbage")
    else:  # an entry naming a file outside the set
        doc["entries"][0]["path"] = "../../etc/x.aot"
        path.write_text(json.dumps(doc))
    cache, said = _compile(copy)
    assert cache.counts == {"packaged": 1, "user": 0, "miss": 0}
    assert len(said) == 1 and "ignoring the first-hit index" in said[0], said


def test_a_damaged_image_is_one_warning_and_no_hit(copy):
    """The index's image fails its sha256: said once, not served (cuda.core compiles)."""
    doc = json.loads((copy / "hit-index.json").read_bytes())
    cubin = next(e for e in doc["entries"] if e["payload_kind"] == "cubin")
    data = bytearray((copy / cubin["path"]).read_bytes())
    data[-1] ^= 0xFF
    (copy / cubin["path"]).write_bytes(bytes(data))
    cache, said = _compile(copy)
    assert cache.counts == {"packaged": 0, "user": 0, "miss": 1}
    assert len(said) == 1 and "skipping" in said[0] and "sha256" in said[0], said


@pytest.mark.parametrize("var", ["AOT_DISABLE_PACKAGED", "AOT_JIT_ONLY"])
def test_disabled_packaged_artifacts_are_not_served_from_the_index(copy, monkeypatch, var):
    monkeypatch.setenv(var, "1")
    cache, _ = _compile(copy)
    assert cache.counts["packaged"] == 0


def test_units_that_include_headers_or_whose_key_is_stale_are_left_to_the_manifest(built):
    """derive(): a unit including a header (cuda.core's key does not cover its text) and an entry whose content
    key is not its definition's are not indexed; the plain unit is."""
    from aot.core.hitindex import derive
    doc = json.loads((built / "manifest.json").read_bytes())
    inc = dict(doc["specs"]["twice"], name="inc", source="#include <cuda_fp16.h>\n" + SRC)
    stale = dict(doc["specs"]["twice"], name="stale", source=SRC + "// edited after the build\n")
    doc["specs"].update(inc=inc, stale=stale)
    first = doc["artifacts"][0]
    doc["artifacts"] += [dict(first, name="inc", path="nvrtc/inc/x.aot"),
                         dict(first, name="stale", path="nvrtc/stale/x.aot")]
    index = json.loads(derive(doc, b"{}") or b"{}")
    assert sorted(index["units"]) == ["twice"]
    assert {e["name"] for e in index["entries"]} == {"twice"}


def test_removing_a_manifest_removes_its_index(copy):
    from aot.core.manifest import remove_manifest
    remove_manifest(copy)
    assert not (copy / "manifest.json").exists() and not (copy / "hit-index.json").exists()


def test_an_index_whose_unit_was_edited_is_caught_at_the_first_hit(copy):
    """The index rewritten beside its manifest (its sha256 kept) with other options for the unit: the hit's key is
    checked against those and fails, so one warning and the keys come from the manifest's definitions."""
    path = copy / "hit-index.json"
    doc = json.loads(path.read_bytes())
    doc["units"]["twice"]["options"] = {"bogus": 1}
    path.write_text(json.dumps(doc))
    cache, said = _compile(copy)
    assert cache.counts == {"packaged": 1, "user": 0, "miss": 0}
    assert len(said) == 1 and "is not cuda.core's key" in said[0], said


def test_a_by_source_lookup_checks_the_index_unit_too(copy):
    import aot
    path = copy / "hit-index.json"
    doc = json.loads(path.read_bytes())
    doc["units"]["twice"]["options"] = {"std": "c++14"}
    path.write_text(json.dumps(doc))
    lookup = aot.by_source("unused", registry=aot.Registry(copy))
    with pytest.warns(aot.AotWarning, match="source_key for unit twice is not the key of its own source"):
        assert lookup.unit(SRC, ["-std=c++17"]) == "twice"
