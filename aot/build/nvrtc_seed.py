"""A CCCL blob's bytes must not depend on the build worker's PID: seed cuda.compute's NVRTC compiles.

NVRTC names a program's internal-linkage entities ``_INTERNAL_<crc>_<n>_<name>_<nonce>_<PID>``. aot zeroes the
nonce and the PID after the build (:mod:`aot.build.normalize`), keeping their length so the ELF stays valid; the
PID's digit count stayed. A worker with PID 9999 and one with PID 10000 wrote blobs of different sizes (measured:
reduce_sum_i32 sm_90, 188106 vs 188234 bytes, 84 names each a byte longer, the string table and every offset
after it moved), so two hosts, or two builds on one busy host, wrote other bytes for one content key
(tests/test_wheel.py::test_cccl_artifacts_are_reproducible failed whenever its two workers' PIDs straddled a
power of ten). Given ``-frandom-seed``, NVRTC writes the seed's hash in place of nonce and PID: no PID at all.

cuda.compute's C library builds its NVRTC options itself, so the option is added by a small library
(``cccl_patches/nvrtc_seed.c``) that each build worker loads ``RTLD_GLOBAL`` before cuda.compute: the C
library's ``nvrtcCreateProgram`` / ``nvrtcCompileProgram`` bind to it, and it passes each program a seed drawn
from that program's own inputs (two different programs linked together still get different names). It is the
one CMake built into the installed package, or compiled now with the C compiler (``AOT_CC``) into the user
cache, keyed by its source, as the stand-in libcuda is (:func:`aot.build.toolchain.stub_library`). Where it
cannot load, one warning: the build goes on with the zeroed names of before.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

log = logging.getLogger("aot")
NAME = "libaot_nvrtc_seed.so"


def source() -> Path:
    import cccl_patches
    return Path(cccl_patches.__file__).with_name("nvrtc_seed.c")


def _packaged() -> Path:
    import cccl_patches
    return Path(cccl_patches.__file__).with_name("lib") / NAME


def library() -> Path:
    """The seeding library: the installed package's, else one compiled from :func:`source` (ToolchainError)."""
    from .toolchain import _cached_stub_dir, _open_library, _private_stub_dir
    if _packaged().is_file():
        return _packaged()
    digest = "seed-" + hashlib.sha256(source().read_bytes()).hexdigest()[:16]
    where = _cached_stub_dir(digest)
    if where is not None and (where / NAME).is_file():
        from ..core.errors import ToolchainError
        try:
            os.close(_open_library(where / NAME, trusted_location=False))
            return where / NAME
        except ToolchainError:
            where = None  # not ours, or not a library: compile a private one
    return _compile(where if where is not None else _private_stub_dir())


def _compile(where: Path) -> Path:
    import tempfile

    from ..core.env import CC
    from ..core.errors import ToolchainError
    from ..core.fs import TMP_PREFIX
    cc = shlex.split(CC.get()) if CC.get() else [shutil.which("cc") or shutil.which("gcc") or ""]
    if not cc[0]:
        raise ToolchainError("no C compiler to build the NVRTC seeding library (install gcc, or set AOT_CC)")
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=".so", dir=where)
    os.close(fd)
    cmd = [*cc, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", f"-Wl,-soname,{NAME}", "-o", tmp,
           str(source()), "-ldl", "-lpthread"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ToolchainError(f"building the NVRTC seeding library failed: {' '.join(cmd)}\n{proc.stderr}")
        os.chmod(tmp, 0o700)
        os.replace(tmp, where / NAME)
    except OSError as e:
        raise ToolchainError(f"cannot run the C compiler {cc[0]!r}: {e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return where / NAME


@functools.lru_cache(maxsize=1)
def load() -> ctypes.CDLL | None:
    """Load the seeding library into this build worker, before cuda.compute (once); None, with one warning,
    where it cannot be (its compiles then keep NVRTC's nonce and PID, zeroed by :mod:`aot.build.normalize`)."""
    from ..core.errors import ToolchainError
    if any(m.startswith("cuda.compute._bindings") or m.startswith("cuda.compute.cu1") for m in sys.modules):
        log.warning("aot: cuda.compute's C library is loaded already; its NVRTC compiles are not seeded")
        return None
    from .toolchain import _open_library
    try:
        path = library()
        # checked (ours, in a folder of ours), then loaded by its path: through /proc/self/fd/N, as the stand-in
        # libcuda is, dlopen would hand back that library, loaded under the same name with an fd number reused
        os.close(_open_library(path, trusted_location=path == _packaged()))
        lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        lib.aot_nvrtc_seeded.restype = ctypes.c_ulong
        return lib
    except (ToolchainError, OSError) as e:
        log.warning("aot: NVRTC compiles not seeded (%s); a CCCL blob's size may follow the worker's PID", e)
        return None


def seeded() -> int:
    """How many NVRTC compiles this process seeded so far (0 where the library is not loaded)."""
    lib = load.cache_info().currsize and load()
    return int(lib.aot_nvrtc_seeded()) if lib else 0
