"""Example wheels built once per test session (issue 40): the aot hatch hook run by ``pip wheel
--no-build-isolation`` in the test environment with this checkout's aot first, for one SM. A test file asks
:func:`example_wheel`; a second ask in the same session (another test, another file) gets the same wheel.

And a lean end user's environment made offline (:func:`lean_venv`): a venv without pip whose site-packages
holds the wheels given and exactly the distributions their requirements name (markers evaluated, extras
followed), linked from the test environment, plus this checkout's aot as ``cccl-aot-cu13`` with the
requirements ``.ci/variant.py`` gives it. No cuda-cccl unless something asks for it.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from conftest import ROOT, repo_env

EXAMPLES = ROOT / "examples"
_BUILT: dict[tuple[str, str], Path] = {}


def example_wheel(tmp_path_factory, name: str, sm: str = "90", **env: str) -> Path:
    """The wheel of ``examples/<name>`` for ``sm``, built from a copy (the hook stages under the project)."""
    key = (name, sm)
    if key not in _BUILT:
        tmp = tmp_path_factory.mktemp(f"wheel-{name}")
        project = tmp / name
        shutil.copytree(EXAMPLES / name, project, ignore=shutil.ignore_patterns("build", "artifacts", "__pycache__"))
        r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w",
                            str(tmp / "dist"), str(project)], capture_output=True, text=True, timeout=600, cwd=tmp,
                           env=repo_env(AOT_WHEEL_SM=sm, SOURCE_DATE_EPOCH="1700000000", **env))
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        (whl,) = (tmp / "dist").glob("*.whl")
        _BUILT[key] = whl
    return _BUILT[key]


def runtime_requires(major: str = "cu13") -> list[str]:
    """``cccl-aot-<major>``'s requirements, as ``.ci/variant.py`` writes them for the release."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_variant", ROOT / ".ci" / "variant.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    doc = tomllib.loads(mod.make_variant((ROOT / "pyproject.toml").read_text(), major))
    return list(doc["project"]["dependencies"])


def _closure(requirements: list[str]) -> dict[str, md.Distribution]:
    """The test environment's distributions that ``requirements`` pull in, recursively (each must be
    installed here in a version the requirement admits: the lean venv is then what pip would make)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    found: dict[str, md.Distribution] = {}
    todo = [(Requirement(r), "") for r in requirements]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        dist = md.distribution(name)
        assert req.specifier.contains(dist.version, prereleases=True), (str(req), dist.version)
        first = name not in found
        found[name] = dist
        for wanted in ([""] if first else []) + sorted(req.extras):
            todo += [(Requirement(r), wanted) for r in dist.requires or []]
    return found


def lean_venv(where: Path, wheels: list[Path], major: str = "cu13") -> Path:
    """A venv holding ``wheels``, aot (this checkout, as ``cccl-aot-<major>``) and what their requirements
    name; returns its python."""
    import venv
    from aot.core.version import __version__
    venv.EnvBuilder(with_pip=False).create(where)
    py = where / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
                        *map(str, wheels)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    info = site / f"cccl_aot_{major}-{__version__}.dist-info"
    info.mkdir()
    reqs = runtime_requires(major)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: cccl-aot-{major}\nVersion: {__version__}\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in reqs))
    (info / "RECORD").write_text("")
    (info / "INSTALLER").write_text("test\n")
    (site / "aot").symlink_to(ROOT / "aot", target_is_directory=True)
    for w in wheels:
        z = zipfile.ZipFile(w)
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        reqs += [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    own = {canonicalize_name(w.name.split("-")[0]) for w in wheels} | {f"cccl-aot-{major}"}
    reqs = [r for r in reqs if canonicalize_name(Requirement(r).name) not in own]
    for dist in _closure(reqs).values():
        for f in dist.files or []:
            if ".." in f.parts or f.parts[0] in ("bin", "__pycache__") or "__pycache__" in f.parts:
                continue
            src = Path(str(dist.locate_file(f)))
            dst = site / f
            if not src.is_file() or dst.exists():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(src, dst)
    return py
