#!/usr/bin/env bash
# Inputs of .ci/gpu/cccl_legacy.sh, made on the CPU host: the Python 3.12 wheels the GPU machine lacks, in the
# git-ignored .gpu/cccl-legacy/ (carry it): cuda-cccl 0.6.0 and 0.7.0 (pre-serialize releases), numba-cuda 0.26.0
# (both ask numba-cuda<0.27). `pip download` only: nothing is installed here.
set -euo pipefail
R=.gpu/cccl-legacy
rm -rf "$R/cccl" "$R/deps" && mkdir -p "$R/cccl" "$R/deps"
for v in 0.6.0 0.7.0; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    -d "$R/cccl" "cuda-cccl==$v"
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  -d "$R/deps" "numba-cuda==0.26.0"
du -sh "$R"
ls -l "$R"/cccl "$R"/deps
