"""Command line: argument parsing and all printing. Library modules only raise and return data.

``main(argv)`` takes its arguments (tests call it directly), catches :class:`AotError` once, prints one
line and returns the error's exit code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Literal, Sequence

from ..core.version import __version__
from ..core.errors import AotError, UsageError

DEFAULT_OUT = "aot-out"


def _prog() -> str:
    """``aot`` for the console script, ``python -m aot`` when run as a module (what the user typed)."""
    argv0 = Path(sys.argv[0] or "")
    return "python -m aot" if (argv0.name, argv0.parent.name) == ("__main__.py", "aot") else "aot"


def _parser() -> argparse.ArgumentParser:
    # -v works before or after the subcommand (`aot -v build`, `aot build -vv`).
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("--verbose", "-v", action="count", default=argparse.SUPPRESS,
                         help="log what aot decides to stderr: -v INFO, -vv DEBUG (every source tried, "
                              "every build item)")
    p = argparse.ArgumentParser(prog=_prog(), parents=[verbose], description="Ahead-of-time builds of CCCL "
                                "algorithms and NVRTC kernels, packaged as artifacts; a loader that picks them up.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", parents=[verbose], help="compile every spec of a build matrix for a list of SMs")
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

    v = sub.add_parser("validate", parents=[verbose], help="validate a build matrix and list its specs")
    v.add_argument("--matrix", type=Path, default=None)

    ver = sub.add_parser("verify", parents=[verbose],
                         help="check an artifact set (DIR or WHEEL): integrity; with --gpu, results")
    ver.add_argument("target", nargs="?", default=None, help="artifact directory or wheel (default: the "
                     "installed package's artifacts)")
    ver.add_argument("--default", action="store_true", help="the installed aot package's own artifacts")
    ver.add_argument("--gpu", action="store_true", help="also run every spec on this GPU against numpy")
    ver.add_argument("--only", default=None, help="GPU-check only these specs: NAME[,NAME...]")
    ver.add_argument("--json", type=Path, default=None, help="write the result as JSON here: the GPU table "
                     "with --gpu, else the integrity result")
    ver.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    ver.add_argument("--for-wheel", action="store_true", help="also require a complete, unsharded set built "
                     "for this environment's CUDA major and cuda-cccl (the wheel build runs this)")
    ver.add_argument("--package", default=None, help="the artifacts an installed package ships "
                     "(Registry.from_package); its own NVRTC checks run with --gpu")
    ver.add_argument("--folder", default="artifacts", help="with --package: the folder (default: artifacts)")
    ver.add_argument("--matrix", type=Path, default=None, help="with --for-wheel: require every spec of this "
                     "matrix (default: the specs the set records); with --gpu: check the matrix's definitions "
                     "(its operators from code may be imported)")
    ver.add_argument("--sm", default=None, help="with --for-wheel: require these SMs (default: the SM list the "
                     "set records)")
    ver.add_argument("--allow-partial", action="store_true", help="with --for-wheel: accept missing (spec, SM)")

    ins = sub.add_parser("inspect", parents=[verbose],
                         help="table of specs x SMs, sizes, versions of an artifact set")
    ins.add_argument("target", nargs="?", default=None, help="artifact directory or wheel")
    ins.add_argument("--package", default=None, help="the artifacts an installed package ships")
    ins.add_argument("--folder", default="artifacts", help="with --package: the folder (default: artifacts)")

    bu = sub.add_parser("bundle", help="build (or take a prebuilt set), verify for the wheel, and write only "
                        "manifest.json + artifacts into a package folder ([tool.aot] in pyproject.toml)")
    bu.add_argument("--project", type=Path, default=Path("."), help="project directory with pyproject.toml "
                    "(default: .)")
    bu.add_argument("--out", type=Path, default=None, help="package folder to write (default: "
                    "<package>/<folder> from [tool.aot])")
    bu.add_argument("--out-root", type=Path, default=None, help="write into OUT_ROOT/<package path>/<folder> "
                    "(what the CMake function installs)")
    bu.add_argument("--artifacts", type=Path, default=None, help="bundle this prebuilt (merged) set instead "
                    "of building")
    bu.add_argument("--sm", default=None, help="SMs (default: [tool.aot] sm, or AOT_WHEEL_SM)")
    bu.add_argument("--allow-partial", action="store_true", default=None,
                    help="accept a set lacking some (spec, SM) of the matrix x SM list")
    bu.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: CPU count)")
    bu.add_argument("--work", type=Path, default=None, help="build folder kept between runs (default: "
                    "<project>/build/aot)")
    bu.add_argument("--quiet", "-q", action="store_true", help="print only the result line")

    sub.add_parser("doctor", parents=[verbose],
                   help="this machine's GPU/driver/CUDA/cuda-cccl, and what the loader would use")

    _cache_parser(sub)

    mg = sub.add_parser("merge", parents=[verbose],
                        help="combine shard outputs (build --shard K/N) into one artifact set")
    mg.add_argument("shards", nargs="+", type=Path, help="shard output directories")
    mg.add_argument("--out", type=Path, required=True)
    mg.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    return p


def entry() -> None:
    """Console-script entry point (``aot ...``)."""
    sys.exit(main())


def _survive_any_encoding() -> None:
    """Names come from user files: under PYTHONIOENCODING=ascii (or a C locale) printing one must not
    raise UnicodeEncodeError. Unencodable characters are written as backslash escapes instead."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a closed or exotic stream: leave it
                pass


def _log_to_stderr(verbosity: int):
    """-v: INFO, -vv: DEBUG records of the ``aot`` logger on stderr. Returns the handler to remove."""
    if verbosity <= 0:
        return None
    import logging
    from ..core.log import LOGGER_NAME
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("aot: %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger(LOGGER_NAME)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbosity == 1 else logging.DEBUG)
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    _survive_any_encoding()
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # argparse already printed the usage error (2), or --help / --version (0)
        return int(e.code or 0)
    handler = _log_to_stderr(getattr(args, "verbose", 0))  # SUPPRESS: the -v action is shared by every parser
    try:
        commands = {"build": cmd_build, "validate": cmd_validate, "verify": cmd_verify, "inspect": cmd_inspect,
                    "doctor": cmd_doctor, "merge": cmd_merge, "cache": cmd_cache, "bundle": cmd_bundle}
        return commands[args.command](args)
    except AotError as e:
        print(f"aot: error: {e}", file=sys.stderr)
        return e.return_code
    except OSError as e:  # a path the user gave that cannot be read or written
        print(f"aot: error: {e}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as e:  # a runtime-only install running a build/report command
        if e.name not in ("yaml", "rich"):
            raise
        from ..runtime.lean import install_hint
        print(f"aot: error: 'aot {args.command}' needs {'PyYAML' if e.name == 'yaml' else 'rich'}, which a "
              f"runtime-only install leaves out: {install_hint('build')}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("aot: interrupted", file=sys.stderr)
        return 130
    finally:
        if handler is not None:
            import logging
            logging.getLogger("aot").removeHandler(handler)


def cmd_validate(args) -> int:
    from ..build.matrix import load_matrix
    from ..core.spec import CcclSpec
    m = load_matrix(args.matrix)
    for s in m.specs:
        what = s.algorithm if isinstance(s, CcclSpec) else ", ".join(s.kernels)
        print(f"{s.family:6} {s.name:32} {what}")
    print(f"{m.path}: {len(m.specs)} specs OK")
    return 0


def cmd_build(args) -> int:
    from ..core.env import FORCE_STUB, JOBS
    from ..core.arch import parse_sm_list
    from ..core.errors import BusyError
    from ..build.builder import build, error_summary, parse_shard, plan
    from ..build.matrix import load_matrix
    from ..build.toolchain import cuda_major, native_sm, nvrtc_supported_sms

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
        refused = False
        try:
            report = build(specs, sms, args.out, jobs=jobs, force=args.force, keep_going=args.keep_going,
                           shard=shard, force_stub=args.force_stub_driver or FORCE_STUB.get(), on_event=on_event,
                           prune=not args.only)
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
    import json
    from ..build.builder import REPORT_NAME
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
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("item", "left"), ("SM", "right"), ("kind", "left"), ("seconds", "right"), ("bytes", "right"),
        ("result", "left"))
    for col, just in columns:
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
    from ..verify.wheel import extract_artifacts
    if target is None:
        return [Path(str(resources.files("aot"))) / "artifacts"]
    p = Path(target)
    if p.is_file() and p.suffix == ".whl":
        return extract_artifacts(p, Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="aot-wheel-"))))
    if not p.is_dir():
        raise UsageError(f"{p}: not a directory or a .whl file")
    return [p]


def _target_or_build_output(target: str | None, command: str) -> str | None:
    """No target given: the installed package's artifacts if it carries any; else ``./aot-out`` (what the
    README's build writes) if it holds a manifest, saying so; else a one-line error saying what to pass.
    A tool-only install has no ``aot/artifacts``, and "manifest.json missing" there helped nobody."""
    if target is not None:
        return target
    from importlib import resources
    from ..core.manifest import MANIFEST_NAME
    if (Path(str(resources.files("aot"))) / "artifacts" / MANIFEST_NAME).is_file():
        return None
    if (Path(DEFAULT_OUT) / MANIFEST_NAME).is_file():
        print(f"aot: this aot install carries no artifacts; {command} uses ./{DEFAULT_OUT} (the build output "
              f"here)", file=sys.stderr)
        return DEFAULT_OUT
    raise UsageError(f"nothing to {command}: this aot install carries no artifacts and ./{DEFAULT_OUT} has no "
                     f"manifest.json; pass an artifact directory or wheel ({_prog()} {command} DIR|WHEEL)")


def cmd_verify(args) -> int:
    import contextlib
    import json
    from ..core.errors import VerificationError
    from ..verify.gpu import verify_integrity
    if args.json is not None and args.json.is_dir():
        raise UsageError(f"--json {args.json}: is a directory; name the file to write")
    with contextlib.ExitStack() as stack:
        if args.package:
            roots = [_package_dir(args.package, args.folder)]
        else:
            target = None if args.default else _target_or_build_output(args.target, "verify")
            roots = _artifact_dirs(target, stack)
        for root in roots:  # a wheel's every artifact folder, each checked
            n, problems = verify_integrity(root)
            for prob in problems:
                print(f"problem: {prob}")
            if args.json is not None and not args.gpu:  # with --gpu the file gets the GPU table below
                from ..core.fs import atomic_write
                doc = {"target": str(args.target or root), "artifacts": n, "integrity_ok": not problems,
                       "problems": problems}
                atomic_write(args.json, (json.dumps(doc, indent=1) + "\n").encode())
            if problems:
                raise VerificationError(f"{root}: {len(problems)} problem(s) in {n} artifacts")
            if args.for_wheel:
                cov = _check_packageable(root, args)
                print(f"{root}: covers {len(cov.specs)} specs x SMs {','.join(map(str, cov.sms))}"
                      + (f"; PARTIAL, {len(cov.missing)} missing (--allow-partial)" if cov.missing else ""))
            print(f"{root}: {n} artifacts, integrity OK")
        if not args.gpu:
            return 0
        return max(_verify_gpu(root, args) for root in roots)


def _verify_gpu(root: Path, args) -> int:
    import json
    from ..core.errors import VerificationError
    from ..runtime.registry import Registry
    from ..verify.gpu import verify_gpu
    from rich.console import Console
    from rich.table import Table
    from ..package.bundle import read_info
    # verify_integrity has already required a manifest. Operators from code are imported only for the
    # matrix's own specs, or inside the package whose artifacts these are.
    specs = None
    if args.matrix is not None:
        from ..build.matrix import load_matrix
        specs = load_matrix(args.matrix).specs
    registry = Registry(root, specs=specs, owner=args.package)
    names = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    unknown = [n for n in names or () if n not in registry.names()]
    if unknown or names == []:
        raise UsageError(f"--only {args.only!r}: no spec {', '.join(map(repr, unknown))} in {root}" if unknown
                         else f"--only {args.only!r} names no spec")
    info = read_info(root) or {}
    checks = info.get("checks") if isinstance(info.get("checks"), dict) else None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    err = Console(stderr=True)
    todo = names if names is not None else registry.names()
    with Progress(TextColumn("[bold]verify --gpu"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=err, transient=True,
                  disable=args.quiet or not err.is_terminal) as progress:
        task = progress.add_task("", total=len(todo))

        def on_spec(name: str, done: bool) -> None:
            if done:
                progress.advance(task)
            else:
                progress.update(task, description=name)

        rows = verify_gpu(registry, todo, checks=checks, package=args.package, on_spec=on_spec)
    t = Table(title=f"aot verify --gpu (device sm_{registry.device_sm()})")
    for col in ("spec", "SM used", "kind", "source", "result", "load + run + numpy check ms"):
        t.add_column(col)
    for r in rows:
        result = ("[green]ok[/]" if r.status == "ok" else f"[yellow]{r.status}[/]" if r.ok
                  else f"[red]FAILED[/] {r.detail[:200]}")
        t.add_row(r.spec, f"sm_{r.sm}" if r.sm else "-", r.kind, r.source, result, f"{r.ms:.1f}")
    Console().print(t)
    bad = [r for r in rows if not r.ok]
    unrun = [r for r in rows if r.status == "loaded, not executed"]
    print(f"{len(rows) - len(bad) - len(unrun)} of {len(rows)} checks passed"
          + (f"; {len(unrun)} loaded, not executed (no check: {', '.join(sorted({r.spec for r in unrun}))})"
             if unrun else ""))
    if args.json:
        from ..core.fs import atomic_write
        atomic_write(args.json, json.dumps([r.__dict__ for r in rows], indent=1).encode())
    if bad:
        raise VerificationError(f"{len(bad)} GPU check(s) failed; first: {bad[0].spec}: {bad[0].detail}")
    return 0


def cmd_inspect(args) -> int:
    import contextlib
    with contextlib.ExitStack() as stack:
        if args.package:
            root = _package_dir(args.package, args.folder)
            _inspect_one(root, f"package {args.package} ({root})")
            return 0
        target = _target_or_build_output(args.target, "inspect")
        wheel = Path(target).name if target is not None and str(target).endswith(".whl") else None
        for root in _artifact_dirs(target, stack):  # a wheel: a table for each artifact folder
            _inspect_one(root, f"{wheel}: {root.name}" if wheel else str(root))
    return 0


def _inspect_one(root: Path, title: str) -> None:
    from collections import defaultdict
    from rich.console import Console
    from rich.table import Table
    from ..core.manifest import load_manifest
    from ..verify.gpu import coverage
    m = load_manifest(root)
    sms = sorted({a["sm"] for a in m.artifacts})
    cells: dict = defaultdict(dict)
    for a in m.artifacts:
        label = "ptx" if a["payload_kind"] == "ptx" else a["sm"]
        cells[(a["family"], a["name"])][label] = cells[(a["family"], a["name"])].get(label, 0) + a["size"]
    t = Table(title=f"{title} (sizes in KB)")
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
    cov = coverage(m)
    console.print(f"coverage: {len(cov.specs)} specs x SMs {','.join(map(str, cov.sms))} for CUDA "
                  f"{cov.cuda_major}, cuda-cccl {cov.cuda_cccl}: " + ("complete" if cov.complete else
                  f"{len(cov.missing)} missing: {', '.join(cov.missing[:8])}"
                  + (" ..." if len(cov.missing) > 8 else "")))


def cmd_doctor(args) -> int:
    from ..core.env import describe
    from ..core.versions import dist_version
    from ..build.toolchain import native_sm, real_driver_present
    print(f"aot {__import__('aot').__version__}; {sys.version.split()[0]}")
    for dist in ("cuda-cccl", "cuda-core", "cuda-bindings", "numba-cuda-mlir"):
        print(f"  {dist}: {dist_version(dist)}")
    real = real_driver_present()
    print(f"driver: {'real NVIDIA driver' if real else 'none (builds use the stand-in libcuda)'}")
    sm = native_sm()
    print(f"GPU: {'sm_%d' % sm if sm else 'none usable'}")
    from ..runtime.lean import prepare
    try:
        print(f"runtime toolchain: {prepare().describe()}")
    except AotError as e:
        print(f"runtime toolchain: unusable ({e})")
    if sm:
        from ..runtime.default import default_registry
        reg = default_registry()
        for name in reg.names():
            cands = reg.packaged_candidates(reg.spec(name), sm)
            why = f"packaged {cands[0].kind} sm_{cands[0].sm}" if cands else "user cache or JIT (no packaged fit)"
            print(f"  {name:32} -> {why}")
    _print_cache_summary()
    print("environment variables:")
    for name, default, doc in describe():
        print(f"  {name} (default {default or 'unset'}): {doc}")
    return 0


# ------------------------------------------------------------------------------------------- aot cache
def _cache_parser(sub) -> None:
    c = sub.add_parser("cache", help="the per-user JIT cache: where it is, what it holds (info), clear it")
    c.add_argument("action", nargs="?", choices=("info", "clear"), default="info",
                   help="info (default): path, safety, entries by spec, SM and cuda-cccl; clear: remove them")
    c.add_argument("--stale", action="store_true", help="with clear: only entries of another cuda-cccl or "
                   "aot version (and idle lock files, old temp files, other stand-in builds)")


def _size(nbytes: int) -> str:
    n = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def _print_cache_summary() -> None:
    from ..runtime.cache_admin import inspect_cache
    info = inspect_cache()
    safety = {"ok": "safe", "absent": "not created yet", "disabled": "disabled (AOT_DISABLE_CACHE)",
              "unsafe": f"NOT USED: {info.problem}", "unusable": f"unusable: {info.problem}"}[info.state]
    print(f"user cache: {info.root} ({safety}); {len(info.entries)} CCCL entries, "
          f"{_size(info.total_bytes)} in all, cap {_size(info.cap) if info.cap else 'none'}")


def cmd_cache(args) -> int:
    from collections import Counter
    from ..runtime.cache_admin import clear_cache, inspect_cache
    if args.action == "clear":
        files, size = clear_cache(stale=args.stale)
        print(f"{'stale ' if args.stale else ''}user cache cleared: {files} files, {_size(size)} removed")
        return 0
    if args.stale:
        raise UsageError("--stale goes with 'aot cache clear'")
    _print_cache_summary()
    info = inspect_cache()
    groups: Counter = Counter()
    sizes: Counter = Counter()
    for e in info.entries:
        k = (e.name, f"sm_{e.sm}" if e.sm is not None else "?", e.cuda_cccl, e.aot)
        groups[k] += 1
        sizes[k] += e.size
    if groups:
        print(f"  {'spec':32} {'SM':7} {'cuda-cccl':10} {'aot':10} {'entries':>7} {'size':>10}")
        for k in sorted(groups):
            print(f"  {k[0]:32} {k[1]:7} {k[2]:10} {k[3]:10} {groups[k]:>7} {_size(sizes[k]):>10}")
    bad = [e for e in info.entries if e.problem]
    for e in bad:
        print(f"  unreadable entry {e.path}: {e.problem}")
    if info.state == "ok":
        print(f"  NVRTC (cuda.core cache): {info.nvrtc_files} files, {_size(info.nvrtc_bytes)}; "
              f"stand-in libcuda: {info.stub_files} files, {_size(info.stub_bytes)}; lock files: {info.locks}")
    return 0


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
    print(f"{args.out}: merged {summary['shards']} shards, {summary['artifacts']} artifacts, "
          f"{summary['bytes'] / 1e6:.1f} MB")
    return 0


def _check_packageable(root: Path, args):
    """A wheel carries one CUDA major and one cuda-cccl: its own; shards and failed builds never ship; every
    (spec, SM) of the matrix x SM list is present unless --allow-partial (aot.verify.check_for_wheel)."""
    from ..verify.gpu import check_for_wheel
    specs = sms = None
    if args.matrix is not None:
        from ..build.matrix import load_matrix
        specs = load_matrix(args.matrix).specs
    if args.sm:
        from ..core.arch import parse_sm_list
        from ..build.toolchain import cuda_major
        sms = parse_sm_list(args.sm, cuda_major=cuda_major())
    return check_for_wheel(root, specs=specs, sms=sms, allow_partial=args.allow_partial)


def _package_dir(package: str, folder: str) -> Path:
    """The artifact folder an installed package ships (the path Registry.from_package reads)."""
    from ..runtime.sources import package_artifact_dir
    root = package_artifact_dir(package, folder)
    if not (root / "manifest.json").is_file():
        raise UsageError(f"package {package!r}: no manifest at {root / 'manifest.json'}")
    return root


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
    info = res.info
    print(f"{res.out}: {res.artifacts} artifacts, {len(info['specs'])} specs x SMs "
          f"{','.join(map(str, info['sms']))}, {res.bytes / 1e6:.1f} MB, CUDA {info['cuda_major']}, "
          f"cuda-cccl {info['cuda_cccl']}" + ("" if info["complete"] else f", PARTIAL ({len(info['missing'])} "
                                                                           f"missing)"))
    if not args.quiet:
        print(f"the wheel must require: {', '.join(res.pins)}")
    return 0
