"""A library's own compile call finds its packaged kernels (issue 28), on the CPU: the keys the build records,
the lookup by source under every spelling of the same flags, cuda.core's ``Program.compile(cache=...)``
served from the package with nothing compiled, a miss kept for the next process, and no import of
cuda.compute or of anything a manifest names. The GPU half: tests/test_gpu_bysource.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT, repo_env

EXAMPLE = ROOT / "examples" / "adopt-mypkg"


@pytest.fixture(scope="module")
def adopt_build(tmp_path_factory):
    """examples/adopt-mypkg's matrix built for sm_90 (cubins + PTX), in this process."""
    from aot.build.builder import build
    from aot.build.isolated import expose_build_env_toolkit
    from aot.build.matrix import load_matrix
    expose_build_env_toolkit()
    sys.path.insert(0, str(EXAMPLE))
    try:
        specs = load_matrix(EXAMPLE / "build_matrix.yaml").specs
    finally:
        sys.path.remove(str(EXAMPLE))
    out = tmp_path_factory.mktemp("adopt") / "out"
    build(specs, [90], out, jobs=1)
    return out


def _kernels():
    sys.path.insert(0, str(EXAMPLE))
    try:
        from adopt_mypkg import kernels
    finally:
        sys.path.remove(str(EXAMPLE))
    return kernels


@pytest.mark.parametrize("spelling", [
    ["-std=c++17", "-DBLOCK=256"],
    ["--std=c++17", "--define-macro=BLOCK=256"],
    ["--std", "c++17", "-D", "BLOCK=256", "-arch=sm_90"],
    [b"-std=c++17", b"-DBLOCK=256", b"--gpu-architecture=compute_90", b"-I/anywhere/include"],
    {"std": "c++17", "define_macro": {"BLOCK": 256}},
    {"std": "c++17", "define_macro": [("BLOCK", "256")], "arch": "sm_80"},
])
def test_another_spelling_of_the_same_flags_hits(adopt_build, spelling):
    import aot
    lookup = aot.by_source("unused", registry=aot.Registry(adopt_build))
    k = _kernels()
    assert lookup.unit(k.SAXPY, spelling) == "saxpy"
    assert lookup.unit(k.scale_source("float64"), spelling) == "scale_f64"


def test_other_flags_or_text_miss_and_unknown_flags_are_an_error(adopt_build):
    import aot
    lookup = aot.by_source("unused", registry=aot.Registry(adopt_build))
    k = _kernels()
    assert lookup.unit(k.SAXPY, ["-std=c++14", "-DBLOCK=256"]) is None
    assert lookup.unit(k.SAXPY, ["-std=c++17", "-DBLOCK=128"]) is None
    assert lookup.unit(k.SAXPY + " ", k.OPTIONS) is None
    with pytest.raises(aot.AotError, match="unknown NVRTC flag '--no-such-flag'"):
        lookup.unit(k.SAXPY, ["--no-such-flag"])


def test_recorded_key_is_cuda_cores_key_now(adopt_build):
    """The build's ``progkey`` equals cuda.core's ``make_program_cache_key`` for the library's compile, computed
    here (arch passed explicitly: no GPU), and every NVRTC entry has a source key."""
    from cuda.core import ProgramOptions
    from cuda.core.utils import make_program_cache_key
    from aot.core.manifest import load_manifest
    from aot.runtime.adapters.progkey import nvrtc_version
    m = load_manifest(adopt_build)
    k = _kernels()
    texts = {"saxpy": k.SAXPY, "block_sum": k.BLOCK_SUM, "scale_f32": k.scale_source("float32"),
             "scale_f64": k.scale_source("float64")}
    assert {e["name"] for e in m.artifacts} == set(texts)
    for e in m.artifacts:
        assert len(e["source_key"]) == 64 and e["progkey_nvrtc"] == nvrtc_version()
        arch = f"sm_{e['sm']}" if e["payload_kind"] == "cubin" else f"compute_{e['sm']}"
        opts = ProgramOptions(arch=arch, std="c++17", define_macro="BLOCK=256")  # as the library writes them
        want = make_program_cache_key(code=texts[e["name"]], code_type="c++", options=opts,
                                      target_type=e["payload_kind"])
        assert e["progkey"] == want.hex(), e["path"]


def _counting_compiles():
    import cuda.core._program as prog
    calls = []
    real = prog._program_compile_uncached

    def counted(*a, **kw):
        calls.append(1)
        return real(*a, **kw)
    prog._program_compile_uncached = counted
    return calls, lambda: setattr(prog, "_program_compile_uncached", real)


def test_program_compile_with_the_cache_hits_packaged(adopt_build):
    """``Program(src, "c++", opts).compile("cubin", cache=...)``: the packaged bytes, nothing compiled."""
    import aot
    from cuda.core import Program, ProgramOptions
    from aot.core.manifest import load_manifest
    from aot.core import format as fmt
    k = _kernels()
    cache = aot.program_cache("unused", registry=aot.Registry(adopt_build))
    calls, undo = _counting_compiles()
    try:
        code = Program(k.SAXPY, "c++", ProgramOptions(arch="sm_90", std="c++17", define_macro="BLOCK=256")
                       ).compile("cubin", cache=cache)
    finally:
        undo()
    assert calls == [] and cache.counts == {"packaged": 1, "user": 0, "miss": 0}
    m = load_manifest(adopt_build)
    entry = next(e for e in m.artifacts if e["name"] == "saxpy" and e["payload_kind"] == "cubin")
    assert bytes(code.code) == fmt.decode(m.path_of(entry).read_bytes()).payload
    with pytest.raises(TypeError, match="read-only"):
        del cache[bytes.fromhex(entry["progkey"])]


def test_another_nvrtc_version_derives_the_keys_again(adopt_build, tmp_path):
    """A manifest keyed by another NVRTC (the user's is newer): the keys are derived with cuda.core's function
    at first use and the packaged image still hits; ``same_nvrtc=True`` keeps to the recorded keys."""
    import shutil
    import aot
    from cuda.core import Program, ProgramOptions
    out = tmp_path / "out"
    shutil.copytree(adopt_build, out)
    doc = json.loads((out / "manifest.json").read_text())
    for e in doc["artifacts"]:
        e["progkey_nvrtc"] = "12.9"
    from aot.core.manifest import write_manifest  # aot's writer: the first-hit index says 12.9 too
    base = ("format", "manifest_version", "producer", "specs", "artifacts")
    write_manifest(out, producer=doc["producer"], specs=doc["specs"], artifacts=doc["artifacts"],
                   extra={k: v for k, v in doc.items() if k not in base})
    k = _kernels()
    opts = ProgramOptions(arch="sm_90", std="c++17", define_macro="BLOCK=256")
    derived = aot.program_cache("unused", registry=aot.Registry(out))
    strict = aot.program_cache("unused", registry=aot.Registry(out), same_nvrtc=True)
    calls, undo = _counting_compiles()
    try:
        Program(k.SAXPY, "c++", opts).compile("cubin", cache=derived)
        assert calls == [] and derived.counts["packaged"] == 1
        Program(k.SAXPY, "c++", opts).compile("cubin", cache=strict)
        assert len(calls) == 1 and strict.counts["packaged"] == 0
    finally:
        undo()


MISS = textwrap.dedent("""
    import json, sys
    from aot.build.isolated import expose_build_env_toolkit
    expose_build_env_toolkit()
    import aot, cuda.core._program as prog
    from cuda.core import Program, ProgramOptions
    calls = []
    real = prog._program_compile_uncached
    prog._program_compile_uncached = lambda *a, **k: (calls.append(1), real(*a, **k))[1]
    cache = aot.program_cache("unused", registry=aot.Registry(sys.argv[1]))
    src = 'extern "C" __global__ void twice(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2; }'
    Program(src, "c++", ProgramOptions(arch="sm_90", std="c++17")).compile("cubin", cache=cache)
    print(json.dumps({"compiles": len(calls), "counts": cache.counts, "cuda.compute": "cuda.compute" in sys.modules}))
""")


def test_a_miss_compiles_once_and_the_next_process_reads_the_user_cache(adopt_build, tmp_path):
    env = repo_env(AOT_CACHE_DIR=str(tmp_path / "cache"))
    runs = [json.loads(subprocess.run([sys.executable, "-c", MISS, str(adopt_build)], env=env, check=True,
                                      capture_output=True, text=True, timeout=120).stdout) for _ in range(2)]
    assert runs[0]["compiles"] == 1 and runs[0]["counts"]["miss"] == 1
    assert runs[1]["compiles"] == 0 and runs[1]["counts"] == {"packaged": 0, "user": 1, "miss": 0}
    assert not any(r["cuda.compute"] for r in runs)


NO_IMPORTS = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[2])   # a package named like the manifest's sources, which must stay unimported
    import aot
    after_import = sorted(m for m in ("cuda.compute", "cuda.core", "aot.runtime.adapters.bysource") if m in sys.modules)
    lookup = aot.by_source("unused", registry=aot.Registry(sys.argv[1]))
    src = open(sys.argv[3]).read()
    unit = lookup.unit(src, ["-std=c++17", "-DBLOCK=256"])
    print(json.dumps({"unit": unit, "after_import": after_import,
                      "imported": sorted(m for m in sys.modules if m.startswith(("cuda.compute", "adopt_mypkg")))}))
""")


def test_import_aot_and_a_lookup_import_neither_cuda_compute_nor_what_a_manifest_names(adopt_build, tmp_path):
    trap = tmp_path / "trap" / "adopt_mypkg"
    trap.mkdir(parents=True)
    (trap / "__init__.py").write_text("raise SystemExit('adopt_mypkg was imported')\n")
    (trap / "kernels.py").write_text("raise SystemExit('adopt_mypkg.kernels was imported')\n")
    src = tmp_path / "saxpy.cu"
    src.write_text(_kernels().SAXPY)
    r = subprocess.run([sys.executable, "-c", NO_IMPORTS, str(adopt_build), str(trap.parent), str(src)],
                       env=repo_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got == {"unit": "saxpy", "after_import": [], "imported": []}
