"""The CuPy family as data: what a ``cupy:`` matrix entry and a manifest's CuPy definition may say, checked field by
field by the one validator (:func:`aot.core.rules.spec_from_definition` calls :func:`check_cupy` for a definition
that names a ``cupy`` release).

An entry is one compile CuPy's compiler is handed (``cupy.cuda.compiler._compile_module_with_cache``: what a ufunc,
a reduction, an ``ElementwiseKernel``, a ``ReductionKernel`` or a ``RawModule`` of a given dtype and layout
generates), usually written by ``aot record`` (:mod:`aot.record.hook_cupy`)::

    cupy:
      - name: cupy_add.0
        what: "cupy_add(<typed parameters>) from mylib.ops:scale:12"
        source: cupy-kernels/cupy_add.0.cu                 # the text CuPy compiles, beside the matrix
        options: ["-I{cupy_include}/cupy/_cccl/cub", "--std=c++17", "-I{cupy_include}", "-I{cuda_include}"]
        name_expressions: null                      # optional: RawModule's
        jitify: false                               # optional
        cupy: "14.2.0"                              # the CuPy release that recorded it (a label: see below)

The source is what CuPy generates for that call, not something aot re-derives: generated code depends on dtypes,
the arrays' dimensions after CuPy merges them, contiguity and 32-bit indexing, so the compile is the unit.
``{cupy_include}`` and ``{cuda_include}`` stand for the install's paths (CuPy's own key hashes them). The key a
user's call finds a kernel by is content only, computed at build and at the call from what CuPy hands NVRTC
(:mod:`aot.runtime.adapters.cupy_key`): the release named here is a label and is not in it.

Pure Python, no CuPy import: the runtime reads manifests with it.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from .fieldcheck import known_fields, release_field, sha256_field
from .spec import CupyKernel
from .text import MAX_LIST_LEN, MAX_TEXT_LEN, SpecError, _text_problem, hint, short

#: The keys of a ``cupy:`` matrix entry.
MATRIX_KEYS = ("name", "what", "source", "options", "name_expressions", "jitify", "cupy")
#: The fields of a CuPy kernel as a manifest stores it (``CupyKernel.definition()``).
DEFINITION_FIELDS = ("name", "what", "source_sha256", "options", "name_expressions", "jitify", "cupy")
#: The install paths an option may name through a placeholder (``-I{cupy_include}/cupy/_cccl/cub``).
PLACEHOLDERS = ("{cupy_include}", "{cuda_include}")
#: Options CuPy's compile-with-cache path cannot build here: relocatable code links with the driver
#: (``cupy.cuda.compiler._is_cudadevrt_needed``), and the architecture is the build's ``--sm``.
REFUSED_OPTIONS = ("--device-c", "-dc", "-rdc=true", "--relocatable-device-code=true")
_ARCH = re.compile(r"^(-arch|--gpu-architecture)\b")
_PLACEHOLDER = re.compile(r"\{[a-z_]+\}")


def check_option(opt: Any, fld: str = "options") -> str:
    """One NVRTC option as CuPy passes it; placeholders only those aot fills in; no architecture flag."""
    if not isinstance(opt, str) or not opt or _text_problem(opt, MAX_TEXT_LEN) or opt != opt.strip():
        raise SpecError(f"{short(opt)} is not an NVRTC option (a non-empty string without surrounding blanks)", fld)
    for ph in _PLACEHOLDER.findall(opt):
        if ph not in PLACEHOLDERS:
            raise SpecError(f"{short(opt)}: unknown placeholder {ph}{hint(ph, PLACEHOLDERS)}; allowed: "
                            f"{', '.join(PLACEHOLDERS)}", fld)
    if opt in REFUSED_OPTIONS:
        raise SpecError(f"{opt}: relocatable device code links with the driver; aot cannot build it", fld)
    if _ARCH.match(opt):
        raise SpecError(f"{opt}: the architecture comes from the build's --sm (CuPy adds it), not the options", fld)
    return opt


def check_options(opts: Any) -> tuple[str, ...]:
    if not isinstance(opts, list) or len(opts) > MAX_LIST_LEN:
        raise SpecError(f"options must list at most {MAX_LIST_LEN} NVRTC options", "options")
    return tuple(check_option(o) for o in opts)


def check_name_expressions(names: Any) -> tuple[str, ...] | None:
    if names is None:
        return None
    if not isinstance(names, list) or not names or len(names) > MAX_LIST_LEN:
        raise SpecError(f"name_expressions must be null or list 1 to {MAX_LIST_LEN} names", "name_expressions")
    for n in names:
        if not isinstance(n, str) or not n.strip() or _text_problem(n, MAX_TEXT_LEN):
            raise SpecError(f"{short(n)} is not a name expression", "name_expressions")
    return tuple(names)


def check_version(v: Any, fld: str = "cupy") -> str:
    return release_field(v, fld, "the CuPy release like '14.2.0'")


def check_what(v: Any) -> str:
    if v is None:
        return ""
    if not isinstance(v, str) or _text_problem(v, MAX_TEXT_LEN):
        raise SpecError(f"what must be a line of text, got {short(v)}", "what")
    return v


def check_jitify(v: Any) -> bool:
    if not isinstance(v, bool):
        raise SpecError(f"jitify must be true or false, got {short(v)}", "jitify")
    return v


def check_cupy(d: Mapping[str, Any], name: str) -> CupyKernel:
    """The CuPy kernel a manifest definition describes (``name``: its checked name), every field checked."""
    known_fields(d, DEFINITION_FIELDS, "a CuPy kernel")
    digest = sha256_field(d.get("source_sha256"), "source_sha256", "the source CuPy compiles")
    return CupyKernel(name=name, what=check_what(d.get("what")), source_sha256=digest,
                      options=check_options(d.get("options")),
                      name_expressions=check_name_expressions(d.get("name_expressions")),
                      jitify=check_jitify(d.get("jitify", False)), cupy=check_version(d.get("cupy")))


def check_entry(d: Mapping[str, Any]) -> tuple[str, str, tuple[str, ...], tuple[str, ...] | None, bool, str]:
    """A ``cupy:`` matrix entry's label, source path, options, name expressions, jitify and CuPy release."""
    known_fields(d, MATRIX_KEYS)
    src = d.get("source")
    if not isinstance(src, str) or not src.strip() or _text_problem(src, MAX_TEXT_LEN):
        raise SpecError("source must name the file (beside the matrix) holding the text CuPy compiles", "source")
    return (check_what(d.get("what")), src.strip(), check_options(d.get("options", [])),
            check_name_expressions(d.get("name_expressions")), check_jitify(d.get("jitify", False)),
            check_version(d.get("cupy")))
