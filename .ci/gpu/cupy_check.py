"""CuPy's own kernels shipped ahead of time (issue 35), on a GPU host: the child that runs examples/cupy-mypkg's
public calls in a fresh process and counts CuPy's compiles, and the parent that compares the scenarios.

    python3 cupy_check.py child DTYPE...        (PYTHONPATH names the site; CUPY_CACHE_DIR an empty folder)
    python3 cupy_check.py check SITE JITSITE OUT

A compile is a call of ``cupy.cuda.compiler._compile_using_nvrtc_no_warning`` (where CuPy runs NVRTC on a kernel);
CuPy's one NVRTC run of an empty program per option set (``_preprocess``: the NVRTC banner its key holds; it runs
with a warm cache too) is counted apart. Results are saved and compared byte for byte with CuPy's own compile's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def child(dtypes: list[str], out: Path) -> None:
    import numpy as np
    import cupy  # noqa: F401
    from cupy.cuda import compiler
    counts = {"compile": 0, "preprocess": 0}
    compiled: list[str] = []   # the kernels CuPy compiled (its first __global__ name): what a packaged run missed
    compile_, preprocess = compiler._compile_using_nvrtc_no_warning, compiler._preprocess

    def counting_compile(*a, **kw):
        counts["compile"] += 1
        found = re.search(r"__global__\s+void\s+(\w+)", str(a[0] if a else kw.get("source", "")))
        compiled.append(found.group(1) if found else "?")
        return compile_(*a, **kw)

    def counting_preprocess(*a, **kw):
        counts["preprocess"] += 1
        return preprocess(*a, **kw)
    compiler._compile_using_nvrtc_no_warning, compiler._preprocess = counting_compile, counting_preprocess
    import cupy_mypkg
    from cupy_mypkg import workload
    per: dict = {}
    results = {}
    for d in dtypes:
        before = counts["compile"]
        for name, value in workload.run(d).items():
            results[f"{d}.{name}"] = value
        per[d] = counts["compile"] - before
    np.savez(out, **results)
    reg = getattr(cupy_mypkg, "registry", None)
    print(json.dumps({"compiles": counts["compile"], "preprocess": counts["preprocess"], "per_dtype": per,
                      "packaged": len(reg.names()) if reg is not None else 0, "compiled": compiled}))


def _run(site: Path, dtypes: list[str], work: Path, tag: str) -> dict:
    cache = Path(tempfile.mkdtemp(prefix=f"cupy-{tag}-", dir=work))  # a new user: CuPy's cache empty
    env = {**os.environ, "CUPY_CACHE_DIR": str(cache),
           "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    r = subprocess.run([sys.executable, "-W", "ignore::Warning", __file__, "child", str(work / f"{tag}.npz"),
                        *dtypes], env=env, capture_output=True, text=True, timeout=600, cwd=work)
    if r.returncode != 0:
        print(f"{tag}: child failed\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        return {"failed": True}
    got = json.loads(r.stdout.strip().splitlines()[-1])
    got["cache_files"] = len([p for p in cache.iterdir() if p.suffix == ".cubin"])
    return got


def check(site: Path, jit: Path, out: Path) -> int:
    import numpy as np
    work = Path(tempfile.mkdtemp(prefix="cupy-check-"))
    packaged_dtypes, other = ["float32", "float64"], ["int32"]
    cold = _run(jit, packaged_dtypes + other, work, "cupy")           # what CuPy compiles for a new user
    served = _run(site, packaged_dtypes, work, "packaged")            # packaged: expect 0 compiles
    unpackaged = _run(site, other, work, "unpackaged")                # a dtype not packaged: compiles as before
    again = _run(jit, packaged_dtypes, work, "cupy2")                 # CuPy compiling again, a second new user
    rows, ok = [], True
    ref = dict(np.load(work / "cupy.npz"))
    ref2 = dict(np.load(work / "cupy2.npz")) if not again.get("failed") else {}
    # Results CuPy itself does not reproduce bit for bit from one fresh process to the next (a float scan whose
    # look-back adds partial sums in the order the blocks finish): those compare within a float tolerance, and
    # the line says so; every other result must be CuPy's own bits.
    varies = {k for k in ref2 if not np.array_equal(ref[k], ref2[k])}
    for k in sorted(varies):
        print(f"  CuPy's own two fresh runs differ in {k}: "
              f"{int(np.sum(ref[k] != ref2[k]))} of {ref[k].size} elements (compared within rtol 1e-4 / 1e-10)")

    def same(k: str, a, b) -> bool:
        if k not in varies:
            return np.array_equal(a, b)
        return np.allclose(a, b, rtol=1e-4 if a.dtype == np.float32 else 1e-10, atol=1e-5 if a.dtype == np.float32
                           else 1e-12)
    for tag, got, dtypes in (("packaged", served, packaged_dtypes), ("unpackaged", unpackaged, other)):
        if got.get("failed"):
            ok = False
            continue
        mine = dict(np.load(work / f"{tag}.npz"))
        equal = all(k in ref and same(k, mine[k], ref[k]) for k in mine) and len(mine) == 7 * len(dtypes)
        for k in sorted(mine):  # what differs, and by how much (a served kernel must give CuPy's own bits)
            if k not in ref or not same(k, mine[k], ref[k]):
                a, b = np.asarray(mine[k]), np.asarray(ref.get(k, np.zeros(0)))
                diff = (f"max |diff| {float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))):.3g}, "
                        f"{int(np.sum(a != b))} of {a.size} elements differ" if a.shape == b.shape else
                        f"shapes {a.shape} vs {b.shape}")
                print(f"  {tag} {k}: {diff}; mine {a.ravel()[:3]} ref {b.ravel()[:3]}")
        rows.append((tag, dtypes, got["compiles"], got["preprocess"], got["cache_files"], equal))
        ok &= equal
    ok &= not cold.get("failed") and cold.get("compiles", 0) > 0
    # CuPy stores what it is served in its cache, as after its own compile (docs/cupy.md): files are expected
    ok &= served.get("compiles") == 0 and served.get("packaged", 0) > 0
    ok &= unpackaged.get("compiles", 0) > 0
    print(f"CuPy without aot (empty cache): {cold.get('compiles')} compiles for float32+float64+int32 "
          f"({cold.get('per_dtype')}), {cold.get('preprocess')} NVRTC banner runs")
    print(f"{'scenario':<12} {'dtypes':<18} {'compiles':>8} {'banner':>6} {'cache files':>11} equal-to-CuPy")
    for tag, dtypes, n, pre, files, equal in rows:
        print(f"{tag:<12} {','.join(dtypes):<18} {n:>8} {pre:>6} {files:>11} {equal}")
    if served.get("compiles"):  # a packaged kernel CuPy did not find: its key differs (NVRTC, headers, CuPy, SM)
        print(f"  packaged run compiled: {', '.join(served.get('compiled', []))}")
    print(f"packaged specs: {served.get('packaged')}; expect: packaged 0 compiles (CuPy stores what it is served in "
          f"its cache), results equal; unpackaged > 0 compiles, results equal")
    print("cupy check:", "PASS" if ok else "FAIL")
    (out / "cupy_check.json").write_text(json.dumps({"cold": cold, "packaged": served, "unpackaged": unpackaged,
                                                     "ok": bool(ok)}, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "child":
        child(sys.argv[3:], Path(sys.argv[2]))
    else:
        sys.exit(check(Path(sys.argv[2]).resolve(), Path(sys.argv[3]).resolve(), Path(sys.argv[4])))
