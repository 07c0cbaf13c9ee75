"""Command line: argument parsing and all printing. Library modules only raise and return data.

``main(argv)`` takes its arguments (tests call it directly), catches :class:`AotError` once, prints one
line and returns the error's exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Sequence

from ..core.version import __version__
from ..core.errors import AotError
from ..core.text import printable
from .common import DEFAULT_OUT, _prog
from .build_cmds import cmd_build, cmd_bundle, cmd_merge, cmd_validate
from .check_cmds import cmd_inspect, cmd_verify
from .env_cmds import _cache_parser, cmd_cache, cmd_doctor
from .record_cmds import cmd_record, record_parser
from .gate_cmds import cmd_gate, gate_parser

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
    b.add_argument("--matrix", type=Path, default=None, help="build matrix YAML (default: ./build_matrix.yaml "
                   "if this folder holds one, else the bundled one)")
    b.add_argument("--sm", default="all", help="SMs: '80,89,90', 'native' or 'all' (default: all for the "
                   "installed CUDA major)")
    b.add_argument("--out", type=Path, default=Path(DEFAULT_OUT), help=f"output directory (default: {DEFAULT_OUT})")
    b.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: CPU count)")
    b.add_argument("--only", default=None, help="build only these specs: NAME[,NAME...]")
    b.add_argument("--keep-going", action="store_true", help="build every item even if some fail (and the specs "
                   "whose module cannot be imported)")
    b.add_argument("--force", action="store_true", help="rebuild items whose artifact is up to date")
    b.add_argument("--shard", default=None, help="build the K-th of N deterministic slices: K/N")
    b.add_argument("--force-stub-driver", action="store_true",
                   help="use the stand-in libcuda even if a real driver is present")
    b.add_argument("--quiet", "-q", action="store_true", help="no progress bar or table")

    v = sub.add_parser("validate", parents=[verbose], help="validate a build matrix and list its specs")
    v.add_argument("--matrix", type=Path, default=None, help="build matrix YAML (default: ./build_matrix.yaml "
                   "if this folder holds one, else the bundled one)")
    v.add_argument("--no-code", action="store_true", help="import nothing the matrix names (a matrix from "
                   "elsewhere): validate the rest and list the specs that name code")

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
    ver.add_argument("--launches", type=Path, default=None, help="with --gpu: replay the kernel launches `aot "
                     "record` kept (DIR: <matrix>.launches; default: the one beside --matrix, if any) for kernels "
                     "without a check (numba kernels through their dispatcher need --package)")
    ver.add_argument("--allow-unchecked", action="store_true", help="with --gpu: exit 0 even when kernels have "
                     "neither a check nor a recorded launch (by default they fail the run, exit 7)")

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
    record_parser(sub)
    gate_parser(sub)

    mg = sub.add_parser("merge", parents=[verbose],
                        help="combine shard outputs (build --shard K/N), and builds made under different "
                             "cuda-cccl releases (a CCCL blob per release), into one artifact set")
    mg.add_argument("shards", nargs="+", type=Path, help="shard or build output directories")
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


def _quiet_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null: the interpreter's final flush would otherwise raise
    again and print "Exception ignored ... BrokenPipeError" (the recipe of Python's signal documentation)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout: nothing will be flushed to it
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


class Terminated(KeyboardInterrupt):
    """SIGTERM (a CI cancellation, ``kill``), raised in the main thread so it unwinds like Ctrl-C: the build
    stops its workers (:mod:`aot.build.workers`), temp files are removed, and the CLI prints one line and
    exits 143 (128 + 15, the shell's code for SIGTERM) instead of dying with the workers left behind."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


@contextlib.contextmanager
def _sigterm_unwinds():
    """SIGTERM raises :class:`Terminated` for the duration (main thread only: elsewhere a handler cannot be
    set, and the caller's own handling stays). The previous handler comes back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _os_error_line(e: OSError) -> str:
    """One line for an OSError that escaped: what aot was doing where it says (``aot.core.fs``), else the
    path and the reason, never a bare ``[Errno 28] No space left on device``."""
    if e.filename is not None:
        extra = f" -> {_clip(str(e.filename2))}" if e.filename2 is not None else ""
        return f"{_clip(str(e.filename))}{extra}: {e.strerror or e}"
    return _clip(e.strerror or str(e), 1000)


def _clip(text: str, limit: int = 300) -> str:
    """A path or message from the user in about ``limit`` characters, its start and its end (a 1 MB file
    name is not echoed whole)."""
    if len(text) <= limit:
        return text
    tail = limit // 4  # the end of a message usually says why
    return f"{text[:limit - tail - 40]}...({len(text)} characters in all)...{text[-tail:]}"


def main(argv: Sequence[str] | None = None) -> int:
    with _sigterm_unwinds():
        try:
            return _flushed(_main(argv))
        except Terminated:  # SIGTERM, wherever it arrived (in a command, while parsing or printing)
            print("aot: terminated", file=sys.stderr)
            return 143
        except KeyboardInterrupt:
            print("aot: interrupted", file=sys.stderr)
            return 130


def _flushed(rc: int) -> int:
    """``rc``, once what the command printed has left: a reader that left early (``aot doctor | head``) is
    then met here, not by the interpreter's final flush, which printed "Exception ignored ... BrokenPipeError"
    and exited 120 whenever the output was still buffered when the reader left (a race under load)."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except (OSError, ValueError, AttributeError):  # a closed or missing stdout: nothing more to say there
        pass
    return rc


def _main(argv: Sequence[str] | None) -> int:
    _survive_any_encoding()
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # argparse already printed the usage error (2), or --help / --version (0)
        return int(e.code or 0)
    handler = _log_to_stderr(getattr(args, "verbose", 0))  # SUPPRESS: the -v action is shared by every parser
    try:
        commands = {"build": cmd_build, "validate": cmd_validate, "verify": cmd_verify, "inspect": cmd_inspect,
                    "doctor": cmd_doctor, "merge": cmd_merge, "cache": cmd_cache, "bundle": cmd_bundle,
                    "record": cmd_record, "gate": cmd_gate}
        return commands[args.command](args)
    except AotError as e:  # clipped: a message quoting unbounded input must not become a 1 MB line
        print(f"aot: error: {printable(_clip(str(e), 1000))}", file=sys.stderr)  # one line, whatever it quotes
        return e.return_code
    except BrokenPipeError:  # `aot cache info | head`: the reader left; what it read is the answer
        _quiet_stdout()
        return 141  # 128 + SIGPIPE, what a shell reports for a writer the pipe ended
    except OSError as e:  # a path that cannot be read or written (a full disk, missing permissions)
        print(f"aot: error: {printable(_os_error_line(e))}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as e:  # a runtime-only install running a build/report command
        if e.name not in ("yaml", "rich"):
            raise
        from ..runtime.loader.lean import install_hint
        print(f"aot: error: 'aot {args.command}' needs {'PyYAML' if e.name == 'yaml' else 'rich'}, which a "
              f"runtime-only install leaves out: {install_hint('build')}", file=sys.stderr)
        return 3
    finally:
        if handler is not None:
            import logging
            logging.getLogger("aot").removeHandler(handler)


