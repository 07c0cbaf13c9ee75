"""Issue 20's forms on the CPU: iterators, state, C++ operators and determinism.

One validator accepts every form and refuses bad ones in one line naming file, spec and field; the build
of a handful of specs (each covering several forms, sm_90, one session build) round-trips through the
manifest and loads in a lean process whose binder checks the caller's state; a second build gives the
same bytes (Python operators inside iterators included); C++ sources and lambdas are in the content key. The results on a GPU are ``verify --gpu``'s
(the checks these specs carry: :mod:`aot.verify.forms`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from aot.build.matrix import load_matrix
from aot.core.errors import CallError, MatrixError
from aot.core.rules import spec_from_definition
from conftest import ROOT, repo_env, side_by_side

OPS_PY = '''\
flags = None  # a declared state array: aot binds the caller's per call


def is_flagged(i):
    return flags[i] != 0


def pair_add(a, b):
    return (a[0] + b[0], a[1] + b[1])
'''

TWICE_CU = '''extern "C" __device__ void twice(void* a, void* result) {
    *static_cast<float*>(result) = *static_cast<float*>(a) * 2.0f;
}
'''

LUT_CU = '''struct State { const float* lut; float shift; };
extern "C" __device__ void lut_shift(void* state, void* i, void* result) {
    const State* s = static_cast<const State*>(state);
    *static_cast<float*>(result) = s->lut[*static_cast<long long*>(i)] + s->shift;
}
'''

MATRIX = '''version: 1
types:
  pair: {a: float64, b: float64}
cccl:
  - {name: f_mask_select, algorithm: select, dtype: int32, input: counting, op: "lambda i: mask[i] != 0",
     state: {mask: "uint8[]"}, output: {reverse: array}}
  - {name: f_code_select, algorithm: select, dtype: int64, op: "aotformsops.ops:is_flagged",
     state: {flags: "uint8[]"}, input: {cache_modified: array, modifier: global}, output: discard}
  - {name: f_cpp_const, algorithm: unary_transform, dtype: float32, input: constant,
     op: {cpp: ops/twice.cu, function: twice, reference: "lambda x: x * 2"}}
  - {name: f_cpp_state, algorithm: unary_transform, dtype: int64, out_dtype: float32, input: shuffle,
     state: {lut: "float32[]", shift: float32},
     op: {cpp: ops/lut.cu, function: lut_shift, reference: "lambda i: lut[i] + shift"}}
  - {name: f_zip_perm, algorithm: reduce, dtype: pair, op: "aotformsops.ops:pair_add", init: [0, 0],
     input: {zip: [{permutation: array, indices: {array: int32}}, {reverse: array}]}}
  - {name: f_fused, algorithm: reduce, dtype: float32, op: plus, init: 0, determinism: not_guaranteed,
     state: {w: "float32[]"}, input: {transform: "lambda i: w[i]", over: {counting: int32}}}
  - {name: f_scan_out, algorithm: inclusive_scan, dtype: float64, op: plus, init: 0,
     input: {transform: "lambda x: x * x"}, output: {transform: "lambda x: x * 0.5"}}
  - {name: f_search, algorithm: upper_bound, dtype: int64, values: counting}
'''

def _write(root: Path, matrix: str = MATRIX) -> Path:
    (root / "ops").mkdir(parents=True, exist_ok=True)
    (root / "ops" / "twice.cu").write_text(TWICE_CU)
    (root / "ops" / "lut.cu").write_text(LUT_CU)
    pkg = root / "aotformsops"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text(OPS_PY)
    path = root / "build_matrix.yaml"
    path.write_text(matrix)
    return path


@pytest.fixture(scope="session")
def forms_dir(tmp_path_factory):
    """The forms matrix next to its C++ sources and its operators' package (importable here and in the
    build workers, through PYTHONPATH)."""
    root = tmp_path_factory.mktemp("forms")
    _write(root)
    sys.path.insert(0, str(root))
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(root) + (os.pathsep + saved if saved else "")
    try:
        yield root
    finally:
        sys.path.remove(str(root))
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@pytest.fixture(scope="session")
def forms_builds(forms_dir, aot_cache_dir) -> tuple[Path, Path]:
    """Two builds of the forms matrix at sm_90 into two folders, side by side (each one worker: the order, and
    so cuda.compute's per-process operator counters, are the same in every build). The second is only
    :func:`test_two_builds_are_byte_identical`'s; built beside the first, it costs no wall time on 2 cores."""
    from aot.build.builder import build
    specs = load_matrix(forms_dir / "build_matrix.yaml").specs
    outs = (forms_dir / "out1", forms_dir / "a-second-build" / "again")  # other depth and length: as tmp_path was
    side_by_side(*(lambda out=out: build(specs, [90], out, jobs=1) for out in outs))
    return outs


@pytest.fixture(scope="session")
def forms_build(forms_builds) -> Path:
    """The first of the two builds: what the other tests load and read."""
    return forms_builds[0]


# ------------------------------------------------------------------------------------------ the validator
def test_every_form_validates(forms_dir):
    specs = {s.name: s for s in load_matrix(forms_dir / "build_matrix.yaml").specs}
    assert set(specs) == {"f_mask_select", "f_code_select", "f_cpp_const", "f_cpp_state", "f_zip_perm", "f_fused",
                          "f_scan_out", "f_search"}
    assert specs["f_mask_select"].params["state"] == [["mask", "uint8[]"]]
    assert specs["f_cpp_state"].params["state"] == [["lut", "float32[]"], ["shift", "float32"]]  # declared order
    assert specs["f_cpp_state"].sources == {"ops/lut.cu": LUT_CU}
    assert specs["f_zip_perm"].params["input"] == {"zip": [{"permutation": "array", "indices": {"array": "int32"}},
                                                           {"reverse": "array"}]}
    assert specs["f_fused"].params["input"] == {"transform": "lambda i: w[i]", "over": {"counting": "int32"}}
    assert specs["f_code_select"].code.keys() == {"aotformsops.ops:is_flagged"}
    assert specs["f_search"].params["values"] == "counting"
    # every definition passes the one validator again, as a manifest would carry it
    for s in specs.values():
        back = spec_from_definition(json.loads(json.dumps(s.definition())))
        assert back == s and back.content_key() == s.content_key(), s.name


BAD = [
    ('{name: s, algorithm: reduce, dtype: int32, op: plus, init: 0, input: discard}', "input",
     "cannot be an input"),
    ('{name: s, algorithm: reduce, dtype: int32, op: plus, init: 0, output: counting}', "output",
     "cannot be an output"),
    ('{name: s, algorithm: reduce, dtype: int32, op: plus, init: 0, input: {zip: [array, array]}}', "input",
     "a zip's elements are a struct"),
    ('{name: s, algorithm: reduce, dtype: float32, op: plus, init: 0, input: {counting: float32}}', "input",
     "yields integers"),
    ('{name: s, algorithm: reduce, dtype: int32, op: plus, init: 0, input: {transform: "lambda x: m[x]"}}',
     "input.transform", "lambda reads m[...], but no state is declared: declare it under 'state:' as 'm: <dtype>[]'"),
    ('{name: s, algorithm: select, dtype: int32, op: "lambda i: maks[i] != 0", state: {mask: "uint8[]"}}', "op",
     "lambda reads maks[...], but 'maks' is not a declared state array (did you mean 'mask'?); declared state "
     "arrays: mask"),
    ('{name: s, algorithm: select, dtype: int32, op: "lambda i: i[0] != 0", state: {mask: "uint8[]"}}', "op",
     "lambda subscripts its own argument 'i'"),
    ('{name: s, algorithm: select, dtype: int32, op: "lambda i: mask != 0", state: {mask: "uint8[]"}}', "op",
     "without subscripting it"),
    ('{name: s, algorithm: select, dtype: int32, op: "lambda i: mask[i:2] != 0", state: {mask: "uint8[]"}}', "op",
     "lambda uses Slice"),
    ('{name: s, algorithm: select, dtype: int32, op: "lambda i: i != 0", state: {mask: "uint9[]"}}', "state.mask",
     "declare a device array as '<dtype>[]'"),
    ('{name: s, algorithm: select, dtype: int64, op: "aotformsops.ops:is_flagged", state: {flags: uint8}}',
     "state.flags", "a Python operator reads device arrays only"),
    ('{name: s, algorithm: reduce, dtype: float32, op: plus, init: 0, determinism: gpu_to_gpu}', "determinism",
     "cuda-cccl 1.2.1 does not support gpu-to-gpu determinism"),
    ('{name: s, algorithm: unary_transform, dtype: float32, op: {cpp: ../twice.cu, function: twice}}', "op.cpp",
     "relative source path"),
    ('{name: s, algorithm: unary_transform, dtype: float32, op: {cpp: ops/none.cu, function: twice}}', "op.cpp",
     "cannot read the C++ operator's source"),
    ('{name: s, algorithm: unary_transform, dtype: float32, op: {cpp: ops/twice.cu, fn: twice}}', "op.fn",
     "unknown key 'fn' of a C++ operator"),
    ('{name: s, algorithm: reduce, dtype: float32, op: plus, init: 0, input: {transform: {cpp: ops/twice.cu, '
     'function: twice}}}', "input.transform", "a transform iterator's operator is a lambda"),
    ('{name: s, algorithm: reduce, dtype: int32, op: plus, init: 0, input: {cache_modified: counting}}',
     "input.cache_modified", "reads an array"),
    ('{name: s, algorithm: radix_sort, dtype: int32, input: counting}', "input", "unknown field for radix_sort"),
]


@pytest.mark.parametrize("entry, fld, fragment", BAD, ids=[b[1] + ":" + b[2][:24] for b in BAD])
def test_bad_forms_are_one_line_naming_file_spec_field(forms_dir, tmp_path, entry, fld, fragment):
    path = _write(tmp_path, "version: 1\ncccl:\n  - " + entry + "\n")
    with pytest.raises(MatrixError) as err:
        load_matrix(path)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{path}:3: spec 's': field '{fld}':"), msg
    assert fragment in msg, msg


def test_cpp_source_and_lambda_are_in_the_content_key(forms_dir, tmp_path):
    path = _write(tmp_path)
    before = {s.name: s.content_key() for s in load_matrix(path).specs}
    (tmp_path / "ops" / "lut.cu").write_text(LUT_CU.replace("+ s->shift", "- s->shift"))
    path.write_text(MATRIX.replace("lambda i: w[i]", "lambda i: w[i + 1]"))
    after = {s.name: s.content_key() for s in load_matrix(path).specs}
    changed = {n for n in before if before[n] != after[n]}
    assert changed == {"f_cpp_state", "f_fused"}


# ------------------------------------------------------------------------------------------ the binder
def _spec(root: Path, name: str):
    return {s.name: s for s in load_matrix(root / "build_matrix.yaml").specs}[name]


class FakeDeviceArray:
    """Just the ``__cuda_array_interface__`` the binder reads (nothing dereferences the address)."""

    def __init__(self, dtype, n: int = 16, address: int = 0x7000_0000, strides=None):
        dt = np.dtype(dtype)
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": dt.str, "data": (address, False), "version": 3,
                                         "strides": strides}


@pytest.mark.parametrize("state, fld, fragment", [
    (None, "state", "pass state={...} by name (lut: float32[], shift: float32)"),
    ({"shift": np.float32(1)}, "state.lut", "missing"),
    ({"lut": np.zeros(4, np.float32), "shift": np.float32(1)}, "state.lut", "got a host numpy array"),
    ({"lut": FakeDeviceArray(np.float64), "shift": np.float32(1)}, "state.lut", "got one of float64"),
    ({"lut": FakeDeviceArray(np.float32, strides=(8,)), "shift": np.float32(1)}, "state.lut", "contiguous"),
    ({"lut": FakeDeviceArray(np.float32), "shift": np.float64(1)}, "state.shift", "got a float64 one"),
    ({"lut": FakeDeviceArray(np.float32), "shift": "1"}, "state.shift", "needs a float32 scalar"),
    ({"lut": FakeDeviceArray(np.float32), "shift": np.float32(1), "mask": FakeDeviceArray(np.uint8)}, "state.mask",
     "not a declared state field"),
])
def test_a_wrong_state_is_one_call_error(forms_dir, state, fld, fragment):
    from aot.runtime.loader.binder import Binder
    b = Binder(_spec(forms_dir, "f_cpp_state"))
    with pytest.raises(CallError) as err:
        b.check_state(state)
    msg = str(err.value)
    assert msg.startswith(f"f_cpp_state: {fld}: ") and fragment in msg and "\n" not in msg, msg
    assert err.value.return_code == 8
    ok = b.check_state({"lut": FakeDeviceArray(np.float32, address=0x1234), "shift": 2.5})
    assert ok == {"lut": 0x1234, "shift": 2.5}


def test_a_spec_without_state_refuses_one(forms_dir):
    from aot.runtime.loader.binder import Binder
    with pytest.raises(CallError, match="f_search: state: this spec declares no state"):
        Binder(_spec(forms_dir, "f_search")).check_state({"x": 1})


LEAN = textwrap.dedent("""
    import ctypes, json, sys, warnings
    ctypes.CDLL(sys.argv[2], mode=ctypes.RTLD_GLOBAL)  # the stand-in libcuda: this host has no driver
    warnings.simplefilter("ignore")
    import numpy as np
    import aot

    class Dev:
        def __init__(self, dtype, address):
            dt = np.dtype(dtype)
            self.__cuda_array_interface__ = {"shape": (8,), "typestr": dt.str, "data": (address, False),
                                             "version": 3, "strides": None}

    reg = aot.Registry(sys.argv[1], device_sm=90)
    out = {}
    for name in reg.names():
        reg.cccl(name)
        out[name] = reg.status()[name].source
    sel = reg.cccl("f_mask_select")
    states = []
    for address in (0x1000, 0x2000):  # one artifact, two masks: each call packs its own address
        kw = sel._binder.bind(dict(d_in=0, d_out=Dev(np.int32, 0x9000), state={"mask": Dev(np.uint8, address)}))
        states.append(int.from_bytes(kw["cond"].get_state(), "little"))
    shuffle = aot.runtime.loader.lean.import_cuda_compute().ShuffleIterator(8, 1)
    cpp = reg.cccl("f_cpp_state")._binder.bind(dict(d_in=shuffle, state={"lut": Dev(np.float32, 0x3000),
                                                                       "shift": np.float32(1.5)}))
    zipped = reg.cccl("f_zip_perm")._binder.bind(dict(d_in=(Dev(np.float64, 0x10), Dev(np.int32, 0x20),
                                                            Dev(np.float64, 0x30))))
    errors = []
    for bad in ({"mask": np.zeros(8, np.uint8)}, {"mask": Dev(np.int8, 1)}, {}):
        try:
            sel._binder.bind(dict(d_in=0, d_out=Dev(np.int32, 0x9000), state=bad))
        except aot.CallError as e:
            errors.append(str(e))
    try:
        reg.cccl("f_zip_perm")._binder.bind(dict(d_in=(Dev(np.float64, 0x10), Dev(np.int64, 0x20),
                                                       Dev(np.float64, 0x30))))
    except aot.CallError as e:
        errors.append(str(e))
    print(json.dumps({"sources": out, "states": states, "cpp": cpp["op"].get_state().hex(),
                      "cpp_align": cpp["op"].state_alignment, "zip": type(zipped["d_in"]).__name__,
                      "errors": errors, "mlir": "numba_cuda_mlir" in sys.modules}))
""")


def test_packaged_forms_load_and_bind_in_a_lean_process(forms_build):
    """Every spec loads from the artifacts (manifest through the one validator), without numba-cuda-mlir
    and with the stand-in toolchain; the binder packs each call's own state and refuses wrong state."""
    from aot.build.toolchain import stub_library
    r = subprocess.run([sys.executable, "-c", LEAN, str(forms_build), str(stub_library())], cwd=ROOT,
                       env=repo_env(AOT_FORCE_STUB_TOOLCHAIN="1"), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(out["sources"].values()) == {"packaged"}, out["sources"]
    assert out["states"] == [0x1000, 0x2000]
    assert out["cpp"] == (0x3000).to_bytes(8, "little").hex() + np.float32(1.5).tobytes().hex() + "00" * 4
    assert out["cpp_align"] == 8 and out["zip"] == "ZipIterator" and not out["mlir"]
    assert [e.split(":")[:2] for e in out["errors"]] == [["f_mask_select", " state.mask"]] * 3 + \
        [["f_zip_perm", " d_in (array of int32)"]], out["errors"]


def test_manifest_round_trip(forms_build, forms_dir):
    doc = json.loads((forms_build / "manifest.json").read_text())
    specs = {s.name: s for s in load_matrix(forms_dir / "build_matrix.yaml").specs}
    for name, d in doc["specs"].items():
        assert spec_from_definition(d).content_key() == specs[name].content_key(), name


def test_two_builds_are_byte_identical(forms_builds):
    forms_build, again = forms_builds  # two builds, each its own worker process and folder
    differ = set()
    for f in sorted(forms_build.glob("cccl/*/sm_90.aot")):
        if f.read_bytes() != (again / f.relative_to(forms_build)).read_bytes():
            differ.add(f.parent.name)
    # f_fused and f_scan_out hold Python operators inside iterators: equal thanks to cccl_patches' symbol names
    assert not differ, differ
    assert len(list(forms_build.glob("cccl/*/sm_90.aot"))) == 8


# ------------------------------------------------------------------------------------------ the checks
def _host_run(spec, fake, n: int = 2_003) -> None:
    """``spec``'s check (what ``verify --gpu`` runs) against a host fake of the device, state bound per call
    as :func:`aot.verify.context.check_cccl` binds it."""
    import functools

    from aot.algorithms import ALGORITHMS
    from host_algorithms import HostCheck

    class StateHostCheck(HostCheck):
        def __init__(self):
            from aot.verify.context import GpuCheck
            GpuCheck.__init__(self, None, n=n, seed=3, types=spec.types, params=spec.params)

        def shuffle(self, n, seed):
            return ("shuffle", n, seed)

    c = StateHostCheck()
    ALGORITHMS[spec.algorithm].check(functools.partial(fake, state=c.state) if c.state else fake, spec.params, c)


def _mask_select(shift: int = 0):
    def run(*, temp_storage, d_in, d_out, d_num_selected_out, num_items, state, **_):
        idx = np.arange(d_in, d_in + num_items)
        kept = idx[state["mask"].a[idx + shift] != 0][::-1]  # written through the reverse output
        d_out.a[len(d_out.a) - len(kept):] = kept
        d_num_selected_out.a[0] = len(kept)
        return 0
    return run


def _fused(start_ignored: bool = False):
    def run(*, temp_storage, d_in, d_out, num_items, h_init, state, **_):
        start = 0 if start_ignored else d_in
        d_out.a[0] = h_init[0] + state["w"].a[start:start + num_items].astype(np.float64).sum()
        return 0
    return run


def _cpp_state(drop_shift: bool = False):
    def run(*, d_in, d_out, num_items, state, **_):
        d_out.a[:] = state["lut"].a[np.arange(num_items)] + (0 if drop_shift else state["shift"])
    return run


def _zip_perm(swap: bool = False):
    def run(*, temp_storage, d_in, d_out, num_items, h_init, **_):
        vals, idx, other = (x.a for x in d_in)
        a, b = vals[idx], other[::-1]
        if swap:
            a, b = b, a
        d_out.a[0] = (h_init[0]["a"] + a.sum(), h_init[0]["b"] + b.sum())
        return 0
    return run


def _scan_out(skip_transform: bool = False):
    def run(*, temp_storage, d_in, d_out, init_value, num_items, **_):
        d_out.a[:] = np.cumsum(d_in.a * d_in.a) * (1 if skip_transform else 0.5)
        return 0
    return run


@pytest.mark.parametrize("name, good, bad", [
    ("f_mask_select", _mask_select(), _mask_select(shift=1)),      # the state array offset
    ("f_fused", _fused(), _fused(start_ignored=True)),              # the counting start ignored
    ("f_cpp_state", _cpp_state(), _cpp_state(drop_shift=True)),     # a by-value state field dropped
    ("f_zip_perm", _zip_perm(), _zip_perm(swap=True)),              # a zip's members swapped
    ("f_scan_out", _scan_out(), _scan_out(skip_transform=True)),    # the output transform skipped
])
def test_checks_accept_the_right_answer_and_catch_a_wrong_one(forms_dir, name, good, bad):
    """The references of the new forms (what ``verify --gpu`` compares with), against host fakes."""
    from aot.verify.compare import Mismatch
    spec = _spec(forms_dir, name)
    _host_run(spec, good)
    with pytest.raises(Mismatch):
        _host_run(spec, bad)


def test_an_operator_reading_a_state_length_is_refused(tmp_path, monkeypatch):
    """Compiled against a placeholder, ``len(flags)`` would be a constant: refused at build, naming it."""
    from aot.algorithms.forms import StateField
    from aot.build.operators import operator_for
    (tmp_path / "aotlenops.py").write_text("flags = None\n\n\ndef bounded(i):\n    return i < len(flags)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"'aotlenops:bounded' reads the length or shape of a state array"):
        operator_for("aotlenops:bounded", (StateField("flags", "uint8", True),), {}, 90, lambda op: op)


def _binary(offset: int = 0):
    def run(*, d_in1, d_in2, d_out, num_items, **_):
        d_out.a[:] = np.arange(d_in1 + offset, d_in1 + offset + num_items) + d_in2.a * 2
    return run


def _segmented(square: bool = True):
    def run(*, temp_storage, d_in, d_out, num_segments, start_offsets_in, end_offsets_in, h_init, **_):
        x = d_in.a * d_in.a if square else d_in.a
        for i, (b, e) in enumerate(zip(start_offsets_in.a, end_offsets_in.a)):
            d_out.a[i] = h_init[0] + x[b:e].sum()
        return 0
    return run


@pytest.mark.parametrize("entry, good, bad", [
    ({"algorithm": "binary_transform", "dtype": "int64", "input": "counting",
      "input2": {"transform": "lambda x: x * 2"}, "op": "lambda a, b: a + b"}, _binary(), _binary(offset=1)),
    ({"algorithm": "segmented_reduce", "dtype": "float64", "op": "plus", "init": 0,
      "input": {"transform": "lambda x: x * x"}}, _segmented(), _segmented(square=False)),
])
def test_checks_of_the_other_iterator_algorithms(entry, good, bad):
    from aot.core.rules import check_cccl
    from aot.verify.compare import Mismatch
    spec = check_cccl({"name": "s", **entry}, {}, lambda ref: "0" * 64)
    _host_run(spec, good)
    with pytest.raises(Mismatch):
        _host_run(spec, bad)
