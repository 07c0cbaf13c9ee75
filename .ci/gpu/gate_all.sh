#!/usr/bin/env bash
# Issue 41 on the GPU host, one command: every family's library (Triton's built here, the GPU hidden) passes `aot gate` through its own workload (no
# --allow-unchecked, no --allow-unlaunched), one mutant per family FAILS it naming the spec and the first
# differing launch, every workload runs under AOT_NO_JIT=raise with no compile, and an unpackaged kernel trips it.
#
#   bash .ci/gpu/gate_all_prepare.sh            (CPU host, once: .gpu/gate41 and .whl; carry both)
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site; \
#     bash .ci/gpu/gate_all.sh                  (GPU host)
#
# Logs, each gate's --json and launch logs, and the no-JIT reports under $OUT (default /tmp/aot-gate41-out).
# Prints a table last; exit 0 only when every check passed.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
G=$here/.gpu/gate41
W=$here/.ci/gpu/gate_workloads.py
out=${OUT:-/tmp/aot-gate41-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
[ -d "$G" ] || { echo "no $G: run .ci/gpu/gate_all_prepare.sh on the CPU host and carry .gpu/gate41"; exit 2; }
python3 -c "import aot, cupy, numba.cuda, cuda.core; print('aot', aot.__version__, 'cupy', cupy.__version__)" \
  || { echo "gate_all: FAIL (aot, CuPy, numba-cuda or cuda.core not importable)"; exit 2; }
# numpy >= 2.5 there dropped np.row_stack, which numba-cuda 0.30.4's JIT overloads (as .ci/gpu_checks.sh does: a
# user's sitecustomize aliases it in every Python process; aot gate's hook chains to it, as to any user's own)
mkdir -p /tmp/npfix && printf '%s\n' 'try:' '    import numpy as _np' '    if not hasattr(_np, "row_stack"): _np.row_stack = _np.vstack' \
  'except ImportError: pass' > /tmp/npfix/sitecustomize.py
export PYTHONPATH=/tmp/npfix${PYTHONPATH:+:$PYTHONPATH}
declare -A PKG=([cccl]=gate_cccl [adopt]=adopt_mypkg [numba]=numba_mypkg [cupy]=cupy_mypkg [triton]=triton_mypkg)
declare -A CMD=([cccl]="python3 $W cccl" [adopt]="python3 $W adopt" [numba]="python3 $W numba"
                [cupy]="python3 -m cupy_mypkg.workload float32 float64" [triton]="python3 $W triton")
declare -A SPEC=([cccl]=gate_sum_i64 [adopt]=saxpy [numba]=axpy.0 [cupy]=cupy_subtract__float32_float32_float32.0
                 [triton]=add.0)
fams=${AOT_GATE_FAMILIES:-"cccl adopt numba cupy"}  # AOT_GATE_FAMILIES: some of them (a shorter run)
# Triton: built HERE with the GPU hidden (a set serves the Triton release it was built under, and the CPU host's
# Triton is another: docs/triton.md), then its mutant: add.0's sum made a difference, shipped under add.0's key
if [ -z "${AOT_GATE_FAMILIES:-}" ] && python3 -c "import torch, triton" 2>/dev/null; then
  T=$out/triton-built && rm -rf "$T" && mkdir -p "$T/site"
  cp -r "$here/examples/triton-mypkg/triton_mypkg" "$T/site/" && rm -rf "$T/site/triton_mypkg/artifacts"
  (cd "$here/examples/triton-mypkg" && CUDA_VISIBLE_DEVICES= python3 -m aot build --matrix build_matrix.yaml --sm 90 \
     --jobs 4 --quiet --out "$T/site/triton_mypkg/artifacts") >"$out/triton-build.log" 2>&1 &&
  (cd "$here" && CUDA_VISIBLE_DEVICES= python3 .ci/gpu/edit_mutant.py --project examples/triton-mypkg \
     --base "$T/site/triton_mypkg/artifacts" --spec add.0 --file triton_mypkg/kernels.py \
     --edit "mask=m) + tl.load(y_ptr" "mask=m) - tl.load(y_ptr" --out "$T/mutant") >>"$out/triton-build.log" 2>&1 &&
  mkdir -p "$G/triton" && rm -rf "$G/triton/site" "$G/triton/mutant" && cp -r "$T/site" "$T/mutant" "$G/triton/" &&
  fams="$fams triton" || { echo "gate_all: FAIL (building triton-mypkg: $out/triton-build.log)"; fail_triton=1; }
else
  echo "gate_all: FAIL (torch or triton not importable: the Triton family is not checked)"; fail_triton=1
fi
cd "$(mktemp -d)"  # never the checkout's aot/: the installed one
table=() fail=${fail_triton:-0}
for fam in $fams; do
  pkg=${PKG[$fam]} site=$G/$fam/site
  # 1. the library's own workload: packaged == JIT, launch by launch, every shipped spec launched
  PYTHONPATH="$site:$PYTHONPATH" timeout 900 python3 -m aot gate --package "$pkg" --json "$out/gate-$fam.json" \
    --logs "$out/logs-$fam" -- ${CMD[$fam]} >"$out/gate-$fam.log" 2>&1
  grc=$?
  tail -n 4 "$out/gate-$fam.log"
  # 2. the mutant: one spec built from edited code under the original key
  mut=$(mktemp -d)
  cp -r "$site/$pkg" "$mut/" && rm -rf "$mut/$pkg/artifacts" && cp -r "$G/$fam/mutant" "$mut/$pkg/artifacts"
  PYTHONPATH="$mut:$PYTHONPATH" timeout 900 python3 -m aot gate --package "$pkg" --json "$out/mutant-$fam.json" \
    -- ${CMD[$fam]} >"$out/mutant-$fam.log" 2>&1
  mrc=$?
  named=$(grep -m1 "^FAILED ${SPEC[$fam]} " "$out/mutant-$fam.log" || true)
  echo "mutant: ${named:-(not named)}"
  # 3. no JIT after startup: the packaged workload compiles nothing (empty CuPy and Triton caches: nothing hides a
  #    compile)
  PYTHONPATH="$site:$PYTHONPATH" AOT_NO_JIT=raise AOT_NO_JIT_REPORT="$out/nojit-$fam.json" \
    CUPY_CACHE_DIR="$(mktemp -d)" TRITON_CACHE_DIR="$(mktemp -d)" timeout 600 ${CMD[$fam]} >"$out/nojit-$fam.log" 2>&1
  nrc=$?
  compiles=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['compiles'])" "$out/nojit-$fam.json" \
             2>/dev/null || echo "?")
  ok_gate=$([ $grc -eq 0 ] && echo pass || echo "FAIL($grc)")
  ok_mut=$([ $mrc -eq 7 ] && [ -n "$named" ] && echo caught || echo "MISSED($mrc)")
  ok_nojit=$([ $nrc -eq 0 ] && [ "$compiles" = 0 ] && echo "0 compiles" || echo "FAIL(rc $nrc, $compiles compiles)")
  [ "$ok_gate" = pass ] && [ "$ok_mut" = caught ] && [ "$ok_nojit" = "0 compiles" ] || fail=1
  specs=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sum(r['status']=='ok' for r in d['specs']), 'of', len(d['specs']))" "$out/gate-$fam.json" 2>/dev/null || echo "?")
  table+=("$(printf '%-6s %-14s %-12s %-10s %s' "$fam" "$ok_gate" "$specs ok" "$ok_mut" "$ok_nojit")")
done
# 4. an unpackaged kernel (numba-mypkg's axpy at int32) trips AOT_NO_JIT=raise, naming it
PYTHONPATH="$G/numba/site:$PYTHONPATH" AOT_NO_JIT=raise timeout 600 python3 "$W" unpackaged >"$out/unpackaged.log" 2>&1
urc=$?
trip=$(grep -m1 -o "numba compile of numba_mypkg.kernels:axpy(array(int32.* after startup under AOT_NO_JIT=raise" \
       "$out/unpackaged.log" || true)
[ $urc -ne 0 ] && [ -n "$trip" ] || fail=1
echo
echo "family gate           specs        mutant     no-JIT (packaged workload)"
printf '%s\n' "${table[@]}"
echo "unpackaged kernel under AOT_NO_JIT=raise: $([ -n "$trip" ] && echo "raised ($trip)" || echo "NOT raised (rc $urc)")"
echo "gate_all: $([ $fail -eq 0 ] && echo ok || echo FAIL)"
exit $fail
