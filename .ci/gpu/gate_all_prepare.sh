#!/usr/bin/env bash
# Inputs of .ci/gpu/gate_all.sh (issue 41), built here on the driverless CPU host, from the repository root with
# the developer venv active:   bash .ci/gpu/gate_all_prepare.sh [SM]      (default 90: the lent H200)
#
# Writes (git-ignored; carry both: [".gpu/gate41", ".whl"], about 25 MB):
#   .whl/                  the Python 3.12 wheels the GPU machine lacks (cuda-cccl 1.2.1, cuda-core, numba-cuda
#                          0.30.4, PyYAML, rich, platformdirs) and this checkout's cccl-aot-cu13 wheel
#   .gpu/gate41/FAMILY/site/PKG/artifacts   each library's package with its kernels built for SM (`aot build`):
#                          cccl   .ci/gpu/gate_cccl (two cuda.compute specs, built-in operators)
#                          adopt  examples/adopt-mypkg (NVRTC: three units, four kernels)
#                          numba  examples/numba-mypkg (numba-cuda: four kernels, five signatures)
#                          cupy   examples/cupy-mypkg (CuPy's own kernels: 23)
#   .gpu/gate41/FAMILY/mutant      that artifact folder with one spec rebuilt from edited code under the original
#                          key (.ci/gpu/edit_mutant.py): gate_sum_i64 plus -> minimum, saxpy + -> -, axpy.0 + -> -,
#                          cupy_subtract (float32) in0 - in1 -> in0 + in1
#   (triton: examples/triton-mypkg and its mutant, add.0's x + y -> x - y, are built by gate_all.sh on the GPU host
#   with the GPU hidden: a set serves only the Triton release it was built under, and this host's is another)
set -euo pipefail
SM=${1:-90}
here=$PWD
G=.gpu/gate41
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1700000000}
mkdir -p .gpu .whl
exclude=$(git rev-parse --git-path info/exclude)  # a worktree's .git is a file
mkdir -p "$(dirname "$exclude")"
for d in /.gpu/ /.whl/; do grep -qx "$d" "$exclude" 2>/dev/null || echo "$d" >> "$exclude"; done
step() { echo "== $*"; "$@"; }
# numba-cuda 0.30.4: the release the numba kernels are built with here (as .ci/gpu/prepare.sh carries it)
for r in cuda-cccl==1.2.1 cuda-core==1.2.2 numba-cuda==0.30.4 'platformdirs>=4.2,<5' rich markdown-it-py mdurl pygments \
    'PyYAML>=6.0,<7'; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any -d .whl "$r"
done
rm -f .whl/cccl_aot*.whl
src=$(mktemp -d)
git archive HEAD | tar -x -C "$src"
step python .ci/variant.py cu13 "$src/pyproject.toml"
step python -m pip wheel -q --no-build-isolation --no-deps -w .whl "$src"
rm -rf "$src" "$G"
site() {  # site FAMILY PROJECT PACKAGE: the package as installed, with its kernels built for SM
  mkdir -p "$G/$1/site"
  cp -r "$2/$3" "$G/$1/site/"
  rm -rf "$G/$1/site/$3/artifacts" "$G/$1/site/$3/__pycache__"
  (cd "$2" && PYTHONPATH="$here" step python -m aot build --matrix build_matrix.yaml --sm "$SM" --jobs 2 --quiet \
    --out "$here/$G/$1/site/$3/artifacts")
}
mutant() {  # mutant FAMILY PROJECT PACKAGE SPEC [--file F] --edit OLD NEW
  local fam=$1 proj=$2 pkg=$3 spec=$4; shift 4
  PYTHONPATH="$here" step python .ci/gpu/edit_mutant.py --project "$proj" --base "$G/$fam/site/$pkg/artifacts" \
    --spec "$spec" --out "$G/$fam/mutant" "$@"
}
site cccl .ci/gpu/gate_cccl gate_cccl
site adopt examples/adopt-mypkg adopt_mypkg
site numba examples/numba-mypkg numba_mypkg
site cupy examples/cupy-mypkg cupy_mypkg
mutant cccl .ci/gpu/gate_cccl gate_cccl gate_sum_i64 --file build_matrix.yaml --edit "op: plus" "op: minimum"
mutant adopt examples/adopt-mypkg adopt_mypkg saxpy --file adopt_mypkg/kernels.py --edit "a * x[i] + y[i]" "a * x[i] - y[i]"
mutant numba examples/numba-mypkg numba_mypkg axpy.0 --edit "a * x[i] + y[i]" "a * x[i] - y[i]"
mutant cupy examples/cupy-mypkg cupy_mypkg cupy_subtract__float32_float32_float32.0 \
  --file cupy-kernels/cupy_subtract__float32_float32_float32.0.cu --edit "out0 = in0 - in1" "out0 = in0 + in1"
du -sh "$G" .whl
