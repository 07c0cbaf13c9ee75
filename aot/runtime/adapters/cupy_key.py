"""aot's key of one CuPy compile: what CuPy hands NVRTC, by content (issues 40, 41).

CuPy's own key (``key_src``, :mod:`aot.runtime.adapters.cupy_attach`) names NVRTC's version and build, CuPy's
release checksum and the install's paths, and names the CUDA headers by their path only. aot's key is the input
NVRTC compiles, nothing standing in for it:

* the architecture and target CuPy asks for (``'90'``, ``-arch=sm_90``, ``cubin``), the options CuPy passes
  (``-ftz=true`` and what ``CUPY_*`` variables add included) with the install's paths as placeholders, the
  backend, the generated source, and CuPy's name-expressions tail (its payload format);
* the text of every header that source can reach (:class:`Headers`): the ``#include``/``__has_include`` closure
  resolved through the compile's own ``-I`` folders in order, each file's sha256 and where it resolved, and
  every name that resolved nowhere (a file appearing there later changes the key).

Left out, and why: NVRTC's version and build (its banner). aot serves the cubin its build's NVRTC made from
this input, as it serves NVRTC units (:func:`aot.core.srckey.source_key` has no compiler version either; the
program-cache adapter re-derives cuda.core's key for the user's NVRTC and serves the build's bytes); another
NVRTC compiling the same input makes another valid cubin of the same program. CuPy's release and
``CUPY_CACHE_KEY``: what a release changes reaches NVRTC only through the source, the options and CuPy's headers,
all keyed by content. ``extra_source`` (CuPy's header text, for its own key): the closure covers the headers read.

The closure is an over-approximation (every include line, whatever ``#if`` guards it, comments too): it can
only name more files than NVRTC reads. A computed include (``#include MACRO``, six in Thrust) hashes the whole
folder tree its file came from (``<dir>/thrust``) in every search folder. Headers are hashed lazily, once per
process (memo per file and per closure), on the first compile CuPy's cache cannot answer.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Iterable

from ...core.headerclosure import Headers as _Headers
from ...core.headerclosure import label  # noqa: F401 - named here since issue 40
from ...core.keyschemas import SCHEMAS

#: Bumped (in :data:`aot.core.keyschemas.SCHEMAS`) when what the key covers changes: older artifacts then miss,
#: said once at attach from the manifest's ``key_schemas``; CuPy compiles.
KEY_VERSION = SCHEMAS["cupy_key"]


def include_dirs(options: Iterable[str]) -> tuple[str, ...] | None:
    """The ``-I`` folders of CuPy's options, in order; ``None`` where one is not spelled ``-I<dir>`` or
    ``--include-path=<dir>`` (aot does not guess: no key, CuPy compiles)."""
    out = []
    for opt in options:
        if opt in ("-I", "--include-path"):
            return None
        if opt.startswith("-I"):
            out.append(os.path.normpath(opt[2:]))
        elif opt.startswith("--include-path="):
            out.append(os.path.normpath(opt[len("--include-path="):]))
    return tuple(out)


class Headers(_Headers):
    """The content digest of a CuPy source's header closure (:class:`aot.core.headerclosure.Headers`), files
    named by the index of the search folder they lie in, memoized per process."""

    def __init__(self) -> None:
        super().__init__(f"aot-cupy-headers-v{KEY_VERSION}")


def label_option(opt: str, search: tuple[str, ...]) -> str:
    """An option with the search folders written as ``{I<n>}`` (longest first)."""
    for i in sorted(range(len(search)), key=lambda i: -len(search[i])):
        opt = opt.replace(search[i], f"{{I{i}}}")
    return opt


def split_key_src(key_src: bytes, compiler: Any, extra_sources: Iterable[str]) -> tuple[tuple, str, str] | None:
    """CuPy's ``key_src`` as (``env``, source, name-expressions tail). ``key_src`` is ``"%s %s %s %s %s" % (env,
    base, source, extra_source, cache_key)`` plus the tail (``cupy.cuda.compiler._compile_with_cache_cuda``);
    ``env`` and ``base`` are found in CuPy's memo of them, ``extra_source`` among ``extra_sources``. ``None``
    where it is not that shape (then no key: CuPy compiles)."""
    text = key_src.decode("utf-8", "surrogateescape")
    rest = None
    for env, base in list(compiler._empty_file_preprocess_cache.items()):
        head = f"{env} {base} "
        if text.startswith(head):
            rest = text[len(head):]
            break
    if rest is None:
        return None
    mark = f" {compiler._get_cupy_cache_key()}"
    cut = rest.rfind(mark)
    if cut < 0:
        return None
    middle, tail = rest[:cut], rest[cut + len(mark):]
    if tail and not tail.startswith(" ne"):
        return None
    for extra in extra_sources:
        if middle.endswith(f" {extra}"):
            return env, middle[:-len(extra) - 1], tail
    return None


def _first_of_each_folder(options: Iterable[str]) -> tuple[str, ...]:
    """The options without a repeated ``-I`` of a folder already searched (CuPy 13.6 and 14.0 add the CUDA headers'
    folder a second time): a folder searched again finds nothing the first time did not (a compiler searches a
    repeated folder once). The same folder is the same however spelled: in a venv reached through a symlink,
    cuda-pathfinder names the CUDA headers' folder resolved and CuPy 13.6 names it again through the link (every
    kernel missed there before)."""
    seen, out = set(), []
    for opt in options:
        if opt.startswith("-I") and len(opt) > 2:
            folder = os.path.realpath(opt[2:])
            if folder in seen:
                continue
            seen.add(folder)
        out.append(opt)
    return tuple(out)


def content_key(env: tuple, source: str, tail: str, headers: Headers) -> str | None:
    """aot's key of one CuPy compile (see the module's docstring); ``None`` where it cannot be computed."""
    try:
        arch, options, _nvrtc, backend, *target = env
    except ValueError:
        return None
    options = _first_of_each_folder(options)
    search = include_dirs(options)
    if search is None:
        return None
    digest = headers.digest(source, search)
    if digest is None:
        return None
    h = hashlib.sha256(f"aot-cupy-key-v{KEY_VERSION}\0".encode())
    for field, value in (("arch", str(arch)), ("options", json.dumps([label_option(o, search) for o in options])),
                         ("backend", str(backend)), ("target", json.dumps([str(t) for t in target])),
                         ("source", source), ("tail", tail), ("headers", digest)):
        data = value.encode("utf-8", "surrogatepass")
        h.update(field.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()
