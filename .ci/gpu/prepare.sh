#!/usr/bin/env bash
# Everything `.ci/gpu_checks.sh` needs, built on the driverless CPU host (numba-cuda-mlir, the toolkit and
# the network are here, not on the GPU machine). Run from the repository root with the developer venv
# (`.[cu13,test]`) active; then call the device tool with carry [".gpu", ".whl"] and
# `bash .ci/gpu_checks.sh` (see ../shared/gpu/README.md).
#
#   bash .ci/gpu/prepare.sh [SM]      (default 90: the lent H100/H200)
#   AOT_PREPARE_FORCE=1 bash .ci/gpu/prepare.sh   rebuild the default and gate sets from scratch (--force)
#
# Writes (both folders are git-ignored):
#   .gpu/default  .gpu/algo  .gpu/gate  .gpu/mutants      artifact sets (incremental: unchanged items are hits)
#   .whl/         the Python 3.12 wheels the GPU machine lacks, this checkout's cccl-aot-cu13 wheel and
#                 every example package's wheel (examples/*/pyproject.toml), built for SM
set -euo pipefail
SM=${1:-90}
here=$PWD
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1700000000}
mkdir -p .gpu .whl
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
step() { echo "== $*"; "$@"; }
# The examples' build hooks run the *installed* aot (hatch's entry point, find_package(aot)): this checkout's.
step python -m pip install -q --no-deps --force-reinstall .
step python -m aot build --sm "$SM" --out .gpu/default --quiet ${AOT_PREPARE_FORCE:+--force}
PYTHONPATH=tests/data step python -m aot build --matrix tests/data/algorithms/build_matrix.yaml --sm "$SM" \
  --out .gpu/algo --quiet
PYTHONPATH=tests/data/gate step python -m aot build --matrix tests/data/gate/build_matrix.yaml --sm "$SM" \
  --out .gpu/gate --quiet ${AOT_PREPARE_FORCE:+--force}
rm -rf .gpu/mutants
PYTHONPATH=tests/data/gate:. step python .ci/gpu/make_mutants.py --base .gpu/gate --out .gpu/mutants --sm "$SM" --jobs 2
# Wheels for Python 3.12 the machine lacks (PyYAML: verify --matrix reads the gate matrix there).
bash ../shared/gpu/fetch_wheels.sh cuda-cccl==1.2.1 cuda-core==1.2.2 platformdirs rich markdown-it-py mdurl \
  pygments 'PyYAML>=6.0,<7' >/dev/null
rm -f .whl/cccl_aot*.whl .whl/mypkg_*.whl .whl/pystr_mypkg*.whl
src=$(mktemp -d)
git archive HEAD | tar -x -C "$src"
step python .ci/variant.py cu13 "$src/pyproject.toml"
step python -m pip wheel -q --no-build-isolation --no-deps -w .whl "$src"
rm -rf "$src"
for p in examples/*/pyproject.toml; do
  d=$(dirname "$p")
  # examples/cupy-mypkg merges in the other CuPy stacks' sets where `bash .ci/cupy_stack_sets.sh .gpu/cupy-stack-sets
  # $SM` built them (docs/cupy.md, "One wheel for several stacks"; needs PyPI): then its wheel serves those too
  merge=
  if [ "$d" = examples/cupy-mypkg ]; then  # every stack set built (stacks.json's "built" but "host")
    for m in .gpu/cupy-stack-sets/*/manifest.json; do [ -f "$m" ] && merge=${merge:+$merge:}$here/$(dirname "$m"); done
  fi
  AOT_WHEEL_MERGE=$merge AOT_WHEEL_SM=$SM step python -m pip wheel -q --no-build-isolation --no-deps -w .whl "$d"
done
# Issue 27: blobs named from content, built by one worker in that order (the lambda-name collision).
step python -m aot build --matrix .ci/gpu/blob_names.yaml --sm "$SM" --jobs 1 --out .gpu/blob_names --quiet
# Issue 30: the red team's GPU cases (a foreign set naming code; compile errors without tracebacks).
rm -rf .gpu/foreign_set
step python .ci/gpu/foreign_set.py prepare .gpu/foreign_set
# Issue 31: numba-cuda 0.30.4 (the GPU machine's numpy 2.5 dropped np.row_stack, which its JIT overloads: the checks alias it);
# the example as its wheel installs it, the same without artifacts (numba-cuda JITs), and a mutant of axpy.0.
bash ../shared/gpu/fetch_wheels.sh numba-cuda==0.30.4 >/dev/null  # numpy 2.5 there: numba_check aliases np.row_stack
rm -rf .gpu/numba && mkdir -p .gpu/numba/site .gpu/numba/jitsite .gpu/numba/mutsite
python - .whl/numba_mypkg-*.whl .gpu/numba/site <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
cp -r .gpu/numba/site/numba_mypkg .gpu/numba/jitsite/ && rm -rf .gpu/numba/jitsite/numba_mypkg/artifacts
step python .ci/gpu/numba_mutant.py --project examples/numba-mypkg --base .gpu/numba/site/numba_mypkg/artifacts \
  --spec axpy.0 --edit "a * x[i] + y[i]" "a * x[i] - y[i]" --out .gpu/numba/mutart
cp -r .gpu/numba/site/numba_mypkg .gpu/numba/mutsite/ && rm -rf .gpu/numba/mutsite/numba_mypkg/artifacts
mv .gpu/numba/mutart .gpu/numba/mutsite/numba_mypkg/artifacts
# Issue 37 item 2: six kernels, each compiling in one value (a module attribute, numpy globals, ...), built with A.
step python .ci/gpu/numba_digest.py prepare .gpu/numba_digest "$SM"
# Wrong numba kernels: @overload implementations edited after the build, a kernel compiled per launch configuration
# (the build must refuse it), a device function's kernel without nvJitLink; and the steady-state launch benchmark.
step python .ci/gpu/numba_wrong_kernels.py prepare .gpu/numba_wrong "$SM"
step python benchmarks/numba_launch.py prepare .gpu/numba_launch "$SM"
# Issue 37 item 1: one source as two NVRTC units (no flag: writes 7; -DN=2: writes 2), launched with flags of every spelling.
rm -rf .gpu/flag_spellings
step python .ci/gpu/flag_spellings.py prepare .gpu/flag_spellings
# Issue 36.3: adopt-mypkg as its wheel installs it, without artifacts (aot record sees it compile), and a mutant of saxpy.
step bash .ci/gpu/replay_check.sh prepare
# Issue 29: the library-shaped warm set (35 CCCL specs, 180 NVRTC units of 1-26 kernels), incremental.
step python benchmarks/gen_libset.py --out .gpu/libset-matrix
step python -m aot build --matrix .gpu/libset-matrix/build_matrix.yaml --sm "$SM" --out .gpu/libset --quiet
du -sh .gpu .whl
