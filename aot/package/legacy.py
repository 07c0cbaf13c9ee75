"""The bundle's cccl-legacy step (issue 44): a package's ``[tool.aot] cccl-legacy`` specs answered on the
cuda-cccl release of the build environment, where that release has no ``serialize`` (< 1.1.0).

Every build backend's hook goes through :func:`aot.package.bundle.bundle`, which calls this after the
matrix's own set is built (or taken prebuilt, or merged): the answers are recorded in a process of their
own per SM (the recording shims must load before cuda.compute's C library), into a legacy-only set beside
the build's, and ``aot merge`` carries them into the set the wheel ships. Under a release with
``serialize`` there is nothing to answer (its blobs are served the usual way): one log line, no step.
Sets merged in (``[tool.aot] merge``) may carry other releases' answers already, built in their own
environments.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from ..core.errors import BuildError
from ..core.log import get_logger
from .config import AotConfig

log = get_logger(__name__)


def installed_release_without_serialize() -> str | None:
    from ..runtime.adapters.cccl_legacy_activate import release_without_serialize
    return release_without_serialize()


def with_legacy_answers(cfg: AotConfig, src: Path, sms: Sequence[int], work: Path | None) -> Path:
    """``src`` with the answers of ``cfg.cccl_legacy`` for each of ``sms`` merged in (a new set beside the
    build's), or ``src`` itself where the installed cuda-cccl serializes or is missing."""
    release = installed_release_without_serialize()
    if release is None:
        log.info("%s: [tool.aot] cccl-legacy: the build environment's cuda-cccl serializes (or is missing); "
                 "no answers recorded here", cfg.pyproject)
        return src
    base = work if work is not None else cfg.project / "build" / "aot"
    legacy_dir, merged = base.with_name("aot-legacy"), base.with_name("aot-legacy-merged")
    shutil.rmtree(legacy_dir, ignore_errors=True)  # answers of another spec list or toolchain never linger
    env = dict(os.environ)
    roots = [str(cfg.package_dir.parent), *filter(None, [env.get("PYTHONPATH")])]  # the package's own operators
    env["PYTHONPATH"] = os.pathsep.join(roots)
    for sm in sms:
        cmd = [sys.executable, "-m", "aot.build.cccl_legacy_build", "--sm", str(sm), "--out", str(legacy_dir),
               *cfg.cccl_legacy]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cfg.project)
        if r.returncode != 0:
            tail = (r.stderr.strip().splitlines() or r.stdout.strip().splitlines() or [f"exit {r.returncode}"])
            raise BuildError(f"{cfg.pyproject}: [tool.aot] cccl-legacy under cuda-cccl {release}, sm_{sm}: "
                             f"{tail[-1]}")
    from ..build.merge import merge
    shutil.rmtree(merged, ignore_errors=True)
    merge([src, legacy_dir], merged)
    log.info("cccl-legacy: %s answered under cuda-cccl %s for sm %s", ", ".join(cfg.cccl_legacy), release,
             ",".join(map(str, sms)))
    return merged
