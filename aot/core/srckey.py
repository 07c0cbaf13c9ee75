"""The key a library's compile call is found by: its source text and its options, in any spelling.

A library that compiles NVRTC kernels holds, at its compile call, the rendered source text and the flags it
passes to NVRTC, spelled its own way (``-std=c++17``, ``--std=c++17``, ``--std c++17``, or a mapping of
cuda.core ``ProgramOptions`` fields). :func:`source_key` names the pair by content, the same way at build
time (written into each NVRTC manifest entry by :mod:`aot.build.progkeys`) and at call time
(:mod:`aot.runtime.adapters.bysource`), so finding a packaged unit by its source is one dict lookup.

Normalised at the edge (issue 37): a public call turns the caller's options, whatever they are (a list, a
tuple, a generator or any other iterator of ``str`` or ``bytes`` flags, one string of flags, a mapping of
ProgramOptions fields, a ``cuda.core.ProgramOptions``), into one immutable :class:`NvrtcOptions` with
:func:`normalize_options`, once, and every key, memo and compile after that reads that value, never the
caller's object. An iterator read twice is empty the second time: a memo key made from it, then a content
key made from what was left, named the unit built *without* the flags (issue 37: the kernel wrote 7, not 2).
What cannot be read unambiguously (a nested list, a macro value that is neither text nor a number) is an
:class:`aot.core.errors.ArgumentError` naming the argument.

What the key leaves out, and why: the GPU architecture (``-arch``, ``--gpu-architecture``, ...; the image is
for the device that runs it, chosen as the loader chooses any artifact) and include directories (``-I``:
where the headers lie differs per install; a unit carries its headers' text in its definition). Pure data:
no CUDA import.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from collections import abc
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .errors import ArgumentError
from .nvsource import _ARCH_FLAGS, _split_flag, flags_to_options
from .text import SpecError, short

#: Bumped when what :func:`source_key` covers changes (old manifests then miss and JIT serves).
SOURCE_KEY_VERSION = 1
#: ProgramOptions fields that are not part of what a compile call means for aot: the architecture (the
#: loader picks the image for the device), the program name (no effect on the code) and the include path
#: (kept apart, in :attr:`NvrtcOptions.include_dirs`).
_SET_ASIDE = ("arch", "name", "include_path")
#: Flag lists seen before -> their normalised value (a library passes the same few lists at every call).
_FLAGS_MEMO: dict[Any, NvrtcOptions] = {}
_FLAGS_MEMO_MAX = 256
_memo_lock = threading.Lock()


def _canonical_text(fields: Mapping[str, Any]) -> str:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), default=repr)


@dataclass(frozen=True, eq=False)
class NvrtcOptions:
    """A compile call's NVRTC options as one immutable value: ProgramOptions fields (sorted, each value
    immutable: ``define_macro`` as the ``NAME=VALUE`` texts NVRTC gets, in order) and the ``-I`` folders.
    Equal (and hashed) by meaning: two spellings of the same flags are one value, so one memo entry."""

    fields: tuple[tuple[str, Any], ...] = ()
    include_dirs: tuple[str, ...] = ()
    #: :func:`canonical_options` of ``fields``: what :func:`source_key` hashes.
    canonical: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.canonical:
            object.__setattr__(self, "canonical", _canonical_text(dict(self.fields)))
        object.__setattr__(self, "_hash", hash((self.canonical, self.include_dirs)))

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, NvrtcOptions) and self.canonical == other.canonical
                                 and self.include_dirs == other.include_dirs)

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]  # set once, in __post_init__

    def mapping(self) -> dict[str, Any]:
        """The fields as ``ProgramOptions(**...)`` takes them and as a matrix writes them (a fresh dict;
        lists for tuples; one macro as its text, several as a list)."""
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in self.fields}
        if len(out.get("define_macro", ())) == 1:
            out["define_macro"] = out["define_macro"][0]
        return out


EMPTY = NvrtcOptions()


def _is_arch(token: str) -> bool:
    name, _ = _split_flag(token)
    return name in _ARCH_FLAGS or name.startswith("arch")


def _text(value: Any, what: str) -> str:
    """``value`` as text: a ``str`` as is, ``bytes`` (what ``nvrtcCompileProgram`` takes) decoded as UTF-8."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise ArgumentError(f"{what}: {short(value)} is not UTF-8 text") from None
    raise ArgumentError(f"{what}: {short(value)} ({type(value).__name__}) is not text (str or bytes)")


def split_flags(flags: Iterable[Any]) -> tuple[dict[str, Any], list[str]]:
    """(ProgramOptions fields, include dirs) of NVRTC command-line ``flags``, architecture flags dropped.
    ``bytes`` flags (what ``nvrtcCompileProgram`` takes) are decoded. Unknown flags are a
    :class:`SpecError` naming the flag (aot compiles only what it can reproduce)."""
    tokens = [bytes(f).decode() if isinstance(f, (bytes, bytearray)) else f for f in flags]
    kept: list[Any] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if isinstance(tok, str) and tok.startswith("-") and _is_arch(tok):
            if "=" not in tok and i < len(tokens) and isinstance(tokens[i], str) and not tokens[i].startswith("-"):
                i += 1  # "-arch sm_90": its value too
            continue
        kept.append(tok)
    return flags_to_options(kept)


def _norm_macros(value: Any, what: str) -> tuple[str, ...]:
    """``define_macro`` as the flags NVRTC gets, in order: ``"N=4"``, ``("N", 4)``, ``[("N", "4")]`` and
    ``{N: 4}`` agree. A value that is neither text nor a number is an :class:`ArgumentError`."""
    if isinstance(value, (str, bytes, bytearray)):
        return (_text(value, what),)
    if isinstance(value, Mapping):
        return tuple(f"{_text(k, what)}={_macro_value(v, what)}" for k, v in value.items())
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], (str, bytes)) \
            and isinstance(value[1], (str, bytes, int, float)) and not isinstance(value[1], bool):
        return (f"{_text(value[0], what)}={_macro_value(value[1], what)}",)
    if isinstance(value, (list, tuple)):
        out: list[str] = []
        for item in value:
            if isinstance(item, (list, dict)) or (isinstance(item, tuple) and len(item) != 2):
                raise ArgumentError(f"{what}: {short(item)} is not 'NAME=VALUE' nor a (name, value) pair")
            out += _norm_macros(item, what)
        return tuple(out)
    raise ArgumentError(f"{what}: {short(value)} is not 'NAME=VALUE', a (name, value) pair, a list of those "
                        f"or a mapping")


def _macro_value(v: Any, what: str) -> str:
    if isinstance(v, (str, bytes, bytearray)):
        return _text(v, what)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{v}"
    raise ArgumentError(f"{what}: macro value {short(v)} ({type(v).__name__}) is not text or a number")


def _norm_value(key: str, value: Any, what: str) -> Any:
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, bool, int, float)) for v in value):
        return tuple(value)
    raise ArgumentError(f"{what}: field {key!r} = {short(value)}: a ProgramOptions field is text, a number, "
                        f"a flag (true/false) or a list of those")


def _dirs(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes, os.PathLike)):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ArgumentError(f"{what}: include_path {short(value)} is not a folder or a list of folders")
    return tuple(os.fsdecode(v) if isinstance(v, (bytes, os.PathLike)) else _text(v, f"{what}: include_path")
                 for v in value)


def _from_fields(fields: Mapping[Any, Any], what: str, dirs: Iterable[str] = ()) -> NvrtcOptions:
    out: dict[str, Any] = {}
    include = tuple(dirs)
    for k, v in fields.items():
        if not isinstance(k, str):
            raise ArgumentError(f"{what}: field name {short(k)} ({type(k).__name__}) is not text")
        if k == "include_path":
            include += _dirs(v, what)
        elif k in _SET_ASIDE or v is None:
            continue
        elif k == "define_macro":
            out[k] = _norm_macros(v, f"{what}: define_macro")
        else:
            out[k] = _norm_value(k, v, what)
    return NvrtcOptions(tuple(sorted(out.items())), include)


def _from_flags(flags: list[Any], what: str) -> NvrtcOptions:
    for f in flags:
        if not isinstance(f, (str, bytes, bytearray)):
            raise ArgumentError(f"{what}: {short(f)} ({type(f).__name__}) is not a flag (each item is one "
                                f"flag such as '-DN=2', as str or bytes)")
    try:
        opts, dirs = split_flags([_text(f, what) for f in flags])
    except SpecError as e:
        raise ArgumentError(f"{what}: {e}") from None
    return _from_fields(opts, what, dirs)


def normalize_options(options: Any, what: str = "options") -> NvrtcOptions:
    """``options`` as a library holds them, read once into an :class:`NvrtcOptions`: ``None``; flags as any
    iterable (list, tuple, generator, iterator: consumed here, exactly once) of ``str`` or ``bytes``; one
    ``str``/``bytes`` of space-separated flags; a mapping of ProgramOptions fields; a ``cuda.core.ProgramOptions``
    (or any dataclass of its fields: those not at their default). ``arch``, ``name`` and architecture flags
    are set aside. Anything else, or anything ambiguous, is an :class:`ArgumentError` naming ``what``.

    A list, tuple, string or plain dict seen before is one memo hit (a library passes the same few at every
    call): the memo key is an immutable copy of it, never the caller's object."""
    if options is None:
        return EMPTY
    t = type(options)
    if t is NvrtcOptions:
        return options
    memo: Any = None
    if t is list or t is tuple:
        memo = ("flags", tuple(options))  # copied, never consumed; unhashable items: no memo (refused below)
    elif t is str or t is bytes:
        memo = ("text", options)
    elif t is dict:
        memo = _mapping_memo(options)
    if memo is not None:
        try:
            found = _FLAGS_MEMO.get(memo)
        except TypeError:
            memo = found = None
        if found is not None:
            return found
    value = _normalize(options, what)
    if memo is not None:
        with _memo_lock:
            if len(_FLAGS_MEMO) >= _FLAGS_MEMO_MAX:
                _FLAGS_MEMO.clear()
            _FLAGS_MEMO[memo] = value
    return value


_PLAIN = (str, int, float, bool)


def _mapping_memo(options: dict) -> Any:
    """A memo key for a dict of plain values (``repr`` tells ``1``, ``1.0`` and ``True`` apart, which
    equality would not); ``None`` (no memo) for anything else."""
    items = []
    for k, v in options.items():
        if type(v) in _PLAIN or v is None:
            pass
        elif type(v) in (list, tuple) and all(type(x) in _PLAIN or (type(x) is tuple and all(type(y) in _PLAIN
                                                                                              for y in x)) for x in v):
            pass
        elif type(v) is dict and all(type(x) is str and type(y) in _PLAIN for x, y in v.items()):
            pass
        else:
            return None
        items.append((k, repr(v)))
    return ("map", tuple(items))


def _normalize(options: Any, what: str) -> NvrtcOptions:
    if isinstance(options, NvrtcOptions):
        return options
    if isinstance(options, (str, bytes, bytearray)):
        return _from_flags(_text(options, what).split(), what)
    if isinstance(options, abc.Mapping):
        return _from_fields(options, what)
    if dataclasses.is_dataclass(options) and not isinstance(options, type):
        return _from_fields({f.name: getattr(options, f.name) for f in dataclasses.fields(options)
                             if getattr(options, f.name) != f.default}, what)
    if isinstance(options, abc.Iterable):
        return _from_flags(list(options), what)  # the caller's iterable is read here, once, and never again
    raise ArgumentError(f"{what}: {short(options)} ({type(options).__name__}) is not NVRTC flags (a list of "
                        f"str or bytes), a mapping of ProgramOptions fields or a ProgramOptions")


def options_mapping(options: Any) -> tuple[dict[str, Any], list[str]]:
    """(ProgramOptions fields, include dirs) of ``options`` as :func:`normalize_options` reads them."""
    value = normalize_options(options)
    return value.mapping(), list(value.include_dirs)


def normalize_source(source: Any, what: str = "source") -> str:
    """The source text: a ``str``, or ``bytes`` decoded as UTF-8 (keyed as the same text would be)."""
    return _text(source, what)


def normalize_names(names: Any, what: str = "kernel_names") -> tuple[str, ...]:
    """Kernel names (or name expressions) as one tuple, read once: one name (``str``/``bytes``) or any
    iterable of them."""
    t = type(names)
    if (t is list or t is tuple) and all(type(n) is str for n in names):
        out: tuple[str, ...] = tuple(names)
    elif isinstance(names, (str, bytes, bytearray)):
        out = (_text(names, what),)
    elif isinstance(names, abc.Iterable) and not isinstance(names, abc.Mapping):
        out = tuple(_text(n, what) for n in names)
    else:
        raise ArgumentError(f"{what}: {short(names)} ({type(names).__name__}) is not a kernel name nor a list "
                            f"of them")
    for n in out:
        if not n or n != n.strip():
            raise ArgumentError(f"{what}: {n!r} is not a kernel name")
    return out


def canonical_options(opts: Mapping[str, Any] | NvrtcOptions) -> str:
    """One text per meaning: fields sorted, macros as NVRTC gets them (order kept: it can matter)."""
    if not isinstance(opts, NvrtcOptions):
        opts = _from_fields(opts, "options")
    return opts.canonical


def source_key(source: str, opts: Mapping[str, Any] | NvrtcOptions) -> str:
    """sha256 over the labelled, length-prefixed source text and canonical options (hex)."""
    h = hashlib.sha256(f"aot-source-key-v{SOURCE_KEY_VERSION}\0".encode())
    for label, text in (("source", source), ("options", canonical_options(opts))):
        data = text.encode("utf-8", "surrogatepass")
        h.update(label.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()
