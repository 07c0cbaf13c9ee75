"""Two wrong numba-cuda kernels aot served, and the nvJitLink stack, on a GPU (and, without launching, on the CPU:
tests/test_numba_digest2.py runs the same cases from this file, the one definition of them).

* ``@overload`` implementations edited after the build (``bump``, ``.aot_bump()``, ``.aot_six``): the stale cubin
  wrote 6 where numba-cuda's compile of the current code writes 10. Now the digest keys them: refused, JIT, 10.
* A kernel whose compile reads the launch configuration (an ``@overload`` reading ``numba.cuda.launchconfig``, as
  cuda.coop does): aot's cubin wrote 0, numba-cuda's compile at ``[1, 64]`` writes 64. Now the build refuses it
  (``aot build`` fails naming it) and numba-cuda compiles it at its launch: 64.
* A kernel calling a device function, attached where numba-cuda sees no nvJitLink (its ``lto`` default is then
  False): before, refused at every import (the digest held the device function's ``lto``); now attached, no
  warning, no compile. A fastmath kernel is built twice (with and without LTO, whose cubins differ in
  flush-to-zero): the build numba-cuda would compile is the one attached (``by_fastmath`` / ``by_fastmath.nolto``).

    python .ci/gpu/numba_wrong_kernels.py prepare DIR [SM]  # build host (aot + numba-cuda): DIR/site/<pkg>
    python3 .ci/gpu/numba_wrong_kernels.py check DIR        # GPU host: launches; prints a table, exits 1 on FAILED
    python .ci/gpu/numba_wrong_kernels.py check DIR --cpu   # no GPU: attach and the packaged-overload cache only

``check`` runs a fresh process per variant on its own copy of DIR/site: ``A`` as built, ``B`` the three overloads
edited (6 -> 10), ``nolto`` as built with numba-cuda's nvJitLink probe answering False.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PKG = "numba_wrong_pkg"
#: The checkout this script belongs to: its ``aot`` builds and checks (a venv's installed copy of aot may be another
#: release: the first v3 check built with the installed v2, whose digests and options no v3 attach accepts).
ROOT = Path(__file__).resolve().parents[2]


def tree_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with this checkout first on ``PYTHONPATH``, for every child process."""
    env = dict(env if env is not None else os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def same_tree() -> None:
    """Exit unless the ``aot`` imported is this checkout's."""
    import aot
    if not Path(aot.__file__).resolve().is_relative_to(ROOT):
        raise SystemExit(f"aot imported from {aot.__file__}, not from this checkout {ROOT}")
EXT = '''\
from numba.cuda import launchconfig, types
from numba.cuda.extending import overload, overload_attribute, overload_method


def bump(v):
    raise NotImplementedError("device only")


@overload(bump, target="cuda")
def _bump(v):
    def impl(v):
        return v + 6  # bump
    return impl


@overload_method(types.Array, "aot_bump", target="cuda")
def _aot_bump(arr, v):
    def impl(arr, v):
        return v + 6  # method
    return impl


@overload_attribute(types.Array, "aot_six", target="cuda")
def _aot_six(arr):
    def get(arr):
        return 6  # attribute
    return get


def block_threads():
    raise NotImplementedError("device only")


@overload(block_threads, target="cuda")
def _block_threads():
    """cuda.coop's pattern: the launch configuration, read while numba-cuda compiles at a launch."""
    cfg = launchconfig.current_launch_config()
    n = cfg.blockdim[0] if cfg is not None else 0
    if cfg is not None:
        cfg.dispatcher.mark_launch_config_sensitive()

    def impl():
        return n
    return impl
'''
KERNELS = '''\
from numba import cuda

from . import helpers
from .ext import block_threads, bump


@cuda.jit
def by_overload(out):
    out[0] = bump(out[1])


@cuda.jit
def by_overload_method(out):
    out[0] = out.aot_bump(out[1])


@cuda.jit
def by_overload_attribute(out):
    out[0] = out.aot_six


@cuda.jit
def by_device_function(out):
    out[0] = helpers.dev(out[1])


@cuda.jit(fastmath=True)
def by_fastmath(out):
    out[0] = helpers.dev(out[1])


@cuda.jit
def by_launch_config(out):
    out[0] = block_threads()
'''
HELPERS = "from numba import cuda\n\n\n@cuda.jit(device=True)\ndef dev(v):\n    return v + 1\n"
FILES = {"__init__.py": "", "ext.py": EXT, "kernels.py": KERNELS, "helpers.py": HELPERS}
SIGNATURE = "void(float32[::1])"
#: The overloads edited after the build (variant B): kernel -> (file, text A, text B, value A, value B).
EDITED = {
    "by_overload": ("ext.py", "v + 6  # bump", "v + 10  # bump", 6.0, 10.0),
    "by_overload_method": ("ext.py", "v + 6  # method", "v + 10  # method", 6.0, 10.0),
    "by_overload_attribute": ("ext.py", "return 6  # attribute", "return 10  # attribute", 6.0, 10.0),
}
#: Packaged and untouched in every variant: attached, the packaged cubin's value, no compile.
UNTOUCHED = {"by_device_function": 1.0, "by_fastmath": 1.0}
#: fastmath kernels: two builds (with and without LTO); the one attached must be the one numba-cuda would compile.
TWINS = {"by_fastmath": {"A": "by_fastmath", "B": "by_fastmath", "nolto": "by_fastmath.nolto"}}
#: Refused by the build: numba-cuda compiles it at its launch, with the launch's block size.
LAUNCH = {"by_launch_config": ((1, 64), 64.0)}
PACKAGED = (*EDITED, *UNTOUCHED)
REFUSED_AT_BUILD = "reads the launch configuration"


def matrix(kernels: tuple[str, ...] | list[str]) -> str:
    return "version: 1\nnumba:\n" + "".join(
        f'  - {{name: {k}, kernel: "{PKG}.kernels:{k}", signatures: ["{SIGNATURE}"]}}\n' for k in kernels)


def write_package(site: Path) -> None:
    (site / PKG).mkdir(parents=True)
    for name, text in FILES.items():
        (site / PKG / name).write_text(text)


def build(site: Path, kernels: tuple[str, ...] | list[str], out: Path, sm: str,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    (site.parent / "build_matrix.yaml").write_text(matrix(kernels))
    return subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(site.parent / "build_matrix.yaml"),
                           "--sm", sm, "--jobs", "1", "--out", str(out), "-q"], cwd=site, capture_output=True,
                          text=True, timeout=600, env=tree_env(env))


def prepare(folder: Path, sm: str, env: dict[str, str] | None = None) -> str:
    """DIR/site/<pkg> with artifacts for the packaged kernels; returns the build's refusal of the launch-config
    kernel (the build must fail naming it)."""
    site = folder / "site"
    shutil.rmtree(folder, ignore_errors=True)
    write_package(site)
    r = build(site, PACKAGED, site / PKG / "artifacts", sm, env)
    if r.returncode != 0:
        raise SystemExit(f"building the packaged kernels failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    r = build(site, tuple(LAUNCH), folder / "refused", sm, env)
    said = (r.stdout + r.stderr).strip()
    shutil.rmtree(folder / "refused", ignore_errors=True)
    if r.returncode == 0 or REFUSED_AT_BUILD not in said:
        raise SystemExit(f"aot build shipped by_launch_config (rc={r.returncode}):\n{said[-3000:]}")
    (folder / "build_matrix.yaml").unlink()
    (folder / "launch_refusal.txt").write_text(said)
    return said


def run(site: Path, variant: str, cpu: bool) -> None:
    """One fresh process: (nolto: numba-cuda sees no nvJitLink), attach, launch each kernel once (``cpu``: ask the
    packaged-overload cache instead), print JSON rows."""
    import warnings
    import numpy as np
    if not hasattr(np, "row_stack"):  # numba-cuda 0.30.4's JIT overloads it; numpy >= 2.5 dropped it
        np.row_stack = np.vstack
    if variant == "nolto":  # what numba-cuda's decorator asks for lto's default (cudadrv.driver._have_nvjitlink)
        import numba.cuda.decorators as decorators
        decorators._have_nvjitlink = lambda: False
    import numba.cuda.dispatcher as d
    compiles: list[str] = []
    real = d.compile_cuda

    def counted(*a, **kw):
        compiles.append(getattr(a[0], "__name__", "?"))
        return real(*a, **kw)
    d.compile_cuda = counted
    import aot
    same_tree()
    sys.path.insert(0, str(site))
    import importlib
    k = importlib.import_module(f"{PKG}.kernels")
    reg = aot.Registry(site / PKG / "artifacts", owner=PKG)
    rows = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        attached = aot.attach_numba(reg)
        for name in (*PACKAGED, *LAUNCH):
            before, seen = len(compiles), len(caught)
            kernel = getattr(k, name)
            value = None
            if cpu:  # what the dispatcher's cache answers when numba-cuda would compile: a packaged kernel or None
                from cccl_patches.numba_cuda import argtypes_of
                served = kernel._cache.load_overload(argtypes_of(SIGNATURE), None) is not None
            else:
                from numba import cuda
                grid, block = LAUNCH.get(name, ((1, 1), 0))[0]
                out = cuda.to_device(np.zeros(2, np.float32))
                kernel[grid, block](out)
                cuda.synchronize()
                value = float(out.copy_to_host()[0])
                served = None
            spec = name if attached.get(name) == "attached" or f"{name}.nolto" not in attached else f"{name}.nolto"
            rows[name] = {"attach": attached.get(spec, "not packaged")[:400], "spec": spec, "value": value,
                          "served": served, "lto": kernel.targetoptions.get("lto"),
                          "compiles": len(compiles) - before,
                          "warnings": [str(w.message)[:300] for w in caught[seen:]  # numba's occupancy hints apart
                                       if issubclass(w.category, aot.AotWarning)]}
    print(json.dumps({"rows": rows, "warnings": [str(w.message)[:300] for w in caught
                                                 if issubclass(w.category, aot.AotWarning)]}))


def judge(variant: str, name: str, row: dict, cpu: bool) -> tuple[object, bool]:
    """What the row must show: (the value wanted, whether it does)."""
    attached = row["attach"] == "attached"
    if name in LAUNCH:  # never packaged: numba-cuda compiles it at the launch
        want = LAUNCH[name][1]
        return want, row["attach"] == "not packaged" and (cpu or (row["value"] == want and row["compiles"] >= 1))
    if name in EDITED and variant == "B":
        want = EDITED[name][4]
        refused = not attached and "changed since the build" in row["attach"]
        return want, refused and (row["served"] is False if cpu else row["value"] == want and row["compiles"] >= 1)
    want = EDITED[name][3] if name in EDITED else UNTOUCHED[name]
    clean = attached and row["compiles"] == 0 and not row["warnings"]
    if name in TWINS:  # the build for the lto numba-cuda compiles it with here: with nvJitLink, or without it
        clean = clean and row["spec"] == TWINS[name][variant]
    return want, clean and (row["served"] is True if cpu else row["value"] == want)


def check(folder: Path, cpu: bool = False, env: dict[str, str] | None = None,
          python: str = sys.executable) -> tuple[int, list[str]]:
    """Every variant in a fresh process of ``python`` (another interpreter than the build's: the digest must not
    depend on it); the table's lines and 0 (every row ok) or 1."""
    ok, lines = True, []
    lines.append(f"{'variant':8} {'kernel':22} {'attach':13} {'value':>6} {'want':>6} {'compiles':>8}  verdict")
    for variant in ("A", "B", "nolto"):
        with tempfile.TemporaryDirectory() as tmp:
            site = Path(tmp) / "site"
            shutil.copytree(folder / "site", site, ignore=shutil.ignore_patterns("__pycache__"))
            if variant == "B":
                for file, a, b, _, _ in EDITED.values():
                    path = site / PKG / file
                    text = path.read_text()
                    assert a in text, (file, a)
                    path.write_text(text.replace(a, b))
            r = subprocess.run([python, "-W", "ignore::Warning", __file__, "run", str(site), variant,
                                "--cpu" if cpu else "--gpu"], capture_output=True, text=True, timeout=600,
                               env=dict(tree_env(env), PYTHONDONTWRITEBYTECODE="1"), cwd=tmp)
        if r.returncode != 0:
            lines.append(f"{variant}: the run failed (rc={r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
            ok = False
            continue
        got = json.loads(r.stdout.strip().splitlines()[-1])
        for name, row in got["rows"].items():
            want, good = judge(variant, name, row, cpu)
            ok &= good
            attach = "yes" if row["attach"] == "attached" else ("no: build" if name in LAUNCH else "no: digest")
            value = "-" if row["value"] is None else f"{row['value']:g}"
            lines.append(f"{variant:8} {row['spec']:22} {attach:13} {value:>6} {want:>6} {row['compiles']:8d}  "
                         f"{'ok' if good else 'FAILED'}" + ("" if good else f"  ({row['attach']}; {row['warnings']})"))
        first = f": {got['warnings'][0]}" if got["warnings"] else ""
        lines.append(f"{variant}: {len(got['warnings'])} AotWarning(s){first}")
    lines.append(f"numba-wrong-kernels: {'ok' if ok else 'FAILED'}")
    return (0 if ok else 1), lines


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else ""
    if cmd == "prepare":
        said = prepare(Path(argv[1]).resolve(), argv[2] if len(argv) > 2 else "90")
        print(f"prepared {Path(argv[1]).resolve() / 'site' / PKG}; the build refused by_launch_config: "
              f"{said.splitlines()[-1][:300]}")
        return 0
    if cmd == "check":
        rc, lines = check(Path(argv[1]).resolve(), cpu="--cpu" in argv)
        text = "\n".join(lines)
        print(text)
        if os.environ.get("OUT"):
            Path(os.environ["OUT"], "numba_wrong_kernels.txt").write_text(text + "\n")
        return rc
    if cmd == "run":
        run(Path(argv[1]), argv[2], cpu="--cpu" in argv)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
