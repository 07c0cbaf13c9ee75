"""The CuPy half of ``aot record``'s hook (:mod:`aot.record.hook`, loaded by path beside it, stdlib only):
every compile CuPy's compiler is handed, as data.

``cupy.cuda.compiler._compile_module_with_cache`` is where every kernel CuPy generates (ufuncs, reductions with
or without CUB, ``ElementwiseKernel``, ``ReductionKernel``, ``RawModule``/``RawKernel``) arrives with its final
source and options (``cupy._core.core.compile_with_cache`` looks the function up on the module at each call, so
replacing the module's attribute sees them all). Each call writes one ``cupy-compile`` record (the source, the
options with this install's paths as placeholders, name expressions, backend, jitify, the CuPy release, the
library's frames on the stack, the source's sha1) and then calls CuPy's function unchanged.
:func:`aot.build.cupy_build.entries_from_records` turns the records into ``cupy:`` entries. A ``RawModule``/
``RawKernel`` is also seen when constructed (:mod:`aot.record.hook`, as an NVRTC compile: on a host without a GPU
CuPy never compiles it); where this hook saw its compile too, the matrix keeps this one (:func:`aot.record.record.
matrix_of`): CuPy's compile call is where aot serves it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sys
from typing import Any, Callable

#: The modules whose import installs the patch (see ``hook.FAMILY_HOOKS``).
TARGETS = ("cupy.cuda.compiler",)
#: Longest source a record carries (a record line is at most 64 KiB: hook.MAX_LINE); a longer one is
#: recorded without its text, by its kernels' names, and listed as not named.
MAX_SOURCE = 56 * 1024
_KERNEL = re.compile(r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
                     r"([A-Za-z_]\w*)\s*\(")  # __launch_bounds__ before or after the return type


def _paths() -> dict[str, str]:
    """This install's paths in CuPy's options (as :func:`aot.runtime.adapters.cupy_attach.host_paths`, without aot)."""
    out = {}
    try:
        core = sys.modules.get("cupy._core.core")
        if core is not None:
            out["{cupy_include}"] = str(core._get_header_dir_path())
        from cuda.pathfinder import find_nvidia_header_directory
        out["{cuda_include}"] = str(find_nvidia_header_directory("cudart") or "")
    except Exception:  # noqa: BLE001 - an unknown path stays written out; the entry is then install-specific
        pass
    return out


def _normalize(options: Any, paths: dict[str, str]) -> list[str]:
    out = []
    for opt in options or ():
        opt = str(opt)
        for ph, path in sorted(paths.items(), key=lambda kv: -len(kv[1])):
            if path:
                opt = opt.replace(path, ph)
        out.append(opt)
    return out


def _version() -> str:
    from importlib import metadata
    for dist in ("cupy-cuda13x", "cupy-cuda12x", "cupy"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "missing"


def patch(name: str, mod: Any, api: Any) -> None:
    """The family hook's entry (``hook.API``): wrap ``mod._compile_module_with_cache``."""
    patch_compiler(mod, api.write, api.sites, api.quiet, api.busy)


def patch_compiler(mod: Any, write: Callable, sites: Callable, quiet: Any, busy: Callable) -> None:
    """Wrap ``mod._compile_module_with_cache`` (``mod``: ``cupy.cuda.compiler``) to record each call."""
    original = getattr(mod, "_compile_module_with_cache", None)
    if original is None or getattr(original, "_aot_recorded", False):
        return

    @functools.wraps(original)
    def _compile_module_with_cache(source, options=(), *args, **kwargs):  # noqa: ANN001
        if not busy():
            try:
                with quiet():
                    write(describe(source, options, kwargs, sites()))
            except Exception as e:  # noqa: BLE001 - recording never changes the command's result
                write({"kind": "skipped", "why": f"recording a CuPy compile failed: {type(e).__name__}: {e}"[:300]})
        return original(source, options, *args, **kwargs)

    _compile_module_with_cache._aot_recorded = True  # type: ignore[attr-defined]
    mod._compile_module_with_cache = _compile_module_with_cache


def describe(source: Any, options: Any, kwargs: dict, site: list[str]) -> dict[str, Any]:
    """One ``cupy-compile`` record of ``_compile_module_with_cache(source, options, **kwargs)``."""
    names = kwargs.get("name_expressions")
    rec: dict[str, Any] = {"kind": "cupy-compile", "site": site, "cupy": _version(), "pid": os.getpid(),
                           "options": _normalize(options, _paths()), "backend": kwargs.get("backend", "nvrtc"),
                           "jitify": bool(kwargs.get("jitify", False)), "to_ltoir": bool(kwargs.get("to_ltoir")),
                           "name_expressions": [str(n) for n in names] if names else None,
                           "arch": None if kwargs.get("arch") is None else str(kwargs.get("arch"))}
    if isinstance(source, str):  # as hook.record_nvrtc names a text: a RawModule's construction record is this one's
        rec["sha1"] = hashlib.sha1(source.encode("utf-8", "surrogatepass")).hexdigest()
    if isinstance(source, str) and len(source) <= MAX_SOURCE:
        rec["source"] = source
    elif isinstance(source, str):
        rec["why"] = (f"a source of {len(source)} bytes ({', '.join(_KERNEL.findall(source)[:4]) or 'no kernel'}) is "
                      f"over the records' limit of {MAX_SOURCE}")
    else:
        rec["why"] = f"source is a {type(source).__name__}"
    return rec
