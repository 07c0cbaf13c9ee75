"""Issue 36.3 on the CPU: a numba-cuda launch kept by ``aot record`` (the hook's capture, with a stand-in launch),
stored beside the matrix, and replayed as a check (a stand-in kernel) that passes on the same values and fails
on others: bit for bit for integers, within the documented tolerance for floats. The GPU half (real launches
under the hook, ``verify --gpu --launches``) is ``.ci/gpu/record.sh``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from aot.record.record import Recording, kept_launches, launches_folder, write_launches

HOOK = Path(__file__).resolve().parent.parent / "aot" / "record" / "hook_numba.py"


@pytest.fixture
def hook():
    spec = importlib.util.spec_from_file_location("_test_record_hook_numba", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Types:
    """numba's argument types as the capture reads them (class name ``Array``, ``str()`` a numpy dtype)."""

    class Array:
        def __init__(self, dtype: str, ndim: int = 1, layout: str = "C"):
            self.dtype, self.ndim, self.layout, self.mutable, self.aligned = _Scalar(dtype), ndim, layout, True, True


class _Scalar:
    def __init__(self, name: str):
        self.name = name

    def __str__(self) -> str:
        return self.name


def axpy_py(out, x, a):  # the "kernel" the capture names
    out[:] = a * x


def capture(hook, tmp_path, args, argtypes, run):
    return hook.keep_launch(axpy_py, argtypes, args, (4, 1, 1), (256, 1, 1), 0, run, lambda: None, str(tmp_path))


def test_a_launch_is_kept_with_its_arguments_before_and_arrays_after(hook, tmp_path):
    out, x = np.zeros(8, np.float32), np.arange(8, dtype=np.float32)
    types = [_Types.Array("float32"), _Types.Array("float32"), _Scalar("float32")]
    rec = capture(hook, tmp_path, [out, x, 2.5], types, lambda: axpy_py(out, x, 2.5))
    assert rec["signature"] == "void(float32[::1], float32[::1], float32)" and rec["grid"] == [4, 1, 1]
    assert rec["args"] == [{"array": True, "dtype": "float32", "shape": [8]},
                           {"array": True, "dtype": "float32", "shape": [8]},
                           {"array": False, "dtype": "float32", "shape": []}]
    with np.load(tmp_path / rec["file"], allow_pickle=False) as z:
        assert (z["in0"] == 0).all() and (z["out0"] == 2.5 * x).all() and z["in2"].dtype == np.float32
        assert "out2" not in z.files


@pytest.mark.parametrize("args, why", [
    (lambda a: [a, a, 1.0], "an array passed twice"),
    (lambda a: [a, np.zeros(3 * 1024 * 1024, np.float32), 1.0], "pass 8388608 bytes"),
    (lambda a: [a, object(), 1.0], "neither an array nor a number"),
])
def test_a_launch_that_cannot_be_replayed_is_not_kept_and_still_runs(hook, tmp_path, args, why):
    a = np.zeros(4, np.float32)
    ran = []
    types = [_Types.Array("float32"), _Types.Array("float32"), _Scalar("float32")]
    types[1] = _Scalar("float32") if why.startswith("neither") else types[1]
    rec = capture(hook, tmp_path, args(a), types, lambda: ran.append(1))
    assert ran == [1] and why in rec["why"] and "file" not in rec


def _stored(tmp_path, hook):
    out, x = np.zeros(8, np.int64), np.arange(8, dtype=np.int64)
    types = [_Types.Array("int64"), _Types.Array("int64"), _Scalar("int64")]
    rec = capture(hook, tmp_path, [out, x, 3], types, lambda: axpy_py(out, x, 3))
    rec.update(module=__name__, qualname="axpy_py")
    recording = Recording(0, numba=[{"name": "axpy", "kernel": f"{__name__}:axpy_py", "signatures": [
        "void(float32[::1], float32[::1], float32)", rec["signature"]]}])
    kept = kept_launches(recording, [rec], {rec["file"]: (tmp_path / rec["file"]).read_bytes()})
    folder = launches_folder(tmp_path / "build_matrix.yaml")
    write_launches(kept, folder)
    return folder


def test_kept_launches_are_stored_beside_the_matrix_under_their_spec_names(hook, tmp_path):
    folder = _stored(tmp_path, hook)
    assert folder.name == "build_matrix.launches"
    index = json.loads((folder / "launches.json").read_text())["launches"]
    assert list(index) == ["axpy.1"] and index["axpy.1"]["file"] == "axpy.1.npz"
    (folder / "axpy.0.npz").write_bytes(b"stale")  # an earlier recording's file its index names
    index_doc = json.loads((folder / "launches.json").read_text())
    index_doc["launches"]["axpy.0"] = {"file": "axpy.0.npz"}
    (folder / "launches.json").write_text(json.dumps(index_doc))
    write_launches({}, folder)
    assert not (folder / "axpy.0.npz").exists()


class _Dev:
    def __init__(self, a):
        self.a = np.array(a)

    def copy_to_host(self):
        return self.a.copy()


class _Ctx:
    """NumbaCheckContext's shape, the kernel a Python function over host arrays."""

    def __init__(self, body):
        self.launched = []

        class _K:
            def __getitem__(k, cfg):
                def call(*args):
                    self.launched.append(cfg)
                    body(*[x.a if isinstance(x, _Dev) else x for x in args])
                return call
        self.kernel = _K()

    def array(self, host):
        return _Dev(host)

    def sync(self):
        pass


def test_a_recorded_launch_replays_as_a_check(hook, tmp_path):
    from aot.verify.launches import LaunchMismatch, launch_check, read_index
    folder = _stored(tmp_path, hook)
    entry = read_index(folder)["axpy.1"]
    ctx = _Ctx(axpy_py)
    launch_check(folder, entry)(ctx)
    assert ctx.launched == [((4, 1, 1), (256, 1, 1), 0, 0)]

    def off_by_one(out, x, a):
        out[:] = a * x
        out[5] += 1
    with pytest.raises(LaunchMismatch, match=r"argument 0: 1 of 8 elements differ .* first at \[5\]"):
        launch_check(folder, entry)(_Ctx(off_by_one))
    (folder / entry["file"]).write_bytes((folder / entry["file"]).read_bytes() + b"x")
    with pytest.raises(Exception, match="sha256 is not the index's"):
        launch_check(folder, entry)(_Ctx(axpy_py))


def test_floats_compare_within_the_documented_tolerance_and_integers_bit_for_bit():
    from aot.verify.launches import LaunchMismatch, compare
    want = np.array([1.0, np.nan, 3.0], np.float32)
    compare("x", want * np.float32(1 + 1e-6), want)
    with pytest.raises(LaunchMismatch):
        compare("x", want * np.float32(1 + 1e-3), want)
    compare("i", np.array([1, 2], np.int32), np.array([1, 2], np.int32))
    with pytest.raises(LaunchMismatch, match="got 3, recorded 2"):
        compare("i", np.array([1, 3], np.int32), np.array([1, 2], np.int32))
    with pytest.raises(LaunchMismatch, match="recorded"):
        compare("i", np.array([1, 2], np.int64), np.array([1, 2], np.int32))


class _Api:
    def __init__(self):
        self.written = []
        self.packages = ()

    def write(self, rec):
        self.written.append(rec)

    def busy(self):
        return False

    def quiet(self):
        import contextlib
        return contextlib.nullcontext()


def test_the_launch_wrapper_never_changes_what_the_launch_does(hook, tmp_path):
    """The launch's own error passes through unchanged; a capture that fails runs the launch once anyway."""
    calls = []

    class Boom(Exception):
        pass

    def failing(self, args, griddim, blockdim, stream=0, sharedmem=0):
        calls.append("launch")
        raise Boom("the command's own error")

    api = _Api()
    k = type("K", (), {"py_func": axpy_py, "argument_types": [_Types.Array("float32")]})()
    with pytest.raises(Boom, match="the command's own error"):
        hook._keeping(failing, str(tmp_path), api)(k, [np.zeros(2, np.float32)], (1,), (1,))
    assert calls == ["launch"] and api.written == []

    def fine(self, args, griddim, blockdim, stream=0, sharedmem=0):
        calls.append("launch")
    k2 = type("K", (), {"py_func": fine, "argument_types": None})()  # not a kernel object it knows
    hook._keeping(fine, str(tmp_path), api)(k2, [1], (1,), (1,))
    assert calls == ["launch", "launch"] and api.written == []
    k3 = type("K", (), {"py_func": fine, "argument_types": [_Types.Array("float32")]})()
    hook._keeping(fine, str(tmp_path), api)(k3, [np.zeros(2, np.float32)], "not dims", (1,))  # capture fails
    assert calls == ["launch"] * 3 and api.written[0]["kind"] == "skipped"
