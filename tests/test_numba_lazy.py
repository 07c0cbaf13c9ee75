"""Issue 42: ``import`` of a package that ships numba-cuda kernels attaches nothing (no manifest read, no digest,
no checker imported); numba-cuda's first compile attaches them, and an edited kernel is still refused before its
first launch. Each case runs in a fresh process: the hook on numba-cuda's dispatcher is per process."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba.cuda")

from conftest import repo_env  # noqa: E402
from test_numba import _build, make_project  # noqa: E402

#: What ``from_package`` may import of aot beyond the front (``import aot``): the registry (its device and thread
#: helpers, the logger) and the hook; not the manifest, the specs, the attach, the digest.
# loader.families: the adapters a shipped set needs
LAZY_IMPORTS = ["aot.core.log", "aot.runtime.adapters", "aot.runtime.adapters.numba_lazy",
                "aot.runtime.loader.driver", "aot.runtime.loader.families", "aot.runtime.loader.registry"]

CHILD = textwrap.dedent("""
    import json, sys, warnings
    sys.path.insert(0, sys.argv[1])
    pkg, edit = sys.argv[2], sys.argv[3] == "edit"
    import importlib
    import numba.cuda.dispatcher  # the library's own kernels import numba-cuda first
    kernels = importlib.import_module(pkg + ".kernels")
    import aot
    front = set(sys.modules)
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        reg = aot.Registry.from_package(pkg)
        out = {"imported": sorted(m for m in set(sys.modules) - front if m.startswith("aot")),
               "cache_before": type(kernels.axpy._cache).__name__,
               "digest_loaded": "aot.runtime.adapters.numba_digest" in sys.modules}
        if edit:  # the kernel edited after the build, before its first launch (its module's text too)
            import linecache
            path = kernels.__file__
            text = open(path).read().replace("acc += tile[j]", "acc -= tile[j]")
            scratch = {"cuda": numba.cuda}
            exec(compile(text, path, "exec"), scratch)
            kernels.tile_sum = scratch["tile_sum"]
            linecache.cache[path] = (0, None, text.splitlines(True), path)
        from cccl_patches.numba_cuda import argtypes_of
        kernels.axpy.compile(argtypes_of("void(float32[::1], float32[::1], float32)"))  # the first compile
        out["digest_after_axpy"] = "aot.runtime.adapters.numba_digest" in sys.modules
        # tile_sum's first compile asks its cache first (what CUDADispatcher.compile does): None is numba's JIT
        out["tile_sum_served"] = kernels.tile_sum._cache.load_overload(argtypes_of("void(int64[::1], int64[::1])"),
                                                                       None) is not None
    from aot.runtime.adapters import numba_lazy
    out.update(cache_after=type(kernels.axpy._cache).__name__, pending=numba_lazy.pending(),
               tile_sum=type(kernels.tile_sum._cache).__name__, axpy_compiled=len(kernels.axpy.overloads),
               warnings=[str(w.message) for w in caught if issubclass(w.category, aot.AotWarning)])
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def lazy_build(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("numba_lazy")
    m, pkg = make_project(tmp)
    _build(m, tmp / pkg / "artifacts", tmp)
    return tmp, pkg


def _run(tmp, pkg, mode: str) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, str(tmp), pkg, mode], env=repo_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_import_attaches_nothing_and_the_first_compile_attaches_the_package(lazy_build):
    """Before issue 42's fix ``from_package`` read the manifest, imported the checkers and took every digest."""
    got = _run(*lazy_build, "plain")
    assert got["imported"] == LAZY_IMPORTS, got
    assert not got["digest_loaded"] and got["cache_before"] != "_PackagedCache", got
    assert got["cache_after"] == got["tile_sum"] == "_PackagedCache" and got["pending"] == 0, got
    assert got["axpy_compiled"] == 1 and got["warnings"] == [], got  # served by the packaged cache: no JIT
    assert got["digest_after_axpy"] and got["tile_sum_served"], got


def test_a_kernel_edited_before_its_first_launch_is_refused_then(lazy_build):
    """Its digest is taken at its own first compile (not at the first compile of another kernel): refused then."""
    got = _run(*lazy_build, "edit")
    assert got["cache_after"] == "_PackagedCache" and not got["tile_sum_served"], got
    assert len(got["warnings"]) == 1 and "tile_sum" in got["warnings"][0], got
    assert "changed since the build" in got["warnings"][0], got
