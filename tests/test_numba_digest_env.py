"""A numba kernel's digest depends on its code, not on the process or interpreter that takes it: the build host
(Python 3.11, numba 0.68.1, numpy 2.4, numba_cuda_mlir and cuda-cccl installed) and the GPU host (Python 3.12,
numba 0.68.0, numpy 2.5, no numba_cuda_mlir) must key a kernel alike, or every packaged kernel is refused there.
The items are compared one by one (``AOT_DEBUG_DIGEST``), so a difference names the item."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba.cuda")

from conftest import ROOT, repo_env  # noqa: E402

KERNELS = ("by_overload", "by_overload_method", "by_overload_attribute", "by_device_function", "by_fastmath")
#: A kernel reading what numba-cuda compiles in from numpy, math, numba, operator and the library (scalars, a
#: computed table, nested tuples, a named tuple, an enum, a dtype, register_jitable, a device function,
#: cuda.random, an operator @overload, an IR rewrite) and a closure's kernel: more names and values whose spelling
#: could move between Python, numba and numpy releases.
RICH = {"__init__.py": "", "kernels.py": 'import math\nimport enum\nimport operator\nfrom collections import namedtuple\nimport numpy as np\nimport numba\nfrom numba import cuda, types\nfrom numba.cuda.random import xoroshiro128p_uniform_float32\nfrom numba.cuda.extending import register_jitable\n\nTPB = 128\nSCALE = np.float32(2.5)\nTABLE = np.linspace(0, 1, 8, dtype=np.float32)\nNESTED = ((1, 2.0), (3, "x"))\nP = namedtuple("P", "a b")(1, 2)\nDT = np.dtype("f4")\nclass Mode(enum.IntEnum):\n    A = 1\n    B = 2\n\n@register_jitable\ndef helper(x):\n    return x * 2\n\n@cuda.jit(device=True)\ndef dev(x):\n    return math.sqrt(x) + np.float32(1)\n\n@cuda.jit\ndef rich(out, x, states):\n    i = cuda.grid(1)\n    sm = cuda.shared.array(TPB, dtype=numba.float32)\n    loc = cuda.local.array(4, types.float32)\n    if i < out.size:\n        v = np.exp(x[i]) + np.sqrt(x[i]) + math.pi + np.pi + SCALE + TABLE[i % 8] + NESTED[0][1] + P.a\n        v += helper(v) + dev(v) + operator.add(v, 1.0) + Mode.B + np.float64(v) + abs(v) + min(v, 1.0)\n        v += xoroshiro128p_uniform_float32(states, i) + np.int64(3) + np.float32(v) + DT.itemsize\n        cuda.atomic.add(out, 0, v)\n        sm[0] = v\n        loc[0] = v\n        cuda.syncthreads()\n        out[i] = sm[0] + loc[0] + np.finfo(np.float32).eps + math.isnan(v) + np.isnan(v) + np.sum(x)\nfrom . import ext  # noqa\n\n\ndef factory(k):\n    @cuda.jit\n    def closed(out):\n        out[0] = k + TPB\n    return closed\n\n\nclosed = factory(np.float32(3.5))\n',
        "ext.py": 'import operator\nfrom numba.cuda import types\nfrom numba.cuda.extending import overload\nfrom numba.cuda.core import rewrites, ir\n\n\n@overload(operator.invert, target="cuda")\ndef _inv(x):\n    if isinstance(x, types.Float):\n        def impl(x):\n            return -x\n        return impl\n\n\n@rewrites.register_rewrite("after-inference")\nclass NoOp(rewrites.Rewrite):\n    def match(self, func_ir, block, typemap, calltypes):\n        return False\n\n    def apply(self):\n        return self.crnt_block\n'}
#: A child that takes the digests of the wrong-kernel cases (argv: site, modules to import first, or to block).
CHILD = r"""
import importlib, json, sys
site, mode, mods = sys.argv[1], sys.argv[2], [m for m in sys.argv[3].split(",") if m]
for m in mods:
    if mode == "block":
        sys.modules[m] = None  # not importable, as on a host without it
    else:
        importlib.import_module(m)
import numpy as np
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
sys.path.insert(0, site)
from aot.runtime.adapters.numba_digest import kernel_digest
out = {}
for ref in sys.argv[4].split(","):
    mod, _, name = ref.partition(":")
    out[ref] = kernel_digest(getattr(importlib.import_module(mod), name))
print(json.dumps(out))
"""


def _cases():
    spec = importlib.util.spec_from_file_location("_aot_numba_wrong_kernels_env",
                                                  ROOT / ".ci" / "gpu" / "numba_wrong_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


W = _cases()


def _digests(site: Path, mode: str, mods: list[str], items: Path, python: str = sys.executable) -> dict:
    refs = [f"numba_wrong_pkg.kernels:{k}" for k in KERNELS] + ["richpkg.kernels:rich", "richpkg.kernels:closed"]
    r = subprocess.run([python, "-W", "ignore", "-c", CHILD, str(site), mode, ",".join(mods), ",".join(refs)],
                       capture_output=True, text=True, timeout=300,
                       env=repo_env(AOT_DEBUG_DIGEST=str(items), PYTHONDONTWRITEBYTECODE="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_other_installed_packages_do_not_enter_a_kernels_digest(tmp_path):
    """A process that cannot import numba_cuda_mlir or cuda.compute (the GPU host) and one that imported them,
    cupy and cuda.core first (the build host): the same items, the same digests."""
    site = tmp_path / "site"
    W.write_package(site)
    _write_rich(site)
    mods = [m for m in ("cuda.compute", "numba_cuda_mlir", "cupy", "cuda.core") if _importable(m)]
    without = _digests(site, "block", ["numba_cuda_mlir", "cuda.compute"], tmp_path / "without.txt")
    with_them = _digests(site, "import", mods, tmp_path / "with.txt")
    assert (tmp_path / "without.txt").read_text() == (tmp_path / "with.txt").read_text()
    assert without == with_them and len(set(without.values())) == len(KERNELS) + 2
    # the debug file names each item: the overload's implementation is one
    assert "by_overload/bump@overload numba_wrong_pkg.ext._bump" in (tmp_path / "with.txt").read_text()


def _write_rich(site: Path) -> None:
    (site / "richpkg").mkdir()
    for name, text in RICH.items():
        (site / "richpkg" / name).write_text(text)


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("AOT_OTHER_PYTHON"), reason="AOT_OTHER_PYTHON: an interpreter of another "
                    "Python (3.12), numba and numpy release with numba-cuda 0.30.4, aot's dependencies and no "
                    "numba_cuda_mlir")
def test_built_under_one_interpreter_attached_under_another(tmp_path):
    """Built here; checked (A attached, B refused, nolto attached, no compile) by AOT_OTHER_PYTHON, whose digest
    items equal this interpreter's."""
    other = os.environ["AOT_OTHER_PYTHON"]
    folder = tmp_path / "w"
    W.prepare(folder, "90")
    _write_rich(folder / "site")
    here = _digests(folder / "site", "block", [], tmp_path / "here.txt")
    there = _digests(folder / "site", "block", [], tmp_path / "there.txt", python=other)
    assert (tmp_path / "here.txt").read_text() == (tmp_path / "there.txt").read_text()
    assert here == there
    rc, lines = W.check(folder, cpu=True, python=other)
    assert rc == 0, "\n".join(lines)
