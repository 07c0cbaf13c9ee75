"""What a library's first packaged NVRTC hit costs aot, counted (issue 42: first operation at most +2 ms over the
library's own warm cuda.core cache). Counted, not timed, so the test holds under any load: the aot modules the
first ``Program.compile(cache=aot.program_cache(PKG))`` imports, metadata scans (with 230 distributions on
``sys.path``, as on the H200), files opened, threads started; the same for a set whose units are packed (served from
the first-hit index too, no longer through the manifest) and for ``aot.by_source`` with the driver's load stubbed.
adopt_mypkg's ``saxpy`` built for sm_90 by real NVRTC, installed as its wheel installs it; fresh processes through
benchmarks/first_hit_cpu.py, whose timings the manual quotes."""

from __future__ import annotations

import json
import shutil
import struct
import sys
import warnings

import pytest
from conftest import ROOT, load_script, repo_env
from tests.test_layers import FIRST_HIT_CLOSURE

EXAMPLE = ROOT / "examples" / "adopt-mypkg"

#: What the first hit imports after ``import aot`` and the library's own modules (issue 42): the first-hit index's
#: reader and the artifact codec, the registry's front and its families' stat. No manifest, spec, rule, form,
#: logging or thread module (a warmup's), and ``aot.core.pack`` only for a packed set.
CLOSURE = sorted([*FIRST_HIT_CLOSURE, "aot.runtime.loader.families"])  # tests/test_layers.py's, and the families' stat
#: Modules no first hit may import, whichever way the library asks.
NEVER = ("aot.core.manifest", "aot.core.spec", "aot.core.rules", "aot.core.formrules", "aot.algorithms",
         "aot.runtime.loader.catalog", "aot.runtime.loader.sources", "aot.runtime.loader.threads", "aot.core.log")


def _bench():
    return load_script("first_hit_cpu", "benchmarks/first_hit_cpu.py")


@pytest.fixture(scope="module")
def built(tmp_path_factory, aot_cache_dir):
    """adopt_mypkg's saxpy for sm_90 (cubin and PTX)."""
    from aot.build.builder import build
    from aot.build.matrix import load_matrix
    sys.path.insert(0, str(EXAMPLE))
    try:
        specs = [s for s in load_matrix(EXAMPLE / "build_matrix.yaml").specs if s.name == "saxpy"]
    finally:
        sys.path.remove(str(EXAMPLE))
        for name in [m for m in sys.modules if m == "adopt_mypkg" or m.startswith("adopt_mypkg.")]:
            del sys.modules[name]
    out = tmp_path_factory.mktemp("first-hit-cost") / "out"
    build(specs, [90], out, jobs=1)
    return out


def _site(built, where, pack: bool):
    """adopt_mypkg with its artifacts, as its wheel installs it (``aot bundle``'s folder; packed or not)."""
    from aot.package.bundle import write_package_folder
    pkg = where / "site" / "adopt_mypkg"
    shutil.copytree(EXAMPLE / "adopt_mypkg", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    write_package_folder(built, pkg / "artifacts", {"sms": [90]}, pack=pack)
    return where / "site"


def _first(site, way: str, dists: int = 230) -> dict:
    bench = _bench()
    with bench.environment(site, dists) as (env, cfg):
        env = {**env, "PYTHONPATH": repo_env()["PYTHONPATH"] + ":" + env["PYTHONPATH"]}
        return bench.counted(site, way, env, cfg)


def test_a_first_hit_reads_three_files_and_scans_no_metadata(built, tmp_path):
    got = _first(_site(built, tmp_path, pack=False), "program_cache")
    assert got["where"] == {"packaged": 1, "user": 0, "miss": 0}, got
    assert got["aot_modules"] == CLOSURE, got["aot_modules"]
    assert got["other_modules"] == [], got["other_modules"]  # logging, importlib.metadata, ... : none
    assert got["metadata_scans"] == 0 and got["threads"] == 0, got
    assert got["files"] == ["adopt_mypkg/artifacts/hit-index.json", "adopt_mypkg/artifacts/manifest.json",
                            "adopt_mypkg/artifacts/nvrtc/saxpy/sm_90.cubin.aot"], got["files"]


def test_a_packed_unit_is_served_from_the_index(built, tmp_path):
    """Before: the index named files only, so a packed set's first hit read and validated the whole manifest
    (31 aot modules, the spec and rule modules among them)."""
    site = _site(built, tmp_path, pack=True)
    index = json.loads((site / "adopt_mypkg" / "artifacts" / "hit-index.json").read_bytes())
    assert index["version"] == 2 and {e.get("pack") for e in index["entries"]} == {"nvrtc/saxpy/all.aotpack"}
    got = _first(site, "program_cache")
    assert got["where"] == {"packaged": 1, "user": 0, "miss": 0}, got
    assert got["aot_modules"] == sorted(CLOSURE + ["aot.core.pack"]), got["aot_modules"]
    assert got["metadata_scans"] == 0 and got["threads"] == 0, got
    assert got["files"] == ["adopt_mypkg/artifacts/hit-index.json", "adopt_mypkg/artifacts/manifest.json",
                            "adopt_mypkg/artifacts/nvrtc/saxpy/all.aotpack"], got["files"]


def test_a_first_lookup_by_source_is_as_lean(built, tmp_path):
    """``aot.by_source(...).kernels(...)``: the image read and checked by aot, the driver's load stubbed."""
    got = _first(_site(built, tmp_path, pack=False), "by_source")
    assert got["where"][0] == "saxpy" and got["where"][2] == "cubin", got
    assert not [m for m in got["aot_modules"] if m.startswith(NEVER)], got["aot_modules"]
    assert got["metadata_scans"] == 0 and got["threads"] == 0, got
    assert got["files"][-1] == "adopt_mypkg/artifacts/nvrtc/saxpy/sm_90.cubin.aot" and len(got["files"]) == 3, got


def _compile(root):
    import aot
    from cuda.core import Program, ProgramOptions
    sys.path.insert(0, str(EXAMPLE))
    try:
        from adopt_mypkg.kernels import SAXPY
    finally:
        sys.path.remove(str(EXAMPLE))
    cache = aot.program_cache("unused", registry=aot.Registry(root))
    cache._user = None  # no user cache: a miss must not write into ~/.cache
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        Program(SAXPY, "c++", ProgramOptions(arch="sm_90", std="c++17", define_macro="BLOCK=256")).compile(
            "cubin", cache=cache)
    return cache.counts, [str(w.message) for w in said if issubclass(w.category, aot.AotWarning)]


@pytest.mark.parametrize("how", ["outside", "not-a-pack", "in-version-1"])
def test_a_bad_pack_entry_is_one_warning_and_the_manifest_serves(built, tmp_path, how):
    root = _site(built, tmp_path, pack=True) / "adopt_mypkg" / "artifacts"
    path = root / "hit-index.json"
    doc = json.loads(path.read_bytes())
    if how == "outside":
        doc["entries"][0]["pack"] = "../../x.aotpack"
    elif how == "not-a-pack":
        doc["entries"][0]["pack"] = "nvrtc/saxpy/sm_90.cubin.aot"
    else:  # an index of version 1 names no pack: a reader of version 1 would read the member's path as a file
        doc["version"] = 1
    path.write_text(json.dumps(doc))
    counts, said = _compile(root)
    assert counts == {"packaged": 1, "user": 0, "miss": 0}
    assert len(said) == 1 and "ignoring the first-hit index" in said[0], said


def test_a_damaged_pack_is_one_warning_and_no_hit(built, tmp_path):
    root = _site(built, tmp_path, pack=True) / "adopt_mypkg" / "artifacts"
    pack = root / "nvrtc" / "saxpy" / "all.aotpack"
    data = bytearray(pack.read_bytes())
    start = 12 + struct.unpack_from("<I", data, 8)[0]  # the stream: the cubin is its first member (PTX last)
    data[start + 40] ^= 0xFF
    pack.write_bytes(bytes(data))
    counts, said = _compile(root)
    assert counts == {"packaged": 0, "user": 0, "miss": 1}
    assert len(said) == 1 and "skipping" in said[0] and "all.aotpack" in said[0], said


def test_the_index_knows_the_pack_suffix():
    from aot.core import hitindex, pack
    assert hitindex.PACKED == pack.PACK_SUFFIX


@pytest.mark.parametrize("field, value", [("size", True), ("sm", -90), ("sha256", "A" * 64), ("content_key", "0" * 63),
                                          ("progkey", "g" * 64), ("source_key", 1), ("path", "nvrtc/../x.aot"),
                                          ("progkey_nvrtc", 13.0)])
def test_a_malformed_index_entry_is_one_warning_and_the_manifest_serves(built, tmp_path, field, value):
    """Every field a first hit reads is checked when the index is read (the checks were made cheaper, issue 42)."""
    root = _site(built, tmp_path, pack=False) / "adopt_mypkg" / "artifacts"
    path = root / "hit-index.json"
    doc = json.loads(path.read_bytes())
    doc["entries"][0][field] = value
    path.write_text(json.dumps(doc))
    counts, said = _compile(root)
    assert counts == {"packaged": 1, "user": 0, "miss": 0}
    assert len(said) == 1 and "is malformed" in said[0], said
