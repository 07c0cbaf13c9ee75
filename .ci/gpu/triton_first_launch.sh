#!/usr/bin/env bash
# Issue 43 on the GPU host (the lent H200: Python 3.12, torch 2.11, Triton 3.6.0), one command:
#   bash .ci/gpu/triton_first_launch.sh --wheel WHEEL [N]   examples/triton-mypkg's wheel built on the CPU host
#   bash .ci/gpu/triton_first_launch.sh [N]                 the set built here first, with the GPU hidden
# WHEEL: built on the CPU host under the same Python minor and Triton release as here (the C launchers are built for
# the CPython the build runs under): in a python3.12 venv with triton==3.6.0 and aot's dependencies,
#   AOT_WHEEL_SM=90 pip wheel --no-build-isolation --no-deps -w .whl examples/triton-mypkg
# and carry .whl. N: fresh processes per mode (default 5).
#   1. .ci/gpu/triton_check.sh (the same arguments): every packaged specialisation 0 compiles and bitwise equal to
#      Triton's own JIT, the five edits, and N fresh processes per mode: aot (empty Triton cache: kernels and C
#      launchers served), warm (Triton's cache holds everything), cold (empty cache, no set);
#   2. the first launch: no C module built in any aot run (Triton's cache holds no .so after it), cold runs built
#      them (the measure sees a build), and all 8 calls' first launch aot/warm <= 1.1 (medians);
#   3. the gate: `aot gate` on the package passes; its mutant (add.0 built from an edited body, shipped under add.0's
#      key: .ci/gpu/edit_mutant.py) FAILS it (exit 7) naming add.0.
# Logs under $OUT/triton-first-launch (default /tmp/aot-triton-first-launch); the table last, also written to
# $OUT/triton-first-launch/triton_first_launch.md (commit it as benchmarks/results/triton_first_launch_h200.md).
# Exit 0 only when every check passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
base=${OUT:-/tmp/aot-triton-first-launch}
out=$base/triton-first-launch
mkdir -p "$out"
wheel=
if [ "${1:-}" = --wheel ]; then
  wheel=$(realpath "${2:?usage: triton_first_launch.sh --wheel WHEEL [N]}")
  shift 2
fi
runs=${1:-5}
if [ -n "$wheel" ]; then args=(--wheel "$wheel" "$runs"); else args=("$runs"); fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
fail=0

# 1. triton_check.sh: correctness, edits, the N-process benchmark
OUT=$out/check bash "$here/triton_check.sh" "${args[@]}" >"$out/check.log" 2>&1 || fail=1
tail -n 15 "$out/check.log"
cdir=$out/check/triton$([ -n "$wheel" ] && echo -wheel)

# 2. the first launch: launchers served, aot within 1.1x of warm
python3 - "$cdir" <<'PY' | tee "$out/first-launch.log" || fail=1
import glob, json, statistics, sys
d = sys.argv[1]
runs = {m: [json.load(open(p)) for p in sorted(glob.glob(f"{d}/{m}-*.json"))] for m in ("aot", "warm", "cold")}
if not all(runs.values()):
    print("first launch: FAIL (no benchmark runs)")
    sys.exit(1)
tot = {m: statistics.median(sum(r["ms"] for r in j["rows"].values()) for j in js) for m, js in runs.items()}
first = {m: statistics.median(j["rows"]["add.0"]["ms"] for j in js) for m, js in runs.items()}
built = {m: sorted({so for j in js for so in j.get("c_modules_in_cache", [])}) for m, js in runs.items()}
ok = not built["aot"] and bool(built["cold"]) and tot["aot"] <= 1.1 * tot["warm"]
print(f"C modules Triton built in the aot runs: {built['aot'] or 'none'}; in the cold runs: {built['cold']}")
print(f"all 8 first calls (median of {len(runs['aot'])} processes): aot {tot['aot']:.1f} ms, warm {tot['warm']:.1f} ms, "
      f"cold {tot['cold']:.1f} ms; aot/warm {tot['aot'] / tot['warm']:.3f}, aot/cold {tot['aot'] / tot['cold']:.3f}")
print(f"add.0 (the first launch of the process): aot {first['aot']:.1f} ms, warm {first['warm']:.1f} ms, "
      f"cold {first['cold']:.1f} ms")
print("first launch:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY

# 3. the gate and its Triton mutant
work=$(mktemp -d)
sm=$(python3 -c "import torch; a, b = torch.cuda.get_device_capability(); print(a * 10 + b)")
mkdir -p "$work/site"
if [ -n "$wheel" ]; then
  python3 -m pip install -q --no-index --no-deps --target "$work/site" "$wheel" >"$out/gate-install.log" 2>&1 || fail=1
else
  cp -r "$repo/examples/triton-mypkg/triton_mypkg" "$work/site/" && rm -rf "$work/site/triton_mypkg/artifacts"
  (cd "$repo/examples/triton-mypkg" && CUDA_VISIBLE_DEVICES= TRITON_CACHE_DIR="$work/bc" python3 -m aot build \
     --matrix build_matrix.yaml --sm "$sm" --jobs 4 --quiet --out "$work/site/triton_mypkg/artifacts") \
     >"$out/gate-build.log" 2>&1 || fail=1
fi
(cd "$repo" && CUDA_VISIBLE_DEVICES= TRITON_CACHE_DIR="$work/mc" python3 .ci/gpu/edit_mutant.py \
   --project examples/triton-mypkg --base "$work/site/triton_mypkg/artifacts" --spec add.0 \
   --file triton_mypkg/kernels.py --edit "mask=m) + tl.load(y_ptr" "mask=m) - tl.load(y_ptr" --out "$work/mutant") \
   >"$out/mutant-build.log" 2>&1 || { tail -n 5 "$out/mutant-build.log"; fail=1; }
mkdir -p "$work/msite" && cp -r "$work/site/triton_mypkg" "$work/msite/" && rm -rf "$work/msite/triton_mypkg/artifacts" \
  && cp -r "$work/mutant" "$work/msite/triton_mypkg/artifacts"
cd "$work"  # never the checkout's examples: the installed package
PYTHONPATH="$work/site:$PYTHONPATH" timeout 900 python3 -m aot gate --package triton_mypkg --json "$out/gate.json" \
  --logs "$out/gate-logs" -- python3 "$here/gate_workloads.py" triton >"$out/gate.log" 2>&1
grc=$?
PYTHONPATH="$work/msite:$PYTHONPATH" timeout 900 python3 -m aot gate --package triton_mypkg --json "$out/mutant.json" \
  --logs "$out/mutant-logs" -- python3 "$here/gate_workloads.py" triton >"$out/mutant.log" 2>&1
mrc=$?
named=$(grep -m1 "^FAILED add.0 " "$out/mutant.log" || true)
specs=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sum(r['status']=='ok' for r in d['specs']), 'of', len(d['specs']))" "$out/gate.json" 2>/dev/null || echo "?")
ok_gate=$([ $grc -eq 0 ] && echo "pass ($specs ok)" || echo "FAIL(rc $grc)")
ok_mut=$([ $mrc -eq 7 ] && [ -n "$named" ] && echo "caught ($named)" || echo "MISSED(rc $mrc)")
[ $grc -eq 0 ] && [ $mrc -eq 7 ] && [ -n "$named" ] || fail=1
cd "$out" && rm -rf "$work"

{
  echo "# Triton first launch with the C launchers shipped (issue 43), $(date -u +%F)"
  echo
  sed -n 1p "$cdir/env.log"
  echo
  cat "$cdir/bench.md" 2>/dev/null
  echo
  cat "$out/first-launch.log"
  echo
  echo "packaged == Triton's JIT, 0 compiles: $(tail -n 1 "$cdir/check.log" 2>/dev/null); edits: $(grep -c ': ok$' "$cdir/edits.log" 2>/dev/null || echo 0) of 5 ok"
  echo "aot gate triton_mypkg: $ok_gate"
  echo "aot gate, mutant add.0: $ok_mut"
  echo "triton_first_launch: $([ $fail = 0 ] && echo PASS || echo FAIL)"
} | tee "$out/triton_first_launch.md"
exit $fail
