"""Environments over a cuda-cccl < 1.1 stack (issue 44), for the slow wheel test (tests/test_cccl_legacy_wheel.py)
and .ci/gpu/cccl_legacy.sh with its prepare script (the same venv on the CPU host that builds the wheel and on
the GPU machine that serves it). Standard library only (the GPU machine runs it with its own python3).

* :func:`overlay_venv`: a fresh venv (no pip) whose site-packages links every top-level entry of a base
  Python's (the release's stack, shared read-only, never written to).
* :func:`link_dists`: named distributions of another Python linked file by file (their dist-info too), the way
  the answers' keys need them equal on both machines: the NVIDIA compiler and header wheels.
* :func:`add_aot`: this checkout's aot as ``cccl-aot-cu13`` (its hatch entry point), linked, not copied.

    python tests/legacy_envs.py overlay VENV BASE_PYTHON
    python tests/legacy_envs.py venv VENV --link-from PYTHON --dists nvidia-cuda-nvrtc,... [--no-aot]
        (prints the linked distributions' versions as JSON; a dist missing there is listed as null)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The NVIDIA wheels whose bytes the answers' keys hold: the compilers (NVRTC, nvJitLink, NVVM for the operators'
#: LTO-IR) and every wheel writing into ``nvidia/cu13/include`` (whose whole content is hashed).
NVIDIA_DISTS = ("nvidia-cuda-nvrtc", "nvidia-nvjitlink", "nvidia-nvvm", "nvidia-cuda-nvcc", "nvidia-cuda-runtime",
                "nvidia-cuda-crt", "nvidia-cuda-cccl")
_FILES = """
import importlib.metadata as md, json, sys
out = {}
for name in sys.argv[1].split(","):
    try:
        d = md.distribution(name)
    except md.PackageNotFoundError:
        out[name] = None
        continue
    out[name] = [d.version, [str(d.locate_file(f)) for f in d.files or []], [str(f) for f in d.files or []]]
print(json.dumps(out))
"""


def _run(python: str | Path, code: str, *args: str) -> str:
    return subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True, check=True).stdout


def site_of(python: str | Path) -> Path:
    return Path(_run(python, "import sysconfig; print(sysconfig.get_path('purelib'))").strip())


def _new(where: Path) -> tuple[Path, Path]:
    venv.EnvBuilder(with_pip=False).create(where)
    py = where / "bin" / "python"
    return py, site_of(py)


def link_dists(site: Path, from_python: str | Path, names: tuple[str, ...] | list[str]) -> dict[str, str | None]:
    """Link each file of ``names`` as ``from_python`` has them installed into ``site``; name -> version."""
    found = json.loads(_run(from_python, _FILES, ",".join(names)))
    versions: dict[str, str | None] = {}
    for name, info in found.items():
        versions[name] = info[0] if info else None
        for src, rel in zip(*(info[1:] if info else ([], []))):
            parts = Path(rel).parts
            if ".." in parts or parts[0] == "bin" or "__pycache__" in parts or not os.path.isfile(src):
                continue
            dst = site / rel
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(os.path.realpath(src), dst)
    return versions


def add_aot(site: Path) -> None:
    from_here = {"__version__": None}
    exec((ROOT / "aot" / "core" / "version.py").read_text(), from_here)  # noqa: S102 - the checkout's own file
    version = from_here["__version__"]
    info = site / f"cccl_aot_cu13-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: cccl-aot-cu13\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("[hatch]\naot = aot.package.hatch\n")
    (info / "RECORD").write_text("")
    for pkg in ("aot", "cccl_patches"):
        (site / pkg).symlink_to(ROOT / pkg, target_is_directory=True)


def overlay_venv(where: Path, base_python: str | Path, *, with_aot: bool = True) -> Path:
    """A venv at ``where`` over ``base_python``'s site-packages; returns its python."""
    py, site = _new(where)
    base = _run(base_python, "import sys; print('\\n'.join(p for p in sys.path if p.endswith('-packages')))")
    # every top-level entry of the base's site-packages linked into this one (never copied, never written to):
    # cuda-pathfinder looks for the NVIDIA wheels' headers in this venv's own site-packages, and the base's .pth
    # files (numba-cuda's ``numba.cuda`` redirector) run here too
    for b in filter(None, base.splitlines()):
        for entry in sorted(Path(b).iterdir()):
            dst = site / entry.name
            ours = entry.name in ("aot", "cccl_patches", "__pycache__") or entry.name.startswith("cccl_aot_cu13-")
            if not ours and not (dst.exists() or dst.is_symlink()):
                dst.symlink_to(entry, target_is_directory=entry.is_dir())
    if with_aot:
        add_aot(site)
    return py


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tests/legacy_envs.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("overlay")
    o.add_argument("venv", type=Path)
    o.add_argument("base")
    v = sub.add_parser("venv")
    v.add_argument("venv", type=Path)
    v.add_argument("--link-from", required=True)
    v.add_argument("--dists", default=",".join(NVIDIA_DISTS))
    v.add_argument("--no-aot", action="store_true")
    args = ap.parse_args(argv)
    if args.cmd == "overlay":
        print(overlay_venv(args.venv, args.base))
        return 0
    py, site = _new(args.venv)
    versions = link_dists(site, args.link_from, [d for d in args.dists.split(",") if d])
    if not args.no_aot:
        add_aot(site)
    print(json.dumps(versions, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
