"""``aot gate``: the library's own command run with its JIT and with the packaged kernels, launch by launch
(:mod:`aot.verify.gate`, docs/gate.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..core.errors import VerificationError


def gate_parser(sub) -> None:  # noqa: ANN001 - argparse's private subparsers type
    g = sub.add_parser("gate", help="run a command (the library's GPU tests, a workload) with its JIT twice and "
                       "with the packaged kernels once, and compare what every launch wrote")
    g.add_argument("--package", default=None, help="the installed package whose shipped kernels must each be "
                   "launched and equal (default: [tool.aot] package of ./pyproject.toml, if any)")
    g.add_argument("--allow-unlaunched", action="store_true", help="accept shipped kernels the command never "
                   "launched (or launched without aot serving them); they are listed")
    g.add_argument("--json", type=Path, default=None, help="write every spec's row and every kernel's result")
    g.add_argument("--logs", type=Path, default=None, help="keep the three runs' launch logs in this folder")
    g.add_argument("--timeout", type=float, default=None, help="seconds each run may take")
    g.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command and its arguments")


def _package(args) -> str | None:  # noqa: ANN001
    if args.package:
        return str(args.package)
    import tomllib
    try:
        package = tomllib.loads(Path("pyproject.toml").read_text(encoding="utf-8"))["tool"]["aot"]["package"]
        return package if isinstance(package, str) and package else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def cmd_gate(args) -> int:  # noqa: ANN001
    from ..verify.gate import as_json, verdict
    from ..verify.gate_run import run_gate
    command = list(args.argv)
    if command[:1] == ["--"]:
        command = command[1:]
    package = _package(args)
    run = run_gate(command, package, timeout=args.timeout, logs=args.logs)
    print("runs: " + ", ".join(f"{k} exit {v}" for k, v in run.returncodes.items()))
    for row in run.rows:
        print(f"  {row.status:<13} {row.family:<6} {row.spec}: {row.detail}")
    others = [r for r in run.results if not any(r.kernel in row.kernels for row in run.rows)]
    if others:
        bad = [r for r in others if r.status == "FAILED"]
        print(f"other kernels (not shipped by {package or 'a named package'}): {len(others)} compared, "
              f"{len(bad)} differ" + (f"; first: {bad[0].kernel}: {bad[0].detail}" if bad else ""))
    for c in run.compiled[:20]:
        print(f"compiled in the packaged run: {c.get('family')} {c.get('kernel')} (from {c.get('caller')})")
    for why in run.unseen[:10]:
        print(f"note: not seen: {why}")
    passes, lines = verdict(run.rows, run.results, args.allow_unlaunched)
    if run.returncodes.get("jit") != 0:
        passes = False
        lines.insert(0, f"the command exited {run.returncodes.get('jit')} with the library's own JIT: it must pass "
                        f"there first (the comparison is against it)")
    elif run.returncodes.get("packaged") != run.returncodes.get("jit"):
        passes = False
        lines.insert(0, f"the command exited {run.returncodes.get('packaged')} with the packaged kernels and "
                        f"{run.returncodes.get('jit')} with the JIT")
    for line in lines:
        print(line)
    if args.json is not None:
        doc = as_json(run.rows, run.results)
        doc.update(returncodes=run.returncodes, compiled=run.compiled, passes=passes)
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    ok = sum(r.status == "ok" for r in run.rows)
    print(f"aot gate: {ok} of {len(run.rows)} shipped specs equal to the JIT, launch by launch; "
          f"{len(run.results)} kernels compared")
    if not passes:
        first = lines[0] if lines else "see above"
        raise VerificationError(f"aot gate failed: {first}")
    return 0
