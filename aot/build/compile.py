"""One build item, (spec, SM, payload kind) -> payload bytes. Runs inside a build worker process.

CCCL: ``make_<algo>(..., compute_capability=[sm])`` over ``cuda.compute.ProxyArray`` placeholders,
then ``serialize()``; one single-SM blob per item, because a multi-SM blob only runs on a device whose
cc is exactly one of its keys while a single-SM blob also runs on a higher minor of the same major.
NVRTC: a cubin per SM through ``cuda.core.Program``; PTX for the lowest SM through NVRTC directly
(cuda.core's PTX path asks the driver whether it could load the PTX, which a driverless host cannot
answer; the options are still rendered by cuda.core's ``ProgramOptions``).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from ..core.errors import without_frames
from ..core.spec import CcclSpec, NvrtcUnit
from ..runtime.adapters.hdrkey import cccl_dirs
from .image_symbols import kernel_symbols

def init_value(dtype: str, init: Any, types: Mapping[str, Any] | None = None):
    """The spec's ``init`` as a 1-element numpy array of ``dtype`` ('inf', '-inf', 'min', 'max' allowed)."""
    from ..algorithms import init_value as _init_value
    return _init_value(dtype, init, types)


def operator(op: str):
    """A built-in name -> ``cuda.compute.OpKind``; a lambda source -> the Python function; an operator from
    code (``"pkg.mod:func"``) -> that function (the caller decided the module may be imported: the matrix
    being built, or the package that owns the artifacts, see :func:`aot.runtime.loader.sources.code_spec`)."""
    import cuda.compute as cc
    if op.startswith("lambda"):
        from ..core.oplang import lambda_problem
        problem = lambda_problem(op)  # checked again here: specs also come from manifests on disk
        if problem:
            raise ValueError(f"refusing operator {op!r}: {problem}")
        return eval(compile(op, "<aot-op>", "eval"), {"__builtins__": {}})  # noqa: S307 - vetted above
    from ..core.oplang import is_code_ref
    if is_code_ref(op):
        from ..core.opref import resolve
        return resolve(op)
    return cc.OpKind[op.upper()]


class FactoryArgs:
    """What a definition's ``factory_kwargs`` is given (:class:`aot.algorithms.Build`): makers for each kind
    of argument.

    ``array(dtype)`` is a ``ProxyArray`` for AoT builds and a real device array elsewhere (benchmarks);
    ``dtype`` may be a struct type's name (``types``). The rest import cuda.compute lazily."""

    def __init__(self, array: Callable[[Any], Any], types: Mapping[str, Any] | None = None,
                 spec: CcclSpec | None = None, sm: int | None = None):
        from ..algorithms.forms import state_fields
        self._array = array
        self.types = dict(types or {})
        self._fields = state_fields(spec.params.get("state")) if spec is not None else ()
        self._sources = dict(spec.sources) if spec is not None else {}
        self._sm = sm

    def np_dtype(self, name: str):
        from ..algorithms import np_dtype
        return np_dtype(name, self.types)

    def array(self, dtype: str):
        return self._array(self.np_dtype(dtype))

    def value(self, dtype: str, init: Any):
        return init_value(dtype, init, self.types)

    def op(self, source: Any):
        """The operator as the factory takes it; with state or in C++ through :mod:`aot.build.operators`."""
        if not self._fields and not isinstance(source, dict):
            return operator(source)
        from .operators import operator_for
        return operator_for(source, self._fields, self._sources, self._sm, operator)

    def determinism(self, word: str):
        import cuda.compute as cc
        return cc.Determinism[word.upper()]

    def seq(self, p: Mapping[str, Any], seq: Any):
        """An array of the sequence's dtype, or the iterator its node describes (over placeholders)."""
        raw = p.get(seq.field, "array")
        if raw == "array":
            return self.array(seq.dtype(p))
        from .operators import iterator_arg
        return iterator_arg(raw, seq.dtype(p), self.types, seq.output, self.op)

    def order(self, order: str):
        import cuda.compute as cc
        return cc.SortOrder[order.upper()]

    def counting(self, dtype: str):
        """A counting iterator over ``dtype`` indices; its start is bound at call time."""
        import numpy as np
        import cuda.compute as cc
        return cc.CountingIterator(np.dtype(dtype).type(0))

    def input(self, p: Mapping[str, Any], dtype: str):
        """The input sequence: an array of ``dtype``, or the indices when ``input: counting``."""
        return self.counting(dtype) if p.get("input", "array") == "counting" else self.array(dtype)


def algorithm_kwargs(spec: CcclSpec, array: Callable[[Any], Any], sm: int | None = None) -> tuple[str, dict[str, Any]]:
    """The factory name and keyword arguments for ``spec`` (see :mod:`aot.algorithms`); ``array(dtype)``
    makes each array argument (``ProxyArray`` for AoT builds, real device arrays elsewhere)."""
    from ..algorithms import ALGORITHMS
    algo = ALGORITHMS[spec.algorithm]
    return algo.factory, algo.factory_kwargs(spec.params, FactoryArgs(array, spec.types, spec, sm))


def build_cccl(spec: CcclSpec, sm: int):
    """The cuda.compute algorithm object for ``spec`` on ``sm`` (AoT, from ProxyArray placeholders)."""
    import numpy as np
    from .toolchain import cccl_ready
    cccl_ready()
    import cuda.compute as cc
    import cccl_patches
    cccl_patches.restart_names()  # a blob's bytes must not depend on what this worker built before it
    factory, kw = algorithm_kwargs(spec, lambda dtype: cc.ProxyArray(np.dtype(dtype)), sm)
    if spec.code:
        from ..core.opref import check_digests
        check_digests(spec)  # the source built is the source the content key names
    return getattr(cc, factory)(**kw, compute_capability=[sm])


def compile_cccl(spec: CcclSpec, sm: int) -> bytes:
    """The serialized blob, with per-process symbol names normalized (see :mod:`aot.normalize`)."""
    import os
    from .normalize import normalize_internal_symbols
    return normalize_internal_symbols(bytes(build_cccl(spec, sm).serialize()), os.getpid())[0]


@contextlib.contextmanager
def headers_dir(unit: NvrtcUnit) -> Iterator[str | None]:
    """The unit's headers (from its definition, not from disk: a JIT elsewhere compiles the same bytes)
    written into a fresh private directory for the compile; ``None`` when it has none."""
    if not unit.headers:
        yield None
        return
    import tempfile
    from ..core.rules import header_path_ok
    with tempfile.TemporaryDirectory(prefix="aot-headers-") as tmp:
        for rel, text in unit.headers.items():
            if not header_path_ok(rel):  # the definition was validated; checked again before writing
                raise ValueError(f"{unit.name}: refusing header path {rel!r}")
            path = Path(tmp, *rel.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        yield tmp


def program_options(unit: NvrtcUnit, arch: str, headers: str | None = None):
    from cuda.core import ProgramOptions
    opts = dict(unit.options)
    if "define_macro" in opts and isinstance(opts["define_macro"], dict):
        opts["define_macro"] = [(k, str(v)) for k, v in opts["define_macro"].items()]
    include = ([headers] if headers else []) + list(cccl_dirs())
    return ProgramOptions(arch=arch, name=f"{unit.name}.cu", include_path=include or None, **opts)


def compile_nvrtc(unit: NvrtcUnit, sm: int, kind: str) -> bytes:
    return compile_nvrtc_item(unit, sm, kind)[0]


def compile_nvrtc_item(unit: NvrtcUnit, sm: int, kind: str) -> tuple[bytes, dict[str, str]]:
    """(payload, symbols): ``symbols`` maps each templated kernel's name expression to its lowered
    (mangled) name, which the artifact header records so the loader finds ``axpy<float>`` again."""
    exprs = unit.name_expressions()
    with headers_dir(unit) as hdr:
        if kind == "cubin":
            import os
            from .normalize import normalize_internal_symbols
            code = compile_program(unit.source, program_options(unit, f"sm_{sm}", hdr), "cubin", exprs)
            symbols = {e: _as_str(code.symbol_mapping[e]) for e in exprs}
            image = bytes(code.code)
            check_kernels(unit, image, symbols)
            return normalize_internal_symbols(image, os.getpid())[0], symbols
        if kind == "ptx":
            ptx, symbols = _nvrtc_ptx(unit, sm, hdr, exprs)
            check_kernels(unit, ptx, symbols)
            return ptx, symbols
    raise ValueError(f"unknown NVRTC payload kind {kind!r}")


class KernelNotDefined(ValueError):
    """A unit lists a kernel its compiled image does not define: the artifact would load and then fail at the
    library's lookup, on the user's GPU. The build refuses it instead, in one line naming the unit and kernel."""


def check_kernels(unit: NvrtcUnit, image: bytes, symbols: Mapping[str, str]) -> None:
    """Every kernel ``unit`` lists is an entry of ``image`` (a plain name as itself, a name expression as its
    lowered name), read from the image's symbol table or PTX entries (:mod:`aot.build.image_symbols`)."""
    defined = kernel_symbols(image)
    for k in unit.kernels:
        if symbols.get(k, k) not in defined:
            have = ", ".join(defined[:8]) + (", ..." if len(defined) > 8 else "") or "none"
            raise KernelNotDefined(f"{unit.name}: kernel {k!r} is not defined by the compiled {unit.source_path} "
                                   f"(its kernels: {have})")


def _as_str(v: str | bytes) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _nvrtc_ptx(unit: NvrtcUnit, sm: int, hdr: str | None = None,
               exprs: tuple[str, ...] = ()) -> tuple[bytes, dict[str, str]]:
    from cuda.bindings import nvrtc
    options = program_options(unit, f"compute_{sm}", hdr).as_bytes("nvrtc", f"compute_{sm}")

    def check(result, what):
        err = result[0] if isinstance(result, tuple) else result
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"NVRTC {what} failed: {err.name}")
        return result[1:] if isinstance(result, tuple) else ()

    (prog,) = check(nvrtc.nvrtcCreateProgram(unit.source.encode(), f"{unit.name}.cu".encode(), 0, [], []),
                    "create")
    try:
        for e in exprs:
            check(nvrtc.nvrtcAddNameExpression(prog, e.encode()), f"name expression {e!r}")
        err = nvrtc.nvrtcCompileProgram(prog, len(options), options)[0]
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            (size,) = check(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
            log = b" " * size
            check(nvrtc.nvrtcGetProgramLog(prog, log), "log")
            text = log.rstrip(b"\0").decode(errors="replace")
            raise RuntimeError(f"NVRTC compilation of {unit.source_path} failed:\n{text}")
        symbols = {e: _as_str(check(nvrtc.nvrtcGetLoweredName(prog, e.encode()), f"lowered name of {e!r}")[0])
                   for e in exprs}
        (size,) = check(nvrtc.nvrtcGetPTXSize(prog), "PTX size")
        buf = b" " * size
        check(nvrtc.nvrtcGetPTX(prog, buf), "PTX")
        return buf.rstrip(b"\0"), symbols
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def compile_program(source: str, opts, target: str, exprs: tuple[str, ...] = ()):
    """``cuda.core.Program(source).compile(target)``, the Program closed and gone before an error leaves.

    cuda.core's ``Program.__dealloc__`` raises when the cycle collector clears the Program first
    (cuda-python#2876: two "Exception ignored in: Program.__dealloc__" tracebacks under every compile
    error). An error's traceback holds the frame that holds the Program, and a caller that keeps the error
    in a cycle (a build worker's result, a report) hands that frame to the collector; so the error leaves
    without it (:func:`without_frames`) and the Program is freed here, by reference counting."""
    from cuda.core import Program  # function-level: cuda.core only where something compiles
    prog = Program(source, "c++", opts)
    try:
        return prog.compile(target, name_expressions=exprs)
    except Exception as e:  # noqa: BLE001 - re-raised below, once the Program is gone
        failure = e
    finally:
        prog.close()
    del prog
    raise without_frames(failure)

