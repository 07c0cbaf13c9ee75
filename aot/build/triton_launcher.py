"""Triton's C launchers built at ``aot build``, on the driverless host, for the CPython the build runs under
(:mod:`aot.runtime.adapters.triton_launchers` says what Triton builds at a first launch, how it caches it, and how
aot serves it).

The C source is not re-derived: Triton's own driver writes it. Its ``CudaUtils`` and ``CudaLauncher`` (the latter
with the compiled kernel's ``ASTSource`` and metadata, as a launch makes it) are called with their module's
``compile_module_from_src`` replaced by one that records what it is asked to build and stops (and ``library_dirs``
by one that does not look for a driver): the exact source, name, include folders and libraries. A release whose
driver builds otherwise (3.8+: ``compile_module_from_file``) records nothing: nothing is shipped.

The module is then built by Triton's own ``runtime.build._build`` (its compiler command and flags, this
interpreter's headers and ``EXT_SUFFIX``) against a stub ``libcuda.so.1`` that defines exactly the driver symbols
the module calls (found by a first build against an empty stub), so that the linker records ``libcuda.so.1`` as
needed, as a build against the driver does; a build whose result does not need ``libcuda.so.1`` is refused.
A module that cannot be built here (no C compiler, no Python headers) is left out (a warning in the worker): Triton
builds it at the first launch, as without aot.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import shutil
import subprocess
import tempfile
import threading
from typing import Any

from ..core.log import get_logger
from ..runtime.adapters import triton_launchers as tl

log = get_logger(__name__)

#: Above this size of the encoded modules the kernel ships without them (the artifact header's cap is 64 KiB).
MAX_ENCODED = 40 * 1024
_lock = threading.Lock()
#: sha256 of (name, source) -> the module's header record, per build process (a signature many kernels share).
_built: dict[str, dict[str, Any] | None] = {}
_warned: set[str] = set()


class _Captured(Exception):
    """What Triton's driver asked ``compile_module_from_src`` to build."""


def header_fields(src: Any, metadata: Any) -> dict[str, Any]:
    """The artifact header's ``triton_launchers`` (and the manifest's ``triton_launcher_keys`` and
    ``triton_launcher_abi``) for a kernel compiled from ``src`` (an ``ASTSource``) with ``metadata``; empty where
    nothing is shipped (the module's docstring)."""
    wanted = [_capture(lambda d: d.CudaUtils(), "cuda_utils"),
              _capture(lambda d: d.CudaLauncher(src, metadata), "__triton_launcher")]
    modules = [m for m in (_module(*w) for w in wanted if w is not None) if m is not None]
    if not modules:
        return {}
    doc = {"schema": tl.SCHEMA, "ext_suffix": tl.ext_suffix(), "platform": tl.platform_key(), "modules": modules}
    if sum(len(m["data"]) for m in modules) > MAX_ENCODED:
        _warn_once("size", f"Triton launchers of {getattr(src, 'name', '?')} are over {MAX_ENCODED} bytes encoded: "
                           f"not shipped (Triton builds them at the first launch)")
        return {}
    return {"triton_launchers": doc, "triton_launcher_abi": doc["ext_suffix"],
            "triton_launcher_keys": [k for m in modules for k in m["keys"]]}


def _capture(call: Any, name: str) -> tuple[str, str, list[str], list[str], list[str]] | None:
    """(source, name, include folders, library folders, libraries) Triton's driver builds ``name`` from, or None."""
    try:
        import importlib
        d = importlib.import_module("triton.backends.nvidia.driver")
    except Exception:  # noqa: BLE001 - no NVIDIA backend: nothing to ship
        return None
    if not callable(d.__dict__.get("compile_module_from_src")) or not callable(d.__dict__.get("library_dirs")):
        return None
    lib = os.path.join(os.path.dirname(os.path.realpath(str(d.__file__))), "lib")

    def capture(src: str, name: str, **kw: Any) -> Any:
        raise _Captured(src, name, kw)

    with _lock:
        saved = {k: d.__dict__[k] for k in ("compile_module_from_src", "library_dirs")}
        had = "instance" in d.CudaUtils.__dict__
        d.__dict__.update(compile_module_from_src=capture, library_dirs=lambda: [lib])
        try:
            call(d)
            return None
        except _Captured as c:
            src, got, kw = c.args
        except Exception as e:  # noqa: BLE001 - this release builds it otherwise (or not at all): not shipped
            log.debug("triton launcher %s: not captured (%s: %s)", name, type(e).__name__, e)
            return None
        finally:
            d.__dict__.update(saved)
            if not had and "instance" in d.CudaUtils.__dict__:
                del d.CudaUtils.instance
    if got != name or not isinstance(src, str):
        return None
    inc = kw.get("include_dirs", d.__dict__.get("include_dirs", d.__dict__.get("include_dir")))
    libs = kw.get("libraries", d.__dict__.get("libraries"))
    if kw.get("ccflags") or not isinstance(inc, list) or not isinstance(libs, list):
        return None
    return src, name, list(inc), list(kw.get("library_dirs") or [lib]), list(libs)


def _module(src: str, name: str, inc: list[str], lib_dirs: list[str], libs: list[str]) -> dict[str, Any] | None:
    """The header record of module ``name`` built from ``src`` (memoised per process), or None (said once)."""
    memo = hashlib.sha256(f"{name}\0{src}".encode()).hexdigest()
    with _lock:
        if memo in _built:
            return _built[memo]
    try:
        includes = tl.includes_of(src, inc)
        if includes is None:
            raise RuntimeError(f"a header it includes is not in {inc}")
        data = _build(src, name, inc, lib_dirs, libs)
        rec: dict[str, Any] | None = {"name": name, "keys": tl.triton_keys(src), "includes": includes,
                                      "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                      "data": tl.encode(data)}
    except Exception as e:  # noqa: BLE001 - not built here: Triton builds it at the first launch
        _warn_once(name, f"Triton's {name} module is not shipped for {tl.ext_suffix()} ({type(e).__name__}: "
                         f"{str(e)[:300]}); Triton builds it with the host compiler at the first launch")
        rec = None
    with _lock:
        _built[memo] = rec
    return rec


def _build(src: str, name: str, inc: list[str], lib_dirs: list[str], libs: list[str]) -> bytes:
    from triton.runtime import build as tb
    wanted = set(inspect.signature(tb._build).parameters)
    with tempfile.TemporaryDirectory(prefix="aot-triton-launcher-") as tmp:
        stub = os.path.join(tmp, "stub")
        os.mkdir(stub)
        path = os.path.join(tmp, f"{name}.c")
        with open(path, "w") as f:
            f.write(src)

        def once(n: int, symbols: list[str]) -> str:
            _stub(stub, symbols)
            where = os.path.join(tmp, f"b{n}")
            os.mkdir(where)
            kw: dict[str, Any] = {"ccflags": []} if "ccflags" in wanted else {}
            here = os.getcwd()
            os.chdir(tmp)  # the source by a relative name: the module records it, and so is the same in every build
            try:
                return tb._build(name, os.path.basename(path), where, [*lib_dirs, stub], inc, libs, **kw)
            finally:
                os.chdir(here)

        symbols = [s for s in _undefined(once(1, [])) if s.startswith("cu")]
        so = once(2, symbols)
        if "libcuda.so.1" not in _needed(so):
            raise RuntimeError("the built module does not need libcuda.so.1")
        with open(so, "rb") as b:
            return b.read()


def _stub(folder: str, symbols: list[str]) -> None:
    """``libcuda.so.1`` (and ``libcuda.so``) in ``folder``: a shared library of that soname defining ``symbols``."""
    c = os.path.join(folder, "stub.c")
    with open(c, "w") as f:
        f.write("void aot_libcuda_stub(void) {}\n" + "".join(f"void {s}(void) {{}}\n" for s in symbols))
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang") or "cc"
    so = os.path.join(folder, "libcuda.so.1")
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", so, c], check=True,
                   capture_output=True)
    link = os.path.join(folder, "libcuda.so")
    if not os.path.lexists(link):
        os.symlink("libcuda.so.1", link)


def _undefined(so: str) -> list[str]:
    out = subprocess.run(["nm", "-D", "--undefined-only", so], check=True, capture_output=True, text=True).stdout
    return sorted({ln.split()[-1].split("@")[0] for ln in out.splitlines() if ln.strip()})


def _needed(so: str) -> list[str]:
    out = subprocess.run(["readelf", "-d", so], check=True, capture_output=True, text=True).stdout
    return [ln.split("[", 1)[1].rstrip("]") for ln in out.splitlines() if "(NEEDED)" in ln and "[" in ln]


def _warn_once(what: str, message: str) -> None:
    if what not in _warned:
        _warned.add(what)
        log.warning("%s", message)
