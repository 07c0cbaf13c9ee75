"""Build the cccl-legacy answers (issue 44): cuda.compute's NVRTC compiles and nvJitLink links, recorded
while cuda-cccl < 1.1.0 builds each spec on a driverless host (docs/build.md "CCCL releases without serialize").

Runs in a process of its own (``python -m aot.build.cccl_legacy_build``): the recording shims must be
loaded before cuda.compute's C library. On a host without a driver the stand-in libcuda plays it; the
release's build then fails at ``cuLibraryLoadData`` (no device), after the compile and the link it is here
for: a spec counts as built when both were recorded. The device's compute capability, which the release
reads from the current device, is the target SM's (cuda.compute's ``CudaDevice``, its cache's ``Device``,
and numba's current device, which its ``compile`` of the operators' LTO-IR asks).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import tempfile
from importlib import metadata
from pathlib import Path

from ..runtime.adapters import cccl_legacy, cccl_legacy_ops

#: The operators a spec may name by word (Python callables, compiled by numba like a library's own lambdas);
#: anything with a dot is ``package.module.function``: the library's own operator, imported from its module,
#: so numba compiles it under the same module and name as the library's call does (its LTO-IR names both).
OPS = {"plus": lambda a, b: a + b, "maximum": lambda a, b: a if a > b else b,
       "minimum": lambda a, b: a if a < b else b, "negate": lambda a: -a, "square": lambda a: a * a}


def operator(name: str):
    """The callable a spec names (a word of OPS, or ``package.module.function``)."""
    if "." not in name:
        return OPS[name]
    import importlib
    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def _stand_in_driver(tmp: Path) -> None:
    """Preload aot's stand-in libcuda where no driver loads (a real driver always wins)."""
    try:
        ctypes.CDLL("libcuda.so.1", mode=os.RTLD_GLOBAL)
        return
    except OSError:
        pass
    import subprocess

    from ..runtime.loader.stand_ins import _patches_dir, compiler
    lib = tmp / "libcuda.so.1"
    subprocess.run([*compiler(), "-O2", "-fPIC", "-shared", "-o", str(lib), str(_patches_dir() / "libcuda_stub.c"),
                    "-Wl,-soname,libcuda.so.1"], check=True, capture_output=True)
    ctypes.CDLL(str(lib), mode=os.RTLD_GLOBAL)


def _target_cc(sm: int) -> None:
    """Make the release build for ``sm`` whatever (or whether) the device is."""
    import cuda.compute._caching as caching
    import cuda.compute._cccl_interop as interop
    dev = type("TargetDevice", (), {"compute_capability": (sm // 10, sm % 10)})
    interop.CudaDevice = caching.Device = lambda *a, **k: dev()
    # these releases compile each operator with ``numba.cuda.compile(..., output="ltoir")`` and no ``cc``: numba-cuda
    # then asks its current context's device (0.26: ``CUDACodeLibrary._ensure_cc``, which adds "a" from 9.0 on,
    # so an H200 gets compute_90a). Its context is given the target's device here, and numba's own rule runs:
    # forcing ``cc=(9, 0)`` instead gave compute_90 bytes no device process compiles (every link then missed)
    from numba.cuda.cudadrv import devices
    context = type("TargetContext", (), {"device": dev()})()
    devices.get_context = lambda *a, **k: context
    # operators compiled to content-named bytes, as the serving process compiles them (cccl_legacy_activate)
    from ..runtime.adapters.cccl_legacy_activate import canonical_operator_names
    canonical_operator_names()


class _Fake:
    """A device array as far as cuda.compute's build looks (dtype and shape; never dereferenced)."""

    def __init__(self, dtype: str):
        import numpy as np
        self.__cuda_array_interface__ = {"shape": (1,), "typestr": np.dtype(dtype).str, "data": (0, False),
                                         "version": 3, "strides": None}


def _value(dtype: str, text: str):
    import numpy as np
    return np.array([float(text)], dtype=dtype)


#: family -> (fields after the dtype, the factory call). Each builds with stand-in arrays of the spec's dtype.
FAMILIES = {
    "reduce": (("op", "init"), lambda a, dt, f: a.make_reduce_into(
        d_in=_Fake(dt), d_out=_Fake(dt), op=operator(f["op"]), h_init=_value(dt, f["init"]))),
    "inclusive_scan": (("op", "init"), lambda a, dt, f: a.make_inclusive_scan(
        d_in=_Fake(dt), d_out=_Fake(dt), op=operator(f["op"]), init_value=_value(dt, f["init"]))),
    "exclusive_scan": (("op", "init"), lambda a, dt, f: a.make_exclusive_scan(
        d_in=_Fake(dt), d_out=_Fake(dt), op=operator(f["op"]), init_value=_value(dt, f["init"]))),
    "unary_transform": (("op",), lambda a, dt, f: a.make_unary_transform(
        d_in=_Fake(dt), d_out=_Fake(dt), op=operator(f["op"]))),
    "radix_sort": (("order",), lambda a, dt, f: a.make_radix_sort(
        d_in_keys=_Fake(dt), d_out_keys=_Fake(dt), d_in_values=None, d_out_values=None,
        order=getattr(a.SortOrder, f["order"].upper()))),
    "binary_transform": (("op",), lambda a, dt, f: a.make_binary_transform(
        d_in1=_Fake(dt), d_in2=_Fake(dt), d_out=_Fake(dt), op=operator(f["op"]))),
    # offsets: the dtype of the start and end offset arrays (a segment's bounds), then the operator and init
    "segmented_reduce": (("offsets", "op", "init"), lambda a, dt, f: a.make_segmented_reduce(
        d_in=_Fake(dt), d_out=_Fake(dt), start_offsets_in=_Fake(f["offsets"]), end_offsets_in=_Fake(f["offsets"]),
        op=operator(f["op"]), h_init=_value(dt, f["init"]))),
}
#: Not built: merge_sort (0.6.0's build asks the driver something before it compiles, error 999 on the stand-in).


def parse_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """``family:dtype:field...`` -> (family, dtype, fields); ValueError naming the spec and what is wrong."""
    family, _, rest = spec.partition(":")
    if family not in FAMILIES:
        raise ValueError(f"{spec}: family {family!r} is not built for releases without serialize "
                         f"(known: {', '.join(sorted(FAMILIES))})")
    names = FAMILIES[family][0]
    parts = rest.split(":") if rest else []
    if len(parts) != 1 + len(names):
        raise ValueError(f"{spec}: {family} takes {family}:dtype:{':'.join(names)}")
    return family, parts[0], dict(zip(names, parts[1:]))


def build_spec(spec: str) -> None:
    """Run the release's factory for ``spec``; the build's failure after the link (no device) is expected."""
    from cuda.compute import algorithms
    family, dtype, f = parse_spec(spec)
    try:
        FAMILIES[family][1](algorithms, dtype, f)
    except RuntimeError:
        pass  # no device: the load after the link fails; what was recorded says whether the build ran


def build_reduce(dtype: str, op: str, init: float) -> None:
    build_spec(f"reduce:{dtype}:{op}:{init}")


def record(specs: list[str], sm: int, out: Path, major: int | None = None) -> dict[str, int]:
    """Build each spec (``reduce:int32:plus:0``, see FAMILIES) for ``sm`` under CUDA ``major`` (default: the
    one cuda.compute's C library is picked for here, from ``cuda-bindings``); add every answer to the set at
    ``out`` (its manifest lists them: :mod:`aot.build.legacy_set`). Returns spec -> answers recorded (a spec
    with fewer than 2, a compile and a link, did not build)."""
    from ..runtime.adapters.cccl_legacy_files import installed_major
    from . import legacy_set
    if major is None:
        major = installed_major()
        if major is None:
            raise RuntimeError("aot: the installed cuda-bindings is neither CUDA 12 nor 13")
    for spec in specs:
        parse_spec(spec)  # every spec checked before anything is compiled or written
    cuda_cccl = metadata.version("cuda-cccl")
    got: list[tuple[str, bytes, bytes, str]] = []
    current = [""]
    with tempfile.TemporaryDirectory(prefix="aot-legacy-") as tmp:
        _stand_in_driver(Path(tmp))
        shims = cccl_legacy.Shims(cccl_legacy.build_shims(major, Path(tmp)), cccl_legacy.real_libs(major),
                                  record=lambda k, i, o: got.append((k, i, o, current[0])), major=major)
        # the operators' LTO-IR numba compiles, recorded under the key the serving process computes
        cccl_legacy_ops.bind(shims, lambda k, o: got.append((k, cccl_legacy_ops.OP_TAG, o, current[0])))
        _target_cc(sm)
        counts = {}
        for spec in specs:
            before, current[0] = len(got), spec
            build_spec(spec)
            counts[spec] = len(got) - before
    if shims.refusals:
        raise RuntimeError("aot: inputs the key cannot cover: " + "; ".join(sorted(set(shims.refusals))))
    files = []
    for key, inputs, answer, spec in got:
        kind = ("numba-ltoir" if inputs == cccl_legacy_ops.OP_TAG else
                "nvrtc" if inputs[8:8 + len(cccl_legacy.NVRTC_TAG)] == cccl_legacy.NVRTC_TAG else "nvjitlink")
        files.append((key, kind, spec, cccl_legacy.encode_entry(key, kind, cuda_cccl, answer)))
    legacy_set.add_answers(out, cuda_cccl, legacy_set.producer(), sm, specs, files)
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m aot.build.cccl_legacy_build")
    ap.add_argument("--sm", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("specs", nargs="+", help="family:dtype:fields, e.g. reduce:int32:plus:0, radix_sort:uint32:"
                    "ascending, unary_transform:float32:negate, inclusive_scan:int64:mylib.ops.add:0")
    args = ap.parse_args(argv)
    counts = record(args.specs, args.sm, args.out)
    bad = [s for s, n in counts.items() if n < 2]
    for s, n in counts.items():
        print(f"{s}\t{n} answers")
    return 1 if bad else 0


if __name__ == "__main__":
    # The operators' LTO-IR names their module: build them as ``aot.build.cccl_legacy_build``, never ``__main__``.
    from aot.build import cccl_legacy_build
    raise SystemExit(cccl_legacy_build.main())
