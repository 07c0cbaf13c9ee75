"""Issue 36.3 on the CPU: kernel launches kept by ``aot record`` (:mod:`aot.record.launches`) and replayed by
``aot verify --gpu`` (:mod:`aot.verify.replay`), with the driver and the launch layer replaced by a device made of
bytearrays and kernels made of Python functions. What is checked: a launch seen through cuda.core's ``launch`` and
cuda.bindings' ``cuLaunchKernel`` runs once and is kept (arguments, allocations before and after); what cannot be
kept says why and still runs once; the store round-trips, and a hostile index is one line naming the field; a
replay of the same kernel passes and of a mutant fails (bit for bit for integers and unknown bytes, within the
documented tolerance for floats); kernels with neither a check nor a launch are counted as unchecked and fail the
run unless ``--allow-unchecked``. The GPU half is ``.ci/gpu/replay_check.sh``."""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import types
from pathlib import Path

import numpy as np
import pytest

from aot.record.launch_store import store
from aot.core.errors import VerificationError
from aot.verify.compare import Mismatch
from aot.verify.gpu import GpuRow
from aot.verify.replay import LaunchStoreError, compare_buffer, read_store, replay

HOOK = Path(__file__).resolve().parent.parent / "aot" / "record" / "launches.py"
BASE = 0x7F00_0000_0000


class Device:
    """Allocations (base -> bytearray) and the driver calls the capture makes, cuda.bindings-shaped."""

    def __init__(self):
        self.mem: dict[int, bytearray] = {}
        self.calls: list[str] = []

    def allocate(self, data: bytes) -> int:
        base = BASE + 0x100_0000 * (len(self.mem) + 1)
        self.mem[base] = bytearray(data)
        return base

    def view(self, ptr: int, dtype, n: int) -> np.ndarray:
        for base, buf in self.mem.items():
            if base <= ptr < base + len(buf):
                return np.frombuffer(buf, dtype, n, ptr - base)
        raise AssertionError(f"no allocation at {ptr:#x}")

    # cuda.bindings.driver's shape: (error, results...)
    def cuMemGetAddressRange(self, ptr):  # noqa: N802
        for base, buf in self.mem.items():
            if base <= int(ptr) < base + len(buf):
                return (0, base, len(buf))
        return (1,)

    def cuMemcpyDtoH(self, dst, src, size):  # noqa: N802
        (base, buf), = [(b, m) for b, m in self.mem.items() if b == src]
        ctypes.memmove(dst, bytes(buf[:size]), size)
        return (0,)

    def cuCtxSynchronize(self):  # noqa: N802
        self.calls.append("sync")
        return (0,)

    def cuFuncGetName(self, f):  # noqa: N802
        return (0, f.name.encode())

    def cuKernelGetName(self, f):  # noqa: N802
        return (0, f.name.encode())

    def cuStreamIsCapturing(self, stream):  # noqa: N802
        return (0, 0)

    CUpointer_attribute = types.SimpleNamespace(CU_POINTER_ATTRIBUTE_MEMORY_TYPE=2)
    host: set = set()

    def cuPointerGetAttribute(self, attr, ptr):  # noqa: N802
        return (0, 1) if int(ptr) in self.host else (1, 0)

    def cuFuncGetParamInfo(self, f, i):  # noqa: N802
        sizes = getattr(f, "params", None)
        return (0, 0, sizes[i]) if sizes is not None and i < len(sizes) else (1,)


class Kernel:
    """A "kernel": a symbol (its ``handle``), a Python body over the device, its parameters' sizes if known."""

    def __init__(self, name: str, body, params=None):
        self.name, self.body, self.params = name, body, params

    @property
    def handle(self):
        return self


def _v(x):
    """A kernel argument's value (a ctypes scalar's ``.value``)."""
    return getattr(x, "value", x)


def axpy(dev: Device, out, x, a, n):
    """out[:n] = a * x[:n] + out[:n], float32 (``a`` any float-like)."""
    o, xs = dev.view(_v(out), np.float32, _v(n)), dev.view(_v(x), np.float32, _v(n))
    o[:] = np.float32(float(_v(a))) * xs + o


def count(dev: Device, out, n):
    """out[i] = i * i, int32."""
    dev.view(_v(out), np.int32, _v(n))[:] = np.arange(_v(n), dtype=np.int32) ** 2


@pytest.fixture
def hook(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("_test_record_launches", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dev = Device()
    monkeypatch.setattr(module, "_driver_module", lambda: dev)
    (tmp_path / "private").mkdir()
    monkeypatch.setenv("AOT_RECORD_LAUNCHES", str(tmp_path / "private"))
    written: list[dict] = []
    busy = []

    class Quiet:
        def __enter__(self):
            busy.append(1)

        def __exit__(self, *exc):
            busy.pop()

    api = types.SimpleNamespace(write=written.append, busy=lambda: bool(busy), quiet=Quiet)
    launched: list = []

    def launch(stream, config, kernel, *args):  # cuda.core's launch, on the stand-in device
        launched.append(kernel.name)
        kernel.body(dev, *args)

    def cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):  # noqa: N802
        launched.append(f.name)
        f.body(dev, *([v if t is None else t(v) for v, t in zip(*params)] if isinstance(params, tuple) else ()))
        return (0,)

    core = types.SimpleNamespace(launch=launch)
    drv_mod = types.SimpleNamespace(cuLaunchKernel=cuLaunchKernel)
    module.patch("cuda.core._launcher", core, api)
    module.patch("cuda.bindings.driver", drv_mod, api)
    return types.SimpleNamespace(module=module, dev=dev, core=core, drv=drv_mod, records=written,
                                 launched=launched, private=tmp_path / "private")


def config(grid=2, block=128, shmem=0):
    return types.SimpleNamespace(grid=grid, block=block, shmem_size=shmem, cluster=None)


def stored(h, folder: Path) -> list:
    files = {p.name: p.read_bytes() for p in h.private.iterdir()}
    notes = store(h.records, files, folder)
    return notes


def test_a_cuda_core_launch_is_kept_whole_and_runs_once(hook, tmp_path):
    dev = hook.dev
    x = dev.allocate(np.arange(64, dtype=np.float32).tobytes())
    out = dev.allocate(np.ones(64, np.float32).tobytes())
    k = Kernel("_Z4axpyPfPKffi", axpy)
    hook.core.launch(None, config(), k, out, x, ctypes.c_float(2.0), 64)
    hook.core.launch(None, config(), k, out, x, ctypes.c_float(2.0), 64)  # the second: not kept (1 per kernel)
    assert hook.launched == [k.name, k.name]
    (rec,) = [r for r in hook.records if r["kind"] == "launch"]
    assert rec["symbol"] == k.name and rec["grid"] == [2, 1, 1] and rec["block"] == [128, 1, 1]
    assert [a["kind"] for a in rec["args"]] == ["pointer", "pointer", "scalar", "scalar"]
    assert rec["args"][2] == {"kind": "scalar", "type": "c_float", "hex": bytes(ctypes.c_float(2.0)).hex()}
    assert rec["args"][3]["type"] == "py_int" and rec["buffers"] == [{"size": 256, "dtype": None}] * 2
    blob = (hook.private / rec["file"]).read_bytes()
    before_out, after_out = np.frombuffer(blob[:256], np.float32), np.frombuffer(blob[256:512], np.float32)
    assert (before_out == 1).all() and (after_out == 2 * np.arange(64) + 1).all()


def test_the_store_round_trips_and_a_replay_passes_on_the_same_kernel_and_fails_a_mutant(hook, tmp_path):
    dev = hook.dev
    x = dev.allocate(np.arange(64, dtype=np.float32).tobytes())
    out = dev.allocate(np.ones(64, np.float32).tobytes())
    squares = dev.allocate(bytes(4 * 32))
    hook.core.launch(None, config(), Kernel("axpy", axpy), out, x, np.float32(2.0), 64)
    hook.drv.cuLaunchKernel(Kernel("count", count), 1, 1, 1, 32, 1, 1, 0, 0,
                            ((squares, 32), (None, ctypes.c_int)), 0)
    folder = tmp_path / "build_matrix.launches"
    assert stored(hook, folder) == []
    launches = read_store(folder)
    assert [(x.symbol, x.via) for x in launches] == [("axpy", "cuda.core"), ("count", "cuLaunchKernel")]
    assert launches[1].args[1].value() == 32 and launches[1].args[1].value().dtype == np.int32
    assert launches[0].args[2].value() == np.float32(2.0)

    class Runner:  # the GPU side of a replay, on a fresh stand-in device
        def __init__(self):
            self.dev = Device()

        def alloc(self, data):
            return self.dev.allocate(data)

        def launch(self, kernel, grid, block, shmem, args):
            kernel.body(self.dev, *args)

        def read(self, ptr, size):
            return bytes(self.dev.mem[ptr][:size])

        def close(self):
            pass

    replay(launches[0], Kernel("axpy", axpy), Runner())
    replay(launches[1], Kernel("count", count), Runner())

    def axpy_mutant(dev, out, x, a, n):  # the artifact changed after the build: one element off
        axpy(dev, out, x, a, n)
        dev.view(_v(out), np.float32, _v(n))[7] += 1

    with pytest.raises(Mismatch, match=r"launch 0 argument 0 \(bytes\): 1 of 256 elements differ from the recorded launch; first at \[30\]"):
        replay(launches[0], Kernel("axpy", axpy_mutant), Runner())
    with pytest.raises(Mismatch, match="first at"):
        replay(launches[1], Kernel("count", lambda dev, out, n: count(dev, out, _v(n) - 1)), Runner())
    (folder / launches[0].file).write_bytes(b"x" * (2 * 512))
    with pytest.raises(LaunchStoreError, match="sha256"):
        replay(launches[0], Kernel("axpy", axpy), Runner())
    stored_again = [r for r in hook.records if r["kind"] == "launch"][:1]  # a new recording replaces the old one
    store(stored_again, {stored_again[0]["file"]: (hook.private / stored_again[0]["file"]).read_bytes()},
                      folder)
    assert sorted(p.name for p in folder.iterdir()) == ["0000.bin", "index.json"]
    assert store([], {}, folder) == [] and [p.name for p in folder.iterdir()] == ["index.json"]  # none kept now
    assert read_store(folder) == []
    assert store([], {}, tmp_path / "none.launches") == [] and not (tmp_path / "none.launches").exists()


def test_a_raw_void_star_star_launch_is_read_with_the_kernels_parameter_sizes(hook, tmp_path):
    dev = hook.dev
    out = dev.allocate(bytes(4 * 16))
    holders = [np.array([out], np.uint64), np.array([16], np.int32)]  # as adopt-mypkg's ops.py passes them
    params = np.array([h.ctypes.data for h in holders], np.uint64)
    got = []

    def cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):  # noqa: N802
        got.append(f.name)
        count(dev, int(holders[0][0]), int(holders[1][0]))
        return (0,)
    k = Kernel("count", count, params=[8, 4])
    drv = types.SimpleNamespace(cuLaunchKernel=cuLaunchKernel)
    hook.module.patch("cuda.bindings.driver", drv, types.SimpleNamespace(write=hook.records.append,
                                                                         busy=lambda: False, quiet=_Nothing))
    assert drv.cuLaunchKernel(k, 1, 1, 1, 16, 1, 1, 0, 0, int(params.ctypes.data), 0) == (0,)
    assert got == ["count"]
    (rec,) = [r for r in hook.records if r["kind"] == "launch"]
    assert rec["params"] == [8, 4] and rec["args"][0]["kind"] == "pointer"
    assert rec["args"][1] == {"kind": "scalar", "type": "c_uint32", "hex": "10000000"}
    stored(hook, tmp_path / "r.launches")
    (launch,) = read_store(tmp_path / "r.launches")
    assert launch.params == (8, 4) and launch.states()[0][1] == (np.arange(16, dtype=np.int32) ** 2).tobytes()


class _Nothing:
    def __enter__(self):
        pass

    def __exit__(self, *exc):
        pass


def test_what_cannot_be_kept_says_why_and_still_runs_once(hook):
    dev = hook.dev
    big = dev.allocate(bytes(hook.module.MAX_BUFFER + 4))
    small = dev.allocate(bytes(16))
    hook.core.launch(None, config(), Kernel("k_big", lambda *a: None), big)
    hook.core.launch(None, config(), Kernel("k_obj", lambda *a: None), small, object())
    hook.drv.cuLaunchKernel(Kernel("k_raw", lambda *a: None), 1, 1, 1, 1, 1, 1, 0, 0, 12345, 0)
    dev.host = {0x5000_0000}  # pinned host memory: known to the driver, no device allocation
    hook.core.launch(None, config(), Kernel("k_host", lambda *a: None), 0x5000_0000)

    def raises(*a):
        raise RuntimeError("launch failed")

    with pytest.raises(RuntimeError, match="launch failed"):  # the launch's own error, unchanged and once
        hook.core.launch(None, config(), Kernel("k_err", raises), small)
    assert hook.launched == ["k_big", "k_obj", "k_raw", "k_host", "k_err"]
    whys = [r.get("why", "") for r in hook.records]
    assert any(f"an allocation of {hook.module.MAX_BUFFER + 16}" in w or "more than 1048576" in w for w in whys)
    assert any("builtins.object, whose bytes are not known" in w for w in whys)
    assert any("raw void**" in w for w in whys)
    assert any("argument 0 points to memory the driver knows but cannot size (host memory)" in w for w in whys)
    assert not list(hook.private.iterdir())


def test_a_numba_launch_names_its_kernel_and_array_types(hook, tmp_path):
    dev = hook.dev
    out = dev.allocate(bytes(4 * 8))

    class DeviceArray:
        __cuda_array_interface__ = {"data": (out, False), "typestr": "<f4", "shape": (8,), "version": 3}

    class _Kernel:  # numba-cuda's launch path: _Kernel.launch flattens arguments into cuda.core's launch
        argument_types = ("array(float32, 1d, C)",)

        def py_func(self):
            pass
        py_func.__module__, py_func.__qualname__ = "mypkg.kernels", "fill"

        def launch(self, args, griddim, blockdim, stream=0, sharedmem=0):
            hook.core.launch(stream, config(griddim, blockdim), Kernel("_ZN6mypkg4fillE", fill, [8] * 7), 0, 0, 8, 4,
                             args[0].__cuda_array_interface__["data"][0], 8, 4)

    def fill(dev, meminfo, parent, n, itemsize, data, shape, stride):
        dev.view(data, np.float32, n)[:] = 0.5

    _Kernel().launch([DeviceArray()], 1, 8)
    (rec,) = [r for r in hook.records if r["kind"] == "launch"]
    assert rec["numba"] == {"kernel": "mypkg.kernels:fill", "argtypes": ["array(float32, 1d, C)"]}
    assert rec["buffers"] == [{"size": 32, "dtype": "float32"}]
    assert [a["kind"] for a in rec["args"]] == ["scalar"] * 4 + ["pointer"] + ["scalar"] * 2
    stored(hook, tmp_path / "m.launches")
    (launch,) = read_store(tmp_path / "m.launches")
    from aot.verify import replay as rp
    assert rp.matching([launch], ["another_symbol"]) == []
    assert rp.matching([launch], ["_ZN6mypkg4fillE"]) == [launch]
    assert rp.matching([launch], {"_ZN6mypkg4fillE": (8,) * 7}) == [launch]
    assert rp.matching([launch], {"_ZN6mypkg4fillE": (8, 8)}) == []  # another kernel of that name
    pytest.importorskip("numba.cuda")
    spec = types.SimpleNamespace(name="fill", family="numba", kernel="mypkg.kernels:fill", signature="void(float32[::1])")
    other = types.SimpleNamespace(name="fill64", family="numba", kernel="mypkg.kernels:fill",
                                  signature="void(float64[::1])")
    assert rp.matching([launch], ["packaged_symbol"], spec) == [launch]  # compiled under another symbol here
    assert rp.matching([launch], ["packaged_symbol"], other) == []
    assert rp.claimants(launch, [spec, other]) == ["fill"]


def test_floats_within_the_tolerance_integers_and_unknown_bytes_bit_for_bit():
    want = np.array([1.0, np.nan, 3.0], np.float32)
    compare_buffer("x", (want * np.float32(1 + 1e-6)).tobytes(), want.tobytes(), "float32")
    with pytest.raises(Mismatch, match=r"2 of 3 elements differ .*first at \[0\]"):
        compare_buffer("x", (want * np.float32(1 + 1e-3)).tobytes(), want.tobytes(), "float32")
    with pytest.raises(Mismatch, match=r"\(bytes\)"):  # the same floats, element type unknown: bit for bit
        compare_buffer("x", (want * np.float32(1 + 1e-6)).tobytes(), want.tobytes(), None)
    compare_buffer("i", np.array([1, 2], np.int64).tobytes(), np.array([1, 2], np.int64).tobytes(), "int64")
    with pytest.raises(Mismatch, match="got 3, want 2"):
        compare_buffer("i", np.array([1, 3], np.int32).tobytes(), np.array([1, 2], np.int32).tobytes(), "int32")
    with pytest.raises(Mismatch, match="8 bytes read back, 16 recorded"):
        compare_buffer("i", bytes(8), bytes(16), "int32")


def _index(tmp_path: Path, **change) -> Path:
    folder = tmp_path / "s.launches"
    folder.mkdir(exist_ok=True)
    blob = bytes(range(8)) * 2
    import hashlib
    entry = {"symbol": "k", "via": "cuda.core", "grid": [1, 1, 1], "block": [32, 1, 1], "shmem": 0,
             "buffers": [{"size": 8, "dtype": "int32"}], "file": "0000.bin", "sha256": hashlib.sha256(blob).hexdigest(),
             "args": [{"kind": "pointer", "buffer": 0, "offset": 4}, {"kind": "scalar", "type": "int32",
                                                                        "hex": "02000000"}]}
    entry.update(change)
    (folder / "0000.bin").write_bytes(blob)
    (folder / "index.json").write_text(json.dumps({"format": "aot-launches", "version": 1, "launches": [entry]}))
    return folder


@pytest.mark.parametrize("change, field", [
    ({"grid": [1, 1]}, "grid"), ({"grid": [0, 1, 1]}, "grid"), ({"block": [1, 1, True]}, "block"),
    ({"grid": [2 ** 31 - 1] * 3}, "grid"), ({"shmem": -1}, "shmem"), ({"symbol": ""}, "symbol"),
    ({"symbol": "a\nb"}, "symbol"), ({"buffers": [{"size": 2 ** 40}]}, "buffers[0].size"),
    ({"buffers": [{"size": 8, "dtype": "object"}]}, "buffers[0].dtype"),
    ({"args": [{"kind": "pointer", "buffer": 1, "offset": 0}]}, "args[0].buffer"),
    ({"args": [{"kind": "pointer", "buffer": 0, "offset": 8}]}, "args[0].offset"),
    ({"args": [{"kind": "scalar", "type": "object", "hex": ""}]}, "args[0].type"),
    ({"args": [{"kind": "scalar", "type": "int32", "hex": "00"}]}, "args[0].hex"),
    ({"args": [{"kind": "code"}]}, "args[0].kind"), ({"file": "../0000.bin"}, "file"),
    ({"file": "/etc/passwd"}, "file"), ({"sha256": "x" * 64}, "sha256"), ({"numba": {"argtypes": [1]}}, "numba"),
])
def test_a_hostile_index_is_one_line_naming_the_field(tmp_path, change, field):
    folder = _index(tmp_path, **change)
    with pytest.raises(LaunchStoreError) as e:
        read_store(folder)
    assert f"launches[0].{field}:" in str(e.value) and "\n" not in str(e.value)


def test_a_store_that_is_not_an_index_is_one_line(tmp_path):
    folder = _index(tmp_path)
    assert read_store(folder)[0].states() == [(bytes(range(8)), bytes(range(8)))]
    for text in ("[]", '{"format": "aot-launches", "version": 2, "launches": []}', "{" * 100000, "NaN",
                 '{"format": "aot-launches", "version": 1, "launches": {}}'):
        (folder / "index.json").write_text(text)
        with pytest.raises(LaunchStoreError) as e:
            read_store(folder)
        assert str(e.value).startswith(str(folder / "index.json")) and "\n" not in str(e.value)
    (folder / "index.json").write_bytes(b" " * (9 << 20))
    with pytest.raises(LaunchStoreError, match="not a readable launch index"):
        read_store(folder)
    folder = _index(tmp_path)
    (folder / "0000.bin").write_bytes(bytes(15))  # not 2 x the buffers' size
    with pytest.raises(LaunchStoreError, match="0000.bin"):
        read_store(folder)[0].states()


# ------------------------------------------------------------------------------ unchecked: count and exit codes
def _rows():
    return [GpuRow("saxpy", "nvrtc", 90, "cubin", "packaged", True, 1.0, "replayed 1 recorded launch(es)"),
            GpuRow("scale_f32", "nvrtc", 90, "cubin", "packaged", True, 1.0, "no check", status="loaded, not executed"),
            GpuRow("scale_f32", "nvrtc", 90, "ptx", "packaged", True, 1.0, "no check", status="loaded, not executed")]


class FakeRegistry:
    def __init__(self, root, specs=None, owner=None):
        self.root = root

    def names(self):
        return ["saxpy", "scale_f32"]

    def device_sm(self):
        return 90


@pytest.fixture
def fake_gpu(monkeypatch):
    import aot.runtime.loader.registry
    import aot.verify.gpu
    seen = {}

    def verify_gpu(*a, **k):
        seen.update(k)
        return _rows()
    monkeypatch.setattr(aot.runtime.loader.registry, "Registry", FakeRegistry)
    monkeypatch.setattr(aot.verify.gpu, "verify_gpu", verify_gpu)
    return seen


def _args(tmp_path, **kw):
    base = dict(matrix=None, package=None, only=None, quiet=True, json=None, launches=None, allow_unchecked=False)
    base.update(kw)
    return argparse.Namespace(**base)


def test_unchecked_kernels_fail_the_run_by_default_and_say_how_many(tmp_path, fake_gpu, capsys):
    from aot.cli.check_cmds import _verify_gpu
    with pytest.raises(VerificationError) as e:
        _verify_gpu(tmp_path, _args(tmp_path))
    assert e.value.return_code == 7 and "1 of 2 specs unchecked" in str(e.value) and "--allow-unchecked" in str(e.value)
    out = capsys.readouterr().out
    assert "1 unchecked (neither a check nor a recorded launch): scale_f32; the gate fails" in out
    assert _verify_gpu(tmp_path, _args(tmp_path, allow_unchecked=True)) == 0
    assert "1 unchecked (neither a check nor a recorded launch): scale_f32; allowed (--allow-unchecked)" in \
        capsys.readouterr().out
    assert fake_gpu["replays"] is None


def test_the_launches_beside_the_matrix_are_replayed_and_a_bad_store_stops_first(tmp_path, fake_gpu, capsys,
                                                                                  monkeypatch):
    import aot.build.matrix
    from aot.cli.check_cmds import _verify_gpu
    monkeypatch.setattr(aot.build.matrix, "load_matrix", lambda *a, **k: types.SimpleNamespace(specs=[]))
    folder = _index(tmp_path)
    folder.rename(tmp_path / "build_matrix.launches")
    args = _args(tmp_path, matrix=tmp_path / "build_matrix.yaml", allow_unchecked=True)
    assert _verify_gpu(tmp_path, args) == 0
    assert [x.symbol for x in fake_gpu["replays"]] == ["k"]
    assert "replaying 1 recorded launch(es) from" in capsys.readouterr().out
    (tmp_path / "build_matrix.launches" / "index.json").write_text("{}")
    with pytest.raises(LaunchStoreError) as e:
        _verify_gpu(tmp_path, args)
    assert e.value.return_code == 5


def test_the_cli_takes_the_flags():
    from aot.cli.main import _parser
    ns = _parser().parse_args(["verify", "--gpu", "--package", "p", "--launches", "m.launches", "--allow-unchecked"])
    assert ns.allow_unchecked and ns.launches == Path("m.launches")
    assert not _parser().parse_args(["verify", "--gpu"]).allow_unchecked


def test_replayed_matches_an_nvrtc_units_kernels_by_symbol_and_fails_a_mutant(tmp_path, monkeypatch):
    from aot.verify import gpu, replay as rp
    folder = _index(tmp_path, args=[{"kind": "pointer", "buffer": 0, "offset": 0}])
    launches = read_store(folder)
    monkeypatch.setattr(rp, "kernel_symbol", lambda k: (k.name, None))
    ran = []

    class Runner:
        def __init__(self, device):
            self.mem = {}

        def alloc(self, data):
            self.mem[len(self.mem) + 1] = bytearray(data)
            return len(self.mem)

        def launch(self, kernel, grid, block, shmem, args):
            ran.append(kernel.name)
            kernel.body(self.mem[args[0]])

        def read(self, ptr, size):
            return bytes(self.mem[ptr])

        def close(self):
            pass

    same = Kernel("k", lambda buf: None)

    def mutant(buf):
        buf[3] ^= 1
    unit = types.SimpleNamespace(name="u", family="nvrtc", kernels=("k",))
    alone = types.SimpleNamespace(names=lambda: ["u"], spec=lambda n: unit)
    assert gpu._replayed(alone, unit, None, {"k": same}, launches, Runner, None) == \
        ("ok", "replayed 1 recorded launch(es)")
    assert gpu._replayed(alone, unit, None, {"other": Kernel("other", None)}, launches, Runner, None) is None
    with pytest.raises(Mismatch, match="launch 0 argument 0: 1 of 2 elements differ"):
        gpu._replayed(alone, unit, None, {"k": Kernel("k", mutant)}, launches, Runner, None)
    # one source built twice (another macro): the launch is claimed by both; not reproducing it fails neither
    twin = types.SimpleNamespace(name="u2", family="nvrtc", kernels=("k",))
    both = types.SimpleNamespace(names=lambda: ["u", "u2"], spec=lambda n: unit if n == "u" else twin)
    status, detail = gpu._replayed(both, twin, None, {"k": Kernel("k", mutant)}, launches, Runner, None)
    assert status == "loaded, not executed" and "did not reproduce" in detail and "u name(s) that kernel" in detail
    assert ran == ["k", "k", "k"]


def test_the_hook_is_stdlib_only_and_asks_the_driver_once_per_kernel(hook):
    import subprocess
    import sys
    code = ("import importlib.util, sys; s = importlib.util.spec_from_file_location('h', sys.argv[1]); "
            "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); "
            "print(sorted(n for n in sys.modules if n.split('.')[0] in ('aot', 'numpy', 'cuda', 'numba')))")
    r = subprocess.run([sys.executable, "-I", "-c", code, str(HOOK)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
    asked = []

    class Handle(Kernel):
        def __int__(self):
            return 0x1234
    original = hook.dev.cuFuncGetName
    hook.dev.cuFuncGetName = lambda f: (asked.append(f.name), original(f))[1]
    k = Handle("k", lambda *a: None)
    for _ in range(5):
        hook.core.launch(None, config(), k, 1)
    assert asked == ["k"] and hook.launched == ["k"] * 5


def test_a_numba_artifact_replays_by_its_entry_symbol_importing_nothing(tmp_path, monkeypatch):
    import cuda.core
    import aot.runtime.loader.sources
    from aot.verify import gpu
    folder = _index(tmp_path, symbol="_ZN5mypkg4fillE", args=[{"kind": "pointer", "buffer": 0, "offset": 0}])
    launches = read_store(folder)
    loaded = []

    class Image:
        def __init__(self, payload):
            self.payload = payload

        def get_kernel(self, symbol):
            loaded.append((self.payload, symbol))
            return Kernel(symbol, None)

    art = types.SimpleNamespace(kind="cubin", payload=b"cubin", header={"entry": "_ZN5mypkg4fillE"})
    monkeypatch.setattr(cuda.core, "ObjectCode", types.SimpleNamespace(from_cubin=Image, from_ptx=Image))
    monkeypatch.setattr(aot.runtime.loader.sources, "check_packaged", lambda *a: art)
    manifest = types.SimpleNamespace(path_of=lambda e: tmp_path / "x.aot")
    spec = types.SimpleNamespace(name="fill.0", family="numba", kernel="mypkg:fill", signature="void(int32[::1])")
    registry = types.SimpleNamespace(manifest=manifest, names=lambda: ["fill.0"], spec=lambda n: spec)
    ran = []

    class Runner:
        def __init__(self, device):
            pass

        def alloc(self, data):
            self.buf = bytearray(data)
            return 1

        def launch(self, kernel, grid, block, shmem, args):
            ran.append((kernel.name, grid, block))

        def read(self, ptr, size):
            return bytes(self.buf)

        def close(self):
            pass

    assert gpu._replayed(registry, spec, {"path": "x"}, None, launches, Runner, None) == \
        ("ok", "replayed 1 recorded launch(es)")
    assert loaded == [(b"cubin", "_ZN5mypkg4fillE")] and ran == [("_ZN5mypkg4fillE", (1, 1, 1), (32, 1, 1))]
    art.header["entry"] = "_ZN5other4fillE"  # another kernel's artifact: no launch of it
    assert gpu._replayed(registry, spec, {"path": "x"}, None, launches, Runner, None) is None


def test_a_launches_folder_that_is_not_one_is_a_usage_error(tmp_path, fake_gpu):
    from aot.cli.check_cmds import _verify_gpu
    from aot.core.errors import UsageError
    with pytest.raises(UsageError, match="not a folder"):
        _verify_gpu(tmp_path, _args(tmp_path, launches=tmp_path / "nope.launches", allow_unchecked=True))
    (tmp_path / "empty.launches").mkdir()
    with pytest.raises(LaunchStoreError, match="index.json: not a readable launch index"):
        _verify_gpu(tmp_path, _args(tmp_path, launches=tmp_path / "empty.launches", allow_unchecked=True))
