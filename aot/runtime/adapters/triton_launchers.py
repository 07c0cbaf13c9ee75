"""Triton's C launchers, built at ``aot build`` and served at the first launch through Triton's cache manager.

What Triton compiles with the host C compiler at a first launch (read in the sources of 3.2 to 3.9): ``cuda_utils``
(its ``backends/nvidia/driver.c``: loading a cubin, device properties) when the driver is first used, and, up to
3.6, one ``__triton_launcher`` per kernel signature (C that ``make_launcher`` writes: it unpacks the Python
arguments and calls ``cuLaunchKernelEx``). Each is a CPython extension module built by ``runtime.build._build``
(``cc src -O3 -shared -fPIC -Wno-psabi``, Triton's ``include`` folder, the Python headers, ``-l:libcuda.so.1`` or
``-lcuda``) and kept in Triton's cache through the cache manager in force: ``get_cache_manager(key).get_file(file)``,
then built and ``put`` on a miss (3.4+ hand the manager the key in Triton's base32). The key and the file name,
per release:

- 3.2: ``sha256(src)``, ``<name>.so``;
- 3.3: ``sha256(src + platform_key())``, ``<name>.so``;
- 3.4 to 3.7: ``sha256(src + platform_key())``, ``<name><EXT_SUFFIX>`` (3.7 builds ``cuda_utils`` only: its
  launcher is generic, inside ``cuda_utils``);
- 3.8, 3.9: ``cuda_utils`` only, by ``compile_module_from_file``, keyed also by the folders it is built with (the
  user's ``libcuda`` folder, the install's path): not known at build time, not shipped (Triton builds it once per
  user cache, as without aot).

aot builds each module on the driverless host through Triton's own ``_build`` (its compiler command; a stub
``libcuda.so.1`` defining the symbols the module calls, so the module needs ``libcuda.so.1`` as Triton's own build
records it), for the CPython the build runs under, and carries it in the kernel's artifact header
(:mod:`aot.build.triton_launcher`). At run time :class:`~aot.runtime.adapters.triton_attach.AotCacheManager`'s
``get_file`` serves one only where Triton's cache has none and everything the module depends on is what it was
built with: Triton's key (the sha256 of the very source Triton would compile, with the platform), the file name
Triton asks for, this interpreter's ``EXT_SUFFIX`` (the CPython ABI: major.minor, debug or free-threaded, the
platform), the content of each Triton header the source includes (``cuda.h``), and no build override
(``knobs.build.impl``, ``TRITON_CUDACRT_PATH``/``TRITON_CUDART_PATH``). Anything else: Triton builds it, as today.
The C compiler is not keyed, as Triton's own cache does not key it (another compiler, the same C).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import re
import sysconfig
import threading
import zlib
from typing import Any

from ...core.log import get_logger

log = get_logger("aot.runtime.triton")

#: The schema of the header field ``triton_launchers``: another layout is another schema, never read.
SCHEMA = "aot-triton-launchers-v1"
#: The modules Triton builds with the host compiler.
NAMES = ("cuda_utils", "__triton_launcher")
#: Largest module served (a launcher is ~20 KB, cuda_utils ~30 KB).
MAX_MODULE = 4 * 1024 * 1024
_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"/\\]+)"', re.M)
_lock = threading.Lock()
#: Artifacts checked in this process, kept for the next ask (the kernel's launcher right after its cubin).
MAX_CHECKED = 16
#: Triton's key -> [(registry, spec, manifest entry)], for every attached registry; the include digests seen here;
#: (key, file name) -> the path of a module served in this process; (spec, path, sha256) -> the checked artifact.
_state: dict[str, Any] = {"table": {}, "includes": {}, "served": {}, "checked": {}}


@functools.cache
def platform_key() -> str:
    """Triton's ``platform_key()`` (machine, system, architecture), the same text in every release that has one.
    Once per process, as Triton's own: ``platform.architecture()`` runs ``file`` on the interpreter (a subprocess,
    ~5 ms), and the machine a process runs on does not change under it. Triton's own (cached) where it has one:
    its launch has just computed it, so the first served module runs no second ``file``."""
    try:
        from triton.runtime.build import platform_key as triton_s
    except ImportError:  # 3.2: none (its launchers are keyed by the source alone)
        triton_s = None
    if callable(triton_s):
        return str(triton_s())
    from platform import architecture, machine, system
    return ",".join([machine(), system(), *architecture()])


def ext_suffix() -> str:
    """This interpreter's extension-module suffix (``.cpython-312-x86_64-linux-gnu.so``): the ABI a module is for."""
    return str(sysconfig.get_config_var("EXT_SUFFIX") or "")


def triton_keys(src: str) -> list[str]:
    """The keys Triton's releases look a module of C source ``src`` up by (the module's docstring)."""
    return [hashlib.sha256((src + platform_key()).encode("utf-8")).hexdigest(),
            hashlib.sha256(src.encode("utf-8")).hexdigest()]


def file_names(name: str) -> tuple[str, str]:
    """The file names Triton's releases ask its cache for: ``<name><EXT_SUFFIX>`` (3.4+), ``<name>.so`` (3.2, 3.3)."""
    return name + ext_suffix(), f"{name}.{ext_suffix().rsplit('.', 1)[-1]}"


def include_dir() -> str:
    """The installed Triton's NVIDIA ``include`` folder (``cuda.h``), as its driver passes it to the compiler."""
    import triton
    return os.path.join(os.path.dirname(os.path.realpath(triton.__file__)), "backends", "nvidia", "include")


def includes_of(src: str, dirs: list[str]) -> dict[str, str] | None:
    """sha256 of each ``#include "X"`` of ``src`` as found in ``dirs`` (first hit); ``None`` if one is not found."""
    out = {}
    for name in sorted(set(_INCLUDE.findall(src))):
        for d in dirs:
            p = os.path.join(d, name)
            if os.path.isfile(p):
                with open(p, "rb") as f:
                    out[name] = hashlib.sha256(f.read()).hexdigest()
                break
        else:
            return None
    return out


def override() -> str | None:
    """Why Triton would build a module otherwise than aot did (its build hook or extra include folders), or None."""
    import triton
    knobs = getattr(triton, "knobs", None)
    build = getattr(knobs, "build", None)
    if build is not None and getattr(build, "impl", None) is not None:
        return "triton.knobs.build.impl is set"
    for var in ("TRITON_CUDACRT_PATH", "TRITON_CUDART_PATH"):
        if os.environ.get(var):
            return f"{var} is set"
    return None


def encode(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data, 9)).decode("ascii")


def decode(text: str, size: int) -> bytes:
    """A module's bytes from its header text, at most ``size`` (bounded before and while inflating)."""
    if not isinstance(text, str) or not 0 < size <= MAX_MODULE or len(text) > 2 * MAX_MODULE:
        raise ValueError("no module of a bounded size")
    z = zlib.decompressobj()
    data = z.decompress(base64.b64decode(text, validate=True), size + 1)
    if len(data) != size or z.unconsumed_tail:
        raise ValueError("the module's size differs from its header's")
    return data


def register(registry: Any, spec: Any, entry: dict) -> None:
    """Note the modules a manifest entry carries (its ``triton_launcher_keys``), built for this interpreter."""
    keys = entry.get("triton_launcher_keys")
    if entry.get("triton_launcher_abi") != ext_suffix() or not isinstance(keys, list):
        return
    from triton.runtime import cache
    b32 = getattr(cache, "_base32", None)  # 3.4+: the manager gets the key in base32
    with _lock:
        for k in keys[:16]:
            if isinstance(k, str) and len(k) == 64:
                for name in {k, b32(k) if b32 is not None else k}:
                    rows = _state["table"].setdefault(name, [])
                    if len(rows) < 4:  # one artifact answers; a few in case one is unreadable
                        rows.append((registry, spec, entry, k))


def forget() -> None:
    with _lock:
        _state["table"].clear()
        _state["served"].clear()
        _state["checked"].clear()


def checked(registry: Any, spec: Any, entry: dict) -> Any:
    """``check_packaged`` of a manifest entry's artifact, once per process: the bytes read, hashed and checked are
    kept (the last :data:`MAX_CHECKED`) and served as they are, so the kernel's cubin (at ``get_group``) and its
    launcher (at ``get_file``, just after) come from one read. The file is never read again for them: what is
    served is what its sha256 was checked on."""
    from ..loader.packaged import check_packaged
    path = registry.manifest.path_of(entry)
    key = (id(spec), str(path), entry.get("sha256"))
    got = _state["checked"].get(key)
    if got is not None and got[0] is spec and got[1] is registry.manifest:
        return got[2]
    art = check_packaged(registry.manifest, spec, entry, path)
    with _lock:
        table = _state["checked"]
        if len(table) >= MAX_CHECKED:
            table.pop(next(iter(table)))
        table[key] = (spec, registry.manifest, art)
    return art


def serve(key: str, filename: str, folder: str) -> str | None:
    """The path of the packaged module Triton asks for under ``key`` as ``filename``, written into ``folder``; None:
    none is packaged for it here (Triton builds it)."""
    rows = _state["table"].get(key)
    if not rows or os.path.basename(filename) != filename:
        return None
    why = override()
    if why is not None:
        log.debug("triton: launcher %s not served (%s)", filename, why)
        return None
    done = _state["served"].get((key, filename))
    if done is not None:  # written (from checked bytes) into this process's own folder: Triton loads it again
        return done
    for registry, spec, entry, hexkey in rows:
        try:
            data = _module(registry, spec, entry, hexkey, filename)
        except Exception as e:  # noqa: BLE001 - a foreign or corrupt artifact: Triton builds the module
            log.info("triton: launcher %s not served from %s (%s: %s)", filename, entry.get("path"),
                     type(e).__name__, e)
            continue
        if data is None:
            continue
        stem, _, suffix = filename.partition(".")  # one folder, the key in each name: no mkdir per module
        path = os.path.join(folder, f"{stem}.{key}.{suffix}")
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
        with _lock:
            _state["served"][(key, filename)] = path
        log.debug("triton: %s served from a packaged build (%s)", filename, spec.name)
        return path
    return None


def _module(registry: Any, spec: Any, entry: dict, key: str, filename: str) -> bytes | None:
    art = checked(registry, spec, entry)
    doc = art.header.get("triton_launchers")
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None
    if doc.get("ext_suffix") != ext_suffix() or doc.get("platform") != platform_key():
        return None
    for m in doc.get("modules") or []:
        if not isinstance(m, dict) or key not in (m.get("keys") or []) or filename not in file_names(str(m["name"])):
            continue
        if not isinstance(m.get("includes"), dict) or m["includes"] != _installed_includes(tuple(m["includes"])):
            return None
        data = decode(str(m.get("data")), int(m.get("size", 0)))
        if hashlib.sha256(data).hexdigest() != m.get("sha256"):
            raise ValueError("the module's sha256 differs from its header's")
        return data
    return None


def _installed_includes(names: tuple[str, ...]) -> dict[str, str] | None:
    """sha256 of the installed Triton's headers ``names`` (hashed once per process)."""
    got = _state["includes"]
    if names not in got:
        got[names] = includes_of("".join(f'#include "{n}"\n' for n in names), [include_dir()])
    return got[names]
