"""Build the cccl-legacy answers (issue 44): cuda.compute's NVRTC compiles and nvJitLink links, recorded
while cuda-cccl < 1.1.0 builds each spec on a driverless host (docs/build.md "CCCL releases without serialize").

Runs in a process of its own (``python -m aot.build.cccl_legacy_build``): the recording shims must be
loaded before cuda.compute's C library. On a host without a driver the stand-in libcuda plays it; the
release's build then fails at ``cuLibraryLoadData`` (no device), after the compile and the link it is here
for: a spec counts as built when both were recorded. The device's compute capability, which the release
reads from the current device, is the target SM's (cuda.compute's ``CudaDevice``, its cache's ``Device``,
and numba's ``compile`` of the operators' LTO-IR).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import tempfile
from importlib import metadata
from pathlib import Path

from ..runtime.adapters import cccl_legacy

#: The operators a slice spec may name (Python callables, compiled by numba like a library's own lambdas).
OPS = {"plus": lambda a, b: a + b, "maximum": lambda a, b: a if a > b else b,
       "minimum": lambda a, b: a if a < b else b}


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
    import numba.cuda

    import cuda.compute._caching as caching
    import cuda.compute._cccl_interop as interop
    dev = type("TargetDevice", (), {"compute_capability": (sm // 10, sm % 10)})
    interop.CudaDevice = caching.Device = lambda *a, **k: dev()
    compile_ = numba.cuda.compile

    def compile_for_target(*a, **k):
        k.setdefault("cc", (sm // 10, sm % 10))
        return compile_(*a, **k)
    numba.cuda.compile = compile_for_target


class _Fake:
    """A device array as far as cuda.compute's build looks (dtype and shape; never dereferenced)."""

    def __init__(self, dtype: str):
        import numpy as np
        self.__cuda_array_interface__ = {"shape": (1,), "typestr": np.dtype(dtype).str, "data": (0, False),
                                         "version": 3, "strides": None}


def build_reduce(dtype: str, op: str, init: float) -> None:
    import numpy as np

    from cuda.compute import algorithms
    try:
        algorithms.make_reduce_into(d_in=_Fake(dtype), d_out=_Fake(dtype), op=OPS[op],
                                    h_init=np.array([init], dtype=dtype))
    except RuntimeError:
        pass  # no device: the load after the link fails; what was recorded says whether the build ran


def record(specs: list[str], sm: int, out: Path, major: int = 13) -> dict[str, int]:
    """Build each ``reduce:<dtype>:<op>:<init>`` spec for ``sm``; write every recorded answer under ``out``.
    Returns spec -> answers recorded (a spec with fewer than 2, a compile and a link, did not build)."""
    cuda_cccl = metadata.version("cuda-cccl")
    dest = out / "cccl-legacy" / f"cuda-cccl-{cuda_cccl}"
    dest.mkdir(parents=True, exist_ok=True)
    got: list[tuple[str, bytes, bytes]] = []
    with tempfile.TemporaryDirectory(prefix="aot-legacy-") as tmp:
        _stand_in_driver(Path(tmp))
        shims = cccl_legacy.Shims(cccl_legacy.build_shims(major, Path(tmp)), cccl_legacy.real_libs(major),
                                  record=lambda k, i, o: got.append((k, i, o)))
        _target_cc(sm)
        counts = {}
        for spec in specs:
            family, dtype, op, init = spec.split(":")
            if family != "reduce":
                raise ValueError(f"{spec}: only reduce specs are built for cuda-cccl {cuda_cccl} so far")
            before = len(got)
            build_reduce(dtype, op, float(init))
            counts[spec] = len(got) - before
    for key, inputs, answer in got:
        kind = "nvrtc" if inputs[8:8 + len(cccl_legacy.NVRTC_TAG)] == cccl_legacy.NVRTC_TAG else "nvjitlink"
        tmp_path = dest / f".{key}.tmp"
        tmp_path.write_bytes(cccl_legacy.encode_entry(key, kind, cuda_cccl, answer))
        tmp_path.replace(dest / f"{key}.aot")
    if shims.refusals:
        raise RuntimeError("aot: inputs the key cannot cover: " + "; ".join(sorted(set(shims.refusals))))
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m aot.build.cccl_legacy_build")
    ap.add_argument("--sm", type=int, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("specs", nargs="+", help="reduce:<dtype>:<op>:<init>")
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
