"""One build item, (spec, SM, payload kind) -> payload bytes. Runs inside a build worker process.

CCCL: ``make_<algo>(..., compute_capability=[sm])`` over ``cuda.compute.ProxyArray`` placeholders,
then ``serialize()``; one single-SM blob per item, because a multi-SM blob only runs on a device whose
cc is exactly one of its keys while a single-SM blob also runs on a higher minor of the same major.
NVRTC: a cubin per SM through ``cuda.core.Program``; PTX for the lowest SM through NVRTC directly
(cuda.core's PTX path asks the driver whether it could load the PTX, which a driverless host cannot
answer; the options are still rendered by cuda.core's ``ProgramOptions``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .spec import CcclSpec, NvrtcUnit

#: cuda.compute factory and how each spec field maps onto its keyword arguments.
_ALGO_FACTORY = {
    "exclusive_scan": "make_exclusive_scan",
    "inclusive_scan": "make_inclusive_scan",
    "reduce": "make_reduce_into",
    "segmented_reduce": "make_segmented_reduce",
    "select": "make_select",
    "lower_bound": "make_lower_bound",
    "upper_bound": "make_upper_bound",
    "radix_sort": "make_radix_sort",
    "merge_sort": "make_merge_sort",
    "unique_by_key": "make_unique_by_key",
}


def init_value(dtype: str, init: Any):
    """The spec's ``init`` as a 1-element numpy array of ``dtype`` ('inf', '-inf', 'min', 'max' allowed)."""
    import numpy as np
    dt = np.dtype(dtype)
    if isinstance(init, str):
        if init in ("inf", "-inf"):
            value = float(init)
        else:
            info = np.finfo(dt) if dt.kind == "f" else np.iinfo(dt)
            value = info.min if init == "min" else info.max
    else:
        value = init
    return np.array([value], dtype=dt)


def operator(op: str):
    """A built-in name -> ``cuda.compute.OpKind``; a lambda source -> the Python function."""
    import cuda.compute as cc
    if op.startswith("lambda"):
        from .spec import lambda_problem
        problem = lambda_problem(op)  # checked again here: specs also come from manifests on disk
        if problem:
            raise ValueError(f"refusing operator {op!r}: {problem}")
        return eval(compile(op, "<aot-op>", "eval"), {"__builtins__": {}})  # noqa: S307 - vetted above
    return cc.OpKind[op.upper()]


def algorithm_kwargs(spec: CcclSpec, array: Callable[[str], Any]) -> tuple[str, dict[str, Any]]:
    """The factory name and keyword arguments for ``spec``; ``array(dtype)`` makes each array argument
    (``ProxyArray`` for AoT builds, real device arrays elsewhere)."""
    import cuda.compute as cc
    p: Mapping[str, Any] = spec.params
    a = spec.algorithm
    dt = p["dtype"]
    if a in ("exclusive_scan", "inclusive_scan"):
        kw = dict(d_in=array(dt), d_out=array(dt), op=operator(p["op"]), init_value=init_value(dt, p["init"]))
    elif a == "reduce":
        kw = dict(d_in=array(dt), d_out=array(dt), op=operator(p["op"]), h_init=init_value(dt, p["init"]))
    elif a == "segmented_reduce":
        kw = dict(d_in=array(dt), d_out=array(dt), start_offsets_in=array(p["offset_dtype"]),
                  end_offsets_in=array(p["offset_dtype"]), op=operator(p["op"]), h_init=init_value(dt, p["init"]))
    elif a == "select":
        kw = dict(d_in=array(dt), d_out=array(dt), d_num_selected_out=array(p["count_dtype"]),
                  cond=operator(p["op"]))
    elif a in ("lower_bound", "upper_bound"):
        kw = dict(d_data=array(dt), d_values=array(dt), d_out=array(p["index_dtype"]))
    elif a == "radix_sort":
        vd = p["value_dtype"]
        kw = dict(d_in_keys=array(dt), d_out_keys=array(dt), d_in_values=array(vd) if vd else None,
                  d_out_values=array(vd) if vd else None,
                  order=cc.SortOrder[p["order"].upper()])
    elif a == "merge_sort":
        vd = p["value_dtype"]
        kw = dict(d_in_keys=array(dt), d_in_values=array(vd) if vd else None, d_out_keys=array(dt),
                  d_out_values=array(vd) if vd else None, op=operator(p["op"]))
    elif a == "unique_by_key":
        vd = p["value_dtype"]
        kw = dict(d_in_keys=array(dt), d_in_items=array(vd), d_out_keys=array(dt), d_out_items=array(vd),
                  d_out_num_selected=array(p["count_dtype"]), op=operator(p["op"]))
    else:  # matrix validation makes this unreachable
        raise ValueError(f"unknown algorithm {a!r}")
    return _ALGO_FACTORY[a], kw


def build_cccl(spec: CcclSpec, sm: int):
    """The cuda.compute algorithm object for ``spec`` on ``sm`` (AoT, from ProxyArray placeholders)."""
    import numpy as np
    from .toolchain import cccl_ready
    cccl_ready()
    import cuda.compute as cc
    factory, kw = algorithm_kwargs(spec, lambda dtype: cc.ProxyArray(np.dtype(dtype)))
    return getattr(cc, factory)(**kw, compute_capability=[sm])


def compile_cccl(spec: CcclSpec, sm: int) -> bytes:
    """The serialized blob, with per-process symbol names normalized (see :mod:`aot.normalize`)."""
    import os
    from .normalize import normalize_internal_symbols
    return normalize_internal_symbols(bytes(build_cccl(spec, sm).serialize()), os.getpid())[0]


def program_options(unit: NvrtcUnit, arch: str):
    from cuda.core import ProgramOptions
    opts = dict(unit.options)
    if "define_macro" in opts and isinstance(opts["define_macro"], dict):
        opts["define_macro"] = [(k, str(v)) for k, v in opts["define_macro"].items()]
    return ProgramOptions(arch=arch, name=f"{unit.name}.cu", **opts)


def compile_nvrtc(unit: NvrtcUnit, sm: int, kind: str) -> bytes:
    if kind == "cubin":
        from cuda.core import Program
        prog = Program(unit.source, "c++", program_options(unit, f"sm_{sm}"))
        try:
            import os
            from .normalize import normalize_internal_symbols
            return normalize_internal_symbols(bytes(prog.compile("cubin").code), os.getpid())[0]
        finally:
            prog.close()
    if kind == "ptx":
        return _nvrtc_ptx(unit, sm)
    raise ValueError(f"unknown NVRTC payload kind {kind!r}")


def _nvrtc_ptx(unit: NvrtcUnit, sm: int) -> bytes:
    from cuda.bindings import nvrtc
    options = program_options(unit, f"compute_{sm}").as_bytes("nvrtc", f"compute_{sm}")

    def check(result, what):
        err = result[0] if isinstance(result, tuple) else result
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"NVRTC {what} failed: {err.name}")
        return result[1:] if isinstance(result, tuple) else ()

    (prog,) = check(nvrtc.nvrtcCreateProgram(unit.source.encode(), f"{unit.name}.cu".encode(), 0, [], []),
                    "create")
    try:
        err = nvrtc.nvrtcCompileProgram(prog, len(options), options)[0]
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            (size,) = check(nvrtc.nvrtcGetProgramLogSize(prog), "log size")
            log = b" " * size
            check(nvrtc.nvrtcGetProgramLog(prog, log), "log")
            text = log.rstrip(b"\0").decode(errors="replace")
            raise RuntimeError(f"NVRTC compilation of {unit.source_path} failed:\n{text}")
        (size,) = check(nvrtc.nvrtcGetPTXSize(prog), "PTX size")
        buf = b" " * size
        check(nvrtc.nvrtcGetPTX(prog, buf), "PTX")
        return buf.rstrip(b"\0")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
