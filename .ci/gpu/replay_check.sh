#!/usr/bin/env bash
# Issue 36.3 on the GPU: kernels without a written check are checked by replaying the launches `aot record` kept.
# examples/adopt-mypkg has three NVRTC sources (4 units) and no [tool.aot.checks]; its ops launch through the
# library's own cuLaunchKernel with a void** of arguments.
#
#   bash .ci/gpu/replay_check.sh prepare   # on the CPU host (dev venv active), after `bash .ci/gpu/prepare.sh`
#                                          # (it builds .whl/adopt_mypkg-*.whl and this checkout's aot wheel):
#                                          # .gpu/replay/site (the wheel's package), .gpu/replay/jitsite (the same
#                                          # without artifacts), .gpu/replay/mutsite (saxpy's cubin and PTX rebuilt
#                                          # from `a * x[i] - y[i]` under the original name and keys)
#   bash .ci/gpu/replay_check.sh           # on the GPU machine (device tool, carry [".gpu", ".whl"])
#
# On the GPU, from a scratch folder, with the .whl wheels installed into /tmp/site:
#   1. record: `aot record --package adopt_mypkg --out m.yaml -- python3 drive.py` over the jitsite (the library
#      compiles: aot record needs compiles to write a matrix) with an empty AOT_CACHE_DIR -> m.launches/ (4 kept);
#   2. `verify --gpu --package adopt_mypkg --launches m.launches` of the packaged site: exit 0, every row ok
#      ("replayed 1 recorded launch(es)");
#   3. the same of the mutant site: exit 7, saxpy's rows FAILED (the replay caught the changed artifact);
#   4. without --launches: exit 7 and "4 unchecked (neither a check nor a recorded launch)"; with
#      --allow-unchecked: exit 0.
# Prints one line per step and writes replay.json and the logs into $OUT. Exit 0 only when all four hold.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
R=$here/.gpu/replay

if [ "${1:-}" = prepare ]; then
  whl=$(ls "$here"/.whl/adopt_mypkg-*.whl 2>/dev/null | head -1)
  [ -n "$whl" ] || { echo "replay_check prepare: no .whl/adopt_mypkg-*.whl (run .ci/gpu/prepare.sh first)"; exit 2; }
  rm -rf "$R" && mkdir -p "$R/site" "$R/jitsite" "$R/mutsite"
  python -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$whl" "$R/site" || exit 1
  cp -r "$R/site/adopt_mypkg" "$R/jitsite/" && rm -rf "$R/jitsite/adopt_mypkg/artifacts"
  cp -r "$R/site/adopt_mypkg" "$R/mutsite/" && rm -rf "$R/mutsite/adopt_mypkg/artifacts"
  python - "$here" "$R" <<'PY' || exit 1
import json, shutil, subprocess, sys, tempfile
from pathlib import Path
here, R = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, str(here / ".ci" / "gpu"))
from make_mutants import loader_problems, write_mutant
from aot.core.format import read
base = R / "site" / "adopt_mypkg" / "artifacts"
doc = json.loads((base / "manifest.json").read_text())
entries = [e for e in doc["artifacts"] if e["name"] == "saxpy"]
sms = sorted({e["sm"] for e in entries})
with tempfile.TemporaryDirectory(prefix="aot-replay-mutant-") as tmp:
    proj = Path(tmp) / "proj"
    shutil.copytree(here / "examples" / "adopt-mypkg", proj, ignore=shutil.ignore_patterns("build", "dist", "*.egg-info"))
    k = proj / "adopt_mypkg" / "kernels.py"
    assert k.read_text().count("a * x[i] + y[i]") == 1
    k.write_text(k.read_text().replace("a * x[i] + y[i]", "a * x[i] - y[i]"))
    r = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(proj / "build_matrix.yaml"), "--sm",
                        ",".join(map(str, sms)), "--only", "saxpy", "--out", str(Path(tmp) / "out"), "--jobs", "1",
                        "-q"], cwd=proj, capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    swaps = {e["path"]: (read(Path(tmp) / "out" / e["path"]).payload, {}) for e in entries}
    write_mutant(base, R / "mutsite" / "adopt_mypkg" / "artifacts", swaps,
                 {"must_fail": "saxpy", "mutation": "nvrtc-body", "description": "a*x+y -> a*x-y after the build"})
shutil.copyfile(base / "aot-package.json", R / "mutsite" / "adopt_mypkg" / "artifacts" / "aot-package.json")
problems = loader_problems(base, R / "mutsite" / "adopt_mypkg" / "artifacts")
assert not problems, problems
print(f"{R}: site, jitsite, mutsite (saxpy: {len(entries)} artifacts for SMs {sms} rebuilt from the edited body)")
PY
  exit 0
fi

OUT=${OUT:-/tmp/aot-gpu-out}
mkdir -p "$OUT"
[ -d "$R/site/adopt_mypkg/artifacts" ] || { echo "replay_check: no $R (run it with 'prepare' on the CPU host)"; exit 2; }
python3 -m pip install -q --no-index --no-deps --target /tmp/site "$here"/.whl/*.whl >"$OUT/replay-pip.log" 2>&1 \
  || { tail -5 "$OUT/replay-pip.log"; exit 1; }
base=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
W=$(mktemp -d /tmp/aot-replay.XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$W" || exit 2
cat > drive.py <<'PY'
"""adopt-mypkg's ops as its users call them: small arrays, every kernel once (float32 and float64 scale).
REPLAY_DIRECT=DIR: the capture module installed by hand (no aot record), the store written at exit."""
import os
import numpy as np
if os.environ.get("REPLAY_DIRECT"):
    import atexit, types
    from pathlib import Path
    import aot.record.launches as rl
    from aot.record.launch_store import store
    from cuda.bindings import driver
    priv = Path(os.environ["REPLAY_DIRECT"])
    priv.mkdir()
    os.environ["AOT_RECORD_LAUNCHES"] = str(priv)
    recs = []

    class Quiet:
        def __enter__(self):
            pass

        def __exit__(self, *exc):
            pass
    rl.patch("cuda.bindings.driver", driver, types.SimpleNamespace(write=recs.append, busy=lambda: False, quiet=Quiet))
    atexit.register(lambda: print("store notes:", store(recs, {p.name: p.read_bytes() for p in priv.iterdir()},
                                                            "m.launches")))
from adopt_mypkg import ops
ops.context()
x = np.arange(1000, dtype=np.float32)
assert np.allclose(ops.saxpy(2.0, x, np.ones(1000, np.float32)), 2 * x + 1)
for dt in (np.float32, np.float64):
    assert np.allclose(ops.scale(3.0, x.astype(dt)), 3 * x.astype(dt))
assert (ops.block_sums(np.arange(1000, dtype=np.int32)) == np.add.reduceat(np.arange(1000), range(0, 1000, 256))).all()
print("drive: ok")
PY
declare -A rc
AOT_CACHE_DIR=$W/cache PYTHONPATH=$R/jitsite:$base python3 -m aot record --package adopt_mypkg --out m.yaml \
  -- python3 drive.py >"$OUT/replay-record.log" 2>&1
rc[record]=$?
how="aot record"
if [ ! -f m.launches/index.json ]; then  # aot record without the launch hook wired in: capture by hand
  echo "replay_check: aot record wrote no m.launches (is launches in aot/record/hook.py's FAMILY_HOOKS?); capturing directly"
  how="direct"
  PYTHONPATH=$R/jitsite:$base REPLAY_DIRECT=$W/direct AOT_CACHE_DIR=$W/cache2 python3 drive.py \
    >"$OUT/replay-direct.log" 2>&1 || tail -20 "$OUT/replay-direct.log"
fi
kept=$(python3 -c "import json; print(len(json.load(open('m.launches/index.json'))['launches']))" 2>/dev/null || echo 0)
verify() {  # verify NAME SITE ARGS...: rc -> rc[NAME], rows -> $OUT/replay-NAME.json
  local name=$1 site=$2; shift 2
  PYTHONPATH=$site:$base python3 -m aot verify --gpu --quiet --package adopt_mypkg --json "$OUT/replay-$name.json" "$@" \
    >"$OUT/replay-$name.log" 2>&1
  rc[$name]=$?
}
verify replay "$R/site" --launches m.launches
verify mutant "$R/mutsite" --launches m.launches
verify unchecked "$R/site"
verify allowed "$R/site" --allow-unchecked
python3 - "$OUT" "$kept" "$how" "${rc[record]}" "${rc[replay]}" "${rc[mutant]}" "${rc[unchecked]}" "${rc[allowed]}" <<'PY'
import json, sys
from pathlib import Path
out, kept, how, *rcs = sys.argv[1:]
r_rec, r_rep, r_mut, r_unc, r_all = map(int, rcs)
def rows(name):
    p = Path(out) / f"replay-{name}.json"
    return json.loads(p.read_text()) if p.is_file() else []
def log(name):
    p = Path(out) / f"replay-{name}.log"
    return p.read_text(errors="replace") if p.is_file() else ""
rep, mut = rows("replay"), rows("mutant")
checks = {
    "aot record kept 4 launches": r_rec == 0 and int(kept) == 4 and how == "aot record",
    "replay: exit 0, every row ok": r_rep == 0 and rep and all(r["status"] == "ok" for r in rep),
    "mutant: exit 7, saxpy FAILED": r_mut == 7 and any(r["spec"] == "saxpy" and r["status"] == "failed" for r in mut)
                                    and all(r["status"] == "ok" for r in mut if r["spec"] != "saxpy"),
    "no launches: exit 7, 4 unchecked": r_unc == 7 and "4 unchecked (neither a check nor a recorded launch)"
                                        in log("unchecked"),
    "--allow-unchecked: exit 0": r_all == 0,
}
for what, ok in checks.items():
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
first = next((r for r in mut if r["status"] == "failed"), None)
doc = {"kept": int(kept), "captured_by": how, "rc": dict(zip(("record", "replay", "mutant", "unchecked", "allowed"), map(int, rcs))),
       "checks": checks, "mutant_failure": first and first["detail"], "ok": all(checks.values())}
(Path(out) / "replay.json").write_text(json.dumps(doc, indent=1) + "\n")
print(json.dumps(doc))
sys.exit(0 if doc["ok"] else 1)
PY
