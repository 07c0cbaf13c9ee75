"""The hatchling build hook: ``[tool.hatch.build.hooks.aot]`` in a downstream pyproject.toml bundles its
artifacts into the wheel (registered through ``[project.entry-points.hatch] aot = "aot.package.hatch"``).

It runs :func:`aot.bundle.bundle` (the same build + ``verify --for-wheel`` as ``aot bundle``) into
``build/aot-bundle/<folder>``, adds exactly those files under ``<package>/<folder>/`` via
``force_include``, marks the wheel platform-specific (``py3-none-<platform>``: the artifacts are Linux
x86_64 GPU code, not pure Python) and adds the pins the artifacts need (exact cuda-cccl, that CUDA major's
cuda-bindings) to the wheel's requirements. A pin the project declares that contradicts the artifacts
stops the build with an explanation. Only wheels carry artifacts; the sdist carries the sources.
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
        import sysconfig
        from .config import load_config
        from .bundle import bundle, pin_problems
        from ..core.errors import AotError
        cfg = load_config(self.root)
        stage = Path(self.root) / "build" / "aot-bundle" / cfg.folder
        try:
            res = bundle(cfg, stage, require_pins=False)
            problems = pin_problems(self.metadata.core.dependencies, res.info["producer"], require=False)
            if problems:
                raise AotError(f"{cfg.pyproject}: [project] dependencies: {'; '.join(problems)}")
        except AotError as e:  # hatchling prints the exception: one line that says what to change
            raise RuntimeError(f"aot: {e}") from None
        prefix = "/".join([*cfg.package.split("."), cfg.folder])
        for p in sorted(stage.rglob("*")):
            if p.is_file():
                build_data["force_include"][str(p)] = f"{prefix}/{p.relative_to(stage).as_posix()}"
        build_data["pure_python"] = False
        build_data["tag"] = "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")
        from packaging.requirements import Requirement
        from packaging.utils import canonicalize_name
        declared = {canonicalize_name(Requirement(d).name) for d in self.metadata.core.dependencies}
        for pin in res.pins:  # what the project already declares was checked above
            if canonicalize_name(Requirement(pin).name) not in declared:
                build_data["dependencies"].append(pin)


@hookimpl
def hatch_register_build_hook() -> type[BuildHookInterface]:
    return AotBuildHook
