"""The CuPy family on the driverless host: ``cupy:`` entries recorded where CuPy's compiler is handed a kernel,
built per SM through CuPy's own compiler path (NVRTC, no device), keyed by CuPy's own ``key_src`` less the
install's paths, and served at CuPy's compile call behind the version gate; a foreign or corrupt artifact is
skipped with one warning and CuPy compiles as before.

What needs a device (CuPy loading the served cubin, the example's public calls) is ``.ci/gpu/cupy_check.sh``.
Here CuPy's compile call runs as CuPy runs it, with the two device questions answered (``_get_arch`` and the
memo that asks for the device id): a served kernel reaches CuPy's ``Module.load`` without NVRTC being called."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

from aot.core.cupyspec import check_cupy, check_entry
from aot.core.errors import AotWarning, MatrixError
from aot.core.rules import spec_from_definition
from aot.core.spec import CupyKernel
from aot.core.text import SpecError

# CuPy makes its cache folder when its compiler is imported: never the user's ~/.cupy in a test run (conftest
# points CUPY_CACHE_DIR into the session's folder; this covers a run without it, and makes no folder otherwise)
if "CUPY_CACHE_DIR" not in os.environ:
    os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="cupy-cache-")

HEADER = ('#include <cupy/complex.cuh>\n#include <cupy/carray.cuh>\n#include <cupy/atomics.cuh>\n'
          '#include <cupy/math_constants.h>\n')
CODE = 'extern "C" __global__ void aot_scale(float* x, float a) { x[threadIdx.x] *= a; }\n'
TEMPLATE = 'template<typename T> __global__ void aot_twice(T* x) { x[threadIdx.x] += x[threadIdx.x]; }\n'
OPTIONS = ["-I{cupy_include}/cupy/_cccl/cub", "-I{cupy_include}/cupy/_cccl/thrust",
           "-I{cupy_include}/cupy/_cccl/libcudacxx", "--std=c++17", "-I{cupy_include}", "-I{cuda_include}"]


# ------------------------------------------------------------------------------------- the one validator
@pytest.mark.parametrize("entry, field, fragment", [
    ({"source": "a.cu", "cupy": "14.2.0", "optoins": []}, "optoins", "did you mean 'options'"),
    ({"source": "a.cu"}, "cupy", "CuPy release"),
    ({"source": "a.cu", "cupy": "14.2.0", "options": ["-I{cupy_inc}"]}, "options", "unknown placeholder"),
    ({"source": "a.cu", "cupy": "14.2.0", "options": ["-rdc=true"]}, "options", "relocatable"),
    ({"source": "a.cu", "cupy": "14.2.0", "options": ["-arch=sm_90"]}, "options", "--sm"),
    ({"source": "a.cu", "cupy": "14.2.0", "name_expressions": []}, "name_expressions", "null or list"),
    ({"source": "a.cu", "cupy": "14.2.0", "jitify": "yes"}, "jitify", "true or false"),
    ({"cupy": "14.2.0"}, "source", "name the file"),
])
def test_the_validator_refuses_an_entry_naming_the_field(entry, field, fragment):
    with pytest.raises(SpecError) as e:
        check_entry(entry)
    assert e.value.field == field and fragment in str(e.value)


def test_a_definition_round_trips_through_the_one_validator_and_its_key_follows_what_cupy_freezes():
    spec = CupyKernel(name="k", what="a kernel", source_sha256="a" * 64, options=tuple(OPTIONS),
                      name_expressions=None, jitify=False, cupy="14.2.0")
    again = spec_from_definition(json.loads(json.dumps(spec.definition())))
    assert again == spec and again.content_key() == spec.content_key()
    relabelled = CupyKernel(**{**_fields(spec), "what": "another label", "name": "k2"})
    assert relabelled.content_key() == spec.content_key()   # a label builds the same bytes
    for change in ({"source_sha256": "b" * 64}, {"options": (*OPTIONS, "-DX=1")}, {"cupy": "14.1.0"},
                   {"jitify": True}, {"name_expressions": ("aot_twice<float>",)}):
        assert CupyKernel(**{**_fields(spec), **change}).content_key() != spec.content_key(), change
    with pytest.raises(SpecError, match="source_sha256"):
        check_cupy({**spec.definition(), "source_sha256": "x"}, "k")


def _fields(spec: CupyKernel) -> dict:
    return {k: getattr(spec, k) for k in ("name", "what", "source_sha256", "options", "name_expressions",
                                           "jitify", "cupy")}


# ------------------------------------------------------------------------------- with CuPy on this host
@pytest.fixture(scope="module")
def compiler():
    pytest.importorskip("cupy")
    from aot.runtime.adapters.cupy_attach import VERIFIED, installed_version
    if installed_version() not in VERIFIED:
        pytest.skip(f"CuPy {installed_version()} is not one aot was checked against")
    from cupy.cuda import compiler
    return compiler


def _record(compiler, code: str, **kw) -> list[dict]:
    """What the recording hook writes for ``core.compile_with_cache(code)``, CuPy's own entry for generated
    kernels (it fails on this host after the record, asking the device for its architecture)."""
    import importlib.util
    from cupy._core import core
    spec = importlib.util.spec_from_file_location(
        "_aot_record_hook_cupy_t", Path(__file__).parents[1] / "aot" / "record" / "hook_cupy.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    out: list[dict] = []

    class Quiet:
        def __enter__(self):
            return None

        def __exit__(self, *a):
            return None

    original = compiler._compile_module_with_cache
    hook.patch_compiler(compiler, out.append, lambda: ["mylib.ops:scale:3"], Quiet, lambda: False)
    try:
        try:
            core.compile_with_cache(code, **kw)
        except Exception:  # noqa: BLE001 - no device here: CuPy stops at its architecture, after the record
            pass
    finally:
        compiler._compile_module_with_cache = original
    return out


def _matrix(tmp: Path, recs: list[dict]) -> Path:
    from aot.build.cupy_build import write_recorded
    m = tmp / "build_matrix.yaml"
    assert write_recorded(recs, m) == []
    return m


def _build(matrix: Path, out: Path, sms: str = "80,90") -> None:
    from conftest import repo_env
    r = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(matrix), "--sm", sms, "--out",
                        str(out), "--jobs", "1", "-q"], cwd=matrix.parent, env=repo_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


@pytest.fixture(scope="module")
def cupy_build(compiler, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cupy")
    recs = _record(compiler, CODE) + _record(compiler, TEMPLATE, name_expressions=["aot_twice<float>"])
    m = _matrix(tmp, recs)
    out = tmp / "cupy_t_pkg" / "artifacts"
    _build(m, out)
    return tmp, m, out, recs


def test_recording_names_the_compile_cupy_is_handed(cupy_build):
    from aot.build.matrix import load_matrix
    tmp, m, out, recs = cupy_build
    assert [r["kind"] for r in recs] == ["cupy-compile", "cupy-compile"]
    assert recs[0]["source"] == HEADER + CODE and recs[0]["options"] == OPTIONS   # paths as placeholders
    assert recs[1]["name_expressions"] == ["aot_twice<float>"]
    specs = load_matrix(m).specs
    assert [s.name for s in specs] == ["aot_scale.0", "aot_twice.0"] and all(s.family == "cupy" for s in specs)
    assert specs[0].what == "aot_scale(float* x, float a) from mylib.ops:scale:3" and specs[0].cupy == recs[0]["cupy"]
    assert (m.parent / "cupy-kernels" / "aot_scale.0.cu").read_text() == HEADER + CODE


def test_the_build_on_the_driverless_host_gives_cupys_own_payload_per_sm(cupy_build):
    from aot.core import format as fmt
    from aot.core.manifest import load_manifest
    tmp, m, out, recs = cupy_build
    man = load_manifest(out)
    by = {(e["name"], e["sm"]): e for e in man.artifacts}
    assert set(by) == {(n, sm) for n in ("aot_scale.0", "aot_twice.0") for sm in (80, 90)}   # cubins only, no PTX
    keys = set()
    for (name, sm), e in by.items():
        art = fmt.read(out / e["path"])
        assert art.header["cupy_key"] == e["cupy_key"] and art.header["cupy_name"].endswith(".cubin")
        keys.add(e["cupy_key"])
        if name == "aot_scale.0":
            assert art.payload[:4] == b"\x7fELF"
        else:   # CuPy's own payload for name expressions: the mangled names ahead of the cubin
            from cupy.cuda.compiler import _cache_payload_magic, _decode_cache_payload
            assert art.payload.startswith(_cache_payload_magic)
            names, cubin = _decode_cache_payload(art.payload, 1)
            assert names[0].startswith("_Z") and cubin[:4] == b"\x7fELF"
    assert len(keys) == 4   # the SM is in CuPy's key


def test_keys_change_with_the_source_and_the_options(cupy_build):
    from aot.build.cupy_build import compile_cupy_item, parse_cupy
    tmp, m, out, recs = cupy_build
    base = {"source": "cupy-kernels/aot_scale.0.cu", "options": OPTIONS, "cupy": recs[0]["cupy"]}
    spec = parse_cupy(base, "a", m.parent)
    (m.parent / "cupy-kernels" / "edited.cu").write_text(HEADER + CODE.replace("*= a", "+= a"))
    edited = parse_cupy({**base, "source": "cupy-kernels/edited.cu"}, "b", m.parent)
    flagged = parse_cupy({**base, "options": [*OPTIONS, "-DAOT_X=1"]}, "c", m.parent)
    keys = [compile_cupy_item(s, 90)[1]["cupy_key"] for s in (spec, edited, flagged)]
    assert len(set(keys)) == 3
    from aot.core.manifest import load_manifest
    assert keys[0] == next(e["cupy_key"] for e in load_manifest(out).artifacts
                           if (e["name"], e["sm"]) == ("aot_scale.0", 90))   # the same key in-process and built


def test_the_release_that_recorded_an_entry_is_a_label_not_its_key(cupy_build):
    """The key is what this CuPy hands NVRTC: an entry labelled with another release builds to the same key."""
    from aot.build.cupy_build import compile_cupy_item, parse_cupy
    tmp, m, out, recs = cupy_build
    base = {"source": "cupy-kernels/aot_scale.0.cu", "options": OPTIONS}
    keys = {compile_cupy_item(parse_cupy({**base, "cupy": v}, "a", m.parent), 90)[1]["cupy_key"]
            for v in ("13.6.0", recs[0]["cupy"])}
    assert len(keys) == 1


@pytest.fixture
def at_the_call(compiler, monkeypatch, tmp_path):
    """CuPy's compile call as on a GPU, with an empty user cache: the device's architecture is sm_90, NVRTC calls
    are counted, and CuPy's ``Module.load`` (the first thing that needs a driver) is where the call ends."""
    from cupy.cuda._compiler_cache import DiskKernelCacheBackend
    from aot.runtime.adapters import cupy_attach
    calls: list = []
    real = compiler._compile_using_nvrtc_no_warning

    def counting(*a, **kw):
        calls.append(a[0])
        return real(*a, **kw)
    monkeypatch.setattr(compiler, "_get_arch", lambda: "90")
    monkeypatch.setattr(compiler, "_get_arch_for_options_for_nvrtc",
                        compiler._get_arch_for_options_for_nvrtc.__wrapped__)
    monkeypatch.setattr(compiler, "_compile_using_nvrtc_no_warning", counting)
    monkeypatch.setattr(compiler, "_kernel_cache_backend", DiskKernelCacheBackend(str(tmp_path / "user-cache")))
    yield calls, tmp_path / "user-cache"
    cupy_attach.detach_cupy()


def _call(code: str, **kw) -> str:
    from cupy._core import core
    try:
        core.compile_with_cache(code, **kw)
    except Exception as e:  # noqa: BLE001 - no driver: loading the module is where it stops
        return type(e).__name__
    return "loaded"


def _registry(out: Path):
    import aot
    return aot.Registry(out, owner="cupy_t_pkg")


def test_a_packaged_kernel_is_served_at_cupys_call_and_nothing_compiles(cupy_build, at_the_call):
    from aot.runtime.adapters.cupy_attach import attach_cupy
    calls, cache = at_the_call
    tmp, m, out, recs = cupy_build
    assert _call(CODE) != "loaded" and len(calls) == 1   # before attaching: CuPy compiles (then cannot load)
    calls.clear()
    for f in cache.iterdir():
        f.unlink()
    assert attach_cupy(_registry(out)) == {"aot_scale.0": "attached", "aot_twice.0": "attached"}
    assert _call(CODE + "\n") and len(calls) == 1        # another source: CuPy compiles as before
    calls.clear()
    _call(CODE)
    _call(TEMPLATE, name_expressions=["aot_twice<float>"])
    assert calls == []                                    # both served, NVRTC never called
    from aot.core import format as fmt
    from aot.core.manifest import load_manifest
    packaged = {fmt.read(out / e["path"]).payload for e in load_manifest(out).artifacts if e["sm"] == 90}
    stored = [f.read_bytes()[40:] for f in cache.iterdir() if f.suffix == ".cubin"]
    assert len(stored) == 3 and packaged <= set(stored)   # CuPy stored what it was served, as after a compile


def test_a_request_cupys_cache_answers_never_computes_aots_key(cupy_build, at_the_call, monkeypatch):
    """Issue 42: aot is consulted on CuPy's cache miss only (before: its key on every request, about 0.5 ms)."""
    from aot.runtime.adapters import cupy_attach
    calls, cache = at_the_call
    tmp, m, out, recs = cupy_build
    _call(CODE)                                       # CuPy compiles it into its cache
    cupy_attach.attach_cupy(_registry(out))
    keyed: list = []
    real = cupy_attach.key_of
    monkeypatch.setattr(cupy_attach, "key_of", lambda *a: keyed.append(1) or real(*a))
    _call(CODE)                                       # answered by CuPy's cache
    assert keyed == [] and len(calls) == 1
    _call(CODE + "// another\n")                     # a miss: aot is asked, nothing packaged, CuPy compiles
    assert keyed == [1] and len(calls) == 2


def test_other_cuda_header_text_is_not_served_and_another_nvrtc_is(cupy_build, at_the_call, tmp_path, monkeypatch):
    """Issue 41 with CuPy's real compile call: the same source and options, but CUDA headers whose cuda_fp16.hpp
    differs (as another runtime release's does): CuPy compiles. Issue 40: another NVRTC version and build (what
    CuPy's key holds, aot's does not), the same headers: served."""
    from aot.runtime.adapters.cupy_attach import attach_cupy, host_paths, substitute
    from cupy._core import core
    from cupy.cuda import compiler
    calls, cache = at_the_call
    tmp, m, out, recs = cupy_build
    paths = host_paths()
    other = tmp_path / "include"
    other.mkdir()
    for entry in os.listdir(paths["{cuda_include}"]):
        if entry != "cuda_fp16.hpp":
            (other / entry).symlink_to(os.path.join(paths["{cuda_include}"], entry))
    text = Path(paths["{cuda_include}"], "cuda_fp16.hpp").read_text()
    (other / "cuda_fp16.hpp").write_text(text + "\n// another release's text\n")
    attach_cupy(_registry(out))

    def ask(cuda_include: str) -> None:
        opts = substitute(OPTIONS, {**paths, "{cuda_include}": cuda_include})
        try:
            compiler._compile_module_with_cache(HEADER + CODE, opts, extra_source=core._get_header_source())
        except Exception:  # noqa: BLE001 - no driver: CuPy's Module.load is where it stops
            pass
    ask(str(other))
    assert len(calls) == 1                     # other header text: CuPy compiles (before: served, a wrong kernel)
    real = compiler._get_nvrtc_version
    monkeypatch.setattr(compiler, "_get_nvrtc_version", lambda: (13, 5))   # CuPy's key: another NVRTC
    ask(paths["{cuda_include}"])
    assert len(calls) == 1 and real() != (13, 5)   # served: the same input to NVRTC


def test_the_same_headers_path_with_other_text_is_another_key(cupy_build, tmp_path, monkeypatch):
    """Issue 41: CuPy's own key names the CUDA headers' folder, not its text; two installs with the same folder
    and other cuda_fp16.hpp text (another runtime release) built one key before, and the half kernel of one was
    served to the other. Built here twice through CuPy's compiler: the keys differ."""
    from aot.build import cupy_build as cb
    from aot.runtime.adapters.cupy_attach import host_paths
    from aot.runtime.adapters.cupy_key import Headers
    tmp, m, out, recs = cupy_build
    spec = cb.parse_cupy({"source": "cupy-kernels/aot_scale.0.cu", "options": OPTIONS, "cupy": recs[0]["cupy"]}, "a",
                         m.parent)
    real = host_paths()
    view = tmp_path / "include"
    view.mkdir()
    for entry in os.listdir(real["{cuda_include}"]):
        (view / entry).symlink_to(os.path.join(real["{cuda_include}"], entry))
    monkeypatch.setattr(cb, "host_paths", lambda: {**real, "{cuda_include}": str(view)})
    keys = []
    for text in (None, "// another release's text\n"):
        if text:
            fp16 = Path(real["{cuda_include}"], "cuda_fp16.hpp").read_text()
            (view / "cuda_fp16.hpp").unlink()
            (view / "cuda_fp16.hpp").write_text(fp16 + text)
        monkeypatch.setattr(cb, "_HEADERS", Headers())   # a new process: the headers read again
        keys.append(cb.compile_cupy_item(spec, 90)[1]["cupy_key"])
    assert keys[0] != keys[1]


def test_a_foreign_or_corrupt_artifact_is_skipped_with_one_warning(cupy_build, at_the_call, tmp_path):
    from aot.runtime.adapters.cupy_attach import attach_cupy
    calls = at_the_call[0]
    tmp, m, out, recs = cupy_build
    bad = tmp_path / "bad"
    shutil.copytree(out, bad)
    from aot.core.manifest import load_manifest
    entry = next(e for e in load_manifest(bad).artifacts if (e["name"], e["sm"]) == ("aot_scale.0", 90))
    p = bad / entry["path"]
    data = bytearray(p.read_bytes())
    data[-10] ^= 0xFF
    p.write_bytes(bytes(data))
    reg = _registry(bad)
    attach_cupy(reg)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            _call(CODE)
            for f in at_the_call[1].iterdir():   # a new user each time: CuPy's cache empty
                f.unlink()
    mine = [str(w.message) for w in caught if issubclass(w.category, AotWarning)]
    assert len(mine) == 1 and "skipping" in mine[0] and "CuPy compiles aot_scale.0" in mine[0], mine
    assert len(calls) >= 1   # CuPy compiled it


def test_a_cupy_release_aot_was_not_checked_against_is_left_alone_with_one_warning(cupy_build, compiler,
                                                                                   monkeypatch):
    from aot.runtime.adapters import cupy_attach
    tmp, m, out, recs = cupy_build
    monkeypatch.setattr(compiler, "_hash_hexdigest", compiler._hash_hexdigest)
    monkeypatch.setattr(sys.modules["cupy"], "__version__", "15.0.0")
    before = compiler._hash_hexdigest
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cupy_attach.attach_cupy(_registry(out))
    mine = [str(w.message) for w in caught if issubclass(w.category, AotWarning)]
    assert len(mine) == 1 and "15.0.0" in mine[0], mine
    assert compiler._hash_hexdigest is before   # CuPy left as it is
    cupy_attach.detach_cupy()


def test_from_package_imports_no_cupy_and_attaches_when_cupy_is_imported(cupy_build, tmp_path):
    """Issue 42: importing a package with CuPy kernels imports nothing of CuPy; CuPy's own import puts the wrappers
    on; without CuPy (a CPU-only user) nothing is said."""
    from conftest import repo_env
    tmp, m, out, recs = cupy_build
    (tmp / "cupy_t_pkg" / "__init__.py").write_text("")
    code = ("import sys, warnings; warnings.simplefilter('error'); import aot; "
            "aot.Registry.from_package('cupy_t_pkg'); print('cupy' in sys.modules); "
            "sys.modules['cupy'] = None if sys.argv[1] == 'none' else __import__('cupy'); "
            "c = sys.modules.get('cupy.cuda.compiler'); print(hasattr(getattr(c, '_hash_hexdigest', None), '_aot_cupy'))")
    for how, expect in (("cupy", ["False", "True"]), ("none", ["False", "False"])):
        r = subprocess.run([sys.executable, "-c", code, how], cwd=tmp, env=repo_env(), capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.split() == expect and not r.stderr, (how, r.stdout + r.stderr)


def test_a_matrix_with_a_missing_source_is_one_line_naming_the_field(tmp_path):
    m = tmp_path / "build_matrix.yaml"
    m.write_text('version: 1\ncupy:\n  - {name: k, source: cupy/nope.cu, cupy: "14.2.0"}\n')
    from aot.build.matrix import load_matrix
    with pytest.raises(MatrixError, match=r"spec 'k': field 'source': cannot read"):
        load_matrix(m)


def test_aot_record_writes_the_cupy_section_and_its_sources(compiler, tmp_path):
    from conftest import repo_env
    from aot.build.matrix import load_matrix
    (tmp_path / "mylib").mkdir()
    (tmp_path / "mylib" / "__init__.py").write_text(
        "from cupy._core import core\n\ndef scale():\n    try:\n"
        f"        core.compile_with_cache({CODE!r})\n    except Exception:\n        pass\n")
    out = tmp_path / "rec" / "build_matrix.yaml"
    r = subprocess.run([sys.executable, "-m", "aot", "record", "--out", str(out), "--package", "mylib", "--",
                        sys.executable, "-c", "import mylib; mylib.scale()"], cwd=tmp_path, env=repo_env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    specs = load_matrix(out).specs
    assert [(s.name, s.family) for s in specs] == [("aot_scale.0", "cupy")], out.read_text()
    assert "mylib:scale" in specs[0].what
    assert (out.parent / "cupy-kernels" / "aot_scale.0.cu").read_text() == HEADER + CODE


def test_another_install_path_gives_the_same_bytes_and_aot_key_but_another_cupy_name(cupy_build, tmp_path,
                                                                                     monkeypatch):
    """Why aot keys CuPy's kernels itself: CuPy's own name hashes its install's paths (so a name computed on the
    build host never matches a user's), while the bytes and aot's key do not depend on them."""
    from aot.build import cupy_build as cb
    from aot.runtime.adapters.cupy_attach import host_paths
    from aot.runtime.adapters.cupy_key import Headers
    monkeypatch.setattr(cb, "_HEADERS", Headers())
    tmp, m, out, recs = cupy_build
    spec = cb.parse_cupy({"source": "cupy-kernels/aot_scale.0.cu", "options": OPTIONS, "cupy": recs[0]["cupy"]}, "a",
                         m.parent)
    here = host_paths()
    payload, extra = cb.compile_cupy_item(spec, 90)
    there = {}
    for ph, path in here.items():   # the same files under other paths: another venv
        link = tmp_path / ph.strip("{}")
        link.symlink_to(path, target_is_directory=True)
        there[ph] = str(link)
    monkeypatch.setattr(cb, "host_paths", lambda: there)
    payload2, extra2 = cb.compile_cupy_item(spec, 90)
    assert payload2 == payload and extra2["cupy_key"] == extra["cupy_key"]
    assert extra2["cupy_name"] != extra["cupy_name"]


def test_the_example_imports_without_a_gpu_and_its_workload_calls_every_public_function(compiler):
    from conftest import ROOT, repo_env
    example = ROOT / "examples" / "cupy-mypkg"
    code = ("import cupy_mypkg, inspect; from cupy_mypkg import ops, workload; "
            "src = inspect.getsource(workload.calls); "
            "print(all(f'ops.{n}(' in src for n in ops.PUBLIC), hasattr(cupy_mypkg, 'registry'))")
    r = subprocess.run([sys.executable, "-c", code], cwd=example, env=repo_env(), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["True", "False"], r.stdout + r.stderr  # no artifacts yet


def test_what_recording_cannot_name_is_listed():
    import importlib.util
    from aot.build.cupy_build import entries_from_records
    spec = importlib.util.spec_from_file_location(
        "_aot_record_hook_cupy_t2", Path(__file__).parents[1] / "aot" / "record" / "hook_cupy.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    long = "// " + "x" * hook.MAX_SOURCE + "\n" + CODE
    recs = [hook.describe(long, (), {}, ["mylib.ops:big:1"]), hook.describe(CODE, (), {"backend": "nvcc"}, []),
            hook.describe(HEADER + CODE, ("--std=c++17",), {}, ["mylib.ops:scale:3"]),
            hook.describe(HEADER + CODE, ("--std=c++17",), {}, ["mylib.ops:scale:9"])]   # the same compile again
    entries, files, unnamed = entries_from_records(recs)
    assert [e["name"] for e in entries] == ["aot_scale.0"] and list(files) == ["cupy-kernels/aot_scale.0.cu"]
    assert len(unnamed) == 2 and "aot_scale" in unnamed[0] and "mylib.ops:big:1" in unnamed[0]
    assert "'nvcc'" in unnamed[1]
