"""Downstream packages ship their own kernels (issue 9): the example projects under examples/ built with
their real backends (hatchling + aot's build hook, scikit-build-core + aot's CMake module), installed into
a fresh environment and checked from there; [tool.aot] validation; pins; coverage; Registry.from_package.

The build backends find aot's hooks through entry points (hatch, cmake.module). In a source checkout
there is no installed aot carrying them, so the tests put a metadata-only dist-info on PYTHONPATH, next
to the checkout: the same thing an editable install does. One SM (AOT_WHEEL_SM=80) keeps it fast.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from conftest import DOCS, ROOT, repo_env

EXAMPLES = ROOT / "examples"
SM = "80"


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("shim")
    info = d / "cccl_aot-0.0.dev0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cccl-aot\nVersion: 0.0.dev0\n")
    (info / "entry_points.txt").write_text("[cmake.module]\naot = aot.cmake\n\n[hatch]\naot = aot.package.hatch\n")
    return d


def _env(shim: Path, **extra: str) -> dict:
    env = repo_env(AOT_WHEEL_SM=SM, SOURCE_DATE_EPOCH="1700000000", **extra)
    env["PYTHONPATH"] += os.pathsep + str(shim)
    return env


def _wheel(project: Path, out: Path, shim: Path) -> Path:
    env = _env(shim)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w",
                        str(out), str(project)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = out.glob("*.whl")
    return whl


@pytest.fixture(scope="module")
def wheels(tmp_path_factory, shim) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("downstream")
    out = {}
    for name in ("hatch-mypkg", "skbuild-mypkg", "pystr-mypkg", "geo-mypkg"):
        project = base / name
        shutil.copytree(EXAMPLES / name, project, ignore=shutil.ignore_patterns("build", "artifacts"))
        out[name] = _wheel(project, base / f"wheel-{name}", shim)
    return out


@pytest.fixture(scope="module")
def fresh_env(wheels, tmp_path_factory) -> Path:
    """A new environment holding only the two example wheels; cuda-cccl & co. come from the test
    environment through a .pth file (after the new environment's own site-packages)."""
    d = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(d)
    py = d / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    outer = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "zz_outer.pth").write_text(outer + "\n")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                        "--no-index", *map(str, wheels.values())], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return py


def _run(py: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(py), *args], capture_output=True, text=True, cwd=cwd, env=repo_env(), timeout=300)


PKG = {"hatch-mypkg": "mypkg_hatch", "skbuild-mypkg": "mypkg_skbuild"}


@pytest.mark.parametrize("example", sorted(PKG))
def test_wheel_holds_only_manifest_and_artifacts_and_pins_cccl(wheels, example):
    from aot.core.versions import dist_version
    whl = wheels[example]
    assert whl.name.endswith("-py3-none-manylinux_2_26_x86_64.whl"), whl.name
    z = zipfile.ZipFile(whl)
    pkg = PKG[example]
    data = sorted(n for n in z.namelist() if n.startswith(f"{pkg}/artifacts/"))
    rest = [n[len(f"{pkg}/artifacts/"):] for n in data]
    assert "manifest.json" in rest and "aot-package.json" in rest and "hit-index.json" in rest  # its NVRTC unit
    assert all(n in ("manifest.json", "hit-index.json", "aot-package.json") or n.endswith(".aot") for n in rest), rest
    assert not [n for n in z.namelist() if "build-report" in n or "/build/" in n]
    manifest = json.loads(z.read(f"{pkg}/artifacts/manifest.json"))
    assert sorted(f"{pkg}/artifacts/{a['path']}" for a in manifest["artifacts"]) == \
        sorted(n for n in data if n.endswith(".aot"))
    assert "/tmp" not in z.read(f"{pkg}/artifacts/manifest.json").decode()
    info = json.loads(z.read(f"{pkg}/artifacts/aot-package.json"))
    assert info["complete"] and info["sms"] == [int(SM)] and info["cuda_major"] == "13"
    n_cccl = {"hatch-mypkg": 3, "skbuild-mypkg": 2}[example]
    assert len(info["specs"]) == n_cccl + 1 and sum(s["family"] == "cccl" for s in info["specs"].values()) == n_cccl
    cccl = dist_version("cuda-cccl")
    lean = ["cccl-aot-cu13<0.2,>=0.1.0", f"cuda-cccl=={cccl}", "cuda-bindings<14,>=13"]
    assert info["requires"] == ["cccl-aot-cu13>=0.1.0,<0.2", f"cuda-cccl=={cccl}", "cuda-bindings>=13,<14"]
    assert info["jit"] == "cccl-aot-cu13[jit]>=0.1.0,<0.2"
    meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    requires = {_canonical(ln.split(":", 1)[1].strip()) for ln in meta.splitlines() if ln.startswith("Requires-Dist:")}
    # What loading needs, and no toolkit: neither cuda-cccl's [cu13] extra nor a toolkit distribution.
    assert {_canonical(r) for r in lean} <= requires, requires
    assert not [r for r in requires if "[cu13]" in r or r.startswith(("cuda-toolkit", "nvidia-"))], requires
    assert "Provides-Extra: jit" in meta
    assert _canonical('cccl-aot-cu13[jit]<0.2,>=0.1.0; extra == "jit"') in requires, requires


def _canonical(requirement: str) -> str:
    from packaging.requirements import Requirement
    return str(Requirement(requirement))


def test_examples_have_their_own_specs_and_a_lambda():
    from aot.build.matrix import load_matrix
    default = set(load_matrix().names())
    for example in PKG:
        m = load_matrix(EXAMPLES / example / "build_matrix.yaml")
        cccl = [s for s in m.specs if s.family == "cccl"]
        assert len(cccl) >= 2 and not {s.name for s in cccl} & default
        assert any(str(s.params.get("op", "")).startswith("lambda") for s in cccl)
        assert any(s.family == "nvrtc" for s in m.specs)


def test_installed_wheels_name_their_specs_and_verify(fresh_env, tmp_path):
    code = ("import json, mypkg_hatch, mypkg_skbuild; print(json.dumps([mypkg_hatch.registry.names(), "
            "mypkg_skbuild.registry.names(), str(mypkg_hatch.registry.root)]))")
    r = _run(fresh_env, "-W", "error", "-c", code, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    hatch, skb, root = json.loads(r.stdout)
    assert hatch == ["axpy", "multiples_of_7_i64", "product_i32", "running_max_i64"]
    assert skb == ["clamp", "max_f32", "select_positive_mult3_i64"]
    assert "site-packages" in root
    for pkg in PKG.values():
        v = _run(fresh_env, "-m", "aot", "verify", "--package", pkg, "--for-wheel", cwd=tmp_path)
        assert v.returncode == 0 and "integrity OK" in v.stdout, v.stdout + v.stderr
        i = _run(fresh_env, "-m", "aot", "inspect", "--package", pkg, cwd=tmp_path)
        assert i.returncode == 0 and "complete" in i.stdout and "cuda-cccl 1.2.1" in i.stdout, i.stdout + i.stderr


def test_pystr_wheel_carries_the_rendered_sources(wheels, fresh_env, tmp_path):
    """pystr-mypkg keeps its kernels as Python strings (one rendered per dtype): its wheel's manifest holds
    each unit's rendered text and what rendered it, and the installed package names its units."""
    z = zipfile.ZipFile(wheels["pystr-mypkg"])
    specs = json.loads(z.read("pystr_mypkg/artifacts/manifest.json"))["specs"]
    assert sorted(specs) == ["block_sum", "saxpy", "scale_shift_f32", "scale_shift_f64"]
    assert specs["saxpy"]["source_path"] == "pystr_mypkg.kernels:SAXPY"
    assert specs["scale_shift_f64"]["source_path"] == "pystr_mypkg.kernels:scale_shift_source(dtype='float64')"
    assert "double* __restrict__ out" in specs["scale_shift_f64"]["source"]
    assert "float* __restrict__ out" in specs["scale_shift_f32"]["source"]
    assert specs["block_sum"]["options"] == {"define_macro": "BLOCK=256", "max_register_count": 64, "std": "c++17"}
    code = "import json, pystr_mypkg; print(json.dumps(pystr_mypkg.registry.names()))"
    r = _run(fresh_env, "-W", "error", "-c", code, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == sorted(specs)


def test_geo_example_ships_issue_20_forms(wheels, fresh_env, tmp_path):
    """examples/geo-mypkg (issue 20): a captured-mask compaction, a transform-fused reduction, a zip
    reduction with its own operator from code, a search over counting; installed, it names them and its
    wheel verifies (its GPU half: .ci/gpu/downstream.sh step 5)."""
    z = zipfile.ZipFile(wheels["geo-mypkg"])
    info = json.loads(z.read("mypkg_geo/artifacts/aot-package.json"))
    assert info["complete"] and sorted(info["specs"]) == ["compact_by_mask", "segment_of_index", "sum_of_squares",
                                                          "sum_xy"]
    specs = json.loads(z.read("mypkg_geo/artifacts/manifest.json"))["specs"]
    assert specs["compact_by_mask"]["state"] == [["mask", "uint8[]"]] and specs["segment_of_index"]["values"] == "counting"
    assert "zip" in specs["sum_xy"]["input"] and "transform" in specs["sum_of_squares"]["input"]
    r = _run(fresh_env, "-W", "error", "-c", "import json, mypkg_geo; print(json.dumps(mypkg_geo.registry().names()))",
             cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout) == sorted(info["specs"]), r.stdout + r.stderr
    v = _run(fresh_env, "-m", "aot", "verify", "--package", "mypkg_geo", "--for-wheel", cwd=tmp_path)
    assert v.returncode == 0 and "integrity OK" in v.stdout, v.stdout + v.stderr


def test_inspect_a_wheel_is_titled_with_its_name(wheels, tmp_path):
    whl = wheels["hatch-mypkg"]
    r = subprocess.run([sys.executable, "-m", "aot", "inspect", str(whl)], capture_output=True, text=True,
                       env=repo_env(COLUMNS="200"), cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert whl.name in r.stdout and "aot-wheel-" not in r.stdout and "complete" in r.stdout


def test_hatch_wheel_is_reproducible(wheels, shim, tmp_path):
    """Same sources, SOURCE_DATE_EPOCH: the same bytes (the second build reuses the build folder)."""
    project = wheels["hatch-mypkg"].parent.parent / "hatch-mypkg"
    again = _wheel(project, tmp_path / "again", shim)
    assert again.read_bytes() == wheels["hatch-mypkg"].read_bytes()


# ------------------------------------------------------------------------------ [tool.aot] and bundle
LEAN_DEPS = '"cccl-aot-cu13", "cuda-cccl==1.2.1"'


def _project(tmp_path: Path, tool: str, deps: str = LEAN_DEPS) -> Path:
    p = tmp_path / "proj"
    shutil.copytree(EXAMPLES / "skbuild-mypkg", p, ignore=shutil.ignore_patterns("build", "artifacts"))
    (p / "pyproject.toml").write_text(f'[project]\nname = "x"\nversion = "1"\ndependencies = [{deps}]\n\n'
                                      f'[tool.aot]\n{tool}\n')
    return p


@pytest.mark.parametrize("tool, message", [
    ('package = "mypkg_skbuild"\nallow_partial = true', "unknown key 'allow_partial' (did you mean 'allow-partial'?)"),
    ('package = "mypkg_skbuild"\npackge = "x"', "unknown key 'packge' (did you mean 'package'?)"),
    ('package = "nope"', "key 'package': no folder nope"),
    ('package = "mypkg_skbuild"\nsm = {cu13 = "80", cu14 = "90"}', "unknown CUDA major 'cu14' (did you mean"),
    ('package = "mypkg_skbuild"\nsm = "80,9x"', "key 'sm': '9x' is not an SM"),
    ('package = "mypkg_skbuild"\nmatrix = "missing.yaml"', "key 'matrix':"),
    ('package = "mypkg_skbuild"\nallow-partial = "yes"', "key 'allow-partial': must be true or false"),
    ('package = "mypkg_skbuild"\nchecks = {clamp = "os:system"}', "must live inside 'mypkg_skbuild'"),
    ('package = "mypkg_skbuild"\nfolder = "../x"', "key 'folder'"),
])
def test_tool_aot_errors_name_file_key_and_problem(tmp_path, tool, message):
    p = _project(tmp_path, tool)
    r = subprocess.run([sys.executable, "-m", "aot", "bundle", "--project", str(p)], capture_output=True,
                       text=True, env=repo_env(), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and str(p / "pyproject.toml") in line and message in line, line


def test_pins_must_follow_the_artifacts():
    from aot.package.bundle import jit_requirement, pin_problems, required_pins
    prod = {"cuda_cccl": "1.2.1", "cuda_major": "13", "aot": "0.1.0"}
    assert required_pins(prod) == ["cccl-aot-cu13>=0.1.0,<0.2", "cuda-cccl==1.2.1", "cuda-bindings>=13,<14"]
    assert jit_requirement(prod) == "cccl-aot-cu13[jit]>=0.1.0,<0.2"
    assert required_pins({**prod, "aot": "1.3.2", "cuda_major": "12"})[0] == "cccl-aot-cu12>=1.3.2,<2"
    # The lean pins pass; so does a project that wants the toolkit itself (cuda-cccl[cu13]: the same version).
    assert pin_problems(required_pins(prod) + ["numpy"], prod) == []
    assert pin_problems(["cccl-aot-cu13", "cuda-cccl==1.2.1"], prod) == []
    assert pin_problems(["cccl-aot-cu13", "cuda-cccl[cu13]==1.2.1", "numpy"], prod) == []
    one = pin_problems(["cccl-aot-cu13", "cuda-cccl>=1.2"], prod)
    assert len(one) == 1 and "exactly that version" in one[0] and 'declare "cuda-cccl==1.2.1"' in one[0], one
    assert "exactly that version" in pin_problems(["cccl-aot-cu13", "cuda-cccl==1.2.0"], prod)[0]
    assert "not cu12" in pin_problems(["cccl-aot-cu13", "cuda-cccl[cu12]==1.2.1"], prod)[0]
    assert 'add "cuda-cccl==1.2.1"' in pin_problems(["cccl-aot-cu13", "numpy"], prod)[0]
    assert 'add "cccl-aot-cu13>=0.1.0,<0.2"' in pin_problems(["cuda-cccl==1.2.1"], prod)[0]
    assert pin_problems(["numpy"], prod, require=False) == []
    assert "whose aot runtime is cccl-aot-cu13" in pin_problems(["cccl-aot-cu12", "cuda-cccl==1.2.1"], prod)[0]
    assert "excludes aot 0.1.0" in pin_problems(["cccl-aot-cu13>=0.2", "cuda-cccl==1.2.1"], prod)[0]
    assert "excludes CUDA 13" in pin_problems(["cccl-aot-cu13", "cuda-cccl==1.2.1", "cuda-bindings<13"], prod)[0]


def test_the_rule_is_said_once():
    """The hook adds required_pins; pin_problems' suggestions and the manual's block are the same lines."""
    from aot.package.bundle import jit_requirement, required_pins
    prod = {"cuda_cccl": "1.2.1", "cuda_major": "13", "aot": "0.1.0"}
    page = (DOCS / "downstream.md").read_text()
    block = page.split("**What a wheel carrying artifacts requires**", 1)[1].split("```", 2)[1]
    lines = [ln.split("#")[0].strip() for ln in block.strip().splitlines()]
    assert lines == [*required_pins(prod), f'{jit_requirement(prod)}; extra == "jit"']
    assert "cuda-cccl[cu13]==" not in page.replace('a declared `cuda-cccl[cu13]==1.2.1`', '')


def test_bundle_prebuilt_coverage_and_only_manifest_and_artifacts(small_build, tmp_path):
    """A prebuilt set: refused without the pin; refused when it lacks (spec, SM) of matrix x SM list unless
    allow-partial; then the folder holds exactly manifest.json, aot-package.json and the artifacts."""
    m = tmp_path / "matrix.yaml"
    m.write_text((ROOT / "build_matrix.yaml").read_text())
    p = _project(tmp_path, 'package = "mypkg_skbuild"\nmatrix = "../matrix.yaml"\nsm = "80,89,90"', deps='"numpy"')

    def bundle(*extra):
        return subprocess.run([sys.executable, "-m", "aot", "bundle", "--project", str(p), "--artifacts",
                               str(small_build.out), "-q", *extra], capture_output=True, text=True,
                              env=repo_env(), timeout=120)
    r = bundle()
    assert r.returncode == 2 and "no cuda-cccl pin" in r.stderr, r.stderr
    (p / "pyproject.toml").write_text((p / "pyproject.toml").read_text().replace('"numpy"', LEAN_DEPS))
    r = bundle()
    assert r.returncode == 7 and "lacks" in r.stderr and "--allow-partial" in r.stderr, r.stderr
    assert not (p / "mypkg_skbuild" / "artifacts").exists()
    r = bundle("--allow-partial")
    assert r.returncode == 0 and "PARTIAL" in r.stdout, r.stdout + r.stderr
    out = p / "mypkg_skbuild" / "artifacts"
    assert (small_build.out / "build-report.json").exists()
    names = sorted(q.relative_to(out).as_posix() for q in out.rglob("*") if q.is_file())
    assert [n for n in names if not n.endswith(".aot")] == ["aot-package.json", "hit-index.json", "manifest.json"]
    assert len([n for n in names if n.endswith(".aot")]) == len(json.loads((small_build.out / "manifest.json")
                                                                          .read_text())["artifacts"])
    info = json.loads((out / "aot-package.json").read_text())
    assert not info["complete"] and info["missing"]
    # --sm that matches what was built: complete, and the swap replaces the folder atomically
    r = bundle("--sm", ",".join(map(str, small_build.sms)))
    assert r.returncode == 7  # the matrix still has 18 more specs than the small build
    v = subprocess.run([sys.executable, "-m", "aot", "verify", str(out), "--for-wheel"], capture_output=True,
                       text=True, env=repo_env(), timeout=120)
    assert v.returncode == 0, v.stdout + v.stderr


def test_bundle_never_deletes_the_authors_files(small_build, tmp_path):
    """aot replaces <package>/<folder>/ as a whole: a folder holding files aot did not write stops the bundle
    (before any build) with one line naming them, and they stay; aot's own earlier output is replaced."""
    m = tmp_path / "matrix.yaml"
    m.write_text((ROOT / "build_matrix.yaml").read_text())
    p = _project(tmp_path, 'package = "mypkg_skbuild"\nmatrix = "../matrix.yaml"\nsm = "80,89,90"\n'
                           'allow-partial = true')
    out = p / "mypkg_skbuild" / "artifacts"
    (out / "notes").mkdir(parents=True)
    mine = {"keep.txt": b"the author's", "notes/a.md": b"# notes", "fake.aot": b"not an artifact"}
    for rel, data in mine.items():
        (out / rel).write_bytes(data)

    def bundle():
        return subprocess.run([sys.executable, "-m", "aot", "bundle", "--project", str(p), "--artifacts",
                               str(small_build.out), "-q"], capture_output=True, text=True, env=repo_env(),
                              timeout=120)
    r = bundle()
    assert r.returncode == 2, r.stdout + r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and str(out) in line and "fake.aot, keep.txt, notes/a.md" in line, line
    assert "aot did not write" in line and "[tool.aot] folder" in line, line
    assert {rel: (out / rel).read_bytes() for rel in mine} == mine  # nothing of the author's was touched
    for rel in mine:
        (out / rel).unlink()
    assert bundle().returncode == 0
    assert bundle().returncode == 0  # aot's own folder (artifacts, manifest, aot-package.json) is replaced
    from aot.package.bundle import foreign_files
    assert foreign_files(out) == [] and (out / "manifest.json").is_file()
    (out / "cccl" / "link").symlink_to(tmp_path)
    assert foreign_files(out) == ["cccl/link"]


def test_from_package_warns_once_naming_the_path(tmp_path):
    pkg = tmp_path / "lonely_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    code = ("import warnings, aot\nwarnings.simplefilter('always')\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    r = aot.Registry.from_package('lonely_pkg', 'artifactz')\n"
            "print(len(w)); print(w[0].category.__name__, w[0].message)\n"
            "try:\n    r.spec('axpy')\nexcept Exception as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                       env=repo_env(PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}"), timeout=60)
    assert r.returncode == 0, r.stderr
    n, warning, err = r.stdout.strip().splitlines()
    assert n == "1" and warning.startswith("AotWarning") and str(pkg / "artifactz") in warning
    assert "unknown spec 'axpy'" in err and "no manifest was found" in err


# ------------------------------------------------------------------------ numpy references (CPU parts)
def test_lambda_operators_evaluate_like_python():
    import itertools
    import numpy as np
    from aot.verify.reference import np_operator
    srcs = ["lambda a, b: a if a > b else b", "lambda a, b: a + 2 * b - 1", "lambda a, b: a % 7 == b % 7",
            "lambda a, b: (a and b) or (a - b)", "lambda a, b: not a < b <= 3", "lambda a, b: a // 3 ^ b",
            "lambda a, b: -a if b else ~a"]
    vals = list(range(-5, 6))
    for src in srcs:
        f_py, f_np = eval(src), np_operator(src)  # noqa: S307 - fixed test sources
        a, b = (np.array(v, dtype=np.int64) for v in zip(*itertools.product(vals, vals)))
        got = np.asarray(f_np(a, b)).astype(np.int64)
        want = np.array([int(f_py(int(x), int(y))) for x, y in zip(a, b)], dtype=np.int64)
        assert np.array_equal(got, want), src


def test_reduce_and_scan_references_match_sequential_folds():
    import functools
    import numpy as np
    from aot.verify.reference import reduce_reference, scan_reference
    rng = np.random.default_rng(1)
    for op, dt in [("lambda a, b: a if a > b else b", "int64"), ("lambda a, b: a * b", "int32"),
                   ("plus", "int32"), ("maximum", "float32"), ("lambda a, b: a + b", "float64")]:
        x = rng.integers(-1000, 1000, 1001).astype(dt)
        f = eval(op) if op.startswith("lambda") else {"plus": lambda a, b: a + b,  # noqa: S307
                                                       "maximum": max}[op]
        with np.errstate(all="ignore"):
            seq = [x[0]]
            for v in x[1:]:
                seq.append(np.asarray(f(seq[-1], v)).astype(dt))
        want = np.array(seq, dtype=dt)
        assert np.allclose(scan_reference(op, dt, x), want, rtol=1e-12), op
        assert np.allclose(reduce_reference(op, dt, x), want[-1:], rtol=1e-12), op
        assert functools.reduce(lambda a, b: a, [0]) == 0


def test_select_unique_and_sort_references():
    import numpy as np
    from aot.verify.reference import select_reference, sorted_problem, unique_first
    x = np.arange(-6, 7, dtype=np.int64)
    assert select_reference("lambda x: x % 3 == 0 and x > 0", x).tolist() == [v % 3 == 0 and v > 0 for v in x.tolist()]
    keys = np.array([1, 2, 11, 12, 25, 31], dtype=np.int32)
    assert unique_first("lambda a, b: a // 10 == b // 10", keys).tolist() == [True, False, True, False, True, True]
    assert unique_first("equal_to", np.array([1, 1, 2])).tolist() == [True, False, True]
    k = np.array([5, 3, 9, 1])
    assert sorted_problem("lambda a, b: a > b", k, np.array([9, 5, 3, 1])) is None
    assert "not sorted" in sorted_problem("lambda a, b: a > b", k, np.array([1, 3, 5, 9]))
    assert "permutation" in sorted_problem("lambda a, b: a > b", k, np.array([9, 5, 3, 3]))
    v = np.arange(4)
    assert sorted_problem("lambda a, b: a > b", k, np.array([9, 5, 3, 1]), v, np.array([2, 0, 1, 3])) is None
    assert "pairs" in sorted_problem("lambda a, b: a > b", k, np.array([9, 5, 3, 1]), v, np.array([0, 2, 1, 3]))


def test_checks_resolve_only_inside_the_owning_package():
    from aot.verify.reference import NoReference
    from aot.verify.units import resolve_check
    with pytest.raises(NoReference, match="not inside package"):
        resolve_check("os:system", "mypkg")
    with pytest.raises(NoReference, match="not inside package"):
        resolve_check("mypkgevil.x:f", "mypkg")
    assert resolve_check("aot.verify.units:check_kernel", "aot").__name__ == "check_kernel"


# ------------------------------------------------------------------------------- a real lean install
#: Distributions of the CUDA toolkit / JIT stack that a lean install must not contain.
TOOLCHAIN = ("nvidia-cuda-nvrtc", "nvidia-nvjitlink", "nvidia-nvvm", "nvidia-cuda-nvcc", "numba-cuda-mlir",
             "numba", "cuda-toolkit")
LEAN_LIMIT_MB = 200
#: The files the runtime wheel is built from (the rest of the checkout is not needed for a tool-only wheel).
WHEEL_SOURCES = ("aot", "cccl_patches", "CMakeLists.txt", "pyproject.toml", "README.md", "build_matrix.yaml")

LEAN_CHECK = """
import json, sys, sysconfig
{imports}
from aot.runtime.loader import lean
st = lean.state()
print(json.dumps({{"counting": cuda.compute.CountingIterator.__name__, "bindings": bool(cuda.compute._BINDINGS_AVAILABLE),
                  "stand_ins": sorted(st.stand_ins) if st else None, "calls": lean.stub_calls(), **{extra}}}))
"""


def _runtime_wheel(work: Path) -> Path:
    """cccl-aot-cu13, tool-only, as the release makes it (.ci/variant.py on a copy of the sources)."""
    src = work / "src"
    src.mkdir()
    for name in WHEEL_SOURCES:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copyfile)(
            ROOT / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__", "artifacts")}
                                        if (ROOT / name).is_dir() else {}))
    subprocess.run([sys.executable, str(ROOT / ".ci" / "variant.py"), "cu13", str(src / "pyproject.toml")],
                   check=True, capture_output=True, text=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AOT_WHEEL_")}
    env["SOURCE_DATE_EPOCH"] = "1700000000"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w",
                        str(work / "wheel"), str(src)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = (work / "wheel").glob("cccl_aot_cu13-*.whl")
    return whl


def test_lean_install_of_both_examples_imports_in_any_order(wheels, tmp_path_factory):
    """Both example wheels and cccl-aot-cu13 installed for real into one fresh environment, their other
    dependencies from the package index: no toolchain distribution, under 200 MB, and `import mypkg_hatch,
    cuda.compute` as well as `import cuda.compute` first (the .pth hook) work there without the toolkit."""
    work = tmp_path_factory.mktemp("lean")
    runtime = _runtime_wheel(work)
    d = work / "venv"
    venv.EnvBuilder(with_pip=False).create(d)
    py = d / "bin" / "python"
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--only-binary", ":all:",
                        str(runtime), *map(str, wheels.values())], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    check = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "check"], capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    size = int(subprocess.run(["du", "-s", "--block-size=1", str(site)], capture_output=True, text=True,
                              check=True).stdout.split()[0])
    dists = json.loads(subprocess.run([str(py), "-c", "import importlib.metadata as m, json; print(json.dumps("
                                       "sorted(d.metadata['Name'].lower() for d in m.distributions())))"],
                                      capture_output=True, text=True, check=True).stdout)
    print(f"lean install: {size / 1e6:.1f} MB of site-packages; {', '.join(dists)}")
    assert size <= LEAN_LIMIT_MB * 1e6, f"{size / 1e6:.1f} MB"
    assert not [n for n in dists if n.replace("_", "-").startswith(TOOLCHAIN)], dists
    real = [p for pat in ("libnvrtc.so*", "libnvJitLink.so*") for p in site.rglob(pat) if "cccl_patches" not in p.parts]
    assert real == [], real  # aot's stand-ins (cccl_patches/lib) only
    assert {"cccl-aot-cu13", "cuda-cccl", "cuda-bindings", "mypkg-hatch", "mypkg-skbuild", "mypkg-geo"} <= set(dists), dists
    assert (site / "cccl_aot.pth").is_file() and (site / "_cccl_aot_hook.py").is_file()
    # No driver here: aot's stand-in libcuda (installed with it) plays the driver; the environment sees
    # nothing of the checkout or of the test environment.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AOT_"))}
    env.update(LD_PRELOAD=str(site / "cccl_patches" / "lib" / "libcuda.so.1"),
               AOT_CACHE_DIR=str(work / "cache"))

    def lean_run(imports: str, extra: str, **more: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(py), "-c", LEAN_CHECK.format(imports=imports, extra=extra)], cwd=work,
                              env={**env, **more}, capture_output=True, text=True, timeout=300)

    # The package first (its __init__ builds its Registry), then the application's cuda.compute.
    r = lean_run("import mypkg_hatch, mypkg_skbuild, cuda.compute\nimport aot",
                 '{"aot": aot.__file__, "hatch": mypkg_hatch.registry.names(), '
                 '"skbuild": mypkg_skbuild.registry.names(), '
                 '"served": aot.Registry.from_package("mypkg_hatch", device_sm=80)._load("product_i32").source}')
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["aot"].startswith(str(site)), out
    assert out["hatch"] == ["axpy", "multiples_of_7_i64", "product_i32", "running_max_i64"], out
    assert out["skbuild"] == ["clamp", "max_f32", "select_positive_mult3_i64"], out
    assert out["counting"] == "CountingIterator" and out["bindings"] and out["served"] == "packaged", out
    # NVRTC and nvJitLink are aot's stand-ins (cudart may be found for real: this host has /usr/local/cuda).
    assert {"nvJitLink", "nvrtc"} <= set(out["stand_ins"]) and not any(out["calls"].values()), out
    # cuda.compute first: the .pth hook prepared it; nothing of the packages was imported.
    r = lean_run("import cuda.compute", '{"pkgs": sorted(m for m in sys.modules if m.startswith("mypkg"))}')
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["counting"] == "CountingIterator" and {"nvJitLink", "nvrtc"} <= set(out["stand_ins"]), out
    assert out["pkgs"] == [], out
    # ... and that hook is what makes it work: switched off, cuda-pathfinder finds no NVRTC.
    r = lean_run("import cuda.compute", "{}", AOT_IMPORT_HOOK="0")
    assert r.returncode != 0 and "nvrtc" in r.stderr.lower(), r.stderr[-2000:]
