#!/usr/bin/env bash
# GPU machine (python3 3.12, no network, no cuda-cccl): a wheel built on the CPU host serves cuda.compute on
# cuda-cccl releases without `serialize` (issue 44, docs/build.md "CCCL releases without serialize").
# Inputs: .gpu/cccl-legacy/ from `bash .ci/gpu/cccl_legacy_prepare.sh` on the CPU host, carried in two calls
# (64 MiB a call with the working tree: about 56 MB of carry; what a call carries stays in the repo while the
# machine is warm, 30 s between calls), one call after the other, file by file (P=.gpu/cccl-legacy):
#   call 1: carry [P/a/llvmlite-*.whl]                                         command `true`
#   call 2: carry [P/b/cuda_core-*.whl, P/b/numpy-*.whl, P/a/numba-*.whl, P/a/numba_cuda-*.whl]   `true`
#   call 3: carry [P/c/nvidia_nvvm-*.whl.part0, P/c/nvidia_nvvm-*.whl.sha256]      `true`
#   call 4: carry [P/c/nvidia_nvvm-*.whl.part1, P/d/nvidia_cuda_nvcc-*.whl]         `true`
#   call 5: carry [P/b/cccl-0.6.0, P/b/cccl-0.7.0, P/b/pkg-0.6.0, P/b/pkg-0.7.0, P/b/lib, P/b/nvidia.json,
#                  P/d/nvidia_cuda_cccl-*.whl, P/d/nvidia_cuda_crt-*.whl]       `bash .ci/gpu/cccl_legacy.sh`
# (each path spelled out in full: carry takes no patterns). c/ and d/ hold the NVIDIA wheels of b/nvidia.json this
# machine's image lacks, installed into each venv (a wheel in parts is joined and its sha256 checked first); the
# rest of nvidia.json is linked from the machine's python3.
# Per release (0.6.0, 0.7.0): a venv without the machine's site-packages holding the carried wheels (numba
# 0.65.1 + llvmlite 0.47 + numba-cuda 0.26.0, numpy 2.3.5, cuda-core 0.7.0, cuda-cccl, and legacy_mypkg's wheel
# built under that release on the CPU host) and the machine's own NVIDIA compiler/header wheels linked in (their
# versions must be the CPU host's, b/nvidia.json: the answers' keys hold their bytes), then each of the package's
# specs runs in a fresh process twice: cold JIT (AOT_IMPORT_HOOK=0 AOT_JIT_ONLY=1: nothing of aot serves) and
# served (the installed wheel's registry loads the shims). Passes when each served first call is <= 10% of its
# cold JIT, every compile and link was answered (no miss) and the result equals the JIT's. Table last; logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=.gpu/cccl-legacy
OUT=${OUT:-$R/out}
# the CUDA headers cuda.compute compiles against: the venv's NVIDIA wheels, as on the build host (a toolkit named
# here would be another stack: its headers' content is in every key)
unset CUDA_HOME CUDA_PATH
W=$(mktemp -d /tmp/cccl-legacy.XXXX)
mkdir -p "$OUT" cccl_patches/lib/legacy
bad=0
for d in a b c d; do [[ -d $R/$d ]] || { echo "FAIL: $R/$d missing (carry it: see this script's header)"; exit 1; }; done
cp "$R"/b/lib/lib*.so.13 cccl_patches/lib/legacy/ 2>/dev/null || echo "no prebuilt shims: compiling them here (needs cc)"
LINKED="nvidia-cuda-nvrtc,nvidia-nvjitlink,nvidia-nvvm,nvidia-cuda-nvcc,nvidia-cuda-runtime,nvidia-cuda-crt,nvidia-cuda-cccl"
LINKED="$LINKED,cuda-bindings,cuda-pathfinder,typing-extensions,packaging"   # the rest numba-cuda 0.26 and cuda-core 0.7 import
for p0 in "$R"/c/*.whl.part0; do                   # a wheel carried in parts: joined, then its sha256 checked
  [[ -e $p0 ]] || continue
  w=${p0%.part0}; cat "$w".part? > "$w" && (cd "$(dirname "$w")" && sha256sum -c --quiet "$(basename "$w").sha256") \
    || { echo "FAIL: $w: its parts do not join to the wheel prepared (carry every part)"; exit 1; }
done
NV=$(ls "$R"/c/*.whl "$R"/d/*.whl 2>/dev/null)      # the carried NVIDIA wheels: installed, not linked
for w in $NV; do n=$(basename "$w"); n=${n%%-[0-9]*}; LINKED=$(echo ",$LINKED," | sed "s/,${n//_/-},/,/; s/^,//; s/,$//"); done
echo "carried NVIDIA wheels: $(for w in $NV; do basename "$w" | cut -d- -f1-2; done | tr '\n' ' ')"
for v in 0.6.0 0.7.0; do
  V=$W/venv-$v
  python3 tests/legacy_envs.py venv "$V" --link-from python3 --dists "$LINKED" > "$W/linked-$v.json" || exit 1
  python3 -m pip --python "$V/bin/python" install -q --no-index --no-deps $NV "$R"/a/*.whl "$R"/b/*.whl \
    "$R/b/cccl-$v"/*.whl "$R/b/pkg-$v"/*.whl >> "$OUT/log-$v.txt" 2>&1 || { echo "FAIL: install $v"; bad=$((bad+1)); continue; }
  # the versions the venv now has, linked or installed, against the build host's
  "$V/bin/python" -c "import importlib.metadata as m, json, sys
def v(n):
    try: return m.version(n)
    except m.PackageNotFoundError: return None
print(json.dumps({n: v(n) for n in sorted(json.load(open(sys.argv[1])))}))" "$R/b/nvidia.json" > "$W/nvidia-$v.json"
  if ! python3 - "$R/b/nvidia.json" "$W/nvidia-$v.json" <<'PY'
import json, sys
want, got = (json.load(open(p)) for p in sys.argv[1:])
diff = {k: (v, got.get(k)) for k, v in want.items() if got.get(k) != v}
if diff:
    print("FAIL: this machine's NVIDIA wheels are not the build host's (name: build, here):", diff)
    print("      the answers' keys hold their bytes: every compile would JIT. Rebuild with TOOLKIT_PY naming a")
    print("      python with these versions, or install the build host's versions here.")
    sys.exit(1)
PY
  then bad=$((bad + 1)); continue; fi
  specs=$(cd "$W" && "$V/bin/python" -c "import importlib.metadata as m, json, pathlib, importlib.util as u
root = pathlib.Path(u.find_spec('legacy_mypkg').origin).parent / 'artifacts'
doc = json.loads((root / 'manifest.json').read_text())
print(' '.join(doc['cccl_legacy'][m.version('cuda-cccl')]['specs']))")
  [[ -n $specs ]] || { echo "FAIL: cuda-cccl $v: the installed wheel lists no answers for it"; bad=$((bad+1)); continue; }
  for s in $specs; do
    (cd "$W" && AOT_IMPORT_HOOK=0 AOT_JIT_ONLY=1 "$V/bin/python" "$OLDPWD/.ci/gpu/cccl_legacy_check.py" jit "$s") \
      >> "$OUT/rows-$v.jsonl" 2>> "$OUT/log-$v.txt"
    (cd "$W" && "$V/bin/python" "$OLDPWD/.ci/gpu/cccl_legacy_check.py" served "$s") \
      >> "$OUT/rows-$v.jsonl" 2>> "$OUT/log-$v.txt"
  done
done
python3 - "$OUT" "$bad" <<'PY'
import glob, json, sys
bad = int(sys.argv[2])
print(f"{'cuda-cccl':9} {'spec':44} {'jit s':>7} {'served s':>8} {'ratio':>6} {'imports j/s':>11} "
      f"{'hits/misses':30} {'equal':5} verdict")
paths = sorted(glob.glob(f"{sys.argv[1]}/rows-*.jsonl"))
for path in paths:
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    if not rows:  # every run of the release failed: never a vacuous PASS
        print(f"{path}: no rows (see the jit/served logs)"); bad += 1
    by = {(r["spec"], r["mode"]): r for r in rows}
    for spec in sorted({r["spec"] for r in rows}):
        j, s = by.get((spec, "jit")), by.get((spec, "served"))
        if not j or not s:
            print(f"{path}: {spec} has no {'jit' if not j else 'served'} row (see the logs)"); bad += 1; continue
        ratio = s["first_call_s"] / max(j["first_call_s"], 1e-9)
        c = s["counts"] or {}
        served = bool(c) and all(h >= 1 and m == 0 for h, m in c.values())
        ok = ratio <= 0.10 and served and s["result"] == j["result"]
        bad += not ok
        print(f"{s['cuda_cccl']:9} {spec:44} {j['first_call_s']:7.2f} {s['first_call_s']:8.2f} {ratio:6.1%} "
              f"{j['imports_s']:5.1f}/{s['imports_s']:<5.1f} {str(c):30} {str(s['result'] == j['result']):5} "
              f"{'ok' if ok else 'FAIL'}")
print("PASS" if not bad and paths else f"FAIL ({bad})")
sys.exit(1 if bad or not paths else 0)
PY
