"""aot.build.matrix validation (table-driven), the bundled matrix, the CLI on bad input, aot.core.arch.parse_sm_list."""

from __future__ import annotations

import re

import textwrap
from pathlib import Path

import pytest

from aot.core.arch import DEFAULT_SMS, parse_sm_list
from aot.cli.main import main
from aot.core.errors import MatrixError, UsageError
from aot.build.matrix import load_matrix
from aot.core.spec import CcclSpec, NvrtcUnit

GOOD_CU = 'extern "C" __global__ void good_kernel(int* a) { a[0] = 1; }\n'

REDUCE = "  - {name: r, algorithm: reduce, dtype: int32, op: plus, init: 0}\n"

# (id, matrix text, [substrings the MatrixError message must contain]); "{f}" is the matrix file's path.
# Line numbers are 1-based lines of the text as written here (after dedent).
CASES = [
    ("unknown-top-level-key",
     "version: 1\ncccl:\n" + REDUCE + "nvrtcc: []\n",
     ["{f}:4:", "unknown top-level key 'nvrtcc'", "did you mean 'nvrtc'?"]),
    ("unknown-algorithm",
     "cccl:\n  - {name: s1, algorithm: reduec, dtype: int32, op: plus, init: 0}\n",
     ["{f}:2:", "spec 's1'", "field 'algorithm'", "unknown algorithm 'reduec'", "did you mean 'reduce'?"]),
    ("unknown-dtype",
     "cccl:\n  - name: s1\n    algorithm: reduce\n    dtype: flaot64\n    op: plus\n    init: 0\n",
     ["{f}:4:", "spec 's1'", "field 'dtype'", "unknown dtype 'flaot64'", "did you mean 'float64'?"]),
    ("unknown-value-dtype",
     "cccl:\n  - {name: s1, algorithm: radix_sort, dtype: int32, value_dtype: unit32}\n",
     ["{f}:2:", "field 'value_dtype'", "unknown dtype 'unit32'", "did you mean 'uint32'?"]),
    ("unknown-field",
     "cccl:\n  - name: s1\n    algorithm: reduce\n    dtpye: int32\n    op: plus\n    init: 0\n",
     ["{f}:4:", "spec 's1'", "field 'dtpye'", "unknown field for reduce", "did you mean 'dtype'?"]),
    ("field-of-another-algorithm",
     "cccl:\n  - {name: s1, algorithm: lower_bound, dtype: int32, op: less}\n",
     ["{f}:2:", "spec 's1'", "field 'op'", "unknown field for lower_bound"]),
    ("missing-required-field",
     "version: 1\ncccl:\n  - name: s1\n    algorithm: reduce\n    dtype: int32\n    op: plus\n",
     ["{f}:3:", "spec 's1'", "field 'init'", "missing required field for reduce"]),
    ("missing-algorithm",
     "cccl:\n  - {name: s1, dtype: int32}\n",
     ["{f}:2:", "spec 's1'", "field 'algorithm'", "missing required field"]),
    ("missing-name",
     "cccl:\n  - {algorithm: reduce, dtype: int32, op: plus, init: 0}\n",
     ["{f}:2:", "field 'name'", "non-empty string 'name'"]),
    ("bad-name",
     "cccl:\n  - {name: 'a/b', algorithm: reduce, dtype: int32, op: plus, init: 0}\n",
     ["{f}:2:", "spec 'a/b'", "field 'name'", "letters, digits"]),
    ("unknown-operator",
     "cccl:\n  - {name: s1, algorithm: reduce, dtype: int32, op: pluss, init: 0}\n",
     ["{f}:2:", "spec 's1'", "field 'op'", "unknown operator 'pluss'", "did you mean 'plus'?", "lambda x"]),
    ("op-not-a-string",
     "cccl:\n  - {name: s1, algorithm: reduce, dtype: int32, op: 5, init: 0}\n",
     ["{f}:2:", "field 'op'", "built-in operator name or a 'lambda ...' source"]),
    ("lambda-does-not-parse",
     "cccl:\n  - {name: s1, algorithm: select, dtype: int32, op: 'lambda x: x !='}\n",
     ["{f}:2:", "spec 's1'", "field 'op'", "lambda does not parse"]),
    ("comparator-role",
     "cccl:\n  - {name: s1, algorithm: merge_sort, dtype: int32, op: [less]}\n",
     ["{f}:2:", "field 'op'", "the comparator must be"]),
    ("non-lambda-expression",
     "cccl:\n  - {name: s1, algorithm: select, dtype: int32, op: 'x != 0'}\n",
     ["{f}:2:", "spec 's1'", "field 'op'", "unknown operator 'x != 0'", "lambda x"]),
    ("lambda-then-something-else",
     "cccl:\n  - {name: s1, algorithm: select, dtype: int32, op: 'lambda x: x, 1'}\n",
     ["{f}:2:", "spec 's1'", "field 'op'", "single lambda expression"]),
    ("duplicate-spec-name",
     "cccl:\n" + REDUCE + "  - {name: s2, algorithm: reduce, dtype: int64, op: plus, init: 0}\n"
     + "  - {name: r, algorithm: reduce, dtype: int64, op: plus, init: 0}\n",
     ["{f}:4:", "spec 'r'", "field 'name'", "duplicate spec name (first defined on line 2)"]),
    ("duplicate-name-across-sections",
     "cccl:\n" + REDUCE + "nvrtc:\n  - {name: r, source: good.cu, kernels: [good_kernel]}\n",
     ["{f}:4:", "spec 'r'", "duplicate spec name (first defined on line 2)"]),
    ("missing-nvrtc-source",
     "nvrtc:\n  - name: u1\n    source: kernels/nope.cu\n    kernels: [k]\n",
     ["{f}:3:", "spec 'u1'", "field 'source'", "cannot read source file", "nope.cu"]),
    ("kernel-not-in-source",
     "nvrtc:\n  - name: u1\n    source: good.cu\n    kernels: [good_kernel, bad_kernel]\n",
     ["{f}:4:", "spec 'u1'", "field 'kernels'", "kernel 'bad_kernel' does not appear in good.cu"]),
    ("kernel-listed-twice",
     "nvrtc:\n  - {name: u1, source: good.cu, kernels: [good_kernel, good_kernel]}\n",
     ["{f}:2:", "field 'kernels'", "twice"]),
    ("no-kernels",
     "nvrtc:\n  - {name: u1, source: good.cu, kernels: []}\n",
     ["{f}:2:", "spec 'u1'", "field 'kernels'", "non-empty list"]),
    ("unknown-nvrtc-option",
     "nvrtc:\n  - name: u1\n    source: good.cu\n    kernels: [good_kernel]\n    options:\n      stdd: c++17\n",
     ["{f}:6:", "spec 'u1'", "field 'options.stdd'", "unknown NVRTC option 'stdd'", "did you mean 'std'?"]),
    ("unknown-nvrtc-field",
     "nvrtc:\n  - name: u1\n    source: good.cu\n    kernel: [good_kernel]\n",
     ["{f}:4:", "spec 'u1'", "field 'kernel'", "did you mean 'kernels'?"]),
    ("invalid-yaml",
     "cccl:\n  - {name: s1, algorithm: reduce\n  - {name: s2}\n",
     ["{f}:3:", "not valid YAML"]),
    ("invalid-yaml-indent",
     "cccl:\n  - name: s1\n   algorithm: reduce\n",
     ["{f}:", "not valid YAML"]),
    ("duplicate-yaml-key",
     "cccl:\n  - name: s1\n    algorithm: reduce\n    dtype: int32\n    dtype: int64\n    op: plus\n    init: 0\n",
     ["{f}:5:", "duplicate key 'dtype'"]),
    ("duplicate-top-level-key",
     "cccl:\n" + REDUCE + "cccl: []\n",
     ["{f}:3:", "duplicate key 'cccl'"]),
    ("empty-matrix",
     "version: 1\ncccl: []\nnvrtc:\n",
     ["{f}:1:", "defines no specs"]),
    ("empty-file",
     "",
     ["{f}:1:", "must be a mapping"]),
    ("top-level-list",
     "- {name: s1}\n",
     ["{f}:1:", "must be a mapping"]),
    ("section-not-a-list",
     "cccl: {name: s1}\n",
     ["{f}:1:", "'cccl' must be a list"]),
    ("entry-not-a-mapping",
     "cccl:\n  - reduce_sum_i32\n",
     ["{f}:", "each cccl entry must be a mapping, got str"]),
    ("unsupported-version",
     "version: 2\ncccl:\n" + REDUCE,
     ["{f}:1:", "unsupported matrix version 2"]),
    ("bad-init-value",
     "cccl:\n  - name: s1\n    algorithm: reduce\n    dtype: int32\n    op: plus\n    init: zero\n",
     ["{f}:6:", "spec 's1'", "field 'init'", "init must be a number or one of", "'zero'"]),
    ("bad-init-type",
     "cccl:\n  - {name: s1, algorithm: reduce, dtype: int32, op: plus, init: [0]}\n",
     ["{f}:2:", "field 'init'", "init must be a number"]),
    ("bool-init",
     "cccl:\n  - {name: s1, algorithm: reduce, dtype: int32, op: plus, init: true}\n",
     ["{f}:2:", "field 'init'", "init must be a number"]),
    ("inf-init-on-int",
     "cccl:\n  - name: s1\n    algorithm: segmented_reduce\n    dtype: int64\n    op: minimum\n    init: inf\n",
     ["{f}:6:", "spec 's1'", "field 'init'", "init 'inf' needs a float dtype, not int64"]),
    ("minus-inf-init-on-uint",
     "cccl:\n  - {name: s1, algorithm: reduce, dtype: uint8, op: maximum, init: -inf}\n",
     ["{f}:2:", "init '-inf' needs a float dtype, not uint8"]),
    ("bad-order",
     "cccl:\n  - name: s1\n    algorithm: radix_sort\n    dtype: int32\n    order: acsending\n",
     ["{f}:5:", "spec 's1'", "field 'order'", "unknown order 'acsending'", "did you mean 'ascending'?"]),
]


def write_matrix(tmp_path: Path, text: str) -> Path:
    (tmp_path / "good.cu").write_text(GOOD_CU)
    p = tmp_path / "build_matrix.yaml"
    p.write_text(textwrap.dedent(text))
    return p


@pytest.mark.parametrize("text,fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_matrix(tmp_path, text, fragments):
    p = write_matrix(tmp_path, text)
    with pytest.raises(MatrixError) as ei:
        load_matrix(p)
    msg = str(ei.value)
    assert ei.value.return_code == 2
    for frag in fragments:
        frag = frag.format(f=p)
        assert frag in msg, f"{frag!r} not in {msg!r}"


def test_case_ids_are_unique():
    assert len({c[0] for c in CASES}) == len(CASES)


def test_valid_small_matrix(tmp_path):
    p = write_matrix(tmp_path, """\
        version: 1
        cccl:
          - {name: r, algorithm: reduce, dtype: float64, op: minimum, init: inf}
          - {name: s, algorithm: select, dtype: int32, op: "lambda x: x != 0"}
          - {name: rs, algorithm: radix_sort, dtype: uint64}
        nvrtc:
          - {name: u, source: good.cu, kernels: [good_kernel], options: {std: c++17, define_macro: {N: 4}}}
        """)
    m = load_matrix(p)
    assert m.names() == ["r", "s", "rs", "u"]
    r, s, rs, u = m.specs
    assert isinstance(r, CcclSpec) and r.params == {"dtype": "float64", "op": "minimum", "init": "inf"}
    assert rs.params == {"dtype": "uint64", "value_dtype": None, "order": "ascending"}  # defaults filled in
    assert isinstance(u, NvrtcUnit) and u.kernels == ("good_kernel",) and u.source == GOOD_CU
    assert u.options == {"define_macro": {"N": 4}, "std": "c++17"}
    with pytest.raises(MatrixError, match=r"--only names unknown spec 'uu' \(did you mean 'u'\?\)"):
        m.select(["uu"])
    assert [x.name for x in m.select(["u", "r"])] == ["r", "u"]


def test_content_key_ignores_name_but_not_fields(tmp_path):
    p = write_matrix(tmp_path, """\
        cccl:
          - {name: a, algorithm: reduce, dtype: int32, op: plus, init: 0}
          - {name: b, algorithm: reduce, dtype: int32, op: plus, init: 0}
          - {name: c, algorithm: reduce, dtype: int32, op: plus, init: 1}
        """)
    a, b, c = load_matrix(p).specs
    assert a.content_key() == b.content_key() != c.content_key()


def test_missing_matrix_file(tmp_path):
    with pytest.raises(MatrixError, match="cannot read build matrix"):
        load_matrix(tmp_path / "nope.yaml")


# ------------------------------------------------------------------------------------ bundled matrix
def test_default_matrix_loads():
    m = load_matrix()
    cccl = [s for s in m.specs if isinstance(s, CcclSpec)]
    nvrtc = [s for s in m.specs if isinstance(s, NvrtcUnit)]
    assert len(cccl) >= 18 and len(nvrtc) >= 4
    assert len(set(m.names())) == len(m.specs)
    assert len({s.content_key() for s in m.specs}) == len(m.specs)
    for u in nvrtc:
        assert u.source and all(k.split("<")[0] in u.source for k in u.kernels)  # templates: the base name


# ------------------------------------------------------------------------------------------ the CLI
BAD = "cccl:\n  - {name: s1, algorithm: reduec, dtype: int32, op: plus, init: 0}\n"


def test_cli_validate_bad_matrix(tmp_path, capsys):
    p = write_matrix(tmp_path, BAD)
    before = sorted(tmp_path.rglob("*"))
    assert main(["validate", "--matrix", str(p)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("aot: error: ") and "did you mean 'reduce'?" in err and err.count("\n") == 1
    assert sorted(tmp_path.rglob("*")) == before


def test_cli_validate_good_matrix(capsys):
    assert main(["validate"]) == 0
    out, _ = capsys.readouterr()
    assert "specs OK" in out and "reduce_sum_i32" in out


def test_cli_build_bad_matrix_writes_nothing(tmp_path, capsys):
    p = write_matrix(tmp_path, BAD)
    out = tmp_path / "out"
    assert main(["build", "--matrix", str(p), "--out", str(out), "--sm", "80", "-q"]) == 2
    assert "unknown algorithm 'reduec'" in capsys.readouterr().err
    assert not (out / "manifest.json").exists()
    assert not out.exists()


@pytest.mark.parametrize("argv,code,fragment", [
    (["build", "--sm", "eighty", "-q"], 2, "is not an SM"),
    (["build", "--sm", "80", "--shard", "3/2", "-q"], 2, "need 1 <= K <= N"),
    (["build", "--sm", "80", "--only", "reduce_sum_i33", "-q"], 2, "did you mean 'reduce_sum_i32'?"),
    (["build", "--sm", "80", "--jobs", "-1", "-q"], 2, "--jobs"),
])
def test_cli_build_usage_errors(tmp_path, capsys, argv, code, fragment):
    out = tmp_path / "out"
    assert main(argv + ["--out", str(out)]) == code
    assert fragment in capsys.readouterr().err
    assert not out.exists()


# ------------------------------------------------------------------------------------- parse_sm_list
@pytest.mark.parametrize("text,expected", [
    ("80,89,90", [80, 89, 90]),
    ("90, 80 ,80", [80, 90]),
    ("sm_80", [80]),
    ("SM_80,sm_120", [80, 120]),
    ("all", list(DEFAULT_SMS[13])),
    ("all,75", sorted({75, *DEFAULT_SMS[13]})),
])
def test_parse_sm_list(text, expected):
    assert parse_sm_list(text, cuda_major=13) == expected


def test_parse_sm_list_all_cuda12():
    assert parse_sm_list("all", cuda_major=12) == list(DEFAULT_SMS[12])
    with pytest.raises(UsageError, match="no default SM list for CUDA 11"):
        parse_sm_list("all", cuda_major=11)


def test_parse_sm_list_native():
    assert parse_sm_list("native", cuda_major=13, native=90) == [90]
    assert parse_sm_list("native,80", cuda_major=13, native=90) == [80, 90]
    with pytest.raises(UsageError) as ei:
        parse_sm_list("native", cuda_major=13, native=None)
    assert "--sm native: no usable GPU" in str(ei.value) and "--sm 80,90" in str(ei.value)


@pytest.mark.parametrize("text", ["", "  ", "eighty", "sm_", "sm_8", "8", "1000", "80;90", "80,,90", "sm80x",
                                  "compute_80", "-80"])
def test_parse_sm_list_garbage(text):
    with pytest.raises(UsageError, match="--sm"):
        parse_sm_list(text, cuda_major=13)


def test_parse_sm_list_garbage_message():
    with pytest.raises(UsageError, match=r"'eighty' is not an SM \(expected e\.g\. 80, 89, sm_90"):
        parse_sm_list("80,eighty", cuda_major=13)


def test_parse_sm_list_unsupported():
    with pytest.raises(UsageError) as ei:
        parse_sm_list("75,80,90", cuda_major=13, supported=[80, 86, 89, 90])
    msg = str(ei.value)
    assert "cannot target sm_75" in msg and "CUDA 13" in msg and "supported: 80, 86, 89, 90" in msg
    assert parse_sm_list("80,90", cuda_major=13, supported=[80, 86, 89, 90]) == [80, 90]


# ------------------------------------------------------------------------------ odd YAML shapes
def test_unhashable_algorithm_is_a_matrix_error(tmp_path):
    with pytest.raises(MatrixError, match="field 'algorithm'"):
        load_matrix(write_matrix(tmp_path, "cccl:\n  - {name: s1, algorithm: [reduce], dtype: int32}\n"))


def test_unhashable_yaml_key_is_a_matrix_error(tmp_path):
    with pytest.raises(MatrixError):
        load_matrix(write_matrix(tmp_path, "{[a]: 1}\n"))


@pytest.mark.parametrize("line, expected", [
    ("{name: s1, algorithm: reduce, dtype: int8, op: plus, init: 300}", "outside int8's range"),
    ("{name: s1, algorithm: reduce, dtype: int32, op: plus, init: 0.5}", "not a whole number"),
    ("{name: s1, algorithm: reduce, dtype: int32, op: 'lambda x: x + 1', init: 0}", "takes 1 argument(s)"),
    ("{name: s1, algorithm: select, dtype: int32, op: 'lambda a, b: a'}", "calls it with 1"),
])
def test_init_range_and_lambda_arity(tmp_path, line, expected):
    with pytest.raises(MatrixError, match=re.escape(expected)) as ei:
        load_matrix(write_matrix(tmp_path, f"cccl:\n  - {line}\n"))
    assert "spec 's1'" in str(ei.value)


def test_exponent_init_is_read_as_a_number(tmp_path):
    m = load_matrix(write_matrix(tmp_path, "cccl:\n  - {name: s1, algorithm: reduce, dtype: float64, op: plus, "
                                           "init: 1e3}\n"))
    assert m.specs[0].params["init"] == 1000.0


@pytest.mark.parametrize("op, expected", [
    ("lambda x: __import__('os').system('true')", "Call"),
    ("lambda x: x.real", "Attribute"),
    ("lambda x: y", "refers to 'y'"),
    ("lambda x: x != 'a'", "only numbers"),
    ("lambda x: [x][0]", "lambda subscripts '[x]'; only a declared state array can be subscripted"),
])
def test_operator_lambdas_cannot_run_code(tmp_path, op, expected):
    """Lambdas are evaluated on end-user machines during JIT fallback: only arithmetic over their args."""
    with pytest.raises(MatrixError, match=re.escape(expected)):
        load_matrix(write_matrix(tmp_path, f'cccl:\n  - {{name: s1, algorithm: select, dtype: int32, op: "{op}"}}\n'))
    from aot.build.compile import operator
    with pytest.raises(ValueError, match="refusing operator"):
        operator(op)


def test_only_with_no_names_is_a_usage_error(capsys):
    from aot.cli.main import main
    assert main(["build", "--only", ",", "--sm", "90"]) == 2
    assert "names no spec" in capsys.readouterr().err


def test_sm_all_keeps_only_what_the_toolkit_can_target():
    assert parse_sm_list("all", cuda_major=12, supported=[75, 80, 86, 89]) == [75, 80, 86, 89]
    with pytest.raises(UsageError, match="cannot target sm_90"):
        parse_sm_list("all,90", cuda_major=12, supported=[75, 80, 86, 89])


def test_init_range_tables_match_numpy():
    """check_init is numpy-free (the loader validates manifest specs without numpy); its tables must equal
    numpy's own limits."""
    import numpy as np
    from aot.core.rules import _FLOAT_MAX, _int_range
    for d in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        assert _int_range(d) == (int(np.iinfo(d).min), int(np.iinfo(d).max)), d
    for d, mx in _FLOAT_MAX.items():
        assert mx == float(np.finfo(d).max), d
