#!/usr/bin/env bash
# Issue 27 on the GPU: blobs named from content (cccl_patches/wrapper_names.py) and compiled in the workers'
# fixed folder run and agree with numpy. Prepare on the build host (one worker, in this order):
#   python -m aot build --matrix .ci/gpu/blob_names.yaml --sm 90 --jobs 1 --out .gpu/blob_names
#   python -m aot build --sm 90 --out .gpu/default        # every CCCL key changed (PATCH_VERSION 2)
# then, on the GPU machine, with PYTHONPATH holding aot and its dependencies:
#   bash .ci/gpu/blob_names.sh
# Runs from a scratch folder (the checkout's aot/ never shadows the installed one). Exit status: verify's.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/aot-gpu-out}
mkdir -p "$out"
cd "$(mktemp -d)" || exit 2
rc=0
for set in blob_names default; do
  [ -f "$here/.gpu/$set/manifest.json" ] || { echo "blob_names.sh: no $here/.gpu/$set (prepare it first)" >&2; exit 2; }
  python3 -m aot verify --gpu "$here/.gpu/$set" --json "$out/blob_names-$set.json" -q || rc=$?
done
exit $rc
