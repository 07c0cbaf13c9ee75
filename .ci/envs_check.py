"""One environment of the matrix (noxfile.py): what aot loads there, run from outside the source tree.

With the stand-in driver (tests/fake_libcuda.c: a "device" of sm_90 that loads libraries and kernels, runs
nothing), for each installed example wheel: the NVRTC-only and CCCL packages' registries warm up (every unit
and blob loaded, or the errors), the numba package's kernels are attached to their dispatchers or the one
warning says why numba-cuda JIT-compiles them; each cuda-core feature is there or says in one line why not.
Writes one JSON object (``--out``); exits 1 where something that should load did not.

    python .ci/envs_check.py --driver build/envs/libcuda.so.1 --roles nvrtc,numba --name newest --out r.json
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import importlib.metadata as md
import json
import os
import subprocess
import sys
import warnings

DISTS = ("cccl-aot-cu13", "cuda-cccl", "numba-cuda", "numba", "cuda-core", "cuda-bindings", "cuda-pathfinder", "numpy",
         "platformdirs")
PACKAGES = {"nvrtc": "pystr_mypkg", "cccl": "mypkg_hatch", "numba": "numba_mypkg", "legacy": "legacy_mypkg"}
KERNEL = "import ctypes, os, sys; ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL); import aot; " \
         "reg = aot.Registry.from_package('pystr_mypkg', device_sm=90); print(type(reg.kernel('saxpy', 'saxpy')))"


def _version(name: str) -> str:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "-"


def _one_line(msgs: list[str]) -> str:
    return " / ".join(dict.fromkeys(m.splitlines()[0] for m in msgs)) if msgs else ""


def warm(package: str) -> tuple[bool, str]:
    """(loaded, summary): the package's registry warmed up through the stand-in driver."""
    import aot
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reg = aot.Registry.from_package(package)
        reg.request_warmup()
        cold = reg.ensure_warm(timeout=300)
    status = reg.status()
    kernels = sum(s.kernels or 0 for s in status.values())
    if cold:
        errors = [e for n in cold for e in status[n].errors]
        return False, f"cold: {', '.join(cold)}: {_one_line(errors or [str(w.message) for w in caught])}"
    return True, f"loaded ({len(status)} specs, {kernels} kernels)"


#: The JIT fallback of one NVRTC unit for sm_90, twice, in a child without the stand-in driver (compiling needs
#: none, and cuda.core's Program probes the driver it finds): "jit, then cache", or "jit, then jit" and the line
#: that says why the second compiled again.
JIT = """
import sys, warnings
import aot
from aot.runtime.jit.jit import nvrtc_compile_cached
unit = aot.Registry.from_package(sys.argv[1], numba=False).spec("saxpy")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    first, again = (nvrtc_compile_cached(unit, 90)[1] for _ in range(2))
said = [str(w.message).splitlines()[0] for w in caught if "aot" in str(w.message)]
print(f"{first}, then {again}" + (f" ({said[0]})" if said else ""))
"""


def nvrtc_jit(package: str) -> str:
    r = subprocess.run([sys.executable, "-c", JIT, package], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return f"failed: {(r.stderr.strip().splitlines() or [f'exit {r.returncode}'])[-1]}"
    return r.stdout.strip()


#: The legacy package's cuda.compute specs in a child (the shims must load before cuda.compute's C library):
#: the stand-in driver first, the library imported (its registry activates the shims from its manifest), then
#: each spec its manifest lists built through cuda.compute for sm_90; prints the shims' (hits, misses).
LEGACY = """
import ctypes, json, os, sys
ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_GLOBAL)
import importlib, importlib.metadata as md
from pathlib import Path
from aot.core.manifest import load_manifest
from aot.build import cccl_legacy_build as b
from aot.runtime.adapters import cccl_legacy_activate as A
pkg = importlib.import_module(sys.argv[2])
specs = load_manifest(Path(pkg.__file__).parent / "artifacts").legacy[md.version("cuda-cccl")].specs
b._target_cc(90)
for spec in specs:
    b.build_spec(spec)
print(json.dumps({"specs": len(specs), "counts": A._active.counts() if A._active else None}))
"""


def legacy(package: str, driver: str) -> tuple[bool, str]:
    """(ok, summary): every compile and link of the package's cccl-legacy specs answered, none compiled."""
    r = subprocess.run([sys.executable, "-c", LEGACY, driver, package], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return False, f"failed: {(r.stderr.strip().splitlines() or [f'exit {r.returncode}'])[-1]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    counts, n = out["counts"], out["specs"]
    if not counts:
        return False, f"not served: the shims did not load ({n} specs)"
    (ch, cm), (lh, lm), (oh, om) = counts["nvrtc"], counts["nvJitLink"], counts.get("numba", (0, 0))
    # numba compiles an operator once per signature in a process (a second spec with the same one compiles none)
    return (cm == lm == om == 0 and ch == lh == n and oh >= 1), f"served ({n} specs: {ch} compiles, {lh} links, " \
                                                          f"{oh} operators answered; {cm + lm + om} compiled)"


def numba(package: str) -> tuple[bool, str]:
    """(ok, summary): the kernels attached, or the warning that says why numba-cuda JIT-compiles them."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            importlib.import_module(package)
            kernels = importlib.import_module(f"{package}.kernels")
            # numba-cuda imported before the registry: the attach waits for the first compile (issue 42); a
            # driverless check compiles nothing, so it attaches what waits, as that first compile would
            from aot.runtime.adapters.numba_lazy import attach_pending
            attach_pending()
        except Exception as e:  # noqa: BLE001 - the stack's own numba-cuda may not import: one line says so
            return False, f"import failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    attached = [n for n in dir(kernels) if type(getattr(getattr(kernels, n), "_cache", None)).__name__
                == "_PackagedCache"]
    said = _one_line([str(w.message) for w in caught if "aot" in str(w.message)])
    if attached:
        return True, f"attached ({len(attached)} kernels)" + (f"; {said}" if said else "")
    return bool(said), f"JIT: {said}" if said else "neither attached nor a line saying why"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--driver", required=True)
    ap.add_argument("--roles", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    ctypes.CDLL(args.driver, mode=os.RTLD_NOW | os.RTLD_GLOBAL)  # the stand-in driver, before anything CUDA
    from aot.core.versions import CUDA_CORE_FEATURES, cuda_core_missing
    result: dict = {"name": args.name, "python": sys.version.split()[0],
                    "versions": {d: _version(d) for d in DISTS},
                    "features": {k: cuda_core_missing(k) for k in CUDA_CORE_FEATURES}}
    ok = True
    roles = args.roles.split(",")
    for role in ("nvrtc", "cccl"):
        if role in roles:
            loaded, result[role] = warm(PACKAGES[role])
            ok &= loaded
    if "numba" in roles:
        fine, result["numba"] = numba(PACKAGES["numba"])
        ok &= fine
    if "legacy" in roles:
        fine, result["legacy"] = legacy(PACKAGES["legacy"], args.driver)
        ok &= fine
    if "nvrtc" in roles:
        result["nvrtc_jit"] = nvrtc_jit(PACKAGES["nvrtc"])
        import aot
        try:
            result["program_cache"] = type(aot.program_cache(PACKAGES["nvrtc"])).__name__
        except AttributeError as e:  # exists only where cuda-core has ProgramCacheResource
            result["program_cache"] = str(e)
        ok &= (result["program_cache"] == "PackagedProgramCache") == (result["features"]["program_cache"] is None)
    # The Kernel handle over a loaded unit, in a child (a cuda.core that probes the stand-in could abort).
    k = subprocess.run([sys.executable, "-c", KERNEL, args.driver], capture_output=True, text=True, timeout=300)
    err = (k.stderr.strip().splitlines() or [f"exit {k.returncode}"])[-1]
    result["kernel_handle"] = k.stdout.strip() if k.returncode == 0 else err
    if (k.returncode == 0) != (result["features"]["kernel"] is None):
        ok = False
    result["ok"] = ok
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
