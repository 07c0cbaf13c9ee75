"""A downstream library with a `cu12` and a `cu13` extra (docs/downstream.md, "Both CUDA majors"): its wheel carries
the kernels of the CUDA major it was built under; installed with the other major's extra, aot's runtime of that
major refuses artifacts of another major (a warning naming each) and JIT-compiles."""

import aot


def __getattr__(name: str):
    # Made on first use: `aot build` imports majors_mypkg.kernels while the artifacts are being built.
    if name == "registry":
        global registry
        registry = aot.Registry.from_package(__name__)
        return registry
    raise AttributeError(name)
