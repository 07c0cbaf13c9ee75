"""The header files an NVRTC unit's ``include_dirs`` bring in: inside the matrix folder, bounded, no links.

Their text goes into the unit's definition, and so into ``manifest.json``, which ships in wheels. So an
include dir must stay inside the folder of the matrix that names it: it is resolved (every symlink on
the way) and refused when its real path leaves that folder (``inc -> ../private``, ``inc -> /``). Below it
the walk follows no symlink (a link is neither read nor descended), uses an explicit stack (a 1,000-level
nest is one error line, not a ``RecursionError``), and stops at the first bound it crosses: entries seen,
depth, header count. It never lists a whole tree before counting, so a huge tree costs at most
:data:`MAX_ENTRIES` directory entries.
"""

from __future__ import annotations

import os
import stat
from collections import OrderedDict
from pathlib import Path

from ..core.text import MAX_HEADERS, short

#: Deepest folder below an include dir that is searched for headers (real include trees use 3-5).
MAX_DEPTH = 32
#: Most directory entries (files, folders, anything) looked at under one matrix's include dir.
MAX_ENTRIES = 20_000


class IncludeError(ValueError):
    """An include dir that leaves the matrix folder, is not a folder, or crosses a bound."""


def resolve_inside(matrix_dir: Path, rel: str, what: str) -> Path:
    """The real path of ``rel`` (relative to ``matrix_dir``, every symlink on the way resolved), once it is
    inside the real path of ``matrix_dir``; ``what`` names it in the error. Raises :class:`IncludeError`."""
    base = Path(os.path.realpath(matrix_dir))
    try:
        root = Path(os.path.realpath(matrix_dir / rel))
    except (OSError, ValueError) as e:  # a symlink loop, an unusable name
        raise IncludeError(f"{what} {short(rel)} cannot be resolved ({e})") from None
    if root != base and base not in root.parents:
        raise IncludeError(f"{what} {short(rel)} leaves the matrix folder (it resolves to "
                           f"{short(str(root))}, outside {short(str(base))})")
    return root


def resolve_include_dir(matrix_dir: Path, rel: str) -> Path:
    """The real path of include dir ``rel`` (relative to ``matrix_dir``), once it is inside the real path of
    ``matrix_dir`` and is a directory. Raises :class:`IncludeError`."""
    root = resolve_inside(matrix_dir, rel, "include dir")
    try:
        is_dir = stat.S_ISDIR(os.stat(root).st_mode)
    except OSError:
        is_dir = False
    if not is_dir:
        raise IncludeError(f"include dir {short(rel)} is not a directory ({short(str(root))})")
    return root


def header_files(matrix_dir: Path, rel: str, suffixes: tuple[str, ...], *, max_headers: int = MAX_HEADERS,
                 max_depth: int = MAX_DEPTH, max_entries: int = MAX_ENTRIES) -> list[tuple[str, Path]]:
    """``(path relative to the include dir, path)`` of every regular file named ``*<suffix>`` under include
    dir ``rel``, sorted by relative path; symlinks are skipped, never followed. Raises :class:`IncludeError`
    when the dir leaves the matrix folder or a bound is crossed."""
    root = resolve_include_dir(matrix_dir, rel)
    found: list[tuple[tuple[str, ...], Path]] = []
    stack: list[tuple[Path, tuple[str, ...]]] = [(root, ())]
    seen = 0
    while stack:
        folder, parts = stack.pop()
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    seen += 1
                    if seen > max_entries:
                        raise IncludeError(f"include dir {short(rel)} holds more than {max_entries} entries; "
                                           f"name a smaller folder")
                    if entry.is_dir(follow_symlinks=False):
                        if len(parts) + 1 > max_depth:
                            raise IncludeError(f"include dir {short(rel)} is nested deeper than {max_depth} "
                                               f"levels (at {short('/'.join(parts + (entry.name,)))})")
                        stack.append((Path(entry.path), parts + (entry.name,)))
                    elif os.path.splitext(entry.name)[1] in suffixes and entry.is_file(follow_symlinks=False):
                        found.append((parts + (entry.name,), Path(entry.path)))
                        if len(found) > max_headers:
                            raise IncludeError(f"more than {max_headers} headers under include_dirs")
        except OSError as e:
            raise IncludeError(f"include dir {short(rel)}: cannot list {short(str(folder))}: "
                               f"{e.strerror or e}") from None
    found.sort(key=lambda f: f[0])
    return [("/".join(parts), path) for parts, path in found]


#: C++ operator sources read lately: (device, inode, size, mtime) -> text. A matrix whose specs name one
#: file read it once and share one string (1,000 specs naming a 3.9 MB file took 3.8 GB, one copy each).
_SOURCES: OrderedDict[tuple[int, int, int, int], str] = OrderedDict()
#: How many sources :data:`_SOURCES` keeps (each at most 4 MiB).
MAX_CACHED_SOURCES = 16


def read_source(matrix_dir: Path, rel: str, max_size: int, what: str = "the C++ operator's source") -> str:
    """The UTF-8 text of ``rel``, a file inside the matrix folder: resolved as include dirs are (a link out
    of the folder, ``ops -> ../private`` or ``etc -> /etc``, is refused before anything is read), opened
    without following a last link, a regular file of at most ``max_size`` bytes (a FIFO never blocks). The
    same unchanged file (device, inode, size, mtime) is read once and its text shared. Raises
    :class:`IncludeError` with one line saying why."""
    path = resolve_inside(matrix_dir, rel, what)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise IncludeError(f"cannot read {what} {short(rel)} ({short(str(path))}): {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IncludeError(f"{what} {short(rel)}: {short(str(path))} is not a regular file")
        if st.st_size > max_size:
            raise IncludeError(f"{what} {short(rel)}: {st.st_size} bytes, over the {max_size}-byte limit")
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        text = _SOURCES.get(key)
        if text is None:
            with open(fd, "rb", closefd=False) as f:
                data = f.read(st.st_size + 1)
            if len(data) != st.st_size:
                raise IncludeError(f"{what} {short(rel)}: {short(str(path))} changed while it was read")
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as e:
                raise IncludeError(f"{what} {short(rel)}: not UTF-8 text ({e.reason} at byte {e.start})") from None
            _SOURCES[key] = text
            while len(_SOURCES) > MAX_CACHED_SOURCES:
                _SOURCES.popitem(last=False)
        else:
            _SOURCES.move_to_end(key)
        return text
    except OSError as e:
        raise IncludeError(f"cannot read {what} {short(rel)} ({short(str(path))}): {e.strerror or e}") from None
    finally:
        os.close(fd)
