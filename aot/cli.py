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

    ver = sub.add_parser("verify", help="check an artifact set (DIR or WHEEL): integrity; with --gpu, results")
    ver.add_argument("target", nargs="?", default=None, help="artifact directory or wheel (default: the "
                     "installed package's artifacts)")
    ver.add_argument("--default", action="store_true", help="the installed aot package's own artifacts")
    ver.add_argument("--gpu", action="store_true", help="also run every spec on this GPU against numpy")
    ver.add_argument("--only", default=None, help="GPU-check only these specs: NAME[,NAME...]")
    ver.add_argument("--json", type=Path, default=None, help="write the GPU table as JSON here")
    ver.add_argument("--for-wheel", action="store_true", help="also require a complete, unsharded set built "
                     "for this environment's CUDA major and cuda-cccl (the wheel build runs this)")

    ins = sub.add_parser("inspect", help="table of specs x SMs, sizes, versions of an artifact set")
    ins.add_argument("target", nargs="?", default=None, help="artifact directory or wheel")

    sub.add_parser("doctor", help="this machine's GPU/driver/CUDA/cuda-cccl, and what the loader would use")

    mg = sub.add_parser("merge", help="combine shard outputs (build --shard K/N) into one artifact set")
    mg.add_argument("shards", nargs="+", type=Path, help="shard output directories")
    mg.add_argument("--out", type=Path, required=True)
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
        commands = {"build": cmd_build, "validate": cmd_validate, "verify": cmd_verify, "inspect": cmd_inspect,
                    "doctor": cmd_doctor, "merge": cmd_merge}
        return commands[args.command](args)
    except AotError as e:
        print(f"aot: error: {e}", file=sys.stderr)
        return e.return_code
    except OSError as e:  # a path the user gave that cannot be read or written
        print(f"aot: error: {e}", file=sys.stderr)
        return 1
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
    from .build import build, error_summary, parse_shard, plan
    from .matrix import load_matrix
    from .toolchain import cuda_major, native_sm, nvrtc_supported_sms

    matrix = load_matrix(args.matrix)
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only is not None else None
    if only is not None and not only:
        raise UsageError(f"--only {args.only!r} names no spec")
    specs = matrix.select(only)
    major = cuda_major()
    want_native = "native" in args.sm.lower()
    sms = parse_sm_list(args.sm, cuda_major=major, native=native_sm() if want_native else None,
                        supported=nvrtc_supported_sms())
    jobs = args.jobs if args.jobs is not None else JOBS.get()
    if jobs < 0:
        raise UsageError("--jobs must be >= 0 (0 = one worker per CPU)")
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
                    progress.console.print(f"[red]failed[/red] {item.label}: {error_summary(result.error)}")

        report = None
        try:
            report = build(specs, sms, args.out, jobs=jobs, force=args.force, keep_going=args.keep_going,
                           shard=shard, force_stub=args.force_stub_driver or FORCE_STUB.get(), on_event=on_event,
                           prune=not args.only)
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


def _artifact_dirs(target: str | None, stack) -> list[Path]:
    """Directories holding manifest.json: the target itself, every artifact folder of a wheel (unpacked by
    :mod:`aot._wheel` into a temporary directory owned by ``stack``), or the installed package's artifacts."""
    import tempfile
    from importlib import resources
    from ._wheel import extract_artifacts
    if target is None:
        return [Path(str(resources.files("aot"))) / "artifacts"]
    p = Path(target)
    if p.is_file() and p.suffix == ".whl":
        return extract_artifacts(p, Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="aot-wheel-"))))
    if not p.is_dir():
        raise UsageError(f"{p}: not a directory or a .whl file")
    return [p]


def cmd_verify(args) -> int:
    import contextlib
    from .errors import VerificationError
    from .verify import verify_integrity
    with contextlib.ExitStack() as stack:
        roots = _artifact_dirs(None if args.default else args.target, stack)
        for root in roots:  # a wheel's every artifact folder, each checked
            n, problems = verify_integrity(root)
            for prob in problems:
                print(f"problem: {prob}")
            if problems:
                raise VerificationError(f"{root}: {len(problems)} problem(s) in {n} artifacts")
            if args.for_wheel:
                _check_packageable(root)
            print(f"{root}: {n} artifacts, integrity OK")
        if not args.gpu:
            return 0
        return max(_verify_gpu(root, args) for root in roots)


def _verify_gpu(root: Path, args) -> int:
    import json
    from .errors import VerificationError
    from .loader import Registry
    from .verify import verify_gpu
    from rich.console import Console
    from rich.table import Table
    registry = Registry(root)  # verify_integrity has already required a manifest
    names = [n.strip() for n in args.only.split(",")] if args.only else None
    rows = verify_gpu(registry, names)
    t = Table(title=f"aot verify --gpu (device sm_{registry.device_sm()})")
    for col in ("spec", "SM used", "kind", "source", "result", "load + run + numpy check ms"):
        t.add_column(col)
    for r in rows:
        t.add_row(r.spec, f"sm_{r.sm}" if r.sm else "-", r.kind, r.source,
                  "[green]ok[/]" if r.ok else f"[red]FAILED[/] {r.detail[:200]}", f"{r.ms:.1f}")
    Console().print(t)
    bad = [r for r in rows if not r.ok]
    print(f"{len(rows) - len(bad)} of {len(rows)} checks passed")
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=1))
    if bad:
        raise VerificationError(f"{len(bad)} GPU check(s) failed; first: {bad[0].spec}: {bad[0].detail}")
    return 0


def cmd_inspect(args) -> int:
    import contextlib
    with contextlib.ExitStack() as stack:
        for root in _artifact_dirs(args.target, stack):  # a wheel: a table for each artifact folder
            _inspect_one(root)
    return 0


def _inspect_one(root: Path) -> None:
    from collections import defaultdict
    from rich.console import Console
    from rich.table import Table
    from .manifest import load_manifest
    m = load_manifest(root)
    sms = sorted({a["sm"] for a in m.artifacts})
    cells: dict = defaultdict(dict)
    for a in m.artifacts:
        label = "ptx" if a["payload_kind"] == "ptx" else a["sm"]
        cells[(a["family"], a["name"])][label] = cells[(a["family"], a["name"])].get(label, 0) + a["size"]
    t = Table(title=f"{root} (sizes in KB)")
    t.add_column("family")
    t.add_column("spec")
    for sm in sms:
        t.add_column(f"sm_{sm}", justify="right")
    t.add_column("ptx", justify="right")
    t.add_column("total KB", justify="right")
    for (family, name), row in sorted(cells.items()):
        t.add_row(family, name, *[f"{row[sm] / 1024:.0f}" if sm in row else "-" for sm in sms],
                  f"{row['ptx'] / 1024:.0f}" if "ptx" in row else "-", f"{sum(row.values()) / 1024:.0f}")
    console = Console()
    console.print(t)
    total = sum(a["size"] for a in m.artifacts)
    v = m.producer
    console.print(f"{len(m.artifacts)} artifacts, {len(cells)} specs, {total / 1e6:.1f} MB; aot {v.get('aot')}, "
                  f"cuda-cccl {v.get('cuda_cccl')}, CUDA {v.get('cuda_major')}, NVRTC {v.get('nvrtc')}, "
                  f"nvJitLink {v.get('nvjitlink')}")


def cmd_doctor(args) -> int:
    from ._env import describe
    from .compat import dist_version
    from .toolchain import native_sm, real_driver_present
    print(f"aot {__import__('aot').__version__}; {sys.version.split()[0]}")
    for dist in ("cuda-cccl", "cuda-core", "cuda-bindings", "numba-cuda-mlir"):
        print(f"  {dist}: {dist_version(dist)}")
    real = real_driver_present()
    print(f"driver: {'real NVIDIA driver' if real else 'none (builds use the stand-in libcuda)'}")
    sm = native_sm()
    print(f"GPU: {'sm_%d' % sm if sm else 'none usable'}")
    if sm:
        from .loader import default_registry
        reg = default_registry()
        for name in reg.names():
            cands = reg.packaged_candidates(reg.spec(name), sm)
            why = f"packaged {cands[0].kind} sm_{cands[0].sm}" if cands else "user cache or JIT (no packaged fit)"
            print(f"  {name:32} -> {why}")
    print("environment variables:")
    for name, default, doc in describe():
        print(f"  {name} (default {default or 'unset'}): {doc}")
    return 0


def cmd_merge(args) -> int:
    from .merge import merge
    summary = merge(args.shards, args.out)
    print(f"{args.out}: merged {summary['shards']} shards, {summary['artifacts']} artifacts, "
          f"{summary['bytes'] / 1e6:.1f} MB")
    return 0


def _check_packageable(root: Path) -> None:
    """A wheel carries one CUDA major and one cuda-cccl: its own. Shards and failed builds never ship."""
    import json
    from .errors import VerificationError
    from .compat import check_producer
    from .errors import ArtifactError
    from .manifest import MANIFEST_NAME
    doc = json.loads((root / MANIFEST_NAME).read_text())
    if doc.get("shard") or doc.get("incomplete"):
        raise VerificationError(f"{root}: a shard or incomplete build; merge the shards first (aot merge)")
    try:  # the loader's own rule: a wheel ships only what its pinned cuda-cccl and CUDA major can load
        check_producer(doc["producer"], "cccl")
    except ArtifactError as e:
        raise VerificationError(f"{root}: not packageable here: {e}") from None
