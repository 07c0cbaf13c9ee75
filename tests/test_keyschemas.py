"""The manifest records the versions of aot's key and digest schemas (:mod:`aot.core.keyschemas`): a set built by
another schema is said as such at attach ("built by ... vN, this aot computes vM: rebuild the set") instead of
reading as changed kernels; ``aot merge`` keeps the field only where its inputs agree and refuses sets that
disagree before writing anything; a manifest without it keeps today's behaviour. numba's attach is
tests/test_numba.py's (a real build). No compiler here: synthetic CuPy payloads, as tests/test_cupy_merge.py."""

from __future__ import annotations

import json
import warnings

import pytest

import aot
from aot.build.merge import merge
from aot.core import keyschemas
from aot.core.errors import ArtifactError, AotWarning
from aot.core.manifest import load_manifest
from aot.runtime.adapters import cupy_attach
from tests.test_merge_schemas import SPEC
from tests.test_merge_schemas import _cupy_set as _set  # a one-artifact CuPy set recording the schemas given


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
