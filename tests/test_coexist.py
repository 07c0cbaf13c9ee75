"""Several packages built by aot in one process (issue 15): each has its own registry and nothing one of them
does spoils another's; a package built with another cuda-cccl costs one warning naming it, then JIT (or one
error per spec saying what to install).

Real artifacts (the session's small build, plus one build of a *different* spec under the same name) are
loaded and deserialized by the real cuda.compute in a subprocess, with aot's stand-ins forced (no JIT: this
is what a lean install has) and the stand-in libcuda preloaded (this host has no driver).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from conftest import ROOT, repo_env

from aot.core.manifest import MANIFEST_NAME
from aot.package.bundle import write_package_folder
from aot.runtime.loader.objects import AotWarning
from aot.runtime.loader.registry import Registry

#: pkg_b's own spec, named like one of aot's default specs but a different reduction (max, not sum).
PKG_B_MATRIX = """version: 1
cccl:
  - {name: reduce_sum_i32, algorithm: reduce, dtype: int32, op: maximum, init: min}
"""
OTHER_CCCL = "1.1.0"


def make_package(site: Path, name: str, artifacts: Path, names: set[str]) -> Path:
    pkg = site / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("import aot\nregistry = aot.Registry.from_package(__name__, device_sm=90)\n")
    write_package_folder(artifacts, pkg / "artifacts", {"package": name, "sms": [90]}, names=names)
    return pkg


def restamp_cccl(folder: Path, version: str) -> None:
    """The folder's manifest now says another cuda-cccl built it (what a package built elsewhere ships)."""
    doc = json.loads((folder / MANIFEST_NAME).read_text())
    doc["producer"]["cuda_cccl"] = version
    for a in doc["artifacts"]:  # each CCCL entry names the release it was built under
        if "cuda_cccl" in a:
            a["cuda_cccl"] = version
    (folder / MANIFEST_NAME).write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def site(small_build, tmp_path_factory) -> Path:
    from aot.build.builder import build
    from aot.build.matrix import load_matrix
    base = tmp_path_factory.mktemp("coexist")
    matrix = base / "b.yaml"
    matrix.write_text(PKG_B_MATRIX)
    build(load_matrix(matrix).specs, [90], base / "b-build", jobs=1)
    site = base / "site"
    make_package(site, "pkg_a", small_build.out, {"reduce_sum_i32", "lower_bound_i32"})
    make_package(site, "pkg_b", base / "b-build", {"reduce_sum_i32"})
    c = make_package(site, "pkg_c", small_build.out, {"reduce_sum_i32", "lower_bound_i32", "morton"})
    restamp_cccl(c / "artifacts", OTHER_CCCL)
    return site


PROCESS = textwrap.dedent("""
    import ctypes, hashlib, json, sys, warnings
    ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)  # the stand-in libcuda: this host has no driver
    sys.path.insert(0, sys.argv[2])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import pkg_a, pkg_b, pkg_c
        import cuda.compute                             # the application's own import, through the hook
        import aot
        from aot.core.errors import ToolchainError
        from aot.runtime.loader import default as D, default_specs, lean
        from aot.runtime.loader.registry import Registry
        D._default = Registry(sys.argv[3], specs=default_specs.load(), device_sm=90)  # aot's own artifacts
        errors = []
        for name in ("reduce_sum_i32", "lower_bound_i32"):   # the foreign package first: it must spoil nothing
            try:
                pkg_c.registry.cccl(name)
            except ToolchainError as e:
                errors.append(str(e))
        out = {}
        for who, reg in (("b", pkg_b.registry), ("a", pkg_a.registry), ("default", D.default_registry())):
            algo = reg.cccl("reduce_sum_i32") if who != "default" else aot.cccl("reduce_sum_i32")
            st = reg.status()["reduce_sum_i32"]
            out[who] = {"source": st.source, "path": st.path, "raw": type(algo.raw).__name__,
                        "digest": hashlib.sha256(reg._loaded["reduce_sum_i32"].payload).hexdigest()}
        pkg_a.registry.cccl("lower_bound_i32")           # the spec pkg_c failed on: pkg_a's own still serves
        out["a_lower_bound"] = pkg_a.registry.status()["lower_bound_i32"].source
        from aot.core.versions import runtime_versions
    print(json.dumps({"out": out, "errors": errors, "calls": lean.stub_calls(), "forced": lean.state().forced,
                      "warnings": [str(w.message) for w in caught if w.category.__name__ == "AotWarning"],
                      "roots": {p: str(m.registry.root) for p, m in (("a", pkg_a), ("b", pkg_b), ("c", pkg_c))},
                      "installed": runtime_versions()["cuda_cccl"]}))
""")


def test_two_packages_and_aots_own_artifacts_in_one_process(site, small_build):
    from aot.build.toolchain import stub_library
    r = subprocess.run([sys.executable, "-c", PROCESS, str(stub_library()), str(site), str(small_build.out)],
                       cwd=ROOT, env=repo_env(AOT_FORCE_STUB_TOOLCHAIN="1"), capture_output=True, text=True,
                       timeout=180, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    out, roots, installed = doc["out"], doc["roots"], doc["installed"]
    # Each registry served its own artifact, packaged, deserialized by cuda.compute.
    for who, root in (("a", roots["a"]), ("b", roots["b"]), ("default", str(small_build.out))):
        assert out[who]["source"] == "packaged" and out[who]["path"].startswith(root + "/"), (who, out[who])
        assert out[who]["raw"] == "_Reduce", out[who]
    # Same name, different spec: nothing is keyed by the name alone (pkg_b's max is not the default's sum).
    assert out["b"]["digest"] != out["a"]["digest"] == out["default"]["digest"]
    assert out["a_lower_bound"] == "packaged"
    # The foreign package: one warning for the whole package, then one error per spec saying what to install.
    foreign = [w for w in doc["warnings"] if "pkg_c" in w]
    assert len(foreign) == 1, doc["warnings"]
    assert f"built with cuda-cccl {OTHER_CCCL}" in foreign[0] and f"cuda-cccl {installed} is installed" in foreign[0]
    assert f"install cuda-cccl=={OTHER_CCCL}" in foreign[0]
    assert len(doc["errors"]) == 2
    for e, name in zip(doc["errors"], ("reduce_sum_i32", "lower_bound_i32")):
        assert e.startswith(f"{name}: package 'pkg_c'") and f"pip install 'cuda-cccl=={OTHER_CCCL}'" in e, e
        assert "[jit]'" in e, e
    assert doc["warnings"] == foreign, doc["warnings"]  # nobody else warned about anything
    assert doc["forced"] and doc["calls"] == {"nvrtc": 0, "nvJitLink": 0, "cudart": 0}


def test_foreign_cccl_with_the_toolkit_jit_serves_after_one_warning(site, monkeypatch):
    """With the toolkit (JIT available), the package's cuda.compute specs JIT-compile; NVRTC units are not
    affected by the cuda-cccl version; the warning comes once for the package, not once per spec or file."""
    import aot.runtime.jit.jit
    calls = []

    def jit_stub(spec, sm, errors, warn):
        calls.append((spec.name, sm))
        return b"blob", "jit", None

    monkeypatch.setattr(aot.runtime.jit.jit, "cccl_from_cache_or_jit", jit_stub)
    reg = Registry(site / "pkg_c" / "artifacts", owner="pkg_c", device_sm=90)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = reg._load("reduce_sum_i32")
        b = reg._load("lower_bound_i32")
    msgs = [str(w.message) for w in caught if issubclass(w.category, AotWarning)]
    assert len(msgs) == 1 and "package 'pkg_c'" in msgs[0] and OTHER_CCCL in msgs[0], msgs
    assert a.source == b.source == "jit" and calls == [("reduce_sum_i32", 90), ("lower_bound_i32", 90)]
    assert reg.status()["reduce_sum_i32"].errors == msgs
    unnamed = Registry(site / "pkg_c" / "artifacts", device_sm=90)  # not from_package: the folder is named
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        unnamed._load("reduce_sum_i32")
    assert [str(w.message) for w in caught][0].startswith(f"aot: the artifacts in {site / 'pkg_c' / 'artifacts'} ")
