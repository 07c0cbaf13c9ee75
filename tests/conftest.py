"""Shared fixtures: one real (small) build per session, an isolated AOT_CACHE_DIR, the ``gpu`` marker, and a
private temporary directory for the whole run.

The session build is rebuilt every session (about 10 s on 2 cores) rather than reused across pytest
runs: reuse would make the tests depend on whatever an older checkout left behind, and the build driver
itself is what is under test.

A run leaves nothing in the system temp dir, nor in ``~/.cache``: :func:`pytest_configure` makes one folder
there for the session (pytest's ``tmp_path`` folders, ``TMPDIR`` of this process and every subprocess, and the
caches of pip, uv, numba, CuPy and anything following ``XDG_CACHE_HOME``) and removes it at the end. Before
that, :func:`pytest_sessionfinish` fails the run if the redirected ``TMPDIR`` still holds anything: what a test
or a process it started left there is what it would leave in a user's ``/tmp``. New entries in the system temp
dir itself are named, never failed: other runs of the same user make the same names (``tmp.*``, pip's build
folders, ``numba_cuda_mlir_error_*.log``) and nothing says which process made one. (Before, one run left
3.0 GB in ``pytest-of-<user>`` and 138 ``numba_cuda_mlir_error_*.log`` files; then a green run failed on another
job's files, and left 5 example wheels in ``~/.cache/pip/wheels``.) ``--basetemp DIR`` keeps pytest's folders
in DIR after the run, for a failure's leftovers.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

# The session's isolated-build environment (a wheelhouse from a fresh clone, a bare venv), registered here once:
# a session fixture imported into two test modules is two fixtures, and the wheelhouse was made twice.
from isolated_env import LANES, isolated, isolated_started  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
#: The manual (MkDocs); tests read its commands and blocks from the pages themselves.
DOCS = ROOT / "docs"
if str(ROOT) not in sys.path:  # `pytest tests` from anywhere, not only `python -m pytest` in the root
    sys.path.insert(0, str(ROOT))

#: The session build's subset. cuda.compute specs are the cheapest of the default matrix.
SMALL_CCCL = ("reduce_sum_i32", "lower_bound_i32")
SMALL_NVRTC = ("morton", "segmented_compact")
#: ``aot.build.builder.build`` takes one SM list for every spec, so one build cannot do "CCCL x 2 SMs and NVRTC x
#: 3 SMs"; the union is built (the two extra sm_89 CCCL items cost ~3 s) and the cubins cover 80/89/90.
SMALL_SMS = (80, 89, 90)
SMALL_JOBS = 2


@dataclass(frozen=True)
class SmallBuild:
    out: Path            # the output directory (treat as read-only: copy it with `small_build_copy`)
    report: object       # the aot.build.builder.BuildReport the build returned
    specs: tuple         # the specs built (aot.core.spec.CcclSpec / NvrtcUnit)
    sms: tuple
    jobs: int
    seconds: float       # wall time of the build call


def repo_env(**extra: str) -> dict:
    """Environment for subprocesses that run ``python -m aot`` / ``import aot`` from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def load_script(name: str, rel: str):
    """The module of this checkout's script ``rel`` (a benchmark, a CI helper: files run as scripts, not packages),
    executed under ``name``."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, ROOT / rel)
    assert spec is not None and spec.loader is not None, rel
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def side_by_side(*calls):
    """Run independent builds at once, ``LANES`` (CI's 2 cores) at a time, one thread each (a build's work is in its own
    processes), and return their results in order; the first exception is raised after all have finished. The
    suite runs one test at a time on CI's 2 cores: two builds a test compares (reproducibility, worker order)
    take the time of one instead of two, and each is still a build of its own (its own spawned worker or
    process, its own folder)."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=min(LANES, len(calls))) as pool:
        futures = [pool.submit(c) for c in calls]
    return [f.result() for f in futures]


# ------------------------------------------------------------------------------------------ temp files
#: The system temp dir as this run found it, what it held then, and the session's own folder in it.
_SYSTEM_TMP: dict = {}
#: "warn": name what the run left in its redirected TMPDIR instead of failing the run.
TMP_CHECK = os.environ.get("AOT_TESTS_TMP_CHECK", "fail")
#: Cache folders the suite's processes would otherwise fill under ``~/.cache``: each points into the session.
CACHE_VARS = {"XDG_CACHE_HOME": "xdg", "PIP_CACHE_DIR": "pip", "UV_CACHE_DIR": "uv", "NUMBA_CACHE_DIR": "numba",
              "CUPY_CACHE_DIR": "cupy", "TRITON_CACHE_DIR": "triton", "TRITON_HOME": "triton-home"}


def _tmp_listing(root: Path) -> set[str]:
    """Top-level names, and those one level into pytest's ``pytest-of-<user>`` (where old runs piled up)."""
    names = set()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return names
    for e in entries:
        names.add(e.name)
        if e.name.startswith("pytest-of-") and e.is_dir(follow_symlinks=False):
            try:
                names.update(f"{e.name}/{sub}" for sub in os.listdir(e.path))
            except OSError:
                pass
    return names


@pytest.hookimpl(tryfirst=True)  # before pytest's own tmpdir plugin reads --basetemp
def pytest_configure(config):
    system = Path(tempfile.gettempdir())
    session = Path(tempfile.mkdtemp(prefix="aot-tests-", dir=system))
    session.chmod(0o711)  # another uid (tests/test_security.py's attacker) may pass through, not list
    tmp = session / "tmp"
    tmp.mkdir()
    tmp.chmod(stat.S_IMODE(system.stat().st_mode))  # a stand-in for /tmp: the same mode (1777 there)
    _SYSTEM_TMP.update(root=system, before=_tmp_listing(system) | {session.name}, session=session, tmp=tmp,
                       saved={k: os.environ.get(k) for k in ("TMPDIR", "NUMBA_CUDA_MLIR_ICE_FULL_TB", *CACHE_VARS)})
    if config.option.basetemp is None:
        config.option.basetemp = str(session / "pytest")
    os.environ["TMPDIR"] = str(tmp)  # inherited by every subprocess: pip, build workers, compilers
    tempfile.tempdir = str(tmp)      # this process (tempfile caches the directory it chose)
    # numba-cuda-mlir writes the traceback of every lowering failure ("compiler bug": tests/test_typing.py asks
    # it for ~1100 typings, ~140 of which it cannot lower) to a new numba_cuda_mlir_error_*.log in the temp dir
    # (numba_cuda_mlir/errors.py, handle_lowering_error) unless this is 1: then it raises the original error.
    os.environ["NUMBA_CUDA_MLIR_ICE_FULL_TB"] = "1"
    for var, sub in CACHE_VARS.items():  # pip's wheel cache (5 example wheels a run), uv's, numba's, CuPy's
        os.environ[var] = str(session / "cache" / sub)


def tmp_verdict(system: Path, before: set[str], redirected: Path) -> tuple[list[str], list[str]]:
    """What a run left: (in its redirected ``TMPDIR``: the run's own, fails it; new in the system temp dir and
    this user's: not attributable to the run, named only)."""
    try:
        ours = sorted(os.listdir(redirected))
    except OSError:
        ours = []
    unknown = []
    system_prefix = "aot-tests-"
    for name in sorted(_tmp_listing(system) - before):
        try:
            st = os.lstat(system / name)
        except OSError:
            continue
        if st.st_uid == os.geteuid() and not name.startswith(system_prefix):  # another session's own folder
            unknown.append(name)
    return ours, unknown


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """Fail the run when it left something in its redirected TMPDIR; name what appeared in the system temp dir."""
    if not _SYSTEM_TMP:
        return
    ours, unknown = tmp_verdict(_SYSTEM_TMP["root"], _SYSTEM_TMP["before"], _SYSTEM_TMP["tmp"])
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and unknown:
        reporter.write_line(f"note: {len(unknown)} new {'entry' if len(unknown) == 1 else 'entries'} of this user in "
                            f"{_SYSTEM_TMP['root']} during the run, not made through its TMPDIR (another run's?): "
                            f"{', '.join(unknown[:10])}")
    if not ours:
        return
    msg = (f"the test run left {len(ours)} {'entry' if len(ours) == 1 else 'entries'} in its TMPDIR "
           f"({_SYSTEM_TMP['tmp']}; a user's /tmp): {', '.join(ours[:10])}")
    if reporter is not None:
        reporter.write_line(("ERROR: " if TMP_CHECK == "fail" else "warning: ") + msg, red=True)
    if TMP_CHECK == "fail" and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_unconfigure(config):
    """Remove the session's folder (and with it every tmp_path and subprocess temp file), put TMPDIR back."""
    if not _SYSTEM_TMP:
        return
    session = _SYSTEM_TMP["session"]
    for k, v in _SYSTEM_TMP["saved"].items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    tempfile.tempdir = None

    def writable(func, path, _exc):  # a test's read-only folder (the full-disk and permission cases)
        try:
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
            func(path)
        except OSError:
            pass
    shutil.rmtree(session, **({"onexc": writable} if sys.version_info >= (3, 12) else {"onerror": writable}))
    _SYSTEM_TMP.clear()


@pytest.fixture(scope="session", autouse=True)
def aot_cache_dir(tmp_path_factory):
    """Every test (and every build worker, which inherits the environment) uses a private cache dir."""
    path = tmp_path_factory.mktemp("aot-cache")
    saved = os.environ.get("AOT_CACHE_DIR")
    os.environ["AOT_CACHE_DIR"] = str(path)
    try:
        yield path
    finally:
        if saved is None:
            os.environ.pop("AOT_CACHE_DIR", None)
        else:
            os.environ["AOT_CACHE_DIR"] = saved


@pytest.fixture(scope="session")
def small_specs():
    from aot.build.matrix import load_matrix
    return load_matrix().select(SMALL_CCCL + SMALL_NVRTC)


@pytest.fixture(scope="session")
def small_build(tmp_path_factory, aot_cache_dir, small_specs) -> SmallBuild:
    from aot.build.builder import build
    out = tmp_path_factory.mktemp("small-build") / "out"
    t0 = time.perf_counter()
    report = build(small_specs, list(SMALL_SMS), out, jobs=SMALL_JOBS)
    seconds = time.perf_counter() - t0
    return SmallBuild(out=out, report=report, specs=tuple(small_specs), sms=SMALL_SMS, jobs=SMALL_JOBS,
                      seconds=seconds)


@pytest.fixture
def small_build_copy(small_build, tmp_path) -> Path:
    """A private copy of the session build's output, for tests that rebuild into or damage it."""
    dst = tmp_path / "out"
    shutil.copytree(small_build.out, dst)
    return dst


@pytest.fixture
def jit_stub(monkeypatch):
    """The loader's last resort, stubbed: records calls, returns (b"blob", "jit", None)."""
    import aot.runtime.jit.jit
    calls = []

    def stub(spec, sm, errors, warn):
        calls.append((spec.name, sm))
        return b"blob", "jit", None

    monkeypatch.setattr(aot.runtime.jit.jit, "cccl_from_cache_or_jit", stub)
    return calls


# ------------------------------------------------------------------------------------------ gpu artifacts
#: The full artifact set GPU tests run over: built on a driverless host and carried to the GPU machine
#: (``.ci/gpu_checks.sh`` sets it; default ``.gpu/default``).
GPU_ARTIFACTS = Path(os.environ.get("AOT_GPU_ARTIFACTS", ROOT / ".gpu" / "default"))


@pytest.fixture()
def gpu_artifacts(tmp_path) -> Path:
    """A private copy of :data:`GPU_ARTIFACTS` (tests delete or damage files in it); skips without one."""
    if not (GPU_ARTIFACTS / "manifest.json").exists():
        pytest.skip(f"no artifact set at {GPU_ARTIFACTS}")
    dst = tmp_path / "artifacts"
    shutil.copytree(GPU_ARTIFACTS, dst)
    return dst


# ------------------------------------------------------------------------------------------ gpu marker
def pytest_collection_modifyitems(config, items):
    gpu_items = [it for it in items if it.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    from aot.build.toolchain import native_sm
    sm = native_sm()
    if sm is not None:
        return
    skip = pytest.mark.skip(reason="needs a CUDA driver and GPU (aot.build.toolchain.native_sm() is None)")
    for it in gpu_items:
        it.add_marker(skip)


@pytest.fixture
def fresh_version_caches():
    """For tests that patch sys.path or package metadata while the loader reads versions (cached per process):
    what they read then must not outlive them (test_pack.py, run after the cccl-legacy tests, saw cuda-cccl as
    0.6.0)."""
    from aot.core import versions
    yield
    versions.runtime_versions.cache_clear()
    versions.cuda_major.cache_clear()

