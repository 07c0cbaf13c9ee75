#!/usr/bin/env bash
# numba-cuda across releases on the GPU machine (issue 34 item 3): the example's kernels (examples/numba-mypkg),
# built on the CPU host under some numba-cuda releases, launched under others through their own @cuda.jit
# dispatchers. Each (built, installed) pair must launch every packaged kernel with 0 numba-cuda compiles and
# numpy's results (.ci/gpu/numba_check.py check), and compile once for a signature that was not packaged.
#
# A pair that crosses numba-cuda 0.24 | 0.26 may say GAP instead of PASS: `smooth` (it calls a device function) is
# refused by the kernel digest there (it hashes the device function's raw targetoptions, which 0.26 changed) and
# JIT-compiles; every other kernel launches packaged. GAP does not fail the script; FAIL does.
#
# Inputs (carried; prepared on the CPU host):
#   WHEELS/  numba_cuda-<R>-cp312-*.whl for each release R to install (each into its own --target dir), and
#            what those releases import with there: numba-0.65.1, numpy-2.3.5, cuda_core-0.7.0 and platformdirs
#            wheels (the machine's numba 0.68, numpy 2.5 and cuda-core 1.2 serve only numba-cuda 0.30.4)
#   SETS/    built-<X>/ artifact sets: `python .ci/numba_releases.py --out SETS --build PY ...` (no --attach)
#   bash .ci/gpu/numba_releases.sh [WHEELS [SETS]]        (defaults: .whl .gpu/numbarel)
# The machine's own numba-cuda is checked too ("own"). AOT_NUMBAREL_CPU=1 rehearses it on a driverless host: the
# same environments, with the attach check of .ci/numba_releases.py in place of launches (cuda-core 0.7.0 makes
# and links code objects without a driver; 0.5.1 asks the driver's version first). Logs under $OUT.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
wheels=$(cd "${1:-$root/.whl}" && pwd) || exit 2
sets=$(cd "${2:-$root/.gpu/numbarel}" && pwd) || exit 2
out=${OUT:-/tmp/aot-numbarel-out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PYTHONUNBUFFERED=1 PYTHONNOUSERSITE=1
one() { ls "$wheels"/$1 2>/dev/null | head -n 1; }
pip_target() { python3 -m pip install -q --no-index --no-deps --target "$@"; }
# what the older releases import with, and aot's own runtime dependency the machine lacks
pip_target "$work/common" "$(one 'numba-0.65.1-*.whl')" "$(one 'numpy-2.3.5-*.whl')" \
  "$(one 'cuda_core-0.7.0-*.whl')" || exit 2
pip_target "$work/pd" "$(one 'platformdirs-*.whl')" || exit 2
releases=()
for w in "$wheels"/numba_cuda-*-cp312-*.whl; do
  [ -e "$w" ] || continue
  r=$(basename "$w" | cut -d- -f2)
  pip_target "$work/nc-$r" "$w" || exit 2
  releases+=("$r")
done
releases+=(own)
for s in "$sets"/built-*/; do
  x=$(basename "$s"); x=${x#built-}
  mkdir -p "$work/site-$x"
  cp -r "$root/examples/numba-mypkg/numba_mypkg" "$work/site-$x/"
  cp -r "$s" "$work/site-$x/numba_mypkg/artifacts"
done
rows=()
rc=0
for r in "${releases[@]}"; do
  if [ "$r" = own ]; then pp="$work/pd:$root"; else pp="$work/nc-$r:$work/common:$work/pd:$root"; fi
  PYTHONPATH="$pp" python3 -c "import importlib.metadata as m; print('numba-cuda', m.version('numba-cuda'), \
'numba', m.version('numba'), 'numpy', m.version('numpy'), 'cuda-core', m.version('cuda-core'))" \
    >"$out/env-$r.txt" 2>&1
  for s in "$sets"/built-*/; do
    x=$(basename "$s"); x=${x#built-}
    log="$out/run-$x-under-$r.log"
    if [ -n "${AOT_NUMBAREL_CPU:-}" ]; then
      PYTHONPATH="$pp" timeout 600 python3 "$root/.ci/numba_releases.py" --attach-sets "$s" >"$log" 2>&1
      status=$?
      verdict=$(python3 - "$log" <<'PY'
import json, sys
try:
    got = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except (OSError, ValueError, IndexError):
    print("FAIL (no result)"); sys.exit()
(res,) = got["sets"].values()
ok = not res["problems"] and not got["compiles"] and len(res["attached"]) == 5
gap = (not res["problems"] and not got["compiles"] and len(res["attached"]) == 4 and list(res["refused"]) == ["smooth"]
       and "changed since the build" in res["refused"]["smooth"])
print(f"{'PASS' if ok else 'GAP' if gap else 'FAIL'}: {len(res['attached'])}/5 attached, {len(got['compiles'])} "
      f"compiles{'; refused: ' + ', '.join(res['refused']) if res['refused'] else ''}")
PY
)
    else
      PYTHONPATH="$pp" timeout 600 python3 -W ignore::Warning "$root/.ci/gpu/numba_check.py" check \
        "$work/site-$x" >"$log" 2>&1
      status=$?
      verdict=$(python3 - "$log" <<'PY'
import ast, re, sys
text = open(sys.argv[1], errors="replace").read()
m = re.search(r"packaged launches: (\d+) numba-cuda compiles (\[.*?\])", text)
j = re.search(r"unpackaged signature: (\d+) numba-cuda compile", text)
if not m or not j:
    print("FAIL (no result)"); sys.exit()
compiled = ast.literal_eval(m.group(2))
right = "all results match numpy" in text
ok = "RESULT PASS" in text
gap = right and j.group(1) == "1" and compiled and set(compiled) <= {"smooth", "smoothstep"}
print(f"{'PASS' if ok else 'GAP' if gap else 'FAIL'}: packaged launches {m.group(1)} compiles {compiled}, "
      f"unpackaged signature {j.group(1)} compile, {'numpy results' if right else 'WRONG RESULTS'}")
PY
)
    fi
    case "$verdict" in PASS*|GAP*) ;; *) rc=1; tail -n 15 "$log";; esac
    rows+=("$(printf '%-8s %-9s %s (exit %s) [%s]' "$x" "$r" "$verdict" "$status" "$(cat "$out/env-$r.txt" | tail -n 1)")")
  done
done
echo
echo "built    installed result"
printf '%s\n' "${rows[@]}" | tee "$out/numba-releases.txt"
echo "RESULT $([ $rc = 0 ] && echo PASS || echo FAIL)"
exit "$rc"
