"""Bundle a downstream package's artifacts: build (or take a prebuilt/merged set), verify for the wheel,
write only ``manifest.json``, the ``*.aot`` files and ``aot-package.json`` into the package folder.

One code path for every integration: ``aot bundle`` (any build backend), the hatchling hook
(:mod:`aot._hatch`) and the CMake function ``aot_add_artifacts()`` (``aot/cmake/Findaot.cmake``) all call
:func:`bundle`. It runs the same build driver as ``aot build`` and the same checks as
``aot verify --for-wheel``; build reports and host paths never reach the package folder.

Pins follow the artifacts and ask only for what loading needs (:func:`required_pins`): aot's runtime of that
CUDA major, that major's cuda-bindings, and, only where the set holds a cuda.compute (CCCL) artifact, the exact
cuda-cccl that built them (no ``cuXX`` extra: no toolkit). A set of NVRTC units only requires no cuda-cccl,
so it installs beside whatever cuda-cccl the package or its users pin.
A project whose ``[project].dependencies`` lack or contradict them is stopped with an explanation
(:func:`pin_problems`); the hatchling hook adds them itself, and the JIT fallback under the package's own
``jit`` extra (:func:`jit_requirement`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .config import AotConfig
from .pkginfo import (INFO_FORMAT, INFO_NAME, INFO_VERSION, BundleResult, carried_cccl, describe,  # noqa: F401
                      fill_folder, numba_requirement)  # re-exported: what a bundle writes and returns
from .extras import PinError, conflict_message, pin_conflicts, precheck  # noqa: F401 - PinError re-exported
from .pins import RUNTIME_DIST, has_cccl, jit_requirement, pin_problems, required_pins  # noqa: F401 - re-exported
from ..build.isolated import expose_build_env_toolkit
from ..core.errors import ArtifactError, UsageError
from ..core.log import get_logger
from ..core.hitindex import INDEX_NAME
from ..core.manifest import MANIFEST_NAME, load_manifest
from ..core.text import short

log = get_logger(__name__)

#: The families a package's own GPU check may be named for (``[tool.aot] checks``; aot.verify.gpu runs them).
CHECKED_FAMILIES = ("nvrtc", "numba")


def _sms_for(cfg: AotConfig, sm: str | None) -> list[int]:
    from ..core.arch import parse_sm_list
    from ..build.toolchain import cuda_major, native_sm, nvrtc_supported_sms
    major = cuda_major()
    text = sm if sm is not None else cfg.sm_for(major)
    try:
        return parse_sm_list(text, cuda_major=major, native=native_sm() if "native" in text.lower() else None,
                             supported=nvrtc_supported_sms())
    except UsageError as e:
        where = "--sm" if sm is not None else f"{cfg.pyproject}: [tool.aot] key 'sm' (or AOT_WHEEL_SM)"
        raise UsageError(f"{where}: {str(e).removeprefix('--sm: ')}") from None


def bundle(cfg: AotConfig, out: Path | None = None, *, prebuilt: Path | None = None, sm: str | None = None,
           allow_partial: bool | None = None, jobs: int | None = None, work: Path | None = None,
           require_pins: bool = True, on_event: Callable | None = None) -> BundleResult:
    """Build (or take ``prebuilt``), verify for the wheel, and write the package folder ``out`` atomically.

    ``out`` defaults to ``<package>/<folder>`` in the project; ``work`` (default ``<project>/build/aot``)
    keeps the build output between runs, so an unchanged matrix is a no-op rebuild.
    """
    from ..core.env import JOBS
    from ..build.matrix import load_matrix
    expose_build_env_toolkit()  # pip's isolated build: its toolkit, not the outer environment's (or none)
    specs = load_matrix(cfg.matrix, import_parents=cfg.import_parents).specs
    unknown = [u for u in cfg.checks if u not in {s.name for s in specs if s.family in CHECKED_FAMILIES}]
    if unknown:
        raise UsageError(f"{cfg.pyproject}: [tool.aot] key 'checks': {unknown[0]!r} is not an NVRTC unit or a "
                         f"numba kernel of {cfg.matrix.name}")
    sms = _sms_for(cfg, sm)
    source_date_epoch()  # a bad value stops here, before minutes of compiling
    out = Path(out) if out is not None else cfg.out_dir
    refuse_foreign_files(out)  # before minutes of compiling; checked again before the swap
    allow = cfg.allow_partial if allow_partial is None else allow_partial
    src = prebuilt if prebuilt is not None else cfg.prebuilt_dir()
    if src is None:
        from ..build.builder import build
        if "dependencies" not in cfg.dynamic:  # before minutes of compiling: every conflict, listed
            precheck(cfg, cfg.dependencies, cfg.optional_dependencies, require=require_pins, specs=specs)
        src = work if work is not None else cfg.project / "build" / "aot"
        build(specs, sms, src, jobs=jobs if jobs is not None else JOBS.get(), on_event=on_event,
              import_parents=cfg.import_parents)
    elif not (Path(src) / MANIFEST_NAME).is_file():
        raise UsageError(f"prebuilt set {src}: no {MANIFEST_NAME} (expected an 'aot build' or 'aot merge' output)")
    extra_sets = cfg.merge_dirs()
    if extra_sets:  # builds made elsewhere under other cuda-cccl releases: one set carrying every release
        from ..build.merge import merge
        merged = (work if work is not None else cfg.project / "build" / "aot").with_name("aot-merged")
        merge([Path(src), *extra_sets], merged)
        src = merged
    if cfg.cccl_legacy:  # cuda.compute answered on a release without serialize (aot.package.legacy)
        from .legacy import with_legacy_answers
        src = with_legacy_answers(cfg, Path(src), sms, work)
    names = {s.name for s in specs}
    built = prebuilt is None and cfg.prebuilt_dir() is None
    from ..core.majorset import read_index
    if read_index(src) is not None:  # one set per CUDA major (aot merge of builds under each): each checked
        from .majors import bundle_majors
        return bundle_majors(cfg, Path(src), out, specs, sms, allow, require_pins, built, write_swapped,
                             merged=bool(extra_sets))
    m = load_manifest(src)
    if extra_sets:  # CuPy sets recorded under another CuPy release: its generated code is other specs, carried too
        names |= {a["name"] for a in m.artifacts if a["family"] == "cupy"}
    cccl, releases = carried_cccl(m, names)
    # a prebuilt set's own producer and releases decide the pins
    _raise_pin_problems(cfg, m.producer, require_pins, cccl, releases)
    info = describe(cfg, m, specs, sms, allow)
    n, size = write_package_folder(Path(src), out, info, names=names, pack=cfg.pack)
    return BundleResult(out, n, size, info, tuple(info["requires"]), built, cccl, tuple(releases or ()))


def _raise_pin_problems(cfg: AotConfig, producer: Mapping[str, Any], require: bool, cccl: bool,
                        releases: Sequence[str] | None = None) -> None:
    if "dependencies" in cfg.dynamic:
        return  # computed by the backend (the hatch hook adds the pins itself)
    problems = pin_conflicts(cfg.dependencies, producer, require=require, cccl=cccl, releases=releases,
                             optional=cfg.optional_dependencies)
    if problems:
        raise PinError(conflict_message(cfg.pyproject, problems))


#: What aot writes into a package folder (or an ``aot build`` output there), besides ``*.aot`` artifacts.
_OURS = {MANIFEST_NAME, INDEX_NAME, INFO_NAME, "build-report.json", ".aot-lock"}


def foreign_files(out: Path) -> list[str]:
    """Paths (relative, sorted) under the package folder ``out`` that aot did not write: anything but
    ``manifest.json``, ``aot-package.json``, an ``aot build``'s report and lock, and ``*.aot`` files that
    start with the artifact magic (``*.aotpack``: the pack's; symlinks and special files count as foreign).
    Empty if ``out`` is absent."""
    from ..core.format import MAGIC
    from ..core.legacy_manifest import MAGIC as LEGACY_MAGIC
    from ..core.pack import PACK_MAGIC, PACK_SUFFIX
    if not out.is_dir() or out.is_symlink():
        return []
    found = []
    for top, dirs, files in os.walk(out):  # never follows symlinked folders: they are listed, not entered
        here = Path(top)
        for name in [*files, *(d for d in dirs if (here / d).is_symlink())]:
            p = here / name
            rel = p.relative_to(out).as_posix()
            if p.is_symlink() or not p.is_file():
                found.append(rel)
            elif rel in _OURS or _major_own(rel):
                continue
            elif p.suffix in (".aot", PACK_SUFFIX):
                ours: tuple[bytes, ...] = (MAGIC,) if p.suffix == ".aot" else (PACK_MAGIC,)
                if p.suffix == ".aot" and _in_set(rel).startswith("cccl-legacy/"):
                    ours += (LEGACY_MAGIC,)  # a cccl-legacy answer (aot.core.legacy_manifest)
                with open(p, "rb") as f:
                    if f.read(len(MAGIC)) not in ours:  # every magic is 8 bytes
                        found.append(rel)
            else:
                found.append(rel)
    return sorted(found)


def _major_own(rel: str) -> bool:
    """``cu13/manifest.json``, ``cu13/aot-package.json``: a major's set in a set of several (core.majorset)."""
    name = _in_set(rel)
    return name != rel and name in _OURS


def _in_set(rel: str) -> str:
    """``rel`` inside its ordinary set: a major's folder (``cu13/``, core.majorset) left off, else ``rel``."""
    top, _, name = rel.partition("/")
    return name if name and top[:2] == "cu" and top[2:].isascii() and top[2:].isdigit() else rel


def refuse_foreign_files(out: Path) -> None:
    """Stop (one line naming them) when ``out`` holds files aot did not write: the folder is replaced as a
    whole, and nothing of the author's is deleted silently."""
    found = foreign_files(out)
    if found:
        shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise UsageError(f"{out}: holds files aot did not write ({shown}); aot replaces this folder as a whole, "
                         f"so move them out of it, or set [tool.aot] folder to another name")


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``, through libc): a reader, or a
    process killed at any instant, sees either the old folder or the new one at ``b``, never none. False
    where libc, the kernel or the file system lacks it (the caller then renames twice, recoverably)."""
    import ctypes
    import errno
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # not glibc >= 2.28 (musl, macOS)
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _swap_pause(stage: str) -> None:
    """Where a swap can be interrupted: ``"exchanged"`` (after the atomic exchange, the old set not yet
    removed) or ``"renamed"`` (between the two renames of the fallback). Tests replace it to kill a
    bundle exactly there; it does nothing otherwise."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def recover_swap(out: Path) -> None:
    """Clean up after a bundle killed inside its swap (its process gone): an ``out`` that is missing gets its
    previous set back from ``.<out>.old-PID``; stale ``.<out>.old-PID`` and ``.<out>.tmp-PID-*`` folders are
    removed. A folder holding files aot did not write, or of a bundle still running, is left alone."""
    import re
    pattern = re.compile(rf"\.{re.escape(out.name)}\.(old|tmp)-(\d+)(-.*)?")
    try:
        names = sorted(os.listdir(out.parent))
    except FileNotFoundError:
        return
    for name in names:
        m = pattern.fullmatch(name)
        p = out.parent / name
        if not m or int(m.group(2)) == os.getpid() or _alive(int(m.group(2))):
            continue
        if p.is_symlink() or not p.is_dir() or foreign_files(p):
            log.warning("%s: left over from a killed bundle, but not only aot's files; not removed", p)
            continue
        if m.group(1) == "old" and not (out.exists() or out.is_symlink()):
            os.replace(p, out)
            log.warning("%s: restored from %s, left by a bundle killed inside its folder swap", out, p)
        else:
            shutil.rmtree(p, ignore_errors=True)
            log.info("removed %s, left by a bundle killed inside its folder swap", p)


def source_date_epoch() -> int | None:
    """``SOURCE_DATE_EPOCH`` as a file time: one error line (exit 2) for a value no file can carry, before
    any work rather than an ``OverflowError`` at the last step."""
    import time
    from ..core.env import SOURCE_DATE_EPOCH
    epoch = SOURCE_DATE_EPOCH.get()
    if epoch is None:
        return None
    try:
        time.gmtime(epoch)
        if not 0 <= epoch < 1 << 63:
            raise OverflowError
    except (OverflowError, OSError, ValueError):
        raise UsageError(f"environment variable SOURCE_DATE_EPOCH: {short(str(epoch))} is out of range for a "
                         f"file time (seconds since 1970, e.g. 1700000000)") from None
    return epoch


def write_package_folder(src: Path, out: Path, info: Mapping[str, Any],
                         names: set[str] | None = None, pack: Any = False) -> tuple[int, int]:
    """Copy ``src``'s manifest and the artifacts it names (only those of ``names``) into ``out``, plus
    ``aot-package.json``: into a sibling temporary folder first, then swapped in, so a reader never sees a
    half-written folder. Nothing else (reports, stray files) is copied, and an ``out`` holding files aot did
    not write is refused (:func:`refuse_foreign_files`), never replaced. Returns (artifacts, bytes).

    The swap is one ``renameat2(RENAME_EXCHANGE)`` where the system has it: killed at any instant, ``out``
    holds the old set or the new one. Elsewhere it is two renames (``out`` to ``.<out>.old-PID``, the new
    set to ``out``): an exception between them puts the old set back, and after a SIGKILL the next bundle
    does (:func:`recover_swap`). ``pack`` (``[tool.aot] pack``: ``"auto"``, true, false): the artifacts go
    into packs (:mod:`aot.package.packing`) instead of files, each entry naming its pack."""
    return write_swapped(out, lambda stage: fill_folder(stage, src, info, names, pack))


def write_swapped(out: Path, fill: Callable[[Path], tuple[int, int]]) -> tuple[int, int]:
    """``fill`` a sibling temporary folder, then swap it in for ``out`` (see :func:`write_package_folder`)."""
    epoch = source_date_epoch()
    recover_swap(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-{os.getpid()}-", dir=out.parent))
    try:
        n, total = fill(stage)
        for p in [stage, *stage.rglob("*")]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
            if epoch is not None:
                os.utime(p, (epoch, epoch))
        if not (out.exists() or out.is_symlink()):
            os.replace(stage, out)
        else:
            if not out.is_dir() or out.is_symlink():
                raise UsageError(f"{out}: exists and is not a directory")
            refuse_foreign_files(out)
            if _exchange(stage, out):  # out: the new set; stage: the old one, removed below
                _swap_pause("exchanged")
            else:
                old = out.with_name(f".{out.name}.old-{os.getpid()}")
                os.replace(out, old)
                try:
                    _swap_pause("renamed")
                    os.replace(stage, out)
                except BaseException:  # SIGTERM (raised by the CLI), Ctrl-C, a failed rename: the old set back
                    if not out.exists():
                        os.replace(old, out)
                    raise
                shutil.rmtree(old, ignore_errors=True)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
    return n, total


def read_info(root: Path) -> dict | None:
    """``aot-package.json`` of a bundled folder, or ``None`` (an ``aot build`` output has none, or one that is
    not ours). One that is there but cannot be read or parsed (too large, not JSON, nested too deeply) is an
    :class:`ArtifactError` naming it: it comes from a wheel, and it must not pass for "no checks"."""
    from ..core.format import _read_regular, loads_strict_json
    path = Path(root) / INFO_NAME
    try:
        doc = loads_strict_json(_read_regular(path, 1 << 20))
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ArtifactError(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise ArtifactError(f"{path}: not valid JSON: {str(e)[:200]}") from None
    # _read_regular's ArtifactError (not a regular file, over 1 MiB) names the path already
    return doc if isinstance(doc, dict) and doc.get("format") == INFO_FORMAT else None
