"""Environments over a cuda-cccl < 1.1 stack (issue 44) for the slow wheel test and .ci/gpu/cccl_legacy.sh's
CPU half: a fresh venv (no pip) that reads a base Python's site-packages (the release's stack, shared
read-only, never modified) and holds this checkout's aot as ``cccl-aot-cu13`` (its hatch entry point), so
``pip --python VENV wheel --no-build-isolation`` runs aot's hook there, and ``pip --python VENV install``
installs a wheel into it.

    python tests/legacy_envs.py VENV BASE_PYTHON     # make one (BASE_PYTHON: cuda-cccl 0.6.0, numba < 0.66)
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _paths(python: str | Path, code: str) -> list[str]:
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


def overlay_venv(where: Path, base_python: str | Path, *, with_aot: bool = True) -> Path:
    """A venv at ``where`` over ``base_python``'s site-packages; returns its python."""
    from aot.core.version import __version__
    venv.EnvBuilder(with_pip=False).create(where)
    py = where / "bin" / "python"
    (site,) = _paths(py, "import sysconfig; print(sysconfig.get_path('purelib'))")
    base = _paths(base_python, "import sys; print('\\n'.join(p for p in sys.path if p.endswith('-packages')))")
    # every top-level entry of the base's site-packages linked into this one (never copied, never written to):
    # cuda-pathfinder looks for the NVIDIA wheels' headers in this venv's own site-packages, and the base's .pth
    # files (numba-cuda's ``numba.cuda`` redirector) run here too
    for b in base:
        for entry in sorted(Path(b).iterdir()):
            dst = Path(site) / entry.name
            if entry.name not in ("aot", "cccl_patches", "__pycache__") and not (dst.exists() or dst.is_symlink()):
                dst.symlink_to(entry, target_is_directory=entry.is_dir())
    if with_aot:
        info = Path(site) / f"cccl_aot_cu13-{__version__}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: cccl-aot-cu13\nVersion: {__version__}\n")
        (info / "entry_points.txt").write_text("[hatch]\naot = aot.package.hatch\n")
        (info / "RECORD").write_text("")
        (Path(site) / "aot").symlink_to(ROOT / "aot", target_is_directory=True)
        (Path(site) / "cccl_patches").symlink_to(ROOT / "cccl_patches", target_is_directory=True)
    return py


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print(overlay_venv(Path(sys.argv[1]), sys.argv[2]))
