"""aot's key of a CuPy compile is its content (issues 40, 41): the source, the options, the architecture and the
text of every header the source can reach through the compile's own ``-I`` folders, never a version string.
Another NVRTC or CuPy release handing NVRTC the same input: the same key (served); one reachable header
changed, a file shadowing another, a missing header appearing: another key (CuPy compiles). No CuPy needed:
CuPy's ``key_src`` is written here as ``_compile_with_cache_cuda`` writes it."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from aot.runtime.adapters.cupy_key import Headers, content_key, include_dirs, split_key_src

SOURCE = '#include <cupy/carray.cuh>\nextern "C" __global__ void k(float* x) { x[0] = __half2float(h); }\n'
HEADER_SOURCE = "/* CuPy's headers, for its own key */"


def _tree(root: Path, fp16: str = "#define HALF 1\n") -> tuple[Path, Path]:
    """A CuPy include folder and a CUDA include folder: carray.cuh -> cuda_fp16.h -> cuda_fp16.hpp."""
    cupy, cuda = root / "cupy_include", root / "cuda_include"
    (cupy / "cupy").mkdir(parents=True)
    cuda.mkdir(parents=True)
    (cupy / "cupy" / "carray.cuh").write_text('#include <cuda_fp16.h>\n#include "detail.h"\n'
                                              '#if _CCCL_HAS_INCLUDE(<cuda_bf16.h>)\n#endif\n')
    (cupy / "cupy" / "detail.h").write_text("// detail\n")
    (cuda / "cuda_fp16.h").write_text("#include \"cuda_fp16.hpp\"\n")
    (cuda / "cuda_fp16.hpp").write_text(fp16)
    (cuda / "nvrtc.h").write_text("// not included by anything\n")
    return cupy, cuda


def _key_src(cupy: Path, cuda: Path, nvrtc=(13, 0), banner="// Cuda compilation tools, release 13.0, V13.0.88",
             cache_key="87417f5d", source=SOURCE, extra=HEADER_SOURCE):
    """(key_src, a compiler with CuPy's memo of env -> banner) for one compile, as CuPy 14.2 writes them."""
    env = ("90", (f"-I{cupy}", "--std=c++17", f"-I{cuda}", "-ftz=true"), nvrtc, "nvrtc", "-arch=sm_90", "cubin")
    compiler = SimpleNamespace(_empty_file_preprocess_cache={env: banner}, _get_cupy_cache_key=lambda: cache_key)
    return f"{env} {banner} {source} {extra} {cache_key}".encode(), compiler


def _key(key_src: bytes, compiler, headers=None) -> str | None:
    split = split_key_src(key_src, compiler, ("None", HEADER_SOURCE))
    assert split is not None
    return content_key(*split, headers or Headers())


def test_another_nvrtc_or_cupy_release_with_the_same_input_has_the_same_key(tmp_path):
    cupy, cuda = _tree(tmp_path)
    key = _key(*_key_src(cupy, cuda))
    assert key is not None
    newer = _key_src(cupy, cuda, nvrtc=(13, 5), banner="// Cuda compilation tools, release 13.5, V13.5.37",
                     cache_key="0123abcd", extra="/* another release's header text */")
    split = split_key_src(newer[0], newer[1], ("None", "/* another release's header text */"))
    assert split is not None and content_key(*split, Headers()) == key   # served: the same input to NVRTC


def test_the_same_files_under_other_paths_have_the_same_key(tmp_path):
    key = _key(*_key_src(*_tree(tmp_path / "a")))
    assert _key(*_key_src(*_tree(tmp_path / "another" / "venv"))) == key


@pytest.mark.parametrize("change", ["reachable header edited", "header shadowed in an earlier folder",
                                    "a missing header appears", "source", "option"])
def test_a_change_in_what_nvrtc_reads_is_another_key(tmp_path, change):
    cupy, cuda = _tree(tmp_path / "a")
    key = _key(*_key_src(cupy, cuda))
    cupy2, cuda2 = _tree(tmp_path / "b")
    src = SOURCE
    if change == "reachable header edited":   # issue 41: other CUDA headers gave another half kernel
        (cuda2 / "cuda_fp16.hpp").write_text("#define HALF 2\n")
    elif change == "header shadowed in an earlier folder":
        (cupy2 / "cuda_fp16.h").write_text("// found first\n")
    elif change == "a missing header appears":     # __has_include(<cuda_bf16.h>) turns true
        (cuda2 / "cuda_bf16.h").write_text("// new\n")
    elif change == "source":
        src = SOURCE.replace("x[0]", "x[1]")
    ks, compiler = _key_src(cupy2, cuda2, source=src)
    if change == "option":
        ks = ks.replace(b"--std=c++17", b"--std=c++20")
        env = next(iter(compiler._empty_file_preprocess_cache))
        compiler._empty_file_preprocess_cache = {(env[0], tuple(o.replace("c++17", "c++20") for o in env[1]),
                                                  *env[2:]): "// Cuda compilation tools, release 13.0, V13.0.88"}
    assert _key(ks, compiler) != key


def test_a_file_nothing_includes_is_not_in_the_key(tmp_path):
    cupy, cuda = _tree(tmp_path / "a")
    key = _key(*_key_src(cupy, cuda))
    (cuda / "nvrtc.h").write_text("// NVRTC 13.5's header\n")   # another NVRTC wheel, same folder
    (cuda / "cufile.h").write_text("// another package\n")
    assert _key(*_key_src(cupy, cuda)) == key


def test_a_computed_include_keys_the_whole_tree_it_came_from(tmp_path):
    cupy, cuda = _tree(tmp_path / "a")
    (cupy / "thrust" / "system" / "cpp").mkdir(parents=True)
    (cupy / "thrust" / "config.h").write_text("#define HDR <thrust/system/cpp/x.h>\n#include HDR\n")
    (cupy / "thrust" / "system" / "cpp" / "x.h").write_text("// x\n")
    src = SOURCE + "#include <thrust/config.h>\n"
    key = _key(*_key_src(cupy, cuda, source=src))
    (cupy / "thrust" / "system" / "cpp" / "y.h").write_text("// a file no literal include names\n")
    assert _key(*_key_src(cupy, cuda, source=src), Headers()) != key


def test_what_aot_cannot_key_is_not_keyed(tmp_path):
    cupy, cuda = _tree(tmp_path)
    ks, compiler = _key_src(cupy, cuda)
    assert split_key_src(ks, compiler, ("None",)) is None                          # unknown extra_source
    assert split_key_src(ks, SimpleNamespace(_empty_file_preprocess_cache={}, _get_cupy_cache_key=lambda: "x"),
                         ("None", HEADER_SOURCE)) is None                           # no banner memo for it
    assert include_dirs(["-I", "/x"]) is None                                       # a spelling aot does not read
    assert include_dirs(["-I/a", "--include-path=/b", "-DX"]) == ("/a", "/b")


def test_headers_are_hashed_once_per_process(tmp_path, monkeypatch):
    cupy, cuda = _tree(tmp_path)
    headers = Headers()
    key = _key(*_key_src(cupy, cuda), headers)
    shutil.rmtree(cuda)   # read already: the memo answers (a process's headers do not change under it)
    assert _key(*_key_src(cupy, cuda), headers) == key
