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
k = importlib.import_module("numba_wrong_pkg.kernels")
print(json.dumps({n: kernel_digest(getattr(k, n)) for n in sys.argv[4].split(",")}))
"""


def _cases():
    spec = importlib.util.spec_from_file_location("_aot_numba_wrong_kernels_env",
                                                  ROOT / ".ci" / "gpu" / "numba_wrong_kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


W = _cases()


def _digests(site: Path, mode: str, mods: list[str], items: Path, python: str = sys.executable) -> dict:
    r = subprocess.run([python, "-W", "ignore", "-c", CHILD, str(site), mode, ",".join(mods), ",".join(KERNELS)],
                       capture_output=True, text=True, timeout=300,
                       env=repo_env(AOT_DEBUG_DIGEST=str(items), PYTHONDONTWRITEBYTECODE="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_other_installed_packages_do_not_enter_a_kernels_digest(tmp_path):
    """A process that cannot import numba_cuda_mlir or cuda.compute (the GPU host) and one that imported them,
    cupy and cuda.core first (the build host): the same items, the same digests."""
    site = tmp_path / "site"
    W.write_package(site)
    mods = [m for m in ("cuda.compute", "numba_cuda_mlir", "cupy", "cuda.core") if _importable(m)]
    without = _digests(site, "block", ["numba_cuda_mlir", "cuda.compute"], tmp_path / "without.txt")
    with_them = _digests(site, "import", mods, tmp_path / "with.txt")
    assert (tmp_path / "without.txt").read_text() == (tmp_path / "with.txt").read_text()
    assert without == with_them and len(set(without.values())) == len(KERNELS)
    # the debug file names each item: the overload's implementation is one
    assert "by_overload/bump@overload numba_wrong_pkg.ext._bump" in (tmp_path / "with.txt").read_text()


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
    here = _digests(folder / "site", "block", [], tmp_path / "here.txt")
    there = _digests(folder / "site", "block", [], tmp_path / "there.txt", python=other)
    assert (tmp_path / "here.txt").read_text() == (tmp_path / "there.txt").read_text()
    assert here == there
    rc, lines = W.check(folder, cpu=True, python=other)
    assert rc == 0, "\n".join(lines)
