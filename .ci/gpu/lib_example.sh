#!/usr/bin/env bash
# GPU check of examples/lib-mypkg (issue 27): its own tests launch NVRTC kernels (haversine, euclidean f32/f64)
# and CCCL algorithms (total, positive, doubled) against numpy; then `aot record` over the same tests on the
# GPU (the launch paths), diffed against the committed matrix (informational). Needs cuda-cccl 1.2.1,
# cuda-core, cupy, numpy, pytest and this checkout's aot (`pip install --no-deps .` or the .whl of prepare.sh).
#   bash .ci/gpu/lib_example.sh          (from the repository root; results under $OUT when set)
set -euo pipefail
out=${OUT:-$(mktemp -d)}
cd examples/lib-mypkg
PYTHONPATH=stubs${PYTHONPATH:+:$PYTHONPATH} python3 -m pytest -q -p no:cacheprovider -rs tests 2>&1 | tee "$out/lib_tests_gpu.txt"
PYTHONPATH=stubs${PYTHONPATH:+:$PYTHONPATH} python3 -m aot record --out "$out/lib_recorded_gpu.yaml" -- \
  python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tee "$out/lib_record_gpu.txt"
diff <(tail -n +2 build_matrix.yaml) <(tail -n +2 "$out/lib_recorded_gpu.yaml") || echo "(recorded on the GPU: differs as above)"
