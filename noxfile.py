"""The environment matrix (issue 34): do aot's wheels install and load beside a library's own stack?

For each named environment (:data:`ENVS`), a fresh virtual environment (uv) where pip's own resolver installs,
from the package index and the local wheelhouse, the checkout's own cccl-aot-cu13 wheel (by path, so that no
release of that name on the index can stand in for it; checked after the installs), an example NVRTC-only wheel
(examples/pystr-mypkg), the example CCCL wheel where its cuda-cccl fits the stack (examples/hatch-mypkg: the exact
cuda-cccl that built it) and the example numba wheel (examples/numba-mypkg) beside that environment's stack;
``pip check`` must be clean; then ``.ci/envs_check.py`` runs there, outside the source tree, with the stand-in
driver (tests/fake_libcuda.c): the NVRTC units load, the CCCL blobs load where installed, the numba kernels attach
or the one line says why they JIT, and each cuda-core feature (Kernel handle, JIT cache, program_cache) is there or
says in one line why not. One JSON file per environment lands in build/envs/results/; ``nox -s table`` prints the
table docs/dependencies.md carries. Minutes per environment (the stacks' wheels are large): CI runs it as its own
job (.ci/envs.sh).

    nox -s wheels                 # aot's cu13 wheel and the example wheels, built in a .[cu13] environment
    nox -s legacy_wheel           # examples/legacy-mypkg, built by the hook in its cuda-cccl 0.6 stack
    nox -s envs                   # every environment (needs the wheels)
    nox -s "envs(env='cccl-0.6')" # one
    nox -s table
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["wheels", "legacy_wheel", "envs", "table"]
nox.options.error_on_missing_interpreters = True

ROOT = Path(__file__).resolve().parent
WORK = ROOT / "build" / "envs"
WHEELHOUSE = WORK / "wheelhouse"
RESULTS = WORK / "results"
PYTHON = "3.11"
#: The example wheels, by role (NVRTC-only, CCCL, numba): (project folder, wheel name prefix, import package).
EXAMPLES = {"nvrtc": ("pystr-mypkg", "pystr_mypkg", "pystr_mypkg"),
            "cccl": ("hatch-mypkg", "mypkg_hatch", "mypkg_hatch"),
            "numba": ("numba-mypkg", "numba_mypkg", "numba_mypkg")}
#: The example library on a release without serialize, built by :func:`legacy_wheel` under :data:`LEGACY_STACK`.
LEGACY = ("legacy-mypkg", "legacy_mypkg", "legacy_mypkg")
LEGACY_STACK = ["cuda-cccl[cu13]>=0.6,<0.7", "numba-cuda[cu13]==0.26.*", "numba<0.66"]
#: The build environment's releases of what the answers' keys hold (compilers, headers, numba): the environment
#: that installs the wheel is resolved under them, as a user of that stack resolves it the same day.
LEGACY_CONSTRAINTS = WORK / "wheelhouse" / "legacy-constraints.txt"

#: name -> (what the library's stack asks for, constraints, whether the CCCL example's cuda-cccl fits it).
#: The CCCL example carries blobs of the one cuda-cccl that built them (pinned exactly), so it installs only where
#: the stack allows that release.
ENVS: dict[str, dict] = {
    "newest": {"stack": ["cuda-cccl[cu13]"], "constraints": [], "cccl": True,
               "what": "the newest releases of everything"},
    "oldest": {"stack": [], "cccl": False,
               "constraints": ["cuda-core==0.5.1", "cuda-bindings==13.0.0", "numpy==1.26.0", "platformdirs==4.2.0",
                               "numba-cuda==0.23.0", "numba==0.60.0"],
               "what": "every lower bound aot and the hook declare (numba-cuda: the hook's)"},
    # numba < 0.66 with the numba wheel: what such a library must add itself (cuda-cccl 1.1 added it): pip picks
    # numba 0.68 for cuda-cccl 0.6's numba>=0.60, under which numba-cuda 0.26 fails to import
    # (numba.cuda.types.NPDatetime), with or without aot.
    # legacy: the example library built under this stack by the hatch hook (nox -s legacy_wheel), its cuda.compute
    # specs answered without serialize (docs/build.md "CCCL releases without serialize"): every compile served.
    "cccl-0.6": {"stack": ["cuda-cccl[cu13]>=0.6,<0.7"], "constraints": [], "cccl": False, "numba_fix": ["numba<0.66"],
                 "legacy": True,
                 "what": "a library pinning cuda-cccl[cu13]>=0.6,<0.7 (numba-cuda < 0.27, cuda-core < 1)"},
    "cccl-1.1": {"stack": ["cuda-cccl[cu13]>=1.1,<1.2"], "constraints": [], "cccl": False,
                 "what": "a library pinning cuda-cccl[cu13]>=1.1,<1.2"},
}


def _pip_env() -> dict[str, str]:
    """pip's cache and temp files under build/envs (a run leaves nothing in the system temp dir); the cache is
    the one .ci/envs.sh made for the run (PIP_CACHE_DIR, removed after it) where it set one."""
    (WORK / "tmp").mkdir(parents=True, exist_ok=True)
    return {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or
            str(WORK / "pip-cache"), "TMPDIR": str(WORK / "tmp")}


@nox.session(python=PYTHON)
def wheels(session: nox.Session) -> None:
    """aot's cccl-aot-cu13 wheel (.ci/variant.py on a copy of the tree) and the three example wheels, built by
    the hatch hook in an environment with the build toolchain (.[cu13]), as CI's examples job builds them."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    session.install(*extras["cu13"], "hatchling==1.33.0", "scikit-build-core==1.1.2", "pip")
    shutil.rmtree(WHEELHOUSE, ignore_errors=True)
    WHEELHOUSE.mkdir(parents=True)
    src = WORK / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    for name in ("aot", "cccl_patches", ".ci"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "artifacts"))
    for name in ("pyproject.toml", "CMakeLists.txt", "README.md", "build_matrix.yaml"):
        shutil.copy(ROOT / name, src / name)
    session.run("python", str(src / ".ci" / "variant.py"), "cu13", str(src / "pyproject.toml"))
    session.run("python", "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", str(WHEELHOUSE),
                str(src), env=_pip_env())
    (runtime,) = WHEELHOUSE.glob("cccl_aot_cu13-*.whl")
    session.run("uv", "pip", "install", "--no-deps", "--reinstall", str(runtime), external=True,
                env={"VIRTUAL_ENV": session.virtualenv.location})
    env = {**_pip_env(), "AOT_WHEEL_SM": "80,90", "SOURCE_DATE_EPOCH": "1700000000",
           "AOT_CACHE_DIR": str(WORK / "aot-cache")}
    for example, _, _ in EXAMPLES.values():
        proj = WORK / "examples" / example
        shutil.rmtree(proj, ignore_errors=True)
        shutil.copytree(ROOT / "examples" / example, proj, ignore=shutil.ignore_patterns("build", "artifacts"))
        session.run("python", "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", str(WHEELHOUSE),
                    str(proj), env=env)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        session.error("no C compiler for the stand-in driver (tests/fake_libcuda.c)")
    session.run(cc, "-O1", "-shared", "-fPIC", "-fvisibility=hidden", "-Wl,-soname,libcuda.so.1", "-o",
                str(WORK / "libcuda.so.1"), str(ROOT / "tests" / "fake_libcuda.c"), "-ldl", external=True)


@nox.session(python=PYTHON)
def legacy_wheel(session: nox.Session) -> None:
    """examples/legacy-mypkg built by the hatch hook in the stack it pins (cuda-cccl 0.6, numba-cuda 0.26,
    numba < 0.66): its ``[tool.aot] cccl-legacy`` specs recorded there (needs `nox -s wheels` first: the
    checkout's runtime wheel, which carries the hook)."""
    session.install("pip")
    session.run("python", "-m", "pip", "install", "-q", str(_wheel("runtime")), *LEGACY_STACK, "hatchling==1.33.0",
                "PyYAML>=6.0,<7", "rich>=13.7,<16", env=_pip_env())
    proj = WORK / "examples" / LEGACY[0]
    shutil.rmtree(proj, ignore_errors=True)
    shutil.copytree(ROOT / "examples" / LEGACY[0], proj, ignore=shutil.ignore_patterns("build", "artifacts"))
    for old in WHEELHOUSE.glob(f"{LEGACY[1]}-*.whl"):
        old.unlink()
    session.run("python", "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", str(WHEELHOUSE),
                str(proj), env={**_pip_env(), "SOURCE_DATE_EPOCH": "1700000000",
                                "AOT_CACHE_DIR": str(WORK / "aot-cache")})
    freeze = session.run("python", "-m", "pip", "freeze", silent=True, env=_pip_env()) or ""
    keep = ("nvidia-", "cuda-", "numba", "llvmlite")
    LEGACY_CONSTRAINTS.write_text("".join(line + "\n" for line in str(freeze).splitlines()
                                          if line.lower().startswith(keep) and "==" in line))


def _wheel(role: str) -> Path:
    """The wheelhouse's one wheel of ``role`` (an example's, or ``"runtime"``: the checkout's cccl-aot-cu13)."""
    pattern = ("cccl_aot_cu13" if role == "runtime" else (LEGACY if role == "legacy" else EXAMPLES[role])[1]) + "-*.whl"
    found = sorted(WHEELHOUSE.glob(pattern))
    if len(found) != 1:
        raise SystemExit(f"{WHEELHOUSE}: expected one {pattern}, found {len(found)}: run `nox -s wheels` first")
    return found[0]


#: Run in an environment after its installs: cccl-aot-cu13 there is the wheel named (pip records a wheel
#: installed by path in ``direct_url.json``), not a release of the same name from the index.
_FROM_CHECKOUT = ("import importlib.metadata as m, json, sys, pathlib; "
                  "url = json.loads(m.distribution('cccl-aot-cu13').read_text('direct_url.json') or '{}').get('url'); "
                  "want = pathlib.Path(sys.argv[1]).resolve().as_uri(); "
                  "sys.exit(None if url == want else f'cccl-aot-cu13 installed from {url}, not {want}')")


@nox.session(python=PYTHON)
@nox.parametrize("env", list(ENVS))
def envs(session: nox.Session, env: str) -> None:
    """One environment: pip resolves the NVRTC-only wheel beside the stack (``pip install <wheel> <stack>``, the
    command a library's user runs), pip check; then the numba wheel (and the CCCL one where it fits) beside them,
    pip check again; then the load check."""
    spec = ENVS[env]
    session.install("pip")
    roles = ["nvrtc", "numba"] + (["cccl"] if spec["cccl"] else []) + (["legacy"] if spec.get("legacy") else [])
    constraints = WORK / f"constraints-{env}.txt"
    pinned = LEGACY_CONSTRAINTS.read_text().splitlines() if spec.get("legacy") else []
    constraints.write_text("".join(c + "\n" for c in [*spec["constraints"], *pinned]))
    pip = ["python", "-m", "pip"]
    # The checkout's own runtime by path in every install: with only --find-links, pip chose between the
    # wheelhouse and the index, and an index offering a newer cccl-aot-cu13 was installed and checked instead.
    runtime = str(_wheel("runtime"))
    install = [*pip, "install", "-q", "--find-links", str(WHEELHOUSE), "-c", str(constraints), runtime]
    session.run(*install, str(_wheel("nvrtc")), *spec["stack"], env=_pip_env())
    session.run(*pip, "check", env=_pip_env())
    session.run(*install, *map(str, (_wheel(r) for r in roles)), *spec["stack"], *spec.get("numba_fix", []),
                env=_pip_env())
    session.run(*pip, "check", env=_pip_env())
    session.run("python", "-c", _FROM_CHECKOUT, runtime)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{env}.json"
    run_dir = WORK / "run" / env  # outside the source tree: the installed packages, not the checkout
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    session.chdir(run_dir)
    session.run("python", str(ROOT / ".ci" / "envs_check.py"), "--driver", str(WORK / "libcuda.so.1"),
                "--roles", ",".join(roles), "--name", env, "--out", str(out),
                env={"AOT_CACHE_DIR": str(run_dir / "cache"), "PYTHONPATH": ""})
    session.log(out.read_text())


@nox.session(python=False)
def table(session: nox.Session) -> None:
    """The results of the last `envs` run as the Markdown table docs/dependencies.md carries."""
    rows = [json.loads((RESULTS / f"{e}.json").read_text()) for e in ENVS if (RESULTS / f"{e}.json").is_file()]
    if not rows:
        session.error(f"no results in {RESULTS}: run `nox -s envs` first")
    print(render_table(rows))


def _short(text: str) -> str:
    """A result cell: the JSON's line without what the features column already says."""
    if text.startswith("JIT: "):
        return "JIT: " + text.split(": ", 2)[-1].split(":")[0]
    if "Failed to dlopen libcuda" in text:
        return "not run: this cuda-core compiles only with a driver"
    return text.split(" (aot: ")[0]


def render_table(rows: list[dict]) -> str:
    """One row per environment: what the stack asked for, the releases pip resolved, then what each example did."""
    head = ("| environment | stack asked | cuda-cccl | numba-cuda | cuda-core | cuda-bindings | numpy | pip check "
            "| NVRTC wheel | CCCL wheel | numba wheel | CCCL without serialize | NVRTC JIT "
            "| cuda-core features missing |")
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for r in rows:
        v, spec = r["versions"], ENVS.get(r["name"], {})
        asked = ", ".join(f"`{s}`" for s in spec.get("stack", []) + spec.get("constraints", [])
                          + spec.get("numba_fix", [])) or "-"
        missing = ", ".join(f"{k} (needs {m.split('needs ', 1)[1].split(' (')[0]})"
                            for k, m in r["features"].items() if m) or "none"
        lines.append(f"| {r['name']} | {asked} | {v.get('cuda-cccl', '-')} | {v.get('numba-cuda', '-')} "
                     f"| {v['cuda-core']} | {v['cuda-bindings']} | {v['numpy']} | clean | {r['nvrtc']} "
                     f"| {r.get('cccl', 'not installed (exact cuda-cccl 1.2.1)')} | {_short(r['numba'])} "
                     f"| {r.get('legacy', '-')} "
                     f"| {_short(r.get('nvrtc_jit', '-'))} | {missing} |")
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - `python noxfile.py table` without nox
    if sys.argv[1:] == ["table"]:
        print(render_table([json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))]))
    else:
        sys.exit(subprocess.call([sys.executable, "-m", "nox", *sys.argv[1:]], cwd=os.fspath(ROOT)))
