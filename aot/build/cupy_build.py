"""The CuPy family's build side: a ``cupy:`` matrix entry into a spec, and one (kernel, SM) item into the payload
CuPy's own cache would hold, on a driverless host, by driving CuPy's own compiler path.

:func:`compile_cupy_item` calls ``cupy.cuda.compiler._compile_with_cache_cuda`` (what CuPy's generated kernels
go through) with the recorded source and options, this install's paths in place of the placeholders, the SM as
the architecture and CuPy's bundled headers as ``extra_source``, exactly as ``cupy._core.core.compile_with_cache``
passes them (``cache_dir`` too where the release takes one: an empty folder). Around that one call: CuPy's
NVRTC call is wrapped to take its output and stop before CuPy would store it and load it into a device, CuPy's
hash records the ``key_src`` it hashes (from which :func:`aot.runtime.adapters.cupy_attach.key_of` makes the
artifact's ``cupy_key``: the content NVRTC is handed, :mod:`aot.runtime.adapters.cupy_key`), CuPy 14.1+'s cache
backend has nothing, and the one memo that asks the device for its id (``_get_arch_for_options_for_nvrtc``) is
called unmemoized. NVRTC compiles; no driver is needed.

:func:`entries_from_records` turns what ``aot record`` saw CuPy compile (:mod:`aot.record.hook_cupy`) into
``cupy:`` entries and their source files.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..core.cupyspec import check_entry
from ..core.errors import AotError
from ..core.spec import CupyKernel
from ..core.text import MAX_SOURCE_LEN, SpecError
from ..runtime.adapters.cupy_attach import RELEASES, host_paths, installed_version, key_of, substitute
from ..runtime.adapters.cupy_key import Headers

_KERNEL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
                     r"([A-Za-z_]\w*)\s*\(")  # __launch_bounds__ before or after the return type


#: The header closures this worker has hashed (headers do not change during a build).
_HEADERS = Headers()


class _Captured(Exception):
    """Raised by the capturing backend at ``save``: CuPy would load the cubin into a device next."""


def source_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse_cupy(e: Mapping[str, Any], name: str, root: Path) -> CupyKernel:
    """The spec of one ``cupy:`` entry; its source file is read from beside the matrix. The CuPy release must be
    the installed one: the source is what that release generates, and its key is what that release computes."""
    what, src, options, names, jitify, version = check_entry(e)
    path = (root / src) if not Path(src).is_absolute() else Path(src)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise SpecError(f"cannot read {path}: {err.strerror or err}", "source") from None
    if len(raw) > MAX_SOURCE_LEN:
        raise SpecError(f"{path} is over {MAX_SOURCE_LEN} bytes", "source")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{path} is not UTF-8 text", "source") from None
    return CupyKernel(name=name, what=what, source_sha256=source_sha256(text), options=options,
                      name_expressions=names, jitify=jitify, cupy=version, source=text)


def parse_cupy_entry(ctx: Any, e: Mapping[str, Any], name: str, types: Any = None) -> CupyKernel:
    """:func:`parse_cupy` in the shape of the matrix loader's section parsers (``ctx.path``: the matrix)."""
    return parse_cupy(e, name, ctx.path.parent)


def compile_cupy_item(spec: CupyKernel, sm: int) -> tuple[bytes, dict[str, Any]]:
    """One item in a build worker: the payload CuPy's cache would hold for ``spec`` on ``sm_<sm>`` (a cubin, or
    CuPy 14.2's name-expressions payload), and the header fields the loader needs (``cupy_key``, ``cupy_name``).
    Any CuPy release aot meets (:data:`aot.runtime.adapters.cupy_attach.RELEASES`) builds it: the key is the
    content of what this release hands NVRTC, whichever release recorded the entry."""
    if source_sha256(spec.source) != spec.source_sha256:
        raise AotError(f"{spec.name}: the source differs from the one the matrix was read with")
    installed = installed_version()
    fn = RELEASES.get(installed)
    if fn is None:
        raise AotError(f"CuPy {installed} is not one aot builds with ({', '.join(RELEASES)}): install one of them")
    import inspect
    import tempfile
    from cupy._core import core  # CuPy: only when building CuPy kernels
    from cupy.cuda import compiler
    paths = host_paths()
    got: dict[str, Any] = {}
    original_hash, original_compile = compiler._hash_hexdigest, getattr(compiler, fn)
    original_arch = compiler._get_arch_for_options_for_nvrtc
    original_backend = getattr(compiler, "_kernel_cache_backend", None)

    def hash_(value: Any) -> str:
        name = original_hash(value)
        if isinstance(value, bytes) and "key_src" not in got:
            got["key_src"], got["name"] = value, name
        return name

    def compile_(*a: Any, **kw: Any) -> Any:
        got["answer"] = original_compile(*a, **kw)
        raise _Captured  # CuPy would store it in its cache and load it into a device next

    class Nothing:  # CuPy 14.1+: a cache that has nothing and keeps nothing
        def load(self, name: str) -> None:
            return None

        def save(self, *a: Any) -> None:
            return None

    compiler._hash_hexdigest = hash_
    setattr(compiler, fn, compile_)
    compiler._get_arch_for_options_for_nvrtc = getattr(original_arch, "__wrapped__", original_arch)
    names = None if spec.name_expressions is None else list(spec.name_expressions)
    kwargs: dict[str, Any] = {"extra_source": core._get_header_source(), "backend": "nvrtc",
                              "name_expressions": names, "jitify": spec.jitify}
    if original_backend is not None:
        compiler._kernel_cache_backend = Nothing()
    try:
        with tempfile.TemporaryDirectory(prefix="aot-cupy-") as empty:
            if "cache_dir" in inspect.signature(compiler._compile_with_cache_cuda).parameters:
                kwargs["cache_dir"] = empty  # CuPy 13.6/14.0 read their disk cache here: an empty one
            # CuPy's own arch is a string ('90'): it is part of the key
            compiler._compile_with_cache_cuda(spec.source, substitute(spec.options, paths), str(sm), **kwargs)
    except _Captured:
        pass
    finally:
        compiler._hash_hexdigest = original_hash
        setattr(compiler, fn, original_compile)
        compiler._get_arch_for_options_for_nvrtc = original_arch
        if original_backend is not None:
            compiler._kernel_cache_backend = original_backend
    if "answer" not in got:
        raise AotError(f"{spec.name}: CuPy's compiler returned without compiling")
    cubin, mapping = got["answer"]
    payload = _payload(compiler, cubin, mapping, spec)
    key = key_of(got["key_src"], compiler, _HEADERS)
    if key is None:
        raise AotError(f"{spec.name}: aot cannot key this compile (an include path it cannot read, or a source "
                       f"naming a file in the working folder)")
    return payload, {"cupy_key": key, "cupy_name": got["name"] + ".cubin", "cupy_stack": stack()}


def stack() -> dict[str, str]:
    """The stack this build ran under, as the manifest records it (``cupy_stacks``: which releases an entry was
    built under; what it serves is decided by its key, not by these): CuPy, NVRTC and the CUDA header packages."""
    from ..core.versions import dist_version
    return {"cupy": installed_version(), "nvrtc": dist_version("nvidia-cuda-nvrtc"),
            "cuda_runtime": dist_version("nvidia-cuda-runtime"), "cuda_crt": dist_version("nvidia-cuda-crt")}


def _payload(compiler: Any, cubin: Any, mapping: Any, spec: CupyKernel) -> bytes:
    """What aot ships: the cubin, or for name expressions CuPy 14.2's payload (the mangled names ahead of it),
    which aot decodes into NVRTC's mapping at the call (no other release can use such a kernel)."""
    data = bytes(cubin)
    if not spec.name_expressions:
        return data
    encode = getattr(compiler, "_encode_cache_payload", None)
    if encode is None:
        raise AotError(f"{spec.name}: name expressions are served only with CuPy 14.2's cache payload format")
    return encode([mapping[n] for n in sorted(spec.name_expressions)], data)


# ---------------------------------------------------------------------------------------------- recording
def normalize_options(options: Iterable[str], paths: Mapping[str, str]) -> list[str]:
    """Recorded options with this install's paths written as placeholders (the inverse of ``substitute``)."""
    out = []
    for opt in options:
        for ph, path in sorted(paths.items(), key=lambda kv: -len(kv[1])):
            if path:
                opt = opt.replace(path, ph)
        out.append(opt)
    return out


def entries_from_records(records: Iterable[Mapping[str, Any]], folder: str = "cupy-kernels"
                         ) -> tuple[list[dict[str, Any]], dict[str, str], list[str]]:
    """``cupy:`` entries of the ``cupy-compile`` records (one per distinct compile, in the order seen), the
    source files they name (relative path -> text, under ``folder``) and what could not be made an entry."""
    entries: list[dict[str, Any]] = []
    files: dict[str, str] = {}
    unnamed: list[str] = []
    seen: set[tuple] = set()
    taken: dict[str, int] = {}
    for rec in records:
        if rec.get("kind") != "cupy-compile":
            continue
        where = ", ".join(rec.get("site") or []) or "outside the recorded packages"
        if rec.get("backend") != "nvrtc" or rec.get("to_ltoir"):
            unnamed.append(f"a CuPy compile with backend {rec.get('backend')!r} at {where}: aot builds NVRTC's")
            continue
        source, options = rec.get("source"), rec.get("options") or []
        if not isinstance(source, str):
            unnamed.append(f"a CuPy compile at {where}: its source was not recorded ({rec.get('why', '')})")
            continue
        names = rec.get("name_expressions")
        ident = (source, tuple(options), tuple(names) if names else None, bool(rec.get("jitify")))
        if ident in seen:
            continue
        seen.add(ident)
        kernels = _KERNEL.findall(source)
        base = (kernels[0] if kernels else "cupy_kernel")[:64]
        m = _KERNEL.search(source)
        params = " ".join(source[m.end():source.find(")", m.end())].split()) if m else ""
        n = taken.get(base, 0)
        taken[base] = n + 1
        name = f"{base}.{n}"
        rel = f"{folder}/{name}.cu"
        files[rel] = source
        entries.append({"name": name, "what": f"{base}({params[:300]}) from {where}"[:512],
                        "source": rel, "options": list(options), "name_expressions": names,
                        "jitify": bool(rec.get("jitify")), "cupy": rec.get("cupy")})
    return entries, files, unnamed


def render_entries(entries: list[dict[str, Any]]) -> str:
    """The ``cupy:`` section's YAML text (JSON scalars: YAML reads them unchanged)."""
    import json
    lines = ["cupy:"]
    for e in entries:
        lines.append(f"  - name: {json.dumps(e['name'])}")
        for k in ("what", "source", "options", "name_expressions", "jitify", "cupy"):
            lines.append(f"    {k}: {json.dumps(e[k])}")
    return "\n".join(lines) + "\n"


def write_recorded(records: Iterable[Mapping[str, Any]], matrix: Path) -> list[str]:
    """Write the matrix of recorded CuPy compiles (``version: 1`` + ``cupy:``) and its source files beside it;
    returns what could not be named. Used where ``aot record``'s matrix writer has no CuPy section."""
    from ..core.fs import atomic_write
    entries, files, unnamed = entries_from_records(records)
    if not entries:
        raise AotError("no CuPy compile was recorded")
    for rel, text in files.items():
        atomic_write(matrix.parent / rel, text.encode("utf-8"))
    atomic_write(matrix, ("version: 1\n" + render_entries(entries)).encode("utf-8"))
    return unnamed
