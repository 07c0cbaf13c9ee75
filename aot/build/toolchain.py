"""Find the toolchain: versions of cuda-cccl / NVRTC / nvJitLink, a real driver or the stand-in.

Everything here is probed lazily (nothing at ``import aot``). The version fingerprint goes into every
artifact header and content key, so an artifact is never reused across toolchains.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import shlex
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..core.versions import INSTALL_TOOLKIT, dist_version, producer_versions, stub_digest
from ..runtime.loader.driver import STUB_MARKER, native_sm, real_driver_present
from ..core.fs import trust_problem
from ..core.errors import ToolchainError
from .isolated import expose_build_env_toolkit



def cuda_major() -> int:
    """The CUDA major of the installed cuda-bindings (what cuda-cccl picks its extension by)."""
    v = dist_version("cuda-bindings")
    if v == "missing":
        raise ToolchainError(f"cuda-bindings is not installed ({INSTALL_TOOLKIT})")
    return int(v.split(".")[0])


def nvrtc_supported_sms() -> list[int]:
    """The SMs this NVRTC can target."""
    try:
        from cuda.bindings import nvrtc
        err, archs = nvrtc.nvrtcGetSupportedArchs()
    except Exception as e:  # noqa: BLE001 - a missing or broken NVRTC is a toolchain problem, exit 3
        raise ToolchainError(f"cannot load NVRTC: {e}") from None
    return [int(a) for a in archs]


@dataclass(frozen=True)
class Driver:
    """Which libcuda build workers use: ``real`` (a driver was found) or ``stub`` (the stand-in)."""

    kind: str  # "real" | "stub"
    path: str | None  # the stub's path (None for the real driver, found by the system loader)

    def describe(self) -> str:
        return "real NVIDIA driver" if self.kind == "real" else f"aot stand-in libcuda ({self.path})"


def choose_driver(force_stub: bool = False) -> Driver:
    """A real driver always wins, unless ``force_stub`` (CI parity on a GPU host)."""
    if not force_stub and real_driver_present():
        return Driver("real", None)
    return Driver("stub", str(stub_library()))


def _packaged_stub() -> Path:
    import cccl_patches
    return Path(cccl_patches.__file__).with_name("lib") / "libcuda.so.1"


def _check_elf_library(fd: int, what: str) -> None:
    """Refuse (ToolchainError, one line) anything but a regular ELF shared object: a stand-in that is not one
    would fail deep inside ``dlopen`` or cuda-cccl instead of here."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise ToolchainError(f"{what} is not a regular file")
    head = os.pread(fd, 18, 0)
    if len(head) < 18 or head[:4] != b"\x7fELF":
        raise ToolchainError(f"{what} is not an ELF shared library (no ELF header)")
    e_type = int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")
    if e_type != 3:  # ET_DYN
        raise ToolchainError(f"{what} is an ELF file but not a shared library (e_type {e_type})")


def _open_library(path: Path, *, trusted_location: bool) -> int:
    """A descriptor of the stand-in at ``path`` after the checks; the caller loads it through that
    descriptor (``/proc/self/fd``), so nothing can be swapped in between check and load. Outside a
    trusted location (the user's $AOT_STUB_LIBCUDA, the installed package) the file must also be ours,
    written by nobody else, and not a symlink."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    if not trusted_location:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise ToolchainError(f"cannot open the stand-in libcuda {path}: {e.strerror or e}") from None
    try:
        if not trusted_location:
            why = trust_problem(os.fstat(fd), f"stand-in libcuda {path}")
            if why:
                raise ToolchainError(f"{why}; not loaded")
        _check_elf_library(fd, f"stand-in libcuda {path}")
    except BaseException:
        os.close(fd)
        raise
    return fd


@functools.lru_cache(maxsize=1)
def _private_stub_dir() -> Path:
    """A fresh 0700 directory for this process's stand-in when the user cache cannot hold it (disabled or
    untrusted): never a predictable name in a shared temp directory. Removed at exit by its creator."""
    import atexit
    path = Path(tempfile.mkdtemp(prefix="aot-stub-"))
    owner = os.getpid()
    atexit.register(lambda: shutil.rmtree(path, ignore_errors=True) if os.getpid() == owner else None)
    return path


def _cached_stub_dir(digest: str) -> Path | None:
    """``<cache>/stub/<digest>`` when the cache is enabled and every level of it is ours (else ``None``)."""
    from ..runtime.jit.cache import STUB_DIR, UnsafeCacheError, enabled, private_dir
    if not enabled():
        return None
    try:
        return private_dir(STUB_DIR, digest)
    except (UnsafeCacheError, OSError):
        return None


def stub_library() -> Path:
    """Path of the stand-in ``libcuda.so.1``: $AOT_STUB_LIBCUDA (must be an ELF shared library), the one
    CMake built into the installed package, or one compiled from ``cccl_patches/libcuda_stub.c`` with the
    system C compiler into the user cache (keyed by the source's hash, written atomically; loaded only if
    it and its directories are ours and written by nobody else), else into a fresh private directory."""
    from ..core.env import STUB_PATH
    override = STUB_PATH.get()
    if override is not None:
        if not override.is_file():
            raise ToolchainError(f"AOT_STUB_LIBCUDA={override} does not exist or is not a regular file")
        fd = _open_library(override, trusted_location=True)
        os.close(fd)
        return override
    packaged = _packaged_stub()
    if packaged.is_file():
        return packaged
    digest = stub_digest()
    where = _cached_stub_dir(digest)
    if where is not None:
        target = where / "libcuda.so.1"
        try:
            os.close(_open_library(target, trusted_location=False))
            return target
        except ToolchainError:
            if os.path.lexists(target):  # ours to replace only if we own it; else build elsewhere
                try:
                    if os.lstat(target).st_uid != os.geteuid():
                        where = None
                except OSError:
                    where = None
    if where is None:
        where = _private_stub_dir()
    return _compile_stub(where / "libcuda.so.1")


def _compile_stub(target: Path) -> Path:
    import cccl_patches
    from ..core.env import CC
    from ..core.fs import TMP_PREFIX
    cc = shlex.split(CC.get()) if CC.get() else [shutil.which("cc") or shutil.which("gcc") or ""]
    if not cc[0]:
        raise ToolchainError("no NVIDIA driver and no C compiler to build the stand-in libcuda "
                             "(install gcc, or set AOT_STUB_LIBCUDA to a prebuilt one)")
    try:
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=".so", dir=target.parent)
        os.close(fd)
    except OSError as e:
        raise ToolchainError(f"cannot write the stand-in libcuda under {target.parent}: {e}") from None
    cmd = [*cc, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-Wl,-soname,libcuda.so.1", "-o", tmp,
           str(cccl_patches.STUB_SOURCE)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise ToolchainError(f"building the stand-in libcuda failed: {' '.join(cmd)}\n{proc.stderr}")
        os.chmod(tmp, 0o700)
        os.replace(tmp, target)
    except OSError as e:
        raise ToolchainError(f"cannot run the C compiler {cc[0]!r}: {e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def worker_setup(stub_path: str | None) -> None:
    """Run first in every build worker: preload the stand-in, so that cuda-cccl's DT_NEEDED on
    libcuda.so.1 resolves to it by soname. cuda.compute itself is imported on the worker's first CCCL
    item (:func:`cccl_ready`): a worker that only compiles NVRTC units never pays for it.

    The file is checked again here (a worker trusts no path it was handed) and loaded through the
    descriptor that was checked, so it cannot be swapped between the check and ``dlopen``."""
    expose_build_env_toolkit()  # a worker of pip's isolated build starts with a fresh ``site``
    if not stub_path:
        return
    from ..core.env import STUB_PATH
    path = Path(stub_path)
    trusted = path in (STUB_PATH.get(), _packaged_stub())
    fd = _open_library(path, trusted_location=trusted)
    try:
        proc_path = f"/proc/self/fd/{fd}"
        ctypes.CDLL(proc_path if os.path.exists(proc_path) else stub_path, mode=ctypes.RTLD_GLOBAL)
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=1)
def cccl_ready() -> None:
    """Import cuda.compute (failing loudly if its CUDA bindings did not load) and apply the ProxyArray fix."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        import cuda.compute._bindings as bindings
    if not getattr(bindings, "_BINDINGS_AVAILABLE", False):  # cuda-cccl only warns; we must fail loudly
        raise ToolchainError("cuda.compute's CUDA bindings did not load (libcuda.so.1 / NVRTC missing?)")
    import cccl_patches
    cccl_patches.apply()



#: The producer fingerprint (kept under its old name for the build driver and its tests).
versions = producer_versions
__all__ = ["STUB_MARKER", "native_sm", "real_driver_present", "stub_digest", "versions"]
