"""Any import order works in a lean install (issue 15): the ``import cuda.compute`` hook
(aot/runtime/loader/import_hook.py), installed by ``import aot`` and, at interpreter start, by ``cccl_aot.pth``.

This host has the CUDA toolkit, so a lean install is simulated as tests/test_lean.py does:
``AOT_FORCE_STUB_TOOLCHAIN=1`` (aot loads its stand-ins anyway) and aot's stand-in libcuda preloaded (there is
no driver). The .pth is simulated by a site directory holding the wheel's two root files, processed by
``site.addsitedir`` as interpreter start processes site-packages. tests/test_downstream.py checks the real
thing from an installed wheel.

Each interpreter here starts with this checkout's hook: the environment's own ``cccl_aot.pth`` runs ``import
_cccl_aot_hook`` at start, and the copy it finds first is this checkout's (``site_dir`` on ``PYTHONPATH``), not the
one an earlier install left in site-packages (another aot's, which may name modules this checkout moved).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, repo_env

HOOK = ROOT / "aot" / "runtime" / "loader" / "import_hook.py"

PRELUDE = textwrap.dedent("""
    import ctypes, json, sys
    ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)  # the stand-in libcuda: this host has no driver
""")

REPORT = textwrap.dedent("""
    from aot.runtime.loader import lean
    st = lean.state()
    maps = open("/proc/self/maps").read()
    print(json.dumps({"counting": cuda.compute.CountingIterator.__name__,
                      "bindings": bool(cuda.compute._BINDINGS_AVAILABLE),
                      "stand_ins": sorted(st.stand_ins) if st else None, "calls": lean.stub_calls(),
                      "finders": sum(type(f).__name__ == "CudaComputeFinder" for f in sys.meta_path),
                      "real_nvrtc_mapped": any("/nvidia/" in l and "libnvrtc" in l for l in maps.splitlines()),
                      **extra}))
""")


@pytest.fixture(scope="module")
def stub() -> str:
    from aot.build.toolchain import stub_library
    return str(stub_library())


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory) -> Path:
    """What the cccl-aot wheel puts at the site-packages root (CMakeLists.txt)."""
    d = tmp_path_factory.mktemp("site")
    shutil.copyfile(HOOK, d / "_cccl_aot_hook.py")
    (d / "cccl_aot.pth").write_text("import _cccl_aot_hook\n")
    return d


def hook_env(site_dir: Path, **env: str) -> dict:
    """:func:`repo_env` with this checkout's hook ahead of any installed copy (see the module's docstring)."""
    env = repo_env(**env)
    env["PYTHONPATH"] += os.pathsep + str(site_dir)
    return env


def run(code: str, stub: str, site_dir: Path, *args: str, timeout: int = 120, report: bool = True,
        **env: str) -> dict:
    env.setdefault("AOT_FORCE_STUB_TOOLCHAIN", "1")
    code = PRELUDE + textwrap.dedent(code) + (REPORT if report else "")
    r = subprocess.run([sys.executable, "-c", code, stub, *args], cwd=ROOT,
                       env=hook_env(site_dir, **env), capture_output=True, text=True, timeout=timeout, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_import_cuda_compute_after_aot(stub, site_dir):
    out = run("""
        import aot
        import cuda.compute
        extra = {}
    """, stub, site_dir)
    assert out["counting"] == "CountingIterator" and out["bindings"], out
    assert out["stand_ins"] == ["cudart", "nvJitLink", "nvrtc"] and out["finders"] == 1, out
    assert out["calls"] == {"nvrtc": 0, "nvJitLink": 0, "cudart": 0} and not out["real_nvrtc_mapped"], out


def test_import_cuda_compute_first_through_the_pth(stub, site_dir):
    """The application imports cuda.compute before anything of aot: the .pth's finder prepares it, and
    interpreter start imported nothing of aot (only the hook module)."""
    out = run("""
        import site
        site.addsitedir(sys.argv[2])          # what interpreter start does with site-packages
        before = sorted(m for m in sys.modules if m == "aot" or m.startswith("aot."))
        import cuda.compute
        import aot                            # a second install() is a no-op: still one finder
        extra = {"before": before, "hook": "_cccl_aot_hook" in sys.modules}
    """, stub, site_dir, str(site_dir))
    assert out["before"] == [] and out["hook"], out
    assert out["counting"] == "CountingIterator" and out["bindings"] and out["finders"] == 1, out
    assert out["stand_ins"] == ["cudart", "nvJitLink", "nvrtc"] and not out["real_nvrtc_mapped"], out


def test_aot_loader_imports_cuda_compute_under_its_lock_without_deadlock(stub, site_dir):
    """import_cuda_compute() imports cuda.compute holding lean's lock: the hook must not wait on it. Also
    from 8 threads at once: one decision, the stand-ins loaded once."""
    out = run("""
        import threading
        import aot
        from aot.runtime.loader import lean
        mods, errors = [], []
        def go():
            try:
                mods.append(lean.import_cuda_compute())
            except Exception as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=go) for _ in range(8)]
        for t in threads: t.start()
        for t in threads: t.join(60)
        import cuda.compute
        extra = {"n": len(mods), "same": all(m is cuda.compute for m in mods), "errors": errors,
                 "handles": len(lean._handles)}
    """, stub, site_dir, timeout=90)
    assert out["n"] == 8 and out["same"] and out["errors"] == [] and out["handles"] == 3, out


def test_the_hook_is_off_with_aot_import_hook_0(stub, site_dir):
    out = run("""
        import site
        site.addsitedir(sys.argv[2])
        import aot
        extra = {"finders": sum(type(f).__name__ == "CudaComputeFinder" for f in sys.meta_path)}
        from aot.runtime.loader import lean
        print(json.dumps({**extra, "state": lean.state() is not None}))
    """, stub, site_dir, str(site_dir), report=False, AOT_IMPORT_HOOK="0")
    assert out == {"finders": 0, "state": False}


def test_a_failed_preparation_is_one_line_saying_what_to_do(stub, site_dir):
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent("""
        import aot
        from aot.core.errors import ToolchainError
        from aot.runtime.loader import lean
        def broken():
            raise ToolchainError("no CUDA toolkit and no C compiler to build aot's stand-ins")
        lean.prepare = broken
        import cuda.compute
    """), stub], cwd=ROOT, env=hook_env(site_dir), capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: aot: cuda.compute needs NVRTC and nvJitLink"), r.stderr[-2000:]
    assert "no C compiler" in last and "[jit]'" in last and "AOT_IMPORT_HOOK=0" in last, last


def test_the_hook_module_imports_only_os_and_sys():
    import ast
    tree = ast.parse(HOOK.read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [a.name for n in top for a in n.names] == ["os", "sys"]
    from aot.core.env import VARS
    assert "AOT_IMPORT_HOOK" in VARS  # documented with the others (aot doctor, README)
