"""Downstream wheels built the way packagers build them (issue 22): with build isolation, from
``[build-system] requires`` alone, by ``pip wheel .``, ``python -m build`` and the manual's own commands
(docs/downstream.md), and the copyable CI workflow (examples/workflows/wheels.yml) run line by line.

Everything runs in environments that hold nothing of this checkout or of the test environment: a bare
venv with pip (as a user's), whose pip builds in its own isolated environment, from a wheelhouse a fresh clone
made with the downstream page's first block (the session's ``isolated`` fixture: tests/isolated_env.py).

Each isolated build installs the whole CUDA 13 build stack into its own environment (about 50 s on 2 cores). The
default run builds the examples a test here needs anyway (numba-mypkg: ``pip wheel``; the page's projects; the
workflow's hatch-mypkg, with ``python -m build``); ``pip wheel`` of every other example, and ``python -m build``
and ``pip install .`` of the two backends' examples, are the ``slow`` job's (.ci/slow).

The builds run two at a time beside the rest of the suite (tests/isolated_env.py, ``Isolated.job``), started as
the session starts (:func:`start_isolated_builds` says which a test needs): the example wheels, the page's projects
(one chain of blocks per project, in the page's order) and the workflow; each test waits for its own.

The fast tests at the end check the pieces on their own: the tag rule, the pathfinder fix, the page's
blocks and the workflow's shape.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from concurrent.futures import Future
from pathlib import Path

import pytest

from conftest import ROOT
from isolated_env import (EXAMPLE_DIRS, EXAMPLES, SM, Isolated, blocks, check_wheel, example_wheel, make_venv, page,
                          project, setup_block, start_example_wheel)

#: The example built by `pip wheel .` in isolation in the default run (its attach test below needs the wheel anyway);
#: every other example's isolated `pip wheel` is the slow job's (the same build, one example after another).
DEFAULT_WHEELS = ("numba-mypkg",)
#: These are also built by `python -m build` (the two backends; more would only cost CI time), in the slow job: the
#: default run has each piece elsewhere, once. `python -m build --wheel` in isolation of hatch-mypkg is a step of the
#: copyable workflow (test_the_copyable_workflow_runs_line_by_line); each backend compiles in isolation in the page's
#: projects (hatchling's `pip install .`, scikit-build-core's `pip wheel .`, whose wheel gets check_wheel); auditwheel
#: refuses both wheels there, and cibuildwheel reads each example's setting without a build
#: (test_the_examples_switch_cibuildwheels_repair_off).
BUILD_TOO = ("hatch-mypkg", "skbuild-mypkg")
WORKFLOW = EXAMPLES / "workflows" / "wheels.yml"


# ------------------------------------------------------------------------------------------------ real builds
def start_isolated_builds(iso: Isolated, item: pytest.Item) -> None:
    """Start the isolated builds ``item`` (a selected test of this module) asserts on: called as the session starts
    (tests/isolated_env.py ``isolated_started``), so they run beside the tests before these."""
    name = getattr(item, "originalname", "")
    if name == "test_pip_wheel_with_build_isolation":
        start_example_wheel(iso, item.callspec.params["example"])
    elif name == "test_the_numba_example_wheel_installs_and_attaches_its_kernels_without_a_gpu":
        start_example_wheel(iso, "numba-mypkg")
    elif name == "test_every_command_of_the_downstream_page_runs_as_written":
        _start_page(iso)
    elif name == "test_the_copyable_workflow_runs_line_by_line":
        _start_workflow(iso)


@pytest.mark.parametrize("example", [e if e in DEFAULT_WHEELS else pytest.param(e, marks=pytest.mark.slow)
                                     for e in EXAMPLE_DIRS])
def test_pip_wheel_with_build_isolation(isolated, example):
    """`pip wheel .` from a bare environment: pip installs [build-system] requires (aot and the CUDA toolkit)
    into its isolated environment, where aot must find NVRTC (aot.build.isolated)."""
    check_wheel(example_wheel(isolated, example))


def test_the_numba_example_wheel_installs_and_attaches_its_kernels_without_a_gpu(isolated):
    """examples/numba-mypkg as its users get it: the wheel pip builds in isolation carries a cubin per SM and PTX
    of its @cuda.jit kernels and its checks; installed, importing it attaches them to the dispatchers (no GPU
    needed for that), and the loader's checks pass for every SM it covers."""
    whl = example_wheel(isolated, "numba-mypkg")
    info = check_wheel(whl)
    assert set(info["checks"]) == {"axpy.0", "axpy.1", "scale_inplace", "smooth", "block_sum"}, info
    site = isolated.work / "numba-site"
    r = isolated.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site, whl], cwd=isolated.work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # the attach waits for numba-cuda's first compile (issue 42): pending after the import, done by attach_pending
    probe = ("import numba_mypkg; from numba_mypkg import kernels as k; from aot.runtime.adapters.numba_attach import serve; "
             "from aot.runtime.adapters.numba_lazy import attach_pending, pending; waiting = pending() > 0; "
             "attach_pending(); reg = numba_mypkg.registry; "
             "print(waiting, type(k.axpy._cache).__name__, serve(reg, reg.spec('block_sum'), 80)[0], "
             "serve(reg, reg.spec('block_sum'), 90)[0])")
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}
    r = subprocess.run([sys.executable, "-c", probe], cwd=isolated.work, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.split() == ["True", "_PackagedCache", "cubin", "ptx"], r.stdout + r.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("example", [e for e in BUILD_TOO if e in EXAMPLE_DIRS])
def test_python_m_build_with_build_isolation_and_the_cibuildwheel_setting(isolated, example):
    """`python -m build --wheel` (its isolated venv). (`pip install .` of the same project, a second isolated
    build, is the slow job's too: the default run has the page's `pip install .`.)"""
    proj = project(isolated, example)
    r = isolated.run([isolated.python, "-m", "build", "--wheel", "--outdir", "build-dist", "."], cwd=proj)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    (whl,) = (proj / "build-dist").glob("*.whl")
    check_wheel(whl)
    _check_auditwheel_refuses(isolated, proj, whl)
    _check_cibuildwheel_setting(isolated, proj)


@pytest.mark.parametrize("example", [e for e in BUILD_TOO if e in EXAMPLE_DIRS])
def test_the_examples_switch_cibuildwheels_repair_off(isolated, example):
    """Each backend's example as cibuildwheel reads it (no build: the wheels auditwheel refuses are the workflow's
    and the page's)."""
    _check_cibuildwheel_setting(isolated, project(isolated, example))


def _check_auditwheel_refuses(isolated, cwd: Path, whl: Path) -> None:
    """auditwheel, cibuildwheel's default Linux repair, refuses the wheel (no ELF file: nothing to repair, the tag
    is already right), so the examples switch it off (:func:`_check_cibuildwheel_setting`)."""
    a = isolated.run([isolated.bare / "bin" / "auditwheel", "repair", "-w", "repaired", whl], cwd=cwd)
    assert a.returncode != 0 and "does not look like a platform wheel" in a.stdout + a.stderr, a.stdout + a.stderr


def _check_cibuildwheel_setting(isolated, proj: Path) -> None:
    """The project switches auditwheel off with `[tool.cibuildwheel.linux] repair-wheel-command = ""`, which
    cibuildwheel itself reads."""
    cib = tomllib.loads((proj / "pyproject.toml").read_text())["tool"]["cibuildwheel"]
    assert cib["linux"]["repair-wheel-command"] == "" and cib["build"] == "cp312-manylinux_x86_64"
    c = isolated.run([isolated.bare / "bin" / "cibuildwheel", "--print-build-identifiers", "--platform", "linux"],
                     cwd=proj, timeout=120)
    assert c.returncode == 0 and c.stdout.split() == ["cp312-manylinux_x86_64"], c.stdout + c.stderr


@pytest.mark.slow
@pytest.mark.parametrize("example", [e for e in BUILD_TOO if e in EXAMPLE_DIRS])
def test_pip_install_dot_with_build_isolation(isolated, example):
    """`pip install .`, the manual's command, builds the same way (into a target folder: the bare venv stays bare).
    The default run has it once, on the page's hatchling project (the test below); here on both backends'."""
    proj = project(isolated, example)
    target = proj / "installed"
    i = isolated.run([isolated.python, "-m", "pip", "install", "--no-deps", "--target", target, "."], cwd=proj)
    assert i.returncode == 0, i.stdout[-4000:] + i.stderr[-4000:]
    pkg = tomllib.loads((proj / "pyproject.toml").read_text())["tool"]["aot"]["package"]
    assert (target / pkg / "artifacts" / "manifest.json").is_file(), sorted(p.name for p in target.iterdir())


def _page_projects(base: Path, make: bool = True) -> dict[str, Path]:
    """The three projects the page describes, made from its own blocks (pyproject.toml, mypkg/__init__.py,
    build_matrix.yaml, CMakeLists.txt); ``make=False``: their paths only."""
    section = page()
    tomls = blocks(section, "toml")
    hatch_toml = next(t for t in tomls if 'build-backend = "hatchling.build"' in t)
    skb_toml = next(t for t in tomls if 'build-backend = "scikit_build_core.build"' in t)
    st_toml = next(t for t in tomls if 'build-backend = "aot.package.setuptools_backend"' in t)
    (init,) = [b for b in blocks(section, "python") if b.startswith("# mypkg/__init__.py")]
    (cmake,) = blocks(section, "cmake")
    (matrix,) = [b for b in blocks(section, "yaml") if b.startswith("# build_matrix.yaml")]
    out = {}
    for name, toml, extra in (("hatch", hatch_toml, {}), ("skbuild", skb_toml, {"CMakeLists.txt": cmake}),
                              ("setuptools", st_toml, {})):
        p = out[name] = base / f"readme-{name}"
        if not make:
            continue
        (p / "mypkg").mkdir(parents=True)
        (p / "pyproject.toml").write_text(toml)
        (p / "mypkg" / "__init__.py").write_text(init)
        (p / "build_matrix.yaml").write_text(matrix)
        for fname, text in extra.items():
            (p / fname).write_text(text)
    return out


def _page_blocks(projects: dict[str, Path]) -> list[tuple[Path, str]]:
    """The page's ```bash blocks after the first, in order, each with the project its heading names (the
    hatchling one unless the block follows the scikit-build-core or setuptools text)."""
    section = page()
    out = []
    for m in list(re.finditer(r"```bash\n(.*?)```", section, re.S))[1:]:
        before = section[:m.start()]
        marks = {name: before.rfind(f"**{name}**") for name in ("hatchling", "scikit-build-core", "setuptools",
                                                               "Any other backend")}
        nearest = max(marks, key=marks.__getitem__)
        out.append((projects[{"hatchling": "hatch", "setuptools": "setuptools"}.get(nearest, "skbuild")], m.group(1)))
    return out


def _start_page(iso: Isolated) -> list[Future]:
    """The page's blocks, one chain per project (a project's blocks in the page's order, stopping at the first
    that fails: the next may need what it made), the chains in the lanes; each chain gives (page index, result)."""
    base = iso.work / "page"
    projects = _page_projects(base, make=not base.exists())  # made once: a second call gets the started chains
    exports = "\n".join(ln for ln in setup_block().splitlines() if ln.startswith("export "))
    env = {k: v for k, v in iso.env.items() if k != "PIP_FIND_LINKS"}
    chains: dict[Path, list[tuple[int, str]]] = {}
    for i, (proj, script) in enumerate(_page_blocks(projects)):
        chains.setdefault(proj, []).append((i, script))

    def chain(proj: Path, scripts: list[tuple[int, str]]) -> list[tuple[int, subprocess.CompletedProcess]]:
        done = []
        for i, script in scripts:
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", f"{exports}\n{script}"], cwd=proj, env=env,
                               capture_output=True, text=True, timeout=1200)
            done.append((i, r))
            if r.returncode != 0:
                break
        return done
    return [iso.job(f"page {proj.name}", lambda p=proj, s=s: chain(p, s)) for proj, s in
            sorted(chains.items(), key=lambda kv: -len(kv[1]))]  # the longest chain first


def test_every_command_of_the_downstream_page_runs_as_written(isolated):
    """docs/downstream.md from a fresh clone: its first block made the wheelhouse (the `isolated` fixture);
    each later ```bash block runs line by line, exactly as written, in the project its heading names (the
    hatchling one unless the block follows the scikit-build-core or setuptools text), after the first block's `export` lines
    (a shell keeps them) and with nothing else telling pip where cccl-aot-cu13 is. A project's blocks run in the
    page's order; the three projects' side by side (:func:`_start_page`)."""
    results = dict(r for chain in _start_page(isolated) for r in chain.result())
    projects = _page_projects(isolated.work / "page", make=False)
    ran = []
    for i, (proj, script) in enumerate(_page_blocks(projects)):
        assert i in results, f"in {proj.name}:\n{script}\nnot run: an earlier block of its project failed"
        r = results[i]
        assert r.returncode == 0, f"in {proj.name}:\n{script}\n" + r.stdout[-4000:] + r.stderr[-4000:]
        ran.append((proj.name, script, r.stdout + r.stderr))
    assert len(ran) >= 3, ran
    out = "\n".join(o for _, _, o in ran)
    assert "integrity OK" in out and "package mypkg: reading" in out and "shadows the installed mypkg" in out
    assert "coverage: 1 specs x SMs 80" in out and "family  spec" in out  # inspect's plain table (no rich)
    (whl,) = (projects["skbuild"] / "dist").glob("*.whl")
    check_wheel(whl)
    _check_auditwheel_refuses(isolated, projects["skbuild"], whl)  # scikit-build-core's wheel
    assert sum("family  spec" in o for _, _, o in ran) >= 3  # inspect: skbuild's wheel, hatchling's and setuptools' installs
    bundled = projects["skbuild"] / "mypkg" / "artifacts"
    from aot.core.hitindex import derive  # the first-hit index: where the set has an NVRTC unit it can index
    doc = json.loads((bundled / "manifest.json").read_bytes())
    index = ["hit-index.json"] if derive(doc, b"") is not None else []
    assert sorted(p.name for p in bundled.iterdir() if p.is_file()) == ["aot-package.json", *index, "manifest.json"]


def _workflow_steps(wf: dict) -> list[tuple[dict, dict]]:
    """Both jobs' steps in order, each with its `${{ }}` context: the build job once per shard, then the wheel job."""
    steps = [(s, {"matrix.shard": str(k)}) for k in wf["jobs"]["build"]["strategy"]["matrix"]["shard"]
             for s in wf["jobs"]["build"]["steps"]]
    return steps + [(s, {}) for s in wf["jobs"]["wheel"]["steps"]]


def _start_workflow(iso: Isolated) -> Future:
    """The workflow's `run:` lines in order on a copy of the hatch example, in a lane, stopping at the first that
    fails; gives (the project, [(command, result)])."""
    def run() -> tuple[Path, list[tuple[str, subprocess.CompletedProcess]]]:
        import yaml
        wf = yaml.safe_load(WORKFLOW.read_text())
        project = iso.work / "workflow" / "hatch-mypkg"
        shutil.copytree(EXAMPLES / "hatch-mypkg", project, ignore=shutil.ignore_patterns("build", "artifacts", "dist"))
        runner = iso.work / "workflow" / "venv"
        make_venv(runner, iso.env)
        env = {**iso.env, **{k: str(v) for k, v in wf["env"].items()}, "AOT_SM": SM,
               "RUNNER_TEMP": str(iso.work / "workflow"), "VIRTUAL_ENV": str(runner),
               "PATH": f"{runner / 'bin'}{os.pathsep}{iso.env['PATH']}"}
        env.pop("AOT_WHEEL_SM")  # the workflow's SM list decides
        ran = []
        for step, ctx in _workflow_steps(wf):
            if "run" not in step:
                continue
            cmd = re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", lambda m, ctx=ctx: ctx[m.group(1)], step["run"])
            r = subprocess.run(["bash", "-eo", "pipefail", "-c", cmd], cwd=project, capture_output=True, text=True,
                               env={**env, **{k: str(v) for k, v in step.get("env", {}).items()}}, timeout=1200)
            ran.append((cmd, r))
            if r.returncode != 0:
                break
        return project, ran
    return iso.job("workflow", run)


def test_the_copyable_workflow_runs_line_by_line(isolated):
    """examples/workflows/wheels.yml on the hatch example: every `run:` of both jobs, in order, with the
    workflow's own env (one SM and the shard list kept as written), in a fresh venv like a runner's Python."""
    import yaml
    wf = yaml.safe_load(WORKFLOW.read_text())
    shards = wf["jobs"]["build"]["strategy"]["matrix"]["shard"]
    assert [str(s) for s in shards] == [str(k) for k in range(1, int(wf["env"]["SHARDS"]) + 1)]
    assert wf["jobs"]["wheel"]["needs"] == "build"
    project, results = _start_workflow(isolated).result()
    ran = 0
    for cmd, r in results:
        assert r.returncode == 0, f"{cmd}\n" + r.stdout[-4000:] + r.stderr[-4000:]
        ran += 1
    assert ran == 2 * 2 + 6
    (whl,) = (project / "dist").glob("*.whl")
    info = check_wheel(whl)
    assert sorted(info["specs"]) == ["axpy", "multiples_of_7_i64", "product_i32", "running_max_i64"]
    _check_auditwheel_refuses(isolated, project, whl)  # hatch-mypkg's `python -m build` wheel
    _check_cibuildwheel_setting(isolated, project)


# ------------------------------------------------------------------------------------------- fast parts
def test_wheel_tag_follows_cuda_cccl_and_the_index_rule():
    from aot.package.tags import deciding_platforms, publishable, wheel_tag
    assert deciding_platforms() == ["manylinux_2_26_x86_64"]  # cuda-cccl 1.2.1's own wheel
    assert wheel_tag() == "py3-none-manylinux_2_26_x86_64"
    assert deciding_platforms("no-such-dist") == ["linux_x86_64"]  # no wheel to follow: the host's (warned)
    for ok in ("manylinux_2_26_x86_64", "manylinux_2_28_aarch64", "manylinux2014_x86_64", "musllinux_1_2_x86_64",
               "any"):
        assert publishable(ok), ok
    for bad in ("linux_x86_64", "manylinux_2_28", "manylinux_x_y_x86_64", "linux_aarch64"):
        assert not publishable(bad), bad


def test_skbuild_example_forces_the_same_tag_and_hatch_hook_uses_the_rule():
    from aot.package.tags import wheel_tag
    doc = tomllib.loads((EXAMPLES / "skbuild-mypkg" / "pyproject.toml").read_text())
    (override,) = doc["tool"]["scikit-build"]["overrides"]
    assert override["wheel"]["tags"] == [wheel_tag()] and override["if"]["platform-machine"] == "x86_64"
    readme = page()
    assert f'wheel.tags = ["{wheel_tag()}"]' in readme and 'wheel.py-api = "py3"' in readme
    assert 'build-backend = "scikit_build_core.build"' in readme
    assert "aot.package.tags" in (ROOT / "aot" / "package" / "hatch.py").read_text()


def test_pathfinder_sees_a_toolkit_that_only_sys_path_holds(tmp_path):
    """pip's isolated environment in miniature: a prefix whose site-packages holds an `nvidia-*` distribution
    is on sys.path but not in site.getsitepackages(); the fix puts that prefix first, and does nothing in an
    ordinary environment (the test's own, where the toolkit is in site-packages)."""
    from conftest import repo_env
    site_dir = tmp_path / "overlay" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    info = site_dir / "nvidia_cuda_nvrtc-13.0.88.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-cuda-nvrtc\nVersion: 13.0.88\n")
    code = ("import json, site, sys\nsys.path.append(sys.argv[1])\nfrom aot.build.isolated import "
            "expose_build_env_toolkit as f\nbefore = site.getsitepackages()\na = f()\nb = f()\n"
            "print(json.dumps([before, a, b, site.getsitepackages()]))")
    r = subprocess.run([sys.executable, "-c", code, str(site_dir)], capture_output=True, text=True,
                       env=repo_env(), timeout=60)
    assert r.returncode == 0, r.stderr
    before, added, again, after = json.loads(r.stdout)
    assert added == [str(tmp_path / "overlay")] and again == [], (added, again)
    assert after[0] == str(site_dir) and after[1:] == before
    r = subprocess.run([sys.executable, "-c", "from aot.build.isolated import expose_build_env_toolkit as f; "
                        "print(f())"], capture_output=True, text=True, env=repo_env(), timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_workflow_shape():
    """The copyable workflow: shards of one split, a merge job that needs them, every run line uses aot's
    CLI or pip/build as the manual does, and it uploads the wheel."""
    import yaml
    wf = yaml.safe_load(WORKFLOW.read_text())
    build, wheel = wf["jobs"]["build"], wf["jobs"]["wheel"]
    assert "--shard" in " ".join(s.get("run", "") for s in build["steps"])
    runs = [s.get("run", "") for s in wheel["steps"]]
    assert any("aot merge" in r for r in runs) and any("verify merged --for-wheel" in r for r in runs)
    assert any("AOT_WHEEL_ARTIFACTS=merged" in r and "python -m build" in r for r in runs)
    uploads = [s for s in wheel["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads and uploads[0]["with"]["path"] == "dist/*.whl"
