#!/usr/bin/env bash
# The CuPy sets examples/cupy-mypkg's wheel merges in (issue 40; docs/cupy.md, "One wheel for several stacks"):
# its recorded matrix built under each stack of examples/cupy-mypkg/stacks.json ("built", but "host": the wheel's
# own build environment builds that one; a stack's "matrix" where its CuPy generates other code, recorded under it), one venv per stack made from PyPI with the stack's installs as pip
# resolves them today plus aot's build requirements. On the driverless CPU host, from the repository root:
#
#   bash .ci/cupy_stack_sets.sh OUT [SM]          (SM: default 90; "80,90,100" for a release)
#   AOT_WHEEL_SM=90 AOT_WHEEL_MERGE=OUT/ctk:OUT/cupy-13.6 python -m pip wheel --no-build-isolation --no-deps \
#     -w .whl examples/cupy-mypkg
#
# Venvs go to $AOT_CUPY_STACK_VENVS (default OUT/venvs; kept: a second run reuses them). Each set: OUT/<tag>. The
# last line printed is the AOT_WHEEL_MERGE value. Needs the network (PyPI) and python3 with venv.
set -euo pipefail
out=${1:?usage: cupy_stack_sets.sh OUT [SM]}
sm=${2:-90}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
venvs=${AOT_CUPY_STACK_VENVS:-$out/venvs}
merge=
while IFS=$'\t' read -r tag matrix installs; do
  v=$venvs/$tag
  if [ ! -x "$v/bin/python" ]; then
    python3 -m venv "$v"
    # the stack first, alone: what pip gives a user today; then aot's build requirements beside it
    set -f  # "cupy-cuda13x[ctk]==14.2.0": a requirement, not a file pattern
    # shellcheck disable=SC2086
    "$v/bin/pip" install -q $installs
    set +f
    nvrtc=$("$v/bin/python" -c "from importlib.metadata import version; print(version('nvidia-cuda-nvrtc'))")
    "$v/bin/pip" install -q "PyYAML>=6.0,<7" "rich>=13.7,<16" "packaging>=22" platformdirs cuda-bindings \
      "nvidia-nvjitlink==$nvrtc"
  fi
  lib=$(ls -d "$v"/lib/python3*/site-packages/nvidia/cu13/lib)
  echo "== $tag: $("$v/bin/python" -m pip list 2>/dev/null | grep -iE "^(cupy-cuda1[23]x|nvidia-cuda-(nvrtc|runtime|crt)) " | tr -s ' ' | paste -sd, -)"
  (cd "$repo" && LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" PYTHONPATH="$repo" \
    "$v/bin/python" -m aot build --matrix "examples/cupy-mypkg/$matrix" --sm "$sm" --quiet --out "$out/$tag")
  merge=${merge:+$merge:}$out/$tag
done < <(python3 -c "
import json, sys
for s in json.load(open(sys.argv[1]))['built']:
    if s['tag'] != 'host':
        print(s['tag'] + '\t' + s.get('matrix', 'build_matrix.yaml') + '\t' + ' '.join(s['install']))
" "$repo/examples/cupy-mypkg/stacks.json")
echo "$merge"
