#!/usr/bin/env bash
# An NVRTC unit that #includes a header is served by source only where the caller's header text is the build's
# (issue 46): built here (sm of this GPU), looked up with -I folders holding the build's header (served
# packaged) and other text (compiled here); every result equal to the library's own compile (cupy.RawKernel).
# Run from the repository root on the GPU machine, aot importable from this checkout, platformdirs beside it:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/platformdirs-*.whl && \
#     export PYTHONPATH=/tmp/site; bash .ci/gpu/nvrtc_headers.sh
# Needs cupy, cuda-core 1.2.x, cuda-bindings and NVRTC 13 (the machine's); no cuda-cccl. Logs under $OUT.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/aot-gpu-out}/nvrtc-headers
mkdir -p "$out"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" python3 "$repo/.ci/gpu/nvrtc_headers.py" 2>"$out/stderr.log"
rc=$?
[ $rc -eq 0 ] || tail -20 "$out/stderr.log"
exit $rc
