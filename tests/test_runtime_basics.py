"""Runtime basics: a forced device SM never hangs on a driverless host, status() is safe under warmup,
the ``aot`` logger records every source decision, and the error classes are exported from ``aot``.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
import textwrap
import warnings

import pytest

import aot
from aot.core import errors
from aot.runtime.loader.registry import Registry
from aot.core.spec import NvrtcUnit
from aot.build.toolchain import real_driver_present

from conftest import ROOT, repo_env
from hostile_util import fake_cuda

driverless = pytest.mark.skipif(real_driver_present(), reason="needs a host without an NVIDIA driver")


# ---------------------------------------------------------------------------- item 13: nothing hangs
HANG_CHILD = textwrap.dedent("""
    import sys, warnings
    warnings.simplefilter("ignore")
    from aot.runtime.loader.driver import check_ptx_loadable
    from aot.core.errors import NoDeviceError
    from aot.runtime.loader.registry import Registry
    reg = Registry(sys.argv[1], device_sm=80)
    for attempt in range(2):                       # the old code hung on the second driver call
        try:
            reg.kernel("morton", "morton_codes_2d")
        except NoDeviceError as e:
            print("kernel:", e)
    try:
        check_ptx_loadable({"nvrtc": "13.0"})
    except NoDeviceError as e:
        print("ptx:", e)
    try:
        Registry(sys.argv[1]).device_sm()
    except NoDeviceError as e:
        print("device:", e)
""")


@driverless
def test_forced_sm_on_a_driverless_host_fails_fast(small_build):
    """Registry(dir, device_sm=80).kernel(...) used to hang forever in cuDriverGetVersion."""
    proc = subprocess.run([sys.executable, "-c", HANG_CHILD, str(small_build.out)], cwd=ROOT, env=repo_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["kernel", "kernel", "ptx", "device"], proc.stdout
    assert all("needs an NVIDIA driver and none is installed" in ln for ln in lines)
    assert lines[-1].startswith("device: no usable CUDA device: ")


@driverless
def test_no_driver_costs_no_artifact_warnings(small_build):
    reg = Registry(small_build.out, device_sm=90)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a missing driver is not the artifact's fault
        with pytest.raises(errors.NoDeviceError):
            reg.kernel("morton", "morton_codes_2d")
    assert reg.status()["morton"].errors == []


# ---------------------------------------------------------------------- item 12: status() under warmup
@driverless
def test_status_is_safe_while_warmups_insert(tmp_path):
    """Warmups of NVRTC units fail fast here (no driver) and each inserts into the status dict while this
    thread keeps iterating it through status(): 'dictionary changed size during iteration' before."""
    units = [NvrtcUnit(f"u{i:04d}", "u.cu", "", ("k",), {}) for i in range(1000)]  # 3000 took 117 s on 2 cores: the race shows with fewer
    reg = Registry(tmp_path / "none", specs=units, device_sm=90)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    failures: list = []
    try:
        reg.request_warmup()
        snapshots = 0
        deadline = time.monotonic() + 120  # a warmup that never reports its units fails here, never hangs
        while time.monotonic() < deadline:
            try:
                st = reg.status()
            except RuntimeError as e:
                failures.append(e)
                break
            snapshots += 1
            if len(st) == len(units) and all(s.errors for s in st.values()):
                break
        cold = reg.ensure_warm(timeout=60)
    finally:
        sys.setswitchinterval(old)
    assert failures == []
    assert snapshots > 1 and cold == sorted(u.name for u in units)
    st = reg.status()
    assert all(s.errors == [f"warmup: loading NVRTC unit {n!r} needs an NVIDIA driver and none is installed "
                            f"(no libcuda.so.1)"] for n, s in st.items())
    assert st["u0000"].errors is not reg._status["u0000"].errors  # a snapshot, not the live record


# ------------------------------------------------------------------------------------------ the logger
def test_logger_records_each_source_decision(small_build, tmp_path, caplog):
    import shutil
    root = tmp_path / "set"
    shutil.copytree(small_build.out, root)
    bad = root / "nvrtc/morton/sm_90.cubin.aot"
    bad.write_bytes(bad.read_bytes()[:-1] + b"\x01")  # flipped: skipped, then the PTX candidate serves
    caplog.set_level(logging.DEBUG, logger="aot")
    with fake_cuda(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = Registry(root, device_sm=90)._load("morton")
    assert loaded.kind == "ptx" and len(caught) == 1  # AotWarning stays for the skipped artifact
    msgs = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert ("aot.runtime.registry", "DEBUG", "morton: device sm_90, 2 packaged candidate(s): cubin sm_90, ptx sm_80") in msgs
    assert any(lvl == "DEBUG" and m.startswith(f"morton: candidate {bad} skipped: ") for _, lvl, m in msgs)
    assert any(lvl == "DEBUG" and "compute_80.ptx.aot accepted in" in m for _, lvl, m in msgs)
    assert any(lvl == "INFO" and m.startswith("morton: served from packaged (ptx sm_80, ") for _, lvl, m in msgs)


def test_logger_is_silent_by_default():
    """Whatever module of aot logs installs the NullHandler first (the registry's front logs nothing and
    imports no logging: the loader's records come from aot.runtime.loader.sources, under the registry's name)."""
    code = ("import aot.runtime.loader.sources, logging; h = logging.getLogger('aot').handlers; "
            "print([type(x).__name__ for x in h])")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=repo_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "['NullHandler']", proc.stderr


# ------------------------------------------------------------------------------------------- exports
def test_error_classes_exported_without_cuda_or_logging():
    for name in ("AotError", "ArtifactError", "BuildError", "BusyError", "MatrixError", "NoDeviceError",
                 "ToolchainError", "UsageError", "VerificationError"):
        assert name in aot.__all__ and getattr(aot, name) is getattr(errors, name)
        assert issubclass(getattr(aot, name), aot.AotError)
    code = ("import aot, sys; print(sorted(m for m in sys.modules if m.startswith(('cuda', 'numba', 'logging'))))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=repo_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr



# ------------------------------------------------------------------ issue 17: the catalog is read on first need
def _bad_manifest_set(tmp_path):
    root = tmp_path / "set"
    root.mkdir()
    (root / "manifest.json").write_text("{ not json")
    return root


def test_construction_reads_nothing_first_use_warns(tmp_path):
    """``Registry(dir)`` records its arguments: an unreadable manifest costs no warning there, nor does
    ``status()`` before anything was asked; the first call that needs the specs reads it and warns once."""
    root = _bad_manifest_set(tmp_path)
    unit = NvrtcUnit("u", "u.cu", "", ("k",), {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reg = Registry(root, specs=[unit], device_sm=90)
        assert reg.status() == {} and reg._cat is None
    assert caught == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert reg.names() == ["u"] and reg.manifest is None and str(reg.root) == str(root)
        reg.names()
    msgs = [str(w.message) for w in caught if issubclass(w.category, aot.AotWarning)]
    assert len(msgs) == 1 and "ignoring packaged artifacts" in msgs[0] and "not valid JSON" in msgs[0], msgs


@driverless
def test_manifest_warnings_from_a_warmup_reach_the_callers_thread(tmp_path):
    """``request_warmup`` first: the manifest is read in a warmup thread, and its warning is raised in the
    caller's thread at its next call (here ``ensure_warm``), once, where ``catch_warnings`` sees it."""
    import threading
    root = _bad_manifest_set(tmp_path)
    reg = Registry(root, specs=[NvrtcUnit("u", "u.cu", "", ("k",), {})], device_sm=90)
    seen: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda message, *a, **k: seen.append((str(message), threading.current_thread().name))
        reg.request_warmup()
        cold = reg.ensure_warm(timeout=60)
        reg.names()
        reg.status()
    assert cold == ["u"]
    mine = [(m, t) for m, t in seen if "ignoring packaged artifacts" in m]
    assert len(mine) == 1 and mine[0][1] == threading.current_thread().name, seen


def test_unknown_name_is_raised_by_ensure_warm(small_build):
    """Names are checked in the warmup's thread (the caller's only starts it): ``ensure_warm`` raises the
    unknown one, with the closest known name; nothing of that request is warmed; the next wait is clean."""
    reg = Registry(small_build.out, device_sm=90)
    reg.request_warmup(["reduce_sum_i32", "reduce_sum_i33"])
    with pytest.raises(errors.AotError, match="unknown spec 'reduce_sum_i33' .did you mean 'reduce_sum_i32'"):
        reg.ensure_warm(timeout=60)
    assert reg.ensure_warm(timeout=60) == [] and reg.status() == {}


def test_from_package_finds_the_folder_without_importlib_resources(tmp_path):
    """An imported package's folder comes from its ``__path__``, one not imported yet from its spec; an
    unknown package is one AotError naming it."""
    code = textwrap.dedent("""
        import sys, warnings
        warnings.simplefilter("ignore")
        # numba-cuda's .pth (the cu12/cu13 extras install it) imports importlib.resources at startup: what
        # counts is that aot does not import it
        pre = "importlib.resources" in sys.modules
        import aot
        sys.path.insert(0, sys.argv[1])
        a = aot.Registry.from_package("lazy_pkg", "artifactz")       # not imported: found by its spec
        import lazy_pkg
        b = aot.Registry.from_package("lazy_pkg", "artifactz")
        try:
            aot.Registry.from_package("no_such_pkg_xyz")
        except aot.AotError as e:
            err = str(e)
        print(a._source == b._source, a._source.endswith("lazy_pkg/artifactz"), "importlib.resources" in sys.modules and not pre)
        print(err)
    """)
    (tmp_path / "lazy_pkg").mkdir()
    (tmp_path / "lazy_pkg" / "__init__.py").write_text("")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, env=repo_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    flags, err = proc.stdout.strip().splitlines()
    assert flags.split() == ["True", "True", "False"], proc.stdout
    assert "no_such_pkg_xyz" in err and "cannot be found" in err
