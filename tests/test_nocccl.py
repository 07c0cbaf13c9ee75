"""No cuda-cccl where none is needed (issue 28, item 2): aot's own distribution does not require cuda-cccl; the
NVRTC path (build, bundle, load, lookup, JIT) never imports cuda.compute; a package of NVRTC units only
requires no cuda-cccl and installs beside another one; a set with a CCCL artifact keeps the exact pin.

The proof runs in a real fresh venv holding aot's cu13 wheel (built from this checkout) and its runtime
dependencies from the package index, and no cuda-cccl; examples/pystr-mypkg (NVRTC units only) is the
downstream package.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, repo_env
from aot.build.isolated import expose_build_env_toolkit

# In-process builds find NVRTC even where the dependencies sit in a site dir a .pth file added (a no-op in a
# plain environment; `aot bundle` does the same first thing).
expose_build_env_toolkit()

PYSTR = ROOT / "examples" / "pystr-mypkg"
#: cuda-cccl versions aot's artifacts never came from: an older series a library may pin (cuda-cccl>=0.6,<0.7).
OLD_CCCL = "cuda-cccl==0.6.0"
NOT_CCCL = "raise ImportError('cuda.compute imported on the NVRTC path')\n"


def _requires(meta: str) -> list[str]:
    return [ln.split(":", 1)[1].strip() for ln in meta.splitlines() if ln.startswith("Requires-Dist:")]


def _project(where: Path) -> Path:
    proj = where / "pystr-mypkg"
    shutil.copytree(PYSTR, proj, ignore=shutil.ignore_patterns("build", "artifacts", "__pycache__"))
    return proj


# ------------------------------------------------------------------------------------------- the rules
def test_own_distribution_and_variants_require_no_cuda_cccl(tmp_path):
    """pyproject's base dependencies hold no cuda-cccl; [cu13] (the README's first command) and [jit] keep the
    toolkit with it; [jit-nvrtc] is NVRTC alone; both variants keep all of that for their major."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("cuda-cccl")], project["dependencies"]
    extras = project["optional-dependencies"]
    assert "cuda-cccl[cu13]==1.2.1" in extras["cu13"] and "cuda-cccl[cu12]==1.2.1" in extras["cu12"]
    assert "cuda-cccl[cu13]==1.2.1" in extras["jit"] and extras["cccl"] == ["cuda-cccl==1.2.1"]
    assert extras["jit-nvrtc"] == ["cuda-toolkit[nvrtc,nvjitlink]==13.0.2"]
    for variant, toolkit in (("cu12", "12.9.1"), ("cu13", "13.0.2")):
        target = tmp_path / variant / "pyproject.toml"
        target.parent.mkdir()
        shutil.copy(ROOT / "pyproject.toml", target)
        r = subprocess.run([sys.executable, str(ROOT / ".ci" / "variant.py"), variant, str(target)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        p = tomllib.loads(target.read_text())["project"]
        assert not [d for d in p["dependencies"] if d.startswith("cuda-cccl")], p["dependencies"]
        assert p["optional-dependencies"]["jit-nvrtc"] == [f"cuda-toolkit[nvrtc,nvjitlink]=={toolkit}"]
        assert f"cuda-cccl[{variant}]==1.2.1" in p["optional-dependencies"]["jit"]


def test_pins_follow_the_families_bundled():
    from aot.package.bundle import has_cccl, jit_requirement, pin_problems, required_pins
    prod = {"aot": "0.1.0", "cuda_cccl": "1.2.1", "cuda_major": "13"}
    assert required_pins(prod, cccl=False) == ["cccl-aot-cu13>=0.1.0,<0.2", "cuda-bindings>=13,<14"]
    assert required_pins(prod) == ["cccl-aot-cu13>=0.1.0,<0.2", "cuda-cccl==1.2.1", "cuda-bindings>=13,<14"]
    assert jit_requirement(prod, cccl=False) == "cccl-aot-cu13[jit-nvrtc]>=0.1.0,<0.2"
    assert jit_requirement(prod) == "cccl-aot-cu13[jit]>=0.1.0,<0.2"
    # A library's own cuda-cccl pin: its business for NVRTC units, a conflict for CCCL blobs (the pin check).
    theirs = ["cccl-aot-cu13", "cuda-cccl>=0.6,<0.7"]
    assert pin_problems(theirs, prod, cccl=False) == []
    assert pin_problems(["cccl-aot-cu13"], prod, cccl=False) == []
    assert "exactly that version" in pin_problems(theirs, prod)[0]
    assert "no cuda-cccl pin" in pin_problems(["cccl-aot-cu13"], prod)[0]
    # Even a set built where cuda-cccl was missing asks for none.
    assert required_pins({**prod, "cuda_cccl": "missing"}, cccl=False)[1] == "cuda-bindings>=13,<14"
    assert has_cccl([{"family": "nvrtc"}, {"family": "cccl"}]) and not has_cccl([{"family": "nvrtc"}])


def test_mixed_and_nvrtc_only_bundles(small_build, tmp_path):
    """`aot bundle` of a set with CCCL artifacts pins cuda-cccl exactly, and its pin check refuses a project's
    other cuda-cccl; the same set's NVRTC units alone pin none and pass that project."""
    from aot.package.bundle import PinError, bundle
    from aot.package.config import load_config
    from aot.core.manifest import load_manifest

    import yaml
    default = yaml.safe_load((ROOT / "build_matrix.yaml").read_text())

    def project(name: str, specs: list[str], deps: str) -> Path:
        p = tmp_path / name
        (p / "mypkg").mkdir(parents=True)
        doc = {"version": 1, **{fam: [e for e in default.get(fam, []) if e["name"] in specs]
                                for fam in ("cccl", "nvrtc")}}
        (p / "build_matrix.yaml").write_text(yaml.safe_dump({k: v for k, v in doc.items() if v}))
        sms = ",".join(map(str, small_build.sms))
        (p / "pyproject.toml").write_text(f'[project]\nname = "mypkg"\nversion = "1"\ndependencies = [{deps}]\n\n'
                                          f'[tool.aot]\npackage = "mypkg"\nsm = "{sms}"\n')
        return p

    cccl = [s.name for s in small_build.specs if s.family == "cccl"]
    nvrtc = [s.name for s in small_build.specs if s.family == "nvrtc"]
    mixed = bundle(load_config(project("mixed", cccl + nvrtc, '"cccl-aot-cu13", "cuda-cccl==1.2.1"')),
                   prebuilt=small_build.out)
    assert mixed.cccl and "cuda-cccl==1.2.1" in mixed.pins and mixed.info["jit"].startswith("cccl-aot-cu13[jit]")
    theirs = '"cccl-aot-cu13", "cuda-cccl>=0.6,<0.7"'
    with pytest.raises(PinError, match="exactly that version"):
        bundle(load_config(project("mixed-theirs", cccl + nvrtc, theirs)), prebuilt=small_build.out)
    only = bundle(load_config(project("nvrtc-theirs", nvrtc, theirs)), prebuilt=small_build.out)
    assert not only.cccl and only.pins == ("cccl-aot-cu13>=0.1.0,<0.2", "cuda-bindings>=13,<14")
    assert only.info["jit"] == "cccl-aot-cu13[jit-nvrtc]>=0.1.0,<0.2"
    assert {a["family"] for a in load_manifest(only.out).artifacts} == {"nvrtc"}


def test_nvrtc_path_never_imports_cuda_compute(tmp_path):
    """With a cuda.compute that raises on import first on the path (workers inherit it): `aot bundle` of an
    NVRTC-only package (build + verify for the wheel), `inspect`, `verify`, and in one process `import aot`, a
    Registry over the bundle, a packaged artifact's check and the NVRTC JIT with its cache: all succeed, and
    cuda.compute is never in sys.modules."""
    poison = tmp_path / "poison" / "cuda" / "compute"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text(NOT_CCCL)
    proj = _project(tmp_path)
    env = repo_env(AOT_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = f"{tmp_path / 'poison'}:{env['PYTHONPATH']}"

    def aot(*args: str) -> str:
        r = subprocess.run([sys.executable, "-m", "aot", *args], capture_output=True, text=True, env=env,
                           cwd=proj, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        return r.stdout

    out = aot("bundle", "--sm", "90", "--jobs", "1")
    assert "cuda-cccl==" not in out and "jit-nvrtc" in out, out
    art = proj / "pystr_mypkg" / "artifacts"
    assert "4 specs" in aot("inspect", str(art)) and "integrity OK" in aot("verify", str(art), "--for-wheel")
    code = f"""
import sys
import aot
assert "cuda.compute" not in sys.modules
from aot.build.isolated import expose_build_env_toolkit
expose_build_env_toolkit()  # this host's toolkit lives in a site dir added by a .pth file
from aot.runtime.loader import sources
from aot.runtime.jit.jit import nvrtc_compile_cached
reg = aot.Registry({str(art)!r})
unit = reg.spec("saxpy")
m = reg._catalog().manifest
entry = next(a for a in m.artifacts if a["name"] == "saxpy" and a["payload_kind"] == "cubin")
assert sources.check_packaged(m, unit, entry, m.path_of(entry)).kind == "cubin"
first = nvrtc_compile_cached(unit, 90)[1]
again = nvrtc_compile_cached(unit, 90)[1]
print(first, again, sorted(reg.names()), [k for k in sys.modules if k.startswith("cuda.compute")])
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split(" ", 2)[:2] == ["jit", "cache"], r.stdout
    assert r.stdout.strip().endswith("[]"), r.stdout


# ------------------------------------------------------------------------------ a venv with no cuda-cccl
@pytest.fixture(scope="module")
def lean(tmp_path_factory):
    """(python, wheel folder): a fresh venv with aot's cu13 wheel built from this checkout, its [build] extra
    and NVRTC/nvJitLink from the package index (pip's resolver: whatever aot requires comes too), and no
    cuda-cccl; hatchling to build the downstream wheel there."""
    base = tmp_path_factory.mktemp("nocccl")
    src = base / "src"
    src.mkdir()
    for name in ("aot", "cccl_patches", ".ci"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "artifacts"))
    for name in ("pyproject.toml", "CMakeLists.txt", "README.md", "build_matrix.yaml"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run([sys.executable, str(src / ".ci" / "variant.py"), "cu13", str(src / "pyproject.toml")],
                   check=True, capture_output=True)
    wheels = base / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w",
                        str(wheels), str(src)], capture_output=True, text=True, timeout=300, env=repo_env())
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = wheels.glob("cccl_aot_cu13-*.whl")
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    toolkit = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["jit-nvrtc"]
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{whl}[build]",
                        *toolkit, "hatchling==1.33.0"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    yield py, wheels
    shutil.rmtree(base, ignore_errors=True)


def _run(py: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in repo_env(**env).items() if k != "PYTHONPATH"}  # nothing of this checkout
    return subprocess.run([str(py), *args], capture_output=True, text=True, cwd=cwd, env=clean, timeout=300)


def test_lean_venv_builds_bundles_and_loads_nvrtc_without_cuda_cccl(lean, tmp_path):
    py, _ = lean
    r = _run(py, "-c", "import importlib.metadata as m, importlib.util as u, aot; print(aot.__file__); "
                       "print(u.find_spec('cuda.compute'), [d.metadata['Name'] for d in m.distributions() "
                       "if d.metadata['Name'].startswith('cuda-cccl')])", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.splitlines()[1] == "None []", r.stdout + r.stderr
    assert "site-packages" in r.stdout.splitlines()[0]  # the installed wheel, not this checkout
    proj = _project(tmp_path)
    cache = str(tmp_path / "cache")
    b = _run(py, "-m", "aot", "bundle", "--sm", "90", "--jobs", "1", cwd=proj, AOT_CACHE_DIR=cache)
    assert b.returncode == 0, b.stdout + b.stderr
    assert "cuda-cccl==" not in b.stdout and "cuda-bindings>=13,<14" in b.stdout, b.stdout
    art = proj / "pystr_mypkg" / "artifacts"
    v = _run(py, "-m", "aot", "verify", str(art), "--for-wheel", cwd=proj)
    assert v.returncode == 0 and "integrity OK" in v.stdout, v.stdout + v.stderr
    code = f"""
import sys, aot
from aot.runtime.jit.jit import nvrtc_compile_cached
reg = aot.Registry({str(art)!r})
print(sorted(reg.names()), nvrtc_compile_cached(reg.spec("block_sum"), 90)[1], "cuda.compute" in sys.modules)
"""
    j = _run(py, "-c", code, cwd=tmp_path, AOT_CACHE_DIR=cache)
    assert j.returncode == 0, j.stderr[-3000:]
    assert j.stdout.split() == ["['block_sum',", "'saxpy',", "'scale_shift_f32',", "'scale_shift_f64']", "jit",
                                "False"], j.stdout
    # A CCCL spec is one line naming what to install, not an ImportError.
    c = _run(py, "-m", "aot", "build", "--only", "reduce_sum_i32", "--sm", "90", "--out", str(tmp_path / "c"),
             cwd=tmp_path, AOT_CACHE_DIR=cache)
    assert c.returncode == 3 and "reduce_sum_i32: a cuda.compute (CCCL) spec needs cuda-cccl" in c.stderr, c.stderr
    assert "Traceback" not in c.stderr


def test_nvrtc_only_wheel_installs_beside_another_cuda_cccl(lean, tmp_path):
    """The downstream wheel, built in the venv without cuda-cccl by the hatch hook, requires none (METADATA),
    and pip's resolver installs it with aot's wheel beside cuda-cccl 0.6.0; `pip check` agrees."""
    py, wheels = lean
    proj = _project(tmp_path)
    w = _run(py, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", str(wheels), str(proj),
             cwd=tmp_path, AOT_WHEEL_SM="90", SOURCE_DATE_EPOCH="1700000000", AOT_CACHE_DIR=str(tmp_path / "c"))
    assert w.returncode == 0, w.stdout[-3000:] + w.stderr[-3000:]
    (whl,) = wheels.glob("pystr_mypkg-*.whl")
    assert whl.name.endswith("-py3-none-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl"), whl.name  # cuda-bindings'
    z = zipfile.ZipFile(whl)
    requires = _requires(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode())
    assert not [r for r in requires if r.replace("_", "-").lower().startswith("cuda-cccl")], requires
    assert "cccl-aot-cu13<0.2,>=0.1.0" in requires or "cccl-aot-cu13>=0.1.0,<0.2" in requires, requires
    info = json.loads(z.read("pystr_mypkg/artifacts/aot-package.json"))
    assert info["requires"] == ["cccl-aot-cu13>=0.1.0,<0.2", "cuda-bindings>=13,<14"]
    i = _run(py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--find-links", str(wheels),
             str(whl), OLD_CCCL, cwd=tmp_path)
    assert i.returncode == 0 and "conflict" not in (i.stdout + i.stderr).lower(), i.stdout + i.stderr
    c = _run(py, "-m", "pip", "check", cwd=tmp_path)
    assert c.returncode == 0, c.stdout + c.stderr
    v = _run(py, "-c", "import importlib.metadata as m, pystr_mypkg; print(m.version('cuda-cccl'), "
                       "pystr_mypkg.registry.names())", cwd=tmp_path)
    assert v.returncode == 0 and v.stdout.startswith("0.6.0 ") and "saxpy" in v.stdout, v.stdout + v.stderr


def test_nvrtc_item_keys_do_not_depend_on_cuda_cccl():
    """An NVRTC cubin never passes through cuda-cccl: building it beside cuda-cccl 1.2.1, another release or none
    gives one key (so a set built here serves a library pinned to another cuda-cccl); a CCCL spec's key does
    change with it."""
    from aot.build.matrix import load_matrix
    from aot.core.spec import item_key

    specs = load_matrix().select(("morton", "block_sums", "reduce_sum_i32"))
    unit = next(s for s in specs if s.name == "morton")  # includes nothing
    cub = next(s for s in specs if s.name == "block_sums")  # #include <cub/...>: cuda-cccl's headers
    cccl = next(s for s in specs if s.family == "cccl")
    base = {"aot": "0.1.0", "cuda_major": "13", "nvrtc": "13.0", "nvjitlink": "13.0", "cuda_core": "1.2.2"}
    keys = {item_key(unit, 90, "cubin", {**base, "cuda_cccl": v}) for v in ("1.2.1", "0.6.0", "missing")}
    assert len(keys) == 1
    assert len({item_key(cub, 90, "cubin", {**base, "cuda_cccl": v}) for v in ("1.2.1", "0.6.0")}) == 2
    ckeys = {item_key(cccl, 90, "cccl-blob", {**base, "cuda_cccl": v}) for v in ("1.2.1", "missing")}
    assert len(ckeys) == 2
