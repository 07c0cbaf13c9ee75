"""Shared fixtures: one real (small) build per session, an isolated AOT_CACHE_DIR, the ``gpu`` marker.

The session build is rebuilt every session (about 10 s on 2 cores) rather than reused across pytest
runs: reuse would make the tests depend on whatever an older checkout left behind, and the build driver
itself is what is under test.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
