#!/usr/bin/env bash
# GPU machine (python3 is 3.12, no network), after `bash .ci/gpu/cccl_releases_prepare.sh` on the CPU host;
# carry [".gpu/cccl-releases"]. examples/hatch-mypkg's wheel carries its CCCL blobs for several cuda-cccl
# releases (one per release, merged by its hatchling hook). Each cuda-cccl wheel there is installed into its
# own --target folder, beside one shared folder holding aot, cuda-core, platformdirs and the example:
#   a carried release: every CCCL spec served packaged (the blob of that release), 0 JIT, results right
#     (aot's GPU check against numpy);
#   the release not carried: one warning line naming the releases carried, then JIT, result right
#     (product_i32: a built-in operator; this machine has no numba-cuda-mlir for the lambda specs).
# Prints one line per (release, spec) and a verdict last; logs and JSON under $OUT.
set -uo pipefail
R=.gpu/cccl-releases
OUT=${OUT:-$R/out}
W=$(mktemp -d /tmp/cccl-releases.XXXX)
mkdir -p "$OUT" "$W/base"
python3 -m pip install -q --no-index --no-deps --target "$W/base" "$R"/deps/*.whl "$R"/wheel/*.whl || exit 1
carried=$(python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(' '.join(sorted({a['cuda_cccl'] for a in m['artifacts'] if a['family']=='cccl'})))" "$W/base/mypkg_hatch/artifacts/manifest.json")
echo "the wheel carries CCCL blobs of cuda-cccl: $carried"
for whl in "$R"/cccl/cuda_cccl-*.whl; do
  v=$(basename "$whl" | cut -d- -f2)
  python3 -m pip install -q --no-index --no-deps --target "$W/cccl-$v" "$whl" || exit 1
  case " $carried " in *" $v "*) mode=packaged ;; *) mode=jit ;; esac
  AOT_CACHE_DIR="$W/cache-$v" CUPY_CACHE_DIR="$W/cupy-$v" PYTHONPATH="$W/cccl-$v:$W/base" \
    python3 .ci/gpu/cccl_releases_check.py "$mode" > "$OUT/cccl-$v.json" 2> "$OUT/cccl-$v.log"
  echo "cuda-cccl $v ($mode): exit $?"
done
python3 - "$OUT" <<'PY'
import glob, json, sys
bad = 0
print(f"{'cuda-cccl':10} {'expect':9} {'spec':22} {'source':9} {'blob':18} result")
for path in sorted(glob.glob(f"{sys.argv[1]}/cccl-*.json")):
    try:
        r = json.load(open(path))
    except ValueError:
        print(f"{path}: no result (see the .log beside it)"); bad += 1; continue
    for row in r["rows"]:
        print(f"{r['installed']:10} {r['mode']:9} {row['spec']:22} {row['source']:9} {row['blob']:18} {row['status']}")
    ok = all(row["status"] == "ok" for row in r["rows"]) and r["rows"]
    if r["mode"] == "packaged":
        ok = ok and all(row["source"] == "packaged" and row["blob"] == f"cuda-cccl-{r['installed']}" for row in r["rows"])
        ok = ok and not r["warnings"]
    else:
        ok = ok and all(row["source"] == "jit" for row in r["rows"]) and len(r["warnings"]) == 1
        print(f"  the one warning: {r['warnings'][0] if r['warnings'] else None}")
    bad += not ok
print("VERDICT:", "ok" if not bad else f"{bad} release(s) FAILED")
PY
rm -rf "$W"
