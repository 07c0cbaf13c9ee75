#!/usr/bin/env bash
# `aot record` on a GPU (issues 36, 37): the command's launches really run under the hook, give numpy's results,
# and the recorded matrix names every kernel: numba-cuda kernels of examples/numba-mypkg with the signatures
# launched, NVRTC kernels read from the compiled image (__launch_bounds__(N, M), a macro-wrapped __global__,
# templates by name expression), each launched through cuda.core; the numba launches kept beside the matrix
# (issue 36.3) replay right through each kernel's dispatcher and catch a mutant.
#   bash .ci/gpu/record.sh            (from the repository root; aot importable, e.g. after prepare.sh's wheels)
# Prints "record-gpu: ok" and exits 0 when every check passed. Logs under $OUT.
set -uo pipefail
repo=$(pwd)
out=${OUT:-/tmp/aot-record-out}
mkdir -p "$out"
work=$(mktemp -d)
cp -r "$repo/examples/numba-mypkg/numba_mypkg" "$work/"
rm -rf "$work/numba_mypkg/artifacts"
cp "$repo/.ci/gpu/record_gpu.py" "$work/run.py"
cd "$work"
PYTHONPATH="$work${PYTHONPATH:+:$PYTHONPATH}" timeout 300 python3 -m aot record --package numba_mypkg \
  --package klib --out m.yaml -- python3 run.py >"$out/record.log" 2>&1
rc=$?
cat "$out/record.log" | tail -n 20
cp m.yaml "$out/recorded.yaml" 2>/dev/null
python3 "$work/run.py" check m.yaml "$rc"
