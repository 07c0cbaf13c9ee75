#!/usr/bin/env bash
# Every GPU check of aot in one run, for the lent GPU machine (no network; see ../shared/gpu/README.md).
#
# Run from the repository root there, with these ignored folders carried from the build host:
#   .whl/         Python 3.12 wheels the machine lacks (cuda-cccl, cuda-core, platformdirs, rich, PyYAML, ...),
#                 this checkout's own wheel (pip wheel --no-deps -w .whl .) and the example wheels
#                 (AOT_WHEEL_SM=90 pip wheel --no-deps --no-build-isolation -w .whl examples/<name>)
#   .gpu/default/ the default matrix built on the driverless host (python -m aot build --sm 90 --out .gpu/default)
#   .gpu/<name>/  further artifact sets to verify (each gets `aot verify --gpu`)
#   .gpu/cu12/ + .whl-cu12/  the cu12 build of the default matrix and cuda-bindings 12.9 (.ci/gpu_cu12.sh)
#   .gpu/gate/ + .gpu/mutants/  the release gate set and its mutants (.ci/gpu/make_mutants.py; .ci/gpu/gate.sh)
#   .gpu/algo/    tests/data/algorithms/build_matrix.yaml built the same way (operators from code: built with
#                 PYTHONPATH=tests/data), checked by tests/test_gpu_algorithms.py
# Writes every log and JSON table into $OUT/gpu-logs.tgz (the device tool returns at most 8 files) plus
# $OUT/summary.txt, and prints a summary table last.
set -uo pipefail
FINAL=${OUT:-/tmp/aot-gpu-out}
mkdir -p "$FINAL"
export OUT=$(mktemp -d)  # the sub-scripts write here too
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >"$OUT/pip.log" 2>&1 \
  || { cat "$OUT/pip.log"; exit 1; }
python3 -m compileall -q /tmp/site >/dev/null 2>&1  # as pip does for an end user: no timing includes compiling aot
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
# numpy >= 2.5 there dropped np.row_stack, which numba-cuda 0.30.4's JIT overloads (every JIT compile fails without it):
# a user's sitecustomize aliases it in every Python process (aot record's hook chains to it, as to any user's own).
mkdir -p /tmp/npfix && printf '%s\n' 'try:' '    import numpy as _np' '    if not hasattr(_np, "row_stack"): _np.row_stack = _np.vstack' \
  'except ImportError: pass' > /tmp/npfix/sitecustomize.py
export PYTHONPATH=/tmp/npfix:$PYTHONPATH
export AOT_CACHE_DIR=$(mktemp -d)  # a private, empty user cache: every fallback is observed from scratch
summary=()
step() {  # step NAME COMMAND...: run, log to $OUT/NAME.log, remember the exit code
  local name=$1; shift
  # AOT_GPU_ONLY=verify,gate,...: run only the steps of those groups (a step's group: its name up to the first '-'),
  # so the checks can be split over calls that each fit the device tool's 10 minutes.
  if [ -n "${AOT_GPU_ONLY:-}" ] && [[ ",$AOT_GPU_ONLY," != *",${name%%-*},"* ]]; then return 0; fi
  echo "== $name: $*"
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 40 "$OUT/$name.log"
  summary+=("$(printf '%-28s rc=%s' "$name" "$rc")")
}
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
# examples/lib-mypkg's runtime dependency (a stand-in for the heavy dataframe stack its users have installed): its
# operators from code live in modules that import it, and `verify --gpu --package mylib` runs them as references.
export PYTHONPATH=$PYTHONPATH:$PWD/examples/lib-mypkg/stubs
# The installed wheel's aot (not the checkout's): run from a folder without an aot/ package.
here=$PWD
cd /tmp
for d in "$here"/.gpu/*/; do
  name=$(basename "$d")
  [ -f "$d/manifest.json" ] || continue
  [ "$name" = cu12 ] && continue  # CUDA 12 artifacts need the CUDA 12 bindings: .ci/gpu_cu12.sh, below
  [ "$name" = algo ] && continue  # operators from code: tests/test_gpu_algorithms.py, below
  [ "$name" = gate ] && continue  # the release gate with its mutants: .ci/gpu/gate.sh, below
  [ "$name" = libset ] && continue  # the warm benchmark's library-shaped set: warm-handles, below
  step "verify-$name" python3 -m aot verify "$d" --gpu --json "$OUT/verify-$name.json"
done
for whl in "$here"/.whl/*.whl; do  # example packages: any wheel whose top-level package ships artifacts
  pkg=$(python3 -c "import sys, zipfile; n = {p.split('/')[0] for p in zipfile.ZipFile(sys.argv[1]).namelist() if p.endswith('/aot-package.json')}; print(*n)" "$whl")
  # --allow-unchecked: a package without [tool.aot.checks] for every kernel (adopt_mypkg, mylib) is listed as
  # unchecked (exit 7 without it, issue 36.3); .ci/gpu/replay_check.sh checks adopt_mypkg's kernels by replay.
  for p in $pkg; do step "verify-package-$p" python3 -m aot verify --gpu --package "$p" --allow-unchecked \
    --json "$OUT/package-$p.json"; done
done
cd "$here"
# The checkout's GPU tests (fallbacks, warmup, security, lean runtime), over the default set.
step pytest-gpu env AOT_GPU_ARTIFACTS="$here/.gpu/default" AOT_GPU_ALGO_ARTIFACTS="$here/.gpu/algo" AOT_GPU_NUMBA_SITE=/tmp/site \
  python3 -m pytest -m gpu -v -p no:cacheprovider -W ignore::pytest.PytestUnraisableExceptionWarning tests
# cu12 artifacts with the lean runtime and cuda-bindings 12.9 from .whl-cu12 (a private install dir).
[ -f .gpu/cu12/manifest.json ] && step cu12 bash .ci/gpu_cu12.sh
# The release gate: the gate set passes, every mutant fails (issue 16).
[ -f .gpu/gate/manifest.json ] && step gate bash .ci/gpu/gate.sh .gpu/gate .gpu/mutants
# The example packages installed lean, any import order (issue 15).
step downstream bash .ci/gpu/downstream.sh
# Issue 27: the example library's own tests launch its kernels and CCCL algorithms against numpy; aot record there.
step lib-example bash .ci/gpu/lib_example.sh
# Issue 28: a library's own compile call served packaged (0 NVRTC calls); a miss compiles once, then the user cache.
step adopt bash .ci/gpu/adopt.sh
# Issue 37 item 2: a compiled-in value edited after the build is refused at attach and JIT-compiled (writes B, not A).
[ -d .gpu/numba_digest ] && step numba-digest python3 .ci/gpu/numba_digest.py check .gpu/numba_digest
# Wrong numba kernels: edited @overload implementations refused (JIT writes 10), a launch-config kernel never packaged
# (JIT writes 64), a device function's kernel attached without nvJitLink (0 compiles). Then aot vs JIT launch cost.
[ -d .gpu/numba_wrong ] && step numba-wrong-kernels python3 .ci/gpu/numba_wrong_kernels.py check .gpu/numba_wrong
[ -d .gpu/numba_launch ] && step numba-launch python3 benchmarks/numba_launch.py run .gpu/numba_launch --profile
# Issue 37 item 1: flags as iterators, generators, bytes, ProgramOptions, ... select the unit built with them (writes 2).
[ -d .gpu/flag_spellings ] && step lookup-flags python3 .ci/gpu/flag_spellings.py check .gpu/flag_spellings
# Issue 37 item 3: a parent __init__ that changes a kernel module's text: the running text is served (JIT), not the cubin.
step lookup-live python3 .ci/gpu/live_text.py
# Issue 36: `aot record` on a GPU: numba kernels with their launched signatures, NVRTC names from the image, launches kept
# and replayed (a mutant caught).
step record-gpu bash .ci/gpu/record.sh
# Issue 35: CuPy's own kernels packaged: 0 CuPy compiles with an empty CUPY_CACHE_DIR; the first-call benchmark.
step cupy bash .ci/gpu/cupy_check.sh "${AOT_CUPY_RUNS:-3}"
# The same with examples/cupy-mypkg's wheel (its committed matrix built on the driverless host: .ci/gpu/prepare.sh),
# installed as users install it: nothing recorded or built here.
cupywhl=$(ls .whl/cupy_mypkg-*.whl 2>/dev/null | head -1)
[ -n "$cupywhl" ] && step cupy-wheel bash .ci/gpu/cupy_check.sh --wheel "$cupywhl" "${AOT_CUPY_RUNS:-3}"
# Issue 43: Triton kernels packaged: the example's set built here with the GPU hidden (a wheel built elsewhere serves
# only the Triton build and CPython it was built under), 0 Triton compiles, equal results, five edits compiled;
# first call aot vs Triton warm vs cold. With .whl/triton_mypkg-*.whl (built under this machine's Python 3.12 and
# Triton): the same from the wheel, installed as users install it.
step triton bash .ci/gpu/triton_check.sh "${AOT_TRITON_RUNS:-5}"
tritonwhl=$(ls .whl/triton_mypkg-*.whl 2>/dev/null | head -1)
[ -n "$tritonwhl" ] && step triton-wheel bash .ci/gpu/triton_check.sh --wheel "$tritonwhl" "${AOT_TRITON_RUNS:-5}"
# Issue 36.3: kernels without a written check replayed from the launches aot record kept; a mutant fails.
[ -d .gpu/replay ] && step replay bash .ci/gpu/replay_check.sh
# Issue 34: a CCCL wheel carrying blobs of several cuda-cccl releases, installed beside each (0 JIT), and one not carried
# (one line, JIT). Inputs: bash .ci/gpu/cccl_releases_prepare.sh (the wheels and the merged example).
[ -d .gpu/cccl-releases ] && step cccl-releases bash .ci/gpu/cccl_releases.sh
# Issue 30: a foreign set's code never imported by verify --gpu; compile errors without tracebacks.
[ -d .gpu/foreign_set ] && step foreign-set python3 .ci/gpu/foreign_set.py check .gpu/foreign_set
# Issue 31: numba-cuda kernels through their dispatchers, 0 compiles; first launches; the gate and its mutant.
[ -d .gpu/numba ] && step numba bash .ci/gpu/numba.sh /tmp/site .gpu/numba/jitsite "${AOT_NUMBA_RUNS:-5}" \
  .gpu/numba/mutsite axpy.0
# Warm at the floor: aot's whole-matrix warmup beside the floor, both cases (issues 17, 24, 29); AOT_WARM_RUNS=0 skips.
# The library-shaped set (benchmarks/gen_libset.py, built into .gpu/libset by prepare.sh) beside the default one.
libset=(); [ -f .gpu/libset/manifest.json ] && libset=("libset=$here/.gpu/libset")
[ "${AOT_WARM_RUNS:-7}" != 0 ] && step warm env AOT_WARM_RUNS=${AOT_WARM_RUNS:-7} bash .ci/gpu/warm.sh "$here/.gpu/default" \
  "${libset[@]}"
[ ${#libset[@]} -gt 0 ] && step warm-handles python3 .ci/gpu/warm_handles.py .gpu/libset --json "$OUT/warm_handles.json"
echo "== summary"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt" "$FINAL/summary.txt"
tar czf "$FINAL/gpu-logs.tgz" -C "$OUT" .
