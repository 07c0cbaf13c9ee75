#!/usr/bin/env bash
# One wheel warm for both CUDA majors (issue 40): examples/majors-mypkg's wheel carrying a cu12 set (NVRTC 12.9) and
# a cu13 set (NVRTC 13), installed once with the machine's CUDA 13 bindings and once with CUDA 12 bindings in a
# private dir: each install serves its own major's cubin (the path says cu12/ or cu13/), the kernel launched through
# aot.cupy_kernel (the packaged image, nothing compiled) gives numpy's result, and no AotWarning is raised (the other
# major's set is ignored). The H200's CUDA 13 driver runs CUDA 12 code.
#
#   bash .ci/gpu/two_majors.sh prepare   on the CPU host (this checkout, `.[cu13]`): builds the cu13 set, merges it
#                                        with tests/data/majors-cu12 (the same matrix built by NVRTC 12.9), and the
#                                        wheel, into .gpu/two_majors/ (carry .gpu)
#   bash .ci/gpu/two_majors.sh           on the GPU machine; needs .gpu/two_majors/ and, for the cu12 install, what
#                                        .ci/gpu_cu12.sh carries: .whl-cu12/cuda_bindings-12.9.*.whl (for the
#                                        machine's Python), .whl/cuda_core-1.2.2-*.whl, .whl/platformdirs-*.whl
#   AOT_TWO_MAJORS_GPU=0 bash .ci/gpu/two_majors.sh    elsewhere: the same installs, the lookup checked, no launch
# Knobs: PYTHON, AOT_CU12_WHEELS (.whl-cu12), AOT_WHEELS (.whl). Logs under $OUT; a table last; exit 1 on a failure.
set -uo pipefail
here=$PWD
OUT=${OUT:-/tmp/aot-gpu-out}
PY=${PYTHON:-python3}
WHL12=${AOT_CU12_WHEELS:-$here/.whl-cu12}
WHL=${AOT_WHEELS:-$here/.whl}
GPU=${AOT_TWO_MAJORS_GPU:-1}
SETS=$here/.gpu/two_majors
mkdir -p "$OUT"

if [ "${1:-}" = prepare ]; then
  export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"   # this checkout's aot, in pip's build of the wheel too
  rm -rf "$SETS" && mkdir -p "$SETS"
  cp -r examples/majors-mypkg "$SETS/project" && rm -rf "$SETS/project/build"
  "$PY" -m aot build --matrix "$SETS/project/build_matrix.yaml" --sm 80,90,100 --out "$SETS/cu13" --quiet \
    && "$PY" -m aot merge --out "$SETS/both" tests/data/majors-cu12 "$SETS/cu13" \
    && AOT_WHEEL_ARTIFACTS="$SETS/both" SOURCE_DATE_EPOCH=1700000000 "$PY" -m pip wheel -q --no-build-isolation \
         --no-deps -w "$SETS" "$SETS/project" \
    && "$PY" -m aot verify "$SETS"/majors_mypkg-0.1.0-*.whl --for-wheel
  exit $?
fi

wheel=$(ls "$SETS"/majors_mypkg-0.1.0-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || { echo "two_majors: no wheel in $SETS (run 'bash .ci/gpu/two_majors.sh prepare' on the CPU host)"; exit 2; }
rows=()
fail=0
for major in 13 12; do
  site=$(mktemp -d /tmp/aot-two-majors-site.XXXXXX)
  cache=$(mktemp -d /tmp/aot-two-majors-cache.XXXXXX)   # private and empty: only the packaged image can serve
  wheels=("$wheel")
  if [ "$major" = 12 ]; then
    wheels+=("$WHL12"/cuda_bindings-12.9.*.whl "$WHL"/cuda_core-1.2.2-*.whl "$WHL"/platformdirs-*.whl)
  fi
  for w in "${wheels[@]}"; do [ -f "$w" ] || { echo "two_majors: missing wheel $w"; exit 2; }; done
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$site" "${wheels[@]}" \
    >"$OUT/two-majors-pip-cu$major.log" 2>&1 || { cat "$OUT/two-majors-pip-cu$major.log"; exit 1; }
  echo "== cu$major: $(basename "$wheel") in $site"
  AOT_CACHE_DIR=$cache CUPY_CACHE_DIR=$cache/cupy PYTHONPATH="$here:$site" "$PY" - "$major" "$GPU" \
    >"$OUT/two-majors-cu$major.log" 2>&1 <<'EOF'
import json, sys, warnings
major, gpu = sys.argv[1], sys.argv[2] == "1"
import aot
warnings.simplefilter("error", aot.AotWarning)   # the other major's set: ignored, never a warning
import importlib.metadata as md
import majors_mypkg
reg = majors_mypkg.registry
row = {"major": major, "cuda_bindings": md.version("cuda-bindings"), "root": str(reg.manifest.root)}
assert row["cuda_bindings"].split(".")[0] == major, row
assert reg.manifest.root.name == f"cu{major}", row
if gpu:
    import cupy as cp
    import numpy as np
    k = aot.cupy_kernel("scale", "scale", reg)
    n = 100_003
    x = cp.arange(n, dtype=cp.float32)
    k(((n + 255) // 256,), (256,), (x, np.float32(2.5), np.int32(n)))
    ok = bool((x.get() == np.arange(n, dtype=np.float32) * np.float32(2.5)).all())
    st = reg.status()["scale"]
    row.update(source=st.source, sm=st.sm, path=st.path, equal_numpy=ok)
    assert st.source == "packaged" and f"/cu{major}/" in st.path and ok, row
else:
    from aot.runtime.loader.sources import check_packaged, packaged_candidates
    spec = reg.spec("scale")
    best = packaged_candidates(reg.manifest, spec, 90)[0]
    path = reg.manifest.path_of(best.ref)
    nvrtc = check_packaged(reg.manifest, spec, best.ref, path).header["producer"]["nvrtc"]
    row.update(source="packaged (lookup)", sm=best.sm, path=str(path), nvrtc=nvrtc)
    assert f"/cu{major}/" in str(path) and nvrtc.startswith(f"{major}."), row
print(json.dumps(row))
served = row["path"].split("/artifacts/", 1)[-1]
print(f"cuda-bindings {row['cuda_bindings']:9} {row['source']:18} {served:38} "
      + (f"numpy: {'equal' if row['equal_numpy'] else 'DIFFERS'}" if gpu else f"nvrtc {row['nvrtc']}"))
EOF
  rc=$?
  tail -n 5 "$OUT/two-majors-cu$major.log"
  line=$(tail -n 1 "$OUT/two-majors-cu$major.log")
  rows+=("$(printf 'cu%-3s rc=%-2s %s' "$major" "$rc" "${line:0:120}")")
  [ "$rc" = 0 ] || fail=1
  rm -rf "$site" "$cache"
done
echo "== two majors, one wheel ($( [ "$GPU" = 1 ] && echo launched || echo lookup only))"
printf '%s\n' "${rows[@]}" | tee "$OUT/two-majors-summary.txt"
exit $fail
