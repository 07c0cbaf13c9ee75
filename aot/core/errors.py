"""The error catalogue: every failure ``aot`` reports, each carrying the exit code the CLI returns.

Library code only raises; ``aot.cli.main`` catches :class:`AotError` once, prints one line and exits
with ``return_code``. Keeping the codes here (and nowhere else) makes them part of the documented CLI
contract instead of an accident of where an error happened to be raised.
"""

from __future__ import annotations


class AotError(Exception):
    """Base of every error ``aot`` raises on purpose."""

    return_code = 1


class BusyError(AotError):
    """Another ``aot`` process holds the output directory (a build or merge into the same ``--out``)."""

    return_code = 1


class UsageError(AotError):
    """Bad command-line input (an unparseable ``--sm`` or ``--shard``, an unknown ``--only`` name)."""

    return_code = 2


class MatrixError(AotError):
    """A build matrix that does not validate. The message names file, line, spec and field."""

    return_code = 2


class ToolchainError(AotError):
    """cuda-cccl / NVRTC / the stand-in driver cannot be found or used on this host."""

    return_code = 3


class BuildError(AotError):
    """One or more build items failed; nothing half-written was left behind."""

    return_code = 4


class ArtifactError(AotError):
    """An artifact or manifest failed a check (magic, bounds, sha256, versions, paths)."""

    return_code = 5


class NoDeviceError(AotError):
    """A GPU was required (``--sm native``, ``verify --gpu``) and none is usable."""

    return_code = 6


class VerificationError(AotError):
    """An artifact ran on the GPU and disagreed with the numpy reference, or a package failed verify."""

    return_code = 7


class JitForbiddenError(VerificationError):
    """A compile after startup under ``AOT_NO_JIT=raise`` (``aot.no_jit("raise")``): the packaged artifacts lack
    the kernel (or aot refused to serve it, saying why). Raised before anything compiles."""


class CallError(AotError, TypeError):
    """A loaded algorithm was called with an argument its artifact cannot serve: state missing, unknown, of
    another dtype or on the host, an iterator's leaf of the wrong kind or dtype. Never a wrong result."""

    return_code = 8


class ArgumentError(AotError, TypeError):
    """A public call's argument aot cannot read unambiguously: NVRTC options that are neither flags nor
    ProgramOptions fields (a nested list, a macro value that is not text or a number), a source that is not
    text, kernel names that are not names. Raised at the call, naming the argument, before anything is
    looked up or compiled; a ``TypeError`` too, as the same mistake in a plain Python call would be."""

    return_code = 2


class NothingRecordedError(AotError):
    """``aot record`` saw no compile in the command (its GPU paths need a device, or no Python ran)."""

    return_code = 9


class AotWarning(UserWarning):
    """An artifact or cache entry was skipped (the next source served instead), or a manifest is unusable.

    Not an error, so it has no exit code; it lives here because this module is stdlib-only, and the
    registry's front (:mod:`aot.runtime.loader.registry`) warns before anything heavier is imported."""


def without_frames(e: BaseException) -> BaseException:
    """``e`` (and its causes and contexts) without a traceback: the frames it held, and their locals (a
    failed ``cuda.core.Program``), are freed now, before anything can keep them in a reference cycle."""
    seen: set[int] = set()
    x: BaseException | None = e
    while x is not None and id(x) not in seen:
        seen.add(id(x))
        x.__traceback__ = None
        x = x.__cause__ or x.__context__
    return e
