"""Bounded text for specs: the limits every spec field is checked against, the one error type, and
error-message helpers that never repr a hostile value whole.

Specs come from matrices and from manifests on disk (which the loader reads in the host application),
so every bound is checked before anything costly (a parse, a repr, a file read) happens. Each is far
above what a real spec needs.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any, Iterable


#: Longest spec name (names become file names: a file system allows 255 bytes).
MAX_NAME_LEN = 128


#: Longest other text field (a source path, a kernel name, an NVRTC option value).
MAX_TEXT_LEN = 4096


#: Most entries in a list or mapping field (kernels, define_macro).
MAX_LIST_LEN = 256


#: Largest NVRTC source file.
MAX_SOURCE_LEN = 4 * 1024 * 1024


#: Most specs in one matrix or manifest (the default matrix has 22). With the lambda bounds above, this
#: bounds what validating a hostile manifest can cost (measured: well under a second for 1024 lambdas
#: at the operator limit, on a loaded 2-core machine).
MAX_SPECS = 1024


#: Most fields of a struct type (``types:``).
MAX_STRUCT_FIELDS = 64


#: Most header files, and their total size, an NVRTC unit's include_dirs may bring into its definition.
MAX_HEADERS, MAX_HEADERS_LEN = 256, 4 * 1024 * 1024


class SpecError(ValueError):
    """A spec that does not validate; ``field`` names the field at fault (``None``: the spec as a whole).

    Raised by the one validator both the matrix (:mod:`aot.build.matrix`) and manifests (:mod:`aot.core.manifest`)
    use; each caller adds where the spec came from (file and line, or manifest file)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class _ShortRepr(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxdict, self.maxlist, self.maxtuple = 2, 4, 4, 4
        self.maxstring, self.maxother, self.maxlong = 60, 60, 40

    def repr_int(self, x: int, level: int) -> str:  # repr() of an int over 4300 digits raises
        return super().repr_int(x, level) if x.bit_length() < 128 else f"<a {x.bit_length()}-bit integer>"

    def repr_str(self, x: str, level: int) -> str:
        return super().repr_str(x[:self.maxstring + 1], level)


_REPR = _ShortRepr()


def short(value: Any) -> str:
    """A bounded repr for error messages: input is never repr'd whole (a YAML alias bomb or a 16 MiB
    string would take minutes and gigabytes), and a repr that cannot be made does not raise."""
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - an error message must not fail
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def hint(value: Any, choices: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for a near miss, else ``""`` (only short strings are compared)."""
    if not isinstance(value, str) or len(value) > 64:
        return ""
    import difflib  # only for a near miss: every Registry's first use imports this module
    close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _text_problem(value: str, limit: int) -> str | None:
    if len(value) > limit:
        return f"is {len(value)} characters, over the {limit}-character limit"
    if "\0" in value:
        return "holds a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate (not encodable as UTF-8)"
    return None


#: What :func:`printable` escapes: C0 and C1 controls, DEL, the line and paragraph separators, the
#: bidirectional overrides and isolates (they reorder what a terminal shows), and lone surrogates.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: Any, limit: int | None = None, *, lines: bool = False) -> str:
    """``text`` safe to print on a terminal: every control character (an escape sequence's ESC, a carriage
    return, a newline) shown as ``\\xNN``, so a manifest, header, report or cache entry from elsewhere can
    neither move the cursor, recolour or retitle the terminal nor fake a line of aot's output; cut to
    ``limit`` characters first (then ``...``). ``lines``: newlines stay (a compiler log), each line escaped.
    What every printer of text aot did not write itself uses."""
    s = text if isinstance(text, str) else str(text)
    if limit is not None and len(s) > limit:
        s = s[:limit] + "..."
    if lines:
        return "\n".join(_UNPRINTABLE.sub(_escape, line) for line in s.split("\n"))
    return _UNPRINTABLE.sub(_escape, s)
