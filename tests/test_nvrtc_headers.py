"""NVRTC units served by source only where the user's headers are the build's (issue 46), on the CPU.

A unit that ``#include``s a header is built against header text A; the lookup by source serves it to a caller
whose ``-I`` folder holds A and refuses it (the library compiles) where the folder holds B: another
``#define`` in a header is another cubin, with the same source and options. A unit that includes nothing
records no digest and hashes nothing. cuda-core's version is in no NVRTC or numba item key."""

from __future__ import annotations

import pytest

SOURCE = '#include "mylib/scale.h"\nextern "C" __global__ void scale(float* x) { x[threadIdx.x] *= FACTOR; }\n'
PLAIN = 'extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n'
HEADER_A = "#pragma once\n#define FACTOR 2.0f\n"
HEADER_B = "#pragma once\n#define FACTOR 3.0f\n"


def _headers(folder, text):
    (folder / "mylib").mkdir(parents=True)
    (folder / "mylib" / "scale.h").write_text(text)
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Two units built for sm_90: ``scale`` (includes ``mylib/scale.h``, header text A) and ``twice`` (none)."""
    from aot.build.builder import build
    from aot.build.isolated import expose_build_env_toolkit
    from aot.build.matrix import load_matrix
    expose_build_env_toolkit()
    proj = tmp_path_factory.mktemp("hdr")
    _headers(proj / "include", HEADER_A)
    (proj / "scale.cu").write_text(SOURCE)
    (proj / "twice.cu").write_text(PLAIN)
    (proj / "m.yaml").write_text("version: 1\nnvrtc:\n"
                                 "  - {name: scale, source: scale.cu, include_dirs: [include], kernels: [scale]}\n"
                                 "  - {name: twice, source: twice.cu, kernels: [twice]}\n")
    out = proj / "out"
    build(load_matrix(proj / "m.yaml").specs, [90], out, jobs=1)
    return out


def _lookup(out):
    import aot
    return aot.by_source("unused", registry=aot.Registry(out))


def test_the_build_records_a_header_digest_only_where_the_source_includes(built):
    from aot.core.manifest import load_manifest
    m = load_manifest(built)
    fields = {e["name"]: e.get("header_digest") for e in m.artifacts}
    assert isinstance(fields["scale"], str) and len(fields["scale"]) == 64
    assert fields["twice"] is None
    assert not any("progkey" in e for e in m.artifacts if e["name"] == "scale")  # cuda.core keys no header text


def test_same_headers_are_served_other_headers_are_compiled(built, tmp_path, caplog):
    same = _headers(tmp_path / "a", HEADER_A)
    other = _headers(tmp_path / "b", HEADER_B)
    assert _lookup(built).unit(SOURCE, {"include_path": [str(same)]}) == "scale"
    assert _lookup(built).unit(SOURCE, ["-I" + str(same)]) == "scale"
    with caplog.at_level("INFO", logger="aot"):
        assert _lookup(built).unit(SOURCE, {"include_path": [str(other)]}) is None
    assert sum("differ from the build's" in r.getMessage() for r in caplog.records) == 1
    assert _lookup(built).unit(SOURCE, None) is None  # the header is found nowhere: not what was built


def test_a_header_the_source_reaches_later_counts(built, tmp_path):
    """A header added next to the included one and included by it: another closure, not served."""
    folder = _headers(tmp_path / "c", HEADER_A.replace("#pragma once\n", '#pragma once\n#include "extra.h"\n'))
    (folder / "mylib" / "extra.h").write_text("#define FACTOR_EXTRA 1\n")
    assert _lookup(built).unit(SOURCE, {"include_path": [str(folder)]}) is None


def test_an_older_entry_without_the_digest_is_compiled(built, tmp_path):
    import json
    import shutil
    old = tmp_path / "old"
    shutil.copytree(built, old)
    doc = json.loads((old / "manifest.json").read_text())
    for e in doc["artifacts"]:
        e.pop("header_digest", None)
    (old / "manifest.json").write_text(json.dumps(doc))
    (old / "hit-index.json").unlink()  # an older build wrote no first-hit index either
    same = _headers(tmp_path / "a", HEADER_A)
    assert _lookup(old).unit(SOURCE, {"include_path": [str(same)]}) is None
    assert _lookup(old).unit(PLAIN, None) == "twice"


def test_a_unit_that_includes_nothing_hashes_nothing(built, monkeypatch):
    from aot.runtime.adapters import hdrkey

    def no(*a, **k):
        raise AssertionError("hashed headers for a source that includes nothing")
    monkeypatch.setattr(hdrkey.HEADERS, "digest", no)
    monkeypatch.setattr(hdrkey.HEADERS, "_file", no)
    assert _lookup(built).unit(PLAIN, ["-I/anywhere"]) == "twice"


def test_file_labels_do_not_depend_on_where_the_folders_are(tmp_path):
    from aot.runtime.adapters.hdrkey import header_digest, search_path
    a = _headers(tmp_path / "one", HEADER_A)
    b = _headers(tmp_path / "two" / "deeper", HEADER_A)
    empty = tmp_path / "empty"
    empty.mkdir()
    d1 = header_digest(SOURCE, search_path([str(a)], ()))
    assert d1 == header_digest(SOURCE, search_path([str(empty), str(b)], ()))
    assert header_digest(PLAIN, search_path([str(a)], ())) is None


def test_cuda_core_version_is_in_no_nvrtc_or_numba_key():
    from aot.core.spec import NumbaKernel, NvrtcUnit, item_key
    unit = NvrtcUnit("u", "u.cu", PLAIN, ("twice",), {})
    with_headers = NvrtcUnit("h", "h.cu", '#include <cuda/std/cstdint>\n' + PLAIN, ("twice",), {})
    kernel = NumbaKernel("k", "pkg.mod:k", "void(float32[::1])", {}, "0" * 64, "0.30.4")
    base = {"aot": "0.1.0", "cuda_cccl": "1.2.1", "cuda_major": "13", "nvrtc": "13.0", "nvjitlink": "13.0"}
    for spec in (unit, with_headers, kernel):
        keys = {item_key(spec, 90, "cubin", {**base, "cuda_core": v}) for v in ("0.9.0", "1.2.2")}
        assert len(keys) == 1, spec.name
    assert item_key(unit, 90, "cubin", base) != item_key(unit, 90, "cubin", {**base, "nvrtc": "13.1"})


def test_a_set_keyed_before_cuda_core_left_the_key_still_loads(built, tmp_path):
    """An artifact whose content key is the schema-1 key (cuda-core's version in it) passes the loader's
    check; a key of neither schema is a stale artifact."""
    import hashlib
    import json
    import shutil
    from aot.core import format as fmt
    from aot.core.errors import ArtifactError
    from aot.core.manifest import load_manifest
    from aot.core.spec import item_key
    from aot.runtime.loader.sources import check_packaged
    old = tmp_path / "old"
    shutil.copytree(built, old)
    doc = json.loads((old / "manifest.json").read_text())
    (e,) = [e for e in doc["artifacts"] if e["name"] == "twice" and e["payload_kind"] == "cubin"]
    m = load_manifest(old)
    unit = m.built["twice"]
    legacy = item_key(unit, e["sm"], "cubin", m.producer, legacy=True)
    assert legacy != e["content_key"] and "cuda_core" in m.producer

    def rekey(key):
        art = fmt.read(old / e["path"])
        data = fmt.encode({**art.header, "content_key": key}, art.payload)
        (old / e["path"]).write_bytes(data)
        e.update(content_key=key, size=len(data), sha256=hashlib.sha256(data).hexdigest())
        (old / "manifest.json").write_text(json.dumps(doc))
        m = load_manifest(old)
        return check_packaged(m, m.built["twice"], next(x for x in m.artifacts if x["path"] == e["path"]),
                              old / e["path"])

    assert rekey(legacy).header["content_key"] == legacy
    with pytest.raises(ArtifactError, match="stale artifact"):
        rekey("0" * 64)
