"""cuda.compute served on cuda-cccl releases without ``serialize`` (< 1.1.0; issue 44).

Those releases build every algorithm inside their C library (``cccl_device_*_build``): NVRTC compiles the
algorithm's C++ to LTO-IR, nvJitLink links it with the operators' LTO-IR, the C library loads the cubin. aot
serves the two compiler calls, not the build result: shims with the real libraries' sonames and symbol
versions (``cccl_patches/aot_nvrtc_shim.c``, ``aot_nvjitlink_shim.c``) are loaded RTLD_GLOBAL before
cuda.compute, so the C library binds to them; they forward everything to the real NVRTC/nvJitLink and ask
this module, through a ctypes callback, for the answer to each compile or link, given its serialized inputs.

The key (:func:`key_of`) covers every input of what is served: the source, program name, headers and their
include names, name expressions and every option (NVRTC); every option and every input's type, name and bytes
(nvJitLink); the content of each include directory an option names, in place of its path (hashed once per
process; a directory outside the installed cuda-cccl / CUDA packages refuses); the content of the real
compiler libraries answering here. Anything the key cannot see refuses (None): the real compiler runs.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import struct
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator

from ...core.keyschemas import SCHEMAS
from .cccl_legacy_files import Refused, dir_digest, prefetch_digests, prefetch_plan

#: Options naming an include directory (NVRTC spells both).
_INCLUDE_PREFIXES = ("-I", "--include-path=")
NVRTC_TAG, NVJITLINK_TAG = b"aot-nvrtc-1", b"aot-nvjitlink-1"

#: Hashed into every key; its version is recorded in a set's ``key_schemas`` (a set of another is said once).
KEY_SCHEMA = b"aot-cccl-legacy-key-%d" % SCHEMAS["cccl_legacy_key"]

LOOKUP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p),
                          ctypes.POINTER(ctypes.c_size_t))
RTLD_NOLOAD = getattr(os, "RTLD_NOLOAD", 4)
RECORD = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t)


def fields(buf: bytes) -> Iterator[bytes]:
    """The shim's length-prefixed fields (u64 little-endian length, bytes), bounds-checked."""
    pos, n = 0, len(buf)
    while pos < n:
        if n - pos < 8:
            raise Refused("truncated field length")
        (length,) = struct.unpack_from("<Q", buf, pos)
        pos += 8
        if length > n - pos:
            raise Refused("field longer than the buffer")
        yield buf[pos:pos + length]
        pos += length


def _u64(b: bytes) -> int:
    if len(b) != 8:
        raise Refused("count field is not 8 bytes")
    return int(struct.unpack("<Q", b)[0])


def parse_nvrtc(buf: bytes) -> dict:
    """The inputs of one NVRTC compile, as ``aot_nvrtc_shim.c`` serializes them."""
    it = fields(buf)
    try:
        if next(it) != NVRTC_TAG:
            raise Refused("not an NVRTC record")
        src, name = next(it), next(it)
        headers = [(next(it), next(it)) for _ in range(_u64(next(it)))]
        exprs = [next(it) for _ in range(_u64(next(it)))]
        opts = [next(it) for _ in range(_u64(next(it)))]
    except StopIteration:
        raise Refused("truncated NVRTC record") from None
    if next(it, None) is not None:
        raise Refused("trailing fields")
    return {"src": src, "name": name, "headers": headers, "exprs": exprs, "options": opts}


def _include_dir(opt: str) -> str | None:
    for prefix in _INCLUDE_PREFIXES:
        if opt.startswith(prefix) and len(opt) > len(prefix):
            return opt[len(prefix):]
    return None


def _canonical_nvrtc(buf: bytes) -> bytes:
    rec = parse_nvrtc(buf)
    out = []
    for raw in rec["options"]:
        opt = raw.decode("utf-8", "surrogateescape")
        inc = _include_dir(opt)
        if inc is not None:
            out.append(b"-I<content " + dir_digest(inc).encode() + b">")
        elif "/" in opt:  # any other path (-include, --pre-include, ...) is content the key cannot see
            raise Refused(f"option {opt!r} names a path")
        else:
            out.append(raw)
    canon = [NVRTC_TAG, rec["src"], rec["name"], str(len(rec["headers"])).encode()]
    for content, inc_name in rec["headers"]:
        canon += [content, inc_name]
    canon += [str(len(rec["exprs"])).encode(), *rec["exprs"], str(len(out)).encode(), *out]
    return b"".join(struct.pack("<Q", len(c)) + c for c in canon)


def key_of(buf: bytes, identity: bytes) -> str:
    """The content key of one compile or link: sha256 over the key schema, the compiler identity and the
    canonical inputs (NVRTC include-directory paths replaced by their content digest). Raises Refused."""
    first = next(fields(buf), b"")
    if first == NVRTC_TAG:
        canon = _canonical_nvrtc(buf)
    elif first == NVJITLINK_TAG:
        canon = buf  # options and each input's type, name and bytes: no paths, served as they are
        opts_field = list(fields(buf))
        if any(b"/" in f for f in opts_field[2:2 + _u64(opts_field[1])]):
            raise Refused("an nvJitLink option names a path")
    else:
        raise Refused("unknown record tag")
    h = hashlib.sha256(KEY_SCHEMA)
    for part in (identity, canon):
        h.update(struct.pack("<Q", len(part)) + part)
    return h.hexdigest()


class Shims:
    """The two loaded shims, their callbacks and the table they answer from (key -> output bytes)."""

    def __init__(self, paths: dict[str, Path], real: dict[str, str], table: dict[str, bytes | Path] | None = None,
                 record: Callable[[str, bytes, bytes], None] | None = None, release: str | None = None,
                 major: int = 13):
        self.table = dict(table or {})
        self.release = release
        # Hashing the compilers and the include directories (about 300 MB, seconds on a slow host) starts now,
        # beside the rest of the import and numba's compile of the operators; a lookup waits for it.
        self._identity: bytes | None = None
        self._nvvm: dict[str, bytes] = {}
        self._warm_error: BaseException | None = None
        self._warm = threading.Thread(target=self._prefetch, args=(real, prefetch_plan(real, major)),
                                      name="aot-cccl-legacy-hash", daemon=True)
        self._warm.start()
        self.refusals: list[str] = []
        self._record = record
        self._answers: dict[str, ctypes.Array] = {}
        self._lookup_cb = LOOKUP(self._lookup)
        self._record_cb = RECORD(self._on_record) if record else RECORD()  # a NULL function pointer
        self.libs = {}
        self._opened: list = []
        # NVRTC opens its builtins by soname when it first compiles; the wheels' libnvrtc has no RUNPATH to
        # find them by (cuda-pathfinder, which would load them, sees the shim's soname and stops there).
        for b in sorted(Path(real["nvrtc"]).parent.glob("libnvrtc-builtins.so.*")):
            ctypes.CDLL(str(b), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
        for lib in ("nvrtc", "nvJitLink"):
            h = ctypes.CDLL(str(paths[lib]), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
            h.aot_shim_init.argtypes = [ctypes.c_char_p, LOOKUP, RECORD]
            if h.aot_shim_init(real[lib].encode(), self._lookup_cb, self._record_cb) != 0:
                self._unload([h, *self._opened])  # a shim without its real library would fail every call
                raise OSError(f"aot: the real {lib} at {real[lib]} does not load")
            h.aot_shim_hits.restype = h.aot_shim_misses.restype = ctypes.c_ulong
            self.libs[lib] = h
            # The soname must now name the shim: where the real library was loaded first (by cuda-pathfinder,
            # CuPy, ...), the C library would bind to it and nothing would be served.
            bound = ctypes.CDLL(paths[lib].name, mode=os.RTLD_NOW | RTLD_NOLOAD)
            self._opened += [h, bound]  # dlopen counts each: an unload closes each
            if not hasattr(bound, f"aot_{lib.lower()}_shim"):
                raise OSError(f"{paths[lib].name} was loaded before aot's shim; its builds are not served")

    @staticmethod
    def _unload(handles: list) -> None:
        import _ctypes
        for h in handles:
            _ctypes.dlclose(h._handle)

    def counts(self) -> dict[str, tuple[int, int]]:
        """lib -> (hits, misses); ``numba``: the operators' LTO-IR (served, compiled: :mod:`.cccl_legacy_ops`)."""
        from . import cccl_legacy_ops
        got = {k: (int(h.aot_shim_hits()), int(h.aot_shim_misses())) for k, h in self.libs.items()}
        if any(cccl_legacy_ops.counts()):
            got["numba"] = cccl_legacy_ops.counts()
        return got

    def _prefetch(self, real: dict[str, str], plan: tuple[list[str], list[str], list[str]]) -> None:
        try:  # reads and hashes files only: a thread that imported here deadlocked with the main thread's imports
            self._identity, self._nvvm = prefetch_digests(real, plan)
        except BaseException as e:  # noqa: BLE001 - kept for the first lookup, which then refuses
            self._warm_error = e

    @property
    def nvvm_identity(self) -> dict[str, bytes]:
        """realpath -> sha256 of the NVVM library and libdevice of the CUDA wheels here (waited for)."""
        self._warm.join()
        return self._nvvm

    def answer(self, key: str) -> bytes | None:
        """The table's answer for ``key``, read and checked once (None: not there, or not ours)."""
        buf = self._buffer(key)
        return None if buf is None else buf.raw

    def _buffer(self, key: str) -> ctypes.Array | None:
        ans = self._answers.get(key)
        if ans is None:
            value = self.table.get(key)
            if value is None:
                return None
            payload = read_answer(value, key, self.release) if isinstance(value, Path) else value
            if payload is None:
                del self.table[key]
                return None
            # kept alive for the process: a shim copies it, but only after its callback returns
            ans = self._answers[key] = ctypes.create_string_buffer(payload, len(payload))
        return ans

    @property
    def identity(self) -> bytes:
        """The compilers' content (computed by the prefetch thread; waited for)."""
        self._warm.join()
        if self._identity is None:
            raise Refused(f"the compilers could not be hashed: {self._warm_error}")
        return self._identity

    def _key(self, ptr: int, n: int) -> str | None:
        try:
            return key_of(ctypes.string_at(ptr, n), self.identity)
        except Refused as e:
            self.refusals.append(str(e))
            return None

    def _lookup(self, ptr, n, out, out_len) -> int:
        try:
            key = self._key(ptr, n)
            ans = None if key is None else self._buffer(key)
            if ans is None:
                return 0
            out[0] = ctypes.addressof(ans)
            out_len[0] = len(ans)
            return 1
        except Exception:  # a callback must not raise into C: a miss compiles for real
            return 0

    def _on_record(self, ptr, n, optr, on) -> None:
        try:
            key = self._key(ptr, n)
            if key is not None and self._record is not None:
                self._record(key, ctypes.string_at(ptr, n), ctypes.string_at(optr, on))
        except Exception as e:  # never into C; the build notices the missing record
            self.refusals.append(f"record failed: {e}")


# --- where the shims and the real libraries are, and the packaged table ------------------------------------

SHIM_SOURCES = {"nvrtc": "aot_nvrtc_shim.c", "nvJitLink": "aot_nvjitlink_shim.c"}
from ...core.legacy_manifest import MAGIC  # noqa: E402 - the answer file's magic, one place
MAX_HEADER, MAX_PAYLOAD = 4096, 256 * 1024 * 1024


def real_libs(major: int) -> dict[str, str]:
    """The real NVRTC and nvJitLink of this install, found without loading them (loading one first would
    bind cuda.compute's C library to it, past the shim): the NVIDIA wheels, else $CUDA_HOME/lib64."""
    dirs = []
    try:
        import nvidia
        dirs += [Path(p) / f"cu{major}" / "lib" for p in nvidia.__path__]
        dirs += [Path(p) / sub / "lib" for p in nvidia.__path__ for sub in ("cuda_nvrtc", "nvjitlink")]
    except ImportError:
        pass
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs.append(Path(os.environ[var]) / "lib64")
    found = {}
    for lib in ("nvrtc", "nvJitLink"):
        for d in dirs:
            if (d / f"lib{lib}.so.{major}").is_file():
                found[lib] = str((d / f"lib{lib}.so.{major}").resolve())
                break
        else:
            raise FileNotFoundError(f"aot: no lib{lib}.so.{major} found (NVIDIA wheels or $CUDA_HOME/lib64)")
    return found


def build_shims(major: int, out_dir: Path) -> dict[str, Path]:
    """The two shims for CUDA ``major``: the installed ones (CMakeLists.txt builds them into
    ``cccl_patches/lib/legacy/``), else compiled now into ``out_dir`` (soname and symbol version of the real one)."""
    import subprocess

    from ..loader.stand_ins import _patches_dir, compiler, soname
    src = _patches_dir()
    packaged = {lib: src / "lib" / "legacy" / soname(lib, major) for lib in SHIM_SOURCES}
    if all(p.is_file() for p in packaged.values()):
        return packaged
    template = (src / "stub.map.in").read_text()
    paths = {}
    for lib, source in SHIM_SOURCES.items():
        name = soname(lib, major)
        vmap = out_dir / f"{name}.map"
        vmap.write_text(template.replace("@SONAME@", name))
        target = out_dir / name
        subprocess.run([*compiler(), "-O2", "-fPIC", "-shared", "-fvisibility=hidden", f"-I{src}",
                        "-o", str(target), str(src / source), f"-Wl,-soname,{name}",
                        f"-Wl,--version-script={vmap}", "-ldl"], check=True, capture_output=True)
        paths[lib] = target
    return paths


def encode_entry(key: str, kind: str, cuda_cccl: str, payload: bytes) -> bytes:
    import json
    header = json.dumps({"kind": kind, "key": key, "cuda_cccl": cuda_cccl,
                         "sha256": hashlib.sha256(payload).hexdigest()}, sort_keys=True).encode()
    return MAGIC + struct.pack("<I", len(header)) + header + payload


def decode_entry(data: bytes, where: str) -> tuple[dict, bytes]:
    """(header, payload) of one packaged answer; ValueError naming ``where`` when it is not one of ours."""
    import json
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4:
        raise ValueError(f"{where}: not an aot cccl-legacy artifact (magic)")
    (hlen,) = struct.unpack_from("<I", data, len(MAGIC))
    start = len(MAGIC) + 4
    if hlen > MAX_HEADER or start + hlen > len(data) or len(data) - start - hlen > MAX_PAYLOAD:
        raise ValueError(f"{where}: header or payload out of bounds")
    header = json.loads(data[start:start + hlen])
    payload = data[start + hlen:]
    if not isinstance(header, dict) or header.get("sha256") != hashlib.sha256(payload).hexdigest():
        raise ValueError(f"{where}: payload digest does not match its header")
    return header, payload


def load_table(root: Path, cuda_cccl: str) -> dict[str, bytes | Path]:
    """key -> where its answer is, from ``root/cccl-legacy/cuda-cccl-<release>/<sha256>.aot`` (the installed
    release's only): an index, each file read and checked on its first hit (:func:`read_answer`)."""
    table: dict[str, bytes | Path] = {}
    d = root / "cccl-legacy" / f"cuda-cccl-{cuda_cccl}"
    if not d.is_dir():
        return table
    for p in sorted(d.glob("*.aot")):
        if len(p.stem) == 64 and all(c in "0123456789abcdef" for c in p.stem):
            table[p.stem] = p
    return table


def read_answer(path: Path, key: str, cuda_cccl: str | None) -> bytes | None:
    """The checked payload of one packaged answer; a corrupt or foreign file is one warning and None (that
    compile or link runs for real)."""
    import logging
    try:
        with open(path, "rb") as f:
            data = f.read(len(MAGIC) + 4 + MAX_HEADER + MAX_PAYLOAD + 1)
        header, payload = decode_entry(data, str(path))
        if header.get("key") != key or (cuda_cccl is not None and header.get("cuda_cccl") != cuda_cccl):
            raise ValueError(f"{path}: key or release does not match its name")
    except (ValueError, OSError) as e:
        logging.getLogger("aot").warning("aot: %s; that compile runs for real", e)
        return None
    return payload


def install(root: Path, cuda_cccl: str, shim_dir: Path, major: int = 13, record=None) -> Shims:
    """Load the shims before cuda.compute's C library, answering from ``root``'s table for ``cuda_cccl``.
    Refuses (RuntimeError) when cuda.compute's bindings are loaded already: its C library is bound."""
    if any(m.startswith("cuda.compute._bindings") or m.startswith("cuda.compute.cu1") for m in sys.modules):
        raise RuntimeError("aot: cuda.compute's C library is loaded already; the legacy shims must come first")
    return Shims(build_shims(major, shim_dir), real_libs(major), load_table(root, cuda_cccl), record, cuda_cccl,
                 major)
