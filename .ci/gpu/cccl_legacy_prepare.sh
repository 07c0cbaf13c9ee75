#!/usr/bin/env bash
# CPU host: the inputs of .ci/gpu/cccl_legacy.sh, in the git-ignored .gpu/cccl-legacy/, in four folders
# carried file by file over five device calls (.ci/gpu/cccl_legacy.sh's header; what one call leaves in the repo
# stays while the machine is warm):
#   a/  llvmlite 0.47, numba 0.65.1, numba-cuda 0.26.0 (both releases need numba-cuda < 0.27 -> numba < 0.66)
#   b/  numpy 2.3.5, cuda-core 0.7.0, cccl-<v>/cuda-cccl <v>, pkg-<v>/legacy_mypkg (examples/legacy-mypkg built
#       by the hatch hook under cuda-cccl <v>, HERE), lib/ aot's NVRTC/nvJitLink shims, nvidia.json
#   c/  nvidia-nvvm (in two parts, .part0 and .part1, and its .sha256), d/ nvidia-cuda-nvcc, nvidia-cuda-cccl,
#       nvidia-cuda-crt: the NVIDIA wheels of nvidia.json that the GPU machine lacks (CARRY_NVIDIA; its image has
#       the NVRTC, nvJitLink and runtime wheels), at the versions the answers' keys hold
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
rm -rf "$R" "$B" && mkdir -p "$R/a" "$R/b/lib" "$R/c" "$R/d" "$B/deps"
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_24_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 "$@" 2>&1 | grep -v "^WARNING: Location" || true; }
dl -d "$R/a" llvmlite==0.47.0 numba==0.65.1 numba-cuda==0.26.0
dl -d "$R/b" numpy==2.3.5 cuda-core==0.7.0
dl -d "$B/deps" cuda-bindings==13.5.0 cuda-pathfinder==1.9.1 typing_extensions==4.16.0   # the GPU machine has its own
PYTHONPATH=$PWD python3 -c "import shutil, sys; from pathlib import Path; from aot.runtime.adapters.cccl_legacy import build_shims
out = Path(sys.argv[1])
for p in build_shims(13, out).values():  # the checkout's built ones, or compiled into out
    p.parent == out or shutil.copy(p, out)" "$R/b/lib"
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
CARRY_NVIDIA=${CARRY_NVIDIA:-nvidia-nvvm nvidia-cuda-nvcc nvidia-cuda-cccl nvidia-cuda-crt}
for name in $CARRY_NVIDIA; do
  ver=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$R/b/nvidia.json" "$name")
  [[ $name == nvidia-nvvm ]] && to=c || to=d        # nvvm alone fills a call's carry
  dl -d "$R/$to" "$name==$ver"
done
# a call carries about 56 MB beside the working tree: nvvm (62 MB) travels in two parts, joined and checked there
for w in "$R"/c/*.whl; do
  (cd "$(dirname "$w")" && f=$(basename "$w") && sha256sum "$f" > "$f.sha256" && split -b 50000000 -d -a 1 "$f" "$f.part" && rm "$f")
done
cat "$R/b/nvidia.json"
du -sh "$R"/?
du -sb "$R"/? | awk '{printf "%s: %.1f MiB (limit 64 MiB a call)\n", $2, $1 / 1048576}'
