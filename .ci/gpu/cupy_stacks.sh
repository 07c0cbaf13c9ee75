#!/usr/bin/env bash
# The CuPy stacks new users get (issues 40-42), on a GPU host with CuPy 14.2.0 and aot importable
# (`python3 -m aot` works: see /work/shared/gpu/README.md). One wheel of examples/cupy-mypkg, built on the
# driverless host (AOT_WHEEL_SM=90 python -m pip wheel --no-build-isolation --no-deps -w .whl examples/cupy-mypkg),
# served under each stack:
#   bash .ci/gpu/cupy_stacks.sh --wheel WHEEL [--nvrtc NVRTC_WHEEL] [--cupy CUPY_WHEEL] [--runtime RUNTIME_WHEEL]
#     --nvrtc    nvidia_cuda_nvrtc-13.5.37-*.whl (58 MB): unpacked here; its nvidia/cu13/lib/libnvrtc.so.13 (and
#                libnvrtc-builtins.so.13.5 beside it, found through LD_LIBRARY_PATH) is loaded before CuPy, so CuPy
#                compiles with NVRTC 13.5.37 while the CUDA headers stay this machine's
#     --cupy     another CuPy release for Python 3.12 (cupy_cuda13x-13.6.0-cp312-*.whl, 55 MB; 14.0.x is 70 MB, over
#                the 64 MiB carry): installed with --target and put first on PYTHONPATH
#     --cupy-deps a wheel that release needs and this machine lacks (13.6: fastrlock), installed beside it
#     --cupy-built the wheel carries a set built under that CuPy release with this machine's headers (stacks.json's
#                torch-cu130-cupy-13.6: the H200's torch cu130 headers): expect it served (0 compiles), not "as its key says"
#     --pip-cuda-path  CUDA_PATH at pip's CUDA (the folder above cuda-pathfinder's cudart headers) for that CuPy: CuPy 13.6
#                puts $CUDA_PATH/include (else /usr/local/cuda/include, a CUDA toolkit on the H200) into every compile, so
#                this is a machine without a system toolkit, as recorded-cupy-13.6 was recorded
#     --runtime  nvidia_cuda_runtime-13.5.37-*.whl (2.5 MB): its headers laid over a copy of this machine's CUDA
#                headers are the "other headers" of the half-precision case; without it, a copy with one line added
#                to cuda_fp16.hpp
# Stacks: machine (CuPy and NVRTC as installed), nvrtc-13.5 (--nvrtc), cupy-<release> (--cupy). Each: CuPy alone
# (the package without its artifacts) and packaged, fresh processes, an empty CUPY_CACHE_DIR each run: expected 0
# compiles where the key input is the build host's (machine, nvrtc-13.5), results equal to CuPy's own everywhere.
# Then the half-precision case: one ElementwiseKernel recorded and built here, run with these headers (served)
# and with other headers (compiled, not served: aot's key holds the headers' text), results equal to CuPy's own.
# Then benchmarks/cupy_request.py. Logs and JSON under $OUT/cupy-stacks. The table is printed last; exit 0 only
# when every check passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${OUT:-/tmp/aot-cupy-out}/cupy-stacks
wheel= nvrtc= cupyw= runtime= cupydeps= cupybuilt= pipcuda=
while [ $# -gt 0 ]; do
  case "$1" in
    --wheel) wheel=$2; shift 2 ;; --nvrtc) nvrtc=$2; shift 2 ;; --cupy) cupyw=$2; shift 2 ;; --cupy-deps) cupydeps=$2; shift 2 ;; --cupy-built) cupybuilt=1; shift ;; --pip-cuda-path) pipcuda=1; shift ;;
    --runtime) runtime=$2; shift 2 ;; *) echo "unknown argument $1"; exit 2 ;;
  esac
done
[ -n "$wheel" ] || { echo "usage: cupy_stacks.sh --wheel WHEEL [--nvrtc W] [--cupy W] [--runtime W]"; exit 2; }
mkdir -p "$out"
work=$(mktemp -d)
export PYTHONUNBUFFERED=1 PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
sm=$(python3 -c "import cupy; print(cupy.cuda.Device().compute_capability)")
python3 - <<'PY' | tee "$out/env.log"
import cupy, sys
from importlib import metadata
d = {}
for n in ("cupy-cuda13x", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "nvidia-cuda-crt"):
    try:
        d[n] = metadata.version(n)
    except metadata.PackageNotFoundError:
        d[n] = "-"
print("machine:", d, "NVRTC", cupy.cuda.nvrtc.getVersion(), "python", sys.version.split()[0])
PY

# the example's wheel, as its users install it, and the same package without artifacts (CuPy alone)
python3 -m pip install -q --no-index --no-deps --target "$work/site" "$wheel" >"$out/install.log" 2>&1 \
  || { cat "$out/install.log"; echo "cupy stacks: FAIL (pip install $wheel)"; exit 1; }
mkdir -p "$work/jit" && cp -r "$work/site/cupy_mypkg" "$work/jit/" && rm -rf "$work/jit/cupy_mypkg/artifacts"
stacks='[{"tag": "machine", "expect": "served"}'
if [ -n "$nvrtc" ]; then
  python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$nvrtc" "$work/nvrtc"
  lib="$work/nvrtc/nvidia/cu13/lib"
  ls "$lib" | tee -a "$out/env.log"
  stacks="$stacks, {\"tag\": \"nvrtc-13.5\", \"expect\": \"served\", \"env\": {\"AOT_STACK_NVRTC\": \"$lib\", \"LD_LIBRARY_PATH\": \"$lib:${LD_LIBRARY_PATH:-}\"}}"
fi
if [ -n "$cupyw" ]; then
  python3 -m pip install -q --no-index --no-deps --target "$work/cupy-other" "$cupyw" $cupydeps >>"$out/install.log" 2>&1 \
    || { tail -5 "$out/install.log"; echo "cupy stacks: FAIL (pip install $cupyw)"; exit 1; }
  rel=$(ls -d "$work"/cupy-other/cupy_cuda13x-*.dist-info | sed 's/.*cupy_cuda13x-\(.*\)\.dist-info/\1/')
  syslib=$(python3 -c "from cuda.pathfinder import load_nvidia_dynamic_lib as l; import os; print(os.path.dirname(l('nvrtc').abs_path))")
  # the wheel built with AOT_WHEEL_MERGE (.ci/cupy_stack_sets.sh) carries a set built under CuPy $rel with the build
  # host's CUDA headers: served here when this machine's headers are the build host's (the closure's lines equal)
  expect="as its key says"
  if python3 -c "import json, sys, zipfile; m = json.loads(zipfile.ZipFile(sys.argv[1]).read('cupy_mypkg/artifacts/manifest.json')); sys.exit(not any(s.get('cupy') == sys.argv[2] for a in m['artifacts'] for s in a.get('cupy_stacks', [])))" "$wheel" "$rel" \
     && { [ -n "$cupybuilt" ] || python3 "$here/cupy_stacks.py" facts 2>/dev/null | diff -q - "$here/cupy_stacks_build_facts.txt" >/dev/null; }; then
    expect=served
  fi
  echo "cupy-$rel: expected $expect" | tee -a "$out/env.log"
  cudapath=
  if [ -n "$pipcuda" ]; then
    cudapath=", \"CUDA_PATH\": \"$(python3 -c "import os, cuda.pathfinder as p; print(os.path.dirname(p.find_nvidia_header_directory('cudart')))")\""
  fi
  stacks="$stacks, {\"tag\": \"cupy-$rel\", \"expect\": \"$expect\", \"env\": {\"PYTHONPATH_FIRST\": \"$work/cupy-other\", \"LD_LIBRARY_PATH\": \"$syslib:${LD_LIBRARY_PATH:-}\"$cudapath}}"
fi
stacks="$stacks]"

# the half-precision case: record and build one kernel here, with this machine's headers
inc=$(python3 -c "import cuda.pathfinder as p; print(p.find_nvidia_header_directory('cudart'))")
mkdir -p "$work/half/jit" "$work/half/site" "$work/half/matrix"
python3 "$here/cupy_stacks.py" half-pkg "$work/half/jit/cupy_half_pkg"
cp -r "$work/half/jit/cupy_half_pkg" "$work/half/site/"
(cd "$work/half" && CUPY_CACHE_DIR="$work/half/cache-record" PYTHONPATH="$work/half/jit:$PYTHONPATH" timeout 600 \
  python3 -m aot record --out "$work/half/matrix/build_matrix.yaml" --package cupy_half_pkg -- \
  python3 -c "import cupy_half_pkg as p; p.run()") >"$out/half-record.log" 2>&1 \
  && timeout 600 python3 -m aot build --matrix "$work/half/matrix/build_matrix.yaml" --sm "$sm" -q \
     --out "$work/half/site/cupy_half_pkg/artifacts" >"$out/half-build.log" 2>&1 \
  || { tail -20 "$out/half-record.log" "$out/half-build.log"; echo "cupy stacks: FAIL (half: record/build)"; exit 1; }
cp -r "$inc" "$work/other-include"
chmod -R u+w "$work/other-include"
if [ -n "$runtime" ]; then
  python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$runtime" "$work/rt"
  cp -r "$work/rt/nvidia/cu13/include/." "$work/other-include/"
  echo "other headers: $inc with $(basename "$runtime")'s include over it" | tee -a "$out/env.log"
else
  echo "// aot cupy_stacks.sh: another header text" >> "$work/other-include/cuda_fp16.hpp"
  echo "other headers: $inc with a line added to cuda_fp16.hpp" | tee -a "$out/env.log"
fi
python3 - "$work/stacks.json" "$stacks" "$work/other-include" <<'PY'
import json, sys
json.dump({"stacks": json.loads(sys.argv[2]), "half": {"other_include": sys.argv[3]}}, open(sys.argv[1], "w"))
PY

timeout 1800 python3 "$here/cupy_stacks.py" check "$work" "$out" > "$out/check.log" 2>&1
rc=$?
cp "$work"/*.log "$out/" 2>/dev/null
timeout 600 python3 "$repo/benchmarks/cupy_request.py" --json "$out/cupy_request.json" 2>&1 | tee "$out/bench.log"
if [ "$rc" != 0 ]; then  # which header differs from the wheel's build host (the first entry's closure)
  python3 "$here/cupy_stacks.py" facts > "$out/facts.txt" 2>&1
  echo "headers differing from the build host's (< build host, > this machine; $out/facts.txt):"
  diff "$here/cupy_stacks_build_facts.txt" "$out/facts.txt" | grep '^[<>]' | head -n 20
fi
cat "$out/check.log"
exit "$rc"
