"""The hatchling build hook: ``[tool.hatch.build.hooks.aot]`` in a downstream pyproject.toml bundles its
artifacts into the wheel (registered through ``[project.entry-points.hatch] aot = "aot.package.hatch"``).

It runs :func:`aot.bundle.bundle` (the same build + ``verify --for-wheel`` as ``aot bundle``) into
``build/aot-bundle/<folder>``, adds exactly those files under ``<package>/<folder>/`` via
``force_include``, tags the wheel ``py3-none-<the platforms of cuda-cccl's wheel>`` (:mod:`aot.package.tags`:
``py3-none-manylinux_2_26_x86_64``, which the package index accepts; no host code, so no Python or ABI
tag, and nothing for ``auditwheel repair`` to do) and adds what loading the artifacts needs to the wheel's requirements
(:func:`aot.package.bundle.required_pins`: ``cccl-aot-cuXX`` of the aot release series that built them, the
exact ``cuda-cccl==X`` without the toolkit extra where a CCCL artifact is bundled (none for NVRTC units
only), that major's ``cuda-bindings``), always, next to what the project declares (requirements of one name
intersect). Where the project declares a ``jit`` extra
(``jit = ["cccl-aot-cu13[jit]"]``) the hook pins it the same way, so ``pip install 'mypkg[jit]'`` adds the
toolkit for JIT fallback; without one it says so once. A project with a ``cu12`` and a ``cu13`` extra gets
those pins under the extra of the artifacts' CUDA major, and aot's runtime of the other major under its own
(:mod:`aot.package.extras`: one wheel, the major picked by the extra, as cuda-cccl and numba-cuda ship); a set of
several majors (``AOT_WHEEL_ARTIFACTS`` naming an ``aot merge`` of builds under each: :mod:`aot.core.majorset`)
gets each major's pins under its extra (:func:`aot.package.extras.wheel_requirements`, shared with the setuptools
backend).
A dependency the project declares that contradicts the artifacts stops the build, before anything compiles,
with every conflict listed, each naming its extra (``aot: error: ...``, raised as ``SystemExit`` so that pip
shows those lines and no traceback). Only wheels carry artifacts; the sdist carries the sources.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.plugin import hookimpl


class AotBuildHook(BuildHookInterface):
    PLUGIN_NAME = "aot"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        from .config import load_config
        from .tags import DECIDING_DIST, NVRTC_DECIDING_DIST, publishable, wheel_tag
        from .bundle import bundle
        from .extras import conflict_message, precheck, wheel_requirements
        from ..core.errors import AotError
        deps, optional = self.metadata.core.dependencies, self.metadata.core.optional_dependencies
        try:
            cfg = load_config(self.root)
            if "dependencies" in cfg.dynamic or "optional-dependencies" in cfg.dynamic:
                precheck(cfg, deps, optional, require=False)  # else bundle() checks them before compiling
            stage = Path(self.root) / "build" / "aot-bundle" / cfg.folder
            res = bundle(cfg, stage, require_pins=False)
            problems, requires, warning = wheel_requirements(res, deps, optional)
            if problems:  # every requirement of the project, its extras' too, each on its own line
                raise AotError(conflict_message(cfg.pyproject, problems))
        except AotError as e:  # the build backend's process prints a SystemExit's message alone: no traceback
            raise SystemExit(f"aot: error: {e}") from None
        prefix = "/".join([*cfg.package.split("."), cfg.folder])
        for p in sorted(stage.rglob("*")):
            if p.is_file():
                build_data["force_include"][str(p)] = f"{prefix}/{p.relative_to(stage).as_posix()}"
        build_data["pure_python"] = False
        build_data["tag"] = wheel_tag(res.cccl)
        if not publishable(build_data["tag"].split("-")[-1].split(".")[0]):
            dist = DECIDING_DIST if res.cccl else NVRTC_DECIDING_DIST
            self.app.display_warning(f"aot: wheel tag {build_data['tag']}: the installed {dist} is no wheel "
                                     f"(a source install), so its platform is unknown and no package index "
                                     f"accepts this tag; build with {dist} installed from its wheel")
        # always: an unpinned "cccl-aot-cu13" gets its range; with cu12/cu13 extras, each major's under its extra
        build_data["dependencies"].extend(requires)
        if warning:
            self.app.display_warning(f"aot: {cfg.pyproject}: {warning}")


@hookimpl
def hatch_register_build_hook() -> type[BuildHookInterface]:
    return AotBuildHook
