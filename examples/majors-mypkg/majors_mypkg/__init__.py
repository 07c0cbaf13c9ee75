"""A downstream library with a `cu12` and a `cu13` extra (docs/downstream.md, "Both CUDA majors"): built once, its
wheel carries the kernels of the CUDA major it was built under, and an install of the other major refuses them and JIT-compiles;
bundled from an `aot merge` of a build under each major (docs/wheels.md, "Both CUDA majors in one wheel"), it
carries both, and each install loads its own major's."""

import aot


def __getattr__(name: str):
    # Made on first use: `aot build` imports majors_mypkg.kernels while the artifacts are being built.
    if name == "registry":
        global registry
        registry = aot.Registry.from_package(__name__)
        return registry
    raise AttributeError(name)
