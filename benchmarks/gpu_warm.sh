#!/usr/bin/env bash
# Run by .ci/gpu_checks.sh on the GPU machine: the warmup benchmark over the default set (issue 11 part 3).
set -uo pipefail
python3 benchmarks/warm.py "${AOT_GPU_ARTIFACTS:-.gpu/default}" --runs 3 --json "${OUT:-/tmp/aot-gpu-out}/warm.json"
