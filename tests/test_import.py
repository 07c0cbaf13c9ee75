"""``import aot`` stays cheap: no CUDA / numba imports, and a small import time (measured in a subprocess)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT, repo_env

HEAVY = "('cuda', 'numba', 'numpy', 'cccl_patches')"


def run_python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=repo_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_import_aot_imports_no_cuda():
    out = run_python("import aot, sys; print(any(m.startswith(('cuda', 'numba')) for m in sys.modules))")
    assert out == "False"


@pytest.mark.parametrize("module", ["aot", "aot.core.format", "aot.core.arch", "aot.core.errors", "aot.core.manifest", "aot.core.spec",
                                    "aot.core.env", "aot.cli.main", "aot.build.matrix"])
def test_light_modules_import_nothing_heavy(module):
    out = run_python(f"import {module}, sys; print(sorted(m for m in sys.modules if m.startswith({HEAVY})))")
    assert out == "[]", f"import {module} pulled in {out}"


def test_import_time():
    code = ("import time; t = time.perf_counter(); import aot; "
            "print(f'{(time.perf_counter() - t) * 1e3:.2f}')")
    samples = sorted(float(run_python(code)) for _ in range(3))
    best = samples[0]
    print(f"import aot: best {best:.2f} ms of {samples}")
    assert best < 100, f"import aot took {best:.1f} ms (target < 30 ms)"
