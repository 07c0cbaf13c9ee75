#!/usr/bin/env bash
# numba-cuda kernels shipped ahead of time (issue 31), on a GPU host. Inputs, prepared on the CPU host:
#   SITE/numba_mypkg/            the example package with artifacts/ (aot build of examples/numba-mypkg/build_matrix.yaml)
#   JITSITE/numba_mypkg/         the same package without artifacts/ (numba-cuda compiles)
#   bash .ci/gpu/numba.sh SITE JITSITE [N]
# Checks: every packaged kernel launches through its own dispatcher with zero numba-cuda compiles and gives numpy's
# result; an unpackaged signature compiles once and is right. Then the first launch of each kernel in N (default 5)
# fresh processes: packaged vs numba-cuda cache=True (warm) vs cold JIT, medians. Logs under $OUT.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 SITE JITSITE [N]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/aot-numba-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
timeout 180 python3 -W ignore::Warning "$here/numba_check.py" check "$1" 2>&1 | tee "$out/numba-check.log"
rc=${PIPESTATUS[0]}
timeout 300 python3 -W ignore::Warning "$here/numba_check.py" bench "$1" "$2" "${3:-5}" 2>&1 | tee "$out/numba-bench.log"
exit "$rc"
