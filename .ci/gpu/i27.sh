#!/usr/bin/env bash
# Issue 27 on the GPU: blobs named from content (cccl_patches/wrapper_names.py) and compiled in the workers'
# fixed folder run and agree with numpy. Prepare on the build host (one worker, in this order):
#   python -m aot build --matrix .ci/gpu/i27_matrix.yaml --sm 90 --jobs 1 --out .gpu/i27
#   python -m aot build --sm 90 --out .gpu/default        # every CCCL key changed (PATCH_VERSION 2)
# then, on the GPU machine, with PYTHONPATH holding aot and its dependencies:
#   bash .ci/gpu/i27.sh
# Runs from a scratch folder (the checkout's aot/ never shadows the installed one). Exit status: verify's.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/aot-gpu-out}
mkdir -p "$out"
cd "$(mktemp -d)" || exit 2
rc=0
for set in i27 default; do
  [ -f "$here/.gpu/$set/manifest.json" ] || { echo "i27.sh: no $here/.gpu/$set (prepare it first)" >&2; exit 2; }
  python3 -m aot verify --gpu "$here/.gpu/$set" --json "$out/i27-$set.json" -q || rc=$?
done
exit $rc
