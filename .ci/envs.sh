#!/usr/bin/env bash
# The environment matrix (noxfile.py; docs/dependencies.md): aot's cu13 wheel and the example wheels built from
# this checkout, then each named environment (newest releases, the oldest supported, a cuda-cccl 0.6 and a
# cuda-cccl 1.1 library stack) resolved by pip, `pip check`ed and loaded with the stand-in driver. The cuda-cccl
# 0.6 stack (numba-cuda 0.26, numba < 0.66, as libraries pin it) also installs examples/legacy-mypkg, built by the
# hatch hook in that stack (nox -s legacy_wheel, about a minute), and its CCCL specs must all be served: every
# NVRTC compile and nvJitLink link answered from the wheel, none compiled (docs/build.md). Slow (minutes
# per environment, a few GB of wheels): its own CI job, not part of .ci/run. Needs python3.11, a C compiler and
# the package index. `bash .ci/envs.sh "envs(env='cccl-0.6')"` runs one environment (after the wheels and, for
# cccl-0.6, `bash .ci/envs.sh legacy_wheel`). The
# checkout's cccl-aot-cu13 is installed by path in every environment (noxfile.py): the index cannot stand in.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every cache of the run (uv's, pip's, nox's and what else follows XDG_CACHE_HOME: 1.4 GB of stack wheels) in one
# temporary folder, removed when the script ends however it ends; nothing stays in ~/.cache.
cache=$(mktemp -d "${TMPDIR:-/tmp}/aot-envs-cache.XXXXXX")
trap 'chmod -R u+w "$cache" 2>/dev/null; rm -rf "$cache"' EXIT
export UV_CACHE_DIR="$cache/uv" PIP_CACHE_DIR="$cache/pip" XDG_CACHE_HOME="$cache/xdg"
tools=build/envs/tools
if [[ ! -x $tools/bin/nox ]]; then
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install -q --disable-pip-version-check "nox==2026.10.20" "uv==0.13.9"
fi
export PATH="$PWD/$tools/bin:$PATH"
if [[ $# -gt 0 ]]; then
  nox -s "$@"
else
  nox -s wheels legacy_wheel envs
  nox -s table
fi
