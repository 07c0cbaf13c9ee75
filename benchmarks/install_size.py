"""Install-size benchmark: what an end user's environment weighs, runtime-only vs with JIT vs everything.

For each CUDA major asked for, the source tree is turned into that major's distribution
(``.ci/variant.py cuXX`` on a copy), built into a wheel (``pip wheel --no-deps``; a tool-only wheel
unless ``--artifacts DIR`` names a complete artifact set to bundle), and installed into fresh virtual
environments under a temp dir:

* ``runtime`` -- the wheel alone with its dependencies: cuda-core, cuda-bindings of the major, numpy,
  platformdirs, no cuda-cccl (what ``pip install cccl-aot-cu13`` gives: enough for NVRTC artifacts);
* ``cccl``    -- ``wheel[cccl]``: plus the exact cuda-cccl, what loading cuda.compute artifacts needs;
* ``nvrtc-pkg`` / ``cccl-pkg`` -- a downstream package's lean install, what its end users get: its wheel
  (``examples/pystr-mypkg``, NVRTC units only; ``examples/hatch-mypkg``, CCCL and NVRTC), built here by
  aot's hatch hook for one SM (the build environment's CUDA major only), installed with the dependencies
  its metadata names (aot's wheel from the first step through ``--find-links``);
* ``jit``     -- ``wheel[jit]``: plus the major's toolkit (NVRTC, nvJitLink, nvvm, nvcc, numba-cuda-mlir);
* ``full``    -- ``wheel[cuXX]``: the toolkit, cuda-core's toolkit extra and the build tools, i.e. what
  every user installed before the split (today's ``pip install ".[cu13]"``).

The size is ``du`` of site-packages (pip and, on Python < 3.12, setuptools included), with the largest
top-level entries. The runtime environment is also checked: ``import cuda.compute`` must work through
aot's stand-ins (the driver stand-in is preloaded when this host has no driver). Downloads come from the
package index (a few GB for the ``jit``/``full`` rows); nothing is cached between runs.

    python benchmarks/install_size.py [--majors cu13,cu12] [--kinds runtime,cccl,jit,full,nvrtc-pkg,cccl-pkg]
                                      [--artifacts DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "install_size.json"
TARGET_MB = 200
KIND_EXTRA = {"runtime": "", "cccl": "[cccl]", "jit": "[jit]", "full": "[{major}]"}
#: Downstream packages measured as their users install them (``*-pkg`` kinds).
PACKAGES = {"nvrtc-pkg": "pystr-mypkg", "cccl-pkg": "hatch-mypkg"}

CHECK = """
import ctypes, importlib.metadata as md, json, sys
import aot
try:
    cccl = md.version("cuda-cccl")
except md.PackageNotFoundError:
    cccl = None
row = {"cuda_cccl": cccl}
if cccl is not None:  # cuda.compute must import through aot's stand-ins (no toolkit here)
    from aot.build.toolchain import real_driver_present, stub_library
    if not real_driver_present():
        ctypes.CDLL(str(stub_library()), mode=ctypes.RTLD_GLOBAL)
    from aot.runtime.loader import lean as _lean
    cc = _lean.import_cuda_compute()
    row.update(cuda_compute=bool(cc._BINDINGS_AVAILABLE), stand_ins=sorted(_lean.state().stand_ins))
row["heavy"] = sorted({m.split('.')[0] for m in sys.modules} & {"yaml", "rich", "numba_cuda_mlir"})
print(json.dumps(row))
"""


def du_bytes(path: Path) -> int:
    """Apparent-size-independent disk usage, as ``du -s`` reports it (blocks actually used)."""
    out = subprocess.run(["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def build_wheel(major: str, work: Path, artifacts: Path | None) -> Path:
    src = work / f"src-{major}"
    anywhere = shutil.ignore_patterns(".git", ".venv*", "__pycache__", "*.whl", "_skbuild")

    def ignore(folder: str, names: list[str]) -> set[str]:  # "build" only at the top: aot/build is code
        top = {"aot-out", ".gpu", "build"} if Path(folder) == ROOT else set()
        return set(anywhere(folder, names)) | (top & set(names))
    shutil.copytree(ROOT, src, ignore=ignore)
    subprocess.run([sys.executable, str(src / ".ci" / "variant.py"), major, str(src / "pyproject.toml")],
                   check=True, capture_output=True, text=True)
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
    env.pop("AOT_WHEEL_SM", None)
    if artifacts is not None:
        env["AOT_WHEEL_ARTIFACTS"] = str(artifacts)
    out = work / f"wheel-{major}"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w",
                        str(out), str(src)], env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"wheel build for {major} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    (whl,) = out.glob("*.whl")
    return whl


def build_package(example: str, work: Path) -> Path:
    """A downstream example's wheel, built by aot's hatch hook from this checkout (no isolation: this
    environment is the build environment) for one SM; aot's entry points come from a metadata-only shim."""
    src = work / example
    shutil.copytree(ROOT / "examples" / example, src, ignore=shutil.ignore_patterns("build", "artifacts"))
    shim = work / "shim" / "cccl_aot-0.0.dev0.dist-info"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "METADATA").write_text("Metadata-Version: 2.1\nName: cccl-aot\nVersion: 0.0.dev0\n")
    (shim / "entry_points.txt").write_text("[cmake.module]\naot = aot.cmake\n\n[hatch]\naot = aot.package.hatch\n")
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000", AOT_WHEEL_SM="90",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(shim.parent)]))
    out = work / f"wheel-{example}"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w",
                        str(out), str(src)], env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"wheel build for {example} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    (whl,) = out.glob("*.whl")
    return whl


def measure(major: str, kind: str, wheel: Path, work: Path) -> dict:
    env_dir = work / f"venv-{major}-{kind}"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    links: list[str] = []
    if kind in PACKAGES:  # the package's wheel; aot's (``wheel``) only as what its requirement resolves to
        links, wheel = ["--find-links", str(wheel.parent)], build_package(PACKAGES[kind], work)
        spec = str(wheel)
    else:
        spec = f"{wheel}{KIND_EXTRA[kind].format(major=major)}"
    t0 = time.perf_counter()
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", *links, spec], capture_output=True, text=True,
                       check=False)
    seconds = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"pip install {spec} failed:\n{r.stderr[-3000:]}")
    (site,) = (env_dir / "lib").glob("python3*/site-packages")
    total = du_bytes(site)
    parts = sorted(((p.name, du_bytes(p)) for p in site.iterdir()), key=lambda x: -x[1])
    frozen = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True, check=True).stdout
    packages = sorted(line.split(" @ ")[0] for line in frozen.splitlines() if line.strip())
    row = {"major": major, "kind": kind, "install": spec.replace(str(wheel), wheel.name), "mb": round(total / 1e6, 1),
           "mib": round(total / 2**20, 1),
           "install_seconds": round(seconds, 1), "largest": [[n, round(b / 1e6, 1)] for n, b in parts[:6]],
           "packages": packages}
    if kind not in ("jit", "full"):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        c = subprocess.run([str(py), "-c", CHECK], capture_output=True, text=True, cwd=work, env=env, check=False)
        row["check"] = json.loads(c.stdout.strip().splitlines()[-1]) if c.returncode == 0 else c.stderr[-1500:]
    shutil.rmtree(env_dir, ignore_errors=True)
    return row


def print_table(rows: list[dict], notes: list[str]) -> None:
    print(f"{'major':6} {'kind':10} {'site-packages':>14} {'(MiB)':>8}  largest entries (MB)")
    for r in rows:
        big = ", ".join(f"{n} {mb:.0f}" for n, mb in r["largest"][:4])
        print(f"{r['major']:6} {r['kind']:10} {r['mb']:>11.1f} MB {r['mib']:>8.1f}  {big}")
    for n in notes:
        print(n)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--majors", default="cu13", help="comma-separated: cu13,cu12 (default: cu13)")
    p.add_argument("--kinds", default="runtime,cccl,jit,full",
                   help="comma-separated: runtime,cccl,jit,full,nvrtc-pkg,cccl-pkg")
    p.add_argument("--artifacts", type=Path, help="bundle this complete artifact set into the wheel")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"results file (default: {DEFAULT_JSON})")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="aot-install-size-") as tmp:
        work = Path(tmp)
        for major in args.majors.split(","):
            wheel = build_wheel(major, work, args.artifacts)
            wheel_mb = round(wheel.stat().st_size / 1e6, 2)
            for kind in args.kinds.split(","):
                row = measure(major, kind, wheel, work)
                row["wheel"], row["wheel_mb"] = wheel.name, wheel_mb
                rows.append(row)
                print(f"  {major} {kind}: {row['mb']} MB", file=sys.stderr)
    notes = [f"target: runtime <= {TARGET_MB} MB; wheel {'with' if args.artifacts else 'without'} artifacts",
             f"python {platform.python_version()} ({'pip + setuptools' if sys.version_info < (3, 12) else 'pip'} "
             f"included)"]
    result = {"date": time.strftime("%Y-%m-%d"), "host": platform.node(), "python": platform.python_version(),
              "artifacts": str(args.artifacts) if args.artifacts else None, "target_mb": TARGET_MB,
              "rows": rows}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print_table(rows, notes + [f"results: {args.json}"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
