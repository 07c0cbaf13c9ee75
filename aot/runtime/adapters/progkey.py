"""cuda.core's program-cache key for a library's own compile of an NVRTC unit (issue 28).

Shared by the build, which records the key in each NVRTC manifest entry (:mod:`aot.build.progkeys`), and
the runtime, which derives it again where this process's NVRTC differs from the build host's
(:mod:`aot.runtime.adapters.program_cache`). What cuda.core 1.2's ``make_program_cache_key`` covers for
``code_type="c++"``: its key-schema number; the NVRTC ``major.minor`` that ``nvrtcVersion`` reports (a failed
probe hashes the exception's class name instead); code and target type; the source text; the flags
``ProgramOptions.as_bytes("nvrtc", target)`` renders (``-arch=sm_90`` among them: the arch is whatever the
options say, the current device's only when the caller left ``arch`` unset); the name expressions; the
program ``name`` (``"default_program"`` unless the caller names it); ``extra_digest``. Not the driver, not
the device, not cuda.core's version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # the first packaged hit keys from the index's plain fields (issue 42): no spec module
    from ...core.spec import NvrtcUnit

#: ProgramOptions fields whose effect the packaged image does not share with the library's compile: the
#: line table names aot's ``<unit>.cu`` where the library's compile names its own program.
_NOT_SAME_BYTES = ("lineinfo", "debug")
#: cuda.core's default ``ProgramOptions.name``.
DEFAULT_NAME = "default_program"


def program_kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    """The ProgramOptions fields (besides ``arch`` and ``name``) of the library's own compile of a unit with
    ``options`` (its ``NvrtcUnit.options``)."""
    opts = dict(options)
    if isinstance(opts.get("define_macro"), dict):
        opts["define_macro"] = [(k, str(v)) for k, v in opts["define_macro"].items()]
    return opts


def eligible(unit: NvrtcUnit, includes: bool = True) -> bool:
    """Whether ``Program.compile(cache=...)`` can be served ``unit``'s packaged bytes: no name expressions
    (cuda.core refuses ``cache=`` with them), no headers (an include path needs an ``extra_digest``), no
    ``lineinfo``/``debug`` (the bytes would name another file), and (``includes``) a source that includes
    nothing: cuda.core's key does not cover the text of a header such as ``cuda_fp16.h``, which the user's
    NVRTC reads from its own install (issue 46; such a unit serves through :func:`aot.by_source`, which checks
    the headers, or by name)."""
    from ...core.headerclosure import includes_anything
    return not (unit.headers or unit.name_expressions() or any(unit.options.get(k) for k in _NOT_SAME_BYTES)
                or (includes and includes_anything(unit.source)))


def arch_of(sm: int, kind: str) -> str:
    """The ``arch`` a compile to ``kind`` for ``sm`` names: ``sm_90`` for a cubin, ``compute_90`` for PTX."""
    return f"compute_{sm}" if kind == "ptx" else f"sm_{sm}"


def program_cache_key(unit: NvrtcUnit, sm: int, kind: str, name: str = DEFAULT_NAME) -> bytes:
    """cuda.core's key for ``Program(unit.source, "c++", ProgramOptions(arch, name, ...)).compile(kind)``
    with the NVRTC this process loads. ValueError/TypeError where cuda.core refuses to key it."""
    return key_of(unit.source, unit.options, sm, kind, name)


def key_of(source: str, options: Mapping[str, Any], sm: int, kind: str, name: str = DEFAULT_NAME) -> bytes:
    """:func:`program_cache_key` of a unit's ``source`` and ``options`` (an index's, or a spec's)."""
    from cuda.core import ProgramOptions  # 0.3 s: only where a program cache is used or a manifest written
    from cuda.core.utils import make_program_cache_key
    opts = ProgramOptions(arch=arch_of(sm, kind), name=name, **program_kwargs(options))
    return make_program_cache_key(code=source, code_type="c++", options=opts, target_type=kind)


def nvrtc_version() -> str | None:
    """``"13.0"``: what cuda.core's key probe reports for the NVRTC this process loads; ``None`` if none
    answers (no NVRTC, or aot's stand-in)."""
    try:
        from cuda.bindings import nvrtc  # cheap; loads libnvrtc on the call below
        err, major, minor = nvrtc.nvrtcVersion()
    except Exception:  # noqa: BLE001 - no NVRTC: cuda.core's probe fails the same way
        return None
    return f"{major}.{minor}" if err == nvrtc.nvrtcResult.NVRTC_SUCCESS else None
