#!/usr/bin/env bash
# The downstream example packages on the GPU, installed lean (issue 15). Builds nothing: every wheel is carried.
#
# Run from the repository root on the GPU machine (no network; see ../shared/gpu/README.md) with these
# Python 3.12 wheels in .whl/ (or $AOT_WHEELS):
#   cccl_aot_cu13-0.1.0-py3-none-linux_x86_64.whl   the runtime: python .ci/variant.py cu13 on a copy of the
#                                                   sources, then pip wheel --no-deps (tool-only); a plain
#                                                   cccl_aot-0.1.0-*.whl is taken when there is no -cu13 one
#   mypkg_hatch-0.1.0-py3-none-manylinux_2_26_x86_64.whl  AOT_WHEEL_SM=90 pip wheel --no-deps --no-build-isolation
#   mypkg_skbuild-0.1.0-py3-none-manylinux_2_26_x86_64.whl  -w .whl examples/<name>   (on the CPU host: lambdas)
#   pystr_mypkg-0.1.0-py3-none-manylinux_2_26_x86_64.whl    (kernels kept as Python strings; step 4 needs CuPy)
#   mypkg_geo-0.1.0-py3-none-manylinux_2_26_x86_64.whl      (operators from code in the package itself)
#   cuda_cccl-1.2.1-*.whl, cuda_core-1.2.2-*.whl, platformdirs-*.whl   (../shared/gpu/fetch_wheels.sh)
# numpy, cuda-bindings 13 and cuda-pathfinder are the machine's own.
#
# What it does: a fresh virtual environment (no pip, no toolkit of its own) gets exactly those wheels, with
# the machine's site-packages *after* its own (so cuda-core 1.2.2 shadows the machine's 1.2.0). The machine
# has NVRTC / nvJitLink 13, so AOT_FORCE_STUB_TOOLCHAIN=1 makes aot load its stand-ins as a lean install
# must (and the real ones are checked to stay unmapped). Then, in fresh processes, run from /tmp:
#   1. packages first: `import mypkg_hatch, mypkg_skbuild, cuda.compute`, then every spec of both packages
#      from that install on the GPU (aot.verify.gpu.verify_gpu: CCCL against numpy, NVRTC units with the
#      packages' own checks), and the stand-ins' call counters (must be 0);
#   2. cuda.compute first (the cccl_aot.pth hook): `import cuda.compute`, the application's own
#      CountingIterator, then mypkg_hatch's `input: counting` spec `multiples_of_7_i64` called with it
#      (2^20 indices, against numpy);
#   3. the hook switched off (AOT_IMPORT_HOOK=0): `import cuda.compute` first must then fail (shows that
#      step 2 worked because of the hook).
#   5. mypkg_geo's Python API (issue 20: compaction by two different masks through one artifact, a
#      transform-fused reduction, a zip reduction, a binary search over counting) against numpy, with CuPy
#      arrays (the machine's), from the same lean install.
# Prints a short table last; writes downstream.json and the logs into "$OUT".
#
#   bash .ci/gpu/downstream.sh
# Knobs: PYTHON (default python3), AOT_WHEELS (default .whl), AOT_DOWNSTREAM_FORCE=0 (use whatever NVRTC the
# machine has instead of forcing the stand-ins).
set -uo pipefail
here=$PWD
OUT=${OUT:-/tmp/aot-gpu-out}
PY=${PYTHON:-python3}
WHL=${AOT_WHEELS:-$here/.whl}
mkdir -p "$OUT"
unset PYTHONPATH  # the usual /tmp/site would shadow this lean install

runtime=$(ls "$WHL"/cccl_aot_cu13-*.whl 2>/dev/null | head -1)
[ -n "$runtime" ] || runtime=$(ls "$WHL"/cccl_aot-*.whl 2>/dev/null | head -1)
wheels=("$runtime")
for pat in 'mypkg_hatch-0.1.0-py3-none-*.whl' 'mypkg_skbuild-0.1.0-py3-none-*.whl' \
           'pystr_mypkg-0.1.0-py3-none-*.whl' 'mypkg_geo-0.1.0-py3-none-*.whl' \
           'cuda_cccl-1.2.1-*.whl' 'cuda_core-1.2.2-*.whl' 'platformdirs-*.whl'; do
  w=$(ls "$WHL"/$pat 2>/dev/null | head -1)
  wheels+=("$w")
done
for w in "${wheels[@]}"; do
  [ -n "$w" ] && [ -f "$w" ] || { echo "downstream: missing a wheel in $WHL (have: $(ls "$WHL" | tr '\n' ' '))"; exit 2; }
done

# A fresh environment; if this python cannot make one, a --target dir that a sitecustomize puts first on
# sys.path and processes as a site dir (its .pth files run, as in site-packages).
env_dir=$(mktemp -d /tmp/aot-downstream.XXXXXX)
if "$PY" -m venv --without-pip "$env_dir/venv" >"$OUT/downstream-venv.log" 2>&1; then
  VPY=$env_dir/venv/bin/python
  site=$("$VPY" -c "import sysconfig; print(sysconfig.get_path('purelib'))")
  install_mode=venv
else
  VPY=$PY
  site=$env_dir/site
  mkdir -p "$site" "$env_dir/boot"
  printf 'import site, sys\nsys.path.insert(0, %r)\nsite.addsitedir(%r)\n' "$site" "$site" > "$env_dir/boot/sitecustomize.py"
  export PYTHONPATH=$env_dir/boot
  install_mode=target
fi
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$site" "${wheels[@]}" >"$OUT/downstream-pip.log" 2>&1 \
  || { cat "$OUT/downstream-pip.log"; exit 1; }
if [ "$install_mode" = venv ]; then  # the machine's numpy, cuda-bindings, cuda-pathfinder: after ours
  env -u PYTHONPATH "$PY" -c "import site; print('\n'.join([*site.getsitepackages(), site.getusersitepackages()]))" \
    > "$site/zz_machine.pth"
fi
export AOT_CACHE_DIR=$(mktemp -d /tmp/aot-downstream-cache.XXXXXX)  # private and empty: no JIT leftovers
export PYTHONUNBUFFERED=1
[ "${AOT_DOWNSTREAM_FORCE:-1}" = 1 ] && export AOT_FORCE_STUB_TOOLCHAIN=1
cd /tmp || exit 1

common=$(cat <<'EOF'
import json, os, sys, time
def maps_real_toolkit():
    libs = [l.split()[-1] for l in open("/proc/self/maps").read().splitlines() if "/" in l]
    return sorted({p for p in libs if ("libnvrtc" in p or "libnvJitLink" in p) and "cccl_patches" not in p})
def lean_state():
    from aot.runtime.loader import lean
    st = lean.state()
    return {"stand_ins": sorted(st.stand_ins) if st else None, "forced": st.forced if st else None,
            "calls": lean.stub_calls(), "real_toolkit_mapped": maps_real_toolkit()}
EOF
)

# 1. packages first, then every spec of both from the install
"$VPY" - "$OUT/downstream-1.json" >"$OUT/downstream-1.log" 2>&1 <<EOF
$common
hook_at_start = "_cccl_aot_hook" in sys.modules
t0 = time.perf_counter()
import mypkg_hatch, mypkg_skbuild, pystr_mypkg, mypkg_geo, cuda.compute
t_import = (time.perf_counter() - t0) * 1e3
import aot
from dataclasses import asdict
from aot.package.bundle import read_info
from aot.verify.gpu import verify_gpu
rows = []
for pkg in (mypkg_hatch, mypkg_skbuild, pystr_mypkg, mypkg_geo):
    registry = pkg.registry() if callable(pkg.registry) else pkg.registry  # mypkg_geo makes it on first use
    info = read_info(registry.root) or {}
    for r in verify_gpu(registry, checks=info.get("checks"), package=pkg.__name__):
        rows.append({"package": pkg.__name__, **asdict(r)})
doc = {"step": "packages first", "aot": aot.__file__, "hook_at_start": hook_at_start,
       "import_ms": round(t_import, 1), "device_sm": mypkg_hatch.registry.device_sm(), "rows": rows, **lean_state()}
json.dump(doc, open(sys.argv[1], "w"), indent=1)
for r in rows:
    print(f"{r['package']:14} {r['spec']:26} {r['kind']:10} sm_{r['sm']} {r['source']:9} {r['status']:22} {r['ms']:8.2f} {r['detail'][:60]}")
print(json.dumps({k: v for k, v in doc.items() if k != "rows"}))
ok = rows and all(r["ok"] and r["status"] == "ok" and r["source"] == "packaged" for r in rows)
assert ok, "a spec failed or was not served from the package"
assert doc["stand_ins"] and not any(doc["calls"].values()), f"stand-ins not loaded or called: {doc}"
assert not doc["real_toolkit_mapped"] or os.environ.get("AOT_FORCE_STUB_TOOLCHAIN") != "1", doc
EOF
rc1=$?

# 2. cuda.compute first (the .pth hook), the application's CountingIterator into the package's spec
"$VPY" - "$OUT/downstream-2.json" >"$OUT/downstream-2.log" 2>&1 <<EOF
$common
hook_at_start = "_cccl_aot_hook" in sys.modules
aot_at_start = sorted(m for m in sys.modules if m == "aot" or m.startswith("aot."))
t0 = time.perf_counter()
import cuda.compute                                          # the application's own import, before any aot
t_import = (time.perf_counter() - t0) * 1e3
import numpy as np
from cuda.bindings import driver
from cuda.core import Device
dev = Device()
dev.set_current()

class Array:  # the application's own device array (cuda.core memory, CUDA array interface)
    def __init__(self, n, dtype):
        self.dtype, self.n = np.dtype(dtype), int(n)
        self.nbytes = self.n * self.dtype.itemsize  # cuda.compute reads temp storage's size from it
        self.buf = dev.allocate(max(1, self.n * self.dtype.itemsize), stream=dev.default_stream)
        self.__cuda_array_interface__ = {"shape": (self.n,), "typestr": self.dtype.str, "version": 3,
                                         "data": (int(self.buf.handle), False), "strides": None}
    def get(self):
        out = np.empty(self.n, self.dtype)
        assert int(driver.cuCtxSynchronize()[0]) == 0
        assert int(driver.cuMemcpyDtoH(out.ctypes.data, int(self.buf.handle), out.nbytes)[0]) == 0
        return out

n = 1 << 20
indices = cuda.compute.CountingIterator(np.int64(0))         # the user's own iterator
import mypkg_hatch
select = mypkg_hatch.registry.cccl("multiples_of_7_i64")
d_out, d_count = Array(n, np.int64), Array(1, np.int64)
t0 = time.perf_counter()
nbytes = select(temp_storage=None, d_in=indices, d_out=d_out, d_num_selected_out=d_count, num_items=n)
select(temp_storage=Array(int(nbytes or 1), np.uint8), d_in=indices, d_out=d_out, d_num_selected_out=d_count,
       num_items=n)
count = int(d_count.get()[0])
t_first = (time.perf_counter() - t0) * 1e3
want = np.arange(0, n, 7, dtype=np.int64)
got = d_out.get()[:count]
st = mypkg_hatch.registry.status()["multiples_of_7_i64"]
doc = {"step": "cuda.compute first", "hook_at_start": hook_at_start, "aot_at_start": aot_at_start,
       "import_ms": round(t_import, 1), "first_call_ms": round(t_first, 2), "count": count, "want": int(want.size),
       "equal": bool(count == want.size and np.array_equal(got, want)), "source": st.source, "sm": st.sm,
       "path": st.path, **lean_state()}
json.dump(doc, open(sys.argv[1], "w"), indent=1)
print(json.dumps(doc))
assert doc["hook_at_start"] and doc["aot_at_start"] == [], "the .pth hook did not run, or aot was imported early"
assert doc["equal"] and doc["source"] == "packaged", doc
assert doc["stand_ins"] and not any(doc["calls"].values()), doc
EOF
rc2=$?

# 3. the hook off: cuda.compute first must fail where aot's stand-ins are needed (forced here: the machine
#    has NVRTC, so without the hook cuda.compute finds the real one; that is recorded, not a failure)
AOT_IMPORT_HOOK=0 "$VPY" - "$OUT/downstream-3.json" >"$OUT/downstream-3.log" 2>&1 <<EOF
$common
try:
    import cuda.compute
    result = "imported (the machine's own NVRTC: " + ", ".join(maps_real_toolkit()) + ")"
except Exception as e:
    result = f"failed: {type(e).__name__}: {str(e)[:200]}"
json.dump({"step": "hook off", "result": result, "finders": sum(type(f).__name__ == "CudaComputeFinder"
                                                                  for f in sys.meta_path)}, open(sys.argv[1], "w"))
print(result)
EOF
rc3=$?

# 4. pystr_mypkg's kernels through each handle: cuda.core Kernel, CUfunction (cuLaunchKernel), cupy.RawKernel
"$VPY" "$here/.ci/gpu/pystr_handles.py" --json "$OUT/downstream-4.json" >"$OUT/downstream-4.log" 2>&1
rc4=$?

# 5. mypkg_geo's API against numpy (issue 20)
"$VPY" - "$OUT/downstream-5.json" >"$OUT/downstream-5.log" 2>&1 <<EOF
$common
import importlib.util
import numpy as np
import cupy as cp
import mypkg_geo
rng = np.random.default_rng(20)
res = {}
for key, n in (("mask_a", 100_003), ("mask_b", 2_000_000)):  # two masks, two lengths, one artifact
    m = (rng.random(n) < (0.3 if key == "mask_a" else 0.7)).astype(np.uint8)
    res[key] = bool(np.array_equal(mypkg_geo.compact_by_mask(cp.asarray(m)).get(), np.flatnonzero(m)))
x, y = rng.uniform(-1, 1, 1_000_003), rng.uniform(-3, 5, 1_000_003)
res["sum_of_squares"] = bool(np.isclose(mypkg_geo.sum_of_squares(cp.asarray(x)), np.dot(x, x), rtol=1e-10, atol=0))
res["centroid"] = bool(np.allclose(mypkg_geo.centroid(cp.asarray(x), cp.asarray(y)), (x.mean(), y.mean()),
                                   rtol=0, atol=1e-12))
offsets = np.concatenate([[0], np.cumsum(rng.integers(0, 50, 10_000))]).astype(np.int64)
n = int(offsets[-1])
want = np.searchsorted(offsets, np.arange(n), side="right") - 1
res["segment_of_index"] = bool(np.array_equal(mypkg_geo.segment_of_index(cp.asarray(offsets), n).get(), want))
st = mypkg_geo.registry().status()
doc = {"step": "geo api", "checks": res, "sources": {k: v.source for k, v in st.items()},
       "numba_cuda_mlir_importable": importlib.util.find_spec("numba_cuda_mlir") is not None, **lean_state()}
json.dump(doc, open(sys.argv[1], "w"), indent=1)
print(json.dumps(doc))
assert all(res.values()) and set(doc["sources"].values()) == {"packaged"}, doc
assert not doc["numba_cuda_mlir_importable"] and not any(doc["calls"].values()), doc
EOF
rc5=$?

"$PY" - "$OUT" "$install_mode" "$rc1" "$rc2" "$rc3" "${wheels[@]}" <<'EOF'
import json, os, sys
out, mode, rcs, wheels = sys.argv[1], sys.argv[2], sys.argv[3:6], [os.path.basename(w) for w in sys.argv[6:]]
steps = []
for i in (1, 2, 3):
    try:
        steps.append(json.load(open(f"{out}/downstream-{i}.json")))
    except (OSError, ValueError):
        try:
            last = [ln for ln in open(f"{out}/downstream-{i}.log").read().splitlines() if ln.strip()][-1]
        except (OSError, IndexError):
            last = "no log"
        steps.append({"step": f"step {i}", "error": f"no result ({last[:160]}); see downstream-{i}.log"})
doc = {"install": mode, "wheels": wheels, "rc": [int(r) for r in rcs], "steps": steps}
json.dump(doc, open(f"{out}/downstream.json", "w"), indent=1)
print(f"{'step':22} {'rc':>3}  result")
s1, s2, s3 = steps
for s in (s1, s2):
    if "error" in s:
        print(f"{s['step']:22}      {s['error']}")
rows1 = s1.get("rows", [])
print(f"{'packages first':22} {rcs[0]:>3}  {sum(r['ok'] and r['status'] == 'ok' for r in rows1)} of {len(rows1)} specs ok "
      f"(packaged); stand-ins {s1.get('stand_ins')}, calls {sum((s1.get('calls') or {}).values())}; "
      f"import {s1.get('import_ms')} ms")
print(f"{'cuda.compute first':22} {rcs[1]:>3}  counting select {s2.get('count')}/{s2.get('want')} "
      f"equal={s2.get('equal')} from {s2.get('source')} sm_{s2.get('sm')}; first call {s2.get('first_call_ms')} ms; "
      f"import {s2.get('import_ms')} ms; calls {sum((s2.get('calls') or {}).values())}")
print(f"{'hook off':22} {rcs[2]:>3}  {s3.get('result', s3.get('error'))}")
EOF
tail -n 18 "$OUT/downstream-4.log"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"{'geo api':22} {sys.argv[2]:>3}  {d['checks']} from {sorted(set(d['sources'].values()))}; numba-cuda-mlir {d['numba_cuda_mlir_importable']}; calls {sum(d['calls'].values())}\")" "$OUT/downstream-5.json" "$rc5" 2>/dev/null || echo "geo api                $rc5  no result: see downstream-5.log"
[ "$rc1" = 0 ] && [ "$rc2" = 0 ] && [ "$rc4" = 0 ] && [ "$rc5" = 0 ]
