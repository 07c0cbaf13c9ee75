"""Whether an NVRTC unit's headers, as the user's install has them, are the ones its packaged image was built from.

A unit's lookup keys (:func:`aot.core.srckey.source_key`, cuda.core's program-cache key) cover its source text
and options, not the headers the source ``#include``s: CUDA's ``cuda_fp16.h``, cuda-cccl's ``cuda/std/...``,
the library's own ``include_dirs``. Where the user's install has other text there, the packaged cubin is not
what the user's NVRTC compiles (issue 46; the CuPy analog wrote 3.30078125 where CuPy's own compile wrote
3.298828125). So the build records, per NVRTC entry whose source includes anything, ``header_digest``: the
content digest (:class:`aot.core.headerclosure.Headers`) of every header the source can reach through the
include path the build's NVRTC used (the unit's ``include_dirs``, then cuda-cccl's ``libcudacxx`` and CUDA
folders). At run time the first request of such a unit computes the same digest over the user's files (the
caller's ``-I`` folders, then cuda-cccl's folders where it is installed, else the CUDA toolkit's include
folder), once per process per source and include path, and the unit is served only if the two are equal;
else one line at info level and the library's compile runs (JIT). A source that includes nothing is not
scanned for headers and hashes nothing.

Files are named by their path inside the folder they resolved in (``cuda/std/cstdint``, ``mylib/ops.h``),
not by the folder's place in the search: the build searched one folder holding the unit's headers where
the library passes its own ``-I`` folders, and what NVRTC reads is which file each name resolves to and its
text. A name that resolved nowhere is a fact too (a file appearing there later changes the digest).
"""

from __future__ import annotations

import functools
import os
from typing import Any, Iterable, Mapping

from ...core.headerclosure import Headers, includes_anything
from ...core.keyschemas import SCHEMAS, mismatch
from ...core.log import get_logger

log = get_logger(__name__)

#: Bumped (in :data:`aot.core.keyschemas.SCHEMAS`) when what the digest covers changes: older entries then
#: mismatch, said from the manifest's ``key_schemas``; the unit JITs.
HEADER_KEY_VERSION = SCHEMAS["nvrtc_headers"]
#: The manifest entry field the build writes (:mod:`aot.build.progkeys`).
FIELD = "header_digest"


class UnitHeaders(Headers):
    """Header closures of NVRTC units, each file named by its path inside the folder it resolved in."""

    def label(self, path: str, search: tuple[str, ...]) -> str:
        best = ""
        for d in search:
            if (path == d or path.startswith(d + os.sep)) and len(d) > len(best):
                best = d
        if not best:
            return path  # outside every folder: its full path (another install's never matches: JIT)
        return path[len(best) + 1:].replace(os.sep, "/")

    def head(self, search: tuple[str, ...]) -> str:
        return f"{self.salt}\0"


#: One per process: every file hashed once, every closure computed once per search path.
HEADERS = UnitHeaders(f"aot-nvrtc-headers-v{HEADER_KEY_VERSION}")


@functools.lru_cache(maxsize=1)
def cccl_dirs() -> tuple[str, ...]:
    """cuda-cccl's ``libcudacxx`` and CUDA header folders (``cub/``, ``cuda/std/``, ``thrust/``): on every NVRTC
    unit's include path, the build's (:func:`aot.build.compile.program_options`) and the caller's alike, so one
    function says them for both. Empty where cuda-cccl is not installed (a unit that includes them then fails to
    compile, naming the header)."""
    try:
        from cuda.cccl.headers import get_include_paths
        paths = get_include_paths()
    except Exception:  # noqa: BLE001 - no cuda-cccl: the toolkit's folder instead
        return ()
    out: list[str] = []
    for p in (paths.libcudacxx, paths.cuda):
        if p is not None and str(p) not in out:
            out.append(str(p))
    return tuple(out)


@functools.lru_cache(maxsize=1)
def system_dirs() -> tuple[str, ...]:
    """The folders after the caller's ``-I`` ones: cuda-cccl's where installed, else the CUDA toolkit's
    include folder (``cuda_runtime.h``'s, found by cuda-pathfinder), else none."""
    found = cccl_dirs()
    if found:
        return found
    try:
        from cuda.pathfinder import find_nvidia_header_directory
        where = find_nvidia_header_directory("cudart")
    except Exception:  # noqa: BLE001 - no pathfinder, or it cannot look: the caller's folders only
        where = None
    return (where,) if where else ()


def search_path(include_dirs: Iterable[str], system: Iterable[str] | None = None) -> tuple[str, ...]:
    """The folders NVRTC searches, in order: ``include_dirs`` then ``system`` (default :func:`system_dirs`),
    each once, normalised."""
    out: list[str] = []
    for d in (*include_dirs, *(system_dirs() if system is None else system)):
        d = os.path.normpath(os.fspath(d))
        if d not in out:
            out.append(d)
    return tuple(out)


def header_digest(source: str, search: tuple[str, ...]) -> str | None:
    """The digest of what ``source`` can include through ``search``; ``None`` where it includes nothing, or
    names a ``"..."`` file that exists relative to the working folder (not aot's to key)."""
    if not includes_anything(source):
        return None
    return HEADERS.digest(source, search)


def headers_match(entries: Iterable[Mapping[str, Any]], name: str, source: str,
                  include_dirs: Iterable[str], schemas: Mapping[str, int] | None = None) -> bool:
    """Whether unit ``name`` (its ``source``) may be served to a caller compiling with ``include_dirs``: it
    includes nothing, or the first of its ``entries`` records the digest of the caller's headers. Said once
    per call (the caller memoises per source and options) at info level where not; ``schemas``: the
    manifest's ``key_schemas`` (a set whose digests another schema made is said as such)."""
    if not includes_anything(source):
        return True
    stale = mismatch(schemas, "nvrtc")
    if stale:
        log.info("aot: unit %s includes headers and was %s; compiling it", name, stale)
        return False
    recorded = next((e.get(FIELD) for e in entries if e.get("name") == name), None)
    if not isinstance(recorded, str):
        log.info("aot: unit %s includes headers and its manifest entry records no %s (an older build): "
                 "compiling it (rebuild the set to serve it)", name, FIELD)
        return False
    search = search_path(include_dirs)
    here = HEADERS.digest(source, search)
    if here != recorded:
        log.info("aot: unit %s: the headers it includes differ from the build's in this install (searched "
                 "%s): compiling it", name, ", ".join(search) or "no folder")
        return False
    return True
