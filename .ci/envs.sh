#!/usr/bin/env bash
# The environment matrix (noxfile.py; docs/dependencies.md): aot's cu13 wheel and the example wheels built from
# this checkout, then each named environment (newest releases, the oldest supported, a cuda-cccl 0.6 and a
# cuda-cccl 1.1 library stack) resolved by pip, `pip check`ed and loaded with the stand-in driver. Slow (minutes
# per environment, a few GB of wheels): its own CI job, not part of .ci/run. Needs python3.11, a C compiler and
# the package index. `bash .ci/envs.sh "envs(env='cccl-0.6')"` runs one environment (after the wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
tools=build/envs/tools
if [[ ! -x $tools/bin/nox ]]; then
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install -q --disable-pip-version-check "nox==2026.10.20" "uv==0.13.9"
fi
export PATH="$PWD/$tools/bin:$PATH"
if [[ $# -gt 0 ]]; then
  nox -s "$@"
else
  nox -s wheels envs
  nox -s table
fi
