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
  AOT_WHEEL_SM=$SM step python -m pip wheel -q --no-build-isolation --no-deps -w .whl "$d"
done
du -sh .gpu .whl
