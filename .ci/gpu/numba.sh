#!/usr/bin/env bash
# numba-cuda kernels shipped ahead of time (issue 31), on a GPU host. Inputs, prepared on the CPU host:
#   SITE/numba_mypkg/            the example package as its wheel installs it (artifacts/ with aot-package.json)
#   JITSITE/numba_mypkg/         the same package without artifacts/ (numba-cuda compiles)
#   MUTSITE/numba_mypkg/         optional: SITE's package whose artifacts carry a mutant (.ci/gpu/numba_mutant.py)
#   bash .ci/gpu/numba.sh SITE JITSITE [N [MUTSITE [SPEC]]]
# Checks: every packaged kernel launches through its own dispatcher with zero numba-cuda compiles and gives numpy's
# result; an unpackaged signature compiles once and is right. Then the first launch of each kernel in N (default 5;
# 0: skipped) fresh processes: packaged vs numba-cuda cache=True (warm) vs cold JIT, medians. With MUTSITE, the gate:
# `aot verify --gpu --package numba_mypkg` passes SITE (every row ok) and FAILS the mutant on SPEC (default axpy.0).
# Logs under $OUT. Exit 0 only when every check passed.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 SITE JITSITE [N [MUTSITE [SPEC]]]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
site=$(cd "$1" && pwd) || exit 2
out=${OUT:-/tmp/aot-numba-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
timeout 180 python3 -W ignore::Warning "$here/numba_check.py" check "$site" 2>&1 | tee "$out/numba-check.log"
rc=${PIPESTATUS[0]}
if [ "${3:-5}" != 0 ]; then
  timeout 300 python3 -W ignore::Warning "$here/numba_check.py" bench "$site" "$2" "${3:-5}" 2>&1 | tee "$out/numba-bench.log"
fi
if [ $# -ge 4 ]; then
  mut=$(cd "$4" && pwd) || exit 2
  spec=${5:-axpy.0}
  cd "$(mktemp -d)"  # not a source tree: the installed package is the one verified
  PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" timeout 300 python3 -m aot verify --gpu --package numba_mypkg \
    --json "$out/verify-base.json" >"$out/verify-base.log" 2>&1
  base=$?
  PYTHONPATH="$mut${PYTHONPATH:+:$PYTHONPATH}" timeout 300 python3 -m aot verify --gpu --package numba_mypkg \
    --only "$spec" --json "$out/verify-mutant.json" >"$out/verify-mutant.log" 2>&1
  mutant=$?
  tail -n 30 "$out/verify-base.log"
  tail -n 8 "$out/verify-mutant.log"
  python3 - "$out" "$base" "$mutant" "$spec" <<'PY'
import json, sys
from pathlib import Path
out, base_rc, mut_rc, spec = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def rows(name):
    try:
        return json.loads((out / f"verify-{name}.json").read_text())
    except (OSError, ValueError):
        return []
base, mut = rows("base"), rows("mutant")
base_ok = base_rc == 0 and bool(base) and all(r["status"] == "ok" for r in base)
caught = mut_rc != 0 and bool(mut) and all(r["spec"] == spec and not r["ok"] for r in mut)
print(f"gate: base {'all ok' if base_ok else 'NOT ok'} ({len(base)} rows: "
      f"{sorted({(r['kind'], r['sm']) for r in base})}); mutant {spec}: {'FAILED (caught)' if caught else 'MISSED'}"
      f" ({len(mut)} rows)")
(out / "numba-gate.json").write_text(json.dumps({"base_ok": base_ok, "caught": caught, "base_rows": len(base),
                                                 "mutant_rows": len(mut)}) + "\n")
sys.exit(0 if base_ok and caught else 1)
PY
  [ $? -eq 0 ] || rc=1
fi
exit "$rc"
