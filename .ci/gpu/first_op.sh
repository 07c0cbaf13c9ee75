#!/usr/bin/env bash
# Issue 42's runtime cost on the GPU, the three targets side by side, fresh processes, medians and ratios:
#   (1) a library's first operation with aot against its own warm cuda.core program cache, and steady launches
#       (benchmarks/first_op.py, adopt_mypkg): served from the set's first-hit index (hit-index.json), and the same
#       with the index removed (the manifest path: what aot did before); target <= +2 ms;
#   (2) `import PKG` with aot against an empty aot stand-in (benchmarks/import_cost.py: numba_mypkg, cupy_mypkg,
#       adopt_mypkg); target <= +20 ms;
#   (3) numba-cuda steady launches, the aot-served kernel against numba-cuda's own JIT of the same function
#       (benchmarks/numba_launch.py: across processes, and in one process in alternating blocks); target <= 1.01x.
# Builds nothing.
#
# Run from the repository root on the GPU machine with the machine's Python (cuda-core 1.2.x, numpy, numba-cuda,
# cupy). Needs, made on the CPU host by this checkout (carry [".whl", ".gpu/numba_launch"]):
#   .whl/ (or $AOT_WHEELS): adopt_mypkg-0.1.0-*.whl, numba_mypkg-0.1.0-*.whl, cupy_mypkg-0.1.0-*.whl (platformdirs-*.whl
#         if present): `bash .ci/gpu/prepare.sh`, or only these three: `pip install --no-deps .` then
#         `AOT_WHEEL_SM=90 python -m pip wheel -q --no-build-isolation --no-deps -w .whl examples/<name>`;
#   .gpu/numba_launch (or $AOT_NUMBA_LAUNCH): `python benchmarks/numba_launch.py prepare .gpu/numba_launch 90`.
# A wheel built before the first-hit index existed has no hit-index.json: this script then derives it with aot's
# own manifest writer (the manifest's bytes must come out unchanged; said in the log), as `aot bundle` would have.
# aot is this checkout (PYTHONPATH=.), compiled to bytecode first as pip compiles an installed aot (without it every
# fresh process compiles aot's modules from source inside the clock: on the CPU host 16 ms of a first hit's CPU
# against 4.5 ms; first_op.py refuses to time that). Writes six files into $OUT (the device returns at most 8):
# first_op.json, first_op_manifest.json, import_cost.json, numba_launch.json, first_op_profile.txt (cProfile, top 40
# by cumulative time, of one program_cache and one by_source first operation served from the index) and
# first_op.log (every step's log, then the summary); prints the summary table last; exits non-zero when a benchmark
# fails to run (the targets are read from the table).
set -uo pipefail
here=$PWD
OUT=${OUT:-/tmp/aot-gpu-out}
PY=${PYTHON:-python3}
WHL=${AOT_WHEELS:-$here/.whl}
NL=${AOT_NUMBA_LAUNCH:-$here/.gpu/numba_launch}
RUNS=${AOT_FIRST_OP_RUNS:-15}
mkdir -p "$OUT"
site=$(mktemp -d /tmp/aot-first-op.XXXXXX)
logs=$(mktemp -d /tmp/aot-first-op-logs.XXXXXX)  # each step's log, gathered into $OUT/first_op.log at the end
trap 'rm -rf "$site" "$site-manifest" "$logs"' EXIT
wheels=()
for pat in 'adopt_mypkg-0.1.0-*.whl' 'numba_mypkg-0.1.0-*.whl' 'cupy_mypkg-0.1.0-*.whl' 'platformdirs-*.whl'; do
  w=$(ls "$WHL"/$pat 2>/dev/null | head -1)
  [ -n "$w" ] && wheels+=("$w")
done
[ ${#wheels[@]} -ge 3 ] || { echo "first_op: missing example wheels in $WHL (have: $(ls "$WHL" | tr '\n' ' '))"; exit 2; }
[ -f "$NL/site/numba_launch_pkg/artifacts/manifest.json" ] || { echo "first_op: no $NL (see the header)"; exit 2; }
"$PY" -m pip install -q --no-index --no-deps --target "$site" "${wheels[@]}" >"$logs/pip.log" 2>&1 \
  || { cat "$logs/pip.log"; exit 1; }
echo "first_op: PYTHONDONTWRITEBYTECODE='${PYTHONDONTWRITEBYTECODE:-}'; aot bytecode before compileall:" \
  "$(find "$here/aot" -name '*.pyc' 2>/dev/null | wc -l) files" >>"$logs/pip.log"
"$PY" -m compileall -q "$here/aot" >>"$logs/pip.log" 2>&1 || { echo "first_op: compileall aot failed"; exit 1; }
export PYTHONPATH=$here
art=$site/adopt_mypkg/artifacts
if [ ! -f "$art/hit-index.json" ]; then
  "$PY" - "$art" >>"$logs/pip.log" 2>&1 <<'PY' || { echo "first_op: deriving the index failed"; cat "$logs/pip.log"; exit 1; }
import json, sys
from pathlib import Path
from aot.core.manifest import write_manifest
root = Path(sys.argv[1])
before = (root / "manifest.json").read_bytes()
doc = json.loads(before)
base = ("format", "manifest_version", "producer", "specs", "artifacts")
write_manifest(root, producer=doc["producer"], specs=doc["specs"], artifacts=doc["artifacts"],
               extra={k: v for k, v in doc.items() if k not in base})
assert (root / "manifest.json").read_bytes() == before, "the manifest changed"
print(f"first_op: the wheel had no hit-index.json; derived it with aot's writer ({(root / 'hit-index.json').stat().st_size} bytes)")
PY
fi
cp -r "$site" "$site-manifest" && rm -f "$site-manifest/adopt_mypkg/artifacts/hit-index.json"
rc=0
"$PY" benchmarks/first_op.py --site "$site" --runs "$RUNS" --json "$OUT/first_op.json" \
  --profile "$OUT/first_op_profile.txt" >"$logs/first_op.log" 2>&1 || rc=1
"$PY" benchmarks/first_op.py --site "$site-manifest" --runs "$RUNS" --json "$OUT/first_op_manifest.json" \
  >"$logs/first_op_manifest.log" 2>&1 || rc=1
"$PY" benchmarks/import_cost.py --site "$site" --package numba_mypkg --package cupy_mypkg --package adopt_mypkg \
  --runs "$RUNS" --json "$OUT/import_cost.json" >"$logs/import_cost.log" 2>&1 || rc=1
OUT=$OUT "$PY" benchmarks/numba_launch.py run "$NL" --runs "${AOT_NUMBA_RUNS:-7}" >"$logs/numba_launch.log" 2>&1 || rc=1
{
for f in pip first_op first_op_manifest import_cost numba_launch; do echo "== $f"; cat "$logs/$f.log"; done
echo "== summary (targets: first operation <= +2 ms over the own warm cache; import <= +20 ms; numba launch <= 1.01x)"
"$PY" - "$OUT" <<'PY' || echo "first_op: the summary failed" >>"$logs/failed"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = []
for name, label in (("first_op.json", "index"), ("first_op_manifest.json", "manifest")):
    for r in json.loads((out / name).read_text()):
        if r["way"] != "own":
            rows.append((f"first op {r['way']} ({label})", f"{r['added_ms']:+.2f} ms", f"{r['ratio']:.3f}x",
                         ("met" if r["added_ms"] <= 2 else "NOT met") if label == "index" else "(before)"))
        if label == "index":
            rows.append((f"launch {r['way']}", f"{r['launch_us']:.2f} us", f"{r['launch_ratio']:.4f}x", ""))
for r in json.loads((out / "import_cost.json").read_text()):
    rows.append((f"import {r['package']}", f"{r['added_ms']:+.1f} ms", f"{r['ratio']:.3f}x",
                 "met" if r["added_ms"] <= 20 else "NOT met"))
nl = json.loads((out / "numba_launch.json").read_text())["medians"]
rows.append(("numba launch across processes", f"{nl['aot']['us']:.2f} / {nl['jit']['us']:.2f} us",
             f"{nl['aot']['us'] / nl['jit']['us']:.4f}x", ""))
rows.append(("numba launch, one process", f"{nl['pair']['pair_aot_us']:.2f} / {nl['pair']['pair_jit_us']:.2f} us",
             f"{nl['pair']['pair_ratio']:.4f}x", "met" if nl["pair"]["pair_ratio"] <= 1.01 else "NOT met"))
for r in rows:
    print(f"{r[0]:<36} {r[1]:>22} {r[2]:>9}  {r[3]}")
PY
} 2>&1 | tee "$OUT/first_op.log"
[ -f "$logs/failed" ] && rc=1
exit $rc
