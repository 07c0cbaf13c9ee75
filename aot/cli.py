"""Command line: argument parsing and all printing. Library modules only raise and return data.

``main(argv)`` takes its arguments (tests call it directly), catches :class:`AotError` once, prints one
line and returns the error's exit code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from .errors import AotError, UsageError

DEFAULT_OUT = "aot-out"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m aot", description="Ahead-of-time builds of CCCL algorithms "
                                "and NVRTC kernels, packaged as artifacts; a loader that picks them up.")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="compile every spec of a build matrix for a list of SMs")
    b.add_argument("--matrix", type=Path, default=None, help="build matrix YAML (default: the bundled one)")
    b.add_argument("--sm", default="all", help="SMs: '80,89,90', 'native' or 'all' (default: all for the "
                   "installed CUDA major)")
    b.add_argument("--out", type=Path, default=Path(DEFAULT_OUT), help=f"output directory (default: {DEFAULT_OUT})")
    b.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: CPU count)")
    b.add_argument("--only", default=None, help="build only these specs: NAME[,NAME...]")
    b.add_argument("--keep-going", action="store_true", help="build every item even if some fail")
    b.add_argument("--force", action="store_true", help="rebuild items whose artifact is up to date")
    b.add_argument("--shard", default=None, help="build the K-th of N deterministic slices: K/N")
    b.add_argument("--force-stub-driver", action="store_true",
                   help="use the stand-in libcuda even if a real driver is present")
    b.add_argument("--quiet", "-q", action="store_true", help="no progress bar or table")

    v = sub.add_parser("validate", help="validate a build matrix and list its specs")
    v.add_argument("--matrix", type=Path, default=None)
    return p


def entry() -> None:
    """Console-script entry point (``aot ...``)."""
    sys.exit(main())


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # argparse already printed the usage error
        return int(e.code or 0)
    try:
        return {"build": cmd_build, "validate": cmd_validate}[args.command](args)
    except AotError as e:
        print(f"aot: error: {e}", file=sys.stderr)
        return e.return_code
    except KeyboardInterrupt:
        print("aot: interrupted", file=sys.stderr)
        return 130


def cmd_validate(args) -> int:
    from .matrix import load_matrix
    m = load_matrix(args.matrix)
    for s in m.specs:
        what = s.algorithm if s.family == "cccl" else ", ".join(s.kernels)
        print(f"{s.family:6} {s.name:32} {what}")
    print(f"{m.path}: {len(m.specs)} specs OK")
    return 0


def cmd_build(args) -> int:
    from ._env import FORCE_STUB, JOBS
    from .arch import parse_sm_list
    from .build import build, parse_shard, plan
    from .matrix import load_matrix
    from .toolchain import cuda_major, native_sm, nvrtc_supported_sms

    matrix = load_matrix(args.matrix)
    specs = matrix.select([n.strip() for n in args.only.split(",") if n.strip()] if args.only else None)
    major = cuda_major()
    want_native = "native" in args.sm.lower()
    sms = parse_sm_list(args.sm, cuda_major=major, native=native_sm() if want_native else None,
                        supported=nvrtc_supported_sms())
    jobs = args.jobs if args.jobs is not None else JOBS.get()
    if jobs < 0:
        raise UsageError("--jobs must be >= 1")
    shard = parse_shard(args.shard)
    n_items = len(plan(specs, sms, shard))

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    console = Console(stderr=True)
    progress = Progress(TextColumn("[bold]build"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("{task.description}"), console=console, disable=args.quiet)
    with progress:
        task = progress.add_task("", total=n_items)

        def on_event(kind, item, result):
            if kind == "start":
                progress.update(task, description=item.label)
            elif kind == "done":
                progress.advance(task)
                if result is not None and result.status == "failed":
                    progress.console.print(f"[red]failed[/red] {item.label}: {result.error.splitlines()[0]}")

        report = None
        try:
            report = build(specs, sms, args.out, jobs=jobs, force=args.force, keep_going=args.keep_going,
                           shard=shard, force_stub=args.force_stub_driver or FORCE_STUB.get(), on_event=on_event)
        finally:
            if report is None:
                _print_report_file(args.out, console, args.quiet)
    if not args.quiet:
        _print_report(report, console)
    return 0


def _print_report_file(out: Path, console, quiet: bool) -> None:
    import json
    from .build import REPORT_NAME
    try:
        data = json.loads((out / REPORT_NAME).read_text())
    except (OSError, ValueError):
        return
    if quiet:
        return
    from types import SimpleNamespace
    rep = SimpleNamespace(**data)
    rep.items = [SimpleNamespace(**i) for i in data["items"]]
    rep.counts = lambda: data["counts"]
    _print_report(rep, console)
    for i in rep.items:
        if i.status == "failed":
            console.print(f"[red]--- {i.name} sm_{i.sm} ({i.kind})[/red]\n{i.error}")


def _print_report(report, console) -> None:
    from rich.table import Table
    t = Table(title=f"aot build -> {report.out}", show_lines=False)
    for col, just in (("item", "left"), ("SM", "right"), ("kind", "left"), ("seconds", "right"),
                      ("bytes", "right"), ("result", "left")):
        t.add_column(col, justify=just)
    style = {"hit": "cyan", "built": "green", "failed": "red", "cancelled": "yellow"}
    for r in sorted(report.items, key=lambda r: (r.name, r.kind, r.sm)):
        t.add_row(r.name, str(r.sm), r.kind, f"{r.seconds:.2f}", f"{r.bytes:,}",
                  f"[{style.get(r.status, '')}]{'miss (built)' if r.status == 'built' else r.status}[/]")
    console.print(t)
    counts = report.counts()
    total = sum(r.bytes for r in report.items)
    console.print(f"{len(report.items)} items: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
                  + f"; {total / 1e6:.1f} MB; {report.seconds:.1f} s wall; {report.jobs} jobs; "
                  f"driver: {report.driver}; cuda-cccl {report.versions['cuda_cccl']}, "
                  f"CUDA {report.versions['cuda_major']}, NVRTC {report.versions['nvrtc']}")
