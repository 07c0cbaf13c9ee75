"""``aot verify`` and ``aot inspect``: integrity, GPU checks and coverage of an artifact set, a wheel or a package."""

from __future__ import annotations

import sys
from pathlib import Path

from ..core.errors import UsageError
from ..core.text import printable
from .common import DEFAULT_OUT, _prog, console


def _artifact_dirs(target: str | None, stack) -> list[tuple[Path, str]]:
    """(directory holding manifest.json, how to name it): the target itself, every artifact folder of a wheel
    (unpacked by :mod:`aot.verify.wheel` into a temporary directory owned by ``stack``, named as the wheel
    and the folder in it: ``mypkg-1.0-py3-none-any.whl, folder mypkg/artifacts``, never the temporary path), or the
    installed package's artifacts."""
    import tempfile
    from importlib import resources
    from ..verify.wheel import extract_artifacts
    if target is None:
        root = Path(str(resources.files("aot"))) / "artifacts"
        return [(root, str(root))]
    p = Path(target)
    if p.is_file() and p.suffix == ".whl":
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="aot-wheel-")))
        return [(root, f"{p}, folder {root.relative_to(tmp).as_posix()}") for root in extract_artifacts(p, tmp)]
    if not p.is_dir():
        raise UsageError(f"{p}: not a directory or a .whl file")
    return [(p, str(p))]


def _named(text: str, root: Path, shown: str) -> str:
    """``text`` with the folder ``root`` called ``shown`` (a wheel's temporary unpack folder by the wheel)."""
    return text if str(root) == shown else text.replace(f"{root}/", f"{shown}: ").replace(str(root), shown)


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
            folder = _package_dir(args.package, args.folder)
            roots = [(folder, str(folder))]
            print(f"package {args.package}: reading {folder}")
        else:
            target = None if args.default else _target_or_build_output(args.target, "verify")
            roots = _artifact_dirs(target, stack)
        from ..core.majorset import installed_major, sets_of
        for root, shown, major in [(sub, shown if m is None else f"{shown}/cu{m}", m)
                                   for top, shown in roots for sub, m in sets_of(top)]:
            # a wheel's every artifact folder, each checked; a set of several CUDA majors: each major's set
            n, problems = verify_integrity(root)
            problems = [_named(prob, root, shown) for prob in problems]
            for prob in problems:
                print(f"problem: {printable(prob)}")
            if args.json is not None and not args.gpu:  # with --gpu the file gets the GPU table below
                from ..core.fs import atomic_write
                doc = {"target": str(args.target or shown), "artifacts": n, "integrity_ok": not problems,
                       "problems": problems}
                atomic_write(args.json, (json.dumps(doc, indent=1) + "\n").encode())
            if problems:
                raise VerificationError(f"{shown}: {len(problems)} problem(s) in {n} artifacts")
            if args.for_wheel and major is not None and str(major) != installed_major():
                print(f"{shown}: CUDA {major}'s set, integrity only: this environment is CUDA {installed_major()}, "
                      f"whose loader ignores it")
            elif args.for_wheel:
                try:
                    cov = _check_packageable(root, args)
                except VerificationError as e:
                    raise VerificationError(_named(str(e), root, shown)) from None
                print(f"{shown}: covers {len(cov.specs)} specs x SMs {','.join(map(str, cov.sms))}"
                      + (f"; PARTIAL, {len(cov.missing)} missing (--allow-partial)" if cov.missing else ""))
            print(f"{shown}: {n} artifacts, integrity OK")
            _print_legacy(root, shown)
        if not args.gpu:
            return 0
        return max(_verify_gpu(root, args) for root, _ in roots)


def _verify_gpu(root: Path, args) -> int:
    import json
    from ..core.errors import VerificationError
    from ..runtime.loader.registry import Registry
    from ..verify.gpu import verify_gpu
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from ..package.bundle import read_info
    # verify_integrity has already required a manifest. Operators from code are imported only for the
    # matrix's own specs, or inside the package whose artifacts these are.
    specs = None
    if args.matrix is not None:
        from ..build.matrix import load_matrix
        from ..package.config import matrix_import_parents
        specs = load_matrix(args.matrix, import_parents=matrix_import_parents(args.matrix)).specs
    registry = Registry(root, specs=specs, owner=args.package)
    names = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    unknown = [n for n in names or () if n not in registry.names()]
    if unknown or names == []:
        raise UsageError(f"--only {args.only!r}: no spec {', '.join(map(repr, unknown))} in {root}" if unknown
                         else f"--only {args.only!r} names no spec")
    info = read_info(root) or {}
    checks = info.get("checks") if isinstance(info.get("checks"), dict) else None
    numba_launches, replays = _launch_stores(args)
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

        rows = verify_gpu(registry, todo, checks=checks, package=args.package, on_spec=on_spec,
                          launches=numba_launches, replays=replays)
    t = Table(title=f"aot verify --gpu (device sm_{registry.device_sm()})")
    t.add_column("spec", overflow="fold")  # a spec name is never cut: fold it onto a second line
    for col in ("SM", "kind", "source", "result", "ms"):  # ms: load + run + numpy check
        t.add_column(col)
    for r in rows:
        result = "[green]ok[/]" if r.status == "ok" else f"[yellow]{r.status}[/]" if r.ok else "[red]FAILED[/]"
        t.add_row(*(escape(printable(c)) for c in (r.spec, f"sm_{r.sm}" if r.sm else "-", r.kind, r.source)),
                  result, f"{r.ms:.1f}")
    console().print(t)
    bad = [r for r in rows if not r.ok]
    print(gpu_failure_report(rows))
    from ..verify.replay import unchecked, unchecked_line
    allowed = bool(getattr(args, "allow_unchecked", False))
    loose = unchecked(rows)
    if loose:
        print(printable(unchecked_line(loose, allowed)))
    if args.json:
        from ..core.fs import atomic_write
        atomic_write(args.json, json.dumps([r.__dict__ for r in rows], indent=1).encode())
    if loose and not bad and not allowed:
        raise VerificationError(f"{len(loose)} of {len({r.spec for r in rows})} specs unchecked: neither a check "
                                f"([tool.aot.checks]) nor a recorded launch (aot record; verify --launches DIR); "
                                f"pass --allow-unchecked to accept them")
    if bad:
        names = sorted({r.spec for r in bad})
        raise VerificationError(f"{len(bad)} of {len(rows)} GPU checks FAILED ({', '.join(names[:6])}"
                                f"{', ...' if len(names) > 6 else ''}): see the failures listed above"
                                + (f" and in {args.json}" if args.json else ""))
    return 0


def _launch_stores(args) -> tuple[tuple | None, list | None]:
    """The recorded launches ``verify --gpu`` replays for kernels without a check: ``--launches DIR``, else
    ``<matrix>.launches`` beside ``--matrix`` when that folder exists (``aot record --out M`` writes it there).
    Two stores may live there: numba-cuda launches per spec (``launches.json``, :mod:`aot.verify.launches`,
    replayed through the kernel's dispatcher) and every launch by kernel symbol (``index.json``,
    :mod:`aot.verify.replay`, replayed against the packaged image). (numba's, raw's); None where absent."""
    from ..record.launches import INDEX
    from ..verify.replay import read_store
    folder = getattr(args, "launches", None)
    matrix = getattr(args, "matrix", None)
    if folder is None and matrix is not None and matrix.with_name(f"{matrix.stem}.launches").is_dir():
        folder = matrix.with_name(f"{matrix.stem}.launches")
    if folder is None:
        return None, None
    if not folder.is_dir():
        raise UsageError(f"--launches {folder}: not a folder (aot record --out M writes M's stem + .launches/)")
    numba = raw = None
    if (folder / "launches.json").is_file():
        from ..verify.launches import read_index
        numba = (folder, read_index(folder))
    if (folder / INDEX).is_file() or numba is None:
        raw = read_store(folder)  # neither index there: this reader's one-line error names index.json
    count = len(numba[1] if numba else ()) + len(raw or ())
    print(f"replaying {count} recorded launch(es) from {printable(str(folder))} for kernels without a check")
    return numba, raw


def gpu_failure_report(rows) -> str:
    """The lines under the ``verify --gpu`` table: one per failed check (spec, SM, kind, then what differs,
    how many elements, the first index, got and want), never wrapped, then the count of checks passed."""
    bad = [r for r in rows if not r.ok]
    unrun = [r for r in rows if r.status == "loaded, not executed"]
    lines = ([f"FAILED ({len(bad)}):"] + [f"  {printable(r.failure_line())}" for r in bad]) if bad else []
    lines.append(f"{len(rows) - len(bad) - len(unrun)} of {len(rows)} checks passed"
                 + (f"; {len(bad)} FAILED" if bad else "")
                 + (f"; {len(unrun)} loaded, not executed (no check: {', '.join(sorted({r.spec for r in unrun}))})"
                    if unrun else ""))
    return "\n".join(lines[:-1] + [printable(lines[-1])])


def cmd_inspect(args) -> int:
    import contextlib
    from ..core.majorset import sets_of
    with contextlib.ExitStack() as stack:
        if args.package:
            root = _package_dir(args.package, args.folder)
            print(f"package {args.package}: reading {root}")
            for sub, m in sets_of(root):
                _inspect_one(sub, f"package {args.package}" + (f", CUDA {m}" if m else ""))
            return 0
        target = _target_or_build_output(args.target, "inspect")
        for root, shown in _artifact_dirs(target, stack):  # a wheel: a table for each artifact folder
            for sub, m in sets_of(root):
                _inspect_one(sub, shown + (f", CUDA {m} ({sub.name}/)" if m else ""))
    return 0


def _inspect_one(root: Path, title: str) -> None:
    """The table of one artifact folder (spec x SM, sizes), the producer and the coverage: with rich where it
    is installed, else as plain text (a runtime-only install has no ``[build]`` extra, and reading a wheel
    must work there too)."""
    from collections import defaultdict
    from ..core.manifest import load_manifest
    from ..verify.gpu import coverage
    m = load_manifest(root)
    sms = sorted({a["sm"] for a in m.artifacts})
    cells: dict = defaultdict(dict)
    for a in m.artifacts:
        label = "ptx" if a["payload_kind"] == "ptx" else a["sm"]
        cells[(a["family"], a["name"])][label] = cells[(a["family"], a["name"])].get(label, 0) + a["size"]
    header = ["family", "spec", *(f"sm_{sm}" for sm in sms), "ptx", "total KB"]
    rows = [[printable(family, 64), printable(name, 200),
             *[f"{row[sm] / 1024:.0f}" if sm in row else "-" for sm in sms],
             f"{row['ptx'] / 1024:.0f}" if "ptx" in row else "-", f"{sum(row.values()) / 1024:.0f}"]
            for (family, name), row in sorted(cells.items())]
    total = sum(a["size"] for a in m.artifacts)
    v = {k: printable(x, 200) for k, x in m.producer.items()}  # a foreign manifest's text, never raw
    if len(m.cccl_releases()) > 1:  # blobs of several cuda-cccl releases: name them all
        v["cuda_cccl"] = printable(", ".join(m.cccl_releases()), 200)
    cov = coverage(m)
    lines = [f"{len(m.artifacts)} artifacts, {len(cells)} specs, {total / 1e6:.1f} MB; aot {v.get('aot')}, "
             f"cuda-cccl {v.get('cuda_cccl')}, CUDA {v.get('cuda_major')}, NVRTC {v.get('nvrtc')}, "
             f"nvJitLink {v.get('nvjitlink')}",
             f"coverage: {len(cov.specs)} specs x SMs {','.join(map(str, cov.sms))} for CUDA "
             f"{cov.cuda_major}, cuda-cccl {cov.cuda_cccl}: " + ("complete" if cov.complete else
             f"{len(cov.missing)} missing: {', '.join(cov.missing[:8])}" + (" ..." if len(cov.missing) > 8 else ""))]
    if m.legacy:
        from ..core.legacy_manifest import summary
        lines += summary(m.legacy)
    lines = [printable(line) for line in lines]
    title = printable(title)
    try:
        from rich.markup import escape
        from rich.table import Table
    except ImportError:  # a runtime-only install: the same table, as plain text
        print(plain_table(f"{title} (sizes in KB)", header, rows))
        print("\n".join(lines))
        return
    t = Table()
    for i, col in enumerate(header):
        t.add_column(col, justify="right" if i >= 2 else "left")
    for r in rows:
        t.add_row(*map(escape, r))
    out = console()
    # the title on a line of its own: a table title wraps at the table's width, cutting a wheel's name in two
    out.print(escape(f"{title} (sizes in KB)"), soft_wrap=True)
    out.print(t)
    for line in lines:
        out.print(escape(line))


def plain_table(title: str, header: list[str], rows: list[list[str]]) -> str:
    """``rows`` under ``header`` in aligned columns (text left, numbers right), below ``title``."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([title, line(header), "  ".join("-" * w for w in widths), *map(line, rows)])


def _check_packageable(root: Path, args):
    """A wheel carries one CUDA major and one cuda-cccl: its own; shards and failed builds never ship; every
    (spec, SM) of the matrix x SM list is present unless --allow-partial (aot.verify.check_for_wheel)."""
    from ..verify.gpu import check_for_wheel
    specs = sms = None
    if args.matrix is not None:
        from ..build.matrix import load_matrix
        from ..package.config import matrix_import_parents
        specs = load_matrix(args.matrix, import_parents=matrix_import_parents(args.matrix)).specs
    if args.sm:
        from ..core.arch import parse_sm_list
        from ..build.toolchain import cuda_major
        sms = parse_sm_list(args.sm, cuda_major=cuda_major())
    return check_for_wheel(root, specs=specs, sms=sms, allow_partial=args.allow_partial)


def _package_dir(package: str, folder: str) -> Path:
    """The artifact folder an installed package ships (the path Registry.from_package reads), found without
    importing the package. ``python -m aot`` run in a project's folder puts that folder first on sys.path,
    so the source tree's ``mypkg/`` shadows the installed package, and it has no artifacts (a build backend
    puts them into the wheel only): then the installed copy further down sys.path is read, and stderr says
    so. Which folder was read is always printed by the caller."""
    import importlib.util
    from ..core.manifest import MANIFEST_NAME
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError) as e:
        raise UsageError(f"package {package!r}: cannot be found ({e})") from None
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(f"package {package!r}: cannot be found (no such package on sys.path)")
    root = Path(list(spec.submodule_search_locations)[0]) / folder
    if (root / MANIFEST_NAME).is_file():
        return root
    cwd = Path.cwd().resolve()
    for entry in sys.path:
        candidate = Path(entry or cwd).joinpath(*package.split("."), folder)
        if candidate.resolve() != root.resolve() and (candidate / MANIFEST_NAME).is_file():
            print(f"aot: {root.parent} shadows the installed {package} (run from another folder to avoid it); "
                  f"reading {candidate}", file=sys.stderr)
            return candidate
    shadow = f" ({root.parent} in the current folder shadows any installed {package}: run from another folder)" \
        if cwd in root.resolve().parents else ""
    raise UsageError(f"package {package!r}: no manifest at {root / MANIFEST_NAME}{shadow}")


def _print_legacy(root, shown) -> None:
    """The set's cccl-legacy answers per release (cuda-cccl < 1.1), one line each, where it carries any."""
    from ..core.legacy_manifest import summary
    from ..core.manifest import load_manifest
    for line in summary(load_manifest(root).legacy):
        print(f"{shown}: {line}")
