#!/usr/bin/env bash
# CuPy's own kernels shipped ahead of time (issue 35), on a GPU host with CuPy (14.2.0) and aot importable
# (`python3 -m aot` works: the aot wheel, PyYAML, rich; see /work/shared/gpu/README.md):
#   bash .ci/gpu/cupy_check.sh [N]                (N: benchmark processes per mode, default 3; 0: no benchmark)
#   bash .ci/gpu/cupy_check.sh --wheel WHEEL [N]  (examples/cupy-mypkg's wheel, built on the CPU host)
# Without --wheel: 1. records what CuPy compiles for examples/cupy-mypkg's public calls on float32 and float64
#    (`aot record`, an empty CUPY_CACHE_DIR), 2. builds that matrix for this GPU's SM with this host's CuPy and
#    NVRTC.
# With --wheel: neither; the wheel (the committed matrix built on the driverless host: AOT_WHEEL_SM=90 pip wheel
#    --no-build-isolation --no-deps -w .whl examples/cupy-mypkg) is installed as its users install it
#    (pip install --no-index --no-deps --target), and the same package without its artifacts is CuPy alone.
#    Its kernels are found only where the text of every header they reach equals the build host's (aot's key:
#    docs/cupy.md; NVRTC's version is not in it); otherwise CuPy compiles them and step 3 fails on the packaged
#    compiles.
# Then: 3. checks in fresh processes with an empty CuPy cache: packaged calls 0 CuPy compiles (CuPy stores what it
#    is served in its cache), results equal to CuPy's own; int32 (not packaged) compiles as before, results equal,
#    4. benchmarks the first call of each public function, N fresh processes per mode.
# Logs, the recorded matrix and JSON under $OUT ($OUT/cupy-wheel with --wheel: the wheel's manifest instead).
# Exit 0 only when every check passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${OUT:-/tmp/aot-cupy-out}
wheel=
if [ "${1:-}" = --wheel ]; then
  wheel=${2:?usage: cupy_check.sh --wheel WHEEL [N]}
  shift 2
  out=$out/cupy-wheel  # beside the recording run's files, not over them
fi
mkdir -p "$out"
work=$(mktemp -d)
export PYTHONUNBUFFERED=1
runs=${1:-3}
mkdir -p "$work/jit" "$work/site" "$work/matrix"
sm=$(python3 -c "import cupy; print(cupy.cuda.Device().compute_capability)")
python3 -c "import cupy, sys; print('CuPy', cupy.__version__, 'NVRTC', cupy.cuda.nvrtc.getVersion(), 'sm', '$sm', 'python', sys.version.split()[0])" | tee "$out/cupy-env.log"

if [ -n "$wheel" ]; then
  # the wheel as its users install it (no network here: nothing else is fetched), and its sources without artifacts
  python3 -m pip install -q --no-index --no-deps --target "$work/site" "$wheel" >"$out/cupy-install.log" 2>&1 \
    || { cat "$out/cupy-install.log"; echo "cupy check: FAIL (pip install $wheel)"; exit 1; }
  cp -r "$work/site/cupy_mypkg" "$work/jit/" && rm -rf "$work/jit/cupy_mypkg/artifacts"
  cp "$work/site/cupy_mypkg/artifacts/manifest.json" "$out/cupy-wheel-manifest.json"
  python3 - "$work/site/cupy_mypkg/artifacts" "$sm" <<'PY' | tee -a "$out/cupy-env.log" || { echo "cupy check: FAIL (the wheel has no kernels for this GPU)"; exit 1; }
import json, sys
info = json.load(open(f"{sys.argv[1]}/aot-package.json"))
print(f"wheel: {len(info['specs'])} specs for sm {info['sms']}, built by aot {info['producer']['aot']} "
      f"(NVRTC {info['producer']['nvrtc']}); this GPU: sm {sys.argv[2]}")
sys.exit(0 if int(sys.argv[2]) in info["sms"] else 1)
PY
else
  cp -r "$repo/examples/cupy-mypkg/cupy_mypkg" "$work/jit/"
  cp -r "$repo/examples/cupy-mypkg/cupy_mypkg" "$work/site/"

  # 1. record (the package without artifacts; CuPy compiles everything once)
  (cd "$work" && CUPY_CACHE_DIR="$work/cache-record" PYTHONPATH="$work/jit${PYTHONPATH:+:$PYTHONPATH}" \
    timeout 600 python3 -m aot record --out "$work/matrix/build_matrix.yaml" --package cupy_mypkg -- \
    python3 -m cupy_mypkg.workload float32 float64) >"$out/cupy-record.log" 2>&1
  rc=$?
  tail -n 5 "$out/cupy-record.log"
  cp -r "$work/matrix" "$out/cupy-matrix"
  grep -c "^  - " "$work/matrix/build_matrix.yaml" | sed 's/^/recorded entries: /'
  [ $rc -eq 0 ] || { echo "cupy check: FAIL (record exited $rc)"; exit 1; }

  # 2. build for this GPU's SM (CuPy's key holds the SM, this NVRTC and this CuPy)
  timeout 600 python3 -m aot build --matrix "$work/matrix/build_matrix.yaml" --sm "$sm" --jobs 8 -q \
    --out "$work/site/cupy_mypkg/artifacts" >"$out/cupy-build.log" 2>&1 || { tail -n 30 "$out/cupy-build.log";
    echo "cupy check: FAIL (build)"; exit 1; }
  tail -n 3 "$out/cupy-build.log"
fi

# 3. the check
timeout 900 python3 "$here/cupy_check.py" check "$work/site" "$work/jit" "$out" 2>&1 | tee "$out/cupy-check.log"
rc=${PIPESTATUS[0]}

# 4. the benchmark
if [ "$runs" != 0 ]; then
  timeout 900 python3 "$repo/benchmarks/cupy_first_call.py" --site "$work/site" --jit "$work/jit" --runs "$runs" \
    --json "$out/cupy_first_call.json" 2>&1 | tee "$out/cupy-bench.log"
fi
exit "$rc"
