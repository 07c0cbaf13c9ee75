"""Every way a set is made from others keeps the key schemas its entries were made by (``key_schemas``,
:mod:`aot.core.keyschemas`), so the runtime still says "built by vN, this aot computes vM" and JITs instead of
reading every stale key as a changed kernel: the generic merge, CuPy stacks, cccl-legacy answers, CUDA majors,
packs. Inputs whose schemas differ are a conflict, every one listed before anything is written. A bundle of two
majors carries, per major, the CuPy specs of the sets merged in, as a bundle of one does. No compiler: synthetic
payloads (tests/test_cupy_merge.py's, tests/test_keyschemas.py's)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from pathlib import Path

import pytest

from aot.build import legacy_set
from aot.build.merge import merge
from aot.core import format as fmt
from aot.core import keyschemas
from aot.core.errors import ArtifactError, AotWarning
from aot.core.manifest import load_manifest, verify_files, write_manifest
from aot.core.spec import CupyKernel, item_key

SOURCE = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }\n'
SPEC = CupyKernel(name="k.0", what="k(float* x)", source_sha256=hashlib.sha256(SOURCE.encode()).hexdigest(),
                  options=(), name_expressions=None, jitify=False, cupy="14.2.0", source=SOURCE)
P13 = {"aot": "0.1.0", "cuda_cccl": "1.2.1", "cuda_major": "13", "nvrtc": "13.0", "nvjitlink": "13.0",
       "cuda_core": "1.2.2"}
P12 = {**P13, "cuda_major": "12", "nvrtc": "12.9", "nvjitlink": "12.9"}
STACK = {"cupy": "14.2.0", "nvrtc": "13.0.88", "cuda_runtime": "13.0.96", "cuda_crt": "missing"}
NOW = dict(keyschemas.SCHEMAS)


def _cupy_set(root: Path, key: str, schemas: dict | None = NOW, producer: dict = P13, spec: CupyKernel = SPEC) -> Path:
    """A one-artifact CuPy set as ``aot build`` writes it, its manifest recording ``schemas`` (``None``: an
    older manifest without the field)."""
    rel = f"cupy/{spec.name}/sm_90.cubin.aot"
    ck = item_key(spec, 90, "cubin", producer)
    payload = f"cubin of {key[:4]}".encode()
    header = fmt.make_header(family="cupy", name=spec.name, content_key=ck, sm=90, payload_kind="cubin",
                             payload=payload, producer={k: producer[k] for k in fmt.PRODUCER_FIELDS},
                             extra={"cupy_key": key, "cupy_name": "x.cubin", "cupy_stack": STACK})
    data = fmt.encode(header, payload)
    (root / rel).parent.mkdir(parents=True)
    (root / rel).write_bytes(data)
    extra: dict = {"sms": [90]} if schemas is None else {"sms": [90], "key_schemas": schemas}
    write_manifest(root, producer=producer, specs={spec.name: spec.definition()}, extra=extra,
                   artifacts=[{"path": rel, "name": spec.name, "family": "cupy", "sm": 90, "payload_kind": "cubin",
                               "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "content_key": ck,
                               "cupy_key": key, "cupy_stacks": [STACK]}])
    return root


def _legacy_set(root: Path, release: str = "0.6.0") -> Path:
    """A legacy-only set as ``aot.build.cccl_legacy_build`` writes it (through :func:`legacy_set.add_answers`)."""
    from aot.runtime.adapters.cccl_legacy import encode_entry
    key = hashlib.sha256(root.name.encode()).hexdigest()
    made_by = {**P13, "cuda_cccl": release, "numba": "0.62.0", "numba_cuda": "0.30.4", "python": "3.12.0"}
    legacy_set.add_answers(root, release, made_by, 90, ["reduce:int32:plus:0"],
                           [(key, "nvrtc", "reduce:int32:plus:0", encode_entry(key, "nvrtc", release, b"ltoir"))])
    return root


def _written(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) if root.exists() else []


# ------------------------------------------------------------------------------ each merge path keeps them
def test_a_legacy_only_set_records_the_schemas_and_merging_it_in_keeps_the_sets(tmp_path):
    """cccl-legacy answers were written without ``key_schemas``: merged into a build's set (the bundle's own
    cccl-legacy step does it for every such package) the field was dropped, and the set lost the protection."""
    legacy = _legacy_set(tmp_path / "legacy")
    assert load_manifest(legacy).key_schemas == NOW
    merge([_cupy_set(tmp_path / "a", "a" * 64), legacy], tmp_path / "out")
    got = load_manifest(tmp_path / "out")
    assert got.key_schemas == NOW and set(got.legacy) == {"0.6.0"} and verify_files(got) == []
    merge([_legacy_set(tmp_path / "l6"), _legacy_set(tmp_path / "l7", "0.7.0")], tmp_path / "answers")
    assert load_manifest(tmp_path / "answers").key_schemas == NOW  # answers only: still said


def test_an_older_legacy_only_set_without_the_field_does_not_take_it_from_the_set(tmp_path):
    """An answer is keyed by its own key schema, none of those listed: a legacy-only set written before the field
    existed leaves the merged set's schemas as the other inputs say them."""
    legacy = _legacy_set(tmp_path / "legacy")
    doc = json.loads((legacy / "manifest.json").read_text())
    del doc["key_schemas"]
    (legacy / "manifest.json").write_text(json.dumps(doc))
    merge([_cupy_set(tmp_path / "a", "a" * 64), legacy], tmp_path / "out")
    assert load_manifest(tmp_path / "out").key_schemas == NOW


def test_cupy_stacks_and_majors_keep_them(tmp_path):
    a, b = _cupy_set(tmp_path / "a", "a" * 64), _cupy_set(tmp_path / "b", "b" * 64)
    merge([a, b], tmp_path / "stacks")
    assert load_manifest(tmp_path / "stacks").key_schemas == NOW
    c12 = _cupy_set(tmp_path / "c12", "c" * 64, producer=P12)
    s = merge([c12, a, b], tmp_path / "majors")
    assert s["cuda_majors"] == [12, 13]
    assert [load_manifest(tmp_path / "majors" / d).key_schemas for d in ("cu12", "cu13")] == [NOW, NOW]


def test_a_set_made_by_an_older_aot_keeps_the_versions_it_shares_with_a_newer_ones(tmp_path):
    """A newer aot names a schema the older did not (Triton's): the sets still merge, and the merged set says
    what both say; the schema only one names is left unsaid (its keys compared as they are)."""
    older = {k: v for k, v in NOW.items() if not k.startswith("triton")}
    assert older != NOW
    merge([_cupy_set(tmp_path / "a", "a" * 64), _cupy_set(tmp_path / "b", "b" * 64, older)], tmp_path / "out")
    assert load_manifest(tmp_path / "out").key_schemas == older


def test_a_packed_bundle_keeps_them(tmp_path):
    from aot.package.pkginfo import fill_folder
    src = _cupy_set(tmp_path / "a", "a" * 64)
    (tmp_path / "stage").mkdir()
    fill_folder(tmp_path / "stage", src, {"sms": [90]}, None, pack=True)
    got = load_manifest(tmp_path / "stage")
    assert got.key_schemas == NOW and all("pack" in a for a in got.artifacts) and verify_files(got) == []


def test_a_packed_set_merges_like_its_files(tmp_path):
    """A bundled folder whose artifacts are packed (a wheel's) is a merge input like a build's: its entries read
    from their packs, the merged set plain files. It crashed with a FileNotFoundError after writing part of the
    set (the generic path) or was refused as unreadable (CuPy stacks)."""
    from aot.package.pkginfo import fill_folder
    packed = tmp_path / "packed"
    packed.mkdir()
    fill_folder(packed, _cupy_set(tmp_path / "a", "a" * 64), {"sms": [90]}, None, pack=True)
    b = _cupy_set(tmp_path / "b", "b" * 64)
    for inputs, out in (([packed, b], "stacks"), ([packed, _legacy_set(tmp_path / "legacy")], "generic"),
                        ([packed, _cupy_set(tmp_path / "c12", "c" * 64, producer=P12)], "majors")):
        merge(inputs, tmp_path / out)
        got = load_manifest(tmp_path / out, major="13")
        assert verify_files(got) == [] and not any("pack" in a for a in got.artifacts), out
        assert "a" * 64 in {a["cupy_key"] for a in got.artifacts} and got.key_schemas == NOW, out


# ------------------------------------------------------------------------------ conflicts: all listed, nothing written
def test_every_input_whose_schemas_differ_is_listed_before_anything_is_written(tmp_path):
    a = _cupy_set(tmp_path / "a", "a" * 64)
    b = _cupy_set(tmp_path / "b", "b" * 64, {**NOW, "numba_digest": 2})
    c = _cupy_set(tmp_path / "c", "c" * 64, {**NOW, "cupy_key": 1})
    with pytest.raises(ArtifactError) as e:
        merge([a, b, c], tmp_path / "cupy")
    said = str(e.value)
    assert "numba kernel digest" in said and "CuPy compile key" in said and str(b) in said and str(c) in said, said
    assert _written(tmp_path / "cupy") == []
    legacy = _legacy_set(tmp_path / "legacy")  # the generic path (answers beside a set): listed with the rest
    with pytest.raises(ArtifactError, match=r"2 input\(s\) built by different aot key schemas") as e:
        merge([a, legacy, b, c], tmp_path / "generic")
    assert str(b) in str(e.value) and str(c) in str(e.value)
    assert _written(tmp_path / "generic") == []


def test_differing_schemas_in_one_major_stop_the_merge_before_any_major_is_written(tmp_path):
    """Majors were merged one after the other: the cu12 set was written before the cu13 inputs were found to
    disagree, and stayed behind."""
    c12 = _cupy_set(tmp_path / "c12", "c" * 64, producer=P12)
    a = _cupy_set(tmp_path / "a", "a" * 64)
    b = _cupy_set(tmp_path / "b", "b" * 64, {**NOW, "numba_digest": 2})
    with pytest.raises(ArtifactError, match="numba kernel digest"):
        merge([c12, a, b], tmp_path / "out")
    assert _written(tmp_path / "out") == []


def test_every_majors_conflicts_are_listed_before_any_major_is_written(tmp_path):
    """Not only the schemas: two CuPy inputs of cu12 with other bytes under one key, and two of cu13, are both
    said, and no major's set is written (cu12's was, before cu13's inputs were checked)."""
    sets = [_cupy_set(tmp_path / f"{m}{i}", "c" * 64, producer=p, spec=dataclasses.replace(SPEC, source=src))
            for m, p in (("cu12-", P12), ("cu13-", P13)) for i, src in enumerate((SOURCE, SOURCE + "//\n"))]
    for d, pay in zip(sets, (b"x", b"y", b"x", b"y")):  # one key, other bytes: a conflict in each major
        entry = json.loads((d / "manifest.json").read_text())["artifacts"][0]
        old = fmt.read(d / entry["path"])
        data = fmt.encode({**old.header, "payload_sha256": hashlib.sha256(pay).hexdigest(), "payload_size": 1}, pay)
        (d / entry["path"]).write_bytes(data)
        doc = json.loads((d / "manifest.json").read_text())
        doc["artifacts"][0].update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
        (d / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError) as e:
        merge(sets, tmp_path / "out")
    assert "cu12" in str(e.value) and "cu13" in str(e.value) and str(e.value).count("CuPy key cccccccc") == 2, e.value
    assert _written(tmp_path / "out") == []
    with pytest.raises(ArtifactError, match="^merge: cu13: 1 CuPy artifact"):  # cu12's set is not written either
        merge(sets[1:], tmp_path / "out")
    assert _written(tmp_path / "out") == []


def test_majors_built_by_different_schemas_are_a_conflict(tmp_path):
    """One wheel's majors are served by one aot: a major built by another schema would serve nothing."""
    c12 = _cupy_set(tmp_path / "c12", "c" * 64, {**NOW, "cupy_key": 1}, producer=P12)
    with pytest.raises(ArtifactError, match="CuPy compile key"):
        merge([c12, _cupy_set(tmp_path / "a", "a" * 64)], tmp_path / "out")
    assert _written(tmp_path / "out") == []


# ------------------------------------------------------------------------------ Triton's schemas
def test_tritons_digest_and_key_versions_are_in_the_table_their_modules_read():
    from aot.runtime.adapters import triton_digest, triton_pykey
    assert triton_digest.SCHEMA == f"aot-triton-digest-v{keyschemas.SCHEMAS['triton_digest']}\0".encode()
    assert triton_pykey.SCHEMA == f"aot-triton-pykey-v{keyschemas.SCHEMAS['triton_aot_key']}"
    assert keyschemas.mismatch({"triton_digest": 0}, "triton") == \
        f"built by Triton kernel digest v0, this aot computes v{NOW['triton_digest']}: rebuild the set"


def test_a_triton_set_built_by_another_digest_schema_is_said_once_and_imports_nothing(tmp_path, monkeypatch):
    """Said as what happened (the set's digest schema), not as "its source differs from the packaged build's";
    the kernel's module is not imported."""
    import aot
    from aot.core.spec import TritonKernel
    from aot.runtime.adapters import triton_attach
    spec = TritonKernel(name="add", kernel="nowhere_pkg.kernels:add", signature=(("x", "*fp32"),), constexprs=(),
                        divisible_by_16=("x",), equal_to_1=(), options={}, digest="d" * 64)
    payload = b"cubin"
    rel = "triton/add/sm_90.cubin.aot"
    header = fmt.make_header(family="triton", name="add", content_key="e" * 64, sm=90, payload_kind="cubin",
                             payload=payload, producer={k: P13[k] for k in fmt.PRODUCER_FIELDS})
    data = fmt.encode(header, payload)
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).write_bytes(data)
    write_manifest(tmp_path, producer=P13, specs={"add": spec.definition()},
                   extra={"sms": [90], "key_schemas": {**NOW, "triton_digest": 0}},
                   artifacts=[{"path": rel, "name": "add", "family": "triton", "sm": 90, "payload_kind": "cubin",
                               "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "content_key": "e" * 64,
                               "triton_key": "f" * 64, "triton_name": "add.cubin",
                               "triton": triton_attach.installed_version(), "triton_build": "x"}])
    monkeypatch.setattr(triton_attach, "resolve_kernel", lambda *a, **k: pytest.fail("imported the kernel"))
    reg = aot.Registry(tmp_path, owner="nowhere_pkg")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = triton_attach.attach_triton(reg)
    mine = [str(w.message) for w in caught if issubclass(w.category, AotWarning)]
    assert len(mine) == 1 and "built by Triton kernel digest v0" in mine[0] and "Triton compiles" in mine[0], mine
    assert got == {"add": mine[0]}


def test_tritonspec_refuses_a_kernel_reference_in_the_shared_checks_words():
    from aot.core import fieldcheck, tritonspec
    from aot.core.text import SpecError
    for bad in (3, "no_colon", "pkg.mod:", " :k"):
        with pytest.raises(SpecError) as shared:
            fieldcheck.kernel_ref(bad)
        with pytest.raises(SpecError) as triton:
            tritonspec.check_entry({"kernel": bad, "signature": {"x": "*fp32"}})
        assert (str(triton.value), triton.value.field) == (str(shared.value), shared.value.field)
    assert not hasattr(tritonspec, "check_kernel_ref")  # one check: aot.core.fieldcheck.kernel_ref


# ------------------------------------------------------------------------------ a bundle of two majors
def test_a_two_majors_bundle_carries_each_majors_merged_in_cupy_specs(tmp_path):
    """``[tool.aot] merge`` brings a set recorded under another CuPy release (its generated code: other specs);
    the one-major bundle carries them (test_cupy_merge), the two-majors bundle dropped them from both majors."""
    from aot.package.bundle import bundle
    from aot.package.config import AotConfig
    pkg = tmp_path / "proj" / "p"
    pkg.mkdir(parents=True)
    (tmp_path / "proj" / "k.cu").write_text(SOURCE)
    (tmp_path / "proj" / "m.yaml").write_text(
        "version: 1\ncupy:\n  - {name: k.0, what: 'k(float* x)', source: k.cu, options: [], "
        "name_expressions: null, jitify: false, cupy: 14.2.0}\n")
    other = dataclasses.replace(SPEC, name="k.cupy13.6.0", cupy="13.6.0")
    host = _cupy_set(tmp_path / "host", "a" * 64)
    merged_in = [_cupy_set(tmp_path / "c136", "b" * 64, spec=other),
                 _cupy_set(tmp_path / "c12", "c" * 64, producer=P12),
                 _cupy_set(tmp_path / "c12-136", "d" * 64, producer=P12, spec=other)]
    cfg = AotConfig(project=tmp_path / "proj", pyproject=tmp_path / "proj" / "pyproject.toml", package="p",
                    package_dir=pkg, matrix=tmp_path / "proj" / "m.yaml", sm="90", folder="artifacts", prebuilt=None,
                    allow_partial=False, merge=tuple(merged_in), dynamic=("dependencies",))
    res = bundle(cfg, prebuilt=host, require_pins=False, work=tmp_path / "work" / "aot")
    for major in ("cu12", "cu13"):
        got = load_manifest(res.out / major)
        assert sorted(a["name"] for a in got.artifacts) == ["k.0", "k.cupy13.6.0"], major
        assert sorted(got.specs) == ["k.0", "k.cupy13.6.0"] and verify_files(got) == [] and got.key_schemas == NOW
