#!/usr/bin/env bash
# The release gate's evidence (issues 16 and 20), on a GPU host: `aot verify --gpu` passes every spec of the gate
# set and FAILS every mutant set.
#
#   bash .ci/gpu/gate.sh BASE MUTANTS      e.g.  bash .ci/gpu/gate.sh .gpu/gate .gpu/mutants
#
# BASE: tests/data/gate/build_matrix.yaml built for this GPU's SM (every row must be "ok");
# MUTANTS: the output of .ci/gpu/make_mutants.py (mut-*/ directories + expected.json; each must FAIL on the
# spec it mutated). aot comes from PYTHONPATH / the installed package (run where `python3 -m aot` is the
# one to test); tests/data/gate is put on PYTHONPATH for the operators from code, and --matrix names the
# gate matrix so verify may import them. Prints a table (mutant, expected, got) and the mutation score;
# writes gate.json and every verify's rows and log into $OUT (default /tmp/aot-gate-out). Exit 0 only when
# the base passes and every mutant fails.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BASE_DIR MUTANTS_DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")/../.." && pwd)
base=$(cd "$1" && pwd) || exit 2
mutants=$(cd "$2" && pwd) || exit 2
out=${OUT:-/tmp/aot-gate-out}
mkdir -p "$out/gate"
matrix=$here/tests/data/gate/build_matrix.yaml
export PYTHONPATH="$here/tests/data/gate${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
cd "$(mktemp -d)"  # never the checkout's aot/ package by accident: the installed one (or PYTHONPATH's)

verify() {  # verify NAME DIR [--only SPEC]: rows -> $out/gate/NAME.json, output -> NAME.log, rc -> NAME.rc
  local name=$1 dir=$2; shift 2
  timeout 900 python3 -m aot verify "$dir" --gpu --quiet --matrix "$matrix" --json "$out/gate/$name.json" "$@" \
    >"$out/gate/$name.log" 2>&1
  echo $? >"$out/gate/$name.rc"
}

echo "== base: $base"
verify base "$base"
tail -n 25 "$out/gate/base.log"
for d in "$mutants"/mut-*/; do
  name=$(basename "$d")
  spec=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['must_fail'])" "$d/mutation.json")
  echo "== $name (must FAIL on $spec)"
  verify "$name" "$d" --only "$spec"
  tail -n 4 "$out/gate/$name.log"
done

python3 - "$out" "$mutants/expected.json" <<'EOF'
import json, sys
from pathlib import Path
out, expected = Path(sys.argv[1]), json.loads(Path(sys.argv[2]).read_text())
res = out / "gate"

def run(name):
    rc = int((res / f"{name}.rc").read_text().strip() or -1)
    try:
        rows = json.loads((res / f"{name}.json").read_text())
    except (OSError, ValueError):
        rows = []
    return rc, rows

rc, base_rows = run("base")
base_ok = rc == 0 and bool(base_rows) and all(r["status"] == "ok" for r in base_rows)
base_bad = [f"{r['spec']}: {r['status']} {r['detail']}" for r in base_rows if r["status"] != "ok"]
table, caught = [], 0
for name, info in sorted(expected["mutants"].items()):
    rc, rows = run(name)
    failed = [r for r in rows if r["spec"] == info["must_fail"] and not r["ok"]]
    got = "FAILED" if rc != 0 and failed else (f"crashed (rc={rc})" if rc != 0 else "ok (MISSED)")
    caught += got != "ok (MISSED)"
    why = failed[0]["detail"] if failed else ""
    table.append({"mutant": name, "mutation": info["mutation"], "spec": info["must_fail"],
                  "description": info["description"], "expected": "FAILED", "got": got, "rc": rc, "why": why})
n = len(table)
print(f"\n{'mutant':56} {'expected':9} got")
for t in table:
    print(f"{t['mutant']:56} {'FAILED':9} {t['got']}  {t['why'][:110]}")
for name, info in sorted(expected.get("equivalent", {}).items()):
    print(f"{name:56} {'-':9} equivalent, not counted ({info['why']}: {info['description']})")
score = f"{caught}/{n}" if n else "0/0"
print(f"\nbase: {'all ok' if base_ok else 'NOT ok: ' + '; '.join(base_bad[:5])} ({len(base_rows)} rows)")
print(f"mutation score: {score} mutants FAILED verify --gpu"
      f"{'' if caught == n else '; MISSED: ' + ', '.join(t['mutant'] for t in table if t['got'].startswith('ok'))}")
doc = {"base_ok": base_ok, "base_problems": base_bad, "mutants": table, "caught": caught, "total": n,
       "score": score, "equivalent": sorted(expected.get("equivalent", {})),
       "failed_to_build": sorted(expected.get("failed_to_build", {}))}
(out / "gate.json").write_text(json.dumps(doc, indent=1) + "\n")
sys.exit(0 if base_ok and n and caught == n else 1)
EOF
rc=$?
tar czf "$out/gate-logs.tgz" -C "$out" gate
exit $rc
