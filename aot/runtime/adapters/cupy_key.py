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
import re
import threading
from typing import Any, Iterable

#: Bumped when what the key covers changes (older artifacts then miss: CuPy compiles).
KEY_VERSION = 2
_REF = re.compile(rb'#[ \t]*include(_next)?[ \t]*(?:([<"])([^>"\n]+)[>"]|([A-Za-z_]\w*))')
#: ``__has_include(<x>)`` and the macros that wrap it (``_CCCL_HAS_INCLUDE(<x>)``, ``MDSPAN_IMPL_HAS_INCLUDE``).
_HAS = re.compile(rb'\w*has_include(_next)?\w*[ \t]*\([ \t]*([<"])([^>"\n)]+)[>"]', re.IGNORECASE)


def _refs(text: bytes) -> tuple[tuple[tuple[bool, str, str], ...], bool]:
    """(next?, '<' or '"', name) of every include and ``__has_include`` in ``text`` (each once, in order), and
    whether one is computed."""
    seen: dict[tuple[bytes, bytes, bytes], None] = {}
    computed = False
    for m in _REF.finditer(text):
        if m.group(4) is not None:  # a directive only where the line starts with it ("the first #include of")
            start = text.rfind(b"\n", 0, m.start()) + 1
            computed = computed or not text[start:m.start()].strip()
        else:
            seen[m.group(1, 2, 3)] = None  # type: ignore[index]
    if b"has_include" in text or b"HAS_INCLUDE" in text:
        for found in _HAS.findall(text):
            seen[found] = None
    return tuple((bool(nxt), kind.decode(), name.decode("utf-8", "replace").strip())
                 for nxt, kind, name in seen), computed


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


class Headers:
    """The content digest of a source's header closure under given search folders, memoized per process."""

    def __init__(self) -> None:
        self._files: dict[str, tuple[str, tuple, bool]] = {}
        self._closures: dict[Any, str | None] = {}
        self._trees: dict[str, str] = {}
        self._lock = threading.Lock()

    def _file(self, path: str) -> tuple[str, tuple, bool]:
        got = self._files.get(path)
        if got is None:
            with open(path, "rb") as f:
                data = f.read()
            refs, computed = _refs(data)
            got = self._files[path] = (hashlib.sha256(data).hexdigest(), refs, computed)
        return got

    def _tree(self, folder: str) -> str:
        """Every file under ``folder`` (relative path and sha256), for a computed include's possible targets."""
        got = self._trees.get(folder)
        if got is None:
            h = hashlib.sha256()
            if os.path.isdir(folder):
                for root, dirs, files in os.walk(folder):
                    dirs.sort()
                    for name in sorted(files):
                        p = os.path.join(root, name)
                        with open(p, "rb") as f:
                            digest = hashlib.sha256(f.read()).hexdigest()
                        h.update(os.path.relpath(p, folder).encode() + b"\0" + digest.encode())
            else:
                h.update(b"absent")
            got = self._trees[folder] = h.hexdigest()
        return got

    def digest(self, source: str, search: tuple[str, ...]) -> str | None:
        """sha256 of everything ``source`` can include through ``search``; ``None`` where the main source names
        a file by ``"..."`` that exists relative to the working folder (where NVRTC would look: not aot's to key)."""
        refs, computed = _refs(source.encode("utf-8", "surrogatepass"))
        memo = (refs, computed, search)
        with self._lock:
            if memo not in self._closures:
                facts = self._closure(refs, computed, search)
                self._closures[memo] = None if facts is None else _digest(facts, search)
            return self._closures[memo]

    def facts(self, source: str, search: tuple[str, ...]) -> list[str] | None:
        """What :meth:`digest` hashes, one line each (``file {I3}/cupy/carray.cuh <sha256>``, ``absent <x.h> ...``,
        ``tree ...``): to see why a kernel is not found (diff the lines of two installs)."""
        refs, computed = _refs(source.encode("utf-8", "surrogatepass"))
        with self._lock:
            return self._closure(refs, computed, search)

    def _closure(self, refs: tuple, computed: bool, search: tuple[str, ...]) -> list[str] | None:
        if any(k == '"' and os.path.isfile(n) for _, k, n in refs):
            return None
        seen: dict[str, str] = {}  # resolved file -> its label
        facts: set[str] = set()
        resolved: dict[tuple, tuple[str, int] | None] = {}
        todo: list[tuple[tuple, bool, str | None, int]] = [(refs, computed, None, -1)]
        while todo:
            refs, computed, here, found_in = todo.pop()
            if computed:  # #include MACRO: every file of the tree it came from, in every search folder
                top = self._top(here, search)
                for d in search:
                    facts.add(f"tree {label(os.path.join(d, top), search)} {self._tree(os.path.join(d, top))}")
            for nxt, kind, name in refs:
                start = found_in + 1 if nxt else 0
                curdir = os.path.dirname(here) if (kind == '"' and here and not nxt) else None
                rkey = (name, start, curdir)
                if rkey not in resolved:
                    resolved[rkey] = self._resolve(name, start, curdir, search)
                hit = resolved[rkey]
                if hit is None:
                    facts.add(f"absent {kind}{name} from {start} {label(curdir, search) if curdir else ''}")
                    continue
                path, idx = hit
                if path in seen:
                    continue
                digest, sub, sub_computed = self._file(path)
                seen[path] = label(path, search)
                facts.add(f"file {seen[path]} {digest}")
                todo.append((sub, sub_computed, path, idx))
        return sorted(facts)

    @staticmethod
    def _resolve(name: str, start: int, curdir: str | None, search: tuple[str, ...]) -> tuple[str, int] | None:
        fast = not (name.startswith("/") or ".." in name or "./" in name or "//" in name or name.endswith("/"))
        if curdir is not None:
            p = os.path.normpath(os.path.join(curdir, name))
            if os.path.isfile(p):
                return p, next((i for i, d in enumerate(search) if p.startswith(d + os.sep)), -1)
        for i in range(start, len(search)):
            p = f"{search[i]}{os.sep}{name}" if fast else os.path.normpath(os.path.join(search[i], name))
            if os.path.isfile(p):
                return p, i
        return None

    @staticmethod
    def _top(here: str | None, search: tuple[str, ...]) -> str:
        """The first folder of ``here`` below the search folder it lies in (``thrust`` for Thrust's headers)."""
        for d in search:
            if here and here.startswith(d + os.sep):
                return os.path.relpath(here, d).split(os.sep)[0]
        return ""


def _digest(facts: list[str], search: tuple[str, ...]) -> str:
    h = hashlib.sha256(f"aot-cupy-headers-v{KEY_VERSION}\0{len(search)} search folders\0".encode())
    for fact in facts:
        h.update(fact.encode("utf-8", "surrogatepass") + b"\n")
    return h.hexdigest()


def label(path: str, search: tuple[str, ...]) -> str:
    """``path`` written relative to the innermost search folder holding it (``{I3}/cupy/carray.cuh``): where the
    folders lie differs per install, their order and content is what NVRTC sees."""
    best = -1
    for i, d in enumerate(search):
        if (path == d or path.startswith(d + os.sep)) and (best < 0 or len(d) > len(search[best])):
            best = i
    return path if best < 0 else f"{{I{best}}}{path[len(search[best]):]}"


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
