#!/usr/bin/env bash
# Inputs of .ci/gpu/cccl_legacy.sh, made on the CPU host: the Python 3.12 wheels the GPU machine lacks, in the
# git-ignored .gpu/cccl-legacy/ (carry it): cuda-cccl 0.6.0 and 0.7.0 (pre-serialize releases), numba-cuda 0.26.0
# (both ask numba-cuda<0.27), and aot's NVRTC/nvJitLink shims built here (lib/: the GPU machine may lack a C
# compiler). `pip download` only: nothing is installed here.
set -euo pipefail
R=.gpu/cccl-legacy
rm -rf "$R/cccl" "$R/deps" "$R/lib" && mkdir -p "$R/cccl" "$R/deps" "$R/lib"
PYTHONPATH=$PWD python3 -c "import sys; from pathlib import Path; from aot.runtime.adapters.cccl_legacy import build_shims
build_shims(13, Path(sys.argv[1]))" "$R/lib"
rm -f "$R"/lib/*.map
for v in 0.6.0 0.7.0; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    -d "$R/cccl" "cuda-cccl==$v"
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  -d "$R/deps" "numba-cuda==0.26.0"
du -sh "$R"
ls -l "$R"/cccl "$R"/deps "$R"/lib
