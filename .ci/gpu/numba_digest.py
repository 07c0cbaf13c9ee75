"""Issue 37 item 2 on a GPU: a value numba-cuda compiles into a kernel, edited after the build, must not run the
stale packaged cubin. Six kernels each write one compiled-in value to ``out[0]``: a plain int global, a module
attribute (``cfg.TPB``), a device function called through its module (``helpers.dev``), a numpy scalar, a numpy
array and a nested tuple. Built with value A; at run time the package's source says B.

    python .ci/gpu/numba_digest.py prepare DIR [SM]   # CPU host, dev venv: DIR/site/numba_digest_pkg + artifacts
    python3 .ci/gpu/numba_digest.py check DIR         # GPU host (aot + numba-cuda 0.30.4 importable)

``check`` runs a fresh process per variant, each on its own copy of DIR/site:
  A      the package as built: every kernel attached, writes A, 0 numba-cuda compiles
  B      the six values edited in the source: every kernel refused at attach (one warning each), JIT, writes B
  late   five values assigned after attach, before the first launch: each JIT-compiled (numba-cuda reads values
         when it compiles; the packaged cache checks them again then), writes B; helpers.dev (untouched) packaged
Prints one row per kernel and variant, then ``numba-digest: ok`` (exit 0) or ``numba-digest: FAILED`` (exit 1).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PKG = "numba_digest_pkg"
#: The checkout this script belongs to: its ``aot`` builds and checks (a venv's installed aot may be another
#: release, whose digests this checkout's attach refuses).
ROOT = Path(__file__).resolve().parents[2]


def tree_env() -> dict[str, str]:
    """This process's environment with this checkout first on ``PYTHONPATH``, for every child process."""
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), path) if p))
KERNELS = '''\
import numpy as np
from numba import cuda

from . import cfg, helpers

K = 5
NSCALE = np.float32(2.5)
COEF = np.array([1.0, 2.0, 3.0], dtype=np.float32)
NEST = ((1, 2), (3, 4))


@cuda.jit
def by_int(out):
    out[0] = K


@cuda.jit
def by_module_attr(out):
    out[0] = cfg.TPB


@cuda.jit
def by_module_func(out):
    out[0] = helpers.dev(out[1])


@cuda.jit
def by_np_scalar(out):
    out[0] = NSCALE


@cuda.jit
def by_np_array(out):
    out[0] = COEF[1]


@cuda.jit
def by_nested_tuple(out):
    out[0] = NEST[1][0]
'''
FILES = {"__init__.py": "", "kernels.py": KERNELS, "cfg.py": "TPB = 128\n",
         "helpers.py": "from numba import cuda\n\n\n@cuda.jit(device=True)\ndef dev(v):\n    return v + 1\n"}
#: kernel -> (file, text A, text B, value A, value B)
CASES = {
    "by_int": ("kernels.py", "K = 5", "K = 6", 5.0, 6.0),
    "by_module_attr": ("cfg.py", "TPB = 128", "TPB = 64", 128.0, 64.0),
    "by_module_func": ("helpers.py", "v + 1", "v + 2", 1.0, 2.0),
    "by_np_scalar": ("kernels.py", "np.float32(2.5)", "np.float32(3.5)", 2.5, 3.5),
    "by_np_array": ("kernels.py", "[1.0, 2.0, 3.0]", "[1.0, 7.0, 3.0]", 2.0, 7.0),
    "by_nested_tuple": ("kernels.py", "((1, 2), (3, 4))", "((1, 2), (9, 4))", 3.0, 9.0),
}
#: The same edits made after attach (variant "late"), as Python statements on the imported modules.
LATE = {"by_int": "k.K = 6", "by_module_attr": "cfg.TPB = 64", "by_np_scalar": "k.NSCALE = np.float32(3.5)",
        "by_np_array": "k.COEF[1] = 7.0", "by_nested_tuple": "k.NEST = ((1, 2), (9, 4))"}


def prepare(folder: Path, sm: str) -> None:
    site = folder / "site"
    shutil.rmtree(folder, ignore_errors=True)
    (site / PKG).mkdir(parents=True)
    for name, text in FILES.items():
        (site / PKG / name).write_text(text)
    matrix = folder / "build_matrix.yaml"
    matrix.write_text("version: 1\nnumba:\n" + "".join(
        f'  - {{name: {k}, kernel: "{PKG}.kernels:{k}", signatures: ["void(float32[::1])"]}}\n' for k in CASES))
    subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(matrix), "--sm", sm, "--jobs", "1",
                    "--out", str(site / PKG / "artifacts"), "-q"], check=True, cwd=site, env=tree_env())
    print(f"prepared {site / PKG} (artifacts for sm_{sm})")


def run(site: Path, variant: str) -> None:
    """One fresh process: attach, (late: edit), launch each kernel once, print JSON rows."""
    import warnings
    import numpy as np
    if not hasattr(np, "row_stack"):  # numba-cuda 0.30.4's JIT overloads it; numpy >= 2.5 dropped it
        np.row_stack = np.vstack
    import numba.cuda.dispatcher as d
    compiles: list[str] = []
    real = d.compile_cuda

    def counted(*a, **kw):
        compiles.append(getattr(a[0], "__name__", "?"))
        return real(*a, **kw)
    d.compile_cuda = counted
    import aot
    from numba import cuda
    sys.path.insert(0, str(site))
    import importlib
    k = importlib.import_module(f"{PKG}.kernels")
    cfg = importlib.import_module(f"{PKG}.cfg")
    reg = aot.Registry(site / PKG / "artifacts", owner=PKG)
    rows = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        attached = aot.attach_numba(reg)
        warned = len(caught)
        if variant == "late":
            for stmt in LATE.values():
                exec(stmt, {"k": k, "cfg": cfg, "np": np})
        for name in CASES:
            out = cuda.to_device(np.zeros(2, np.float32))
            before = len(compiles)
            getattr(k, name)[1, 1](out)
            cuda.synchronize()
            rows[name] = {"attach": attached.get(name, "?")[:400], "value": float(out.copy_to_host()[0]),
                          "compiles": len(compiles) - before}
    print(json.dumps({"rows": rows, "warnings": [str(w.message)[:200] for w in caught], "at_attach": warned}))


def check(folder: Path) -> int:
    ok = True
    print(f"{'variant':8} {'kernel':16} {'attach':9} {'value':>6} {'want':>6} {'compiles':>8}  verdict")
    for variant in ("A", "B", "late"):
        with tempfile.TemporaryDirectory() as tmp:
            site = Path(tmp) / "site"
            shutil.copytree(folder / "site", site, ignore=shutil.ignore_patterns("__pycache__"))
            if variant == "B":
                for file, a, b, _, _ in CASES.values():
                    path = site / PKG / file
                    text = path.read_text()
                    assert a in text, (file, a)
                    path.write_text(text.replace(a, b))
            env = dict(tree_env(), PYTHONDONTWRITEBYTECODE="1")
            r = subprocess.run([sys.executable, "-W", "ignore::Warning", __file__, "run", str(site), variant],
                               capture_output=True, text=True, timeout=300, env=env, cwd=tmp)
        if r.returncode != 0:
            print(f"{variant}: the run failed (rc={r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
            ok = False
            continue
        got = json.loads(r.stdout.strip().splitlines()[-1])
        for name, row in got["rows"].items():
            _, _, _, a, b = CASES[name]
            is_attached = row["attach"] == "attached"
            if variant == "A":
                want, good = a, is_attached and row["value"] == a and row["compiles"] == 0
            elif variant == "B":
                want, good = b, (not is_attached and "changed since the build" in row["attach"]
                                 and row["value"] == b and row["compiles"] >= 1)
            elif name in LATE:  # assigned after attach, before the first launch: numba-cuda would compile B
                want, good = b, is_attached and row["value"] == b and row["compiles"] >= 1
            else:  # helpers.dev is not reassigned: still the packaged cubin
                want, good = a, is_attached and row["value"] == a and row["compiles"] == 0
            ok &= good
            print(f"{variant:8} {name:16} {'yes' if is_attached else 'no':9} {row['value']:6g} {want:6g} "
                  f"{row['compiles']:8d}  {'ok' if good else 'FAILED'}" + ("" if good else f"  ({row['attach']})"))
        if variant != "A":
            print(f"{variant}: {len(got['warnings'])} warnings, e.g. {got['warnings'][:1]}")
    print(f"numba-digest: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "prepare":
        prepare(Path(sys.argv[2]).resolve(), sys.argv[3] if len(sys.argv) > 3 else "90")
    elif cmd == "check":
        sys.exit(check(Path(sys.argv[2]).resolve()))
    elif cmd == "run":
        run(Path(sys.argv[2]), sys.argv[3])
    else:
        sys.exit(__doc__)
