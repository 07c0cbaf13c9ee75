"""Turn the cccl-legacy serving on at a process's first ``import cuda.compute`` (issue 44).

Called by the import hook (:mod:`aot.runtime.loader.import_hook`) before anything loads NVRTC: only where
the installed cuda-cccl has no ``serialize`` (< 1.1.0) and an installed package carries answers for that
release (``<package>/artifacts/cccl-legacy/cuda-cccl-<release>/``) are the shims loaded; everywhere else this
costs one metadata read. The library's code is unchanged: cuda.compute's C library binds to the shims and
every build it runs asks them first.
"""

from __future__ import annotations

import logging
import sys
from importlib import metadata
from pathlib import Path

log = logging.getLogger("aot")
#: The first cuda-cccl release whose cuda.compute serializes (its blobs are served the usual way).
FIRST_SERIALIZE = (1, 1, 0)
_active: object = None


def release_without_serialize() -> str | None:
    """The installed cuda-cccl release when it predates ``serialize``, else None (also when not installed)."""
    try:
        version = metadata.version("cuda-cccl")
    except metadata.PackageNotFoundError:
        return None
    parts = []
    for p in version.split(".")[:3]:
        digits = "".join(c for c in p if c.isdigit()) if p else ""
        parts.append(int(digits) if digits else 0)
    return version if tuple(parts) < FIRST_SERIALIZE else None


def package_roots(release: str) -> list[Path]:
    """Every installed package's ``artifacts/`` that carries answers for ``release`` (sys.path order)."""
    roots = []
    for entry in sys.path:
        base = Path(entry or ".")
        try:
            children = sorted(base.iterdir()) if base.is_dir() else []
        except OSError:
            continue
        for child in children:
            if (child / "artifacts" / "cccl-legacy" / f"cuda-cccl-{release}").is_dir():
                roots.append(child / "artifacts")
    return roots


def activate() -> object:
    """Load the shims with every installed package's answers for the installed release (once per process);
    None where there is nothing to serve. A failure is one warning: cuda.compute then JITs as without aot."""
    global _active
    if _active is not None:
        return _active
    release = release_without_serialize()
    if release is None:
        return None
    roots = package_roots(release)
    if not roots:
        return None
    from . import cccl_legacy
    try:
        table: dict[str, bytes] = {}
        for root in roots:
            table.update(cccl_legacy.load_table(root, release))
        from ..loader.stand_ins import _private_dir
        _active = cccl_legacy.install(roots[0], release, _private_dir())
        _active.table.update(table)
    except (OSError, RuntimeError, FileNotFoundError) as e:
        log.warning("aot: cannot serve cuda.compute's builds under cuda-cccl %s (%s); they JIT-compile", release, e)
        return None
    return _active
