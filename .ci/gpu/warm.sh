#!/usr/bin/env bash
# Warm at the floor (issues 17, 24), on the GPU machine: aot's whole-matrix warmup against the floor and
# against the driver's own limit, the first result of an application with a warmup in flight, the caller's
# blocking time and the first call after warmup; fresh processes throughout.
#
#   bash .ci/gpu/warm.sh ARTIFACT_DIR [NAME=DIR ...]   # e.g. .gpu/default libset=.gpu/libset m100=.gpu/m100
#
# The library-shaped set (issue 29; docs/warm.md): python benchmarks/gen_libset.py --out .gpu/libset-matrix,
# then python -m aot build --matrix .gpu/libset-matrix/build_matrix.yaml --sm 90 --out .gpu/libset.
#
# ARTIFACT_DIR: the sm_90 build of the default matrix; NAME=DIR: more sets for benchmarks/warm_limit.py (the
# generated ones: python benchmarks/warm_matrix.py --specs 100 --out M/build_matrix.yaml, then
# python -m aot build --matrix M/build_matrix.yaml --sm 90 --out DIR, on the build host).
# Needs: PYTHONPATH with aot and its dependencies, cupy (first results; the context-made case); $OUT (default
# /tmp/aot-gpu-out). Runs from a scratch directory, so the checkout's aot/ never shadows the installed one.
# Environment: AOT_WARM_RUNS (default 7, >= 5; warm_breakdown.py), AOT_LIMIT_RUNS (default 5; 0 skips
# warm_limit.py), AOT_LIMIT_VARIANTS (default new,today), AOT_KLOAD_RUNS (default 0; kload_scaling.py).
# Writes $OUT/warm_breakdown.{json,log}, $OUT/warm_limit.{json,log}, $OUT/kload_scaling.{json,log}.
# Exit status: the first failing script's (0 ok, 1 incomplete warmup or failed child, 6 no GPU).
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: bash .ci/gpu/warm.sh ARTIFACT_DIR [NAME=DIR ...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")/../.." && pwd)
art=$(cd "$1" && pwd) || { echo "warm.sh: no artifact directory $1" >&2; exit 2; }
shift
sets=(--set "default=$art")
for s in "$@"; do
  d=$(cd "${s#*=}" && pwd) || { echo "warm.sh: no artifact directory ${s#*=}" >&2; exit 2; }
  sets+=(--set "${s%%=*}=$d")
done
out=${OUT:-/tmp/aot-gpu-out}
mkdir -p "$out"
scratch=$(mktemp -d)
cd "$scratch" || exit 2
rc=0
if [ "${AOT_WARM_RUNS:-7}" -gt 0 ]; then
  python3 "$here/benchmarks/warm_breakdown.py" --artifacts "$art" --runs "${AOT_WARM_RUNS:-7}" \
    --json "$out/warm_breakdown.json" 2>&1 | tee "$out/warm_breakdown.log"
  rc=${PIPESTATUS[0]}
fi
if [ "${AOT_LIMIT_RUNS:-5}" -gt 0 ]; then
  python3 "$here/benchmarks/warm_limit.py" "${sets[@]}" --runs "${AOT_LIMIT_RUNS:-5}" \
    --variants "${AOT_LIMIT_VARIANTS:-new,today}" --json "$out/warm_limit.json" 2>&1 | tee "$out/warm_limit.log"
  lrc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] && rc=$lrc
fi
if [ "${AOT_KLOAD_RUNS:-0}" -gt 0 ]; then
  python3 "$here/benchmarks/kload_scaling.py" "$art" --workers 1,2,4,8 --runs "${AOT_KLOAD_RUNS}" \
    --json "$out/kload_scaling.json" 2>&1 | tee "$out/kload_scaling.log"
  krc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] && rc=$krc
fi
cd "$here" && rm -rf "$scratch"
exit "$rc"
