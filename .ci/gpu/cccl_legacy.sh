#!/usr/bin/env bash
# GPU machine (python3 3.12, no network, no cuda-cccl): cuda.compute served on cuda-cccl releases without
# `serialize` (issue 44, docs/build.md "CCCL releases without serialize"). Carry [".gpu/cccl-legacy"] holding
#   cccl/cuda_cccl-0.6.0-cp312-*.whl and cccl/cuda_cccl-0.7.0-cp312-*.whl   (pip download --no-deps
#       --python-version 3.12 --only-binary=:all: cuda-cccl==0.6.0 / ==0.7.0: about 4 MB each)
#   deps/numba_cuda-0.26.0-*.whl (optional: both releases ask numba-cuda<0.27; without it the machine's own)
#   lib/libnvrtc.so.13, lib/libnvJitLink.so.13: aot's shims, built on the CPU host (this machine may lack cc)
# All made by `bash .ci/gpu/cccl_legacy_prepare.sh` on the CPU host (13 MB).
# Per release, in its own --target folder: the answers are recorded on this machine (the same shims, the real
# driver and its NVRTC 13.0; the CPU host's sets hold its own NVRTC's bytes in their keys), then each spec runs
# in a fresh process twice: cold JIT (AOT_IMPORT_HOOK=0, no aot) and served (a package carrying the answers on
# sys.path, `import aot` first). Passes when each served first call is <= 10% of its cold JIT, both the
# shims' compile and link were answered (no miss), and the result equals the JIT's. Table last; logs in $OUT.
set -uo pipefail
R=.gpu/cccl-legacy
OUT=${OUT:-$R/out}
W=$(mktemp -d /tmp/cccl-legacy.XXXX)
mkdir -p "$OUT" cccl_patches/lib/legacy
cp "$R"/lib/lib*.so.13 cccl_patches/lib/legacy/ 2>/dev/null || echo "no prebuilt shims: compiling them here (needs cc)"
SPECS="reduce:int32:plus:0 reduce:float64:plus:0 reduce:int64:maximum:-1"
deps=""
ls "$R"/deps/*.whl >/dev/null 2>&1 && deps="$R/deps/*.whl"
for whl in "$R"/cccl/cuda_cccl-*.whl; do
  v=$(basename "$whl" | cut -d- -f2)
  T="$W/cccl-$v"
  # shellcheck disable=SC2086
  python3 -m pip install -q --no-index --no-deps --target "$T" "$whl" $deps || exit 1
  pkg="$W/site-$v/legacypkg"
  mkdir -p "$pkg/artifacts" && touch "$pkg/__init__.py"
  # shellcheck disable=SC2086
  PYTHONPATH="$T:$PWD" python3 -m aot.build.cccl_legacy_build --sm 90 --out "$pkg/artifacts" $SPECS \
    > "$OUT/build-$v.log" 2>&1 || echo "cuda-cccl $v: build exit $? (see $OUT/build-$v.log)"
  for s in $SPECS; do
    AOT_IMPORT_HOOK=0 PYTHONPATH="$T:$PWD" python3 .ci/gpu/cccl_legacy_check.py jit "$s" \
      >> "$OUT/rows-$v.jsonl" 2>> "$OUT/jit-$v.log"
    PYTHONPATH="$T:$PWD:$W/site-$v" python3 .ci/gpu/cccl_legacy_check.py served "$s" \
      >> "$OUT/rows-$v.jsonl" 2>> "$OUT/served-$v.log"
  done
done
python3 - "$OUT" <<'PY'
import glob, json, sys
bad = 0
print(f"{'cuda-cccl':9} {'spec':26} {'jit s':>7} {'served s':>8} {'ratio':>6} {'imports j/s':>11} "
      f"{'hits/misses':18} {'equal':5} verdict")
for path in sorted(glob.glob(f"{sys.argv[1]}/rows-*.jsonl")):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    if not rows:  # the release's build or every run failed: never a vacuous PASS (seen on the H200)
        print(f"{path}: no rows (see the build and run logs)"); bad += 1
    by = {(r["spec"], r["mode"]): r for r in rows}
    for spec in sorted({r["spec"] for r in rows}):
        j, s = by.get((spec, "jit")), by.get((spec, "served"))
        if not j or not s:
            print(f"{path}: {spec} has no {'jit' if not j else 'served'} row (see the logs)"); bad += 1; continue
        ratio = s["first_call_s"] / max(j["first_call_s"], 1e-9)
        c = s["counts"] or {}
        served = c and all(h >= 1 and m == 0 for h, m in c.values())
        ok = ratio <= 0.10 and served and s["result"] == j["result"]
        bad += not ok
        imports = f"{j['imports_s']:.1f}/{s['imports_s']:.1f}"
        print(f"{s['cuda_cccl']:9} {spec:26} {j['first_call_s']:7.2f} {s['first_call_s']:8.2f} {ratio:6.1%} "
              f"{imports:>11} {str(c):18} {str(s['result'] == j['result']):5} {'ok' if ok else 'FAIL'}")
print("PASS" if not bad and glob.glob(f"{sys.argv[1]}/rows-*.jsonl") else f"FAIL ({bad})")
sys.exit(1 if bad or not glob.glob(f"{sys.argv[1]}/rows-*.jsonl") else 0)
PY
