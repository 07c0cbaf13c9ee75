"""The manifest records the versions of aot's key and digest schemas (:mod:`aot.core.keyschemas`): a set built by
another schema is said as such at attach ("built by ... vN, this aot computes vM: rebuild the set") instead of
reading as changed kernels; ``aot merge`` keeps the field only where its inputs agree and refuses sets that
disagree before writing anything; a manifest without it keeps today's behaviour. numba's attach is
tests/test_numba.py's (a real build). No compiler here: synthetic CuPy payloads, as tests/test_cupy_merge.py."""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import pytest

import aot
from aot.build.merge import merge
from aot.core import format as fmt
from aot.core import keyschemas
from aot.core.errors import ArtifactError, AotWarning
from aot.core.manifest import load_manifest, write_manifest
from aot.core.spec import CupyKernel, item_key
from aot.runtime.adapters import cupy_attach

SOURCE = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n'
SPEC = CupyKernel(name="k.0", what="k(float* x)", source_sha256=hashlib.sha256(SOURCE.encode()).hexdigest(),
                  options=(), name_expressions=None, jitify=False, cupy="14.2.0", source=SOURCE)
HOST = {"aot": "0.1.0", "cuda_cccl": "1.2.1", "cuda_major": "13", "nvrtc": "13.0", "nvjitlink": "13.0",
        "cuda_core": "1.2.2"}
STACK = {"cupy": "14.2.0", "nvrtc": "13.0.88", "cuda_runtime": "13.0.96", "cuda_crt": "missing"}


def _set(root: Path, key: str, schemas: dict | None) -> Path:
    """A one-artifact CuPy set whose manifest records ``schemas`` (``None``: a manifest without the field)."""
    rel = f"cupy/{SPEC.name}/sm_90.cubin.aot"
    ck = item_key(SPEC, 90, "cubin", HOST)
    header = fmt.make_header(family="cupy", name=SPEC.name, content_key=ck, sm=90, payload_kind="cubin",
                             payload=b"cubin", producer={k: HOST[k] for k in fmt.PRODUCER_FIELDS},
                             extra={"cupy_key": key, "cupy_name": "x.cubin", "cupy_stack": STACK})
    data = fmt.encode(header, b"cubin")
    (root / rel).parent.mkdir(parents=True)
    (root / rel).write_bytes(data)
    extra: dict = {"sms": [90]} if schemas is None else {"sms": [90], "key_schemas": schemas}
    write_manifest(root, producer=HOST, specs={SPEC.name: SPEC.definition()}, extra=extra,
                   artifacts=[{"path": rel, "name": SPEC.name, "family": "cupy", "sm": 90, "payload_kind": "cubin",
                               "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "content_key": ck,
                               "cupy_key": key, "cupy_stacks": [STACK]}])
    return root


def test_a_cupy_set_built_by_another_key_schema_is_said_once_and_not_served(tmp_path):
    old = _set(tmp_path / "old", "a" * 64, {**keyschemas.SCHEMAS, "cupy_key": 1})
    reg = aot.Registry(old, owner="keyschemas_t")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = cupy_attach.attach_cupy(reg)
        mine = [str(w.message) for w in caught if issubclass(w.category, AotWarning)]
        said = f"built by CuPy compile key v1, this aot computes v{keyschemas.SCHEMAS['cupy_key']}: rebuild the set"
        assert len(mine) == 1 and said in mine[0] and "CuPy compiles" in mine[0], mine
        assert got == {SPEC.name: mine[0]} and reg not in cupy_attach._state["registries"]
        for schemas in (dict(keyschemas.SCHEMAS), None):  # this aot's, or a manifest that does not say: attached
            here = aot.Registry(_set(tmp_path / str(schemas is None), "a" * 64, schemas), owner="keyschemas_t")
            assert cupy_attach.attach_cupy(here) == {SPEC.name: "attached"}
    finally:
        cupy_attach.detach_cupy()


def test_merge_keeps_the_schemas_its_inputs_agree_on_and_refuses_sets_that_differ(tmp_path):
    now = dict(keyschemas.SCHEMAS)
    a, b = _set(tmp_path / "a", "a" * 64, now), _set(tmp_path / "b", "b" * 64, now)
    merge([a, b], tmp_path / "same")
    assert load_manifest(tmp_path / "same").key_schemas == now
    c = _set(tmp_path / "c", "c" * 64, None)  # one input does not say: neither does the merged set
    merge([a, c], tmp_path / "unsaid")
    assert load_manifest(tmp_path / "unsaid").key_schemas is None
    d = _set(tmp_path / "d", "d" * 64, {**now, "numba_digest": 2})
    with pytest.raises(ArtifactError, match="built by different aot key schemas"):
        merge([a, d], tmp_path / "mixed")
    assert not [p for p in (tmp_path / "mixed").rglob("*") if p.suffix in (".aot", ".json")]  # nothing written


@pytest.mark.parametrize("bad", [[1], {"numba_digest": "3"}, {"numba_digest": True}, {"": 1},
                                 {f"s{i}": 1 for i in range(65)}, {"numba_digest": -1}])
def test_a_foreign_key_schemas_field_is_refused_naming_it(tmp_path, bad):
    root = _set(tmp_path / "x", "a" * 64, None)
    doc = json.loads((root / "manifest.json").read_text())
    doc["key_schemas"] = bad
    (root / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="field 'key_schemas' must map schema names to versions"):
        load_manifest(root)


def test_mismatch_names_the_family_schema_and_says_nothing_where_the_manifest_does_not():
    assert keyschemas.mismatch(None, "numba") is None
    assert keyschemas.mismatch({}, "numba") is None
    assert keyschemas.mismatch(dict(keyschemas.SCHEMAS), "numba") is None
    assert keyschemas.mismatch({"numba_digest": 2}, "cupy") is None  # another family's schema
    assert keyschemas.mismatch({"nvrtc_headers": 0}, "nvrtc") == \
        f"built by NVRTC header digest v0, this aot computes v{keyschemas.SCHEMAS['nvrtc_headers']}: rebuild the set"
