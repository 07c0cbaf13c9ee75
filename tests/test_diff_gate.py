"""The differential gate (``aot gate``, issue 41) on the CPU: the digests, the comparison of three launch logs
(first differing launch named, nondeterministic launches within a tolerance, never skipped), the CuPy image
comparison, the listing of shipped kernels the command never launched, and the three runs' environments."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from aot.verify import gate
from aot.verify.gate_hook import _Observer, _extent, digest
from aot.verify.gate_run import env_for, run_gate


def launch(kernel: str, *arrays: np.ndarray, family: str = "nvrtc") -> dict:
    return {"kind": "launch", "family": family, "kernel": kernel, "grid": [4, 1, 1], "block": [256, 1, 1],
            "buffers": [digest(a.tobytes(), str(a.dtype)) for a in arrays]}


X = np.arange(1000, dtype=np.float32)


def test_digest_is_order_insensitive_only_in_its_multiset_hash():
    a, b = digest(X.tobytes(), "float32"), digest(X[::-1].copy().tobytes(), "float32")
    assert a["digest"] != b["digest"] and a["multiset"] == b["multiset"]
    c = X.copy()
    c[5] += 1
    assert digest(c.tobytes(), "float32")["multiset"] != a["multiset"]
    assert a["sum"] == float(X.sum()) and a["nan"] == 0 and a["extremes"] == [0.0, 999.0]
    assert a["sumsq"] == float((X.astype(np.float64) ** 2).sum())


def test_equal_runs_pass():
    logs = [[launch("scale", X), launch("scale", X * 2)] for _ in range(3)]
    (res,) = gate.compare(*logs)
    assert res.status == gate.OK and res.launches == 2 and res.nondeterministic == 0


def test_first_differing_launch_is_named():
    jit = [launch("scale", X), launch("scale", X * 2), launch("scale", X * 3)]
    bad = X * 2
    bad[999] = -1
    packaged = [launch("scale", X), launch("scale", bad), launch("scale", X * 3)]
    (res,) = gate.compare(jit, packaged, jit)
    assert res.status == gate.FAILED
    assert res.detail.startswith("launch 1 (grid [4, 1, 1], block [256, 1, 1]), buffer 0 (4000 bytes, float32): "
                                 "differs from the JIT's"), res.detail
    assert "first difference in elements [992, 1008); first differing sampled element [999]: got -1.0, want 1998.0" in res.detail


def test_nondeterministic_floats_compare_within_the_tolerance_never_skipped():
    rng = np.random.default_rng(41)
    v = rng.standard_normal(4096).astype(np.float32)
    a, b = v.copy(), v.copy()
    b[7] = np.nextafter(b[7], np.float32(10))  # another order of float atomics: the last bits move
    p = v.copy()
    p[9] = np.nextafter(p[9], np.float32(-10))
    (res,) = gate.compare([launch("hist", a)], [launch("hist", p)], [launch("hist", b)])
    assert res.status == gate.OK and res.nondeterministic == 1
    wrong = v * np.float32(1.5)
    (res,) = gate.compare([launch("hist", a)], [launch("hist", wrong)], [launch("hist", b)])
    assert res.status == gate.FAILED and "outside the tolerance" in res.detail and "sum" in res.detail


def test_a_raw_buffer_of_float_atomics_compares_as_float32():
    """An NVRTC kernel's buffer has no element type (a raw pointer): its float32 view carries the tolerance."""
    v = np.random.default_rng(2).standard_normal(1024).astype(np.float32)
    a, b, p = v.copy(), v.copy(), v.copy()
    b[3] = np.nextafter(b[3], np.float32(10))
    p[4] = np.nextafter(p[4], np.float32(-10))
    raw = [{"kind": "launch", "family": "nvrtc", "kernel": "k", "buffers": [digest(x.tobytes(), None)]} for x in (a, p, b)]
    (res,) = gate.compare([raw[0]], [raw[1]], [raw[2]])
    assert res.status == gate.OK and res.nondeterministic == 1
    wrong = [{"kind": "launch", "family": "nvrtc", "kernel": "k", "buffers": [digest((v * 2).tobytes(), None)]}]
    (res,) = gate.compare([raw[0]], wrong, [raw[2]])
    assert res.status == gate.FAILED and "outside the tolerance" in res.detail


def test_nondeterministic_order_needs_the_same_values():
    idx = np.arange(100, dtype=np.int32)
    a, b = idx.copy(), idx[::-1].copy()  # an atomic compaction: the same indices in another order
    rng = np.random.default_rng(1)
    p = rng.permutation(idx).astype(np.int32)
    (res,) = gate.compare([launch("compact", a)], [launch("compact", p)], [launch("compact", b)])
    assert res.status == gate.OK and res.nondeterministic == 1
    p[0] = 1000
    (res,) = gate.compare([launch("compact", a)], [launch("compact", p)], [launch("compact", b)])
    assert res.status == gate.FAILED and "nondeterministic order in the JIT runs, and other values" in res.detail


def test_launch_counts_and_missing_runs():
    (res,) = gate.compare([launch("k", X)], [], [launch("k", X)])
    assert res.status == gate.NOT_LAUNCHED
    (res,) = gate.compare([launch("k", X)], [launch("k", X), launch("k", X)], [launch("k", X)])
    assert res.status == gate.FAILED and "2 time(s) with the packaged kernels, 1 with the JIT" in res.detail


def cupy(name: str, payload: bytes, how: str) -> dict:
    import hashlib
    return {"kind": "cupy", "kernel": name, "how": how, "sha256": hashlib.sha256(payload).hexdigest(),
            "size": len(payload), **({"name": "cupy_subtract"} if how == "compiled" else {})}


def test_cupy_images_compare_by_content():
    jit = [cupy("abc.cubin", b"subtract", "compiled")]
    (res,) = gate.compare(jit, [cupy("abc.cubin", b"subtract", "served")], jit)
    assert res.status == gate.OK and res.kernel == "cupy_subtract (abc.cubin)"
    (res,) = gate.compare(jit, [cupy("abc.cubin", b"add", "served")], jit)  # in0 + in1 under subtract's key
    assert res.status == gate.FAILED and "is not the one CuPy compiles here" in res.detail
    (res,) = gate.compare(jit, [cupy("abc.cubin", b"subtract", "compiled")], jit)
    assert res.status == gate.NOT_SERVED


def test_listing_names_unlaunched_and_failed_specs_and_fails_the_gate():
    jit = [launch("scale_f32", X), launch("mod:axpy(array(float32, 1d, C))", X, family="numba")]
    packaged = [launch("scale_f32", X), launch("mod:axpy(array(float32, 1d, C))", X + 1, family="numba")]
    results = gate.compare(jit, packaged, jit)
    specs = {"scale_f32": {"family": "nvrtc", "keys": ["scale_f32"]},
             "axpy.0": {"family": "numba", "keys": ["mod:axpy(array(float32, 1d, C))"]},
             "never": {"family": "nvrtc", "keys": ["never_launched"]}}
    rows = {r.spec: r for r in gate.listing(specs, results)}
    assert rows["scale_f32"].status == gate.OK and rows["scale_f32"].detail == "1 launch(es) equal"
    assert rows["axpy.0"].status == gate.FAILED and rows["axpy.0"].detail.startswith("mod:axpy(array(float32, 1d, "
                                                                                     "C)): launch 0")
    assert rows["never"].status == gate.NOT_LAUNCHED
    passes, lines = gate.verdict(list(rows.values()), results, allow_unlaunched=True)
    assert not passes and lines[0].startswith("FAILED axpy.0 (numba)")
    ok_rows = [rows["scale_f32"], rows["never"]]
    assert gate.verdict(ok_rows, results, allow_unlaunched=False)[0] is False
    passes, lines = gate.verdict(ok_rows, results, allow_unlaunched=True)
    assert passes and lines == ["1 not checked (not launched by the command, or not served): never; allowed "
                                "(--allow-unlaunched)"]
    rows2 = gate.listing(specs | {}, results, compiled=["scale_f32"])
    assert {r.spec: r.status for r in rows2}["scale_f32"] == gate.NOT_SERVED


def test_one_symbol_rendered_per_dtype_is_one_kernel_per_parameter_layout():
    """``extern "C" scale`` for float32 and float64: a wrong float32 unit fails scale_f32 alone; without a device
    to read the layouts (bare symbols), both specs see both layouts."""
    x64 = X.astype(np.float64)
    jit = [launch("scale(8,8,4,4)", X), launch("scale(8,8,8,4)", x64)]
    packaged = [launch("scale(8,8,4,4)", X + 1), launch("scale(8,8,8,4)", x64)]
    results = gate.compare(jit, packaged, jit)
    specs = {"scale_f32": {"family": "nvrtc", "keys": ["scale(8,8,4,4)"]},
             "scale_f64": {"family": "nvrtc", "keys": ["scale(8,8,8,4)"]}}
    assert {r.spec: r.status for r in gate.listing(specs, results)} == {"scale_f32": gate.FAILED,
                                                                         "scale_f64": gate.OK}
    bare = {n: {"family": "nvrtc", "keys": ["scale"]} for n in specs}
    assert {r.spec: r.status for r in gate.listing(bare, results)} == {"scale_f32": gate.FAILED,
                                                                        "scale_f64": gate.FAILED}


def test_extent_of_strided_and_contiguous_arrays():
    assert _extent({"data": (1000, False), "shape": (10,), "typestr": "<f4"}) == (1000, 40)
    assert _extent({"data": (1000, False), "shape": (3, 4), "typestr": "<f8", "strides": (64, 8)}) == (1000, 160)
    assert _extent({"data": (1000, False), "shape": (4,), "typestr": "<f4", "strides": (-4,)}) == (988, 16)


def test_cupy_observer_says_served_cache_or_compiled(monkeypatch):
    got = []
    monkeypatch.setattr("aot.verify.gate_hook._cupy", lambda name, payload, how, source=None: got.append((name, how)))

    class Disk:
        def __init__(self):
            self.files = {"old.cubin": b"x"}

        def load(self, name):
            return self.files.get(name)

        def save(self, name, payload, source):
            self.files[name] = payload

    class Aot:  # aot's backend: CuPy's own cache is its inner one
        def __init__(self, inner):
            self.inner = inner

        def load(self, name):
            return self.inner.load(name) or (b"held" if name == "new.cubin" else None)

    obs = _Observer(Aot(Disk()))
    assert obs.load("new.cubin") == b"held" and obs.load("old.cubin") == b"x" and obs.load("none.cubin") is None
    obs.inner.save = obs.inner.inner.save
    obs.save("c.cubin", b"y", 'extern "C" __global__ void k() {}')
    assert got == [("new.cubin", "served"), ("old.cubin", "cache"), ("c.cubin", "compiled")]


def test_the_runs_environments(tmp_path):
    base = {"PYTHONPATH": "/lib", "AOT_DISABLE_PACKAGED": "1", "CUPY_CACHE_IN_MEMORY": "1"}
    jit, packaged = env_for("jit", tmp_path, base), env_for("packaged", tmp_path, base)
    assert jit["AOT_JIT_ONLY"] == "1" and "AOT_NO_JIT" not in jit and "AOT_DISABLE_PACKAGED" not in jit
    assert "AOT_JIT_ONLY" not in packaged and packaged["AOT_NO_JIT"] == "report"
    assert "CUPY_CACHE_IN_MEMORY" not in packaged  # in memory, CuPy would never ask aot's backend
    assert jit["CUPY_CACHE_DIR"] != packaged["CUPY_CACHE_DIR"] and jit["PYTHONPATH"].endswith(":/lib")
    assert packaged["AOT_DISABLE_CACHE"] == "1"
    # issue 43: a Triton cache shared by the runs answered the packaged run with the JIT run's compile (aot serves
    # only where Triton's cache has nothing): each run has its own, empty (tests/test_triton.py: the mutant launched)
    base["TRITON_CACHE_DIR"] = str(tmp_path / "user")
    dirs = [env_for(run, tmp_path, base)["TRITON_CACHE_DIR"] for run in ("jit", "packaged", "jit-again")]
    assert len(set(dirs)) == 3 and str(tmp_path / "user") not in dirs
    assert all(Path(d).is_dir() and not any(Path(d).iterdir()) for d in dirs)


FAKE = textwrap.dedent("""
    import os, sys, numpy as np
    hook = sys.modules["_aot_gate_hook"]  # installed by the gate's sitecustomize in this process
    jit = os.environ.get("AOT_JIT_ONLY") == "1"
    x = np.arange(64, dtype=np.float32)
    for i in range(3):
        y = x * (i + 1)
        if not jit and i == 2:
            y[17] = 0  # a mutant: the third launch of 'scale' writes one element wrong
        hook._write({"kind": "launch", "family": "nvrtc", "kernel": "scale", "n": i, "grid": [1, 1, 1],
                     "block": [64, 1, 1], "buffers": [hook.digest(y.tobytes(), "float32")]})
""")


def test_run_gate_runs_the_command_three_times_and_names_the_launch(tmp_path):
    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    run = run_gate([sys.executable, str(script)], None, cwd=tmp_path, timeout=120, logs=tmp_path / "logs")
    assert run.returncodes == {"jit": 0, "packaged": 0, "jit-again": 0}
    (res,) = run.results
    assert res.status == gate.FAILED and res.detail.startswith("launch 2 ") and "first difference in elements [17, 18)" in res.detail
    assert "launch 2" in res.detail and sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
        "jit-again.jsonl", "jit.jsonl", "packaged.jsonl"]
    first = [json.loads(line) for line in (tmp_path / "logs" / "jit.jsonl").read_text().splitlines()]
    assert first[0]["kind"] == "process" and len(first) == 4


def test_cli_exit_code_and_lines(tmp_path, capsys):
    from aot.cli.main import main
    script = tmp_path / "fake.py"
    script.write_text(FAKE)
    rc = main(["gate", "--json", str(tmp_path / "g.json"), "--", sys.executable, str(script)])
    out = capsys.readouterr()
    assert rc == 7, out
    assert "FAILED scale (nvrtc, not a spec of the package): launch 2" in out.out
    assert json.loads((tmp_path / "g.json").read_text())["passes"] is False


def test_hook_is_inert_without_a_log():
    import subprocess
    from pathlib import Path
    r = subprocess.run([sys.executable, "-c", "import aot.verify.gate_hook as h; h.install(); print(h._state['fd'])"],
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(
                           Path(__file__).resolve().parent.parent)}, timeout=60, check=False)
    assert r.stdout.strip() == "None", r.stderr


def test_jit_only_keeps_the_definitions_and_serves_nothing(small_build, monkeypatch):
    """``AOT_JIT_ONLY=1`` (the gate's JIT runs): the packaged specs stay known (to JIT them), no manifest is
    served, so numba-cuda and CuPy attach nothing. ``AOT_DISABLE_PACKAGED`` forgets the definitions too."""
    import aot
    monkeypatch.setenv("AOT_JIT_ONLY", "1")
    reg = aot.Registry(str(small_build.out), device_sm=90)
    assert reg.manifest is None and {s.name for s in small_build.specs} <= set(reg.names())
    assert reg.packaged_candidates(reg.spec("reduce_sum_i32"), 90) == []
    monkeypatch.delenv("AOT_JIT_ONLY")
    monkeypatch.setenv("AOT_DISABLE_PACKAGED", "1")
    assert "reduce_sum_i32" not in aot.Registry(str(small_build.out), device_sm=90).names()


class _Memory:
    """A stand-in driver over host memory: allocations by base address, what a launch hook asks of the driver."""

    def __init__(self):
        self.mem = {0x1000: bytearray(np.arange(8, dtype=np.float32).tobytes()), 0x2000: bytearray(32)}
        self.syncs = 0

    def allocation(self, ptr):
        return next(((b, len(m)) for b, m in self.mem.items() if b <= ptr < b + len(m)), None)

    def to_host(self, base, size):
        return bytes(self.mem[base][:size])

    def sync(self):
        self.syncs += 1

    def symbol(self, handle):
        return "scale"

    def param_sizes(self, handle):
        return [8, 8, 4]


def test_the_launch_hook_digests_after_the_launch_and_passes_it_through(tmp_path, monkeypatch):
    import aot.verify.gate_hook as hook
    drv = _Memory()
    written = []
    monkeypatch.setitem(hook._state, "drv", drv)
    monkeypatch.setitem(hook._state, "counts", {})
    monkeypatch.setattr(hook, "_write", written.append)

    def original(f, x, y, n):  # the "kernel": y = 2 * x
        drv.mem[y][:] = (np.frombuffer(bytes(drv.mem[x]), np.float32) * 2).tobytes()
        return "the launch's own result"

    launch = hook._wrap_launch(original, "cuLaunchKernel", lambda d, f, x, y, n: (f, (1, 1, 1), (8, 1, 1), 0,
                                                                                   [x, y, np.int32(n)]))
    assert launch("fn", 0x1000, 0x2000, 8) == "the launch's own result"
    (rec,) = written
    assert rec["kernel"] == "scale(8,8,4)" and rec["family"] == "nvrtc" and rec["n"] == 0 and drv.syncs == 1
    after = np.arange(8, dtype=np.float32) * 2
    assert [b["digest"] for b in rec["buffers"]] == [digest(np.arange(8, dtype=np.float32).tobytes(), None)["digest"],
                                                     digest(after.tobytes(), None)["digest"]]

    class Boom(Exception):
        pass

    def failing(*a):
        raise Boom("the command's own error")
    with pytest.raises(Boom):
        hook._wrap_launch(failing, "cuLaunchKernel", lambda d, *a: ("fn", (1,), (1,), 0, []))()


def test_a_numba_launch_is_named_by_its_kernel_and_types(monkeypatch):
    import aot.verify.gate_hook as hook
    drv = _Memory()
    written = []
    monkeypatch.setitem(hook._state, "drv", drv)
    monkeypatch.setitem(hook._state, "counts", {})
    monkeypatch.setattr(hook, "_write", written.append)
    inner = hook._wrap_launch(lambda *a: None, "cuda.core", lambda d, s, c, k, *args: (k, (1,), (8,), 0, list(args)))

    class Arr:
        def __init__(self, ptr):
            self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (4,), "typestr": "<f4", "version": 3}

    def axpy(out, x):
        pass

    class Kernel:  # numba-cuda's _Kernel: launch(self, args, ...) calls cuda.core's launch with the flattened args
        py_func = axpy
        argument_types = ["array(float32, 1d, C)", "array(float32, 1d, C)"]

        def launch(self, args):
            inner("stream", "config", "kernel", 0, 0, 4, 4, args[0].__cuda_array_interface__["data"][0], 4, 4,
                  0, 0, 4, 4, args[1].__cuda_array_interface__["data"][0], 4, 4)

    Kernel().launch([Arr(0x2000), Arr(0x1000)])
    (rec,) = written
    assert rec["family"] == "numba" and rec["kernel"] == (f"{__name__}:test_a_numba_launch_is_named_by_its_kernel_and_"
                                                          "types.<locals>.axpy(array(float32, 1d, C), array(float32, "
                                                          "1d, C))")
    assert [(b["size"], b["dtype"]) for b in rec["buffers"]] == [(16, "float32"), (16, "float32")]  # the arrays' extent


def test_a_cuda_compute_call_is_named_by_its_spec_and_its_size_query_skipped(monkeypatch):
    import types

    import aot.verify.gate_hook as hook
    drv = _Memory()
    written = []
    monkeypatch.setitem(hook._state, "drv", drv)
    monkeypatch.setitem(hook._state, "counts", {})
    monkeypatch.setattr(hook, "_write", written.append)

    class Arr:
        def __init__(self, ptr, n):
            self.__cuda_array_interface__ = {"data": (ptr, False), "shape": (n,), "typestr": "<f4", "version": 3}

    class CcclAlgorithm:  # aot's loaded algorithm: called with keywords
        spec = types.SimpleNamespace(name="sum_f32")

        def __call__(self, **kwargs):
            return 64 if kwargs.get("temp_storage") is None else None

    mod = types.SimpleNamespace(CcclAlgorithm=CcclAlgorithm)
    hook._patch_objects("aot.runtime.loader.objects", mod)
    algo = CcclAlgorithm()
    assert algo(temp_storage=None, d_in=Arr(0x1000, 8), d_out=Arr(0x2000, 1), num_items=8) == 64
    assert written == []  # the size query writes nothing
    algo(temp_storage=Arr(0x2000, 8), d_in=Arr(0x1000, 8), d_out=Arr(0x2000, 1), num_items=8)
    (rec,) = written
    assert rec["family"] == "cccl" and rec["kernel"] == "sum_f32" and rec["args"] == ["d_in", "d_out", "num_items",
                                                                                       "temp_storage"]
    assert [(b["size"], b["dtype"]) for b in rec["buffers"]] == [(32, "float32"), (4, "float32")]  # not temp_storage


def test_a_command_failing_with_its_own_jit_fails_the_gate(tmp_path, capsys):
    from aot.cli.main import main
    rc = main(["gate", "--", sys.executable, "-c", "import sys; sys.exit(3)"])
    out = capsys.readouterr().out
    assert rc == 7 and "the command exited 3 with the library's own JIT: it must pass there first" in out, out


def test_jit_only_attaches_no_numba_or_cupy_kernel(small_build, tmp_path, monkeypatch):
    """The gate's JIT runs: a package shipping numba-cuda and CuPy kernels gets none attached, so both compile as
    without aot (before, AOT_JIT_ONLY kept the definitions and attach_* served them through aot's fallback)."""
    import shutil

    import aot
    from aot.runtime.adapters import cupy_attach, numba_attach, numba_lazy
    pkg = tmp_path / "jit_only_pkg"
    shutil.copytree(small_build.out, pkg / "artifacts")
    (pkg / "artifacts" / "numba").mkdir(exist_ok=True)
    (pkg / "artifacts" / "cupy").mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    calls = []
    monkeypatch.setattr(numba_attach, "attach_numba", lambda reg, **kw: calls.append("numba"))
    monkeypatch.setattr(numba_lazy, "defer", lambda reg: calls.append("numba") or True)  # numba-cuda imported: later
    monkeypatch.setattr(cupy_attach, "attach_cupy", lambda reg, **kw: calls.append("cupy"))
    aot.Registry.from_package("jit_only_pkg")
    assert calls == ["numba", "cupy"]
    monkeypatch.setenv("AOT_JIT_ONLY", "1")
    reg = aot.Registry.from_package("jit_only_pkg")
    assert calls == ["numba", "cupy"] and reg.manifest is None and "reduce_sum_i32" in reg.names()


def _elf(sections: list[tuple[bytes, int, bytes]]) -> bytes:
    """A minimal ELF64 (little-endian) with these (name, type, contents) sections after a null one and .shstrtab."""
    import struct
    names = b"\0.shstrtab\0" + b"".join(n + b"\0" for n, _, _ in sections)
    body, offs, pos = b"", [], 64
    for _, _, data in sections:
        offs.append(pos + len(body))
        body += data
    str_off = 64 + len(body)
    body += names
    shoff = 64 + len(body)
    head = b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                                                           len(sections) + 2, 1)
    shdrs = bytes(64) + struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, str_off, len(names), 0, 0, 1, 0)
    at = 11
    for (name, kind, data), off in zip(sections, offs):
        shdrs += struct.pack("<IIQQQQIIQQ", at, kind, 0, 0, off, len(data), 0, 0, 1, 0)
        at += len(name) + 1
    return head + body + shdrs


def test_a_cupy_image_built_elsewhere_is_compared_by_its_machine_code():
    """On the H200 a wheel built on the CPU host failed the gate for all 23 CuPy kernels: NVRTC names symbols after
    CuPy's path-hashed file name, so the images differ byte for byte while the code is the same. The gate compares
    the ``.text.*`` contents then; other code (the mutant) still fails."""
    from aot.verify.gate import FAILED, compare_cupy
    from aot.verify.gate_hook import code_digest
    here = _elf([(b".strtab", 3, b"\0kernel_3f2a\0"), (b".text.kernel_3f2a", 1, b"\x01\x02\x03\x04"),
                 (b".nv.shared.kernel_3f2a", 8, b"")])
    there = _elf([(b".strtab", 3, b"\0kernel_77c1\0"), (b".text.kernel_77c1", 1, b"\x01\x02\x03\x04"),
                  (b".nv.shared.kernel_77c1", 8, b"")])
    mutant = _elf([(b".strtab", 3, b"\0kernel_3f2a\0"), (b".text.kernel_3f2a", 1, b"\x01\x02\x03\x05")])
    assert here != there and code_digest(here) == code_digest(there) != code_digest(mutant)
    assert code_digest(b"not an image") is None and code_digest(here[:70]) is None

    def rec(image: bytes, how: str) -> dict:
        import hashlib
        return {"kind": "cupy", "kernel": "k", "how": how, "sha256": hashlib.sha256(image).hexdigest(),
                "size": len(image), "code": code_digest(image)}
    ok = compare_cupy("k", [rec(there, "served")], [rec(here, "compiled")], [rec(here, "compiled")])
    assert ok.status != FAILED, ok.detail
    bad = compare_cupy("k", [rec(mutant, "served")], [rec(here, "compiled")], [rec(here, "compiled")])
    assert bad.status == FAILED and "is not the one CuPy compiles here" in bad.detail
