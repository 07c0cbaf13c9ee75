#!/usr/bin/env bash
# Triton kernels shipped ahead of time (issue 43), on a GPU host with torch and Triton (torch 2.11 + Triton 3.6.0 on
# the lent H200) and aot importable (`python3 -m aot` works: this checkout on PYTHONPATH, PyYAML, rich):
#   bash .ci/gpu/triton_check.sh --wheel WHEEL [N]   examples/triton-mypkg's wheel, built on the CPU host
#   bash .ci/gpu/triton_check.sh [N]                 the set built here first, with the GPU hidden
# N: benchmark processes per mode (default 5; 0: no benchmark).
# A packaged cubin is served only under the Triton build it was built with: Triton's own cache key hashes its build
# (libtriton differs per CPython: a wheel built under Python 3.11 never serves 3.12). With --wheel the wheel must
# come from this host's Python and Triton release (AOT_WHEEL_SM=90 pip wheel --no-build-isolation --no-deps -w .whl
# examples/triton-mypkg, in a python3.12 venv with triton==3.6.0); step 1 says when it does not. Without --wheel,
# `aot bundle` builds the matrix for this GPU's SM with CUDA_VISIBLE_DEVICES= (no device: as on the driverless host)
# and the package with its artifacts is installed as a wheel would (a copy; no hatchling needed here).
# Then, each in a fresh process with an empty TRITON_CACHE_DIR:
#   2. every packaged specialisation: 0 Triton compiles, results bitwise equal to Triton's own JIT of the same
#      package without artifacts; add at BLOCK=512 (not packaged) compiles once;
#   3. five edits after the build (the kernel's source, a @triton.jit it calls, a constexpr global, a module attribute
#      cfg.OFFSET in the file, cfg.OFFSET assigned at run time): the edited kernel compiles, results equal Triton's
#      own JIT of the edited package;
#   4. first call of each, N fresh processes per mode: aot (empty cache), Triton's cache warm, Triton cold.
# Logs and JSON under $OUT/triton ($OUT/triton-wheel with --wheel); the table last. Exit 0 only when every check passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${OUT:-/tmp/aot-triton-out}/triton
wheel=
if [ "${1:-}" = --wheel ]; then
  wheel=${2:?usage: triton_check.sh --wheel WHEEL [N]}
  shift 2
  out=$out-wheel  # beside the build-here run's files, not over them
fi
runs=${1:-5}
mkdir -p "$out"
work=$(mktemp -d)
export PYTHONUNBUFFERED=1 PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
fail=0
sm=$(python3 -c "import torch; a, b = torch.cuda.get_device_capability(); print(a * 10 + b)")
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'sm', $sm)" | tee "$out/env.log"

# 1. the package with its artifacts (site) and without (jit)
mkdir -p "$work/site" "$work/jit"
if [ -n "$wheel" ]; then
  python3 -m pip install -q --no-index --no-deps --target "$work/site" "$wheel" >"$out/install.log" 2>&1 \
    || { cat "$out/install.log"; echo "triton check: FAIL (pip install $wheel)"; exit 1; }
else
  cp -r "$repo/examples/triton-mypkg" "$work/project"
  rm -rf "$work/project/build" "$work/project/triton_mypkg/artifacts"  # a build made elsewhere is not this one
  (cd "$work/project" && CUDA_VISIBLE_DEVICES= TRITON_CACHE_DIR="$work/build-cache" timeout 900 \
    python3 -m aot bundle --sm "$sm" --jobs 4) >"$out/build.log" 2>&1 \
    || { tail -n 20 "$out/build.log"; echo "triton check: FAIL (aot bundle)"; exit 1; }
  [ ! -e "$work/build-cache" ] || { echo "triton check: FAIL (the build wrote into Triton's cache)"; fail=1; }
  cp -r "$work/project/triton_mypkg" "$work/site/"
fi
cp -r "$work/site/triton_mypkg" "$work/jit/" && rm -rf "$work/jit/triton_mypkg/artifacts"
cp "$work/site/triton_mypkg/artifacts/manifest.json" "$out/manifest.json"
python3 - "$work/site/triton_mypkg/artifacts/manifest.json" "$sm" <<'PY' | tee -a "$out/env.log" || fail=1
import hashlib, json, sys
from triton.runtime.cache import triton_key
m = json.load(open(sys.argv[1]))
builds = {a["triton_build"] for a in m["artifacts"]}
here = hashlib.sha256(triton_key().encode()).hexdigest()
sms = sorted({a["sm"] for a in m["artifacts"]})
print(f"set: {len(m['specs'])} specs for sm {sms}, Triton build(s) {[b[:12] for b in builds]}; here {here[:12]}")
if here not in builds:
    print("triton check: the set was built under another Triton build (another release or CPython): every launch "
          "will compile")
sys.exit(0 if here in builds and int(sys.argv[2]) in sms else 1)
PY

run() {  # run SITE CACHE OUTJSON FLAGS...: one fresh process
  local site=$1 cache=$2 json=$3
  shift 3
  (cd "$work" && TRITON_CACHE_DIR="$cache" PYTHONPATH="$site:$PYTHONPATH" timeout 600 \
    python3 "$here/triton_check.py" run "$json" "$@") >>"$out/runs.log" 2>&1
}

# 2. packaged: 0 compiles, results equal to Triton's own
run "$work/site" "$work/c-aot" "$out/check-aot.json" unpackaged || fail=1
run "$work/jit" "$work/c-jit" "$out/check-jit.json" unpackaged || fail=1
python3 - "$out/check-aot.json" "$out/check-jit.json" <<'PY' | tee "$out/check.log" || fail=1
import json, sys
a, j = (json.load(open(p)) for p in sys.argv[1:])
ok = a["packaged"] and a["manager"] == "AotCacheManager"
for name, row in a["rows"].items():
    want = ["add"] if name == "add.512" else []
    good = row["compiled"] == want and row["sha256"] == j["rows"][name]["sha256"] and j["rows"][name]["compiled"]
    ok &= bool(good)
    print(f"{name}: compiled {row['compiled']} (Triton alone: {j['rows'][name]['compiled']}), "
          f"result {'equal' if row['sha256'] == j['rows'][name]['sha256'] else 'DIFFERENT'}: {'ok' if good else 'FAIL'}")
print("check:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY

# 3. edits after the build: the current code's result, compiled
edits=(
  "add|kernels.py|tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr|tl.load(x_ptr + offs, mask=m) - tl.load(y_ptr"
  "scale_shift|kernels.py|return x * FACTOR|return x * FACTOR + 1"
  "scale_shift|kernels.py|FACTOR = tl.constexpr(3.0)|FACTOR = tl.constexpr(4.0)"
  "scale_shift|cfg.py|OFFSET = tl.constexpr(0.5)|OFFSET = tl.constexpr(0.75)"
  "scale_shift|assign||"
)
i=0
for e in "${edits[@]}"; do
  IFS='|' read -r kernel file old new <<<"$e"
  i=$((i + 1))
  for s in site jit; do
    rm -rf "$work/e$i-$s" && mkdir -p "$work/e$i-$s" && cp -r "$work/$s/triton_mypkg" "$work/e$i-$s/"
    [ "$file" = assign ] || python3 - "$work/e$i-$s/triton_mypkg/$file" "$old" "$new" <<'PY'
import sys
p, old, new = sys.argv[1:]
t = open(p).read()
assert old in t, (p, old)
open(p, "w").write(t.replace(old, new))
PY
  done
  flag=$([ "$file" = assign ] && echo assign || true)
  run "$work/e$i-site" "$work/c-e$i-aot" "$out/edit$i-aot.json" $flag || fail=1
  run "$work/e$i-jit" "$work/c-e$i-jit" "$out/edit$i-jit.json" $flag || fail=1
  python3 - "$out/edit$i-aot.json" "$out/edit$i-jit.json" "$kernel" "$i: $kernel $file ${new:-cfg.OFFSET = 0.75}" \
    <<'PY' | tee -a "$out/edits.log" || fail=1
import json, sys
a, j = (json.load(open(p)) for p in sys.argv[1:3])
kernel, what = sys.argv[3:]
compiled = sorted({k for r in a["rows"].values() for k in r["compiled"]})
equal = all(r["sha256"] == j["rows"][n]["sha256"] for n, r in a["rows"].items())
ok = compiled == [kernel] and equal
print(f"edit {what}: compiled {compiled}, results {'equal to' if equal else 'DIFFERENT from'} Triton's JIT of the "
      f"edited code: {'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
done

# 4. first call, N fresh processes per mode
if [ "$runs" -gt 0 ]; then
  run "$work/jit" "$work/c-warm" "$out/prime.json" || fail=1  # Triton's cache, warm for every later warm run
  for n in $(seq "$runs"); do
    run "$work/site" "$work/c-aot-$n" "$out/aot-$n.json" || fail=1
    run "$work/jit" "$work/c-warm" "$out/warm-$n.json" || fail=1
    run "$work/jit" "$work/c-cold-$n" "$out/cold-$n.json" || fail=1
  done
  python3 "$here/triton_check.py" table "$out"/aot-*.json "$out"/warm-*.json "$out"/cold-*.json | tee "$out/bench.md"
fi
rm -rf "$work"
echo "triton check: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
