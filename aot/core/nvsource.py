"""NVRTC units as libraries write them: sources named in Python code, rendered per parameter set, and
compiler flags in the NVRTC command-line spelling. Pure data checks: nothing here imports user code (that
is :mod:`aot.build.pysource`, run only for the matrix being built).

Three forms of ``source:`` in a matrix:

* ``kernels/morton.cu``: a file (relative to the matrix). A ``.py`` file is refused: its text is Python.
* ``"pkg.module:ATTR"``: a ``str`` constant of an importable module.
* ``"pkg.module:function"`` with ``params``: the function's return value for those keyword arguments.
  ``params: {dtype: float32}`` gives one unit; a list value (``{dtype: [float32, float64]}``) or a list of
  parameter sets gives one unit per set, named by :func:`variant_name`.

A unit from code records ``source_path`` as the call that rendered it (``pkg.mod:fn(dtype='float32')``),
for people; the rendered text is in the definition, the content key and the manifest, so a JIT elsewhere
compiles the same bytes and a manifest never makes aot import anything.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from .text import MAX_LIST_LEN, MAX_NAME_LEN, SpecError, _text_problem, hint, short

#: Characters a spec name may hold (:func:`aot.core.rules.check_name`).
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]+")
_CODE_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
_PY_SUFFIXES = (".py", ".pyc", ".pyi", ".pyx", ".ipynb")
#: numpy's short dtype codes for variant names: ``float32`` -> ``f32``.
_DTYPE_SHORT = re.compile(r"(float|int|uint|complex|bfloat)(\d+)")
_SHORT_KIND = {"float": "f", "int": "i", "uint": "u", "complex": "c", "bfloat": "bf"}
#: Most units one matrix entry may render (its parameter sets).
MAX_VARIANTS = MAX_LIST_LEN


def is_code_source(src: Any) -> bool:
    """Whether ``source:`` names something in Python code (``pkg.module:ATTR``) rather than a file."""
    return isinstance(src, str) and _CODE_REF.fullmatch(src) is not None


def source_problem(src: str) -> str | None:
    """Why ``src`` cannot be an NVRTC unit's source, else ``None``: a Python file holds Python, not CUDA C++;
    ``pkg/mod.py:_SRC`` is a path where a module reference belongs."""
    path, sep, attr = src.rpartition(":")
    if sep and path.endswith(_PY_SUFFIXES) and attr.isidentifier():
        dotted = path[:-len(path.rsplit(".", 1)[1]) - 1].replace("\\", "/").strip("/").replace("/", ".")
        return (f"{short(src)} is a Python file path; name the string by module: '{dotted}:{attr}' "
                f"(the module must be importable)")
    if src.endswith(_PY_SUFFIXES):
        return (f"{short(src)} is a Python file, not CUDA C++ source; name the string in it as "
                f"'package.module:ATTR' (a str constant, or a function with params)")
    return None


def name_template(raw: Any) -> str:
    """The name of an entry with ``params``: a non-empty string, ``{param}`` placeholders allowed (each
    unit's name is checked once filled in, by :func:`aot.core.rules.check_name`)."""
    if not isinstance(raw, str) or not raw.strip() or len(raw) > 4 * MAX_NAME_LEN:
        raise SpecError("a spec needs a non-empty string 'name'", "name")
    return raw


def suggest_name(name: str) -> str:
    """A valid spec name close to ``name``: each run of other characters becomes ``_``."""
    s = _NAME_BAD.sub("_", name).strip("_.-")[:MAX_NAME_LEN].rstrip("_.-")
    return s or "unit"


def short_value(value: Any) -> str:
    """A parameter value as it appears in a variant name: dtypes as numpy's codes (``float64`` -> ``f64``),
    ``True``/``False`` as ``true``/``false``, anything else as written."""
    if isinstance(value, bool):
        return str(value).lower()
    text = str(value)
    m = _DTYPE_SHORT.fullmatch(text)
    return f"{_SHORT_KIND[m.group(1)]}{m.group(2)}" if m else text


def _check_value(key: str, value: Any) -> None:
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return
    if isinstance(value, str) and not _text_problem(value, 256):
        return
    raise SpecError(f"parameter {key!r} must be a string, number or boolean, got {short(value)}", "params")


def variant_sets(params: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """The parameter sets ``params`` describes, and the names of the parameters that vary between them.

    ``{dtype: float32}``: one set. ``{dtype: [float32, float64], block: [128, 256]}``: the product, in the
    order written (dtype varies slowest). ``[{dtype: float32}, {dtype: float64, fast: true}]``: those sets."""
    if isinstance(params, dict):
        if not params or len(params) > MAX_LIST_LEN:
            raise SpecError("params must map parameter names to a value or a list of values", "params")
        axes: list[list[Any]] = []
        for key, value in params.items():
            if not isinstance(key, str) or not key.isidentifier():
                raise SpecError(f"parameter name {short(key)} must be a Python identifier", "params")
            values = value if isinstance(value, list) else [value]
            if not values or len(values) > MAX_VARIANTS:
                raise SpecError(f"parameter {key!r} lists 1 to {MAX_VARIANTS} values", "params")
            for v in values:
                _check_value(key, v)
            axes.append(values)
        count = 1
        for values in axes:
            count *= len(values)
        if count > MAX_VARIANTS:
            raise SpecError(f"params give {count} parameter sets, over the limit of {MAX_VARIANTS}", "params")
        sets = [dict(zip(params, combo, strict=True)) for combo in itertools.product(*axes)]
        return sets, [k for k, values in zip(params, axes, strict=True) if len(values) > 1]
    if isinstance(params, list) and params and len(params) <= MAX_VARIANTS:
        sets = []
        for p in params:
            if not isinstance(p, dict) or not p:
                raise SpecError("each parameter set must be a mapping of parameter names to values", "params")
            for key, value in p.items():
                if not isinstance(key, str) or not key.isidentifier():
                    raise SpecError(f"parameter name {short(key)} must be a Python identifier", "params")
                _check_value(key, value)
            sets.append(dict(p))
        keys = list(dict.fromkeys(k for p in sets for k in p))
        varying = [k for k in keys if len({repr(p.get(k)) for p in sets}) > 1]
        return sets, varying
    raise SpecError(f"params must be a mapping (values or lists of values) or a list of 1 to {MAX_VARIANTS} "
                    f"parameter sets, got {short(params)}", "params")


def fill(template: str, pset: dict[str, Any], fld: str) -> str:
    """``template`` with each ``{param}`` replaced: in a unit ``name`` by :func:`short_value` (``f32``), in a
    kernel name by the value as written (``float32``: what the rendering function was given)."""
    def sub(m: re.Match) -> str:
        key = m.group(1)
        if key not in pset:
            raise SpecError(f"{{{key}}} names no parameter{hint(key, pset)}; parameters: {', '.join(pset)}", fld)
        value = pset[key]
        return short_value(value) if fld == "name" else (str(value).lower() if isinstance(value, bool) else str(value))
    return re.sub(r"\{([^{}]*)\}", sub, template)


def variant_name(template: str, pset: dict[str, Any], varying: list[str]) -> str:
    """The unit name of one parameter set. ``{param}`` placeholders in ``name`` are filled with the short
    value (``envelope_{dtype}`` -> ``envelope_f32``); a name without placeholders gets ``_<short value>`` of
    each parameter that varies, in order (``envelope`` with ``{dtype: [float32, float64]}`` ->
    ``envelope_f32``, ``envelope_f64``); a single set keeps its name."""
    if "{" in template:
        return fill(template, pset, "name")
    return "_".join([template, *(short_value(pset[k]) for k in varying if k in pset)])


def render_label(ref: str, pset: dict[str, Any] | None) -> str:
    """What a unit from code records as its ``source_path``: the reference, with the call's arguments."""
    if not pset:
        return ref
    return f"{ref}({', '.join(f'{k}={v!r}' for k, v in pset.items())})"


# ------------------------------------------------------------------ flags as libraries write them
#: Flag spellings (``-x``/``--x``, ``=value`` or a separate value) -> ProgramOptions field and kind.
_FLAGS: dict[str, tuple[str, str]] = {
    "D": ("define_macro", "macro"), "define-macro": ("define_macro", "macro"),
    "std": ("std", "str"),
    "use_fast_math": ("use_fast_math", "true"), "use-fast-math": ("use_fast_math", "true"),
    "lineinfo": ("lineinfo", "true"), "generate-line-info": ("lineinfo", "true"),
    "maxrregcount": ("max_register_count", "int"),
    "I": ("include_dirs", "dir"), "include-path": ("include_dirs", "dir"),
    "ftz": ("ftz", "bool"), "prec-div": ("prec_div", "bool"), "prec_div": ("prec_div", "bool"),
    "prec-sqrt": ("prec_sqrt", "bool"), "prec_sqrt": ("prec_sqrt", "bool"), "fmad": ("fma", "bool"),
    "G": ("debug", "true"), "device-debug": ("debug", "true"),
    "restrict": ("restrict", "true"), "dopt": ("device_code_optimize", "onoff"),
}
_ARCH_FLAGS = ("arch", "gpu-architecture", "gpu-name", "code")
_BOOL_WORDS = {"true": True, "false": False}


def _split_flag(token: str) -> tuple[str, str | None]:
    """``--maxrregcount=32`` -> ("maxrregcount", "32"); ``-DN=1`` -> ("D", "N=1"); ``-Iinc`` -> ("I", "inc")."""
    body = token.lstrip("-")
    if token.startswith("-") and not token.startswith("--") and body[:1] in ("D", "I") and len(body) > 1 \
            and body not in _FLAGS:
        return body[0], body[1:]
    name, sep, value = body.partition("=")
    return name, (value if sep else None)


def flags_to_options(flags: list[Any]) -> tuple[dict[str, Any], list[str]]:
    """The ProgramOptions fields (and ``-I`` include dirs) a list of NVRTC command-line flags means, in the
    form the mapping spelling writes them, so both spellings give one content key: ``["-std=c++17",
    "-DN=4", "--use_fast_math"]`` is ``{std: c++17, define_macro: "N=4", use_fast_math: true}`` (several
    ``-D`` give a list). The architecture is refused: aot sets it from ``--sm``."""
    if len(flags) > MAX_LIST_LEN:
        raise SpecError(f"lists {len(flags)} flags, over the limit of {MAX_LIST_LEN}", "options")
    options: dict[str, Any] = {}
    macros: list[str] = []
    dirs: list[str] = []
    i = 0
    while i < len(flags):
        token = flags[i]
        i += 1
        if not isinstance(token, str) or not token.startswith("-") or _text_problem(token, 4096):
            raise SpecError(f"flag {short(token)} is not an NVRTC command-line flag ('-DNAME=1', '-std=c++17')",
                            "options")
        name, value = _split_flag(token)
        if name in _ARCH_FLAGS or name.startswith("arch"):
            raise SpecError(f"{short(token)}: aot sets the GPU architecture itself, from 'aot build --sm' (one "
                            f"cubin per SM plus PTX); drop this flag", "options")
        if name not in _FLAGS:
            raise SpecError(f"unknown NVRTC flag {short(token)}{hint(name, _FLAGS)}; aot accepts: "
                            f"{', '.join('-' + k if len(k) == 1 else '--' + k for k in _FLAGS)}", "options")
        field, kind = _FLAGS[name]
        if kind in ("true",):
            if value is not None:
                raise SpecError(f"flag {short(token)} takes no value", "options")
            options[field] = True
            continue
        if value is None:  # the value is the next token: "-D N=1", "--maxrregcount 32"
            if i >= len(flags) or not isinstance(flags[i], str) or flags[i].startswith("-"):
                raise SpecError(f"flag {short(token)} needs a value", "options")
            value = flags[i]
            i += 1
        if kind == "macro":
            macros.append(value)
        elif kind == "dir":
            dirs.append(value)
        elif kind == "str":
            options[field] = value
        elif kind == "int":
            if not (value.isascii() and value.isdigit() and len(value) <= 4):
                raise SpecError(f"flag {short(token)} needs an integer", "options")
            options[field] = int(value)
        elif kind == "bool":
            if value not in _BOOL_WORDS:
                raise SpecError(f"flag {short(token)} takes true or false", "options")
            options[field] = _BOOL_WORDS[value]
        elif kind == "onoff":
            if value not in ("on", "off"):
                raise SpecError(f"flag {short(token)} takes on or off", "options")
            options[field] = value == "on"
    if macros:
        options["define_macro"] = macros[0] if len(macros) == 1 else macros
    return options, dirs
