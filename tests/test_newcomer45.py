"""Issue 45, a newcomer adopting aot in a setuptools library: each finding with the check that failed before it.

- A setuptools project ships its kernels with one line (``build-backend = "aot.package.setuptools_backend"``):
  examples/setuptools-mypkg is built with its real backend (setuptools, ``--no-build-isolation`` as
  tests/test_downstream.py builds the hatch example; tests/test_isolated.py builds it isolated, from a wheelhouse).
- A library in development (no artifacts) warns once per process, and a test suite silences it as
  docs/adopt.md says; a CPU-only user without numba-cuda gets no warning for numba kernels.
- The jit extra of a numba set names numba-cuda's toolkit (NVVM); a numba spec's import failure names ``kernel``;
  ``aot validate`` shows numba kernels; piped tables keep their width; "1 job"; a CCCL build leaves no
  ``~/.cupy``.
- The front page and README: every family, the adoption pages linked, every number beside its command.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import DOCS, ROOT, repo_env

EXAMPLE = ROOT / "examples" / "setuptools-mypkg"
SM = "80"


def _bdist_wheel_ok() -> bool:
    import importlib.util
    return importlib.util.find_spec("setuptools.command.bdist_wheel") is not None  # setuptools >= 70.1


needs_setuptools = pytest.mark.skipif(not _bdist_wheel_ok(), reason="setuptools >= 70.1 (the test extra) builds "
                                      "wheels without the `wheel` package")


def _pip_wheel(project: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w",
                           str(out), str(project)], env=repo_env(AOT_WHEEL_SM=SM, SOURCE_DATE_EPOCH="1700000000"),
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def st_wheel(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("setuptools")
    project = base / "setuptools-mypkg"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build", "artifacts", "dist", "*.egg-info"))
    r = _pip_wheel(project, base / "dist")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = (base / "dist").glob("*.whl")
    return whl


# ------------------------------------------------------------------------------------------------ setuptools
@needs_setuptools
def test_the_setuptools_example_wheel_carries_its_artifacts_tag_and_pins(st_wheel):
    from aot.package.tags import wheel_tag
    assert st_wheel.name == f"mypkg_setuptools-0.1.0-{wheel_tag(False)}.whl"
    z = zipfile.ZipFile(st_wheel)
    names = z.namelist()
    art = sorted(n for n in names if n.startswith("mypkg_setuptools/artifacts/"))
    assert art == ["mypkg_setuptools/artifacts/aot-package.json", "mypkg_setuptools/artifacts/hit-index.json",
                   "mypkg_setuptools/artifacts/manifest.json",
                   "mypkg_setuptools/artifacts/nvrtc/scale_offset/compute_80.ptx.aot",
                   "mypkg_setuptools/artifacts/nvrtc/scale_offset/sm_80.cubin.aot"], art
    assert "mypkg_setuptools/__init__.py" in names and "mypkg_setuptools/checks.py" in names
    info = json.loads(z.read("mypkg_setuptools/artifacts/aot-package.json"))
    assert info["complete"] and info["sms"] == [int(SM)] and sorted(info["specs"]) == ["scale_offset"], info
    assert info["checks"] == {"scale_offset": "mypkg_setuptools.checks:scale_offset"}
    wheel = z.read("mypkg_setuptools-0.1.0.dist-info/WHEEL").decode()
    assert "Root-Is-Purelib: false" in wheel and "Root-Is-Purelib: true" not in wheel
    assert [ln for ln in wheel.splitlines() if ln.startswith("Tag:")] == \
        [f"Tag: py3-none-{p}" for p in wheel_tag(False).split("-")[2].split(".")]
    meta = z.read("mypkg_setuptools-0.1.0.dist-info/METADATA").decode()
    requires = [ln.split(":", 1)[1].strip() for ln in meta.partition("\n\n")[0].splitlines()
                if ln.startswith("Requires-Dist:")]
    # what loading needs (NVRTC units only: no cuda-cccl), and the jit extra pinned, as the hatchling hook does
    assert {"cccl-aot-cu13>=0.1.0,<0.2", "cuda-bindings>=13,<14", "numpy"} <= set(requires), requires
    assert 'cccl-aot-cu13[jit-nvrtc]>=0.1.0,<0.2; extra == "jit"' in requires, requires
    assert not [r for r in requires if r.startswith("cuda-cccl")], requires
    record = z.read("mypkg_setuptools-0.1.0.dist-info/RECORD").decode().splitlines()
    assert sorted(ln.split(",")[0] for ln in record) == sorted(names)
    for ln in record:
        path, digest, size = ln.rsplit(",", 2)
        if path.endswith("/RECORD"):
            continue
        data = z.read(path)
        assert digest == "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert int(size) == len(data)


@needs_setuptools
def test_the_setuptools_wheel_is_reproducible_installs_and_inspects_uncut(st_wheel, tmp_path):
    """The same sources and SOURCE_DATE_EPOCH give the same bytes (the second build reuses build/aot); installed,
    `aot inspect --package` reads it, and piped (no terminal, no COLUMNS) its lines are whole, not cut at 80."""
    project = st_wheel.parent.parent / "setuptools-mypkg"
    r = _pip_wheel(project, tmp_path / "again")
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "again" / st_wheel.name).read_bytes() == st_wheel.read_bytes()
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(st_wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    env = {k: v for k, v in repo_env().items() if k != "COLUMNS"}
    env["PYTHONPATH"] += os.pathsep + str(site)
    r = subprocess.run([sys.executable, "-m", "aot", "inspect", "--package", "mypkg_setuptools"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    summary = [ln for ln in r.stdout.splitlines() if ln.startswith("2 artifacts, 1 specs")]
    assert summary and len(summary[0]) > 80 and summary[0].rstrip().endswith("nvJitLink 13.0"), r.stdout


@needs_setuptools
def test_the_setuptools_backend_stops_a_contradicting_requirement_in_one_line(tmp_path):
    project = tmp_path / "p"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build", "artifacts", "dist", "*.egg-info"))
    toml = project / "pyproject.toml"
    toml.write_text(toml.read_text().replace('dependencies = ["cccl-aot-cu13", "numpy"]',
                                             'dependencies = ["cccl-aot-cu12", "numpy"]'))
    r = _pip_wheel(project, tmp_path / "dist")
    assert r.returncode != 0 and not list((tmp_path / "dist").glob("*.whl"))
    line = [ln for ln in (r.stdout + r.stderr).splitlines() if "aot: error:" in ln]
    assert line and "'cccl-aot-cu12'" in line[0] and "cccl-aot-cu13" in line[0], r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr


def test_the_setuptools_backend_is_setuptools_less_the_metadata_hook():
    """Every PEP 517 hook is setuptools' own but the wheel's and the sdist's; no prepare_metadata_for_build_wheel,
    since the requirements are known only after the bundle (a frontend then builds the wheel for its metadata)."""
    pytest.importorskip("setuptools")
    from setuptools import build_meta

    from aot.package import setuptools_backend as backend
    assert not hasattr(backend, "prepare_metadata_for_build_wheel")
    for hook in ("build_editable", "get_requires_for_build_wheel", "get_requires_for_build_sdist"):
        assert getattr(backend, hook) is getattr(build_meta, hook), hook
    assert backend.build_wheel is not build_meta.build_wheel and backend.build_sdist is not build_meta.build_sdist


@needs_setuptools
def test_the_setuptools_sdist_carries_the_matrix_and_builds_the_wheel(tmp_path):
    """`python -m build` makes the wheel from the sdist, and setuptools packs packages only: the backend adds the
    matrix and the sources it names by path, so the wheel built from the unpacked sdist carries the kernels."""
    import tarfile
    project = tmp_path / "p"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build", "artifacts", "dist", "*.egg-info"))
    code = "from aot.package.setuptools_backend import build_sdist; print(build_sdist('sdist'))"
    r = subprocess.run([sys.executable, "-c", code], cwd=project, env=repo_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    sdist = project / "sdist" / r.stdout.split()[-1]
    with tarfile.open(sdist) as t:
        names = t.getnames()
        t.extractall(tmp_path / "unpacked", filter="data")
    base = "mypkg_setuptools-0.1.0"
    assert {f"{base}/build_matrix.yaml", f"{base}/kernels/scale_offset.cu", f"{base}/pyproject.toml"} <= set(names)
    r = _pip_wheel(tmp_path / "unpacked" / base, tmp_path / "dist")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = (tmp_path / "dist").glob("*.whl")
    assert "mypkg_setuptools/artifacts/nvrtc/scale_offset/sm_80.cubin.aot" in zipfile.ZipFile(whl).namelist()


# ------------------------------------------------------------------------------------------------ warnings
DEV_INIT = ("import aot\nregistry = aot.Registry.from_package(__name__)\nlookup = aot.by_source(__name__)\n"
            "cache = aot.program_cache(__name__)\n")


def _dev_project(root: Path) -> Path:
    """A library in development: its __init__ asks aot three ways; there are no artifacts yet."""
    (root / "devlib").mkdir(parents=True)
    (root / "devlib" / "__init__.py").write_text(DEV_INIT)
    (root / "tests").mkdir()
    (root / "tests" / "test_it.py").write_text("import devlib\n\n\ndef test_it():\n    assert devlib.registry\n")
    return root


def test_a_library_without_artifacts_warns_once(tmp_path):
    project = _dev_project(tmp_path / "proj")
    code = ("import warnings, json\nwith warnings.catch_warnings(record=True) as w:\n    warnings.simplefilter('always')\n"
            "    import devlib\nprint(json.dumps([str(x.message) for x in w]))")
    env = repo_env()
    env["PYTHONPATH"] += os.pathsep + str(project)
    r = subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)
    assert len(said) == 1 and "package 'devlib' ships no artifacts" in said[0], said


def test_the_adopt_page_silences_it_in_a_strict_suite(tmp_path):
    """docs/adopt.md's pytest setting, in a suite with filterwarnings = error: collected and passing; without
    it, the suite stops at collection (what the newcomer met); AOT_DISABLE_PACKAGED=1 silences it too."""
    page = (DOCS / "adopt.md").read_text()
    (block,) = [b for b in re.findall(r"```toml\n(.*?)```", page, re.S) if "aot.AotWarning" in b]
    project = _dev_project(tmp_path / "proj")
    env = repo_env()
    env["PYTHONPATH"] += os.pathsep + str(project)
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    strict = '[tool.pytest.ini_options]\nfilterwarnings = ["error"]\n'
    for toml, extra, ok in ((strict, {}, False), (block, {}, True), (strict, {"AOT_DISABLE_PACKAGED": "1"}, True)):
        (project / "pyproject.toml").write_text(toml)
        r = subprocess.run(args, cwd=project, env={**env, **extra}, capture_output=True, text=True, timeout=300)
        assert (r.returncode == 0) == ok, (toml, extra, r.stdout[-2000:])
        assert ("1 passed" in r.stdout) == ok, r.stdout[-2000:]


NUMBA_KERNELS = '''from numba import cuda


@cuda.jit
def double(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = 2 * x[i]
'''


@pytest.fixture(scope="module")
def numba_lib(tmp_path_factory) -> Path:
    """A library shipping one numba-cuda kernel, built here for one SM into its artifacts folder."""
    root = tmp_path_factory.mktemp("numbalib")
    (root / "nblib").mkdir()
    (root / "nblib" / "__init__.py").write_text("import aot\nregistry = aot.Registry.from_package(__name__)\n")
    (root / "nblib" / "kernels.py").write_text(NUMBA_KERNELS)
    (root / "build_matrix.yaml").write_text('version: 1\nnumba:\n  - {name: double, kernel: "nblib.kernels:double", '
                                           'signatures: ["void(float32[::1])"]}\n')
    r = subprocess.run([sys.executable, "-m", "aot", "build", "--sm", SM, "--jobs", "1", "--out", "nblib/artifacts"],
                       cwd=root, env=repo_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (root / "nblib" / "artifacts" / "numba").is_dir()
    return root


def test_without_numba_cuda_a_cpu_user_hears_nothing_of_numba_kernels(numba_lib):
    """`python -S`: no site-packages, so no numba-cuda (nor numba), as for a CPU-only user; aot itself needs
    nothing from there to import the package. Before: one AotWarning (numba-cuda is not installed)."""
    code = (f"import sys; sys.path[:0] = [{str(ROOT)!r}, {str(numba_lib)!r}]\nimport warnings\n"
            "warnings.simplefilter('error')\nimport nblib\nprint(sorted(m for m in sys.modules if 'numba' in m))")
    r = subprocess.run([sys.executable, "-S", "-c", code], cwd=numba_lib, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["[]"], r.stdout + r.stderr[-2000:]


def test_with_numba_cuda_the_kernel_is_still_attached(numba_lib):
    code = "import nblib.kernels as k\nprint(type(k.double._cache).__name__)"
    env = repo_env()
    env["PYTHONPATH"] += os.pathsep + str(numba_lib)
    r = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code], cwd=numba_lib, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.split() == ["_PackagedCache"], r.stdout + r.stderr[-2000:]


# ------------------------------------------------------------------------------------------------ small fixes
def test_the_jit_extra_of_a_numba_set_brings_nvvm():
    """Suggesting `cccl-aot-cu13[jit-nvrtc]` (NVRTC, nvJitLink) to a package of numba-cuda kernels was wrong:
    numba-cuda JIT-compiles through NVVM, which its own `cu13` extra brings."""
    from aot.package.pins import jit_requirements, missing_jit_extra
    info = {"jit": "cccl-aot-cu13[jit-nvrtc]>=0.1.0,<0.2", "producer": {"cuda_major": "13"},
            "requires": ["cccl-aot-cu13>=0.1.0,<0.2", "cuda-bindings>=13,<14", "numba-cuda>=0.23,<1"]}
    assert jit_requirements(info) == ["cccl-aot-cu13[jit-nvrtc]>=0.1.0,<0.2", "numba-cuda[cu13]>=0.23,<1"]
    assert 'jit = ["cccl-aot-cu13[jit-nvrtc]", "numba-cuda[cu13]"]' in missing_jit_extra(jit_requirements(info))
    nvrtc_only = {**info, "requires": info["requires"][:2]}
    assert jit_requirements(nvrtc_only) == ["cccl-aot-cu13[jit-nvrtc]>=0.1.0,<0.2"]
    hatch = (ROOT / "aot" / "package" / "hatch.py").read_text()  # both backends: extras.wheel_requirements
    shared = (ROOT / "aot" / "package" / "extras.py").read_text()
    assert "wheel_requirements(res, deps" in hatch and "jit-nvrtc" not in hatch
    assert "jit_requirements(res.info)" in shared and "jit-nvrtc" not in shared


def test_validate_names_the_kernel_field_and_shows_numba_kernels(numba_lib, tmp_path):
    matrix = numba_lib / "bad_matrix.yaml"
    matrix.write_text('version: 1\nnumba:\n  - {name: double, kernel: "nblib.kernels:double", '
                      'signatures: ["void(float32[::1])"]}\n'
                      '  - {name: gone, kernel: "nblib.nosuch:k", signatures: ["void(float32[::1])"]}\n')
    try:
        r = subprocess.run([sys.executable, "-m", "aot", "validate", "--matrix", str(matrix)], cwd=tmp_path,
                           env=repo_env(), capture_output=True, text=True, timeout=300)
    finally:
        matrix.unlink()
    assert r.returncode == 2, r.stdout + r.stderr
    assert "numba  double" in r.stdout and "nblib.kernels:double void(float32[::1])" in r.stdout, r.stdout
    failed = [ln for ln in r.stdout.splitlines() if ln.startswith("FAILED")]
    assert failed and "spec 'gone': field 'kernel': no module named 'nblib.nosuch'" in failed[0], r.stdout


def test_a_cccl_build_leaves_no_cupy_cache_and_says_1_job(tmp_path):
    """cuda.compute imports CuPy (through numba-cuda-mlir) where it is installed, and CuPy's import made an empty
    ~/.cupy/kernel_cache; the build's workers now get a CUPY_CACHE_DIR of their own, removed after."""
    pytest.importorskip("cupy")
    (tmp_path / "home").mkdir()
    (tmp_path / "m.yaml").write_text("version: 1\ncccl:\n  - {name: sum_i64, algorithm: reduce, dtype: int64, op: plus, "
                                     "init: 0}\n")
    env = {k: v for k, v in repo_env(HOME=str(tmp_path / "home")).items() if k not in ("CUPY_CACHE_DIR", "COLUMNS")}
    r = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", "m.yaml", "--sm", SM, "--jobs", "1", "--out",
                        "out"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (tmp_path / "out" / "manifest.json").is_file()
    assert not (tmp_path / "home" / ".cupy").exists(), sorted(p.name for p in (tmp_path / "home").iterdir())
    assert "; 1 job; " in r.stdout + r.stderr and "1 jobs" not in r.stdout + r.stderr, r.stderr[-2000:]


# ------------------------------------------------------------------------------------------------ docs
MEASURE = re.compile(r"\d(?:[\d.,–-]*\d)?\s?(?:ms|s|min|minutes|MiB|MB|GB|KB|×)(?!\w)")
COMMAND = re.compile(r"`(?:[A-Z_]+=\S+ )*(?:bash|python|pytest)\b[^`]*`")


def _units(text: str):
    """Table rows, and the sentences of every other paragraph (code blocks left out)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for para in re.split(r"\n\s*\n", text):
        if para.lstrip().startswith("|"):
            yield from (ln for ln in para.splitlines() if ln.startswith("|"))
        else:
            yield from re.split(r"(?<=[.])\s+(?=[A-Z0-9`(\[*])", " ".join(para.split()))


def unsourced(unit: str) -> list[str]:
    """The measurements of ``unit`` with no command beside them: in a table row, a command anywhere in the row;
    in a sentence, a command after the number and before the next one, or in the parenthesis that holds it."""
    cmds = [m.start() for m in COMMAND.finditer(unit)]
    nums = list(MEASURE.finditer(unit))
    if unit.startswith("|"):
        return [] if cmds else [m.group() for m in nums]
    bad = []
    for i, m in enumerate(nums):
        nxt = nums[i + 1].start() if i + 1 < len(nums) else len(unit)
        if any(m.end() <= c < nxt for c in cmds):
            continue
        o, c = unit.rfind("(", 0, m.start()), unit.find(")", m.end())
        if o >= 0 and c >= 0 and ")" not in unit[o:m.start()] and any(o < x < c for x in cmds):
            continue
        bad.append(m.group())
    return bad


def test_every_number_on_the_front_pages_has_its_command_beside_it():
    assert unsourced("an NVRTC unit 50–400 ms, a numba kernel 1–10 s (`bash .ci/gpu/numba.sh`)") == ["50–400 ms"]
    for page in (ROOT / "README.md", DOCS / "index.md"):
        bad = [(u[:120], b) for u in _units(page.read_text()) for b in [unsourced(u)] if b]
        assert not bad, (page.name, bad)


def test_the_front_page_names_every_family_and_links_the_adoption_pages():
    index = (DOCS / "index.md").read_text()
    assert index.splitlines()[0] == "# aot — ahead-of-time CCCL, NVRTC, numba-cuda, CuPy and Triton kernels for GPU Python libraries"
    for page in ("record.md", "adopt.md", "numba.md", "cupy.md", "triton.md", "dependencies.md", "downstream.md"):
        assert f"]({page})" in index, page
    import yaml
    doc = yaml.safe_load((ROOT / "mkdocs.yml").read_text())

    def entries(nav):
        for e in nav:
            if isinstance(e, dict):
                for title, sub in e.items():
                    yield from entries(sub) if isinstance(sub, list) else [(title, sub)]
            else:
                yield None, e
    titled = list(entries(doc["nav"]))
    assert all(t for t, _ in titled), [p for t, p in titled if not t]  # no page titled by its H1
    assert not [t for t, _ in titled if "issue" in t.lower() or "floor" in t.lower()], titled
    assert "numba-cuda, CuPy and Triton" in doc["site_description"]


def test_the_readme_says_cupy_kernels_are_recorded_on_a_gpu_only():
    readme = " ".join((ROOT / "README.md").read_text().split())
    adoption = readme.split("## Adopting aot in an existing library", 1)[1].split("## ", 1)[0]
    assert "CuPy compiles only on a GPU" in adoption and "without a GPU cannot ship them" in adoption
    assert "docs/adopt.md#while-the-library-has-no-artifacts-yet" in adoption
