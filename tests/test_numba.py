"""The numba-cuda family on the driverless host: a ``numba:`` matrix section built per SM with real numba-cuda,
content keys that follow the kernel's source (and what it calls), and the loader's gates (numba-cuda version,
edited source) that hand a kernel back to numba-cuda's JIT with one warning."""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import logging
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("numba.cuda")

from conftest import ROOT, repo_env  # noqa: E402

import aot  # noqa: E402
from aot.build.matrix import load_matrix  # noqa: E402
from aot.core import format as fmt  # noqa: E402
from aot.core.errors import AotWarning, MatrixError  # noqa: E402
from aot.core.manifest import load_manifest  # noqa: E402
from aot.core.rules import spec_from_definition  # noqa: E402
from aot.runtime.adapters.numba_attach import kernel_digest  # noqa: E402

_COUNT = itertools.count()

KERNELS = '''\
from numba import cuda

TPB = 128


@cuda.jit(device=True)
def twice(v):
    return v + v


@cuda.jit(fastmath=True)
def axpy(out, x, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * twice(x[i]) + out[i]


@cuda.jit
def tile_sum(out, x):
    tile = cuda.shared.array(TPB, dtype=x.dtype)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i] if i < x.size else 0
    cuda.syncthreads()
    if t == 0:
        acc = tile[0]
        for j in range(1, TPB):
            acc += tile[j]
        out[cuda.blockIdx.x] = acc
'''

MATRIX = '''\
version: 1
numba:
  - name: axpy
    kernel: "PKG.kernels:axpy"
    signatures: ["void(float32[::1], float32[::1], float32)", "void(float64[::1], float64[::1], float64)"]
    options: {fastmath: true}
  - {name: tile_sum, kernel: "PKG.kernels:tile_sum", signatures: ["void(int64[::1], int64[::1])"]}
'''


def make_project(tmp_path: Path, matrix: str = MATRIX, kernels: str = KERNELS) -> tuple[Path, str]:
    """A project folder with a uniquely named package (``sys.modules`` is per process) and its matrix."""
    pkg = f"numba_t{next(_COUNT)}_{abs(hash(str(tmp_path))) % 10_000}"
    (tmp_path / pkg).mkdir(parents=True)
    (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / pkg / "kernels.py").write_text(kernels)
    (tmp_path / "build_matrix.yaml").write_text(matrix.replace("PKG", pkg))
    return tmp_path / "build_matrix.yaml", pkg


def _build(matrix: Path, out: Path, cwd: Path, sms: str = "90") -> None:
    r = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(matrix), "--sm", sms, "--out",
                        str(out), "--jobs", "1", "-q"], cwd=cwd, env=repo_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


@pytest.fixture(scope="module")
def numba_build(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("numba")
    m, pkg = make_project(tmp)
    out = tmp / pkg / "artifacts"  # where a wheel ships them: the package owns its artifacts
    _build(m, out, tmp)
    return tmp, m, pkg, out


def test_the_matrix_gives_one_spec_per_signature_with_the_decorators_options(tmp_path):
    m, pkg = make_project(tmp_path)
    specs = {s.name: s for s in load_matrix(m).specs}
    # axpy is fastmath: two builds per signature, with and without LTO (numba-cuda's decorator picks by nvJitLink)
    assert sorted(specs) == ["axpy.0", "axpy.0.nolto", "axpy.1", "axpy.1.nolto", "tile_sum"]
    a0, a1 = specs["axpy.0"], specs["axpy.1"]
    assert (a0.options["lto"], specs["axpy.0.nolto"].options["lto"], specs["tile_sum"].options["lto"]) == (True, False,
                                                                                                          None)
    assert specs["axpy.0.nolto"].content_key() != a0.content_key()
    assert a0.family == "numba" and a0.kernel == f"{pkg}.kernels:axpy" and a0.options["fastmath"] is True
    assert a0.signature == "void(float32[::1], float32[::1], float32)" and a0.digest == a1.digest
    assert a0.content_key() != a1.content_key()
    assert specs["tile_sum"].options["fastmath"] is False
    # a manifest's definition goes through the same validator and gives the same key
    assert spec_from_definition(json.loads(json.dumps(a0.definition()))).content_key() == a0.content_key()


@pytest.mark.parametrize("entry, field, fragment", [
    ('{name: k, kernel: "PKG.kernels:axpy", signatures: ["float32(float32)"]}', "signatures", "returns nothing"),
    ('{name: k, kernel: "PKG.kernels:axpy", signatures: ["void(float32[::1])"]}', "signatures", "takes 3"),
    ('{name: k, kernel: "PKG.kernels:axpy", signatures: ["void(float32[::1], float32[::1], float32)"], '
     'options: {fastmath: false}}', "options.fastmath", "decorator"),
    ('{name: k, kernel: "PKG.kernels:axpy", signatures: ["void(a, b, c)"], options: {fast_math: true}}',
     "options.fast_math", "did you mean 'fastmath'"),
    ('{name: k, kernel: "PKG.kernels:twice", signatures: ["void(float32)"]}', "kernel", "device function"),
    ('{name: k, kernel: "PKG.kernels:nope", signatures: ["void(float32)"]}', "kernel", "not a numba-cuda"),
    ('{name: k, kernel: "PKG.kernels:axpy", signature: ["void(float32)"]}', "signature", "did you mean"),
])
def test_validator_refuses_in_one_line_naming_spec_and_field(tmp_path, entry, field, fragment):
    m, pkg = make_project(tmp_path, "version: 1\nnumba:\n  - " + entry + "\n")
    with pytest.raises(MatrixError) as err:
        load_matrix(m)
    msg = str(err.value)
    assert "\n" not in msg and f"{m}:3: spec 'k': field '{field}'" in msg and fragment in msg, msg


def test_the_build_on_the_driverless_host_is_reproducible(numba_build, tmp_path):
    tmp, m, pkg, out = numba_build
    man = load_manifest(out)
    got = sorted((a["name"], a["payload_kind"], a["sm"]) for a in man.artifacts)
    assert got == [(n, k, 90) for n in ("axpy.0", "axpy.0.nolto", "axpy.1", "axpy.1.nolto", "tile_sum")
                   for k in ("cubin", "ptx")]
    art = fmt.read(out / "numba/tile_sum/sm_90.cubin.aot")
    assert art.payload[:4] == b"\x7fELF" and art.header["family"] == "numba"
    assert art.header["entry"].startswith("_ZN") and "tile_sum" in art.header["entry"]
    ptx = fmt.read(out / "numba/axpy.0/compute_90.ptx.aot").payload.decode()
    assert ".target sm_90" in ptx and art.header["entry"] not in ptx
    # same key, same bytes: another folder, the SMs in another order, the items built in another sequence
    again = tmp_path / "again"
    _build(m, again, tmp, "90")
    for a in man.artifacts:
        assert (again / a["path"]).read_bytes() == (out / a["path"]).read_bytes(), a["path"]


def _digest_after(tmp_path: Path, kernels: str, name: str = "axpy") -> str:
    m, pkg = make_project(tmp_path, kernels=kernels)
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module(f"{pkg}.kernels")
    finally:
        sys.path.remove(str(tmp_path))
    return kernel_digest(getattr(mod, name))


@pytest.mark.parametrize("edit", [
    ("a * twice(x[i])", "a * twice(x[i]) * 1"),             # the kernel's body
    ("return v + v", "return v * 2"),                        # a device function it calls
    ("TPB = 128", "TPB = 64"),                               # a constant it reads (tile_sum)
    ("@cuda.jit(fastmath=True)", "@cuda.jit(fastmath=False)"),  # its decorator
])
def test_editing_the_kernel_or_what_it_calls_changes_its_key(tmp_path, edit):
    name = "tile_sum" if "TPB" in edit[0] else "axpy"
    before = _digest_after(tmp_path / "a", KERNELS, name)
    assert _digest_after(tmp_path / "b", KERNELS, name) == before  # the same source: the same digest
    assert _digest_after(tmp_path / "c", KERNELS.replace(*edit), name) != before
    if name == "axpy":  # an unrelated edit (another kernel's constant) leaves axpy's key alone
        assert _digest_after(tmp_path / "d", KERNELS.replace("TPB = 128", "TPB = 64"), name) == before


def _registry(out: Path, pkg: str, tmp: Path):
    import aot
    if str(tmp) not in sys.path:
        sys.path.insert(0, str(tmp))
    return aot.Registry(out, owner=pkg)


def test_attach_serves_packaged_signatures_and_leaves_the_rest_to_jit(numba_build, caplog):
    from cccl_patches.numba_cuda import argtypes_of
    tmp, m, pkg, out = numba_build
    reg = _registry(out, pkg, tmp)
    got = aot.attach_numba(reg)  # here nvJitLink is installed: numba-cuda compiles axpy with lto, its twins wait
    assert {n: s for n, s in got.items() if "nolto" not in n} == {"axpy.0": "attached", "axpy.1": "attached",
                                                                   "tile_sum": "attached"}
    assert got["axpy.0.nolto"].startswith("not attached: built for lto=False"), got
    axpy = importlib.import_module(f"{pkg}.kernels").axpy
    kernel = axpy._cache.load_overload(argtypes_of("void(float32[::1], float32[::1], float32)"), None)
    assert kernel is not None and kernel.argument_types == argtypes_of("void(float32[::1], float32[::1], float32)")
    from aot.runtime.adapters.numba_attach import serve
    kind, payload, header = serve(reg, reg.spec("axpy.0"), 90)
    assert (kind, payload[:4]) == ("cubin", b"\x7fELF") and header["entry"].startswith("_ZN")
    assert serve(reg, reg.spec("axpy.0"), 100)[0] == "ptx"   # a newer GPU: the PTX
    with caplog.at_level(logging.INFO, logger="aot"):
        assert serve(reg, reg.spec("axpy.0"), 80) is None   # an older one: numba-cuda compiles
        assert axpy._cache.load_overload(argtypes_of("void(int32[::1], int32[::1], int32)"), None) is None
        axpy._cache.load_overload(argtypes_of("void(int32[::1], int32[::1], int32)"), None)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("no packaged artifact serves sm_80" in x for x in lines) == 1
    assert sum("is not packaged: numba-cuda JIT-compiles it" in x for x in lines) == 1  # once per signature


def _with_release(out: Path, dest: Path, release: str) -> Path:
    """A copy of the set whose manifest says its kernels were built by numba-cuda ``release``."""
    import shutil
    shutil.copytree(out, dest)
    doc = json.loads((dest / "manifest.json").read_text())
    for d in doc["specs"].values():
        d["numba_cuda"] = release
    (dest / "manifest.json").write_text(json.dumps(doc))
    return dest


def test_an_unchecked_numba_cuda_release_falls_back_to_jit_with_one_warning(numba_build, tmp_path):
    tmp, m, pkg, out = numba_build
    reg = _registry(_with_release(out, tmp_path / "other", "0.22.2"), pkg, tmp)
    tile_sum = importlib.import_module(f"{pkg}.kernels").tile_sum
    before = tile_sum._cache
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = aot.attach_numba(reg)
    mine = [w for w in caught if issubclass(w.category, AotWarning)]
    assert len(mine) == 1 and "numba-cuda 0.22.2" in str(mine[0].message), [str(w.message) for w in caught]
    assert "checked against (0.23.0, 0.24.0, 0.26.0-0.29.0, 0.30.0-0.30.4)" in str(mine[0].message)
    assert all("0.22.2" in why for why in got.values()) and tile_sum._cache is before


def test_kernels_built_by_another_checked_release_attach(numba_build, tmp_path):
    """A set built by numba-cuda 0.26.0 (its ranges flatten arguments alike): attached, no warning. The real
    cross-release build and load is tests/test_numba_releases.py's."""
    tmp, m, pkg, out = numba_build
    reg = _registry(_with_release(out, tmp_path / "other", "0.26.0"), pkg, tmp)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert {s for n, s in aot.attach_numba(reg).items() if "nolto" not in n} == {"attached"}
    assert not [w for w in caught if issubclass(w.category, AotWarning)]


def _with_digest_schema(out: Path, dest: Path, version: int | None) -> Path:
    """A copy of the set as another digest walk would have built it: every kernel's digest another, and the
    manifest saying digest ``version`` (``None``: a manifest from before aot recorded it)."""
    import shutil
    shutil.copytree(out, dest)
    doc = json.loads((dest / "manifest.json").read_text())
    for d in doc["specs"].values():
        d["digest"] = "ab" * 32
    if version is None:
        del doc["key_schemas"]
    else:
        doc["key_schemas"]["numba_digest"] = version
    (dest / "manifest.json").write_text(json.dumps(doc))
    return dest


def test_a_set_built_by_another_digest_schema_is_said_as_such_once(numba_build, tmp_path):
    """Before the manifest recorded the digest's version, such a set read as "its source changed since the build",
    once per kernel."""
    from aot.core.keyschemas import SCHEMAS
    tmp, m, pkg, out = numba_build
    assert json.loads((out / "manifest.json").read_text())["key_schemas"] == dict(SCHEMAS)  # the build records it
    assert load_manifest(out).key_schemas == dict(SCHEMAS)
    reg = _registry(_with_digest_schema(out, tmp_path / "v2", 2), pkg, tmp)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = aot.attach_numba(reg)
    mine = [str(w.message) for w in caught if issubclass(w.category, AotWarning)]
    said = f"built by numba kernel digest v2, this aot computes v{SCHEMAS['numba_digest']}: rebuild the set"
    assert len(mine) == 1 and said in mine[0] and "JIT-compiles" in mine[0], mine
    assert all(said in why for why in got.values()) and len(got) == 5, got
    old = _registry(_with_digest_schema(out, tmp_path / "old", None), pkg, tmp)  # no field: as before
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = aot.attach_numba(old, ["tile_sum"])
    assert "changed since the build" in got["tile_sum"], got


def test_the_release_table_is_data_and_says_what_attaches_where(monkeypatch):
    from cccl_patches import numba_cuda as nc
    releases = [r for row in nc.RELEASES for r in row.releases]
    assert len(releases) == len(set(releases)) == len(nc.VERIFIED)
    assert {"0.23.0", "0.26.0", "0.28.2", "0.30.4"} <= nc.VERIFIED and "0.25.0" not in nc.VERIFIED
    for row in nc.RELEASES:
        assert row.releases[0] == row.first and row.releases[-1] == row.last
    assert nc.internals("0.23.0").device_key == 2 and nc.internals("0.24.0").device_key == 3
    assert nc.internals("0.28.1").rebuild == ("shared_memory_carveout",)
    assert nc.attach_problem("0.30.4", "0.30.4") is None and nc.attach_problem("0.23.0", "0.30.4") is None
    assert "0.30.5 is not one" in nc.attach_problem("0.30.5", "0.30.4")  # a later patch release: not checked
    rows = {row.first: row for row in nc.RELEASES}
    monkeypatch.setattr(nc, "RELEASES", (rows["0.23.0"], nc.Internals(**{**rows["0.24.0"].__dict__,
                                                                           "args": "arrays-v2"})))
    assert "pass kernel arguments differently" in nc.attach_problem("0.23.0", "0.24.0")


def test_each_artifact_records_its_argument_abi_and_a_different_one_is_not_served(numba_build, tmp_path,
                                                                                 monkeypatch):
    from cccl_patches import numba_cuda as nc
    from aot.runtime.adapters import numba_attach
    tmp, m, pkg, out = numba_build
    art = fmt.read(out / "numba/axpy.0/sm_90.cubin.aot")
    assert art.header["abi"] == nc.abi_fingerprint(nc.argtypes_of("void(float32[::1], float32[::1], float32)"))
    assert art.header["abi"] != nc.abi_fingerprint(nc.argtypes_of("void(float32[:, ::1], float32[::1], float32)"))
    reg = _registry(out, pkg, tmp)
    spec = reg.spec("axpy.0")
    numba_attach.check_abi(spec, art.header)
    with pytest.raises(aot.AotError, match="passes the arguments of void"):
        numba_attach.check_abi(spec, {**art.header, "abi": "v1:" + "0" * 32})
    legacy = {k: v for k, v in art.header.items() if k != "abi"}  # built before aot recorded the fingerprint
    numba_attach.check_abi(spec, legacy)
    with pytest.raises(aot.AotError, match="without an argument ABI fingerprint"):
        numba_attach.check_abi(dataclasses.replace(spec, numba_cuda="0.28.2"), legacy)
    monkeypatch.setattr(nc, "abi_fingerprint", lambda argtypes: "v1:" + "1" * 32)  # as another release would
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert numba_attach.serve(reg, spec, 90) is None  # numba-cuda compiles it
    mine = [str(w.message) for w in caught if issubclass(w.category, AotWarning)]
    assert len(mine) == 1 and "otherwise than numba-cuda" in mine[0], mine


def test_an_edited_kernel_is_not_attached(numba_build, tmp_path):
    tmp, m, pkg, out = numba_build
    reg = _registry(out, pkg, tmp)
    mod = importlib.import_module(f"{pkg}.kernels")
    real = mod.tile_sum
    try:
        from numba import cuda
        exec(compile(KERNELS.replace("acc += tile[j]", "acc -= tile[j]"), str(tmp / pkg / "kernels.py"), "exec"),
             scratch := {"cuda": cuda})
        mod.tile_sum = scratch["tile_sum"]  # the module's kernel, edited after the build (linecache: the new text)
        import linecache
        linecache.cache[str(tmp / pkg / "kernels.py")] = (0, None, KERNELS.replace("acc += tile[j]", "acc -= tile[j]")
                                                          .splitlines(True), str(tmp / pkg / "kernels.py"))
        with pytest.warns(AotWarning, match="changed since the build"):
            got = aot.attach_numba(reg, ["tile_sum"])
        assert "changed since the build" in got["tile_sum"]
    finally:
        mod.tile_sum = real
        import linecache
        linecache.cache.pop(str(tmp / pkg / "kernels.py"), None)  # checkcache keeps an entry without an mtime


def test_the_example_matrix_validates():
    m = Path(__file__).resolve().parents[1] / "examples" / "numba-mypkg" / "build_matrix.yaml"
    names = [s.name for s in load_matrix(m).specs]
    assert names == ["axpy.0", "axpy.0.nolto", "axpy.1", "axpy.1.nolto", "scale_inplace", "smooth", "block_sum"]


# --------------------------------------------------------------------------- the gate, the GPU step faked
FAKE_CHECKS = '''\
import numpy as np

SEEN = []


def served(ctx):
    """What a launch would load: the code the copy's kernel asks its source for (the GPU step, faked)."""
    (kernel,) = ctx.kernel.overloads.values()
    kind, payload, header = kernel._codelibrary._aot[2]((9, 0))
    SEEN.append((ctx.spec.name, ctx.sm, ctx.kind, kind, payload, ctx.kernel))


def wrong_types(ctx):
    ctx.kernel[1024, 32](np.zeros(4, np.int32), np.zeros(4, np.int32), np.int32(1))


def never(ctx):
    pass
'''


class _FakeDevice:
    def set_current(self):
        return None


def _gate_registry(numba_build, monkeypatch):
    import cuda.core
    tmp, m, pkg, out = numba_build
    (tmp / pkg / "checks.py").write_text(FAKE_CHECKS)
    monkeypatch.setattr(cuda.core, "Device", _FakeDevice)
    if str(tmp) not in sys.path:
        sys.path.insert(0, str(tmp))
    return aot.Registry(out, owner=pkg, device_sm=90), pkg, out


def test_verify_gpu_runs_each_numba_artifact_under_its_check_through_a_copy_that_cannot_compile(numba_build,
                                                                                               monkeypatch):
    from aot.verify.gpu import verify_gpu
    reg, pkg, out = _gate_registry(numba_build, monkeypatch)
    mod = importlib.import_module(f"{pkg}.kernels")
    own = (mod.axpy._cache, dict(mod.axpy.overloads))
    checks = {"axpy.0": f"{pkg}.checks:served", "axpy.1": f"{pkg}.checks:wrong_types", "tile_sum": f"{pkg}.checks:never"}
    rows = verify_gpu(reg, checks=checks, package=pkg)
    got = {(r.spec, r.kind, r.sm): (r.status, r.detail) for r in rows}
    names = ("axpy.0", "axpy.0.nolto", "axpy.1", "axpy.1.nolto", "tile_sum")  # a fastmath twin runs its base's check
    assert sorted(got) == [(n, k, 90) for n in names for k in ("cubin", "ptx")]
    for name in ("axpy.0", "axpy.0.nolto"):
        assert got[(name, "cubin", 90)] == ("ok", "") and got[(name, "ptx", 90)] == ("ok", ""), got
    seen = importlib.import_module(f"{pkg}.checks").SEEN
    man = load_manifest(out)
    for name, sm, kind, served_kind, payload, copy in seen:  # each row ran the artifact it names
        (entry,) = [e for e in man.entries_for(name) if e["payload_kind"] == kind and e["sm"] == sm]
        assert served_kind == kind and payload == fmt.read(out / entry["path"]).payload
        assert copy is not mod.axpy and copy.py_func is mod.axpy.py_func
    assert sorted((s[0], s[2]) for s in seen) == [(n, k) for n in ("axpy.0", "axpy.0.nolto") for k in ("cubin", "ptx")]
    assert seen[0][4] != [s for s in seen if s[0] == "axpy.0.nolto" and s[2] == seen[0][2]][0][4]  # two builds
    for kind in ("cubin", "ptx"):  # another type is an error, never numba-cuda's JIT of the installed source
        for name in ("axpy.1", "axpy.1.nolto"):
            status, detail = got[(name, kind, 90)]
            assert status == "failed" and "NumbaCudaError" in detail and "packaged signature is void(float64" in detail
        status, detail = got[("tile_sum", kind, 90)]
        assert status == "failed" and "never launched tile_sum" in detail
    assert (mod.axpy._cache, dict(mod.axpy.overloads)) == own  # the library's own dispatcher is untouched


def test_verify_gpu_without_the_package_loads_numba_cubins_by_symbol_and_runs_nothing(numba_build, monkeypatch):
    import cuda.core
    from aot.verify.gpu import verify_gpu
    reg, pkg, out = _gate_registry(numba_build, monkeypatch)
    loaded = []

    class FakeObjectCode:
        @staticmethod
        def from_cubin(payload):
            return type("O", (), {"get_kernel": lambda self, sym: loaded.append((payload[:4], sym))})()
    monkeypatch.setattr(cuda.core, "ObjectCode", FakeObjectCode)
    rows = verify_gpu(reg, ["tile_sum"], checks={"tile_sum": f"{pkg}.checks:never"}, package=None)
    assert [(r.kind, r.status, r.ok) for r in rows] == [("cubin", "loaded, not executed", True),
                                                         ("ptx", "loaded, not executed", True)]
    assert "--package" in rows[0].detail and "not loaded" in rows[1].detail
    assert loaded == [(b"\x7fELF", fmt.read(out / "numba/tile_sum/sm_90.cubin.aot").header["entry"])]


def test_a_numba_mutant_passes_every_cpu_check_and_carries_the_edited_code(numba_build, tmp_path):
    tmp, m, pkg, out = numba_build
    root = Path(__file__).resolve().parents[1]
    mut = tmp_path / "mut"
    r = subprocess.run([sys.executable, str(root / ".ci/gpu/numba_mutant.py"), "--project", str(tmp), "--base",
                        str(out), "--spec", "tile_sum", "--edit", "acc += tile[j]", "acc -= tile[j]", "--out",
                        str(mut)], cwd=tmp_path, env=repo_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    base_m, mut_m = load_manifest(out), load_manifest(mut)
    assert mut_m.specs == base_m.specs  # the original definitions (digest of the unedited source)
    for e in base_m.entries_for("tile_sum"):
        a, b = fmt.read(out / e["path"]), fmt.read(mut / e["path"])
        assert a.header["content_key"] == b.header["content_key"] and a.payload != b.payload, e["path"]
    from aot.runtime.adapters.numba_attach import serve
    reg = _registry(mut, pkg, tmp)
    assert serve(reg, reg.spec("tile_sum"), 90)[1] == fmt.read(mut / "numba/tile_sum/sm_90.cubin.aot").payload
    assert aot.attach_numba(reg, ["tile_sum"]) == {"tile_sum": "attached"}  # only running it can tell


def test_package_checks_may_name_numba_kernels(numba_build, tmp_path):
    from aot.core.errors import UsageError
    from aot.package.bundle import bundle
    from aot.package.config import load_config
    tmp, m, pkg, out = numba_build
    proj = tmp_path / "proj"
    proj.mkdir()
    shutil_copy = __import__("shutil").copy
    shutil_copy(m, proj / "build_matrix.yaml")
    (proj / pkg).mkdir()
    (proj / pkg / "__init__.py").write_text("")
    (proj / pkg / "kernels.py").write_text(KERNELS)

    def config(checks: str):
        (proj / "pyproject.toml").write_text(f'[project]\nname = "p"\nversion = "1"\n[tool.aot]\npackage = "{pkg}"\n'
                                             f'sm = "90"\n[tool.aot.checks]\n{checks}\n')
        return load_config(proj)
    res = bundle(config(f'"axpy.0" = "{pkg}.checks:served"'), proj / "pkgout", prebuilt=out, require_pins=False)
    assert res.info["checks"] == {"axpy.0": f"{pkg}.checks:served"}
    with pytest.raises(UsageError, match="'nope' is not an NVRTC unit or a numba kernel of build_matrix.yaml"):
        bundle(config(f'nope = "{pkg}.checks:served"'), proj / "pkgout2", prebuilt=out, require_pins=False)


def test_from_package_attaches_numba_kernels_and_imports_no_numba_without_them(numba_build, tmp_path):
    tmp, m, pkg, out = numba_build
    if str(tmp) not in sys.path:
        sys.path.insert(0, str(tmp))
    from cccl_patches.numba_cuda import argtypes_of
    from aot.runtime.adapters import numba_lazy
    importlib.import_module(f"{pkg}.kernels")
    aot.Registry.from_package(pkg)  # numba-cuda is imported: the attach waits for its first compile (issue 42)
    assert numba_lazy.pending() == 1
    numba_lazy.attach_pending()  # what that compile does first (tests/test_numba_lazy.py compiles)
    axpy = importlib.import_module(f"{pkg}.kernels").axpy
    assert set(axpy._cache.served) == {argtypes_of("void(float32[::1], float32[::1], float32)"),
                                       argtypes_of("void(float64[::1], float64[::1], float64)")}
    # attaching one spec at a time (a warmup's tasks) keeps the others
    reg = _registry(out, pkg, tmp)
    aot.attach_numba(reg, ["axpy.0"])
    aot.attach_numba(reg, ["axpy.1"])
    assert len(axpy._cache.served) == 2
    # a package without numba kernels: one stat, numba never imported
    (tmp_path / "plain" / "artifacts").mkdir(parents=True)
    (tmp_path / "plain" / "__init__.py").write_text("")
    (tmp_path / "plain" / "artifacts" / "manifest.json").write_text((out / "manifest.json").read_text())
    r = subprocess.run([sys.executable, "-c", "import sys, aot; aot.Registry.from_package('plain'); "
                        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'llvmlite')))"],
                       cwd=tmp_path, env=repo_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_the_warmup_thread_touches_neither_numba_nor_cuda_for_numba_kernels(numba_build, monkeypatch):
    """A warmup's numba task only reports whether the caller's thread attached the kernel: attaching or loading
    from the warmup's thread hung a request_warmup of numba_mypkg on the H100 (twice)."""
    from aot.runtime.adapters import numba_attach
    tmp, m, pkg, out = numba_build
    reg = _registry(out, pkg, tmp)
    with pytest.raises(aot.AotError, match="not attached"):
        numba_attach.warm_spec(reg, "axpy.0")
    aot.attach_numba(reg, ["axpy.0"])
    monkeypatch.setattr(numba_attach, "attach_numba", lambda *a, **k: pytest.fail("attached from the warmup"))
    assert numba_attach.warm_spec(reg, "axpy.0") == 0
    with pytest.raises(aot.AotError, match="not attached"):
        numba_attach.warm_spec(reg, "axpy.1")


# --------------------------------------------------------------------------- what numba compiles in (issue 37)
#: A kernel per value numba-cuda freezes into its code: the digest must see each (H100: before the digest read
#: them, attach said "attached" after an edit of any but the plain int, and the stale cubin wrote the old value).
def _gpu_check_module():
    """.ci/gpu/numba_digest.py, the GPU check of the same kernels: its text is the one definition of them."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("_aot_numba_digest_check", ROOT / ".ci" / "gpu" / "numba_digest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_CHECK = _gpu_check_module()
VALUES_KERNELS = _CHECK.KERNELS
VALUES_FILES = {name: _CHECK.FILES[name] for name in ("cfg.py", "helpers.py")}
VALUES_KINDS = ("by_int", "by_module_attr", "by_module_func", "by_np_scalar", "by_np_array", "by_nested_tuple")
VALUES_MATRIX = "version: 1\nnumba:\n" + "".join(
    f'  - {{name: {k}, kernel: "PKG.kernels:{k}", signatures: ["void(float32[::1])"]}}\n' for k in VALUES_KINDS)


def _values_project(tmp: Path, files: dict[str, str] | None = None) -> tuple[Path, str]:
    m, pkg = make_project(tmp, VALUES_MATRIX, VALUES_KERNELS)
    for name, text in (files or VALUES_FILES).items():
        (tmp / pkg / name).write_text(text)
    return m, pkg


@pytest.fixture(scope="module")
def values_build(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("numba_values")
    m, pkg = _values_project(tmp)
    out = tmp / pkg / "artifacts"
    _build(m, out, tmp)
    return tmp, pkg, out


def _edit_helpers_dev(mod, pkg_dir: Path):
    """``helpers.dev`` as the edited module would define it (``v + 2``), linecache showing the edited text."""
    import linecache
    from numba import cuda
    path = str(pkg_dir / "helpers.py")
    text = VALUES_FILES["helpers.py"].replace("v + 1", "v + 2")
    exec(compile(text, path, "exec"), scratch := {"cuda": cuda})
    linecache.cache[path] = (0, None, text.splitlines(True), path)
    return scratch["dev"]


#: kernel -> (module, attribute, the edited value or how to make it): each edit changes what numba compiles in.
VALUE_EDITS = {
    "by_int": ("kernels", "K", lambda mod, d: 6),
    "by_module_attr": ("cfg", "TPB", lambda mod, d: 64),
    "by_module_func": ("helpers", "dev", _edit_helpers_dev),
    "by_np_scalar": ("kernels", "NSCALE", lambda mod, d: __import__("numpy").float32(3.5)),
    "by_np_array": ("kernels", "COEF", lambda mod, d: __import__("numpy").array([1.0, 7.0, 3.0], "float32")),
    "by_nested_tuple": ("kernels", "NEST", lambda mod, d: ((1, 2), (9, 4))),
}


@pytest.mark.parametrize("kernel", VALUES_KINDS)
def test_a_value_the_kernel_compiles_in_edited_after_the_build_is_not_attached(values_build, kernel):
    """Before issue 37's fix, five of these six said "attached" (only the plain int was keyed)."""
    import linecache
    tmp, pkg, out = values_build
    reg = _registry(out, pkg, tmp)
    module_name, attr, edit = VALUE_EDITS[kernel]
    mod = importlib.import_module(f"{pkg}.{module_name}")
    assert aot.attach_numba(reg, [kernel]) == {kernel: "attached"}  # unedited: the packaged cubin serves it
    real = getattr(mod, attr)
    try:
        setattr(mod, attr, edit(mod, tmp / pkg))
        with pytest.warns(AotWarning, match="changed since the build") as caught:
            got = aot.attach_numba(reg, [kernel])
        assert len([w for w in caught if issubclass(w.category, AotWarning)]) == 1
        assert "changed since the build" in got[kernel] and "\n" not in got[kernel]
    finally:
        setattr(mod, attr, real)
        linecache.cache.pop(str(tmp / pkg / "helpers.py"), None)
    assert aot.attach_numba(reg, [kernel]) == {kernel: "attached"}  # restored: the same digest again


def test_a_value_assigned_after_attach_is_seen_when_numba_would_compile(values_build):
    """numba-cuda compiles in the values it finds at the first launch of a signature, not at attach: the packaged
    cache checks them again then (values only, from the attach's memo), and hands a changed kernel to the JIT."""
    from cccl_patches.numba_cuda import argtypes_of
    tmp, pkg, out = values_build
    reg = _registry(out, pkg, tmp)
    cfg = importlib.import_module(f"{pkg}.cfg")
    kernels = importlib.import_module(f"{pkg}.kernels")
    sig = argtypes_of("void(float32[::1])")
    assert aot.attach_numba(reg, ["by_module_attr", "by_np_array"]) == {"by_module_attr": "attached",
                                                                         "by_np_array": "attached"}
    assert kernels.by_module_attr._cache.load_overload(sig, None) is not None  # unchanged: the packaged kernel
    cfg.TPB, kernels.COEF[1] = 64, 7.0
    try:
        for kernel in (kernels.by_module_attr, kernels.by_np_array):
            with pytest.warns(AotWarning, match="changed since it was attached"):
                assert kernel._cache.load_overload(sig, None) is None  # numba-cuda compiles, with 64 and 7.0
    finally:
        cfg.TPB, kernels.COEF[1] = 128, 2.0
    assert kernels.by_np_array._cache.load_overload(sig, None) is not None


def test_a_numpy_array_edited_in_place_is_another_digest(values_build):
    tmp, pkg, out = values_build
    mod = importlib.import_module(f"{pkg}.kernels")
    before = kernel_digest(mod.by_np_array)
    mod.COEF[1] = 7.0
    try:
        assert kernel_digest(mod.by_np_array) != before
    finally:
        mod.COEF[1] = 2.0
    assert kernel_digest(mod.by_np_array) == before
    from aot.runtime.adapters.numba_attach import device_functions
    assert [d.py_func.__name__ for d in device_functions(mod.by_module_func)] == ["dev"]  # rebuilt per SM


@pytest.mark.parametrize("edit", [
    ("K = 5", "K = 6"), ("NSCALE = np.float32(2.5)", "NSCALE = np.float32(3.5)"),
    ("NSCALE = np.float32(2.5)", "NSCALE = np.float64(2.5)"),
    ("[1.0, 2.0, 3.0], dtype=np.float32", "[1.0, 2.0, 3.0], dtype=np.float64"),
    ("[1.0, 2.0, 3.0]", "[[1.0, 2.0, 3.0]]"), ("((1, 2), (3, 4))", "((1, 2), (3, 5))"),
    ("((1, 2), (3, 4))", "((1, 2), (3.0, 4))"), ("TPB = 128", "TPB = 128.0"), ("v + 1", "v + 2"),
])
def test_each_compiled_in_value_is_in_the_digest(tmp_path, edit):
    """An edit of the source, whichever file it is in, changes the digest (so the content key) of the one kernel
    that reads the edited value, and only it."""
    import os
    m, pkg = _values_project(tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        names = [f"{pkg}.cfg", f"{pkg}.helpers", f"{pkg}.kernels"]
        mods = [importlib.import_module(n) for n in names]
        before = {k: kernel_digest(getattr(mods[2], k)) for k in VALUES_KINDS}
        for path in (tmp_path / pkg).glob("*.py"):
            text = path.read_text()
            if edit[0] in text:
                path.write_text(text.replace(*edit))
                os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 100))  # no stale .pyc, no stale lines
        importlib.invalidate_caches()
        mods = [importlib.reload(mod) for mod in mods]
        after = {k: kernel_digest(getattr(mods[2], k)) for k in VALUES_KINDS}
    finally:
        sys.path.remove(str(tmp_path))
    changed = sorted(k for k in before if before[k] != after[k])
    assert len(changed) == 1, changed


def test_a_value_the_digest_cannot_key_is_refused_at_build_naming_spec_and_global(tmp_path):
    kernels = VALUES_KERNELS + '''

class Box:
    pass


BOX = Box()


@cuda.jit
def by_object(out):
    out[0] = BOX.v
'''
    matrix = VALUES_MATRIX + '  - {name: boxed, kernel: "PKG.kernels:by_object", signatures: ["void(float32[::1])"]}\n'
    m, pkg = make_project(tmp_path, matrix, kernels)
    for name, text in VALUES_FILES.items():
        (tmp_path / pkg / name).write_text(text)
    with pytest.raises(MatrixError) as err:
        load_matrix(m)
    msg = str(err.value)
    assert "\n" not in msg and "spec 'boxed': field 'kernel'" in msg and "by_object/BOX" in msg, msg
    assert f"{pkg}.kernels.Box object" in msg, msg


# --------------------------------------------------------------------------- same key, same bytes (issue 36)
THREE_DEVICE_FUNCTIONS = '''\
import math

from numba import cuda, float32


@cuda.jit(device=True)
def d1(v):
    return math.sqrt(v * v + 1.0)


@cuda.jit(device=True)
def d2(v, w):
    return d1(v) * w + math.exp(-v)


@cuda.jit(device=True)
def d3(a, n):
    s = 0.0
    for j in range(n):
        s += d2(a[j], 0.5)
    return s


@cuda.jit(fastmath=True)
def k(out, x):
    buf = cuda.local.array(8, dtype=float32)
    i = cuda.grid(1)
    if i < x.size:
        for j in range(8):
            buf[j] = x[i] + j
        out[i] = d3(buf, 8) + d1(x[i])
'''
#: Builds the kernel's PTX several times in one process, other objects allocated between builds (the link order
#: followed the libraries' addresses: before the fix, 8 builds here gave two different PTX texts, every time).
_BUILD_PTX_TWICE = '''\
import hashlib, importlib, sys
from cccl_patches import numba_cuda as nc
from aot.runtime.adapters.numba_attach import device_functions
k = importlib.import_module(sys.argv[1]).k
seen, keep = set(), []
for n in range(int(sys.argv[2])):
    keep.append([object() for _ in range(7 * n)])
    ptx, _ = nc.compile_kernel(k, "void(float32[::1], float32[::1])", 90, "ptx", device_functions(k))
    seen.add(hashlib.sha256(ptx).hexdigest())
print(" ".join(sorted(seen)))
'''


def test_a_kernel_with_three_device_functions_gives_the_same_ptx_in_every_build(tmp_path):
    (tmp_path / "three_dev.py").write_text(THREE_DEVICE_FUNCTIONS)
    got = []
    for seed in ("1", "2"):
        r = subprocess.run([sys.executable, "-c", _BUILD_PTX_TWICE, "three_dev", "6"], cwd=tmp_path, timeout=300,
                           env=repo_env(PYTHONHASHSEED=seed, PYTHONPATH=f"{tmp_path}{__import__('os').pathsep}"
                                        f"{repo_env()['PYTHONPATH']}"), capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        got.append(r.stdout.split())
    assert len(got[0]) == 1 and got[0] == got[1], got


def _closure_kernel(k, dtype):
    """A kernel made by a factory: a device function and a dtype reached through closure cells."""
    from numba import cuda

    @cuda.jit(device=True)
    def add(v):
        return v + k

    @cuda.jit
    def kern(out):
        tile = cuda.local.array(2, dtype)
        tile[0] = add(out[0])
        out[0] = tile[0]
    return kern


def test_closure_cells_and_what_they_reach_are_in_the_digest():
    import numpy as np
    base = kernel_digest(_closure_kernel(1, np.float32))
    assert kernel_digest(_closure_kernel(1, np.float32)) == base  # new dispatchers, the same values
    assert kernel_digest(_closure_kernel(2, np.float32)) != base  # a cell of the device function
    assert kernel_digest(_closure_kernel(1, np.float64)) != base  # a cell of the kernel
    assert kernel_digest(_closure_kernel(np.int64(1), np.float32)) != base  # another type, the same number


def _reader(out):
    import math  # noqa: F401 - a local import: not a global the kernel reads
    out[0] = cfg_like.TPB + cuda_like.shared.array(cfg_like.TPB) + len(out) + sum(v for v in out)  # noqa: F821


def test_the_digest_reads_names_and_attribute_chains_whatever_the_python():
    """What the walk reads is the same list of names on every Python (3.11's LOAD_METHOD, 3.12's LOAD_ATTR, 3.12's
    inlined comprehensions): a digest made by a 3.11 build host equals one made by a 3.12 runtime."""
    from aot.runtime.adapters.numba_digest import _reads
    got = {(name, attrs) for kind, name, attrs in _reads(_reader.__code__) if kind == "LOAD_GLOBAL"}
    assert got == {("cfg_like", ("TPB",)), ("cuda_like", ("shared", "array")), ("len", ()), ("sum", ())}, got
