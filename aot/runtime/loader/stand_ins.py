"""The toolchain stand-ins (``libnvrtc``, ``libnvJitLink``, ``libcudart``) of a runtime-only install.

cuda-cccl's C library links NVRTC and nvJitLink, and ``cuda.compute`` preloads them (and cudart) through
cuda-pathfinder, so it cannot even be imported without the CUDA toolkit, although deserializing and
running a packaged artifact compiles nothing. The sources in ``cccl_patches/`` export the entry points
``libcccl.c.parallel.so`` imports, under the symbol versions it imports them with (a linker version
script, ``stub.map.in``), and every one of them returns an error code and counts the call.

Where they come from: CMake builds them into the installed package (``cccl_patches/lib/``); in a
checkout they are compiled on demand with the system C compiler (``$CC``, else ``cc``/``gcc``) into a
fresh private directory (mode 0700, this process only, removed at exit): nothing is reused from a
shared or predictable location. :mod:`aot.runtime.loader.lean` decides whether to load them.
"""

from __future__ import annotations

import atexit
import functools
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from ...core.errors import ToolchainError

#: cuda-pathfinder's names of the libraries ``cuda.compute`` preloads, in its order.
LIBS = ("nvrtc", "nvJitLink", "cudart")
#: The CUDA majors cuda-cccl 1.2.1 ships bindings for.
MAJORS = (12, 13)
_SOURCES = {"nvrtc": "libnvrtc_stub.c", "nvJitLink": "libnvjitlink_stub.c", "cudart": "libcudart_stub.c"}
#: Each stand-in exports one of these (a marker to tell it from the real library).
MARKERS = {"nvrtc": "aot_nvrtc_stub", "nvJitLink": "aot_nvjitlink_stub", "cudart": "aot_cudart_stub"}


def soname(lib: str, major: int) -> str:
    """``libnvrtc.so.13``: the name the real library has and libcccl.c.parallel.so asks for."""
    return f"lib{lib}.so.{major}"


def _patches_dir() -> Path:
    import cccl_patches
    return Path(cccl_patches.__file__).parent


def stand_in_paths(major: int) -> dict[str, Path]:
    """lib name -> path of its stand-in for CUDA ``major``: the installed ones, else built now."""
    if major not in MAJORS:
        raise ToolchainError(f"no stand-in toolchain for CUDA {major} (cuda-cccl supports {MAJORS})")
    packaged = {lib: _patches_dir() / "lib" / soname(lib, major) for lib in LIBS}
    if all(p.is_file() for p in packaged.values()):
        return packaged
    return build(major, _private_dir())


@functools.lru_cache(maxsize=1)
def _private_dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="aot-stand-ins-"))  # 0700, unpredictable name
    owner = os.getpid()
    atexit.register(lambda: shutil.rmtree(path, ignore_errors=True) if os.getpid() == owner else None)
    return path


def compiler() -> list[str]:
    """The C compiler command ($CC, else cc, else gcc); ToolchainError if there is none."""
    from ...core.env import CC
    cc = shlex.split(CC.get()) if CC.get() else [shutil.which("cc") or shutil.which("gcc") or ""]
    if not cc or not cc[0]:
        raise ToolchainError("no CUDA toolkit and no C compiler to build aot's stand-in NVRTC/nvJitLink "
                             "(install gcc, or install the package built by CMake)")
    return cc


def build(major: int, out_dir: Path) -> dict[str, Path]:
    """Compile the three stand-ins for CUDA ``major`` into ``out_dir`` (tmp file + rename each)."""
    src_dir = _patches_dir()
    template = (src_dir / "stub.map.in").read_text()
    cc = compiler()
    paths = {}
    for lib in LIBS:
        name = soname(lib, major)
        script = out_dir / f"{name}.map"
        script.write_text(template.replace("@SONAME@", name))
        target = out_dir / name
        tmp = out_dir / f".{name}.tmp"
        cmd = [*cc, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", f"-DAOT_CUDA_MAJOR={major}",
               f"-Wl,-soname,{name}", f"-Wl,--version-script={script}", "-o", str(tmp), str(src_dir / _SOURCES[lib])]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ToolchainError(f"cannot run the C compiler {cc[0]!r}: {e}") from None
        if proc.returncode != 0:
            raise ToolchainError(f"building the stand-in {name} failed: {' '.join(cmd)}: {proc.stderr.strip()}")
        os.replace(tmp, target)
        paths[lib] = target
    return paths
