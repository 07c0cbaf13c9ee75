"""Every command a reader of README.md and docs/*.md would type works as written (issue 40).

Every line of every ```bash block is listed in :data:`COMMANDS`, with how it is checked:

* ``fast``: run here, in the default suite, in a copy of this checkout (the developer's environment:
  ``.[cu13,test]``, this checkout's aot), its block's fast lines in order, in one shell;
* ``slow``: run by :func:`test_slow_blocks_run_as_written` in the separate slow job only
  (``AOT_TESTS_DOC_COMMANDS=1 python -m pytest tests/test_doc_commands.py``; the default run skips it, visibly,
  as slow-marked tests of the default run take minutes and these take tens of minutes and the index): the whole
  block, as written, in a fresh venv of a fresh copy, with aot's wheels in a folder the way docs/downstream.md
  makes it (packages from the index);
* ``elsewhere``: run as written by the test or job named (tests/test_isolated.py runs the downstream page block by
  block; CI's ``.ci/run`` runs the README's test command);
* ``gpu`` and ``long``: not run on the CPU host, for the reason given (a GPU, a driver, hours of building, the
  reader's own library); each is a visible skip.

A bash block or line missing from the table, or an entry no page has any more, fails
:func:`test_every_command_is_listed`: a new command is classified when it is written. An untagged block that
holds a command (``python ...``, ``pip ...``) fails too: commands go in ```bash blocks, output in ```text.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from conftest import DOCS, ROOT

PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
ISOLATED = "tests/test_isolated.py::test_every_command_of_the_downstream_page_runs_as_written (slow)"
CI = ".ci/run (CI's job) reads it from README.md and runs it in a fresh venv"
DEV = "the README's two commands, quoted (tests/test_docs.py checks they are the same); " + CI
#: (page, command line as written, comments dropped) -> (kind, reason or where; for fast: the folder it runs in)
COMMANDS: dict[tuple[str, str], tuple[str, str]] = {
    ("README.md", 'python3 -m venv .venv && . .venv/bin/activate && pip install ".[cu13]" && python -m aot build '
                  '--sm 80,89,90'): ("slow", "a fresh venv, the CUDA 13 toolkit from the index, 3 SMs of the default "
                                             "matrix (minutes)"),
    ("README.md", '. .venv/bin/activate && pip install ".[cu13,test]" && python -m pytest'): ("elsewhere", CI),
    ("README.md", "bash .ci/wheelhouse.sh ~/wheelhouse && export PIP_FIND_LINKS=~/wheelhouse"): (
        "elsewhere", "docs/downstream.md's first block joined (tests/test_docs.py), run by " + ISOLATED),
    ("docs/build.md", "python -m aot build --sm 80,90 --out cccl-1.1.0"): (
        "long", "one environment per cuda-cccl release; .ci/gpu/cccl_releases_prepare.sh makes them"),
    ("docs/build.md", "python -m aot build --sm 80,90 --out cccl-1.2.1"): ("long", "as the line above"),
    ("docs/build.md", "python -m aot merge --out merged cccl-1.1.0 cccl-1.2.1"): ("long", "needs the two sets above"),
    ("docs/build.md", "python -m aot inspect merged"): ("long", "needs the merged set above"),
    ("docs/cupy.md", "python -m aot record --out build_matrix.yaml --package mylib -- python -m pytest tests"): (
        "gpu", "records the reader's library on a GPU (CuPy compiles only with a device)"),
    ("docs/cupy.md", "pip install 'cccl-aot-cu13[build,jit-nvrtc,cupy]'"): ("slow", "installs from the index"),
    ("docs/cupy.md", "python -m aot build --matrix build_matrix.yaml --sm 80,90 --out mylib/artifacts"): (
        "fast", "examples/cupy-mypkg"),
    ("docs/cupy.md", "AOT_WHEEL_SM=90 python -m pip wheel --no-build-isolation --no-deps -w dist "
                     "examples/cupy-mypkg"): ("fast", "."),
    ("docs/cupy.md", "bash .ci/gpu/cupy_check.sh 3"): ("gpu", "CuPy's kernels launched on the GPU"),
    ("docs/cupy.md", "bash .ci/gpu/cupy_check.sh --wheel .whl/cupy_mypkg-0.1.0-*.whl 3"): ("gpu", "as above"),
    ("docs/dependencies.md", "python benchmarks/install_size.py --majors cu13 --kinds "
                             "runtime,cccl,nvrtc-pkg,cccl-pkg  --json benchmarks/results/install_size_nocccl.json"): (
        "slow", "makes four venvs from the index"),
    ("docs/development.md", 'python3 -m venv .venv && . .venv/bin/activate && pip install ".[cu13]" && python -m aot '
                            'build --sm 80,89,90'): ("elsewhere", DEV),
    ("docs/development.md", '. .venv/bin/activate && pip install ".[cu13,test]" && python -m pytest'): (
        "elsewhere", DEV),
    ("docs/development.md", "mkdocs build --strict --site-dir site"): ("fast", "."),
    ("docs/downstream.md", "bash .ci/wheelhouse.sh ~/wheelhouse"): ("elsewhere", ISOLATED),
    ("docs/downstream.md", "export PIP_FIND_LINKS=~/wheelhouse"): ("elsewhere", ISOLATED),
    ("docs/downstream.md", "python -m venv .venv && . .venv/bin/activate"): ("elsewhere", ISOLATED),
    ("docs/downstream.md", "pip install ."): ("elsewhere", ISOLATED),
    ("docs/downstream.md", "python -m aot verify --package mypkg --for-wheel"): ("elsewhere", ISOLATED),
    ("docs/downstream.md", "pip wheel --no-deps -w dist ."): ("elsewhere", ISOLATED),
    ("docs/downstream.md", "pip install dist/mypkg-0.1.0-py3-none-manylinux_2_26_x86_64.whl"): ("elsewhere", ISOLATED),
    ("docs/downstream.md", "python -m aot inspect dist/mypkg-0.1.0-py3-none-manylinux_2_26_x86_64.whl"): (
        "elsewhere", ISOLATED),
    ("docs/downstream.md", 'pip install "cccl-aot-cu13[cu13]"'): ("elsewhere", ISOLATED),
    ("docs/downstream.md", "python -m aot bundle"): ("elsewhere", ISOLATED),
    ("docs/gate.md", "PYTHONPATH=tests/data/gate python -m aot build --matrix tests/data/gate/build_matrix.yaml "
                     "--sm 90 --out .gpu/gate"): ("slow", "40 specs of the gate's matrix (minutes)"),
    ("docs/gate.md", "PYTHONPATH=tests/data/gate:. python .ci/gpu/make_mutants.py --base .gpu/gate --out "
                     ".gpu/mutants --sm 90"): ("slow", "builds a set per mutant (minutes)"),
    ("docs/gate.md", "bash .ci/gpu/gate.sh .gpu/gate .gpu/mutants"): ("gpu", "the gate runs the sets on a GPU"),
    ("docs/gate.md", "bash .ci/gpu/forms_gate.sh"): ("gpu", "GPU checks of issue 20"),
    ("docs/gate.md", "python -m aot record --out build_matrix.yaml -- python -m pytest tests"): (
        "gpu", "records the reader's library on a GPU"),
    ("docs/gate.md", "python -m aot verify --gpu --package mylib --launches build_matrix.launches"): (
        "gpu", "verify --gpu of the reader's installed library"),
    ("docs/numba.md", "pip install 'cccl-aot-cu13[build,jit-nvrtc,numba]'"): ("slow", "installs from the index"),
    ("docs/numba.md", "python -m aot build --matrix examples/numba-mypkg/build_matrix.yaml --sm 80,90 --jobs 1 --out "
                      "out"): ("fast", "."),
    ("docs/record.md", "python -m aot record --out build_matrix.yaml -- python -m pytest tests"): (
        "gpu", "records the reader's library on a GPU"),
    ("docs/record.md", "PYTHONPATH=stubs python -m aot record --stand-in-driver -- python -m pytest -q -p "
                       "no:cacheprovider tests"): (
        "long", "the reader's library (its stubs/ and tests/); tests/test_record.py runs --stand-in-driver on one"),
    ("docs/warm.md", "cc -O1 -shared -fPIC -fvisibility=hidden -Wl,-soname,libcuda.so.1 -o /tmp/libcuda.so.1 "
                     "tests/fake_libcuda.c -ldl"): ("long", "the benchmark below needs LIBSET, a set built for hours"),
    ("docs/warm.md", "PYTHONPYCACHEPREFIX=/tmp/pyc python benchmarks/import_contention.py --artifacts LIBSET  --fake "
                     "/tmp/libcuda.so.1 --runs 20 --variants new,yield,pre"): ("long", "as the line above"),
    ("docs/wheels.md", "bash .ci/cccl_envs.sh .gpu/cccl-envs 1.1.0 1.1.1 1.2.0"): (
        "long", "one venv per cuda-cccl release from the index, for the line below"),
    ("docs/wheels.md", "python benchmarks/wheel_size.py --work .gpu/wheel-size --release-python "
                       ".gpu/cccl-envs/cccl-1.2.0/bin/python --release-python .gpu/cccl-envs/cccl-1.1.1/bin/python "
                       "--release-python .gpu/cccl-envs/cccl-1.1.0/bin/python --json "
                       "benchmarks/results/wheel_size.json"): (
        "long", "builds a sample of a library-shaped set for 12 SMs under 4 cuda-cccl releases (20 minutes on 2 "
                "cores)"),
}
#: docs/wheels.md's wheel of both CUDA majors: tests/test_two_majors.py runs the same steps (its cu12 set is that
#: build, committed; the slow test rebuilds it in a CUDA 12 venv).
TWO_MAJORS = "tests/test_two_majors.py (the two_majors fixture: the cu13 build, the merge, the hook, verify)"
COMMANDS.update({
    ("docs/wheels.md", "python -m aot build --matrix examples/majors-mypkg/build_matrix.yaml --sm 75,80,90 --out cu12"): (
        "long", "a CUDA 12 venv (pip install \".[cu12]\"); tests/test_two_majors.py::"
                "test_the_cu12_set_is_what_nvrtc_12_builds runs it under AOT_TEST_CU12_PYTHON (slow)"),
    ("docs/wheels.md", "python -m aot build --matrix examples/majors-mypkg/build_matrix.yaml --sm 80,90,100 --out "
                       "cu13"): ("elsewhere", TWO_MAJORS),
    ("docs/wheels.md", "python -m aot merge --out both cu12 cu13"): ("elsewhere", TWO_MAJORS),
    ("docs/wheels.md", "AOT_WHEEL_ARTIFACTS=both python -m pip wheel --no-build-isolation --no-deps -w dist "
                       "examples/majors-mypkg"): ("elsewhere", TWO_MAJORS),
    ("docs/wheels.md", "python -m aot verify dist/majors_mypkg-0.1.0-*.whl --for-wheel"): ("elsewhere", TWO_MAJORS),
})
#: docs/gate.md's commands (aot gate, AOT_NO_JIT) and the Quickstart's check that the package ships its kernels.
COMMANDS.update({
    ("docs/cupy.md", "bash .ci/gpu/cupy_stacks.sh --wheel .whl/cupy_mypkg-0.1.0-*.whl --nvrtc nvidia_cuda_nvrtc-13.5.37-*.whl  "
                     "--cupy cupy_cuda13x-13.6.0-cp312-*.whl --runtime nvidia_cuda_runtime-13.5.37-*.whl"): (
        "gpu", "CuPy's kernels under other NVRTC and CuPy releases, on a GPU"),
    ("docs/cupy.md", "bash .ci/cupy_stack_sets.sh .gpu/cupy-stack-sets 90"): (
        "long", "one venv per CuPy stack installed from the index, the example's matrix built in each (minutes)"),
    ("docs/cupy.md", "AOT_WHEEL_SM=90 AOT_WHEEL_MERGE=$PWD/.gpu/cupy-stack-sets/ctk:$PWD/.gpu/cupy-stack-sets/cupy-13.6:"
                     "$PWD/.gpu/cupy-stack-sets/torch-cu130:$PWD/.gpu/cupy-stack-sets/torch-cu130-cupy-13.6 "
                     "python -m pip wheel --no-build-isolation --no-deps -w .whl examples/cupy-mypkg"): (
        "long", "needs the sets of the line above"),
    ("docs/cupy.md", "bash .ci/gpu/cupy_stacks.sh --wheel cupy_mypkg-0.1.0-*.whl --nvrtc nvidia_cuda_nvrtc-13.5.37-*.whl "
                     "--runtime nvidia_cuda_runtime-13.5.37-*.whl"): ("gpu", "the example's wheel under NVRTC 13.5.37"),
    ("docs/cupy.md", "bash .ci/gpu/cupy_stacks.sh --wheel cupy_mypkg-0.1.0-*.whl --cupy cupy_cuda13x-13.6.0-cp312-*.whl "
                     "--cupy-deps fastrlock-*.whl --cupy-built --pip-cuda-path"): (
        "gpu", "the example's wheel under CuPy 13.6.0"),
    ("docs/triton.md", "pip install 'cccl-aot-cu13[triton]'"): ("slow", "installs from the index"),
    ("docs/triton.md", "python -m aot build --matrix examples/triton-mypkg/build_matrix.yaml --sm 80,90 --jobs 1 "
                       "--out out"): ("fast", "."),
    ("docs/build.md", "python -m aot.build.cccl_legacy_build --sm 90 --out cccl-0.6.0 reduce:int32:plus:0 "
                      "radix_sort:uint32:ascending"): (
        "long", "needs an environment with cuda-cccl 0.6.0 (tests/test_cccl_legacy.py's slow test builds under it)"),
    ("docs/build.md", "python -m aot merge --out merged cccl-0.6.0 cccl-0.7.0 cccl-1.2.1"): (
        "long", "needs the sets of the line above, one per release"),
    ("docs/triton.md", "python benchmarks/triton_per_python.py 90"): (
        "long", "compiles Triton kernels for SM 90, once under each Python whose results it compares"),
    ("README.md", "aot inspect --package mypkg"): ("elsewhere", "docs/downstream.md's line, run by " + ISOLATED),
    ("docs/downstream.md", "aot inspect --package mypkg"): ("elsewhere", ISOLATED),
    ("docs/gate.md", "python -m aot gate --package mylib -- python -m pytest tests"): (
        "gpu", "the gate of the reader's library, on a GPU"),
    ("docs/gate.md", "python -m aot gate --package cupy_mypkg --json gate.json -- python -m cupy_mypkg.workload float32 "
                     "float64"): ("gpu", "CuPy's workload on a GPU"),
    ("docs/gate.md", "python -c \"import time, numpy as np; from aot.verify.gate_hook import digest; b = "
                     "np.random.default_rng(0).standard_normal(4 << 20).astype(np.float32).tobytes(); t = "
                     "time.perf_counter(); [digest(b, 'float32') for _ in range(5)]; print(f'{(time.perf_counter() - "
                     "t) / 5 * 1e3:.1f} ms')\""): ("fast", "."),
    ("docs/gate.md", "AOT_NO_JIT=raise python -m pytest tests"): ("long", "the reader's library's test suite"),
    ("docs/gate.md", "AOT_NO_JIT=warn AOT_NO_JIT_REPORT=jit.json python -m mylib.workload"): (
        "long", "the reader's library's workload"),
    ("docs/gate.md", "bash .ci/gpu/gate_all_prepare.sh"): (
        "long", "builds the GPU gate's sets and every example's wheel for the lent machine"),
    ("docs/gate.md", "python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export "
                     "PYTHONPATH=/tmp/site;  bash .ci/gpu/gate_all.sh"): ("gpu", "the gate of all four families"),
})
KINDS = ("fast", "slow", "elsewhere", "gpu", "long")
_COMMAND = re.compile(r"^ {0,2}(\$ )?(python3?|pip|bash|cc|mkdocs|[A-Z_]+=\S+ python)(?= )")


def _bash_blocks() -> list[tuple[str, int, list[str]]]:
    """(page, block number on its page, command lines) of every ```bash block; continuations joined, comments
    and blank lines dropped."""
    out = []
    for page in PAGES:
        rel = page.relative_to(ROOT).as_posix()
        text = page.read_text(encoding="utf-8")
        for n, m in enumerate(re.finditer(r"^ *```bash\n(.*?)^ *```", text, re.S | re.M)):
            lines = []
            for line in re.sub(r"\\\n\s*", " ", m.group(1)).splitlines():
                line = re.sub(r"\s+#.*$", "", line.strip())
                if line and not line.startswith("#"):
                    lines.append(line)
            out.append((rel, n, lines))
    return out


def test_every_command_is_listed():
    seen = {(page, line) for page, _, lines in _bash_blocks() for line in lines}
    assert sorted(seen - set(COMMANDS)) == [], "commands with no entry in COMMANDS"
    assert sorted(set(COMMANDS) - seen) == [], "entries of COMMANDS no page has"
    assert all(kind in KINDS and reason for kind, reason in COMMANDS.values())
    untagged = []
    for page in PAGES:
        for block in _untagged_blocks(page.read_text(encoding="utf-8")):
            untagged += [(page.name, line) for line in block if _COMMAND.match(line)
                         and not line.lstrip().startswith("$ ")]
    assert untagged == [], "commands in untagged blocks: tag them ```bash (or ```text for output)"


def _untagged_blocks(text: str) -> list[list[str]]:
    """The lines of each fenced block without a language tag, fences paired in order (a closing fence is never
    taken for the opening of the prose after it)."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    tagged = False
    for line in text.splitlines():
        fence = line.strip().startswith("```")
        if fence and current is None:
            current, tagged = [], line.strip() != "```"
        elif fence:
            if not tagged:
                blocks.append(current)
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def _copy(dst: Path) -> Path:
    """This checkout's files (not its venvs, builds or .git) at ``dst``: not nox's environments either (``.nox``,
    left by .ci/envs.sh: 3.5 GB, which every copy took minutes over)."""
    everywhere = shutil.ignore_patterns(".git", ".venv*", ".nox", "__pycache__", ".mypy_cache", ".ruff_cache",
                                        ".pytest_cache", "dist")
    outputs = {"build", "site", ".gpu", ".whl", "aot-out", "artifacts"}  # build outputs, not aot/build (code)

    def ignore(folder: str, names: list[str]) -> set[str]:
        ours = Path(folder) == ROOT / "aot"
        return set(everywhere(folder, names)) | ({n for n in names if n in outputs} if not ours else set())
    shutil.copytree(ROOT, dst, ignore=ignore)
    return dst


def _blocks(kind: str) -> list[tuple[str, int, list[str]]]:
    return [(p, n, lines) for p, n, lines in _bash_blocks() if any(COMMANDS.get((p, x), ("",))[0] == kind
                                                                   for x in lines)]


def _skipped() -> list[tuple[str, str]]:
    seen = {(page, line) for page, _, lines in _bash_blocks() for line in lines}
    return [(f"{p}: {line}", f"{kind}: {why}") for (p, line), (kind, why) in COMMANDS.items()
            if kind in ("gpu", "long") and (p, line) in seen]


@pytest.mark.parametrize("page,n,lines", _blocks("fast"), ids=lambda v: v if isinstance(v, str) else None)
def test_fast_commands_run_as_written(page, n, lines, tmp_path):
    """A block's ``fast`` lines, as written, in one shell, in a copy of this checkout."""
    if any("cupy" in line for line in lines):
        pytest.importorskip("cupy")
    root = _copy(tmp_path / "repo")
    fast = [line for line in lines if COMMANDS[(page, line)][0] == "fast"]
    (where,) = {COMMANDS[(page, line)][1] for line in fast}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AOT_", "PIP_", "VIRTUAL_ENV"))}
    env.update(PYTHONPATH=str(root), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               AOT_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(fast)], cwd=root / where, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{page}:\n" + "\n".join(fast) + "\n" + r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.parametrize("command,why", _skipped(), ids=lambda v: v[:60])
def test_gpu_and_long_commands_are_skipped_visibly(command, why):
    pytest.skip(f"{command} -- {why}")


#: The separate slow job: ``AOT_TESTS_DOC_COMMANDS=1`` (docs/development.md).
SLOW_JOB = os.environ.get("AOT_TESTS_DOC_COMMANDS") == "1"


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    """aot's wheels, made as docs/downstream.md's first block makes them (into ~/wheelhouse of a fresh HOME)."""
    home = tmp_path_factory.mktemp("home")
    clone = _copy(tmp_path_factory.mktemp("wh") / "repo")
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", "bash .ci/wheelhouse.sh ~/wheelhouse"], cwd=clone,
                       env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return home / "wheelhouse"


@pytest.mark.slow
@pytest.mark.parametrize("page,n,lines", _blocks("slow"), ids=lambda v: v if isinstance(v, str) else None)
def test_slow_blocks_run_as_written(page, n, lines, request, tmp_path):
    """The whole block, as written, in a fresh venv (activated, as a reader's shell is) of a fresh copy, pip
    finding aot's wheels in the folder docs/downstream.md makes and everything else on the index; the block's
    ``fast`` lines run in their folder, its ``gpu`` lines not at all."""
    if not SLOW_JOB:
        pytest.skip("the slow job's (AOT_TESTS_DOC_COMMANDS=1): a fresh venv from the index, minutes to an hour")
    wheelhouse = request.getfixturevalue("wheelhouse")
    root = _copy(tmp_path / "repo")
    where = next((COMMANDS[(page, x)][1] for x in lines if COMMANDS[(page, x)][0] == "fast"), ".")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AOT_", "PIP_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(VIRTUAL_ENV=str(env_dir), PATH=f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               PIP_FIND_LINKS=str(wheelhouse), AOT_CACHE_DIR=str(tmp_path / "cache"), HOME=str(tmp_path))
    run = [x for x in lines if COMMANDS[(page, x)][0] in ("fast", "slow")]  # a GPU line of the block stays out
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(run)], cwd=root / where, env=env,
                       capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, f"{page}:\n" + "\n".join(run) + "\n" + r.stdout[-3000:] + r.stderr[-3000:]
