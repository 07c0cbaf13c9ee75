"""The kernels a compiled image defines, read from the image: a cubin's ELF symbol table or PTX's ``.entry``
directives. Never from the CUDA C++ text: attributes (``__launch_bounds__(256, 4)``), macros
(``#define KERNEL extern "C" __global__``) and templates make any pattern over source text name the wrong
thing, while the compiler's output names exactly the symbols a loader can find.

A cubin kernel is a function symbol (``STT_FUNC``), global or weak, marked as an entry in ``st_other``
(``STO_CUDA_ENTRY``, 0x10) and placed in its own ``.text.<name>`` section; device functions (local, or
global without the entry mark in relocatable code) are not kernels. PTX names its kernels
``.entry name(`` (with ``.visible`` or ``.weak`` before it); ``.func`` are device functions.

Stdlib only: :mod:`aot.record.hook` loads this file by path inside a recorded process (where
``import aot`` is not allowed), and :mod:`aot.build.compile` checks each built unit's kernels with it.
"""

from __future__ import annotations

import re
import struct

#: ``st_other`` bit NVIDIA's ELF sets on a kernel's symbol.
STO_CUDA_ENTRY = 0x10
_STT_FUNC = 2
_STB_LOCAL = 0
_SHT_SYMTAB = 2
_SYM_SIZE = {True: 24, False: 16}  # an ELF64 / ELF32 symbol's size: a symbol table of another entry size is refused
#: Bytes the string lookups of one image may scan, per byte of the image: names are read once each (a section's
#: at most once), so a real image scans far less; a hostile one (every symbol's name reaching the end of a
#: table without a NUL) is refused rather than scanned once per symbol.
_SCAN_PER_BYTE = 4
#: A PTX entry directive at the start of a line (PTX is compiler output with one directive per line). Spaces
#: only, never newlines, in the pattern: ``\s*`` let every line's attempt run over all the blank lines after it
#: (60,000 blank lines took minutes).
_PTX_ENTRY = re.compile(rb"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.entry[ \t]+([A-Za-z_$%][\w$%]*)", re.M)


class ImageError(ValueError):
    """Bytes that are neither a readable ELF cubin nor PTX text."""


def kernel_symbols(image: bytes) -> list[str]:
    """The kernel (entry) symbols ``image`` defines, in the image's order: a cubin or PTX text."""
    data = bytes(image)
    if data[:4] == b"\x7fELF":
        return _elf_kernels(data)
    if b".entry" in data or b".version" in data or b".target" in data:
        return list(dict.fromkeys(m.decode("ascii", "replace") for m in _PTX_ENTRY.findall(data)))
    raise ImageError("not a cubin (ELF) nor PTX text")


def _elf_kernels(data: bytes) -> list[str]:
    """Linear in the image: every symbol table has the class's entry size and together they fit in the image
    (4,000 tables of entry size 1 over one region took 32 s), and string lookups are budgeted
    (:data:`_SCAN_PER_BYTE`)."""
    if len(data) < 64:
        raise ImageError("a truncated ELF header")
    is64 = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    try:
        if is64:
            shoff, = struct.unpack_from(end + "Q", data, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
            sh_fmt, sym_fmt = end + "IIQQQQIIQQ", end + "IBBHQQ"
        else:
            shoff, = struct.unpack_from(end + "I", data, 0x20)
            shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x2E)
            sh_fmt, sym_fmt = end + "IIIIIIIIII", end + "IIIBBH"
        sections = []
        for i in range(shnum):
            f = struct.unpack_from(sh_fmt, data, shoff + i * shentsize)
            # name, type, offset, size, link, entsize (the same positions in both classes but the flags' width)
            sections.append((f[0], f[1], f[4], f[5], f[6], f[9]))
        symtabs = [s for s in sections if s[1] == _SHT_SYMTAB]
        if any(s[5] != _SYM_SIZE[is64] for s in symtabs):
            raise ImageError(f"a symbol table whose entries are not {_SYM_SIZE[is64]} bytes")
        if sum(s[3] for s in symtabs) > len(data) or any(s[2] + s[3] > len(data) for s in symtabs):
            raise ImageError("symbol tables larger than the image")
        strings = _Strings(data)
        shstr = sections[shstrndx]
        section_names: dict[int, str] = {}
        out: dict[str, None] = {}
        for s in symtabs:
            strtab = sections[s[4]]
            for off in range(s[2], s[2] + s[3] - s[5] + 1, s[5]):
                if is64:
                    st_name, st_info, st_other, st_shndx, _, _ = struct.unpack_from(sym_fmt, data, off)
                else:
                    st_name, _, _, st_info, st_other, st_shndx = struct.unpack_from(sym_fmt, data, off)
                if st_info & 0xF != _STT_FUNC or st_info >> 4 == _STB_LOCAL or not st_other & STO_CUDA_ENTRY:
                    continue
                if not 0 < st_shndx < len(sections):
                    continue
                if st_shndx not in section_names:
                    section_names[st_shndx] = strings.at(shstr[2] + sections[st_shndx][0], shstr[2] + shstr[3])
                name = strings.at(strtab[2] + st_name, strtab[2] + strtab[3])
                if section_names[st_shndx] == f".text.{name}":
                    out[name] = None
        return list(out)
    except (struct.error, IndexError) as e:
        raise ImageError(f"a malformed ELF image ({e})") from None


class _Strings:
    """NUL-terminated strings of one image's string tables, each start read once, all of them together
    scanning at most :data:`_SCAN_PER_BYTE` times the image."""

    def __init__(self, data: bytes):
        self.data = data
        self.seen: dict[tuple[int, int], str] = {}
        self.budget = _SCAN_PER_BYTE * len(data) + (1 << 16)

    def at(self, start: int, limit: int) -> str:
        got = self.seen.get((start, limit))
        if got is None:
            stop = min(limit, start + self.budget)
            end = self.data.find(b"\0", start, stop)
            if start >= limit or end < 0:
                raise ImageError("a string table entry outside its section" if stop == limit else
                                 "string tables that cost more to read than the image's size allows")
            self.budget -= end - start + 1
            got = self.seen[(start, limit)] = self.data[start:end].decode("utf-8", "replace")
        return got
