"""The isolated-build environment of the session (issue 22): a wheelhouse made as a newcomer makes it, and a bare
venv whose pip builds every downstream project in its own isolated environment.

``cccl-aot-cu13`` is not on the index yet, so the session starts as a newcomer does (issue 30): a fresh clone of
this repository runs docs/downstream.md's first block as written (``.ci/wheelhouse.sh`` into ``~/wheelhouse``,
``HOME`` a temporary folder). Every other requirement is then added to that wheelhouse (``pip download`` once per
session) and taken from it alone (``PIP_NO_INDEX`` + ``PIP_FIND_LINKS``): the CUDA toolkit wheels are fetched
once, not per build. One SM (AOT_WHEEL_SM=80) keeps the compiles short; a project shared by the frontends reuses
its build folder, and a wheel one test built is the next test's (:func:`example_wheel`).

The environment and the builds run in :data:`LANES` threads (:meth:`Isolated.job`), started as the session starts
(:func:`isolated_started`) when a selected test uses the environment: each build is mostly one process (pip
unpacking the CUDA stack into a fresh environment, one compiler), and the suite's own tests use less than one of
CI's 2 cores on average, so the builds run beside the tests alphabetically before tests/test_isolated.py, which then
wait for their own builds and assert what they did before. (One after another, the default run's isolated
builds took 140 + 50 + 20 s of its 800 on CI.) Everything in a lane names its folder and environment: a test
running meanwhile may change this process's (monkeypatch).

The fixture is registered once, by tests/conftest.py: a session fixture imported into two test modules is two
fixtures, and the wheelhouse was made twice (tests/test_isolated.py, tests/test_lib_example.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
import zipfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent  # conftest's (this module is imported by it)
DOCS = ROOT / "docs"
EXAMPLES = ROOT / "examples"
#: Every example package (other examples join by existing).
#: Examples whose build environment excludes the others' (so not in the shared wheelhouse nor CI's examples job):
#: legacy-mypkg builds under cuda-cccl 0.6 (a release without serialize), the others under aot's cu13 stack, whose
#: build extra pins cuda-cccl 1.2.1. Built by tests/test_cccl_legacy_wheel.py's slow test and .ci/envs.sh.
BUILT_ELSEWHERE = {"legacy-mypkg": "tests/test_cccl_legacy_wheel.py (slow) and .ci/envs.sh (cccl-0.6)"}
EXAMPLE_DIRS = sorted(p.parent.name for p in EXAMPLES.glob("*/pyproject.toml") if p.parent.name not in BUILT_ELSEWHERE)
#: The frontends and checkers the bare environment gets (pinned: reproducible; cibuildwheel only parses).
TOOLS = ("build==1.6.1", "auditwheel==6.8.2", "cibuildwheel==4.3.5")
SM = "80"
#: Builds at once, here and in tests/conftest.py side_by_side: CI's cores (the module docstring says why two fit).
LANES = 2


@dataclass(frozen=True)
class Isolated:
    wheelhouse: Path
    bare: Path          # a venv holding pip and TOOLS only: the outer environment of every build
    env: dict
    work: Path
    home: Path          # HOME of every command: the page's `~/wheelhouse` is `wheelhouse`
    lanes: ThreadPoolExecutor = field(repr=False, compare=False)
    jobs: dict = field(default_factory=dict, repr=False, compare=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def python(self) -> Path:
        return self.bare / "bin" / "python"

    def run(self, args, cwd: Path, timeout: int = 900, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(a) for a in args], cwd=cwd, env={**self.env, **extra}, capture_output=True,
                              text=True, timeout=timeout)

    def job(self, name: str, work: Callable[[], object]) -> Future:
        """``work`` (commands run in order, returning what they printed) in one of the :data:`LANES`, once per
        session: the first to ask starts it, a later ask (another test, the same build) gets the same future.
        The asserts stay with the tests, on what ``work`` returns; an exception in it is raised by ``result()``."""
        with self.lock:
            if name not in self.jobs:
                self.jobs[name] = self.lanes.submit(work)
            return self.jobs[name]


def build_requires() -> list[str]:
    reqs: list[str] = []
    for name in EXAMPLE_DIRS:
        doc = tomllib.loads((EXAMPLES / name / "pyproject.toml").read_text())
        reqs += [r for r in doc.get("build-system", {}).get("requires", []) if r not in reqs]
    return reqs


def page() -> str:
    return (DOCS / "downstream.md").read_text()


def blocks(section: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def setup_block() -> str:
    """The page's first command block: the aot wheels into ~/wheelhouse, and the export every build needs."""
    block = blocks(page(), "bash")[0]
    assert ".ci/wheelhouse.sh ~/wheelhouse" in block and "export PIP_FIND_LINKS=~/wheelhouse" in block, block
    return block


def fresh_clone(dst: Path, env: dict | None = None) -> Path:
    """This repository as a newcomer clones it. A developer's uncommitted changes to tracked files and new
    files git does not ignore are carried over, so the run tests what is about to be committed."""
    git = ["git", "-c", "safe.directory=*"]
    if not (ROOT / ".git").exists():  # an unpacked source tree: its files are what a clone would hold
        shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns(".venv*", ".nox", "build", "dist", "__pycache__", ".gpu",
                                                                 ".whl", "aot-out", "site"))
        return dst
    kw: dict = {"check": True, "capture_output": True, "timeout": 300, "cwd": ROOT, "env": env}
    subprocess.run([*git, "clone", "-q", "--no-hardlinks", str(ROOT), str(dst)], **kw)
    diff = subprocess.run([*git, "-C", str(ROOT), "diff", "HEAD", "--binary"], **kw).stdout
    if diff:
        subprocess.run([*git, "-C", str(dst), "apply", "--whitespace=nowarn"], input=diff, **kw)
    new = subprocess.run([*git, "-C", str(ROOT), "ls-files", "--others", "--exclude-standard", "-z"],
                         **kw).stdout.decode().split("\0")
    for rel in filter(None, new):
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dst / rel)
    return dst


def make_venv(path: Path, env: dict) -> None:
    """``python -m venv PATH`` with pip, from the test's interpreter (as ``venv.EnvBuilder(with_pip=True)`` makes
    it), with the environment and folder given: it may run beside a test that changes this process's."""
    r = subprocess.run([sys.executable, "-m", "venv", str(path)], cwd=path.parent, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def _make(tmp_path_factory, outer: dict, lanes: ThreadPoolExecutor) -> Isolated:
    """The environment, made in a lane while the first tests run. ``outer``: this process's environment when the
    session started (a test running meanwhile may change ``os.environ`` or the folder; nothing here reads them)."""
    work = tmp_path_factory.mktemp("isolated")
    home = work / "home"
    home.mkdir()
    env = {k: v for k, v in outer.items() if not k.startswith(("PYTHON", "AOT_", "PIP_", "VIRTUAL_ENV"))}
    # `python` on PATH is the test's interpreter (as in an activated venv): `python -m venv` gets a bare one.
    env.update(HOME=str(home), PIP_DISABLE_PIP_VERSION_CHECK="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    # The newcomer's first step, from the page, in a fresh clone: cccl-aot-cu12/cu13 into ~/wheelhouse.
    clone = fresh_clone(work / "clone", outer)
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", setup_block()], cwd=clone, env=env, capture_output=True,
                       text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheelhouse = home / "wheelhouse"
    assert sorted(p.name.split("-")[0] for p in wheelhouse.glob("*.whl")) == ["cccl_aot_cu12", "cccl_aot_cu13"]
    shutil.rmtree(clone)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", str(wheelhouse), "--find-links",
                        str(wheelhouse), "--only-binary", ":all:", *build_requires(), "hatchling",
                        "scikit-build-core", *TOOLS, "pip", "setuptools", "wheel"],
                       cwd=work, env=outer, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    env.update(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheelhouse), AOT_WHEEL_SM=SM, SOURCE_DATE_EPOCH="1700000000",
               AOT_CACHE_DIR=str(work / "cache"))
    bare = work / "bare"
    make_venv(bare, env)
    iso = Isolated(wheelhouse, bare, env, work, home, lanes)
    r = iso.run([iso.python, "-m", "pip", "install", "-q", "--upgrade", "pip", *TOOLS], cwd=work)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return iso


@pytest.fixture(scope="session", autouse=True)
def isolated_started(request, tmp_path_factory) -> Iterator[Future | None]:
    """When a selected test uses :func:`isolated`: the environment, and then every build a selected test asserts
    on, started in the lanes as the session starts, so they run beside the tests before theirs. A test module says
    which builds a test of it needs with ``start_isolated_builds(iso, item)`` (tests/test_isolated.py)."""
    items = [it for it in request.session.items if "isolated" in getattr(it, "fixturenames", ())]
    if not items:
        yield None
        return
    outer = dict(os.environ)
    lanes = ThreadPoolExecutor(LANES, thread_name_prefix="isolated")

    def setup() -> Isolated:
        iso = _make(tmp_path_factory, outer, lanes)
        for it in items:
            start = getattr(it.module, "start_isolated_builds", None)
            if start is not None:
                start(iso, it)
        return iso
    try:
        yield lanes.submit(setup)
    finally:  # every build done before the session's folders go (a failed test may have left one running)
        lanes.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def isolated(isolated_started) -> Isolated:
    """The session's isolated-build environment (the module docstring), ready."""
    assert isolated_started is not None, "started for every selected test that uses it"
    return isolated_started.result()


_projects: dict[str, Path] = {}
_projects_lock = threading.Lock()  # a lane's build and a test may ask for projects at once


def project(iso: Isolated, name: str) -> Path:
    """One copy of an example per session, shared by the frontends (the second reuses the build folder)."""
    with _projects_lock:
        if name not in _projects:
            dst = iso.work / "projects" / name
            shutil.copytree(EXAMPLES / name, dst, ignore=shutil.ignore_patterns("build", "artifacts", "dist"))
            _projects[name] = dst
        return _projects[name]


def _pip_wheel(iso: Isolated, name: str) -> subprocess.CompletedProcess:
    proj = project(iso, name)
    return iso.run([iso.python, "-m", "pip", "wheel", "--no-deps", "-w", proj / "pip-dist", "."], cwd=proj)


def start_example_wheel(iso: Isolated, name: str) -> Future:
    """Start ``pip wheel .`` of an example from the bare environment in a lane (once per session)."""
    return iso.job(f"pip wheel {name}", lambda: _pip_wheel(iso, name))


def example_wheel(iso: Isolated, name: str) -> Path:
    """``pip wheel .`` of an example from the bare environment, once per session: every test that asks asserts
    the build worked and gets the same wheel."""
    r = start_example_wheel(iso, name).result()
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    (whl,) = (project(iso, name) / "pip-dist").glob("*.whl")
    return whl


def check_wheel(whl: Path) -> dict:
    """The tag is the rule's (aot.package.tags), the index accepts it, it installs here; the wheel carries a
    complete artifact folder built for SM 80 by the toolkit of the isolated environment."""
    from packaging.tags import sys_tags
    from packaging.utils import parse_wheel_filename
    from aot.package.tags import publishable, wheel_tag
    _, _, _, tags = parse_wheel_filename(whl.name)
    z = zipfile.ZipFile(whl)
    (info_name,) = [n for n in z.namelist() if n.endswith("/aot-package.json")]
    info = json.loads(z.read(info_name))
    (man_name,) = [n for n in z.namelist() if n.endswith("/manifest.json") and n.startswith(info_name.rsplit("/", 1)[0])]
    cccl = any(e.get("payload_kind") == "cccl-blob" for e in json.loads(z.read(man_name))["artifacts"])
    # a set with CCCL artifacts takes cuda-cccl's platforms, an NVRTC/numba-only one cuda-bindings' (issue 28)
    want = "py3-none-manylinux_2_26_x86_64" if cccl else "py3-none-manylinux_2_24_x86_64.manylinux_2_28_x86_64"
    assert "py3-none-" + ".".join(sorted(t.platform for t in tags)) == wheel_tag(cccl) == want, whl.name
    assert all(publishable(t.platform) for t in tags), whl.name
    assert tags & set(sys_tags()), whl.name
    assert info["complete"] and info["sms"] == [int(SM)], info
    assert info["producer"]["nvrtc"].startswith("13."), info["producer"]
    wheel_meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL"))).decode()
    assert "Root-Is-Purelib: false" in wheel_meta
    assert all(f"Tag: py3-none-{t.platform}" in wheel_meta for t in tags), wheel_meta
    return info
