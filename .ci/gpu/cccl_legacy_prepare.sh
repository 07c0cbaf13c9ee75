#!/usr/bin/env bash
# CPU host: the inputs of .ci/gpu/cccl_legacy.sh, in the git-ignored .gpu/cccl-legacy/, in two folders that are
# each carried by one device call (the carry limit is 64 MiB a call; what one call leaves in the repo stays
# while the machine is warm):
#   a/  llvmlite 0.47, numba 0.65.1, numba-cuda 0.26.0 (both releases need numba-cuda < 0.27 -> numba < 0.66)
#   b/  numpy 2.3.5, cuda-core 0.7.0, cccl-<v>/cuda-cccl <v>, pkg-<v>/legacy_mypkg (examples/legacy-mypkg built
#       by the hatch hook under cuda-cccl <v>, HERE), lib/ aot's NVRTC/nvJitLink shims, nvidia.json
# Python 3.12 wheels (the GPU machine's). The example wheels are built in venvs that are the GPU run's: the same
# wheels, and the NVIDIA compiler/header wheels linked from TOOLKIT_PY (a python whose NVIDIA wheels are the GPU
# machine's: the .[cu13] environment, cuda-toolkit 13.0.2); nvidia.json records their versions, which the GPU
# script compares with its own (the answers' keys hold their bytes).
#   PY312=/root/.pyenv/versions/3.12.1/bin/python3.12 TOOLKIT_PY=/work/main/.venv/bin/python \
#     bash .ci/gpu/cccl_legacy_prepare.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
R=.gpu/cccl-legacy
B=build/cccl-legacy-gpu            # the build venvs and project copies (not carried)
PY312=${PY312:-python3.12}
TOOLKIT_PY=${TOOLKIT_PY:-python3}
rm -rf "$R" "$B" && mkdir -p "$R/a" "$R/b/lib" "$B/deps"
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 "$@" 2>&1 | grep -v "^WARNING: Location" || true; }
dl -d "$R/a" llvmlite==0.47.0 numba==0.65.1 numba-cuda==0.26.0
dl -d "$R/b" numpy==2.3.5 cuda-core==0.7.0
dl -d "$B/deps" cuda-bindings==13.5.0 cuda-pathfinder==1.9.1 typing_extensions==4.16.0   # the GPU machine has its own
PYTHONPATH=$PWD python3 -c "import sys; from pathlib import Path; from aot.runtime.adapters.cccl_legacy import build_shims
build_shims(13, Path(sys.argv[1]))" "$R/b/lib"
rm -f "$R"/b/lib/*.map
for v in 0.6.0 0.7.0; do
  dl -d "$R/b/cccl-$v" "cuda-cccl==$v"
  V=$B/venv-$v
  "$PY312" tests/legacy_envs.py venv "$V" --link-from "$TOOLKIT_PY" > "$R/b/nvidia.json"
  "$PY312" -m pip --python "$V/bin/python" install -q --no-index --no-deps "$R"/a/*.whl "$R"/b/*.whl \
    "$R/b/cccl-$v"/*.whl "$B"/deps/*.whl
  "$PY312" -m pip --python "$V/bin/python" install -q "hatchling==1.33.0" "PyYAML>=6.0,<7" "rich>=13.7,<16" \
    "platformdirs>=4.2,<5" "packaging>=22" 2>&1 | grep -v "^WARNING: Location" || true
  rm -rf "$B/proj-$v" && cp -r examples/legacy-mypkg "$B/proj-$v" && rm -rf "$B/proj-$v/build"
  (cd "$B" && SOURCE_DATE_EPOCH=1700000000 PYTHONPATH= "$PY312" -m pip --python "venv-$v/bin/python" wheel -q \
     --no-build-isolation --no-deps --no-index -w "../../$R/b/pkg-$v" "./proj-$v")
  "$V/bin/python" -m aot verify --for-wheel "$R/b/pkg-$v"/*.whl | tail -1
done
cat "$R/b/nvidia.json"
du -sh "$R/a" "$R/b"
du -sb "$R/a" "$R/b" | awk '{printf "%s: %.1f MiB (limit 64 MiB a call)\n", $2, $1 / 1048576}'
