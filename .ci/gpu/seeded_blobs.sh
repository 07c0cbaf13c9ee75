#!/usr/bin/env bash
# CCCL blobs whose NVRTC programs were seeded from their inputs (aot/build/nvrtc_seed.py): no nonce or PID in
# their internal names (seed in place of `_<nonce>_<PID>`, other lengths than the zeroed names of before) load,
# run and agree with numpy, and two builds with other worker PIDs wrote the same bytes.
#   bash .ci/gpu/seeded_blobs.sh prepare     on the driverless CPU host (the developer venv): builds
#                                            .gpu/seeded-a (--jobs 1) and .gpu/seeded-b (--jobs 2, --force), from
#                                            .ci/gpu/blob_names.yaml (lambdas only), and checks they are equal
#   bash .ci/gpu/seeded_blobs.sh             on the GPU machine (carry .gpu; PYTHONPATH holding aot and its
#                                            dependencies, as for blob_names.sh): aot verify --gpu on .gpu/seeded-a
# Prints a table last; logs under $OUT. Exit status: non-zero on any failure.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/aot-gpu-out}
mkdir -p "$out"
# A name still carrying a PID field: _INTERNAL_<8 hex>_<n>_<module>_<8 hex>_<digits> (zeroed or not).
pid_names() { python3 - "$1" <<'EOF'
import pathlib, re, sys
n = 0
for p in pathlib.Path(sys.argv[1]).rglob("*.aot"):
    n += len(re.findall(rb"_(?:INTERNAL_|GLOBAL__N__)[0-9a-f]{8}_\d+_[A-Za-z_]\w*?_[0-9a-f]{8}_\d", p.read_bytes()))
print(n)
EOF
}
if [ "${1:-}" = prepare ]; then
  cd "$here" || exit 2
  python -m aot build --matrix .ci/gpu/blob_names.yaml --sm 90 --jobs 1 --out .gpu/seeded-a --force --quiet || exit 1
  sh -c 'for i in $(seq 1500); do :; done; true' &  # other worker PIDs for the second build
  wait
  python -m aot build --matrix .ci/gpu/blob_names.yaml --sm 90 --jobs 2 --out .gpu/seeded-b --force --quiet || exit 1
  same=yes
  for f in $(cd .gpu/seeded-a && find cccl -name '*.aot' | sort); do
    cmp -s ".gpu/seeded-a/$f" ".gpu/seeded-b/$f" || { same=no; echo "differs: $f"; }
  done
  left=$(pid_names .gpu/seeded-a)
  printf '%-28s %s\n' "check" "result" "two builds byte-identical" "$same" "names with a PID field" "$left"
  [ "$same" = yes ] && [ "$left" = 0 ]
  exit $?
fi
[ -f "$here/.gpu/seeded-a/manifest.json" ] || { echo "seeded_blobs.sh: no $here/.gpu/seeded-a (run it with 'prepare' first)" >&2; exit 2; }
cd "$(mktemp -d)" || exit 2  # the checkout's aot/ never shadows the installed one
python3 -m aot verify --gpu "$here/.gpu/seeded-a" --json "$out/seeded_blobs.json" -q > "$out/seeded_blobs.log" 2>&1
rc=$?
left=$(pid_names "$here/.gpu/seeded-a")
printf '%-28s %s\n' "check" "result" "aot verify --gpu (exit)" "$rc" "names with a PID field" "$left"
[ "$rc" = 0 ] && [ "$left" = 0 ]
