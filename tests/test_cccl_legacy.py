"""cuda.compute on cuda-cccl releases without ``serialize`` (issue 44): the NVRTC / nvJitLink shims, the key
over every input of what they serve, the packaged answers. Real compilers: the shared venv's NVRTC 13 and
nvJitLink 13 answer every miss; the shims run in a subprocess (once loaded, a soname stays bound)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from aot.runtime.adapters import cccl_legacy as L
from aot.runtime.adapters import cccl_legacy_files


# tests here patch sys.path or package metadata while the loader reads versions (cached per process)
pytestmark = pytest.mark.usefixtures("fresh_version_caches")

ROOT = Path(__file__).resolve().parents[1]

#: What cuda-cccl 0.6.0's libcuda/compute/cu13/cccl/libcccl.c.parallel.so imports from NVRTC and nvJitLink
#: (``nm -D --undefined-only``): the shims must export each under the real library's symbol version.
LIBCCCL_060_IMPORTS = {
    "libnvrtc.so.13": ["nvrtcAddNameExpression", "nvrtcCompileProgram", "nvrtcCreateProgram", "nvrtcDestroyProgram",
                       "nvrtcGetErrorString", "nvrtcGetLTOIR", "nvrtcGetLTOIRSize", "nvrtcGetLoweredName",
                       "nvrtcGetProgramLog", "nvrtcGetProgramLogSize"],
    "libnvJitLink.so.13": ["nvJitLinkAddData", "nvJitLinkComplete", "nvJitLinkCreate", "nvJitLinkDestroy",
                           "nvJitLinkGetErrorLog", "nvJitLinkGetErrorLogSize", "nvJitLinkGetLinkedCubin",
                           "nvJitLinkGetLinkedCubinSize", "nvJitLinkGetLinkedPtx", "nvJitLinkGetLinkedPtxSize"],
}


def test_shims_export_what_libcccl_060_imports_under_its_symbol_versions(tmp_path):
    paths = L.build_shims(13, tmp_path)
    for lib, path in paths.items():
        so = path.name
        dyn = subprocess.run(["readelf", "-d", "--dyn-syms", "-W", str(path)], capture_output=True, text=True,
                             check=True).stdout
        assert f"Library soname: [{so}]" in dyn
        for sym in LIBCCCL_060_IMPORTS[so]:
            assert f"{sym}@@{so}" in dyn, (sym, so)


def _nvrtc_record(src: bytes, name: bytes, headers, exprs, opts) -> bytes:
    parts = [L.NVRTC_TAG, src, name, struct.pack("<Q", len(headers))]
    for content, inc in headers:
        parts += [content, inc]
    parts += [struct.pack("<Q", len(exprs)), *exprs, struct.pack("<Q", len(opts)), *opts]
    return b"".join(struct.pack("<Q", len(p)) + p for p in parts)


@pytest.fixture
def inc_dir(tmp_path, monkeypatch):
    d = tmp_path / "trusted" / "include"
    d.mkdir(parents=True)
    (d / "a.h").write_text("#define A 1\n")
    monkeypatch.setattr(cccl_legacy_files, "trusted_roots", lambda: (tmp_path / "trusted",))
    cccl_legacy_files._DIR_DIGESTS.clear()
    yield d
    cccl_legacy_files._DIR_DIGESTS.clear()


def test_the_key_covers_every_input_and_include_dirs_by_content(inc_dir, tmp_path):
    base = dict(src=b"__global__ void k(){}", name=b"p.cu", headers=[(b"#pragma once", b"h.h")],
                exprs=[b"k"], opts=[b"-arch=sm_90", b"-dlto", f"-I{inc_dir}".encode()])
    ident = b"nvrtc=abc"
    key = L.key_of(_nvrtc_record(**base), ident)
    changed = [dict(base, src=b"__global__ void k(){ }"), dict(base, name=b"q.cu"),
               dict(base, headers=[(b"#pragma once ", b"h.h")]), dict(base, headers=[(b"#pragma once", b"g.h")]),
               dict(base, exprs=[b"&k"]), dict(base, opts=[b"-arch=sm_80", b"-dlto", f"-I{inc_dir}".encode()]),
               dict(base, opts=[b"-arch=sm_90", f"-I{inc_dir}".encode()])]
    keys = {L.key_of(_nvrtc_record(**c), ident) for c in changed} | {L.key_of(_nvrtc_record(**base), b"nvrtc=abd")}
    assert key not in keys and len(keys) == len(changed) + 1
    # the include directory counts by content, not path: same content elsewhere, same key; an edit, another key
    other = tmp_path / "trusted" / "copy"
    other.mkdir()
    (other / "a.h").write_text("#define A 1\n")
    moved = dict(base, opts=[b"-arch=sm_90", b"-dlto", f"--include-path={other}".encode()])
    assert L.key_of(_nvrtc_record(**moved), ident) == key
    (inc_dir / "a.h").write_text("#define A 2\n")
    cccl_legacy_files._DIR_DIGESTS.clear()
    assert L.key_of(_nvrtc_record(**base), ident) != key


def test_an_include_dir_outside_the_installed_packages_or_another_path_refuses(inc_dir, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    rec = dict(src=b"x", name=b"p", headers=[], exprs=[])
    with pytest.raises(L.Refused, match="outside the installed"):
        L.key_of(_nvrtc_record(**rec, opts=[f"-I{outside}".encode()]), b"")
    with pytest.raises(L.Refused, match="names a path"):
        L.key_of(_nvrtc_record(**rec, opts=[f"--pre-include={inc_dir}/a.h".encode()]), b"")
    with pytest.raises(L.Refused, match="truncated|longer than"):
        L.key_of(_nvrtc_record(**rec, opts=[])[:-3], b"")


def test_a_corrupt_or_foreign_answer_warns_once_and_is_left_out(tmp_path, caplog):
    d = tmp_path / "cccl-legacy" / "cuda-cccl-0.6.0"
    d.mkdir(parents=True)
    good, cut, other = "a" * 64, "b" * 64, "c" * 64
    (d / f"{good}.aot").write_bytes(L.encode_entry(good, "nvrtc", "0.6.0", b"answer"))
    (d / f"{cut}.aot").write_bytes(L.encode_entry(cut, "nvrtc", "0.6.0", b"answer")[:-1])
    (d / f"{other}.aot").write_bytes(L.encode_entry(other, "nvrtc", "0.7.0", b"answer"))
    (d / "notakey.aot").write_bytes(L.encode_entry(good, "nvrtc", "0.6.0", b"answer"))
    table = L.load_table(tmp_path, "0.6.0")
    assert sorted(table) == [good, cut, other]  # an index: read and checked on the first hit
    got = {k: L.read_answer(p, k, "0.6.0") for k, p in table.items() if isinstance(p, Path)}
    assert got == {good: b"answer", cut: None, other: None}
    assert len([r for r in caplog.records if "runs for real" in r.getMessage()]) == 2
    assert L.load_table(tmp_path, "0.7.0") == {}


def test_with_a_release_that_serializes_the_import_hook_loads_nothing(monkeypatch, tmp_path):
    from aot.runtime.adapters import cccl_legacy_activate as A
    assert A.release_without_serialize() is None  # the shared venv's cuda-cccl 1.2.1 serializes
    monkeypatch.setattr(A.metadata, "version", lambda name: "0.6.0")
    assert A.release_without_serialize() == "0.6.0"
    pkg = tmp_path / "libpkg" / "artifacts" / "cccl-legacy" / "cuda-cccl-0.6.0"
    pkg.mkdir(parents=True)
    monkeypatch.setattr(A.sys, "path", [str(tmp_path)])
    assert A.package_roots("0.6.0") == [tmp_path / "libpkg" / "artifacts"] and A.package_roots("0.7.0") == []
    from aot.runtime.loader import import_hook
    for v, want in (("1.1.0", None), ("1.0.2", "1.0.2"), ("0.2.1", "0.2.1"), ("1.2.1rc1", None), ("1.10.0", None)):
        monkeypatch.setattr(A.metadata, "version", lambda name, v=v: v)
        assert A.release_without_serialize() == want
        assert import_hook._cccl_without_serialize() is (want is not None)  # the hook's cheap gate agrees


_ROUNDTRIP = textwrap.dedent(r'''
    import ctypes, json, sys
    from pathlib import Path
    from aot.runtime.adapters import cccl_legacy as L
    tmp, inc = Path(sys.argv[1]), sys.argv[2]
    got = []
    sh = L.Shims(L.build_shims(13, tmp), L.real_libs(13), record=lambda k, i, o: got.append((k, o)))
    nv, jl = sh.libs["nvrtc"], sh.libs["nvJitLink"]
    P = ctypes.c_void_p
    def compile(opts, src=b'#include <vector_types.h>\n#include "h.h"\nextern "C" __global__ void k(int *p){ *p = H; }'):
        prog = P()
        hdr = (ctypes.c_char_p * 1)(b"#define H 7\n"); names = (ctypes.c_char_p * 1)(b"h.h")
        assert nv.nvrtcCreateProgram(ctypes.byref(prog), src, b"p.cu", 1, hdr, names) == 0
        assert nv.nvrtcAddNameExpression(prog, b"k") == 0
        o = (ctypes.c_char_p * len(opts))(*opts)
        if nv.nvrtcCompileProgram(prog, len(opts), o) != 0:
            n = ctypes.c_size_t(); nv.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
            log = ctypes.create_string_buffer(n.value); nv.nvrtcGetProgramLog(prog, log); sys.exit(log.value.decode())
        n = ctypes.c_size_t(); nv.nvrtcGetLTOIRSize(prog, ctypes.byref(n)); buf = ctypes.create_string_buffer(n.value)
        assert nv.nvrtcGetLTOIR(prog, buf) == 0
        low = ctypes.c_char_p(); assert nv.nvrtcGetLoweredName(prog, b"k", ctypes.byref(low)) == 0
        lowered = low.value
        nv.nvrtcDestroyProgram(ctypes.byref(prog))
        return buf.raw, lowered
    def link(ltoir):
        h = P(); o = (ctypes.c_char_p * 2)(b"-lto", b"-arch=sm_90")
        assert jl.nvJitLinkCreate(ctypes.byref(h), 2, o) == 0
        assert jl.nvJitLinkAddData(h, 3, ltoir, len(ltoir), b"x") == 0  # NVJITLINK_INPUT_LTOIR
        assert jl.nvJitLinkComplete(h) == 0
        n = ctypes.c_size_t(); jl.nvJitLinkGetLinkedCubinSize(h, ctypes.byref(n)); buf = ctypes.create_string_buffer(n.value)
        assert jl.nvJitLinkGetLinkedCubin(h, buf) == 0
        jl.nvJitLinkDestroy(ctypes.byref(h))
        return buf.raw
    opts = [b"-arch=sm_90", b"-dlto", b"-rdc=true", ("-I" + inc).encode()]
    lt1, low1 = compile(opts); cub1 = link(lt1)
    out = {"recorded": len(got), "after_record": sh.counts()}
    sh.table = {k: o for k, o in got}
    lt2, low2 = compile(opts); cub2 = link(lt2)
    out["served_same"] = [lt1 == lt2, low1 == low2, cub1 == cub2]
    out["after_serve"] = sh.counts()
    compile(opts[:-1] + [b"-DX=1", opts[-1]])            # one more option: compiled for real
    compile(opts, src=b'#include "h.h"\nextern "C" __global__ void k(int *p){ *p = H + 1; }')
    out["after_changed"] = sh.counts()
    out["refusals"] = sh.refusals
    print(json.dumps(out))
''')


def test_record_then_serve_gives_the_same_bytes_and_a_changed_input_compiles(tmp_path):
    import nvidia
    inc = next(Path(p) / "cu13" / "include" for p in nvidia.__path__ if (Path(p) / "cu13" / "include").is_dir())
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", _ROUNDTRIP, str(tmp_path), str(inc)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["recorded"] == 2 and out["after_record"] == {"nvrtc": [0, 1], "nvJitLink": [0, 1]}
    assert out["served_same"] == [True, True, True]
    assert out["after_serve"] == {"nvrtc": [1, 1], "nvJitLink": [1, 1]}
    assert out["after_changed"]["nvrtc"] == [1, 3] and out["refusals"] == []


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("AOT_CCCL060_PYTHON"), reason="AOT_CCCL060_PYTHON: a python with "
                    "cuda-cccl[cu13]==0.6.0 and numba<0.66 (docs/build.md, CCCL releases without serialize)")
def test_a_reduce_built_under_cuda_cccl_060_is_served_in_a_fresh_process(tmp_path):
    py, env = os.environ["AOT_CCCL060_PYTHON"], dict(os.environ, PYTHONPATH=str(ROOT))
    out = tmp_path / "set"
    specs = ["reduce:int32:plus:0", "unary_transform:float32:negate"]
    r = subprocess.run([py, "-m", "aot.build.cccl_legacy_build", "--sm", "90", "--out", str(out), *specs],
                       capture_output=True, text=True, env=env, timeout=600)
    # a compile, a link and the operator's LTO-IR per spec
    assert r.returncode == 0 and r.stdout.count("3 answers") == 2, r.stderr[-2000:]
    assert len(list((out / "cccl-legacy" / "cuda-cccl-0.6.0").glob("*.aot"))) == 6
    serve = textwrap.dedent('''
        import sys, json
        from pathlib import Path
        from aot.runtime.adapters import cccl_legacy
        from aot.build import cccl_legacy_build as b
        tmp = Path(sys.argv[2]); b._stand_in_driver(tmp)
        sh = cccl_legacy.install(Path(sys.argv[1]), "0.6.0", tmp)
        from aot.runtime.adapters import cccl_legacy_ops
        cccl_legacy_ops.bind(sh)
        b._target_cc(90)
        # the other order than the build's: operators are named and mangled from content, not from counters
        for spec in ("unary_transform:float32:negate", "reduce:int32:plus:0", "reduce:int64:plus:0"):
            b.build_spec(spec)
        print(json.dumps(sh.counts()))
    ''')
    (tmp_path / "shims").mkdir()
    r = subprocess.run([py, "-c", serve, str(out), str(tmp_path / "shims")], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    # both built specs served (compile, link, operator), the int64 reduce never built: compiled for real
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"nvrtc": [2, 1], "nvJitLink": [2, 1], "numba": [2, 1]}


def test_a_real_nvrtc_loaded_first_refuses_rather_than_serving_nothing(tmp_path):
    """Where something loaded the real libnvrtc.so.13 first, cuda.compute's C library would bind to it: the
    shims say so (activate turns that into one warning and the builds JIT) instead of claiming to serve."""
    code = textwrap.dedent('''
        import ctypes, os, sys
        from pathlib import Path
        from aot.runtime.adapters import cccl_legacy as L
        real = L.real_libs(13)
        ctypes.CDLL(real["nvrtc"], mode=os.RTLD_GLOBAL)
        try:
            L.Shims(L.build_shims(13, Path(sys.argv[1])), real)
        except OSError as e:
            print("refused:", e)
    ''')
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert "refused: libnvrtc.so.13 was loaded before aot's shim" in r.stdout, (r.stdout, r.stderr[-1000:])


def test_a_bad_spec_is_one_line_naming_it_before_anything_is_written(tmp_path):
    from aot.build import cccl_legacy_build as B
    assert B.parse_spec("reduce:int32:plus:0") == ("reduce", "int32", {"op": "plus", "init": "0"})
    assert B.parse_spec("radix_sort:uint32:ascending") == ("radix_sort", "uint32", {"order": "ascending"})
    with pytest.raises(ValueError, match=r"^histogram:int32: family 'histogram' is not built"):
        B.record(["reduce:int32:plus:0", "histogram:int32"], 90, tmp_path / "out")
    with pytest.raises(ValueError, match=r"^reduce:int32:plus: reduce takes reduce:dtype:op:init$"):
        B.parse_spec("reduce:int32:plus")
    assert not (tmp_path / "out").exists()
    assert B.operator("aot.build.cccl_legacy_build.operator") is B.operator  # a library's own, by module path


def test_a_shim_whose_real_library_does_not_load_is_unloaded_again(tmp_path):
    """Bound to a shim without its real library, cuda.compute's every compile would fail: refuse and unload."""
    code = textwrap.dedent('''
        import ctypes, os, sys
        from pathlib import Path
        from aot.runtime.adapters import cccl_legacy as L
        bad = Path(sys.argv[1]) / "notalib.so"
        bad.write_text("not a shared library")
        real = dict(L.real_libs(13), nvJitLink=str(bad))
        try:
            L.Shims(L.build_shims(13, Path(sys.argv[1])), real)
        except OSError as e:
            print("refused:", e)
        try:  # the soname now names the real NVRTC (the shim had loaded it) or nothing: never the shim
            bound = ctypes.CDLL("libnvrtc.so.13", mode=os.RTLD_NOW | L.RTLD_NOLOAD)
            print("still the shim" if hasattr(bound, "aot_nvrtc_shim") else "unloaded")
        except OSError:
            print("unloaded")
    ''')
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    want = [f"refused: aot: the real nvJitLink at {tmp_path / 'notalib.so'} does not load", "unloaded"]
    assert r.stdout.splitlines()[-2:] == want, (r.stdout, r.stderr[-1000:])


def test_an_include_dir_digest_leaves_out_python_bytecode(inc_dir):
    """cuda-cccl's header folder is a Python package: the bytecode pip or Python writes there differs in every
    install (file times), and counted in the key it made a wheel miss every compile in another venv."""
    before = L.dir_digest(str(inc_dir))
    (inc_dir / "__pycache__").mkdir()
    (inc_dir / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\xa7\r\r\n install-specific")
    cccl_legacy_files._DIR_DIGESTS.clear()
    assert L.dir_digest(str(inc_dir)) == before
    (inc_dir / "b.h").write_text("#define B 1\n")
    cccl_legacy_files._DIR_DIGESTS.clear()
    assert L.dir_digest(str(inc_dir)) != before


def test_the_build_compiles_operators_as_numba_does_on_a_device_of_the_target(tmp_path):
    """cuda-cccl < 1.1 compiles each operator with ``numba.cuda.compile(..., output="ltoir")`` and no ``cc``:
    numba-cuda takes it from its current device (0.26 adds "a" from 9.0 on: an H200 compiles compute_90a). The
    build once forced ``cc=(9, 0)`` instead: on the H200 every link then missed (the operator's LTO-IR, 2936
    bytes built, 2940 there). The build gives numba's context the target's device and leaves compile alone."""
    code = textwrap.dedent('''
        import sys
        from pathlib import Path
        import numba.cuda
        from numba import types
        from aot.build import cccl_legacy_build as b
        before = numba.cuda.compile
        b._stand_in_driver(Path(sys.argv[1]))
        b._target_cc(90)
        from numba.cuda.cudadrv import devices
        def add(x, y):
            return x + y
        sig = types.int32(types.int32, types.int32)
        got = numba.cuda.compile(add, sig, output="ltoir")[0]
        print(numba.cuda.compile is before, devices.get_context().device.compute_capability,
              got != numba.cuda.compile(add, sig, output="ltoir", cc=(8, 0))[0])
    ''')
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert r.stdout.split() == ["True", "(9,", "0)", "True"], (r.stdout, r.stderr[-1000:])


def test_the_prefetch_thread_only_reads_files(monkeypatch):
    """The shims' prefetch hashes in a thread beside the library's imports: a thread that imported cuda.cccl there
    while the main thread imported cuda.compute through aot's hook deadlocked on their module locks (the slow
    wheel test hung). What it needs is found in the calling thread; the thread imports nothing."""
    import builtins
    import threading

    real = L.real_libs(13)
    plan = cccl_legacy_files.prefetch_plan(real)
    assert plan[1] and plan[2], plan  # the compilers and the include directories of this install
    worker: list[threading.Thread] = []
    seen: list[str] = []
    real_import = builtins.__import__

    def spy(name, *args, **kwargs):
        if worker and threading.current_thread() is worker[0]:  # the prefetch's thread (the suite runs others)
            seen.append(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", spy)
    cccl_legacy_files._DIR_DIGESTS.clear()
    worker.append(threading.Thread(target=cccl_legacy_files.prefetch_digests, args=(real, plan)))
    worker[0].start()
    worker[0].join()
    monkeypatch.undo()
    assert seen == []
    assert set(cccl_legacy_files._DIR_DIGESTS) == set(plan[2])


def test_the_key_files_are_hashed_by_a_child_python_and_here_where_it_cannot(tmp_path, monkeypatch):
    """sha256_many: a child Python hashes many files (the importing process keeps its GIL: on the H200, threads of
    the process slowed `import numba.cuda, cupy` 1.43x beside 2.8 GB, a child 1.04x); the same digests as
    hashlib's, in order. Where no child can run (an embedding program) or it fails (a file it cannot read), the
    process hashes them itself, and an unreadable file raises there."""
    import hashlib
    files = []
    for i in range(cccl_legacy_files.CHILD_FROM + 5):
        f = tmp_path / f"h{i:03d}.h"
        f.write_bytes(os.urandom(i * 37))
        files.append(f)
    want = [hashlib.sha256(f.read_bytes()).digest() for f in files]
    started: list = []  # what this module's children gave (the suite's isolated builds run subprocesses beside it)
    real_child = cccl_legacy_files._in_child

    def child(*a):
        started.append(real_child(*a))
        return started[-1]

    monkeypatch.setattr(cccl_legacy_files, "_in_child", child)
    assert cccl_legacy_files.sha256_many(files) == want and len(started) == 1 and started[0] == want  # by the child
    assert cccl_legacy_files.sha256_many(files[:3]) == want[:3] and len(started) == 1  # few: no child
    assert cccl_legacy_files.sha256_many(files, child=False) == want and len(started) == 1
    assert cccl_legacy_files._interpreter() == sys.executable
    # an embedding program: no Python to start (patched here, not sys.executable: the suite's threads use it)
    monkeypatch.setattr(cccl_legacy_files, "_interpreter", lambda: None)
    assert cccl_legacy_files.sha256_many(files) == want and len(started) == 1
    monkeypatch.undo()
    missing = [*files, tmp_path / "gone.h"]
    with pytest.raises(FileNotFoundError):
        cccl_legacy_files.sha256_many(missing)
