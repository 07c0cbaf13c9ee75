#!/usr/bin/env bash
# adopt-mypkg on the GPU (issue 28): a library that adopted aot in its own compile function. Builds nothing.
#
# Run from the repository root on the GPU machine (no network), with these Python 3.12 wheels in .whl/ (or
# $AOT_WHEELS), made on the CPU host by `bash .ci/gpu/prepare.sh` (it builds every examples/* wheel):
#   cccl_aot_cu13-*.whl (else cccl_aot-*.whl), adopt_mypkg-0.1.0-*.whl, cuda_core-1.2.2-*.whl, platformdirs-*.whl,
#   and cuda_cccl-1.2.1-*.whl where the runtime wheel still requires it.
# A fresh venv gets exactly those (the machine's numpy, cuda-bindings and NVRTC after them); a private, empty
# AOT_CACHE_DIR. Then, each in a fresh process run from /tmp (.ci/gpu/adopt_check.py):
#   1. packaged: every kernel through the library's unchanged launch path (compile_kernels -> aot.by_source,
#      CUfunction, cuLaunchKernel) and through cuda.core's Program.compile(cache=aot.program_cache(...)):
#      results equal numpy's, 0 NVRTC calls (counted), every source served "packaged";
#   2. a source the wheel does not carry: 1 NVRTC call (both paths share one user-cache entry);
#   3. the same source in the NEXT process: 0 NVRTC calls, served from the user cache.
# Writes adopt.json into $OUT; exits non-zero when a step fails.
set -uo pipefail
here=$PWD
OUT=${OUT:-/tmp/aot-gpu-out}
PY=${PYTHON:-python3}
WHL=${AOT_WHEELS:-$here/.whl}
mkdir -p "$OUT"
unset PYTHONPATH
runtime=$(ls "$WHL"/cccl_aot_cu13-*.whl 2>/dev/null | head -1)
[ -n "$runtime" ] || runtime=$(ls "$WHL"/cccl_aot-*.whl 2>/dev/null | head -1)
wheels=("$runtime")
for pat in 'adopt_mypkg-0.1.0-*.whl' 'cuda_core-1.2.2-*.whl' 'platformdirs-*.whl'; do
  wheels+=("$(ls "$WHL"/$pat 2>/dev/null | head -1)")
done
for w in "${wheels[@]}"; do
  [ -n "$w" ] && [ -f "$w" ] || { echo "adopt: missing a wheel in $WHL (have: $(ls "$WHL" | tr '\n' ' '))"; exit 2; }
done
cccl=$(ls "$WHL"/cuda_cccl-1.2.1-*.whl 2>/dev/null | head -1)
[ -n "$cccl" ] && wheels+=("$cccl")
env_dir=$(mktemp -d /tmp/aot-adopt.XXXXXX)
trap 'rm -rf "$env_dir"' EXIT
"$PY" -m venv --without-pip "$env_dir/venv" || exit 1
VPY=$env_dir/venv/bin/python
site=$("$VPY" -c "import sysconfig; print(sysconfig.get_path('purelib'))")
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$site" "${wheels[@]}" >"$OUT/adopt-pip.log" 2>&1 \
  || { cat "$OUT/adopt-pip.log"; exit 1; }
"$PY" -c "import site; print('\n'.join([*site.getsitepackages(), site.getusersitepackages()]))" > "$site/zz_machine.pth"
export AOT_CACHE_DIR=$env_dir/cache PYTHONUNBUFFERED=1
check=$here/.ci/gpu/adopt_check.py
cd /tmp
rc=0
tag=unpackaged-$$-$RANDOM
{
  echo '{'
  echo '"packaged":';   "$VPY" "$check" packaged || rc=1
  echo ', "first":';    "$VPY" "$check" unpackaged "$tag" 1 || rc=1
  echo ', "next":';     "$VPY" "$check" unpackaged "$tag" 0 || rc=1
  echo '}'
} > "$OUT/adopt.json" 2>"$OUT/adopt.log"
cat "$OUT/adopt.json"; tail -n 20 "$OUT/adopt.log"
echo "adopt: rc=$rc"
exit $rc
