#!/usr/bin/env bash
# Inputs of .ci/gpu/cccl_releases.sh, made on the CPU host (issue 34 item 2: CCCL blobs for a range of
# cuda-cccl). examples/hatch-mypkg's matrix is built for SM under every carried cuda-cccl release but the last,
# one environment each (as CI builds shards); then the example's wheel is built by its hatchling hook in the
# last environment, which builds under its own release and merges the others in (AOT_WHEEL_MERGE). Beside it
# go the Python 3.12 wheels the GPU machine lacks: every carried cuda-cccl release, one release not carried,
# cuda-core 1.2.2, platformdirs and this checkout's aot.
#
#   AOT_CCCL_ENVS="/work/venvs/cccl-1.1.0 /work/venvs/cccl-1.2.0 /work/venvs/cccl-1.2.1" \
#     bash .ci/gpu/cccl_releases_prepare.sh [SM]          (default SM 90; AOT_CCCL_NOT_CARRIED default 1.1.1)
#
# Each environment: cuda-cccl[cu13]==X and aot's cu13 build requirements (.ci/cccl_envs.sh makes them); the
# last one also hatchling, scikit-build-core and pip: this checkout's aot is installed into it (hatchling finds
# the hook through the installed aot's entry point). Writes the git-ignored .gpu/cccl-releases/; carry it.
set -euo pipefail
SM=${1:-90}
NOT_CARRIED=${AOT_CCCL_NOT_CARRIED:-1.1.1}
R=.gpu/cccl-releases
read -r -a envs <<< "${AOT_CCCL_ENVS:?name the environments, one per cuda-cccl release, the wheel builder last}"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-1700000000}
step() { echo "== $*"; "$@"; }
release() { "$1/bin/python" -c "import importlib.metadata as m; print(m.version('cuda-cccl'))"; }
rm -rf "$R/cccl" "$R/deps" "$R/wheel" && mkdir -p "$R/sets" "$R/cccl" "$R/deps" "$R/wheel"
last=${envs[${#envs[@]}-1]}
merge=() carried=()
for env in "${envs[@]}"; do
  v=$(release "$env")
  carried+=("$v")
  [ "$env" = "$last" ] && continue
  PYTHONPATH=$PWD step "$env/bin/python" -m aot build --matrix examples/hatch-mypkg/build_matrix.yaml --sm "$SM" \
    --out "$R/sets/cccl-$v" --quiet
  merge+=("$PWD/$R/sets/cccl-$v")
done
step "$last/bin/python" -m pip install -q --no-deps --force-reinstall .
rm -rf examples/hatch-mypkg/build
AOT_WHEEL_SM=$SM AOT_WHEEL_MERGE=$(IFS=:; echo "${merge[*]}") \
  step "$last/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$R/wheel" examples/hatch-mypkg
rm -rf examples/hatch-mypkg/build
step "$last/bin/python" -m pip wheel -q --no-build-isolation --no-deps -w "$R/deps" .
dl() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$1" "$2"
}
for v in "${carried[@]}" "$NOT_CARRIED"; do dl "$R/cccl" "cuda-cccl==$v"; done
dl "$R/deps" cuda-core==1.2.2
dl "$R/deps" 'platformdirs>=4.2,<5'
python3 - "$R/wheel"/mypkg_hatch-*.whl <<'PY'
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
meta = z.read(next(n for n in z.namelist() if n.endswith("METADATA"))).decode()
m = json.loads(z.read("mypkg_hatch/artifacts/manifest.json"))
print("wheel requires:", [l.split(": ", 1)[1] for l in meta.splitlines() if l.startswith("Requires-Dist: cuda-cccl")])
print("blobs:", sorted((a["name"], a.get("cuda_cccl"), a["sm"]) for a in m["artifacts"] if a["family"] == "cccl"))
PY
ls -l "$R"/*/*.whl
du -sh "$R"
