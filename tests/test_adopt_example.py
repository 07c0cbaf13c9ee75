"""examples/adopt-mypkg (issue 28): the library's compile function adopted aot by a change of at most 10
lines there (against its own earlier version, ``before/_compile.py``), its matrix holds NVRTC units only,
and the adopted function's hot path asks aot once per source (the GPU run: .ci/gpu/adopt.sh)."""

from __future__ import annotations

import ast
import difflib
import sys

from conftest import ROOT

EXAMPLE = ROOT / "examples" / "adopt-mypkg"


def _function(path, name: str) -> list[str]:
    text = path.read_text()
    node = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name)
    return text.splitlines()[node.lineno - 1:node.end_lineno]


def test_compile_function_changed_by_at_most_ten_lines():
    before = _function(EXAMPLE / "before" / "_compile.py", "compile_kernels")
    after = _function(EXAMPLE / "adopt_mypkg" / "_compile.py", "compile_kernels")
    changed = [d for d in difflib.unified_diff(before, after, lineterm="", n=0)
               if d[:1] in "+-" and not d.startswith(("+++", "---"))]
    assert 0 < len(changed) <= 10, changed
    assert any("by_source" in d or "_KERNELS" in d for d in changed)
    assert before[0] == after[0]  # the same signature: callers are unchanged


def test_matrix_is_nvrtc_only_and_names_the_librarys_strings():
    from aot.build.matrix import load_matrix
    from aot.core.spec import NvrtcUnit
    sys.path.insert(0, str(EXAMPLE))
    try:
        specs = load_matrix(EXAMPLE / "build_matrix.yaml").specs
        from adopt_mypkg import kernels
    finally:
        sys.path.remove(str(EXAMPLE))
    assert {s.name for s in specs} == {"saxpy", "scale_f32", "scale_f64", "block_sum"}
    assert all(isinstance(s, NvrtcUnit) for s in specs)
    from aot.core.srckey import options_mapping
    assert all(dict(s.options) == options_mapping(kernels.OPTIONS)[0] for s in specs)
