"""aot.algorithms and the fields of issue 10: every algorithm, struct types, operators from code, counting
inputs, templated NVRTC units with headers. The test matrix (tests/data/algorithms) validates, a subset of
it builds for two SMs here (the full matrix: the slow job, .ci/slow), its artifacts parse and its definitions come
back from the manifest; every new field's errors name file, line, spec and field."""

from __future__ import annotations

import shutil
import sys
import warnings
from pathlib import Path

import pytest

from aot.core import format as fmt
from aot.algorithms import ALGORITHMS
from aot.core.errors import AotError, MatrixError
from aot.build.matrix import load_matrix
from aot.core.spec import CcclSpec, NvrtcUnit
from aot.core.rules import spec_from_definition

DATA = Path(__file__).resolve().parent / "data"
MATRIX = DATA / "algorithms" / "build_matrix.yaml"
#: Two SMs for a few cheap items (counting-input select with an operator from code, histogram, the
#: templated unit: cubins for both SMs, PTX for the lower); the struct reduce (~25 s) for one SM.
SUBSET = ("t_select_indices", "t_histogram_even", "test_templated")
STRUCT = ("t_reduce_bbox",)
SMS = (80, 90)


@pytest.fixture(scope="module", autouse=True)
def ops_on_path():
    """tests/data on sys.path: the matrix's operators from code live in tests/data/aot_test_ops.py (build
    workers are spawned with the parent's sys.path)."""
    sys.path.insert(0, str(DATA))
    try:
        yield
    finally:
        sys.path.remove(str(DATA))


@pytest.fixture(scope="module")
def matrix():
    return load_matrix(MATRIX)


def test_registry_holds_fifteen_algorithms():
    assert len(ALGORITHMS) == 15
    for name, algo in ALGORITHMS.items():
        assert algo.name == name and algo.factory.startswith("make_")
        for slot in algo.ops:
            assert slot.field in algo.fields, (name, slot)


def test_test_matrix_covers_everything(matrix):
    cccl = [s for s in matrix.specs if isinstance(s, CcclSpec)]
    assert {s.algorithm for s in cccl} == set(ALGORITHMS)
    ss = {(s.params["value_dtype"] is not None, s.params["order"]) for s in cccl if s.algorithm == "segmented_sort"}
    assert ss == {(False, "ascending"), (False, "descending"), (True, "ascending"), (True, "descending")}
    bbox = next(s for s in cccl if s.name == "t_reduce_bbox")
    assert bbox.types == {"bbox": (("xmin", "float64"), ("ymin", "float64"), ("xmax", "float64"),
                                   ("ymax", "float64"))}
    assert list(bbox.code) == ["aot_test_ops:bbox_union"] and len(bbox.code["aot_test_ops:bbox_union"]) == 64
    assert next(s for s in cccl if s.name == "t_select_indices").params["input"] == "counting"
    unit = next(s for s in matrix.specs if isinstance(s, NvrtcUnit))
    assert unit.name_expressions() == ("axpy<float>", "axpy<double>", "block_max<int, 128>")
    assert list(unit.headers) == ["aot_test/scale.cuh"]


def test_definitions_round_trip(matrix):
    for s in matrix.specs:
        d = s.definition()
        if isinstance(s, NvrtcUnit):
            d["source"] = s.source
        back = spec_from_definition(d)
        assert back.content_key() == s.content_key(), s.name
        assert back.definition() == s.definition()


def test_existing_content_keys_unchanged():
    """Spec keys change only on purpose (values pinned; last changed by cccl_patches PATCH_VERSION 2, which
    names operator wrappers from content: every CCCL key moved, NVRTC keys did not)."""
    keys = {s.name: s.content_key() for s in load_matrix().specs}
    assert keys["reduce_sum_i32"] == "b3b6fca865a495f71831d61ff1f2348b52a2b017e8b4bd79e83f4ffa0e95d206"
    assert keys["select_nonzero_i32"] == "bde7573916ea0c5aff4a6eae89a1ab3b68fc134527707c775820ab784fe614f9"
    assert keys["radix_sort_pairs_u64_i32"] == "67b2ed85416c593fd39f658aa8369860d329f5d8704a78012ca4107069e595eb"
    assert keys["morton"] == "af0bea30020552fa65348785c6ecf27ff0c8f28380c229785c7b7722984b24ee"


def test_operator_source_is_in_the_key(tmp_path):
    mod = tmp_path / "h6_edit_ops.py"
    mod.write_text("def pred(i):\n    return i % 3 == 0\n")
    m = tmp_path / "m.yaml"
    m.write_text("cccl:\n  - {name: s, algorithm: select, dtype: int64, op: 'h6_edit_ops:pred', input: counting}\n")
    sys.path.insert(0, str(tmp_path))
    try:
        k1 = load_matrix(m).specs[0].content_key()
        mod.write_text("def pred(i):\n    return i % 5 == 0\n")
        k2 = load_matrix(m).specs[0].content_key()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("h6_edit_ops", None)
    assert k1 != k2


def test_header_bytes_are_in_the_key(tmp_path):
    shutil.copytree(DATA / "algorithms", tmp_path / "m")
    path = tmp_path / "m" / "build_matrix.yaml"
    k1 = load_matrix(path).select(["test_templated"])[0].content_key()
    hdr = tmp_path / "m" / "include" / "aot_test" / "scale.cuh"
    hdr.write_text(hdr.read_text() + "// edited\n")
    assert load_matrix(path).select(["test_templated"])[0].content_key() != k1


def test_optional_field_at_default_is_not_recorded(tmp_path):
    m = tmp_path / "m.yaml"
    m.write_text("cccl:\n  - {name: a, algorithm: select, dtype: int32, op: 'lambda x: x != 0'}\n"
                 "  - {name: b, algorithm: select, dtype: int32, op: 'lambda x: x != 0', input: array}\n")
    a, b = load_matrix(m).specs
    assert "input" not in a.definition() and a.content_key() == b.content_key()


# ------------------------------------------------------------------------------ validation of new fields
HEAD = "version: 1\n"
BBOX = "types:\n  bbox: {xmin: float64, xmax: float64}\n"
ERRORS = [
    ("struct-field-dtype", "types:\n  bbox: {xmin: flaot64}\ncccl:\n  - {name: s, algorithm: reduce, dtype: int32, "
     "op: plus, init: 0}\n", ["{f}:3:", "field 'types.bbox.xmin'", "unknown dtype 'flaot64'", "did you mean 'float64'?"]),
    ("struct-named-like-dtype", "types:\n  int32: {a: int8}\ncccl: []\n", ["{f}:3:", "field 'types.int32'",
                                                                          "is a scalar dtype's name"]),
    ("struct-empty", "types:\n  bbox: {}\ncccl: []\n", ["{f}:3:", "field 'types.bbox'", "1 to 64"]),
    ("struct-where-scalar", BBOX + "cccl:\n  - {name: s, algorithm: radix_sort, dtype: bbox}\n",
     ["{f}:5:", "spec 's'", "field 'dtype'", "scalar dtype, not the struct 'bbox'"]),
    ("struct-unknown", BBOX + "cccl:\n  - {name: s, algorithm: reduce, dtype: bboxx, op: plus, init: 0}\n",
     ["{f}:5:", "spec 's'", "field 'dtype'", "unknown dtype 'bboxx'", "did you mean 'bbox'?"]),
    ("struct-init-arity", BBOX + "cccl:\n  - name: s\n    algorithm: reduce\n    dtype: bbox\n"
     "    op: 'aot_test_ops:bbox_union'\n    init: [0]\n", ["{f}:9:", "spec 's'", "field 'init'", "2 values"]),
    ("code-op-bad-ref", "cccl:\n  - {name: s, algorithm: reduce, dtype: int32, op: 'a b:c', init: 0}\n",
     ["{f}:3:", "spec 's'", "field 'op'", "'package.module:function'"]),
    ("code-op-no-module", "cccl:\n  - {name: s, algorithm: reduce, dtype: int32, op: 'no_such_mod_h6:f', init: 0}\n",
     ["{f}:3:", "spec 's'", "field 'op'", "no module named 'no_such_mod_h6'"]),
    ("code-op-no-function", "cccl:\n  - {name: s, algorithm: reduce, dtype: int32, op: 'aot_test_ops:nope', init: 0}\n",
     ["{f}:3:", "spec 's'", "field 'op'", "has no function 'nope'"]),
    ("input-choice", "cccl:\n  - {name: s, algorithm: select, dtype: int32, op: 'lambda x: x', input: countin}\n",
     ["{f}:3:", "spec 's'", "field 'input'", "unknown input 'countin'", "did you mean 'counting'?"]),
    ("input-not-for-sort", "cccl:\n  - {name: s, algorithm: radix_sort, dtype: int32, input: counting}\n",
     ["{f}:3:", "spec 's'", "field 'input'", "unknown field for radix_sort"]),
    ("num-levels", "cccl:\n  - {name: s, algorithm: histogram_even, dtype: float32, num_levels: 1}\n",
     ["{f}:3:", "spec 's'", "field 'num_levels'", "integer in [2, 1048576]"]),
    ("counter-dtype", "cccl:\n  - {name: s, algorithm: histogram_even, dtype: float32, num_levels: 5, "
     "counter_dtype: int64}\n", ["{f}:3:", "spec 's'", "field 'counter_dtype'", "int32, uint32"]),
    ("index-dtype", "cccl:\n  - {name: s, algorithm: lower_bound, dtype: float32, index_dtype: int32}\n",
     ["{f}:3:", "spec 's'", "field 'index_dtype'", "uint64"]),
    ("second-op-arity", "cccl:\n  - {name: s, algorithm: three_way_partition, dtype: int32, first_op: 'lambda x: x',"
     " second_op: 'lambda a, b: a'}\n", ["{f}:3:", "spec 's'", "field 'second_op'", "takes 2 argument(s)"]),
    ("order-segmented-sort", "cccl:\n  - {name: s, algorithm: segmented_sort, dtype: int32, order: up}\n",
     ["{f}:3:", "spec 's'", "field 'order'", "unknown order 'up'"]),
    ("include-dir-missing", "nvrtc:\n  - name: u\n    source: k.cu\n    include_dirs: [nope]\n    kernels: [k]\n",
     ["{f}:5:", "spec 'u'", "field 'include_dirs'", "is not a directory"]),
    ("include-dir-escapes", "nvrtc:\n  - name: u\n    source: k.cu\n    include_dirs: ['../x']\n    kernels: [k]\n",
     ["{f}:5:", "spec 'u'", "field 'include_dirs'", "without '..'"]),
    ("kernel-expression", "nvrtc:\n  - name: u\n    source: k.cu\n    kernels: ['k<int']\n",
     ["{f}:5:", "spec 'u'", "field 'kernels'", "name expression"]),
    ("template-not-in-source", "nvrtc:\n  - name: u\n    source: k.cu\n    kernels: ['axpy<float>']\n",
     ["{f}:5:", "spec 'u'", "field 'kernels'", "kernel 'axpy' does not appear"]),
]


@pytest.mark.parametrize("text,fragments", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_new_field_errors(tmp_path, text, fragments):
    (tmp_path / "k.cu").write_text('extern "C" __global__ void k(int* a) { a[0] = 1; }\n')
    path = tmp_path / "build_matrix.yaml"
    path.write_text(HEAD + text)
    with pytest.raises(MatrixError) as err:
        load_matrix(path)
    msg = str(err.value)
    assert "\n" not in msg
    for frag in fragments:
        assert frag.format(f=path) in msg, msg


def test_definition_problems_from_a_manifest(matrix):
    bbox = next(s for s in matrix.specs if s.name == "t_reduce_bbox").definition()
    bad = [({**bbox, "code": {}}, "no recorded source digest"),
           ({**bbox, "types": {"bbox": [["x", "float128"]]}}, "each field must be"),
           ({**bbox, "dtype": "point"}, "unknown dtype 'point'"),
           ({**bbox, "init": [0]}, "must list 4 values, one per field")]
    for d, why in bad:
        with pytest.raises(ValueError, match=why):
            spec_from_definition(d)
    unit = next(s for s in matrix.specs if s.name == "test_templated")
    d = {**unit.definition(), "source": unit.source, "headers": {"../evil.h": "x"}}
    with pytest.raises(ValueError, match="is not a relative path"):
        spec_from_definition(d)


def test_manifest_naming_a_foreign_module_is_refused(matrix):
    """A spec read from a manifest (not passed by the caller) whose operator lives outside the package
    that owns the artifacts: one AotWarning, an AotError, and the module is never imported."""
    from aot.runtime.loader.objects import AotWarning
    from aot.runtime.loader.registry import Registry
    d = next(s for s in matrix.specs if s.name == "t_select_indices").definition()
    d["op"] = "h6_never_imported:pred"
    d["code"] = {"h6_never_imported:pred": "0" * 64}
    reg = Registry(None, device_sm=90, owner="aot_test_ops")
    reg._specs["x"] = spec_from_definition({**d, "name": "x"})  # as the manifest reader registers it
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(2):
            with pytest.raises(AotError, match="never makes aot import"):
                reg._load("x")
            reg._loaded.pop("x", None)
    assert [type(x.message) for x in w] == [AotWarning]
    assert "h6_never_imported" not in sys.modules


def test_owning_package_operator_is_resolved_and_rekeyed_when_edited(matrix):
    from aot.runtime.loader.registry import Registry
    spec = next(s for s in matrix.specs if s.name == "t_reduce_bbox")
    reg = Registry(None, device_sm=90, owner="aot_test_ops")
    same, refusal = reg._code_spec(spec)
    assert refusal is None and same is spec
    stale = CcclSpec(spec.name, spec.algorithm, spec.params, spec.types, {"aot_test_ops:bbox_union": "1" * 64})
    fresh, refusal = reg._code_spec(stale)
    assert refusal is None and fresh.code == spec.code and fresh.content_key() == spec.content_key()


# --------------------------------------------------------------------------------------------- builds
def _build(tmp_path, names, sms, out_name="out"):
    from aot.build.builder import build
    specs = load_matrix(MATRIX).select(names)
    out = tmp_path / out_name
    report = build(specs, list(sms), out, jobs=2)
    assert all(i.status == "built" for i in report.items), [(i.name, i.sm, i.error) for i in report.items]
    return out, specs


def _check_artifacts(out, specs):
    from aot.runtime.loader.registry import Registry
    from aot.verify.gpu import verify_integrity
    n, problems = verify_integrity(out)
    assert n and not problems
    for art in sorted(out.rglob("*.aot")):
        a = fmt.read(art)
        assert a.payload
        if a.header["family"] == "nvrtc":
            unit = next(s for s in specs if s.name == a.header["name"])
            symbols = a.header["symbols"]
            assert set(symbols) == set(unit.name_expressions())
            assert all(v.startswith("_Z") and v.encode() in a.payload for v in symbols.values())
    reg = Registry(out, device_sm=90)  # the manifest's definitions come back equal (struct, code, headers)
    for s in specs:
        assert reg.spec(s.name).content_key() == s.content_key()


def test_subset_builds_for_two_sms(tmp_path):
    out, specs = _build(tmp_path, SUBSET, SMS)
    _check_artifacts(out, specs)
    out, specs = _build(tmp_path, STRUCT, SMS[-1:], "struct")
    _check_artifacts(out, specs)


@pytest.mark.slow
def test_full_test_matrix_builds_for_two_sms(tmp_path):
    out, specs = _build(tmp_path, load_matrix(MATRIX).names(), SMS)
    _check_artifacts(out, specs)


def test_header_symbols_load_in_the_shape_cuda_core_compiles(matrix):
    """A templated unit's artifact header stores lowered names as text; the loader must hand
    ``ObjectCode`` what ``Program.compile(name_expressions=...)`` itself produces (str -> bytes), else
    ``get_kernel`` fails on the GPU ("expected bytes, str found", seen on the H100)."""
    from cuda.core import Program
    from aot.build.compile import compile_nvrtc_item, headers_dir, program_options
    from aot.runtime.loader.sources import symbol_mapping
    unit = next(s for s in matrix.specs if s.name == "test_templated")
    _, symbols = compile_nvrtc_item(unit, 90, "cubin")
    with headers_dir(unit) as hdr:
        prog = Program(unit.source, "c++", program_options(unit, "sm_90", hdr))
        try:
            want = prog.compile("cubin", name_expressions=unit.name_expressions()).symbol_mapping
        finally:
            prog.close()
    assert symbol_mapping({"symbols": symbols}) == want
    assert all(isinstance(v, bytes) for v in want.values())
    with pytest.raises(Exception, match="not a mapping of names"):
        symbol_mapping({"symbols": {"k<float>": "\u00e9"}})


def test_nvrtc_jit_uses_the_cuda_core_cache_despite_the_cccl_include_path(tmp_path, monkeypatch):
    """Every unit has cuda-cccl's headers on its include path, which cuda.core's ``compile(cache=...)``
    refuses to key; the JIT path keys it by hand: the first call compiles, the next is a cache hit."""
    from aot.runtime.jit.jit import nvrtc_compile_cached
    monkeypatch.setenv("AOT_CACHE_DIR", str(tmp_path / "cache"))
    unit = load_matrix().select(["morton"])[0]
    a, first, where = nvrtc_compile_cached(unit, 90)
    b, second, _ = nvrtc_compile_cached(unit, 90)
    assert (first, second) == ("jit", "cache") and where is not None
    assert bytes(a.code) == bytes(b.code)
