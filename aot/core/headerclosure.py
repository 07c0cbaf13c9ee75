"""The content of every header a source can reach through a search path, as one digest (issues 40, 41, 46).

A compiler reads, besides the source, every header the source names (``#include``, ``#include_next``,
``__has_include``), found in the ``-I`` folders in order, and the headers those name. The text a user's
install has there is what their compile reads, so a key that says "same cubin" must cover that text, not a
release number standing in for it. :class:`Headers` computes it: the closure resolved as a preprocessor
resolves it, each file's sha256 and where it resolved, and every name that resolved nowhere (a file
appearing there later changes the digest). Shared by CuPy's key (:mod:`aot.runtime.adapters.cupy_key`) and
the NVRTC units' header check (:mod:`aot.runtime.adapters.hdrkey`), which differ only in how a resolved
file is labelled (:meth:`Headers.label`).

The closure is an over-approximation (every include line, whatever ``#if`` guards it, comments too): it can
only name more files than the compiler reads. A computed include (``#include MACRO``, six in Thrust) hashes
the whole folder tree its file came from (``<dir>/thrust``) in every search folder. Files are hashed lazily,
once per process (memo per file and per closure). Pure Python: no CUDA import.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from typing import Any

_REF = re.compile(rb'#[ \t]*include(_next)?[ \t]*(?:([<"])([^>"\n]+)[>"]|([A-Za-z_]\w*))')
#: ``__has_include(<x>)`` and the macros that wrap it (``_CCCL_HAS_INCLUDE(<x>)``, ``MDSPAN_IMPL_HAS_INCLUDE``).
_HAS = re.compile(rb'\w*has_include(_next)?\w*[ \t]*\([ \t]*([<"])([^>"\n)]+)[>"]', re.IGNORECASE)


def refs(text: bytes) -> tuple[tuple[tuple[bool, str, str], ...], bool]:
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


def includes_anything(source: str) -> bool:
    """Whether ``source`` names any header (a cheap substring test first: a source without ``include``
    is never scanned)."""
    if "include" not in source:
        return False
    found, computed = refs(source.encode("utf-8", "surrogatepass"))
    return bool(found) or computed


def label(path: str, search: tuple[str, ...]) -> str:
    """``path`` written relative to the innermost search folder holding it (``{I3}/cupy/carray.cuh``): where the
    folders lie differs per install, their order and content is what NVRTC sees."""
    best = -1
    for i, d in enumerate(search):
        if (path == d or path.startswith(d + os.sep)) and (best < 0 or len(d) > len(search[best])):
            best = i
    return path if best < 0 else f"{{I{best}}}{path[len(search[best]):]}"


class Headers:
    """The content digest of a source's header closure under given search folders, memoized per process.

    ``salt`` starts every digest (a key version: bumped, every digest changes)."""

    def __init__(self, salt: str = "aot-headers") -> None:
        self.salt = salt
        self._files: dict[str, tuple[str, tuple, bool]] = {}
        self._closures: dict[Any, str | None] = {}
        self._trees: dict[str, str] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ how facts are written
    def label(self, path: str, search: tuple[str, ...]) -> str:
        """How a resolved file (or folder) is named in a fact: by the search folder it lies in."""
        return label(path, search)

    def start_label(self, start: int) -> str:
        """How the first folder an ``#include_next`` searches is named in an absent name's fact."""
        return str(start)

    def head(self, search: tuple[str, ...]) -> str:
        """What precedes the facts in the digest."""
        return f"{self.salt}\0{len(search)} search folders\0"

    # ------------------------------------------------------------------ the closure
    def _file(self, path: str) -> tuple[str, tuple, bool]:
        got = self._files.get(path)
        if got is None:
            with open(path, "rb") as f:
                data = f.read()
            found, computed = refs(data)
            got = self._files[path] = (hashlib.sha256(data).hexdigest(), found, computed)
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
        found, computed = refs(source.encode("utf-8", "surrogatepass"))
        memo = (found, computed, search)
        with self._lock:
            if memo not in self._closures:
                facts = self._closure(found, computed, search)
                self._closures[memo] = None if facts is None else self._digest(facts, search)
            return self._closures[memo]

    def facts(self, source: str, search: tuple[str, ...]) -> list[str] | None:
        """What :meth:`digest` hashes, one line each (``file {I3}/cupy/carray.cuh <sha256>``, ``absent <x.h> ...``,
        ``tree ...``): to see why a kernel is not found (diff the lines of two installs)."""
        found, computed = refs(source.encode("utf-8", "surrogatepass"))
        with self._lock:
            return self._closure(found, computed, search)

    def _digest(self, facts: list[str], search: tuple[str, ...]) -> str:
        h = hashlib.sha256(self.head(search).encode())
        for fact in facts:
            h.update(fact.encode("utf-8", "surrogatepass") + b"\n")
        return h.hexdigest()

    def _closure(self, found: tuple, computed: bool, search: tuple[str, ...]) -> list[str] | None:
        if any(k == '"' and os.path.isfile(n) for _, k, n in found):
            return None
        seen: dict[str, str] = {}  # resolved file -> its label
        facts: set[str] = set()
        resolved: dict[tuple, tuple[str, int] | None] = {}
        todo: list[tuple[tuple, bool, str | None, int]] = [(found, computed, None, -1)]
        while todo:
            found, computed, here, found_in = todo.pop()
            if computed:  # #include MACRO: every file of the tree it came from, in every search folder
                top = self._top(here, search)
                for d in search:
                    where = os.path.join(d, top)
                    facts.add(f"tree {self.label(where, search)} {self._tree(where)}")
            for nxt, kind, name in found:
                start = found_in + 1 if nxt else 0
                curdir = os.path.dirname(here) if (kind == '"' and here and not nxt) else None
                rkey = (name, start, curdir)
                if rkey not in resolved:
                    resolved[rkey] = self._resolve(name, start, curdir, search)
                hit = resolved[rkey]
                if hit is None:
                    facts.add(f"absent {kind}{name} from {self.start_label(start)} "
                              f"{self.label(curdir, search) if curdir else ''}")
                    continue
                path, idx = hit
                if path in seen:
                    continue
                digest, sub, sub_computed = self._file(path)
                seen[path] = self.label(path, search)
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
