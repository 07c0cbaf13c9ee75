"""NVRTC kernels: every one compiles (CPU: NVRTC needs no GPU); on a GPU a few give numpy's answers."""

from __future__ import annotations

import numpy as np
import pytest

import mylib
from mylib._compile import compile_kernels
from mylib.kernels import distance

from conftest import ARCH


def test_every_kernel_compiles():
    units = mylib.warmup(arch=ARCH, load=False)
    assert len(units) == 39
    assert all(u.cubin[:4] == b"\x7fELF" for u in units)


def test_a_kernel_built_at_run_time_compiles():
    unit = distance.gather_columns_kernels(3, arch=ARCH, load=False)
    assert unit.cubin[:4] == b"\x7fELF"


def test_one_compile_per_source():
    a = compile_kernels(distance.HAVERSINE, ["haversine_distance"], arch=ARCH, load=False)
    assert compile_kernels(distance.HAVERSINE, ["haversine_distance"], arch=ARCH, load=False) is a


@pytest.mark.gpu
def test_haversine_matches_numpy():
    import cupy as cp
    rng = np.random.default_rng(0)
    lon1, lon2 = rng.uniform(-180, 180, (2, 10_001))
    lat1, lat2 = rng.uniform(-80, 80, (2, 10_001))
    got = distance.haversine(*(cp.asarray(a) for a in (lon1, lat1, lon2, lat2))).get()
    r = np.radians
    a = np.sin(r(lat2 - lat1) / 2) ** 2 + np.cos(r(lat1)) * np.cos(r(lat2)) * np.sin(r(lon2 - lon1) / 2) ** 2
    np.testing.assert_allclose(got, 2 * 6371.0088 * np.arcsin(np.sqrt(a)), rtol=1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_euclidean_matches_numpy(dtype):
    import cupy as cp
    pts = np.random.default_rng(1).uniform(-100, 100, (4, 5_003)).astype(dtype)
    got = distance.euclidean(*(cp.asarray(a) for a in pts)).get()
    np.testing.assert_allclose(got, np.hypot(pts[0] - pts[2], pts[1] - pts[3]), rtol=1e-5 if dtype == np.float32 else 1e-12)
