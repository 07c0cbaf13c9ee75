"""numba-cuda across releases, on the driverless CPU host: each release's internals against its row of
``cccl_patches.numba_cuda.RELEASES``, and the example's kernels built under some releases and attached under every
release, as far as no driver is needed (the rebuilt kernel's cubin, the PTX linked by nvJitLink).

    python .ci/numba_releases.py --out DIR --build PY [--build PY ...] --attach PY [--attach PY ...]

PY: the python of an environment with one numba-cuda release (and what it imports with: numba, numpy < 2.5 to
build, cuda-core, the cu13 toolkit wheels, PyYAML); this checkout's ``aot`` is put first on its path. Every
``--build`` environment builds ``examples/numba-mypkg`` for sm_90 into ``DIR/built-<release>``; every
``--attach`` environment then checks its internals and attaches every built set (``DIR/<release>.json``).
Prints one line per (built, attached) pair and ``RESULT PASS`` when every pair attached, served the packaged
cubin byte for byte, linked the PTX for a newer GPU, and compiled nothing; exits 1 otherwise.

In one environment (``--probe``): what that release looks like, as JSON on stdout; ``--attach-sets DIR...``: the
attach check of those sets (used by the driver above).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "numba-mypkg"
#: Signatures whose argument ABI fingerprints every release must agree on within an ``args`` class.
PROBE_SIGNATURES = ("void(float32[::1], float64[:, :], int64, float32)", "void(complex64[:], boolean, int8)",
                    "void(float64[:, :, ::1], uint32, float64[::1])", "void(int64[::1], int64[::1])")
#: _Kernel._rebuild's keyword arguments in every release checked (RELEASES.rebuild lists the ones beyond them).
BASE_REBUILD = ("cooperative", "name", "signature", "codelibrary", "debug", "lineinfo", "call_helper", "extensions")


def probe() -> dict:
    """This environment's numba-cuda: its row's claims checked against the installed code."""
    import importlib.metadata as md
    from cccl_patches import numba_cuda as nc
    version = nc.installed_version()
    row = nc.internals(version)
    from numba.cuda import codegen, compiler, dispatcher, typing  # noqa: F401 - each must import
    try:  # the build's (registers numba-cuda's numpy overloads: fails where numpy lacks one, e.g. 2.5's row_stack)
        from numba.cuda import cudaimpl
        builds = "yes"
    except Exception as e:  # noqa: BLE001 - recorded: this environment can attach, not build
        cudaimpl, builds = None, f"no ({type(e).__name__}: {e})"
    from numba.cuda.core import caching, sigutils  # noqa: F401
    from numba.cuda.core.bytecode import FunctionIdentity
    from numba.cuda.cudadrv import driver, nvrtc, nvvm
    from numba.cuda.descriptor import cuda_target  # noqa: F401
    from numba.cuda.memory_management.nrt import NRT_LIBRARY  # noqa: F401
    problems = []
    rebuild = [p for p in inspect.signature(dispatcher._Kernel._rebuild).parameters if p != "cls"]
    if tuple(rebuild) != BASE_REBUILD + row.rebuild:
        problems.append(f"_Kernel._rebuild takes {rebuild}, RELEASES says {list(BASE_REBUILD + row.rebuild)}")
    if hasattr(dispatcher._Kernel, "_parse_carveout") != ("shared_memory_carveout" in row.rebuild):
        problems.append("_Kernel._parse_carveout and RELEASES.rebuild disagree")
    arch_args = len(inspect.signature(nvrtc.get_arch_option).parameters)
    if (arch_args == 2) != (row.device_key == 2):
        problems.append(f"nvrtc.get_arch_option takes {arch_args} arguments, RELEASES.device_key is {row.device_key}")
    wanted = {"compile_cuda": (compiler.compile_cuda, ("pyfunc", "return_type", "args", "debug", "lineinfo",
                                                        "forceinline", "fastmath", "nvvm_options", "cc",
                                                        "max_registers", "lto")),
              "CUDACodeLibrary": (codegen.CUDACodeLibrary.__init__, ("codegen", "name", "entry_name", "max_registers",
                                                                     "nvvm_options")),
              "kernel_fixup": (compiler.kernel_fixup, ("kernel", "debug")),
              "set_launch_bounds": (nvvm.set_launch_bounds, ("kernel", "launch_bounds")),
              "CUDADispatcher": (dispatcher.CUDADispatcher.__init__, ("py_func", "targetoptions"))}
    for name, (fn, params) in wanted.items():
        have = inspect.signature(fn).parameters
        if not set(params) <= set(have):
            problems.append(f"{name} lacks {sorted(set(params) - set(have))}")
    for owner, attr in ((dispatcher, "get_current_device"), (dispatcher, "reshape_funcs"),
                        (dispatcher._Kernel, "NRT_functions"), (FunctionIdentity, "_unique_ids"),
                        (cudaimpl or FunctionIdentity, "_unique_smem_id" if cudaimpl else "_unique_ids"),
                        (driver, "ObjectCode"), (caching, "NullCache"),
                        (sigutils, "normalize_signature"), (codegen.CUDACodeLibrary, "_ensure_cc")):
        if not hasattr(owner, attr):
            problems.append(f"{getattr(owner, '__name__', owner)} has no {attr}")
    abi = {sig: nc.abi_fingerprint(nc.argtypes_of(sig)) for sig in PROBE_SIGNATURES}
    return {"release": version, "range": f"{row.first}-{row.last}", "args": row.args, "abi": abi,
            "problems": problems, "numba": md.version("numba"), "numpy": md.version("numpy"),
            "cuda_core": md.version("cuda-core"), "builds": builds}


def attach_sets(sets: list[str]) -> dict:
    """Attach each built set under this release; per spec: the packaged cubin served byte for byte as
    numba-cuda's own code library returns it, the PTX linked for a newer GPU, nothing compiled."""
    import warnings
    sys.path.insert(0, str(EXAMPLE))
    import numba.cuda.dispatcher as dispatcher_module
    import aot
    from aot.core import format as fmt
    from aot.core.manifest import load_manifest
    from cccl_patches import numba_cuda as nc
    compiles: list[str] = []
    real = dispatcher_module.compile_cuda

    def counted(*a, **k):
        compiles.append(getattr(a[0], "__name__", "?"))
        return real(*a, **k)
    dispatcher_module.compile_cuda = counted
    from numba_mypkg import kernels
    row = nc.internals(nc.installed_version())
    out: dict = {"release": nc.installed_version(), "sets": {}}
    for where in sets:
        res: dict = {"problems": []}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            reg = aot.Registry(where, owner="numba_mypkg")
            status = aot.attach_numba(reg)
            res["attached"] = sorted(n for n, s in status.items() if s == "attached")
            res["refused"] = {n: s for n, s in status.items() if s != "attached"}
            man = load_manifest(Path(where))
            for name in res["attached"]:
                spec = reg.spec(name)
                fn = getattr(kernels, spec.kernel.partition(":")[2])
                argtypes = nc.argtypes_of(spec.signature)
                kernel = fn._cache.load_overload(argtypes, None)
                if kernel is None or tuple(kernel.argument_types) != tuple(argtypes):
                    res["problems"].append(f"{name}: no packaged kernel for {spec.signature}")
                    continue
                lib = kernel._codelibrary
                key90 = (9, 0) if row.device_key == 2 else (9, 0, "a")  # what _ensure_cc says for an H100
                cubin = bytes(lib.get_cubin(key90).code)
                (entry,) = [e for e in man.entries_for(name) if e["payload_kind"] == "cubin" and e["sm"] == 90]
                if cubin != fmt.read(Path(where) / entry["path"]).payload:
                    res["problems"].append(f"{name}: sm_90 is not the packaged cubin")
                if lib._entry_name != fmt.read(Path(where) / entry["path"]).header["entry"]:
                    res["problems"].append(f"{name}: entry symbol differs from the header's")
                key100 = (10, 0) if row.device_key == 2 else (10, 0, "a")
                linked = bytes(lib.get_cubin(key100).code)  # compute_90 PTX, linked by nvJitLink
                if linked[:4] != b"\x7fELF":
                    res["problems"].append(f"{name}: the PTX for sm_100 did not link")
        res["warnings"] = [str(w.message) for w in caught if issubclass(w.category, aot.AotWarning)]
        out["sets"][where] = res
    out["compiles"] = compiles
    return out


def _release_of(python: str) -> str:
    r = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('numba-cuda'))"],
                       capture_output=True, text=True, check=True)
    return r.stdout.strip()


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("VIRTUAL_ENV", None)
    return env


def drive(out: Path, builders: list[str], attachers: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    sets = []
    ok = True
    for py in builders:
        release = _release_of(py)
        dest = out / f"built-{release}"
        r = subprocess.run([py, "-m", "aot", "build", "--matrix", str(EXAMPLE / "build_matrix.yaml"), "--sm", "90",
                            "--out", str(dest), "--jobs", "1", "-q"], cwd=EXAMPLE, env=_env(), capture_output=True,
                           text=True, timeout=900)
        print(f"build under numba-cuda {release}: {'ok' if r.returncode == 0 else 'FAILED'}", flush=True)
        if r.returncode:
            print((r.stdout + r.stderr)[-3000:])
            ok = False
            continue
        sets.append(str(dest))
    abi: dict[str, dict] = {}
    digest_refusals: list = []
    for py in attachers:
        release = _release_of(py)
        r = subprocess.run([py, __file__, "--probe"], env=_env(), capture_output=True, text=True, timeout=600)
        if r.returncode:
            print(f"probe of numba-cuda {release}: FAILED\n{(r.stdout + r.stderr)[-3000:]}")
            ok = False
            continue
        info = json.loads(r.stdout.strip().splitlines()[-1])
        abi.setdefault(info["args"], {})[release] = info["abi"]
        print(f"numba-cuda {release} ({info['range']}; numba {info['numba']}, numpy {info['numpy']}, cuda-core "
              f"{info['cuda_core']}): internals {'as RELEASES says' if not info['problems'] else info['problems']}; "
              f"can build: {info['builds']}")
        ok &= not info["problems"]
        if not sets:
            continue
        r = subprocess.run([py, __file__, "--attach-sets", *sets], env=_env(), capture_output=True, text=True,
                           timeout=600)
        if r.returncode:
            print(f"attach under numba-cuda {release}: FAILED\n{(r.stdout + r.stderr)[-3000:]}")
            ok = False
            continue
        got = json.loads(r.stdout.strip().splitlines()[-1])
        (out / f"{release}.json").write_text(json.dumps(got, indent=1) + "\n")
        for where, res in got["sets"].items():
            built = Path(where).name.removeprefix("built-")
            digest = sorted(n for n, why in res["refused"].items() if "changed since the build" in why)
            twins = [n for n, why in res["refused"].items() if why.startswith("not attached: built for lto=")]
            other = {n: why for n, why in res["refused"].items() if n not in digest and n not in twins}
            good = len(res["attached"]) + len(digest) == 5 and not other and not res["problems"]
            ok &= good
            print(f"  built {built:7} -> attached under {release:7}: {len(res['attached'])}/5 attached, "
                  f"{'cubin served, PTX linked' if good else 'PROBLEMS'} {res['problems'] or ''}{other or ''}"
                  + (f"; refused by the kernel digest: {', '.join(digest)}" if digest else ""))
            digest_refusals.append((built, release, digest))
        ok &= not got["compiles"]
        print(f"  numba-cuda compiles under {release}: {len(got['compiles'])}")
    for cls, by_release in abi.items():
        same = len({json.dumps(v, sort_keys=True) for v in by_release.values()}) == 1
        ok &= same
        print(f"argument ABI '{cls}': {'identical' if same else 'DIFFERS'} across {sorted(by_release)}")
    (out / "summary.json").write_text(json.dumps({"ok": ok, "digest_refusals": digest_refusals}) + "\n")
    print("RESULT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--build", action="append", default=[])
    ap.add_argument("--attach", action="append", default=[])
    ap.add_argument("--probe", action="store_true")
    ap.add_argument("--attach-sets", nargs="+")
    a = ap.parse_args(argv)
    if a.probe:
        print(json.dumps(probe()))
        return 0
    if a.attach_sets:
        print(json.dumps(attach_sets(a.attach_sets)))
        return 0
    if a.out is None:
        ap.error("--out is required")
    return drive(a.out, a.build, a.attach)


if __name__ == "__main__":
    sys.exit(main())
