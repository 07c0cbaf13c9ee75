#!/usr/bin/env bash
# One virtual environment per cuda-cccl release, for building CCCL blobs under each (docs/build.md, "CCCL
# releases"; tests/test_cccl_releases.py::test_build_under_each_release; .ci/gpu/cccl_releases_prepare.sh):
# cuda-cccl[cu13]==X plus aot's cu13 build requirements (pyproject.toml's cu13 extra), hatchling and
# scikit-build-core (the wheel hooks). Run aot from the checkout in them (PYTHONPATH=$PWD).
#
#   bash .ci/cccl_envs.sh DIR 1.1.0 1.2.0 1.2.1     -> DIR/cccl-1.1.0 ...; prints the AOT_TEST_CCCL_PYTHONS value
#
# Needs uv (pip install uv); UV_CACHE_DIR is honoured.
set -euo pipefail
dir=$1; shift
pythons=()
for v in "$@"; do
  env="$dir/cccl-$v"
  [ -x "$env/bin/python" ] || uv venv -q -p "${AOT_ENV_PYTHON:-python3}" "$env"
  uv pip install -q -p "$env/bin/python" "cuda-cccl[cu13]==$v" "cuda-core[cu13]==1.2.2" \
    "cuda-toolkit[nvrtc,nvjitlink,cudart,nvcc,nvvm]==13.0.2" "numba-cuda[cu13]==0.30.4" "numpy>=1.26,<2.5" \
    "PyYAML>=6.0,<7" "rich>=13.7,<16" "packaging>=22" "platformdirs>=4.2,<5" pytest==9.2.0 hypothesis==6.170.15 \
    hatchling==1.33.0 scikit-build-core==1.1.2 pip
  pythons+=("$env/bin/python")
done
(IFS=:; echo "AOT_TEST_CCCL_PYTHONS=${pythons[*]}")
