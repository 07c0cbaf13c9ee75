"""What an NVRTC manifest entry records so a library finds it from its own compile call (issue 28).

Two keys per entry, both computed here, at build time, and read by the runtime as plain dict keys:

* ``source_key``: :func:`aot.core.srckey.source_key` of the unit's rendered text and options, for a library
  that compiles through raw NVRTC or CuPy (:mod:`aot.runtime.adapters.bysource`).
* ``progkey`` (hex) and ``progkey_nvrtc`` (``"13.0"``): cuda.core's own ``make_program_cache_key`` for the
  compile the library would run, ``Program(source, "c++", ProgramOptions(arch=..., **options))
  .compile(kind)``, with this host's NVRTC (the key covers the NVRTC major.minor that its probe reports).
  :func:`aot.program_cache` then serves the packaged image as that compile's cache hit.

A unit gets no ``progkey`` when cuda.core's ``Program.compile(cache=...)`` could not hit it anyway, or
when the packaged bytes would not be the bytes that compile makes: name expressions (templates: cuda.core
refuses ``cache=`` with them), headers (an include path: cuda.core refuses a key without ``extra_digest``),
``lineinfo``/``debug`` (the line table names ``<unit>.cu``, the library's compile names its own program).
Without those, aot's recipe (program name ``<unit>.cu``, cuda-cccl's include path) gives the bytes of the
library's plain compile; ``tests/test_bysource.py`` checks that on this host's NVRTC.

And, for a unit whose source ``#include``s anything, ``header_digest``: the content of every header the source
can reach through the include path this build's NVRTC used (the unit's headers, then cuda-cccl's folders), so
the runtime serves it only where the user's headers are the same (:mod:`aot.runtime.adapters.hdrkey`). A
unit that includes nothing gets none and pays nothing.
"""

from __future__ import annotations

from typing import Any

from ..core.log import get_logger
from ..core.spec import NvrtcUnit
from ..core.srckey import source_key
from ..runtime.adapters.hdrkey import FIELD, cccl_dirs, header_digest, search_path
from ..runtime.adapters.progkey import eligible, nvrtc_version, program_cache_key
from .isolated import expose_build_env_toolkit

log = get_logger("aot.build.progkeys")


def entry_fields(unit: NvrtcUnit, sm: int, kind: str) -> dict[str, Any]:
    """The fields one NVRTC manifest entry gains: ``source_key`` always, ``progkey``/``progkey_nvrtc`` when
    the unit is :func:`eligible` and this host's NVRTC answers."""
    out: dict[str, Any] = {"source_key": source_key(unit.source, unit.options)}
    digest = unit_header_digest(unit)
    if digest is not None:
        out[FIELD] = digest
    if not eligible(unit):
        return out
    expose_build_env_toolkit()  # the process that writes the manifest must find the NVRTC the workers used
    version = nvrtc_version()
    if version is None:
        log.debug("%s: no NVRTC to key the program cache with; no progkey", unit.name)
        return out
    try:
        key = program_cache_key(unit, sm, kind)
    except (ValueError, TypeError, ImportError) as e:  # cuda.core refuses to key this compile, or has no
        # program cache at all (cuda-core < 0.6, as cuda-cccl 0.6 brings): no program-cache hit
        log.debug("%s: cuda.core gives no program-cache key: %s", unit.name, e)
        return out
    out.update(progkey=key.hex(), progkey_nvrtc=version)
    return out


#: Unit content key -> its header digest (a unit has several entries: one closure per unit and build).
_DIGESTS: dict[str, str | None] = {}


def unit_header_digest(unit: NvrtcUnit) -> str | None:
    """The digest of the headers ``unit``'s source reaches through the include path its compile used
    (:func:`aot.build.compile.program_options`: its headers' folder, then cuda-cccl's); ``None`` where it
    includes nothing."""
    key = unit.content_key()
    if key not in _DIGESTS:
        from .compile import headers_dir
        with headers_dir(unit) as hdr:
            _DIGESTS[key] = header_digest(unit.source, search_path([hdr] if hdr else [], cccl_dirs()))
    return _DIGESTS[key]
