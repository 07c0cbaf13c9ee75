#!/usr/bin/env bash
# aot under older cuda-core on the GPU (issue 34.1): examples/pystr-mypkg's kernels through each handle aot hands
# out (cuda.core.Kernel, CUfunction, CuPy), packaged and JIT-compiled (.ci/gpu/pystr_handles.py --jit), with
# cuda-core 0.7.0 (what a cuda-cccl[cu13]>=0.6,<0.7 stack brings) and 0.5.1 (the floor of aot's range).
#
# Run from the repository root on the GPU machine (no network; ../shared/gpu/README.md) with these Python 3.12
# wheels in $AOT_WHEELS (default .whl):
#   cccl_aot_cu13-0.1.0-py3-none-linux_x86_64.whl   python .ci/variant.py cu13 on a copy, pip wheel --no-deps
#   pystr_mypkg-0.1.0-*.whl                          AOT_WHEEL_SM=90 pip wheel --no-deps --no-build-isolation
#   cuda_core-0.7.0-*.whl, cuda_core-0.5.1-*.whl, platformdirs-*.whl
#       (bash ../shared/gpu/fetch_wheels.sh cuda-core==0.7.0 cuda-core==0.5.1 platformdirs)
# numpy, cuda-bindings 13, cuda-pathfinder, NVRTC and CuPy are the machine's own (its cuda-core 1.2.0 is shadowed).
#
# Must print, last:
#   cuda-core 0.7.0: 24 of 24 ok
#   cuda-core 0.5.1: N of 24 ok; the packaged kernel rows say "needs cuda-core>=0.6.0": as expected
# (N: 20 where the JIT's own cuda.core.Kernel rows pass under 0.5.1, 16 where they fail with the same line)
# and exit 0. Logs and JSON in $OUT.
set -uo pipefail
here=$PWD
OUT=${OUT:-/tmp/aot-gpu-out}
PY=${PYTHON:-python3}
WHL=${AOT_WHEELS:-$here/.whl}
mkdir -p "$OUT"
status=0
summary=()
for v in ${AOT_PINS_VERSIONS:-0.7.0 0.5.1}; do  # AOT_PINS_VERSIONS: fewer, where the carry cannot hold both wheels
  site=/tmp/aot-pins-site-$v
  rm -rf "$site"
  "$PY" -m pip install -q --no-index --no-deps --target "$site" "$WHL"/cccl_aot_cu13-*.whl "$WHL"/pystr_mypkg-*.whl \
    "$WHL"/platformdirs-*.whl "$WHL"/cuda_core-$v-*.whl >"$OUT/pins-$v-install.log" 2>&1 || { echo "install $v failed"; status=1; continue; }
  (cd /tmp && PYTHONPATH="$site" AOT_CACHE_DIR="/tmp/aot-pins-cache-$v" "$PY" "$here/.ci/gpu/pystr_handles.py" --jit \
    --json "$OUT/pins-$v.json" >"$OUT/pins-$v.log" 2>&1)
  tail -3 "$OUT/pins-$v.log"
  line=$("$PY" - "$OUT/pins-$v.json" "$v" <<'PY'
import json, sys
doc, v = json.load(open(sys.argv[1])), sys.argv[2]
rows = doc["rows"]
ok = sum(r["ok"] for r in rows)
if v == "0.5.1":  # the packaged Kernel handle needs 0.6: those rows fail with the feature's line, the rest pass
    packaged = rows[:len(rows) // 2]  # pystr_handles.py: the packaged registry's rows first, then the JIT's
    said = all("needs cuda-core>=0.6.0" in r.get("error", "") for r in packaged if r["handle"] == "kernel")
    other = [r for r in rows if not r["ok"] and not (r["handle"] == "kernel" and "needs cuda-core>=0.6.0"
                                                     in r.get("error", ""))]
    good = said and not other and not doc["cupy_compiled"]
    print(f"cuda-core {v}: {ok} of {len(rows)} ok; the packaged kernel rows say \"needs cuda-core>=0.6.0\": "
          f"{'as expected' if good else 'NOT as expected'}")
else:
    good = doc["all_ok"]
    print(f"cuda-core {v}: {ok} of {len(rows)} ok" + ("" if good else " (NOT as expected)"))
sys.exit(0 if good else 1)
PY
) || status=1
  summary+=("$line")
done
printf '%s\n' "${summary[@]}"
exit $status
