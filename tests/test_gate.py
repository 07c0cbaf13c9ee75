"""The release gate's tooling on the CPU (issue 16): the gate matrix (tests/data/gate) loads with its
operators from code; the mutation plan of .ci/gpu/make_mutants.py fits it and covers every kind of
mutation; a mutant directory written by the tool passes every check the loader and ``aot verify DIR`` make
(only ``verify --gpu`` can tell it apart). The GPU half is .ci/gpu/gate.sh."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import ROOT, load_script

GATE = ROOT / "tests" / "data" / "gate"
MATRIX = GATE / "build_matrix.yaml"


@pytest.fixture(scope="module")
def mm():
    return load_script("make_mutants", ".ci/gpu/make_mutants.py")


@pytest.fixture(scope="module")
def gate_specs():
    sys.path.insert(0, str(GATE))
    try:
        from aot.build.matrix import load_matrix
        yield {s.name: s for s in load_matrix(MATRIX).specs}
    finally:
        sys.path.remove(str(GATE))


def test_gate_matrix_covers_the_kinds_of_issue_16(gate_specs):
    from aot.core.spec import CcclSpec, NvrtcUnit
    cccl = [s for s in gate_specs.values() if isinstance(s, CcclSpec)]
    p = {s.name: s.params for s in cccl}
    assert any(q.get("out_dtype") == "float64" and q["dtype"] == "float32" and "+ 1" in q["op"] for q in p.values())
    assert any(s.types and s.algorithm == "segmented_reduce" and s.code for s in cccl)  # struct, op from code
    assert any(q.get("input") == "counting" for q in p.values())
    assert any(q["dtype"].startswith("uint") for q in p.values())
    assert {"inclusive_scan", "exclusive_scan", "reduce", "segmented_reduce", "radix_sort", "segmented_sort"} <= \
        {s.algorithm for s in cccl}
    units = [s for s in gate_specs.values() if isinstance(s, NvrtcUnit)]
    assert {u.name for u in units} == {"block_sums", "morton"}  # both have a bundled check (aot.verify.units)
    assert any("<" in k for u in units for k in u.kernels)  # a templated unit


def test_the_plan_fits_the_gate_matrix_and_covers_every_mutation(mm, gate_specs):
    from aot.core.rules import spec_from_definition
    sys.path.insert(0, str(GATE))
    try:
        kinds = set()
        for mutation, name in mm.GATE_PLAN:
            d = gate_specs[name].definition()
            if mutation == "unwritten":
                d["source"] = gate_specs[name].source
            md, desc = mm.mutate(mutation, d, mm.GATE_CODE_SWAP)
            assert md is not None and (md != d or mutation == "proxyfix-off"), (mutation, name)
            back = spec_from_definition(md)
            assert back.name == name and desc
            kinds.add(mutation)
    finally:
        sys.path.remove(str(GATE))
    assert kinds == set(mm.MUTATIONS)
    assert 20 <= len(mm.GATE_PLAN) <= 24


def test_mutations(mm):
    assert mm.mutate_lambda("lambda x: x * x + 1") == "lambda x: x * x - 1"
    assert mm.mutate_lambda("lambda x: x < 0") == "lambda x: x >= 0"
    src, n = mm.inject_early_return("__global__ void k(int* o) { o[0] = 1; }\n__global__ void j() {}")
    assert n == 2 and src.count("gridDim.x - 1 && threadIdx.x == 0) return;") == 2
    d = {"name": "s", "algorithm": "reduce", "dtype": "float32", "op": "plus", "init": 0}
    assert mm.mutate("dtype-swap", d, {})[0]["dtype"] == "int32"
    assert mm.mutate("init-swap", d, {})[0]["init"] == 1
    assert mm.mutate("order-swap", d, {})[0] is None
    # issue 20: state and iterator arguments
    st = {"name": "s", "algorithm": "select", "dtype": "int32", "input": "counting", "op": "lambda i: a[i] - b[i] > 0",
          "state": [["a", "float32[]"], ["b", "float32[]"]]}
    assert mm.mutate("state-swap", st, {})[0]["state"] == [["b", "float32[]"], ["a", "float32[]"]]
    assert mm.mutate("state-offset", st, {})[0]["op"] == "lambda i: a[i + 1] - b[i + 1] > 0"
    assert mm.mutate("offset", st, {})[0]["input"] == {"transform": "lambda i: i + 1", "over": "counting"}
    z = {"name": "z", "algorithm": "reduce", "dtype": "p", "op": "plus", "init": 0,
         "input": {"zip": ["array", {"transform": "lambda x: x * 2", "over": "array"}]}}
    assert mm.mutate("zip-swap", z, {})[0]["input"]["zip"] == z["input"]["zip"][::-1]
    assert mm.mutate("transform-swap", z, {})[0]["input"]["zip"][1]["transform"] == "lambda x: x + 2"
    assert mm.mutate("zip-swap", {**z, "input": {"zip": ["array", "array"]}}, {})[0] is None  # same code: no mutant
    assert mm.mutate("state-swap", d, {})[0] is None and mm.mutate("offset", d, {})[0] is None


def test_a_written_mutant_passes_every_loader_check(mm, small_build, tmp_path):
    """A payload swapped under the original name, content key and manifest definition: integrity, content
    keys, producer and coverage all pass; `aot verify DIR` (CPU) says OK."""
    from aot.cli.main import main
    from aot.core.format import read
    base = small_build.out
    doc = json.loads((base / "manifest.json").read_text())
    target = next(e for e in doc["artifacts"] if e["name"] == "reduce_sum_i32" and e["sm"] == 90)
    other = next(e for e in doc["artifacts"] if e["name"] == "lower_bound_i32" and e["sm"] == 90)
    payload = read(base / other["path"]).payload  # "computes the wrong thing" (another algorithm entirely)
    for keep in ({"reduce_sum_i32"}, None):  # only the mutated spec (the default), or the whole set
        dest = tmp_path / f"mut-{keep is None}"
        mm.write_mutant(base, dest, {target["path"]: (payload, {})}, {"must_fail": "reduce_sum_i32"}, keep=keep)
        assert mm.loader_problems(base, dest) == []
        assert read(dest / target["path"]).payload == payload
        assert main(["verify", str(dest)]) == 0
        assert json.loads((dest / "mutation.json").read_text())["must_fail"] == "reduce_sum_i32"
        names = set(json.loads((dest / "manifest.json").read_text())["specs"])
        assert names == ({"reduce_sum_i32"} if keep else set(doc["specs"]))


def test_gate_matrix_holds_every_form_of_issue_20(gate_specs):
    """Each iterator kind (input and output), a stateful lambda, a stateful operator from code, C++ operators
    with and without state, a search over counting and the determinism option: at least one gate spec each
    (each passes `verify --gpu` on the GPU: .ci/gpu/gate.sh)."""
    from aot.algorithms.forms import tree
    from aot.core.spec import CcclSpec

    def kinds(field):
        out = set()
        for s in gate_specs.values():
            if isinstance(s, CcclSpec) and s.params.get(field) is not None:
                todo = [tree(s.params[field], s.params["dtype"], s.types)]
                while todo:
                    node = todo.pop()
                    out.add(node.kind)
                    todo += node.children
        return out

    p = {s.name: s.params for s in gate_specs.values() if isinstance(s, CcclSpec)}
    inputs, outputs = kinds("input"), kinds("output")
    assert {"counting", "constant", "transform", "zip", "permutation", "reverse", "cache_modified",
            "shuffle"} <= inputs, inputs
    assert {"transform", "reverse", "discard"} <= outputs, outputs
    stateful = [q for q in p.values() if q.get("state")]
    assert any(isinstance(q["op"], str) and q["op"].startswith("lambda") for q in stateful)
    assert any(isinstance(q["op"], str) and ":" in q["op"] and not q["op"].startswith("lambda") for q in stateful)
    cpp = [q for q in p.values() if isinstance(q.get("op"), dict) and "cpp" in q["op"]]
    assert any(not q.get("state") for q in cpp) and any(q.get("state") for q in cpp)
    assert any(q.get("values") == "counting" for q in p.values())
    assert any(q.get("determinism") == "not_guaranteed" for q in p.values())
