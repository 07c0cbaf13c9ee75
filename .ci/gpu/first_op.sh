#!/usr/bin/env bash
# Issue 42's runtime cost on the GPU: (1) a library's first operation with aot against its own warm cuda.core
# program cache, and steady launches (benchmarks/first_op.py, adopt_mypkg); (2) `import PKG` with aot against an
# empty aot stand-in (benchmarks/import_cost.py: numba_mypkg, cupy_mypkg, adopt_mypkg). Builds nothing.
#
# Run from the repository root on the GPU machine with the machine's Python (cuda-core 1.2.x, numpy, numba-cuda,
# cupy) and these wheels in .whl/ (or $AOT_WHEELS), made on the CPU host by `bash .ci/gpu/prepare.sh`:
#   adopt_mypkg-0.1.0-*.whl, numba_mypkg-0.1.0-*.whl, cupy_mypkg-0.1.0-*.whl (platformdirs-*.whl if present).
# aot is this checkout (PYTHONPATH=.). Writes first_op.json, import_cost.json and logs into $OUT; prints the two
# tables last; exits non-zero when a benchmark fails to run (the targets are read from the tables: first
# operation added <= +2 ms and launch ratio <= 1.01 for program_cache/by_source; import added <= +20 ms).
set -uo pipefail
here=$PWD
OUT=${OUT:-/tmp/aot-gpu-out}
PY=${PYTHON:-python3}
WHL=${AOT_WHEELS:-$here/.whl}
RUNS=${AOT_FIRST_OP_RUNS:-15}
mkdir -p "$OUT"
site=$(mktemp -d /tmp/aot-first-op.XXXXXX)
trap 'rm -rf "$site"' EXIT
wheels=()
for pat in 'adopt_mypkg-0.1.0-*.whl' 'numba_mypkg-0.1.0-*.whl' 'cupy_mypkg-0.1.0-*.whl' 'platformdirs-*.whl'; do
  w=$(ls "$WHL"/$pat 2>/dev/null | head -1)
  [ -n "$w" ] && wheels+=("$w")
done
[ ${#wheels[@]} -ge 3 ] || { echo "first_op: missing example wheels in $WHL (have: $(ls "$WHL" | tr '\n' ' '))"; exit 2; }
"$PY" -m pip install -q --no-index --no-deps --target "$site" "${wheels[@]}" >"$OUT/first_op-pip.log" 2>&1 \
  || { cat "$OUT/first_op-pip.log"; exit 1; }
export PYTHONPATH=$here
rc=0
"$PY" benchmarks/first_op.py --site "$site" --runs "$RUNS" --json "$OUT/first_op.json" --profile "$OUT/first_op_profile" >"$OUT/first_op.log" 2>&1 || rc=1
"$PY" benchmarks/import_cost.py --site "$site" --package numba_mypkg --package cupy_mypkg --package adopt_mypkg \
  --runs "$RUNS" --json "$OUT/import_cost.json" >"$OUT/import_cost.log" 2>&1 || rc=1
echo "== first operation (ms) and steady launches (us), fresh processes, medians of $RUNS"
cat "$OUT/first_op.log"
echo "== import PKG (ms), aot vs an empty aot stand-in, medians of $RUNS"
cat "$OUT/import_cost.log"
exit $rc
