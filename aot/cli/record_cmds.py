"""``aot record``: run a command with the recording hook and write the matrix of what it compiled."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.errors import UsageError


def record_parser(sub) -> None:  # noqa: ANN001 - argparse's private subparsers type
    r = sub.add_parser("record", help="run a command (a test suite, a script) and write the build matrix of "
                       "every NVRTC compile and cuda.compute build it makes, each source named where it lives")
    r.add_argument("--out", type=Path, default=Path("build_matrix.yaml"),
                   help="matrix to write (default: build_matrix.yaml)")
    r.add_argument("--package", action="append", default=None, help="the library's import package whose "
                   "strings and functions name the sources (repeatable; default: [tool.aot] package of "
                   "./pyproject.toml)")
    r.add_argument("--stand-in-driver", action="store_true", help="on a host without a driver, load aot's "
                   "stand-in libcuda into the command's processes (cuda.compute then builds algorithms for a "
                   "compute_capability it is given)")
    r.add_argument("--no-launches", action="store_true", help="keep no numba-cuda launches (by default, on a "
                   "GPU, one small launch per kernel signature is kept beside the matrix, in NAME.launches/, "
                   "for aot verify --gpu --launches)")
    r.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                   help="the command to record and its arguments")


def _packages(args) -> list[str]:  # noqa: ANN001
    if args.package:
        return list(args.package)
    import tomllib
    try:  # only the package's name: the rest of [tool.aot] (its matrix) may not exist yet
        package = tomllib.loads(Path("pyproject.toml").read_text(encoding="utf-8"))["tool"]["aot"]["package"]
        if isinstance(package, str) and package:
            return [package]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    raise UsageError("aot record: name the library's package with --package NAME (no [tool.aot] package "
                     "in ./pyproject.toml)")


def cmd_record(args) -> int:  # noqa: ANN001
    from ..record.record import comment, record
    command = list(args.argv)
    if command[:1] == ["--"]:
        command = command[1:]
    packages = _packages(args)
    stand_in = None
    if args.stand_in_driver:
        from ..build.toolchain import choose_driver
        stand_in = choose_driver().path  # None where a real driver is present: it wins
    rec = record(command, args.out, packages, stand_in, launches=not args.no_launches)
    if rec.interrupted:
        print(f"aot record: interrupted ({rec.interrupted}, which the command got too); the command "
              f"{rec.describe_exit()}; nothing written")
        return rec.exit_code or 130
    units = sum(len(e["params"]) if isinstance(e.get("params"), list) else
                max((len(v) for v in e.get("params", {}).values() if isinstance(v, list)), default=1)
                for e in rec.nvrtc)
    numba = sum(len(e["signatures"]) for e in rec.numba)
    print(f"aot record: {rec.compiles} NVRTC compiles, {rec.seen.get('numba', 0)} numba-cuda kernel compiles, "
          f"{rec.builds} cuda.compute builds seen; wrote {args.out}: {len(rec.nvrtc)} NVRTC entries ({units} units), "
          f"{len(rec.numba)} numba entries ({numba} signatures), {len(rec.cccl)} CCCL specs"
          + (f", {len(rec.cupy)} CuPy entries ({rec.seen['cupy']} CuPy compiles seen)" if rec.seen.get("cupy") else "")
          + (f", {len(rec.triton)} Triton entries ({rec.seen['triton']} Triton compiles seen)"
             if rec.seen.get("triton") else ""))
    if rec.launches:
        print(f"kept {len(rec.launches)} launch(es) in {args.out.with_name(rec.launches_folder)}/")
    if rec.unnamed:
        print(f"not named ({len(rec.unnamed)}; listed at the top of {args.out}):")
        for line in rec.unnamed:
            print(f"  - {comment(line)}")
    for note in rec.notes[:20]:
        print(f"note: {comment(note)}")
    if rec.returncode:
        print(f"aot record: the command {rec.describe_exit()}")
    return rec.exit_code
