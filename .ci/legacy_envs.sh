#!/usr/bin/env bash
# The cuda-cccl 0.6.0 stacks the slow job's cccl-legacy tests build and serve under (tests/test_cccl_legacy_wheel.py,
# docs/build.md "CCCL releases without serialize"): three venvs in the git-ignored build/legacy-envs/, made once and
# reused while their stack file is unchanged, each as a library pins it (cuda-cccl[cuXX]==0.6.0, numba-cuda 0.26,
# numba < 0.66) with the hook's build requirements:
#   cu13-tk130   cuda-toolkit 13.0.* (NVRTC 13.0.88)     -> AOT_CCCL060_PYTHON
#   cu13-tk135   cuda-toolkit 13.5.* (NVRTC 13.5.x)      -> AOT_CCCL060_OTHER_PYTHON (a second toolchain)
#   cu12         cuda-cccl[cu12] (NVRTC 12.9)            -> AOT_CCCL060_CU12_PYTHON
# Prints the three `export` lines (progress on stderr); .ci/slow evaluates them. pip's cache lives in a temporary
# folder removed when this ends: nothing stays in ~/.cache. About 3 GB of wheels and a few minutes the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
root=build/legacy-envs
common=("numba-cuda==0.26.*" "numba<0.66" "hatchling==1.33.0" "PyYAML>=6.0,<7" "platformdirs>=4.2,<5" "rich>=13.7,<16")
cache=$(mktemp -d "${TMPDIR:-/tmp}/aot-legacy-envs.XXXXXX")
trap 'rm -rf "$cache"' EXIT
make() {  # name, then the stack's requirements
  local name=$1; shift
  local want="$*"
  if [[ -x $root/$name/bin/python && "$(cat "$root/$name/stack" 2>/dev/null)" == "$want" ]]; then
    return
  fi
  echo "legacy env $name: $want" >&2
  rm -rf "${root:?}/$name"
  python3 -m venv "$root/$name"
  PIP_CACHE_DIR=$cache PIP_DISABLE_PIP_VERSION_CHECK=1 "$root/$name/bin/python" -m pip install -q "$@" "${common[@]}" \
    2>&1 | grep -v "^WARNING: Location" >&2 || true
  "$root/$name/bin/python" -c "import cuda.compute, numba.cuda" 2>/dev/null \
    || { echo "legacy env $name: the stack does not import" >&2; exit 1; }
  echo "$want" > "$root/$name/stack"
}
make cu13-tk130 "cuda-cccl[cu13]==0.6.0" "cuda-toolkit[cudart,nvcc,nvjitlink,nvrtc,nvvm]==13.0.*"
make cu13-tk135 "cuda-cccl[cu13]==0.6.0" "cuda-toolkit[cudart,nvcc,nvjitlink,nvrtc,nvvm]==13.5.*"
make cu12 "cuda-cccl[cu12]==0.6.0"
echo "export AOT_CCCL060_PYTHON=$PWD/$root/cu13-tk130/bin/python"
echo "export AOT_CCCL060_OTHER_PYTHON=$PWD/$root/cu13-tk135/bin/python"
echo "export AOT_CCCL060_CU12_PYTHON=$PWD/$root/cu12/bin/python"
