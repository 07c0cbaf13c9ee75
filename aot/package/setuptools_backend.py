"""A PEP 517 build backend for setuptools projects: setuptools' own (``setuptools.build_meta``), whose wheels
carry the project's kernels. A project that builds with setuptools changes one line of its pyproject.toml:

    [build-system]
    requires = ["setuptools>=64", "cccl-aot-cu13[cu13]"]
    build-backend = "aot.package.setuptools_backend"     # was "setuptools.build_meta"

and keeps its ``[project]``, ``setup.py``/``setup.cfg``, package data and commands as they are; ``[tool.aot]``
says what to build, as for every backend. A wrapper of the backend rather than a ``build_py`` command: a command
can add files but not the wheel's tag or its requirements, and a ``cmdclass`` or entry point would be one more
thing per project (scikit-build-core's ``scikit_build_core.setuptools.build_meta`` wraps setuptools the same way).

``build_wheel`` runs :func:`aot.package.bundle.bundle` first (the same build and ``verify --for-wheel`` as
``aot bundle`` and the hatchling hook, into ``build/aot-bundle/<folder>``; an unchanged matrix rebuilds nothing),
then lets setuptools build its wheel, then writes that wheel again with the artifacts under
``<package>/<folder>/``, the tag of :mod:`aot.package.tags` and the requirements the hatchling hook adds
(:mod:`aot.package.wheelfile`): with a ``cu12`` and a ``cu13`` extra, each major's under its extra, every
conflict listed, as the hook does (:func:`aot.package.extras.wheel_requirements`). The requirements are known
only after the bundle, so this backend offers no ``prepare_metadata_for_build_wheel``: a frontend that wants the
metadata first builds the wheel for it (pip's ``pyproject_hooks`` then hands that same wheel back). Editable
installs are setuptools' alone, without artifacts, as with the hatchling hook; an sdist also carries the matrix
and the kernel sources it names by path (setuptools packs packages only, and ``python -m build`` builds the wheel
from the sdist). A problem is one line, ``aot: error: ...``, raised as ``SystemExit``; several conflicts, one
line each.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools

from ..core.log import get_logger

__all__ = ["build_wheel", "build_sdist", "get_requires_for_build_wheel", "get_requires_for_build_sdist",
           "build_editable", "get_requires_for_build_editable", "prepare_metadata_for_build_editable"]

log = get_logger(__name__)

get_requires_for_build_wheel = _setuptools.get_requires_for_build_wheel
get_requires_for_build_sdist = _setuptools.get_requires_for_build_sdist
build_editable = _setuptools.build_editable
get_requires_for_build_editable = _setuptools.get_requires_for_build_editable
prepare_metadata_for_build_editable = _setuptools.prepare_metadata_for_build_editable


def build_sdist(sdist_directory: str, config_settings: dict[str, Any] | None = None) -> str:
    """setuptools' sdist, with the matrix and the kernel sources it names by path added: setuptools packs the
    packages only, and ``python -m build`` makes the wheel from the sdist
    (:func:`aot.package.wheelfile.build_inputs`)."""
    from .config import load_config
    from .wheelfile import add_to_sdist, build_inputs
    from ..core.errors import AotError
    name = _setuptools.build_sdist(sdist_directory, config_settings)
    project = Path.cwd()
    try:
        cfg = load_config(project)
    except AotError as e:
        raise SystemExit(f"aot: error: {e}") from None
    add_to_sdist(Path(sdist_directory) / name, project, build_inputs(cfg.matrix, project))
    return name


def build_wheel(wheel_directory: str, config_settings: dict[str, Any] | None = None,
                metadata_directory: str | None = None) -> str:
    """setuptools' wheel with the project's artifacts in it (see the module docstring); returns its file name."""
    from .bundle import bundle
    from .config import load_config
    from .extras import conflict_message, wheel_requirements
    from .tags import DECIDING_DIST, NVRTC_DECIDING_DIST, publishable, wheel_tag
    from .wheelfile import add_artifacts, requirements_of, wheel_metadata
    from ..core.errors import AotError
    project = Path.cwd()
    try:
        cfg = load_config(project)
        stage = project / "build" / "aot-bundle" / cfg.folder
        res = bundle(cfg, stage, require_pins=False)
    except AotError as e:  # the backend's process prints a SystemExit's message alone: no traceback
        raise SystemExit(f"aot: error: {e}") from None
    out_dir = Path(wheel_directory)
    work = Path(tempfile.mkdtemp(prefix=".aot-setuptools-", dir=out_dir))
    try:
        built = work / _setuptools.build_wheel(str(work), config_settings, metadata_directory)
        metadata = wheel_metadata(built)
        deps, extras = requirements_of(metadata)
        # every requirement of the wheel, wherever the project declared it (pyproject.toml, setup.py), each
        # conflict listed; with cu12/cu13 extras each read as an install of its major (aot.package.extras)
        try:
            problems, requires, warning = wheel_requirements(res, deps, extras)
        except AotError as e:
            raise SystemExit(f"aot: error: {e}") from None
        if problems:
            raise SystemExit(f"aot: error: {conflict_message(cfg.pyproject, problems)}")
        tag = wheel_tag(res.cccl)
        if not publishable(tag.split("-")[-1].split(".")[0]):
            dist = DECIDING_DIST if res.cccl else NVRTC_DECIDING_DIST
            log.warning("aot: wheel tag %s: the installed %s is no wheel (a source install), so its platform is "
                        "unknown and no package index accepts this tag; build with %s installed from its wheel",
                        tag, dist, dist)
        if warning:
            log.warning("aot: %s: %s", cfg.pyproject, warning)
        prefix = "/".join([*cfg.package.split("."), cfg.folder])
        try:
            whl = add_artifacts(built, out_dir, stage, prefix, tag, requires)
        except AotError as e:
            raise SystemExit(f"aot: error: {e}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return whl.name
