"""The numba-cuda family as data: what a ``numba:`` matrix entry and a manifest's numba definition may say,
checked field by field by the one validator (:func:`aot.core.rules.spec_from_definition` calls
:func:`check_numba` for a definition that names a ``kernel``).

A matrix entry names a ``@cuda.jit`` dispatcher where it lives and the signatures to ship::

    numba:
      - name: axpy
        kernel: "mypkg.kernels:axpy"
        signatures: ["void(float32[::1], float32[::1], float32, int64)", "void(float64[::1], ...)"]
        options: {fastmath: true}          # optional: must agree with the decorator's

Each signature becomes one :class:`~aot.core.spec.NumbaKernel` (named ``axpy`` for one signature, else
``axpy.0``, ``axpy.1``, ... in the order written). The builder fills in ``digest`` (what numba-cuda compiles
into the kernel: its source, what it calls, the values it reads; :mod:`aot.runtime.adapters.numba_digest`) and
``numba_cuda`` (the version that compiles it); a manifest carries both.

Pure Python, no numba import: the runtime reads manifests with it.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from .fieldcheck import kernel_ref, known_fields, release_field, sha256_field
from .spec import NumbaKernel
from .text import MAX_LIST_LEN, MAX_TEXT_LEN, SpecError, _text_problem, hint, short

#: The keys of a ``numba:`` matrix entry.
MATRIX_KEYS = ("name", "kernel", "signatures", "options")
#: The fields of a numba kernel as a manifest stores it (``NumbaKernel.definition()``).
DEFINITION_FIELDS = ("name", "kernel", "signature", "options", "digest", "numba_cuda")
#: The ``@cuda.jit`` options that change the code a kernel compiles to, their types and defaults (numba-cuda
#: 0.30: ``opt`` defaults on, the others off). Anything else the decorator says (``link``, ``extensions``,
#: ``launch_bounds``, ``cache``) is checked by the builder (:mod:`aot.build.numba_build`). ``lto`` is a fastmath
#: kernel's only (``None`` otherwise): numba-cuda links such a kernel's LTO-IR with nvJitLink, which drops the
#: flush-to-zero of some float operations the PTX path keeps, so the two are two builds
#: (:data:`LTO_TWIN`); without fastmath both give the same arithmetic and ``lto`` is no option.
OPTIONS: Mapping[str, tuple[type, Any]] = {"fastmath": (bool, False), "lineinfo": (bool, False),
                                           "debug": (bool, False), "opt": (bool, True),
                                           "max_registers": (int, None), "lto": (bool, None)}
#: The suffix of a fastmath kernel's spec built without LTO (``axpy.0`` with nvJitLink's LTO, ``axpy.0.nolto``
#: without: numba-cuda's decorator picks by whether nvJitLink is installed, and the attach picks alike).
LTO_TWIN = ".nolto"
#: What a signature may hold: numba's type syntax (names, ``[::1]``, ``[:, :]``, ``(...)``, ``,``), no quotes
#: or calls beyond it: the text is parsed by numba only when building or attaching.
_SIGNATURE = re.compile(r"[A-Za-z_][\w]*\s*\(([\w\s\[\]:,()]*)\)")


def check_signature(sig: Any, fld: str = "signatures") -> str:
    """A numba signature text (``"void(float32[::1], int64)"``), whitespace normalized; a kernel returns void."""
    if not isinstance(sig, str) or _text_problem(sig, MAX_TEXT_LEN) or not _SIGNATURE.fullmatch(sig.strip()):
        raise SpecError(f"{short(sig)} is not a numba signature like 'void(float32[::1], float32, int64)'", fld)
    text = " ".join(sig.split())
    if not text.startswith(("void(", "void (", "none(")):
        raise SpecError(f"{short(sig)}: a kernel returns nothing; write it as 'void(...)'", fld)
    return text


def check_options(options: Any) -> dict[str, Any]:
    """The code-changing options, every one spelled out (defaults filled in), so equal options key equally."""
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise SpecError(f"options must be a mapping of {', '.join(OPTIONS)}", "options")
    out: dict[str, Any] = {}
    for key in options:
        if key not in OPTIONS:
            raise SpecError(f"unknown numba-cuda option {short(key)}{hint(key, OPTIONS)}; allowed: "
                            f"{', '.join(OPTIONS)}", f"options.{str(key)[:64]}")
    for key, (typ, default) in OPTIONS.items():
        value = options.get(key, default)
        if typ is int and value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                                  or not 1 <= value <= 255):
            raise SpecError(f"must be an integer in 1..255 (or absent), got {short(value)}", f"options.{key}")
        if typ is bool and not isinstance(value, bool) and not (default is None and value is None):
            raise SpecError(f"must be true or false, got {short(value)}", f"options.{key}")
        out[key] = value
    return out


def check_numba(d: Mapping[str, Any], name: str) -> NumbaKernel:
    """The numba kernel a manifest definition describes (``name``: its checked name), every field checked
    (never imported)."""
    known_fields(d, DEFINITION_FIELDS, "a numba kernel")
    digest = sha256_field(d.get("digest"), "digest", "what the kernel compiles in")
    version = release_field(d.get("numba_cuda"), "numba_cuda", "a version like '0.30.4'")
    return NumbaKernel(name=name, kernel=kernel_ref(d.get("kernel")),
                       signature=check_signature(d.get("signature"), "signature"),
                       options=check_options(d.get("options")), digest=digest, numba_cuda=version)


def check_entry(d: Mapping[str, Any]) -> tuple[str, list[str], dict[str, Any] | None]:
    """A ``numba:`` matrix entry's kernel reference, signatures and options (``None``: as the decorator says)."""
    known_fields(d, MATRIX_KEYS)
    ref = kernel_ref(d.get("kernel"))
    sigs = d.get("signatures")
    if isinstance(sigs, str):
        sigs = [sigs]
    if not isinstance(sigs, list) or not sigs or len(sigs) > MAX_LIST_LEN:
        raise SpecError(f"signatures must list 1 to {MAX_LIST_LEN} numba signatures", "signatures")
    texts = [check_signature(s) for s in sigs]
    if len(set(texts)) != len(texts):
        raise SpecError("signatures lists one signature twice", "signatures")
    return ref, texts, (check_options(d["options"]) if "options" in d else None)


def twin_base(name: str) -> str:
    """The spec a fastmath kernel's build without LTO is the twin of (``axpy.0.nolto`` -> ``axpy.0``): a check
    written for one runs both."""
    return name[: -len(LTO_TWIN)] if name.endswith(LTO_TWIN) else name


def variant_names(name: str, count: int) -> list[str]:
    """The spec names of an entry's signatures: ``name`` for one, else ``name.0``, ``name.1``, ..."""
    return [name] if count == 1 else [f"{name}.{i}" for i in range(count)]
