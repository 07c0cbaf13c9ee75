#!/usr/bin/env bash
# Issue 20's GPU evidence in one run on the lent GPU machine (no network; see ../shared/gpu/README.md):
#   1. the release gate (.ci/gpu/gate.sh): `aot verify --gpu` passes every spec of tests/data/gate (with
#      issue 20's forms: every iterator kind, state, C++ operators, a search over counting, determinism) and
#      FAILS every mutant set (.ci/gpu/make_mutants.py: state swapped / offset, transform swapped, zip
#      members swapped, iterator offset changed, and issue 16's);
#   2. one artifact of a stateful select serves two masks in one process (tests/test_gpu_state.py);
#   3. the example packages from a lean install (.ci/gpu/downstream.sh), geo-mypkg's API against numpy.
# Built on the CPU host and carried: .gpu/gate, .gpu/mutants, and in $AOT_FORMS_WHEELS (default .whl-forms) the
# runtime wheel cccl_aot_cu13-*.whl, the example wheels (mypkg_hatch, mypkg_skbuild, pystr_mypkg, mypkg_geo), PyYAML;
# the Python 3.12 wheels of cuda-cccl 1.2.1, cuda-core 1.2.2, platformdirs, rich come from $AOT_BASE_WHEELS
# (default ../.whl). Prints a short table last; into $OUT: summary.txt, gate.json, downstream.json,
# two_masks.log and forms-logs.tgz (every log; the device tool returns at most 8 files, 2 folders down).
set -uo pipefail
here=$PWD
RESULT=${OUT:-/tmp/aot-forms-out}
mkdir -p "$RESULT"
FINAL=$(mktemp -d /tmp/aot-forms-work.XXXXXX)
wheels=$(mktemp -d /tmp/aot-forms-wheels.XXXXXX)
cp "${AOT_BASE_WHEELS:-$here/../.whl}"/*.whl "${AOT_FORMS_WHEELS:-$here/.whl-forms}"/*.whl "$wheels"/
python3 -m pip install -q --no-index --no-deps --target /tmp/site \
  "$wheels"/cuda_cccl-*.whl "$wheels"/cuda_core-*.whl "$wheels"/platformdirs-*.whl "$wheels"/rich-*.whl \
  "$wheels"/markdown_it_py-*.whl "$wheels"/mdurl-*.whl "$wheels"/pygments-*.whl "$wheels"/PyYAML-*.whl \
  >"$FINAL/pip.log" 2>&1 || { cat "$FINAL/pip.log"; exit 1; }
export PYTHONPATH=/tmp/site:$here PYTHONUNBUFFERED=1   # aot from this checkout (gate, two-masks test)
export AOT_CACHE_DIR=$(mktemp -d)

t0=$(date +%s)
AOT_GATE_ARTIFACTS=$here/.gpu/gate python3 -m pytest -q -s -m gpu -p no:cacheprovider tests/test_gpu_state.py \
  >"$FINAL/two_masks.log" 2>&1
rc_state=$?
t1=$(date +%s)
AOT_WHEELS=$wheels OUT=$FINAL/downstream timeout 240 bash .ci/gpu/downstream.sh >"$FINAL/downstream.log" 2>&1
rc_ds=$?
t2=$(date +%s)
OUT=$FINAL/gate timeout "${AOT_FORMS_GATE_TIMEOUT:-420}" bash .ci/gpu/gate.sh .gpu/gate .gpu/mutants >"$FINAL/gate.log" 2>&1
rc_gate=$?
t3=$(date +%s)

echo "== gate (tail)"; tail -n 45 "$FINAL/gate.log"
echo "== two masks (tail)"; tail -n 30 "$FINAL/two_masks.log"
echo "== downstream (tail)"; tail -n 12 "$FINAL/downstream.log"
echo
printf '%-34s %4s %6s  %s\n' check rc s result
gate_line=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"base ok={d['base_ok']}; mutants {d['score']} FAILED\")" "$FINAL/gate/gate.json" 2>/dev/null || echo "no gate.json")
{
printf '%-34s %4s %6s  %s\n' "one select artifact, two masks" "$rc_state" "$((t1 - t0))" "$(tail -n 1 "$FINAL/two_masks.log")"
printf '%-34s %4s %6s  %s\n' "examples, lean install (+geo api)" "$rc_ds" "$((t2 - t1))" "$(grep -m1 '^geo api' "$FINAL/downstream.log" || echo 'see downstream.log')"
printf '%-34s %4s %6s  %s\n' "gate set + mutants (verify --gpu)" "$rc_gate" "$((t3 - t2))" "$gate_line"
} | tee "$RESULT/summary.txt"
cp "$FINAL/gate/gate.json" "$RESULT/gate.json" 2>/dev/null
cp "$FINAL/downstream/downstream.json" "$RESULT/downstream.json" 2>/dev/null
cp "$FINAL/two_masks.log" "$RESULT/two_masks.log" 2>/dev/null
tar czf "$RESULT/forms-logs.tgz" -C "$FINAL" . 2>/dev/null
[ "$rc_gate" = 0 ] && [ "$rc_state" = 0 ] && [ "$rc_ds" = 0 ]
