"""The stacks new CuPy users get (issues 40-42), on a GPU host: the child that runs a package's calls in a fresh
process and counts CuPy's NVRTC compiles, and the parent that runs every stack and prints the table last.

    python3 cupy_stacks.py child KIND OUT.npz         (KIND: mypkg | half; PYTHONPATH names the site)
    python3 cupy_stacks.py check WORK OUT             (WORK: what cupy_stacks.sh prepared)

A child's stack comes from its environment: ``AOT_STACK_NVRTC`` (a folder with another ``libnvrtc.so.13``:
loaded before CuPy, so CuPy's NVRTC is that one), ``AOT_STACK_CUDA_INCLUDE`` (the CUDA headers CuPy compiles
with: cuda-pathfinder's answer for ``cudart``, which CuPy asks), ``PYTHONPATH`` (another CuPy release first).
A compile is a call of the function CuPy runs NVRTC through on its cache miss
(``aot.runtime.adapters.cupy_attach.RELEASES``); CuPy's cache is an empty folder in every run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HALF_PKG = '''"""One half-precision ElementwiseKernel (issue 41: other CUDA headers, other half results)."""
import os
import numpy as np
import aot
if os.path.isfile(os.path.join(os.path.dirname(__file__), "artifacts", "manifest.json")):
    registry = aot.Registry.from_package(__name__)


def run():
    import cupy as cp
    k = cp.ElementwiseKernel("T x, T y", "T z", "z = x / y + x * y - (T)1.1f", "cupy_half_mix")
    x = cp.asarray(np.linspace(0.5, 3.5, 1 << 16, dtype=np.float16))
    y = cp.asarray(np.linspace(1.25, 2.75, 1 << 16, dtype=np.float16))
    return {"half": cp.asnumpy(k(x, y))}
'''


def _stack() -> None:
    """Point CuPy at this child's stack, before CuPy is imported."""
    lib = os.environ.get("AOT_STACK_NVRTC")
    if lib:
        import ctypes
        ctypes.CDLL(os.path.join(lib, "libnvrtc.so.13"), mode=ctypes.RTLD_GLOBAL)  # CuPy finds it loaded
    inc = os.environ.get("AOT_STACK_CUDA_INCLUDE")
    if inc:
        import cuda.pathfinder as pf
        real = pf.find_nvidia_header_directory
        pf.find_nvidia_header_directory = lambda name, *a, **k: inc if name == "cudart" else real(name, *a, **k)


def child(kind: str, out: Path) -> None:
    import numpy as np
    _stack()
    import cupy
    from cupy.cuda import compiler
    compiled: list[str] = []
    for fn in ("_compile_using_nvrtc_no_warning", "compile_using_nvrtc"):
        real = getattr(compiler, fn, None)
        if real is None:
            continue

        def counting(*a, _real=real, **kw):
            found = re.search(r"__global__\s+void\s+(\w+)", str(a[0] if a else kw.get("source", "")))
            compiled.append(found.group(1) if found else "?")
            return _real(*a, **kw)
        setattr(compiler, fn, counting)
    if kind == "mypkg":
        import cupy_mypkg as pkg
        from cupy_mypkg import workload
        results = {f"{d}.{k}": v for d in ("float32", "float64") for k, v in workload.run(d).items()}
    else:
        import cupy_half_pkg as pkg
        results = pkg.run()
    np.savez(out, **results)
    from cupy.cuda import nvrtc
    import cuda.pathfinder as pf
    reg = getattr(pkg, "registry", None)
    print(json.dumps({"compiles": len(compiled), "compiled": compiled, "cupy": cupy.__version__,
                      "nvrtc": ".".join(map(str, nvrtc.getVersion())),
                      "cuda_include": str(pf.find_nvidia_header_directory("cudart")),
                      "packaged": len(reg.names()) if reg is not None else 0}))


def _run(kind: str, site: Path, work: Path, tag: str, env_extra: dict) -> dict:
    cache = Path(tempfile.mkdtemp(prefix=f"cache-{tag}-", dir=work))  # a new user: CuPy's cache empty
    pp = os.pathsep.join([p for p in (env_extra.pop("PYTHONPATH_FIRST", ""), str(site),
                                      os.environ.get("PYTHONPATH", "")) if p])
    env = {**os.environ, **env_extra, "CUPY_CACHE_DIR": str(cache), "PYTHONPATH": pp}
    r = subprocess.run([sys.executable, "-W", "ignore::Warning", __file__, "child", kind, str(work / f"{tag}.npz")],
                       env=env, capture_output=True, text=True, timeout=900, cwd=work)
    (work / f"{tag}.log").write_text(r.stdout + r.stderr)
    if r.returncode != 0:
        print(f"{tag}: child failed\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
        return {"failed": True}
    return json.loads(r.stdout.strip().splitlines()[-1])


def _equal(work: Path, a: str, b: str) -> tuple[bool, str]:
    import numpy as np
    x, y = dict(np.load(work / f"{a}.npz")), dict(np.load(work / f"{b}.npz"))
    bad = []
    for k in sorted(x):
        if k.endswith(".running"):   # a float scan CuPy does not reproduce bit for bit (docs/cupy.md)
            tol = 1e-4 if x[k].dtype == np.float32 else 1e-10
            if not np.allclose(x[k], y[k], rtol=tol, atol=tol / 10):
                bad.append(k)
        elif k not in y or not np.array_equal(x[k], y[k]):
            bad.append(k)
    return (not bad and len(x) == len(y)), ", ".join(bad)


def check(work: Path, out: Path) -> int:
    spec = json.loads((work / "stacks.json").read_text())
    rows, ok = [], True
    for st in spec["stacks"]:
        env = dict(st.get("env", {}))
        ref = _run("mypkg", work / "jit", work, f"{st['tag']}-cupy", dict(env))
        got = _run("mypkg", work / "site", work, f"{st['tag']}-packaged", dict(env))
        if ref.get("failed") or got.get("failed"):
            rows.append((st["tag"], "?", "?", "failed", "failed", False, st["expect"]))
            ok = False
            continue
        equal, bad = _equal(work, f"{st['tag']}-packaged", f"{st['tag']}-cupy")
        served = got["compiles"] == 0 and got["packaged"] > 0
        good = equal and ref["compiles"] > 0 and (served or st["expect"] != "served")
        rows.append((st["tag"], got["cupy"], got["nvrtc"], ref["compiles"], got["compiles"], equal, st["expect"]))
        if got["compiles"]:
            print(f"  {st['tag']}: the packaged run compiled {', '.join(got['compiled'])}")
        if bad:
            print(f"  {st['tag']}: results differ from CuPy's own in {bad}")
        ok &= good
    half = spec.get("half")
    if half:
        for tag, env, expect in (("half-same-headers", {}, "served"),
                                 ("half-other-headers", {"AOT_STACK_CUDA_INCLUDE": half["other_include"]},
                                  "compiled")):
            ref = _run("half", work / "half" / "jit", work, f"{tag}-cupy", dict(env))
            got = _run("half", work / "half" / "site", work, f"{tag}-packaged", dict(env))
            if ref.get("failed") or got.get("failed"):
                rows.append((tag, "?", "?", "failed", "failed", False, expect))
                ok = False
                continue
            equal, _ = _equal(work, f"{tag}-packaged", f"{tag}-cupy")
            good = equal and ((got["compiles"] == 0) if expect == "served" else (got["compiles"] > 0))
            rows.append((tag, got["cupy"], got["nvrtc"], ref["compiles"], got["compiles"], equal, expect))
            ok &= good
        import numpy as np
        a = np.load(work / "half-same-headers-cupy.npz")["half"]
        b = np.load(work / "half-other-headers-cupy.npz")["half"]
        diff = int(np.sum(a != b))
        print(f"CuPy's own half kernel: {diff} of {a.size} values differ between the two header sets"
              + (f" (first at {int(np.argmax(a != b))}: {float(a[a != b][0])!r} vs {float(b[a != b][0])!r})"
                 if diff else ""))
    (out / "cupy_stacks.json").write_text(json.dumps({"rows": rows, "ok": bool(ok)}, indent=1) + "\n")
    print(f"{'stack':<22} {'CuPy':<8} {'NVRTC':<6} {'CuPy alone':>10} {'packaged':>8} {'equal':>6}  expected")
    for tag, cp, nv, n0, n1, eq, expect in rows:
        print(f"{tag:<22} {cp:<8} {nv:<6} {n0!s:>10} {n1!s:>8} {eq!s:>6}  {expect}")
    print("(compiles: CuPy's NVRTC calls in a fresh process with an empty cache; equal: results equal CuPy's own)")
    print("cupy stacks:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def facts() -> None:
    """What aot's key hashes for examples/cupy-mypkg's first entry on this host (``Headers.facts``), one line each:
    ``diff`` with cupy_stacks_build_facts.txt (the build host's) says which header differs."""
    import yaml
    from aot.build.cupy_build import parse_cupy
    from aot.runtime.adapters.cupy_attach import host_paths, substitute
    from aot.runtime.adapters.cupy_key import Headers, include_dirs
    matrix = Path(__file__).resolve().parents[2] / "examples" / "cupy-mypkg" / "build_matrix.yaml"
    e = yaml.safe_load(matrix.read_text())["cupy"][0]
    spec = parse_cupy(e, e["name"], matrix.parent)
    for line in Headers().facts(spec.source, include_dirs(substitute(spec.options, host_paths()))) or []:
        print(line)


if __name__ == "__main__":
    if sys.argv[1] == "facts":
        facts()
    elif sys.argv[1] == "child":
        child(sys.argv[2], Path(sys.argv[3]))
    elif sys.argv[1] == "half-pkg":
        Path(sys.argv[2]).mkdir(parents=True, exist_ok=True)
        (Path(sys.argv[2]) / "__init__.py").write_text(HALF_PKG)
    else:
        sys.exit(check(Path(sys.argv[2]).resolve(), Path(sys.argv[3])))
