#!/usr/bin/env bash
# cu12 artifacts on the lent GPU with the lean runtime (issue 11, part 4). Driver 580 runs CUDA 12 code;
# the machine has cuda-bindings 13 and the CUDA 13 toolkit, and nothing of CUDA 12 but what we carry.
#
# Run from the repository root, with these ignored folders carried from the build host:
#   .gpu/cu12/   the default matrix built with the cu12 toolchain (a venv with ".[cu12]":
#                python -m aot build --sm 90 --out .gpu/cu12)
#   .whl-cu12/   cuda-bindings 12.9 for Python 3.12 (7.6 MB; replaces the machine's 13.x in a private dir)
#   .whl/        cuda-cccl 1.2.1, cuda-core 1.2.2, platformdirs (shared with the cu13 checks), and
#                this checkout's wheel (only used where there is no C compiler, see below)
# Installs those into a private --target dir that shadows the machine's packages, forces nothing: no
# NVRTC 12 / nvJitLink 12 exist there, so aot's lean runtime loads its stand-ins by itself. Then:
# what the runtime found (cuda-bindings major, stand-ins), `aot verify --gpu --json $OUT/cu12.json`,
# the warmup benchmark on the cu12 set, and a table last.
#
#   bash .ci/gpu_cu12.sh            on the GPU machine
#   AOT_CU12_GPU=0 bash .ci/gpu_cu12.sh   elsewhere: the same install and imports, `verify` without --gpu
# Knobs (for testing the script off the GPU machine): PYTHON, AOT_CU12_SET, AOT_CU12_WHEELS, AOT_WHEELS.
set -uo pipefail
here=$PWD
OUT=${OUT:-/tmp/aot-gpu-out}
PY=${PYTHON:-python3}
SET=${AOT_CU12_SET:-$here/.gpu/cu12}
WHL12=${AOT_CU12_WHEELS:-$here/.whl-cu12}
WHL=${AOT_WHEELS:-$here/.whl}
GPU=${AOT_CU12_GPU:-1}
mkdir -p "$OUT"
[ -f "$SET/manifest.json" ] || { echo "gpu_cu12: no artifact set at $SET (build it with the cu12 toolchain)"; exit 2; }
site=$(mktemp -d /tmp/aot-cu12-site.XXXXXX)
export AOT_CACHE_DIR=$(mktemp -d /tmp/aot-cu12-cache.XXXXXX)  # private and empty: nothing from cu13 runs

wheels=("$WHL12"/cuda_bindings-12.9.*.whl "$WHL"/cuda_cccl-1.2.1-*.whl "$WHL"/cuda_core-1.2.2-*.whl
        "$WHL"/platformdirs-*.whl)
# aot itself: this checkout, whose stand-ins are compiled on first use; without a C compiler, the carried
# wheel of aot (its stand-ins were built by CMake), run from a folder with no aot/ in it.
if command -v "${CC:-cc}" >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1; then
  aot_from=checkout
  export PYTHONPATH="$here:$site"
  run_dir=$here
else
  aot_from=wheel
  wheels+=("$WHL"/cccl_aot-*.whl)
  export PYTHONPATH="$site"
  run_dir=/tmp
fi
for w in "${wheels[@]}"; do
  [ -f "$w" ] || { echo "gpu_cu12: missing wheel $w"; exit 2; }
done
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$site" "${wheels[@]}" >"$OUT/cu12-pip.log" 2>&1 \
  || { cat "$OUT/cu12-pip.log"; exit 1; }
export PYTHONUNBUFFERED=1
cd "$run_dir" || exit 1

summary=()
step() {  # step NAME COMMAND...: run, log to $OUT/cu12-NAME.log, remember the exit code
  local name=$1; shift
  echo "== cu12 $name: $*"
  "$@" >"$OUT/cu12-$name.log" 2>&1
  local rc=$?
  tail -n 30 "$OUT/cu12-$name.log"
  summary+=("$(printf 'cu12 %-20s rc=%s' "$name" "$rc")")
  return $rc
}

# 1. What the runtime sees: CUDA 12 bindings from the private dir, the stand-ins in place of NVRTC 12.
step runtime "$PY" - "$aot_from" <<'EOF'
import importlib.metadata as md, json, sys
import aot, cuda.bindings
from aot.runtime.loader import lean as _lean
versions = {d: md.version(d) for d in ("cuda-bindings", "cuda-cccl", "cuda-core", "cuda-pathfinder")}
st = _lean.prepare()
print(json.dumps({"aot_from": sys.argv[1], "aot": aot.__file__, "cuda.bindings": cuda.bindings.__file__,
                  "versions": versions, "cuda_major": st.cuda_major, "libs": st.libs}, indent=1))
print(st.describe())
assert st.cuda_major == 12, f"expected the CUDA 12 bindings, got {st.cuda_major}"
cc = _lean.import_cuda_compute()
print("cuda.compute:", cc.__file__)
EOF

# 2. Every artifact: integrity, then (on the GPU) load, run and compare with numpy.
if [ "$GPU" = 1 ]; then
  step verify "$PY" -m aot verify "$SET" --gpu --json "$OUT/cu12.json"
  # 3. Warmup with the CUDA 12 bindings (the CUlibrary layout is checked for them too).
  step warm "$PY" "$here/benchmarks/warm.py" "$SET" --runs 1 --modes warm --json "$OUT/warm-cu12.json"
  step stub-calls "$PY" - "$SET" <<'EOF'
import json, sys, warnings
warnings.simplefilter("ignore")
from aot.runtime.loader import lean as _lean
from aot.runtime.loader.registry import Registry
from aot.verify.gpu import verify_gpu
_lean.prepare()
rows = verify_gpu(Registry(sys.argv[1]))
calls = _lean.stub_calls()
print(json.dumps({"stand_ins": sorted(_lean.state().stand_ins), "calls": calls,
                  "ok": sum(r.ok for r in rows), "rows": len(rows)}))
assert not any(calls.values()), f"a stand-in was called: {calls}"
EOF
else
  step verify "$PY" -m aot verify "$SET"
fi

echo "== cu12 table"
if [ -f "$OUT/cu12.json" ] && [ "$GPU" = 1 ]; then
  "$PY" - "$OUT/cu12.json" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))
print(f"{'spec':28} {'kind':10} {'sm':>4} {'source':9} {'status':22} {'ms':>8}  detail")
for r in rows:
    print(f"{r['spec']:28} {r['kind']:10} {r['sm']!s:>4} {r['source']:9} {r.get('status') or ('ok' if r['ok'] else 'failed'):22} "
          f"{r['ms']:8.2f}  {r.get('detail', '')[:60]}")
print(f"{sum(r['ok'] for r in rows)} of {len(rows)} ok")
EOF
fi
printf '%s\n' "${summary[@]}" | tee "$OUT/cu12-summary.txt"
! grep -q 'rc=[1-9]' "$OUT/cu12-summary.txt"
