"""The files a cccl-legacy key holds the content of (issue 44): where they are and how they are hashed.

The compilers (NVRTC with its builtins, nvJitLink), NVVM and libdevice (the operators' compiler), and the
include directories cuda.compute's builds name: about 360 MB, hashed once per process, started with the shims
(:class:`aot.runtime.adapters.cccl_legacy.Shims`) beside the library's imports, by a child Python of its own
(:func:`sha256_many`): threads of this process hashing about 4,000 files took the GIL from those imports.
"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess  # imported here, in the importing thread: the prefetch thread imports nothing
import sys
import threading
from pathlib import Path
from typing import Sequence


class Refused(ValueError):
    """The inputs hold something the key cannot cover: the compile is not served (nor recorded)."""


def package_paths(name: str) -> list[str]:
    """The folders of package ``name`` (``cuda.cccl``, ``nvidia``), found without running its code: the prefetch
    thread must import nothing (a thread importing ``cuda.cccl`` while the main thread imports ``cuda.compute``
    through aot's import hook deadlocked on their module locks)."""
    mod = sys.modules.get(name)
    if mod is not None:
        return list(getattr(mod, "__path__", []))
    try:
        import importlib.util
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec else []


def trusted_roots() -> tuple[Path, ...]:
    """Where an include directory may be: the installed cuda-cccl and NVIDIA packages, the CUDA toolkit."""
    roots = [Path(p).resolve() for mod in ("cuda.cccl", "nvidia") for p in package_paths(mod)]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            roots.append(Path(os.environ[var]).resolve())
    return tuple(roots)


def _sha256(path: str | Path) -> bytes:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)  # releases the GIL for blocks over 2 KiB: the threads hash side by side
    return h.digest()


#: The child :func:`sha256_many` runs (``python -I -S -c``): NUL-separated paths on stdin, 32 bytes of sha256 per
#: path on stdout in order, hashed by up to 16 threads; any error is exit 1 (the caller then hashes them itself).
_CHILD = r"""
import hashlib, os, sys, threading
paths = sys.stdin.buffer.read().split(b"\0")
out = [b""] * len(paths)
todo = iter(range(len(paths)))
failed = []
def work():
    try:
        for i in todo:
            h = hashlib.sha256()
            with open(paths[i], "rb", buffering=0) as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    h.update(block)
            out[i] = h.digest()
    except BaseException as e:
        failed.append(e)
threads = [threading.Thread(target=work) for _ in range(max(1, min(16, len(os.sched_getaffinity(0)), len(paths))))]
for t in threads:
    t.start()
for t in threads:
    t.join()
if failed:
    sys.exit(1)
sys.stdout.buffer.write(b"".join(out))
"""
#: Fewer files than this are hashed here (a child Python costs about 20 ms to start).
CHILD_FROM = 64


def _interpreter() -> str | None:
    """This process's Python, where it is one a child can be started with (not an embedding program)."""
    exe = sys.executable
    return exe if exe and os.path.basename(exe).startswith("python") and os.path.isfile(exe) else None


def _in_child(exe: str, paths: Sequence[str | Path]) -> list[bytes] | None:
    """:data:`_CHILD`'s digests of ``paths``, or None where it failed (a path it could not read, no Python)."""
    names = [os.fsencode(str(p)) for p in paths]
    if any(b"\0" in n for n in names):
        return None
    try:
        r = subprocess.run([exe, "-I", "-S", "-c", _CHILD], input=b"\0".join(names), stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0 or len(r.stdout) != 32 * len(names):
        return None
    return [r.stdout[32 * i:32 * (i + 1)] for i in range(len(names))]


def sha256_many(paths: Sequence[str | Path], *, child: bool = True) -> list[bytes]:
    """Each file's sha256, in order. The key needs about 360 MB of compilers and headers (about 4,000 files)
    hashed once per process, beside the library's imports: a child Python hashes them (``child``, where there
    are many), so this process's imports keep the GIL; threads of this process hashing them took it in short
    turns, one per small file, and the imports waited. Where no child can run (an embedding program, a path it
    cannot read), up to 16 threads here, each taking the next file not yet taken (name the largest first:
    they start at once, and the small ones fill in beside them); an unreadable file raises here."""
    exe = _interpreter() if child and len(paths) >= CHILD_FROM else None
    got = _in_child(exe, paths) if exe else None
    if got is not None:
        return got
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    workers = max(1, min(16, cpus, len(paths)))
    out: list[bytes] = [b""] * len(paths)
    if workers == 1:
        return [_sha256(p) for p in paths]
    todo = iter(range(len(paths)))  # next() on it is one step under the GIL: each index is taken once
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for i in todo:
                out[i] = _sha256(paths[i])
        except BaseException as e:  # noqa: BLE001 - raised in the caller's thread, below
            errors.append(e)

    threads = [threading.Thread(target=work, name="aot-cccl-legacy-hash", daemon=True) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


#: Where each CUDA major's wheels put (NVVM's folder under ``nvidia/``, the runtime's headers cuda-cccl names):
#: CUDA 13's all under ``nvidia/cu13``, CUDA 12's one folder per wheel. Data: a layout, not a release; the shims
#: are built for the same two majors (CMakeLists.txt).
WHEEL_LAYOUT = {13: {"nvvm": "cu13", "cudart_include": "cu13/include"},
                12: {"nvvm": "cuda_nvcc", "cudart_include": "cuda_runtime/include"}}


def installed_major() -> int | None:
    """The CUDA major cuda.compute's C library is picked for (these releases pick it from ``cuda-bindings``'
    major, as aot's loader does: :func:`aot.core.majorset.installed_major`); None where it is neither 12 nor 13."""
    from ...core.majorset import installed_major as bindings_major
    major = bindings_major()
    return int(major) if major.isdigit() and int(major) in WHEEL_LAYOUT else None


def nvvm_files(major: int = 13) -> list[Path]:
    """The NVVM library and libdevice of the CUDA wheels (resolved): what numba-cuda compiles operators with
    where it finds them there (:mod:`.cccl_legacy_ops` serves an operator only where it would load these)."""
    found: set[Path] = set()
    for base in package_paths("nvidia"):
        root = Path(base, WHEEL_LAYOUT[major]["nvvm"])
        for pattern in ("lib/libnvvm.so*", "nvvm/lib64/libnvvm.so*", "nvvm/libdevice/libdevice*.bc"):
            found |= {p.resolve() for p in root.glob(pattern) if p.is_file()}
    return sorted(found)


def include_dirs_to_prefetch(major: int = 13) -> list[Path]:
    """The include directories cuda.compute's builds name: cuda-cccl's headers and the CUDA wheels' runtime
    headers (``cuda.pathfinder``'s ``cudart`` folder)."""
    dirs = []
    for mod, sub in (("cuda.cccl", ("headers", "include")),
                     ("nvidia", tuple(WHEEL_LAYOUT[major]["cudart_include"].split("/")))):
        dirs += [Path(p, *sub) for p in package_paths(mod) if Path(p, *sub).is_dir()]
    return dirs


def dir_digest(path: str) -> str:
    """sha256 over every file under ``path`` (relative name and content, sorted; links as their targets'
    content): what the compiler could include from there. Once per process per directory, whatever the
    spelling of its path, usually from the shims' prefetch. ``__pycache__`` folders are left out: cuda-cccl's
    header folder is a Python package, and its bytecode (written by pip at install, or by Python at the first
    import, with that install's file times) differs in every install (measured: a wheel built in one venv
    missed every compile in another with the same wheels)."""
    root = _trusted_dir(path)
    got = _DIR_DIGESTS.get(root)
    if got is None:
        names = _dir_files(root)
        got = _DIR_DIGESTS[root] = _combine(names, sha256_many([os.path.join(root, n) for n in names]))
    return got


_DIR_DIGESTS: dict[str, str] = {}  # resolved directory -> its digest, for the process


def _trusted_dir(path: str) -> str:
    root = Path(path).resolve()
    if not any(root == r or r in root.parents for r in trusted_roots()):
        raise Refused(f"include directory {path} is outside the installed cuda-cccl / CUDA packages")
    return str(root)


def _dir_files(root: str) -> list[str]:
    """Relative names of the files under ``root`` in the digest's order (plain strings: pathlib's
    ``relative_to`` cost 0.2 ms a file on the H200)."""
    names: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        rel_dir = dirpath[len(root):].lstrip("/")
        names += [f"{rel_dir}/{f}" if rel_dir else f for f in sorted(filenames)
                  if os.path.isfile(os.path.join(dirpath, f))]
    return names


def _combine(names: list[str], digests: list[bytes]) -> str:
    h = hashlib.sha256(b"aot-include-dir-2\0")
    for rel, digest in zip(names, digests):
        name = rel.encode()
        h.update(struct.pack("<Q", len(name)) + name)
        h.update(digest)
    return h.hexdigest()


def _compiler_files(real: dict[str, str]) -> list[tuple[str, Path]]:
    named: list[tuple[str, Path]] = []
    for lib in sorted(real):
        path = Path(real[lib])
        named.append((lib, path))
        if lib == "nvrtc":
            named += [(b.name, b) for b in sorted(path.parent.glob("libnvrtc-builtins*.so*"))]
    return named


def compiler_identity(real: dict[str, str], digests: dict[str, bytes] | None = None) -> bytes:
    """The content of the compiler libraries answering here (NVRTC with its builtins, nvJitLink);
    ``digests``: path -> sha256 hashed already."""
    named = _compiler_files(real)
    if digests is None:
        digests = dict(zip((str(p) for _, p in named), sha256_many([p for _, p in named])))
    return "\n".join(f"{name}={digests[str(p)].hex()}" for name, p in named).encode()


def prefetch_plan(real: dict[str, str], major: int = 13) -> tuple[list[str], list[str], list[str]]:
    """What the prefetch hashes for CUDA ``major`` (NVVM's files, the compilers', the trusted include
    directories), found in the calling thread: the prefetch thread then only reads files."""
    dirs = []
    for d in include_dirs_to_prefetch(major):
        try:
            dirs.append(_trusted_dir(str(d)))
        except Refused:
            continue
    return [str(p) for p in nvvm_files(major)], [str(p) for _, p in _compiler_files(real)], dirs


def prefetch_digests(real: dict[str, str], plan: tuple[list[str], list[str], list[str]]) -> \
        tuple[bytes, dict[str, bytes]]:
    """The compilers' identity and NVVM's digests, the include directories' digests kept for the process: every
    file of ``plan`` (:func:`prefetch_plan`) hashed in one pool, the largest (the compilers, NVVM) first."""
    nvvm, compilers, roots = plan
    dirs = [(root, _dir_files(root)) for root in roots]
    paths = [*nvvm, *compilers, *(os.path.join(root, n) for root, names in dirs for n in names)]
    digests = dict(zip(paths, sha256_many(paths)))
    for root, names in dirs:
        _DIR_DIGESTS.setdefault(root, _combine(names, [digests[os.path.join(root, n)] for n in names]))
    return compiler_identity(real, digests), {p: digests[p] for p in nvvm}
