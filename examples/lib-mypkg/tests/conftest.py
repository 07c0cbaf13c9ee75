"""mylib's test settings: the target for compile-only tests, and whether a GPU is here."""

from __future__ import annotations

import os

import pytest

#: Compile-only tests target this architecture (NVRTC needs no GPU for it).
ARCH = os.environ.get("MYLIB_TEST_ARCH", "sm_80")


def _has_gpu() -> bool:
    try:
        from cuda.core import system
        return system.get_num_devices() > 0
    except Exception:  # noqa: BLE001 - no driver, no GPU
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
