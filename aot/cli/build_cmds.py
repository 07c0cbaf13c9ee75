"""``aot validate``, ``aot build``, ``aot merge`` and ``aot bundle``: run the build side, print its reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from ..core.errors import UsageError
from ..core.text import printable, short


#: The matrix ``build`` and ``validate`` read without ``--matrix`` when the current folder holds one.
PROJECT_MATRIX = "build_matrix.yaml"


def matrix_path(given: Path | None) -> Path | None:
    """``--matrix``; else ``./build_matrix.yaml`` when this folder holds one (a project's own matrix); else
    ``None``, the bundled matrix. Every error names the file read, validate's last line does, and ``-v``
    logs the choice (a second line on stderr would break the one-line errors)."""
    import logging
    if given is not None:
        return given
    if Path(PROJECT_MATRIX).is_file():
        logging.getLogger("aot").info("reading ./%s (this folder's matrix; --matrix names another)", PROJECT_MATRIX)
        return Path(PROJECT_MATRIX)
    logging.getLogger("aot").info("no ./%s here: reading aot's bundled matrix", PROJECT_MATRIX)
    return None


def read_matrix(given: Path | None, *, partial: bool = False, no_code: bool = False):
    """The matrix (:func:`matrix_path`), its code imported as its project's ``[tool.aot] import-parents`` says."""
    from ..build.matrix import default_matrix_path, load_matrix
    from ..package.config import matrix_import_parents
    path = matrix_path(given)
    parents = not no_code and matrix_import_parents(path if path is not None else default_matrix_path())
    return load_matrix(path, import_parents=parents, no_code=no_code, partial=partial)


def cmd_validate(args) -> int:
    from ..core.errors import MatrixError
    from ..core.spec import CcclSpec, NumbaKernel
    m = read_matrix(args.matrix, partial=True, no_code=args.no_code)
    for s in m.specs:
        what = (s.algorithm if isinstance(s, CcclSpec) else ", ".join(s.kernels) if s.kernels else
                f"{s.kernel} {s.signature}" if isinstance(s, NumbaKernel) else getattr(s, "what", ""))
        print(f"{s.family:6} {s.name:32} {what}")
    if m.no_code:
        for name, refs in m.code:
            print(f"code   {name:32} names {', '.join(refs)} (not imported: --no-code)")
    for u in m.unreadable:
        print(f"FAILED {u.error}")
    if m.unreadable:
        raise MatrixError(f"{m.path}: {len(m.unreadable)} spec{'s' * (len(m.unreadable) > 1)} cannot be read: "
                          f"{', '.join(u.name for u in m.unreadable[:6])}{' ...' if len(m.unreadable) > 6 else ''} "
                          f"(listed above); {len(m.specs)} specs OK")
    print(f"{m.path}: {len(m.specs)} specs OK" + (f"; {len(m.code)} name code, not imported or checked "
                                                   f"(--no-code)" if m.no_code else ""))
    return 0


def cmd_build(args) -> int:
    from ..core.env import FORCE_STUB, JOBS
    from ..core.arch import parse_sm_list
    from ..core.errors import BusyError
    from ..build.builder import build, error_summary, parse_shard, plan
    from ..build.toolchain import cuda_major, native_sm, nvrtc_supported_sms

    matrix = read_matrix(args.matrix, partial=True)
    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only is not None else None
    if only is not None and not only:
        raise UsageError(f"--only {short(args.only)} names no spec")
    specs = matrix.select(only)
    unreadable = matrix.unreadable_in(only)  # a spec whose module cannot be imported: built around with --keep-going
    if unreadable and not args.keep_going:
        from ..build.matrix import unreadable_error
        raise unreadable_error(unreadable)
    major = cuda_major()
    want_native = "native" in args.sm.lower()
    sms = parse_sm_list(args.sm, cuda_major=major, native=native_sm() if want_native else None,
                        supported=nvrtc_supported_sms())
    jobs = args.jobs if args.jobs is not None else JOBS.get()
    if jobs < 0:
        raise UsageError("--jobs must be >= 0 (0 = one worker per CPU)")
    shard = parse_shard(args.shard)
    n_items = len(plan(specs, sms, shard))

    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from .common import console as wide_console
    console = wide_console(stderr=True)  # piped: failure lines and the report uncut
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
                    progress.console.print(f"[red]failed[/red] {escape(printable(item.label))}: "
                                           f"{escape(printable(error_summary(result.error)))}")

        report = None
        refused = False
        try:
            report = build(specs, sms, args.out, jobs=jobs, force=args.force, keep_going=args.keep_going,
                           shard=shard, force_stub=args.force_stub_driver or FORCE_STUB.get(), on_event=on_event,
                           prune=not args.only, import_parents=matrix.import_parents,
                           unreadable=unreadable)
        except BusyError:
            refused = True  # the report in --out is the other build's, not ours
            raise
        finally:
            if report is None and not refused:
                _print_report_file(args.out, console, args.quiet)
    if not args.quiet:
        _print_report(report, console)
    return 0


def _print_report_file(out: Path, console, quiet: bool) -> None:
    """The failed build's table and compiler errors, from its report; nothing when the report is absent or
    unusable (it is read with the strict, bounded reader: the folder may hold anything)."""
    from types import SimpleNamespace
    from ..build.builder import REPORT_NAME
    from ..core.errors import ArtifactError
    from ..core.format import _read_regular, loads_strict_json
    if quiet:
        return
    try:
        data = loads_strict_json(_read_regular(out / REPORT_NAME, 64 << 20))
        rep = SimpleNamespace(**data)
        rep.items = [SimpleNamespace(**i) for i in data["items"]]
        rep.counts = lambda: dict(data["counts"])
        _print_report(rep, console)
    except (OSError, ValueError, ArtifactError, TypeError, KeyError, AttributeError):
        return
    for i in rep.items:
        if getattr(i, "status", None) == "failed":
            from rich.markup import escape
            console.print(f"[red]--- {escape(printable(f'{i.name} sm_{i.sm} ({i.kind})'))}[/red]\n"
                          f"{escape(printable(str(i.error), lines=True))}")


def _print_report(report, console) -> None:
    from rich.markup import escape
    from rich.table import Table
    t = Table(title=escape(printable(f"aot build -> {report.out}")), show_lines=False)
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("item", "left"), ("SM", "right"), ("kind", "left"), ("seconds", "right"), ("bytes", "right"),
        ("result", "left"))
    for col, just in columns:
        t.add_column(col, justify=just)
    style = {"hit": "cyan", "built": "green", "failed": "red", "cancelled": "yellow"}
    for r in sorted(report.items, key=lambda r: (r.name, r.kind, r.sm)):
        t.add_row(*(escape(printable(c, 200)) for c in (r.name, str(r.sm), r.kind)), f"{r.seconds:.2f}", f"{r.bytes:,}",
                  f"[{style.get(r.status, '')}]{'miss (built)' if r.status == 'built' else r.status}[/]")
    console.print(t)
    counts = report.counts()
    total = sum(r.bytes for r in report.items)
    console.print(escape(printable(  # a report read back from the folder may hold anything
        f"{len(report.items)} items: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        + f"; {total / 1e6:.1f} MB; {report.seconds:.1f} s wall; {report.jobs} job{'s' * (report.jobs != 1)}; "
        f"driver: {report.driver}; cuda-cccl {report.versions['cuda_cccl']}, "
        f"CUDA {report.versions['cuda_major']}, NVRTC {report.versions['nvrtc']}")))


def cmd_merge(args) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from ..build.merge import merge
    err = Console(stderr=True)
    with Progress(TextColumn("[bold]merge"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=args.quiet or not err.is_terminal) as progress:
        task = progress.add_task("", total=None)

        def on_copy(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        summary = merge(args.shards, args.out, on_copy=on_copy)
    releases = summary.get("cuda_cccl") or []
    print(f"{args.out}: merged {summary['shards']} shards, {summary['artifacts']} artifacts, "
          f"{summary['bytes'] / 1e6:.1f} MB" + (f"; CCCL blobs of cuda-cccl {', '.join(releases)}"
                                                 if len(releases) > 1 else "")
          + (f"; one set per CUDA major: {', '.join(f'cu{m}' for m in summary['cuda_majors'])}"
             if summary.get("cuda_majors") else "")
          + (f"; cccl-legacy answers of cuda-cccl {', '.join(summary['cccl_legacy'])}"
             if summary.get("cccl_legacy") else ""))
    return 0


def cmd_bundle(args) -> int:
    from ..package.config import load_config
    from ..package.bundle import bundle
    cfg = load_config(args.project)
    out = args.out
    if args.out_root is not None:
        if out is not None:
            raise UsageError("--out and --out-root exclude each other")
        out = args.out_root.joinpath(*cfg.package.split("."), cfg.folder)
    res = bundle(cfg, out, prebuilt=args.artifacts, sm=args.sm, allow_partial=args.allow_partial,
                 jobs=args.jobs, work=args.work)
    each: list[tuple[int | None, Any]] = [*res.majors.items()] or [(None, res)]
    for major, one in each:  # a set of several CUDA majors: each major's set
        info = one.info
        print(printable(f"{one.out}: {one.artifacts} artifacts, {len(info['specs'])} specs x SMs "
                        f"{','.join(map(str, info['sms']))}, {one.bytes / 1e6:.1f} MB, CUDA {info['cuda_major']}, "
                        f"cuda-cccl {info['cuda_cccl']}" + ("" if info["complete"] else
                                                            f", PARTIAL ({len(info['missing'])} missing)")))
        if not args.quiet:
            from ..package.pins import jit_requirements
            where = f"under its 'cu{major}' extra" if major is not None else "(to load them; no toolkit)"
            print(f"the wheel must require {where}: {', '.join(one.pins)}; JIT fallback, as the "
                  f"package's own 'jit' extra: {', '.join(jit_requirements(info))}")
    return 0
