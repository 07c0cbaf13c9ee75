"""The key a library's compile call is found by: its source text and its options, in any spelling.

A library that compiles NVRTC kernels holds, at its compile call, the rendered source text and the flags it
passes to NVRTC, spelled its own way (``-std=c++17``, ``--std=c++17``, ``--std c++17``, or a mapping of
cuda.core ``ProgramOptions`` fields). :func:`source_key` names the pair by content, the same way at build
time (written into each NVRTC manifest entry by :mod:`aot.build.progkeys`) and at call time
(:mod:`aot.runtime.bysource`), so finding a packaged unit by its source is one dict lookup.

What the key leaves out, and why: the GPU architecture (``-arch``, ``--gpu-architecture``, ...; the image is
for the device that runs it, chosen as the loader chooses any artifact) and include directories (``-I``:
where the headers lie differs per install; a unit carries its headers' text in its definition). Pure data:
no CUDA import.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable, Mapping

from .nvsource import _ARCH_FLAGS, _split_flag, flags_to_options
from .text import SpecError, short

#: Bumped when what :func:`source_key` covers changes (old manifests then miss and JIT serves).
SOURCE_KEY_VERSION = 1


def _is_arch(token: str) -> bool:
    name, _ = _split_flag(token)
    return name in _ARCH_FLAGS or name.startswith("arch")


def split_flags(flags: Iterable[Any]) -> tuple[dict[str, Any], list[str]]:
    """(ProgramOptions fields, include dirs) of NVRTC command-line ``flags``, architecture flags dropped.
    ``bytes`` flags (what ``nvrtcCompileProgram`` takes) are decoded. Unknown flags are a
    :class:`SpecError` naming the flag (aot compiles only what it can reproduce)."""
    tokens = [f.decode() if isinstance(f, (bytes, bytearray)) else f for f in flags]
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


def options_mapping(options: Any) -> tuple[dict[str, Any], list[str]]:
    """(ProgramOptions fields, include dirs) of ``options`` as a library holds them: a sequence of flags, a
    mapping of ProgramOptions fields (``arch``/``name``/``include_path`` set aside), or ``None``."""
    if options is None:
        return {}, []
    if isinstance(options, Mapping):
        opts = {str(k): v for k, v in options.items()}
        dirs = opts.pop("include_path", None) or []
        opts.pop("arch", None)
        opts.pop("name", None)
        return opts, [dirs] if isinstance(dirs, str) else list(dirs)
    if isinstance(options, (str, bytes)):
        options = options.split() if isinstance(options, str) else options.decode().split()
    try:
        return split_flags(list(options))
    except TypeError:
        raise SpecError(f"options {short(options)} are neither flags nor a mapping", "options") from None


def _macros(value: Any) -> list[str]:
    """``define_macro`` as the flags NVRTC gets, in order: ``"N=4"``, ``("N", 4)`` and ``{N: 4}`` agree."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [f"{k}={v}" for k, v in value.items()]
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return [f"{value[0]}={value[1]}"]
    out: list[str] = []
    for item in value:
        out += _macros(item)
    return out


def canonical_options(opts: Mapping[str, Any]) -> str:
    """One text per meaning: fields sorted, macros as NVRTC gets them (order kept: it can matter)."""
    norm: dict[str, Any] = {}
    for key, value in opts.items():
        norm[key] = _macros(value) if key == "define_macro" else value
    return json.dumps(norm, sort_keys=True, separators=(",", ":"), default=repr)


def source_key(source: str, opts: Mapping[str, Any]) -> str:
    """sha256 over the labelled, length-prefixed source text and canonical options (hex)."""
    h = hashlib.sha256(f"aot-source-key-v{SOURCE_KEY_VERSION}\0".encode())
    for label, text in (("source", source), ("options", canonical_options(opts))):
        data = text.encode("utf-8", "surrogatepass")
        h.update(label.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()
