#!/usr/bin/env bash
# Warm at the floor (issue 17), on the GPU machine: aot's whole-matrix warmup against the floor (import
# cuda.compute beside making the CUDA context), both cases (no context yet / a context made by cupy),
# fresh processes; then whether deserializing and loading kernels scales over threads.
#
#   bash .ci/gpu/warm.sh ARTIFACT_DIR          # e.g. .gpu/default (the sm_90 build of the default matrix)
#
# Needs: PYTHONPATH with aot (the wheel under test) and its dependencies, cupy for the context-made case
# (else cuda.core makes the context); $OUT (default /tmp/aot-gpu-out). Runs from a scratch directory, so
# the checkout's aot/ never shadows the installed one. Environment: AOT_WARM_RUNS (default 7, >= 5),
# AOT_KLOAD_RUNS (default 3; 0 skips the scaling experiment).
# Writes $OUT/warm_breakdown.json, $OUT/warm_breakdown.log, $OUT/kload_scaling.json, $OUT/kload_scaling.log.
# Exit status: warm_breakdown.py's (0 ok, 1 incomplete warmup or failed child, 6 no GPU), else kload's.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bash .ci/gpu/warm.sh ARTIFACT_DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")/../.." && pwd)
art=$(cd "$1" && pwd) || { echo "warm.sh: no artifact directory $1" >&2; exit 2; }
out=${OUT:-/tmp/aot-gpu-out}
mkdir -p "$out"
scratch=$(mktemp -d)
cd "$scratch" || exit 2
python3 "$here/benchmarks/warm_breakdown.py" --artifacts "$art" --runs "${AOT_WARM_RUNS:-7}" \
  --json "$out/warm_breakdown.json" 2>&1 | tee "$out/warm_breakdown.log"
rc=${PIPESTATUS[0]}
if [ "${AOT_KLOAD_RUNS:-3}" -gt 0 ]; then
  python3 "$here/benchmarks/kload_scaling.py" "$art" --workers 1,2,4,8 --runs "${AOT_KLOAD_RUNS:-3}" \
    --json "$out/kload_scaling.json" 2>&1 | tee "$out/kload_scaling.log"
  krc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] && rc=$krc
fi
cd "$here" && rm -rf "$scratch"
exit "$rc"
