"""``aot record`` (issues 36, 37): every family recorded, kernels read from the compiled image, loud failures,
and a recording that changes nothing the command does.

Each test records a small script (CPU only: NVRTC compiles here, numba-cuda launches fail after the compile
request the hook records, CuPy is a stand-in with its constructor signatures)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from test_record import toolkit_env

NUMBA_EXAMPLE = ROOT / "examples" / "numba-mypkg"

KERNELS = {
    "klib/__init__.py": "",
    "klib/src.py": r'''
        LB = """extern "C" __global__ void __launch_bounds__(256, 4) scale_lb(float* x) { x[threadIdx.x] *= 2; }"""
        LB_ONE = 'extern "C" __global__ void __launch_bounds__ (128) add_one(float* x) { x[threadIdx.x] += 1; }'
        MACRO = """#define KERNEL extern "C" __global__
        #define BOUNDS __launch_bounds__(64)
        KERNEL void BOUNDS macro_kernel(int* y) { y[threadIdx.x] = 3; }
        KERNEL void other_kernel(int* y) { y[0] = 4; }
        """
        TEMPLATE = """template <typename T, int N> __global__ void __launch_bounds__(N) fill(T* x) { x[threadIdx.x] = N; }
        extern "C" __global__ void plain_too(int* x) { x[0] = 1; }
        """

        def bbox(dtype):
            t = {"float32": "float", "float64": "double"}[dtype]
            return f'extern "C" __global__ void bbox_{dtype}(const {t}* x, {t}* out) {{ out[0] = x[0]; }}'
        ''',
    "cupy/__init__.py": '''
        class RawKernel:
            def __init__(self, code, name, options=(), **kw):
                self.code, self.name = code, name
        class RawModule:
            def __init__(self, code=None, *, options=(), name_expressions=None, path=None):
                self.code = code
        ''',
}

COMPILE = '''
    from cuda.core import Program, ProgramOptions
    from cuda.bindings import nvrtc
    from klib import src

    def core(text, names=(), target="cubin"):
        return Program(text, "c++", ProgramOptions(arch="sm_80")).compile(target, name_expressions=names)

    def raw(text, names=(), arch=b"-arch=compute_80"):
        err, prog = nvrtc.nvrtcCreateProgram(text.encode(), b"k.cu", 0, [], [])
        for n in names:
            nvrtc.nvrtcAddNameExpression(prog, n.encode())
        assert nvrtc.nvrtcCompileProgram(prog, 1, [arch])[0] == nvrtc.nvrtcResult.NVRTC_SUCCESS
        nvrtc.nvrtcDestroyProgram(prog)
'''


def write_tree(root: Path, files: dict) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


def run_record(project: Path, script: str, *args: str, env: dict | None = None, package: str = "klib",
               timeout: int = 300) -> tuple[subprocess.CompletedProcess, Path]:
    (project / "run.py").write_text(textwrap.dedent(script))
    out = project / "m.yaml"
    env = env or toolkit_env()
    env["PYTHONPATH"] = os.pathsep.join([str(project), env["PYTHONPATH"]])
    r = subprocess.run([sys.executable, "-m", "aot", "record", "--package", package, "--out", str(out), *args,
                        "--", sys.executable, "run.py"], cwd=project, env=env, capture_output=True, text=True,
                       timeout=timeout)
    return r, out


# ------------------------------------------------------------------------------------------- 36.1: NVRTC
def test_kernel_names_are_read_from_the_compiled_image_and_build(tmp_path):
    """``__launch_bounds__(N, M)``, a macro-wrapped ``__global__``, templates with name expressions, PTX and
    cubin, cuda.core and raw NVRTC: each unit's kernels are the image's entries (before: a regex named the
    first ``__launch_bounds__``, and missed the macro's kernels). The recorded matrix then builds: every
    kernel it lists is in the built image (the build's own check)."""
    project = write_tree(tmp_path, KERNELS)
    r, out = run_record(project, textwrap.dedent(COMPILE) + textwrap.dedent('''
        core(src.LB)
        raw(src.LB_ONE)                                         # PTX (compute_80) through raw NVRTC
        raw(src.MACRO, arch=b"-arch=sm_80")                    # a cubin through raw NVRTC
        core(src.TEMPLATE, ("fill<float, 256>", "fill<int, 64>"))
        for dt in ("float32", "float64"):
            core(src.bbox(dt))
    '''))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    doc = yaml.safe_load(out.read_text())
    kernels = {e["source"]: e["kernels"] for e in doc["nvrtc"]}
    assert kernels == {"klib.src:LB": ["scale_lb"], "klib.src:LB_ONE": ["add_one"],
                       "klib.src:MACRO": ["macro_kernel", "other_kernel"],
                       "klib.src:TEMPLATE": ["fill<float, 256>", "fill<int, 64>", "plain_too"],
                       "klib.src:bbox": ["bbox_{dtype}"]}
    bbox = next(e for e in doc["nvrtc"] if e["source"] == "klib.src:bbox")
    assert bbox["params"] == {"dtype": ["float32", "float64"]}  # one entry for the function's parameter sets
    b = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(out), "--sm", "80", "--jobs", "1",
                        "--out", str(project / "built"), "-q"], cwd=project, env=run_env(project),
                       capture_output=True, text=True, timeout=300)
    assert b.returncode == 0, b.stdout[-3000:] + b.stderr[-3000:]


def run_env(project: Path) -> dict:
    env = toolkit_env()
    env["PYTHONPATH"] = os.pathsep.join([str(project), env["PYTHONPATH"]])
    return env


def test_image_symbols_reads_cubin_and_ptx_entries():
    """The reader itself: entries only (a ``__noinline__`` device function is not one), in both formats."""
    from cuda.bindings import nvrtc

    from aot.build.image_symbols import ImageError, kernel_symbols
    text = textwrap.dedent('''
        __device__ __noinline__ float helper(float a) { return a * 2; }
        extern "C" __global__ void __launch_bounds__(256, 4) k1(float* x) { x[0] = helper(x[1]); }
        template <typename T> __global__ void k2(T* x) { x[0] = 1; }
    ''').encode()
    got = {}
    for arch in (b"-arch=sm_80", b"-arch=compute_80"):
        _, prog = nvrtc.nvrtcCreateProgram(text, b"k.cu", 0, [], [])
        nvrtc.nvrtcAddNameExpression(prog, b"k2<int>")
        assert nvrtc.nvrtcCompileProgram(prog, 1, [arch])[0] == nvrtc.nvrtcResult.NVRTC_SUCCESS
        get_size, get = ((nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if b"sm_" in arch
                         else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
        buf = b" " * get_size(prog)[1]
        get(prog, buf)
        got[arch] = sorted(kernel_symbols(buf.rstrip(b"\0")))
        nvrtc.nvrtcDestroyProgram(prog)
    assert got[b"-arch=sm_80"] == got[b"-arch=compute_80"] == ["_Z2k2IiEvPT_", "k1"]
    with pytest.raises(ImageError):
        kernel_symbols(b"\x7fELF" + b"\x02\x01" + b"\0" * 10)


# ------------------------------------------------------------------------------------------- 36.2
BAD_KERNEL = """extern "C" __global__ void real_name(int* x) { x[0] = 1; }
#if 0  // the text names it; the compiled unit does not define it
extern "C" __global__ void not_there(int* x) { x[0] = 2; }
#endif
extern "C" __device__ void device_only(int* x) { x[0] = 3; }
"""


def test_a_listed_kernel_the_image_does_not_define_fails_the_build_in_one_line(tmp_path, capsys):
    """A name the text mentions (the validator's check) but the compiled unit does not define as a kernel: a
    disabled block, a device function. Before: the unit built (the artifact would load, and the library's
    lookup fail on the user's GPU)."""
    from aot.cli.main import main
    (tmp_path / "k.cu").write_text(BAD_KERNEL)
    m = tmp_path / "m.yaml"
    m.write_text("version: 1\nnvrtc:\n  - {name: wrong, source: k.cu, kernels: [real_name, not_there]}\n")
    assert main(["build", "--matrix", str(m), "--sm", "80", "--jobs", "1", "--out", str(tmp_path / "o"), "-q"]) == 4
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("aot: error:")]
    assert len(err) == 1 and "wrong sm_80 (cubin): " in err[0], err  # the one line: the spec and the kernel
    assert "wrong: kernel 'not_there' is not defined by the compiled k.cu (its kernels: real_name)" in err[0]
    m.write_text("version: 1\nnvrtc:\n  - {name: dev, source: k.cu, kernels: [device_only]}\n")
    assert main(["build", "--matrix", str(m), "--sm", "80", "--jobs", "1", "--out", str(tmp_path / "o"), "-q"]) == 4
    assert "dev: kernel 'device_only' is not defined" in capsys.readouterr().err


def test_a_recording_that_saw_nothing_exits_nonzero_in_one_line(tmp_path, capsys):
    """Before: exit 0 and an empty matrix written over whatever was there."""
    from aot.cli.main import main
    out = tmp_path / "m.yaml"
    rc = main(["record", "--package", "nothing", "--out", str(out), "--", sys.executable, "-c", "print('hi')"])
    assert rc == 9
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no compile seen in 1 Python process(es)" in err[0], err
    assert "need a device, so record on a GPU host, or pass --stand-in-driver" in err[0]
    assert not out.exists()
    rc = main(["record", "--package", "nothing", "--out", str(out), "--", "/bin/sh", "-c", "exit 0"])
    assert rc == 9 and "the hook ran in no Python process" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- 36.1: numba
NUMBA_LAUNCHES = '''
    import numpy as np
    from numba import cuda
    from numba_mypkg import kernels as k

    def launch(kernel, grid, block, *args):
        try:
            kernel[grid, block](*args)  # numba-cuda types the arguments and compiles: that is what is recorded
        except Exception as e:  # no GPU here: the launch itself fails after the compile request
            print("launch:", type(e).__name__)

    n = 1000
    for dt in (np.float32, np.float64):
        x = np.ones(n, dt)
        launch(k.axpy, 4, 256, np.empty_like(x), x, x, dt(2.5))
        launch(k.axpy, 4, 256, np.empty_like(x), x, x, dt(2.5))   # the same types again: one compile
    launch(k.scale_inplace, 4, 128, np.ones(n, np.float32), np.float32(3.0), np.int64(n))
    launch(k.smooth, 4, 256, np.empty(n), np.ones(n), -0.5, 0.5)
    launch(k.block_sum, 4, 256, np.empty(4, np.int64), np.ones(n, np.int64))

    @cuda.jit
    def local_kernel(x):
        x[0] = 1
    launch(local_kernel, 1, 1, np.ones(1, np.int32))
'''

KEYS = textwrap.dedent("""
    import json, sys
    from aot.build.matrix import load_matrix
    print(json.dumps({s.name: s.content_key() for s in load_matrix(sys.argv[1]).specs}))
""")


def test_numba_kernels_of_the_example_are_recorded_with_the_hand_written_keys(tmp_path):
    """examples/numba-mypkg's kernels, launched as its checks launch them: one ``numba:`` entry per kernel,
    the signatures as launched, the same content keys as its hand-written matrix; a kernel outside the
    package is listed as not named."""
    project = tmp_path / "numba-mypkg"
    shutil.copytree(NUMBA_EXAMPLE, project, ignore=shutil.ignore_patterns("build", "dist", "__pycache__",
                                                                         "artifacts"))
    r, out = run_record(project, NUMBA_LAUNCHES, package="numba_mypkg")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "6 numba-cuda kernel compiles" in r.stdout and "4 numba entries (5 signatures)" in r.stdout, r.stdout
    text = out.read_text()
    assert "# 0 NVRTC compiles seen, 0 entries; 6 numba-cuda kernel compiles seen, 4 entries; " \
           "0 cuda.compute builds seen, 0 specs; 0 CuPy compiles seen, 0 entries; 0 Triton compiles seen, 0 entries." in text, text
    assert "local_kernel is not in the recorded package(s) numba_mypkg" in text
    doc = yaml.safe_load(text)
    assert doc["numba"][0] == {"name": "axpy", "kernel": "numba_mypkg.kernels:axpy", "signatures": [
        "void(float32[::1], float32[::1], float32[::1], float32)",
        "void(float64[::1], float64[::1], float64[::1], float64)"]}
    keys = {}
    for m in (out, project / "build_matrix.yaml"):
        k = subprocess.run([sys.executable, "-c", KEYS, str(m)], cwd=project, env=run_env(project),
                           capture_output=True, text=True, timeout=300)
        assert k.returncode == 0, k.stderr[-3000:]
        keys[m.name] = json.loads(k.stdout.strip().splitlines()[-1])
    # 7: axpy is fastmath, each of its two signatures two builds (with and without LTO: docs/numba.md)
    assert keys["m.yaml"] == keys["build_matrix.yaml"] and len(keys["m.yaml"]) == 7


# ------------------------------------------------------------------------------------------- 37.5
def test_the_hook_folder_cannot_be_recreated_by_name_after_the_run(tmp_path):
    """Before: PYTHONPATH named ``$TMPDIR/aot-record-XXXX/site``, which anyone could recreate once removed, and
    a descendant outliving the run would import their ``sitecustomize``."""
    project = write_tree(tmp_path, KERNELS)
    r, out = run_record(project, '''
        import json, os, stat, cupy
        cupy.RawKernel('extern "C" __global__ void k() {}', "k")
        entry = os.environ["PYTHONPATH"].split(os.pathsep)[0]
        mode = stat.S_IMODE(os.stat(os.path.dirname(entry)).st_mode)
        print(json.dumps({"entry": entry, "records": os.environ["AOT_RECORD_FILE"], "mode": mode}))
    ''')
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    seen = json.loads(r.stdout.splitlines()[0])
    assert seen["mode"] & 0o077 == 0  # private while it runs
    for name in (seen["entry"], seen["records"]):
        assert not os.path.exists(name)
        try:
            os.makedirs(name)
        except OSError:
            continue
        shutil.rmtree(Path(name).parent, ignore_errors=True)
        pytest.fail(f"{name} could be created again after the run")


# ------------------------------------------------------------------------------------------- 37.6
def test_a_comment_cannot_break_out_into_the_matrix():
    """``\\r``, U+0085, U+2028, U+2029 end a YAML comment line: a reason or the quoted command carrying one
    made the rest of the line a live spec. Before: that text parsed as a ``cccl:`` section."""
    from aot.record.record import Recording, render_matrix
    evil = "cccl: [{name: evil, algorithm: reduce, dtype: float64, op: plus}]"
    rec = Recording(0, nvrtc=[{"name": "k", "source": "p.m:K", "kernels": ["k"]}])
    rec.unnamed = [f"nvrtc source 'x'{brk}{evil}" for brk in ("\r", "\x85", "\u2028", "\u2029")]
    text = render_matrix(rec, ["python", "-c", f"1\r{evil}"])
    assert yaml.safe_load(text) == {"version": 1, "nvrtc": rec.nvrtc}
    assert "\\u2028" in text and "\\r" in text and text.isascii()


def test_a_matrix_text_that_reads_back_otherwise_is_not_written():
    from aot.record.record import check_written
    doc = {"version": 1, "nvrtc": [{"name": "k", "source": "p.m:K", "kernels": ["k"]}]}
    text = "version: 1\nnvrtc:\n  - {name: k, source: 'p.m:K', kernels: [k]}\n"
    check_written(text, doc)
    with pytest.raises(ValueError, match="does not read back"):
        check_written(text + "cccl: [{name: evil}]\n", doc)


# ------------------------------------------------------------------------------------------- 37.7
SIDE_EFFECTS = {
    "slib/__init__.py": "",
    "slib/k.py": '''
        CALLS = []

        def render(dtype):
            CALLS.append(dtype)  # a side effect: the command counts its renders
            return 'extern "C" __global__ void k_' + dtype + '(float* x) { x[0] = 1; }'

        def render_with(obj):
            return 'extern "C" __global__ void held(float* x) { x[0] = 2; }'
        ''',
    "cupy/__init__.py": KERNELS["cupy/__init__.py"],
    "usersite/sitecustomize.py": "MARK = 42\n",
}


def test_recording_changes_nothing_the_command_sees(tmp_path):
    """The library's function runs once in the command (before: a second time, to check it); an argument is
    freed when the command drops it (before: kept for the whole run); the user's own ``sitecustomize`` is the
    one ``import sitecustomize`` gives (before: aot's)."""
    project = write_tree(tmp_path, SIDE_EFFECTS)
    env = toolkit_env()
    env["PYTHONPATH"] = os.pathsep.join([str(project / "usersite"), env["PYTHONPATH"]])
    r, out = run_record(project, '''
        import gc, json, weakref
        import cupy, sitecustomize
        from slib import k

        class Big:
            pass
        cupy.RawKernel(k.render("float32"), "k_float32")
        obj = Big()
        ref = weakref.ref(obj)
        cupy.RawKernel(k.render_with(obj), "held")
        del obj
        gc.collect()
        print(json.dumps({"calls": k.CALLS, "freed": ref() is None, "mark": getattr(sitecustomize, "MARK", None)}))
    ''', env=env, package="slib")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert json.loads(r.stdout.splitlines()[0]) == {"calls": ["float32"], "freed": True, "mark": 42}
    doc = yaml.safe_load(out.read_text())
    assert doc["nvrtc"] == [{"name": "render_f32", "source": "slib.k:render", "kernels": ["k_float32"],
                             "params": {"dtype": "float32"}}]   # still checked: called again, in its own process
    assert "render_with from arguments that are not plain values: obj=<Big>" in out.read_text()


def test_a_function_that_renders_another_text_when_called_again_is_listed(tmp_path):
    project = write_tree(tmp_path, {**SIDE_EFFECTS, "slib/k.py": '''
        import os
        def render(dtype):
            return 'extern "C" __global__ void k(float* x) { x[0] = ' + str(os.getpid()) + '; }'
        '''})
    r, out = run_record(project, '''
        import cupy
        from slib import k
        cupy.RawKernel(k.render("float32"), "k")
    ''', package="slib")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "it returns another text (it depends on more than its arguments)" in out.read_text()


def test_a_command_killed_by_a_signal_exits_as_a_shell_reports_it(tmp_path):
    """Before: 245 (-11 & 0xff) for SIGSEGV; a shell says 139."""
    project = write_tree(tmp_path, KERNELS)
    r, _ = run_record(project, '''
        import os, signal, cupy
        cupy.RawKernel('extern "C" __global__ void k() {}', "k")
        os.kill(os.getpid(), signal.SIGSEGV)
    ''')
    assert r.returncode == 139 and "the command was killed by SIGSEGV (exit 139)" in r.stdout, r.stdout + r.stderr


def test_ctrl_c_is_passed_on_and_the_command_cleans_up(tmp_path):
    """SIGINT to ``aot record``'s group reaches the command once, which finishes its cleanup (before: killed
    0.25 s later; then, without a terminal, interrupted by a second SIGINT: tests/test_redteam45.py)."""
    project = write_tree(tmp_path, KERNELS)
    (project / "run.py").write_text(textwrap.dedent('''
        import sys, time, cupy
        cupy.RawKernel('extern "C" __global__ void k() {}', "k")
        open("ready", "w").close()
        try:
            time.sleep(60)
        except KeyboardInterrupt:
            time.sleep(1.0)  # cleanup that takes a while
            open("cleaned", "w").close()
            sys.exit(130)
    '''))
    env = run_env(project)
    p = subprocess.Popen([sys.executable, "-m", "aot", "record", "--package", "klib", "--out", "m.yaml", "--",
                          sys.executable, "run.py"], cwd=project, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (project / "ready").exists():
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.05)
        os.killpg(p.pid, signal.SIGINT)  # to the group, as Ctrl-C (or CI cancelling the job) does
        stdout, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert (project / "cleaned").exists(), stdout + stderr
    assert p.returncode == 130 and "interrupted (SIGINT, which the command got too)" in stdout, stdout + stderr
    assert not (project / "m.yaml").exists()


#: A stand-in CuPy that compiles as CuPy does on a GPU: a ``RawModule`` is constructed (aot.record.hook's NVRTC
#: watch sees it), then ``get_function`` compiles it through ``cupy.cuda.compiler._compile_module_with_cache``
#: (aot.record.hook_cupy sees it); on a host without a GPU real CuPy stops before that call (it asks the device).
CUPY_COMPILING = {
    **KERNELS,
    "cupy/__init__.py": '''
        class RawModule:
            def __init__(self, code=None, *, options=(), name_expressions=None, path=None):
                self.code, self.options, self.names = code, options, name_expressions
            def get_function(self, name):
                from cupy.cuda import compiler
                return compiler._compile_module_with_cache(self.code, self.options, name_expressions=self.names)
        ''',
    "cupy/cuda/__init__.py": "",
    "cupy/cuda/compiler.py": '''
        def _compile_module_with_cache(source, options=(), arch=None, cache_dir=None, **kwargs):
            return "module"
        ''',
}


def test_a_rawmodule_cupy_compiles_is_recorded_once_as_a_cupy_kernel(tmp_path):
    """Before: both hooks recorded it, as an ``nvrtc:`` entry (at construction) and a ``cupy:`` one (at CuPy's
    compile), two builds of one kernel of which only the CuPy one is served at the library's call. One that CuPy
    never compiled in the recording keeps its NVRTC record."""
    project = write_tree(tmp_path, CUPY_COMPILING)
    r, out = run_record(project, '''
        import cupy
        from klib import src
        cupy.RawModule(code=src.LB, name_expressions=["scale_lb"]).get_function("scale_lb")
        cupy.RawModule(code=src.LB_ONE, name_expressions=["add_one"])  # constructed, never compiled
    ''')
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    doc = yaml.safe_load(out.read_text())
    assert [e["source"] for e in doc.get("nvrtc", [])] == ["klib.src:LB_ONE"], doc
    assert [e["name"] for e in doc["cupy"]] == ["scale_lb.0"], doc
    assert "void __launch_bounds__(256, 4) scale_lb" in (tmp_path / doc["cupy"][0]["source"]).read_text()
    assert doc["cupy"][0]["name_expressions"] == ["scale_lb"]
