#!/usr/bin/env bash
# The two runtime distributions, cccl-aot-cu12 and cccl-aot-cu13, built from this checkout into one folder:
# what a downstream package's build needs before they are on the package index (docs/downstream.md).
#
#     bash .ci/wheelhouse.sh ~/wheelhouse
#     export PIP_FIND_LINKS=~/wheelhouse      # then pip and `python -m build` find them there
#
# Each is the release's wheel without artifacts (tool-only: aot's runtime, build driver and stand-ins):
# .ci/variant.py makes the major's pyproject.toml in a copy of the sources, and `pip wheel` builds it in
# pip's isolated environment (scikit-build-core from the index, a C compiler and CMake for the stand-in
# libraries). AOT_WHEEL_* of the calling shell are ignored (they would bundle artifacts). Needs python3 with
# pip (PYTHON overrides), cc and network access to the index; takes about a minute.
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: bash .ci/wheelhouse.sh DIR   (makes cccl-aot-cu12 and cccl-aot-cu13 wheels in DIR)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1"
out=$(cd "$1" && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/aot-wheelhouse.XXXXXX")
trap 'rm -rf "$work"' EXIT
unset AOT_WHEEL_SM AOT_WHEEL_ARTIFACTS AOT_WHEEL_MATRIX
for major in cu12 cu13; do
  src="$work/$major"
  mkdir -p "$src"
  # The files the wheel is made of (pyproject.toml [tool.scikit-build] and CMakeLists.txt), nothing built.
  tar -C "$root" --exclude=__pycache__ --exclude=artifacts --exclude='cccl_patches/lib' -cf - \
    aot cccl_patches CMakeLists.txt pyproject.toml README.md build_matrix.yaml | tar -C "$src" -xf -
  "$python" "$root/.ci/variant.py" "$major" "$src/pyproject.toml" >/dev/null
  rm -f "$out"/cccl_aot_"$major"-*.whl  # one wheel per major: a rebuild replaces it
  "$python" -m pip wheel -q --no-deps -w "$out" "$src"
done
ls -1 "$out"/cccl_aot_cu1[23]-*.whl
