"""Triton, the fifth family (docs/triton.md), on the driverless host: the ``triton:`` section validates (a bad
entry is one line naming the field), examples/triton-mypkg builds for two SMs through Triton's own compiler with
an explicit target (no GPU, the user's Triton cache untouched), and a launch through the kernel's own
``JITFunction.run`` (``kernel.warmup``, a stand-in driver that names the device's target and launches nothing) is
served from the packaged cubins with 0 Triton compiles; an edited kernel, an edited called function, a changed
constexpr global and a changed module attribute (which Triton's own key does not see) each compile instead.

Launching the served cubins on a GPU is ``.ci/gpu/triton_check.sh``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, repo_env

triton = pytest.importorskip("triton")

EXAMPLE = ROOT / "examples" / "triton-mypkg"
SPECS = ["add.0", "add.1", "add.2", "add.3", "scale_shift", "softmax", "sum_rows", "scale_tuned.0", "scale_tuned.1"]

#: A launch of every packaged specialisation through Triton's own launch path, on a stand-in driver (the target of
#: an SM 90 device; nothing is launched: ``warmup`` stops after the compile or the cache's answer). Prints what
#: Triton compiled (a cache miss) and under which key, and what it found in its cache.
LAUNCH = r'''
import json, sys, warnings
warnings.simplefilter("always")
import triton, triton.language as tl
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver
from triton.runtime.cache import _base32

class StandInDriver:
    def get_current_device(self): return 0
    def get_current_stream(self, device): return 0
    def get_current_target(self): return GPUTarget("cuda", 90, 32)
driver.set_active(StandInDriver())

class Tensor:  # what Triton's specialisation reads of a torch tensor
    def __init__(self, dtype): self.dtype = dtype
    def data_ptr(self): return 1 << 20

seen = []
knobs.compilation.listener = lambda src, metadata, metadata_group, times, cache_hit: seen.append(
    (src.fn.__name__, _base32(metadata["hash"]), cache_hit))
import triton_mypkg
from triton_mypkg import cfg, kernels as k
if "assign" in sys.argv:
    cfg.OFFSET = tl.constexpr(0.75)  # after the attach, before the first launch
f32, f16 = tl.float32, tl.float16
k.add.warmup(Tensor(f32), Tensor(f32), Tensor(f32), 1 << 20, BLOCK=1024, grid=(1,))
k.add.warmup(Tensor(f32), Tensor(f32), Tensor(f32), 1000, BLOCK=1024, grid=(1,))
k.add.warmup(Tensor(f32), Tensor(f32), Tensor(f32), 1 << 20, BLOCK=256, grid=(1,))
k.add.warmup(Tensor(f16), Tensor(f16), Tensor(f16), 1 << 20, BLOCK=1024, grid=(1,))
k.scale_shift.warmup(Tensor(f32), Tensor(f32), 1 << 20, BLOCK=1024, grid=(1,))
k.softmax_rows.warmup(Tensor(f32), Tensor(f32), 1024, 1024, BLOCK=1024, num_warps=4, grid=(1,))
k.sum_rows.warmup(Tensor(f32), Tensor(f32), 1024, 1024, BLOCK=1024, num_warps=8, grid=(1,))
k.scale_tuned.warmup(Tensor(f32), Tensor(f32), 1 << 20, grid=(1,))  # the autotuner compiles each of its configs
if "unpackaged" in sys.argv:
    k.add.warmup(Tensor(f32), Tensor(f32), Tensor(f32), 1 << 20, BLOCK=512, grid=(1,))
print(json.dumps(seen))
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """examples/triton-mypkg built for SM 80 and 90 (``aot build``, one job), with the user's Triton cache folder
    named and absent: the build must not create it."""
    out = tmp_path_factory.mktemp("triton-build") / "out"
    cache = out.parent / "user-triton-cache"
    r = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(EXAMPLE / "build_matrix.yaml"),
                        "--sm", "80,90", "--jobs", "1", "--out", str(out)], capture_output=True, text=True,
                       env=repo_env(TRITON_CACHE_DIR=str(cache)), timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert not cache.exists()
    return out


def _site(tmp_path: Path, built: Path, edit=None) -> Path:
    """The example installed as a user gets it (its package and the built set as its artifacts), ``edit``
    applied to its sources after the build."""
    site = tmp_path / "site"
    shutil.copytree(EXAMPLE / "triton_mypkg", site / "triton_mypkg", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(built, site / "triton_mypkg" / "artifacts")
    if edit:
        path, old, new = edit
        f = site / "triton_mypkg" / path
        assert old in f.read_text()
        f.write_text(f.read_text().replace(old, new))
    return site


def _launch(site: Path, *args: str) -> tuple[list, str]:
    r = subprocess.run([sys.executable, "-c", LAUNCH, *args], capture_output=True, text=True, timeout=300,
                       env=repo_env(PYTHONPATH=f"{site}{os.pathsep}{ROOT}",
                                    TRITON_CACHE_DIR=str(site.parent / "triton-cache")))
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def _keys(built: Path, sm: int = 90) -> dict[str, str]:
    m = json.loads((built / "manifest.json").read_text())
    return {a["name"]: a["triton_key"] for a in m["artifacts"] if a["sm"] == sm}


def test_the_example_matrix_validates_with_triton_s_own_specialisation():
    from aot.build.matrix import load_matrix
    specs = load_matrix(EXAMPLE / "build_matrix.yaml").specs
    assert [s.name for s in specs] == SPECS and {s.family for s in specs} == {"triton"}
    by = {s.name: s for s in specs}
    assert by["add.1"].divisible_by_16 == ("x_ptr", "y_ptr", "out_ptr")  # the default: every pointer
    assert by["add.0"].divisible_by_16 == ("x_ptr", "y_ptr", "out_ptr", "n")
    assert dict(by["add.2"].constexprs) == {"BLOCK": 256} and by["sum_rows"].options["num_warps"] == 8
    assert by["add.3"].signature[0] == ("x_ptr", "*fp16") and by["add.0"].options["num_stages"] == 3
    assert len({s.digest for s in specs}) == 5 and {s.triton for s in specs} == {triton.__version__}
    tuned = [(dict(by[f"scale_tuned.{i}"].constexprs), by[f"scale_tuned.{i}"].options["num_warps"]) for i in (0, 1)]
    assert tuned == [({"BLOCK": 256}, 2), ({"BLOCK": 1024}, 4)]  # @triton.autotune: one spec per config
    assert len({s.content_key() for s in specs}) == len(specs)


@pytest.mark.parametrize("entry, field, words", [
    ('signature: {x_ptr: "*fp33", y_ptr: "*fp32", out_ptr: "*fp32", n: i32}', "signature.x_ptr", "not a Triton argument type"),
    ('signature: {x_ptr: "*fp32", y_ptr: "*fp32", out_ptr: "*fp32"}', "signature", "gives no type for n"),
    ('signature: {x_ptr: "*fp32", y_ptr: "*fp32", out_ptr: "*fp32", n: i32}\n    constexprs: {BLOK: 4}', "constexprs", "'BLOK' is not a parameter"),
    ('signature: {x_ptr: "*fp32", y_ptr: "*fp32", out_ptr: "*fp32", n: i32}', "constexprs", "no value for the tl.constexpr 'BLOCK'"),
    ('signature: {x_ptr: "*fp32", y_ptr: "*fp32", out_ptr: "*fp32", n: i32}\n    constexprs: {BLOCK: 64}\n    options: {num_warps: 3}', "options.num_warps", "power of 2"),
    ('signature: {x_ptr: "*fp32", y_ptr: "*fp32", out_ptr: "*fp32", n: i32}\n    constexprs: {BLOCK: 64}\n    options: {num_warp: 4}', "options.num_warp", "did you mean 'num_warps'"),
    ('signature: {x_ptr: "*fp32", y_ptr: "*fp32", out_ptr: "*fp32", n: i32}\n    constexprs: {BLOCK: 64}\n    divisible_by_16: [m]', "divisible_by_16", "'m' is not an argument"),
    ('signature: {x_ptr: "*fp32", y_ptr: "*fp32", out_ptr: "*fp32", n: i32}\n    specializations:\n      - {constexprs: {BLOCK: [1]}}', "specializations[0].constexprs.BLOCK", "not a constexpr value"),
    ('signatures: {}', "signatures", "did you mean 'signature'"),
])
def test_a_bad_entry_is_one_line_naming_the_field(tmp_path, entry, field, words):
    from aot.build.matrix import load_matrix
    from aot.core.errors import MatrixError
    shutil.copytree(EXAMPLE / "triton_mypkg", tmp_path / "triton_mypkg", ignore=shutil.ignore_patterns("__pycache__"))
    matrix = tmp_path / "m.yaml"
    matrix.write_text(f'version: 1\ntriton:\n  - name: bad\n    kernel: "triton_mypkg.kernels:add"\n    {entry}\n')
    with pytest.raises(MatrixError) as e:
        load_matrix(matrix)
    text = str(e.value)
    assert "\n" not in text and f"spec 'bad': field '{field}'" in text and words in text, text


def test_a_foreign_kernel_or_an_ir_override_is_refused_in_one_line(tmp_path):
    from aot.build.matrix import load_matrix
    from aot.core.errors import MatrixError
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("")
    (tmp_path / "lib" / "k.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n"
        "@triton.autotune(configs=[triton.Config({}, ir_override='k.ttgir')], key=[])\n"
        "@triton.jit\ndef tuned(x_ptr):\n    pass\n\n\ndef plain(x_ptr):\n    pass\n")
    for name, words in (("tuned", "overrides the IR"), ("plain", "not a @triton.jit kernel")):
        (tmp_path / "m.yaml").write_text(f'version: 1\ntriton:\n  - name: x\n    kernel: "lib.k:{name}"\n'
                                         f'    signature: {{x_ptr: "*fp32"}}\n')
        with pytest.raises(MatrixError) as e:
            load_matrix(tmp_path / "m.yaml")
        assert "field 'kernel'" in str(e.value) and words in str(e.value), str(e.value)


def test_the_set_carries_a_cubin_per_spec_and_sm_with_what_triton_launches_with(built):
    from aot.core import format as fmt
    m = json.loads((built / "manifest.json").read_text())
    rows = sorted((a["name"], a["sm"]) for a in m["artifacts"])
    assert rows == sorted((n, sm) for n in SPECS for sm in (80, 90))
    for a in m["artifacts"]:
        art = fmt.read(built / a["path"])
        assert art.payload[:4] == b"\x7fELF" and art.kind == "cubin" and art.header["family"] == "triton"
        meta = art.header["triton_metadata"]
        assert meta["target"]["arch"] == a["sm"] and meta["name"] == art.header["triton_name"] == a["triton_name"]
        assert art.header["triton_key"] == a["triton_key"]
        assert os.path.dirname(triton.__file__) not in json.dumps(meta)  # the build host's path: a placeholder
    warps = {a["name"]: fmt.read(built / a["path"]).header["triton_metadata"]["num_warps"] for a in m["artifacts"]}
    assert warps["sum_rows"] == 8 and warps["add.0"] == 4
    assert len({a["triton_key"] for a in m["artifacts"]}) == len(m["artifacts"])


def test_a_launch_of_every_packaged_specialisation_compiles_nothing(tmp_path, built):
    seen, err = _launch(_site(tmp_path, built), "unpackaged")
    hits = [(name, key) for name, key, hit in seen if hit]
    assert sorted(key for _, key in hits) == sorted(_keys(built).values()), err
    assert [(name, hit) for name, _, hit in seen if not hit] == [("add", False)]  # BLOCK=512: not packaged
    # no warning but Triton's own (3.9 announces its FP-fusion default once per process)
    assert [ln for ln in err.splitlines() if "Warning" in ln and "TRITON_DEFAULT_FP_FUSION" not in ln] == [], err
    # the user's Triton cache holds only what Triton compiled itself: aot's served files live in the process's own
    # folder (gone at exit), so a later process checks and serves them again
    cubins = sorted(p.name for p in (tmp_path / "triton-cache").rglob("*.cubin"))
    assert cubins == ["add.cubin"], cubins
    again, _ = _launch(tmp_path / "site")
    assert len(again) == len(SPECS) and all(hit for *_, hit in again)


def test_without_the_set_triton_compiles_every_one(tmp_path, built):
    site = _site(tmp_path, built)
    shutil.rmtree(site / "triton_mypkg" / "artifacts")
    seen, _ = _launch(site)
    assert len(seen) == len(SPECS) and not any(hit for *_, hit in seen)


@pytest.mark.parametrize("edit, kernel, triton_sees_it", [
    (("kernels.py", "tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr", "tl.load(x_ptr + offs, mask=m) - tl.load(y_ptr"),
     "add", True),                                                                    # the kernel's own source
    (("kernels.py", "return x * FACTOR", "return x * FACTOR + 1"), "scale_shift", True),  # a @triton.jit it calls
    (("kernels.py", "FACTOR = tl.constexpr(3.0)", "FACTOR = tl.constexpr(4.0)"), "scale_shift", True),  # a global
    (("cfg.py", "OFFSET = tl.constexpr(0.5)", "OFFSET = tl.constexpr(0.75)"), "scale_shift", False),  # cfg.OFFSET
    (None, "scale_shift", False),                                  # cfg.OFFSET assigned after the attach
])
def test_an_edit_after_the_build_is_compiled_never_served_stale(tmp_path, built, edit, kernel, triton_sees_it):
    seen, err = _launch(_site(tmp_path, built, edit), *(() if edit else ("assign",)))
    compiled = [(name, key) for name, key, hit in seen if not hit]
    assert {name for name, _ in compiled} == {kernel}, seen
    packaged = set(_keys(built).values())
    # Triton's own key: another one for an edit it sees; the packaged one for cfg.OFFSET, which only aot's digest
    # sees (without it that stale cubin would have been served)
    assert all((key in packaged) != triton_sees_it for _, key in compiled), (compiled, packaged)
    assert "differs from the packaged build's" in err or triton_sees_it, err


def test_the_digest_follows_what_the_kernel_reaches():
    from aot.runtime.adapters.triton_digest import kernel_digest
    import triton_mypkg.kernels as k  # noqa: F401 - examples/triton-mypkg on the path below
    assert kernel_digest(k.scale_shift) == kernel_digest(k.scale_shift)
    before = kernel_digest(k.scale_shift)
    old = k.cfg.OFFSET
    try:
        k.cfg.OFFSET = triton.language.constexpr(1.5)
        assert kernel_digest(k.scale_shift) != before
    finally:
        k.cfg.OFFSET = old
    assert kernel_digest(k.scale_shift) == before and kernel_digest(k.add) != before


def test_shards_merge_into_the_one_build_and_a_definition_holds_no_triton_build(tmp_path, built):
    from aot.core.rules import spec_from_definition
    for k in (1, 2):
        r = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(EXAMPLE / "build_matrix.yaml"),
                            "--sm", "80,90", "--jobs", "1", "--shard", f"{k}/2", "--out", str(tmp_path / f"s{k}")],
                           capture_output=True, text=True, env=repo_env(), timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "aot", "merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out",
                        str(tmp_path / "m")], capture_output=True, text=True, env=repo_env(), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    files = sorted(p.relative_to(built) for p in (built / "triton").rglob("*.aot"))
    assert len(files) == 2 * len(SPECS) and files == sorted(p.relative_to(tmp_path / "m") for p in (tmp_path / "m" / "triton").rglob("*.aot"))
    assert all((built / f).read_bytes() == (tmp_path / "m" / f).read_bytes() for f in files)
    m = json.loads((built / "manifest.json").read_text())
    assert {a["triton"] for a in m["artifacts"]} == {triton.__version__}
    for d in m["specs"].values():  # the build is each artifact's, not the spec's: sets of two builds merge
        assert "triton" not in d and "triton_build" not in d and spec_from_definition(d).family == "triton"


@pytest.mark.skipif(not os.environ.get("AOT_TRITON_OTHER"), reason="AOT_TRITON_OTHER: a folder with another Triton "
                    "release installed (pip install --no-deps --target DIR triton==3.5.1)")
def test_one_set_carries_two_triton_builds_and_each_is_served(tmp_path, built):
    """The example built under another Triton (AOT_TRITON_OTHER first on the path) and merged with the default
    build: under either Triton every packaged specialisation is served, 0 compiles."""
    other = os.environ["AOT_TRITON_OTHER"]
    env = repo_env(PYTHONPATH=f"{other}{os.pathsep}{ROOT}")
    r = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(EXAMPLE / "build_matrix.yaml"), "--sm",
                        "80,90", "--jobs", "1", "--out", str(tmp_path / "other")], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "aot", "merge", str(built), str(tmp_path / "other"), "--out",
                        str(tmp_path / "both")], capture_output=True, text=True, env=repo_env(), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((tmp_path / "both" / "manifest.json").read_text())
    assert len(m["artifacts"]) == 4 * len(SPECS) and len({a["triton"] for a in m["artifacts"]}) == 2
    site = _site(tmp_path, tmp_path / "both")
    for first in ("", other):
        shutil.rmtree(tmp_path / "triton-cache", ignore_errors=True)
        r = subprocess.run([sys.executable, "-c", LAUNCH], capture_output=True, text=True, timeout=300,
                           env=repo_env(PYTHONPATH=os.pathsep.join(p for p in (first, str(site), str(ROOT)) if p),
                                        TRITON_CACHE_DIR=str(tmp_path / "triton-cache")))
        assert r.returncode == 0, r.stderr[-2000:]
        seen = json.loads(r.stdout.strip().splitlines()[-1])
        assert len(seen) == len(SPECS) and all(hit for *_, hit in seen), (first, seen)


def test_aot_record_writes_the_matrix_of_what_the_launches_compiled(tmp_path):
    """`aot record` around the launches (the package without artifacts: Triton compiles each) writes a triton:
    section whose specs are exactly the hand-written matrix's (the autotuned kernel once, its configs added again
    by the build)."""
    from aot.build.matrix import load_matrix
    site = tmp_path / "site"
    shutil.copytree(EXAMPLE / "triton_mypkg", site / "triton_mypkg", ignore=shutil.ignore_patterns("__pycache__"))
    out = site / "build_matrix.yaml"
    r = subprocess.run([sys.executable, "-m", "aot", "record", "--out", str(out), "--package", "triton_mypkg", "--",
                        sys.executable, "-c", LAUNCH], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                       env=repo_env(PYTHONPATH=f"{site}{os.pathsep}{ROOT}", TRITON_CACHE_DIR=str(tmp_path / "tc")))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "5 Triton entries (9 Triton compiles seen)" in r.stdout, r.stdout
    recorded = {s.content_key() for s in load_matrix(out).specs}
    assert recorded == {s.content_key() for s in load_matrix(EXAMPLE / "build_matrix.yaml").specs}


@pytest.mark.slow
def test_the_wheel_carries_the_cubins_and_installed_as_users_install_it_serves_them(tmp_path, built):
    """The example's wheel (the aot hatch hook, `pip wheel --no-build-isolation` for SM 80 and 90, from a copy: the
    hook stages under the project's build/) carries `aot build`'s cubins byte for byte; installed with
    `pip install --target`, every packaged launch is served, 0 compiles."""
    pytest.importorskip("hatchling")
    project = tmp_path / "triton-mypkg"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("build", "artifacts", "__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w",
                        str(tmp_path / "dist"), str(project)], env=repo_env(AOT_WHEEL_SM="80,90"),
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = (tmp_path / "dist").glob("triton_mypkg-*.whl")
    z = zipfile.ZipFile(whl)
    art = "triton_mypkg/artifacts/"
    man = json.loads(z.read(art + "manifest.json"))
    info = json.loads(z.read(art + "aot-package.json"))
    assert info["complete"] and info["sms"] == [80, 90] and [b["release"] for b in info["triton"]] == [
        triton.__version__]
    assert len(man["artifacts"]) == 2 * len(SPECS)
    # the same keys as `aot build` of the example in place; the bytes differ only by the kernel file's folder, which
    # Triton's line info writes into the cubin's line table (keys and code do not depend on it)
    ref = {a["path"]: (a["content_key"], a["triton_key"]) for a in json.loads(
        (built / "manifest.json").read_text())["artifacts"]}
    assert {a["path"]: (a["content_key"], a["triton_key"]) for a in man["artifacts"]} == ref
    assert all(str(project).encode() in z.read(art + a["path"]) for a in man["artifacts"])
    meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert "Requires-Dist: triton<4,>=3.2" in meta and "Requires-Dist: triton==" not in meta  # a range, no pin
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target",
                        str(site), str(whl)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    seen, err = _launch(site)
    assert len(seen) == len(SPECS) and all(hit for *_, hit in seen), (seen, err)


@pytest.fixture(autouse=True, scope="module")
def _example_on_path():
    sys.path.insert(0, str(EXAMPLE))
    yield
    sys.path.remove(str(EXAMPLE))
    for name in [m for m in sys.modules if m == "triton_mypkg" or m.startswith("triton_mypkg.")]:
        del sys.modules[name]


def test_the_gate_lists_each_spec_under_the_name_its_launch_carries(tmp_path, built):
    """``aot gate``'s listing of the installed set (:func:`aot.verify.gate_run.package_keys`): each Triton spec under
    ``module:qualname[specialisation]``, the name its compile (tests/test_triton_nojit.py) and its launch carry."""
    site = _site(tmp_path, built)
    probe = ("import json; from aot.verify.gate_run import package_keys; "
             "print(json.dumps(package_keys('triton_mypkg', [], [])))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False,
                       env=repo_env(PYTHONPATH=f"{site}{os.pathsep}{ROOT}"))
    assert r.returncode == 0, r.stderr[-3000:]
    keys = json.loads(r.stdout.strip().splitlines()[-1])
    assert sorted(keys) == sorted(SPECS) and all(v["family"] == "triton" for v in keys.values())
    assert keys["add.0"]["keys"] == ["triton_mypkg.kernels:add[x_ptr:*fp32/16, y_ptr:*fp32/16, out_ptr:*fp32/16, "
                                     "n:i32/16, BLOCK=1024; w4 s3 c1]"]
    assert keys["add.1"]["keys"] == ["triton_mypkg.kernels:add[x_ptr:*fp32/16, y_ptr:*fp32/16, out_ptr:*fp32/16, "
                                     "n:i32, BLOCK=1024; w4 s3 c1]"]
    every = [k for v in keys.values() for k in v["keys"]]
    assert len(every) == len(set(every)) == len(SPECS)  # one name per spec, no two specs alike


def test_a_launch_is_answered_by_aot_s_key_when_triton_s_differs(tmp_path, built):
    """A set built under another CPython carries other Triton keys (``libtriton`` differs) and the same aot keys
    (:mod:`aot.runtime.adapters.triton_pykey`): with every manifest entry's Triton key made another's, each
    packaged specialisation is still served (by aot's key), and the unpackaged one still compiles."""
    site = _site(tmp_path, built)
    mpath = site / "triton_mypkg" / "artifacts" / "manifest.json"
    m = json.loads(mpath.read_text())
    assert all(isinstance(a.get("triton_aot_key"), str) for a in m["artifacts"])
    for a in m["artifacts"]:
        a["triton_key"] = "X" + a["triton_key"][1:]
    mpath.write_text(json.dumps(m))
    seen, err = _launch(site, "unpackaged")
    assert sorted(key for _, key, hit in seen if hit) == sorted(_keys(built).values()), err
    assert [(name, hit) for name, _, hit in seen if not hit] == [("add", False)]


@pytest.mark.skipif(not os.environ.get("AOT_TRITON_OTHER_PYTHON"), reason="AOT_TRITON_OTHER_PYTHON: another CPython "
                    "with the same Triton release and aot's dependencies (docs/triton.md)")
def test_a_set_built_under_one_cpython_is_served_under_another(tmp_path, built):
    other = os.environ["AOT_TRITON_OTHER_PYTHON"]
    site = _site(tmp_path, built)
    r = subprocess.run([other, "-c", LAUNCH, "unpackaged"], capture_output=True, text=True, timeout=300,
                       env=repo_env(PYTHONPATH=f"{site}{os.pathsep}{ROOT}",
                                    TRITON_CACHE_DIR=str(tmp_path / "triton-cache")))
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    hits = [key for _, key, hit in seen if hit]
    assert len(hits) == len(SPECS) and not set(hits) & set(_keys(built).values()), seen  # other Triton keys
    assert [(name, hit) for name, _, hit in seen if not hit] == [("add", False)]


#: LAUNCH, printing per launch whether Triton's answer came from the run's own Triton cache folder (a compile of
#: an earlier run) rather than from aot (its process's own folder) or a compile of this one, and its cubin's sha256.
WHERE = LAUNCH.replace("seen.append(\n    (src.fn.__name__, _base32(metadata[\"hash\"]), cache_hit))",
                       "seen.append((src.fn.__name__, cache_hit, any(str(p).startswith(os.environ['TRITON_CACHE_DIR']) "
                       "for p in metadata_group.values()), [__import__('hashlib').sha256(open(p, 'rb').read())"
                       ".hexdigest() for p in metadata_group.values() if p.endswith('.cubin')]))"
                       ).replace("import json, sys", "import json, os, sys")


def test_the_gate_s_packaged_run_serves_the_mutant_not_the_jit_run_s_triton_cache(tmp_path, built):
    """Issue 43: ``aot gate`` missed a Triton mutant (.ci/gpu/gate_all.sh: add.0 built from an edited body, shipped
    under add.0's key). aot serves a Triton kernel only where the user's Triton cache has none, and the gate's runs
    shared that cache: the JIT run's compile answered the packaged run's launches, and the mutant was never
    launched. Each run has its own Triton cache now: the packaged run launches the mutant's cubin."""
    from aot.core.format import read
    from aot.verify.gate_run import env_for
    assert "metadata_group.values()" in WHERE
    site, work = _site(tmp_path, built), tmp_path / "gate"
    arts = site / "triton_mypkg" / "artifacts"
    r = subprocess.run([sys.executable, str(ROOT / ".ci" / "gpu" / "edit_mutant.py"), "--project", str(EXAMPLE),
                        "--base", str(arts), "--spec", "add.0", "--file", "triton_mypkg/kernels.py", "--edit",
                        "mask=m) + tl.load(y_ptr", "mask=m) - tl.load(y_ptr", "--out", str(tmp_path / "mutant")],
                       capture_output=True, text=True, timeout=600, env=repo_env(), cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    shutil.rmtree(arts)
    shutil.copytree(tmp_path / "mutant", arts)
    entry = next(a for a in json.loads((arts / "manifest.json").read_text())["artifacts"]
                 if a["name"] == "add.0" and a["sm"] == 90)
    import hashlib
    mutant = hashlib.sha256(read(arts / entry["path"]).payload).hexdigest()
    (work / "site").mkdir(parents=True)
    base = repo_env(PYTHONPATH=f"{site}{os.pathsep}{ROOT}", TRITON_CACHE_DIR=str(tmp_path / "user-triton-cache"))
    got = {}
    for run in ("jit", "packaged"):
        r = subprocess.run([sys.executable, "-c", WHERE], capture_output=True, text=True, timeout=300,
                           env=env_for(run, work, base))
        assert r.returncode == 0, r.stderr[-3000:]
        got[run] = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(got["jit"]) == len(SPECS) and not any(hit for _, hit, *_ in got["jit"])  # JIT: Triton compiled each
    assert mutant not in {c for *_, cubins in got["jit"] for c in cubins}
    # packaged: every launch answered from the cache (hit), none from a folder an earlier run filled: aot served it,
    # add.0 (the first launch) with the mutant's cubin
    assert len(got["packaged"]) == len(SPECS) and all(hit and not earlier for _, hit, earlier, _ in got["packaged"])
    assert got["packaged"][0][3] == [mutant], got


#: Triton's own C launchers built as a first launch builds them (``CudaUtils()``, ``CudaLauncher`` of the compiled
#: ``add``), with ``CC=false``: a module Triton would build fails; prints where each module was loaded from.
LAUNCHERS = LAUNCH.split("seen = []")[0] + r'''
import os, sys
sys.setdlopenflags(os.RTLD_LAZY | os.RTLD_GLOBAL)  # the stub libcuda.so.1 defines nothing: no call is made
import triton_mypkg
from triton_mypkg import kernels as k
from triton.backends.nvidia import driver as nv
utils = nv.CudaUtils()
kern = k.add.warmup(Tensor(tl.float32), Tensor(tl.float32), Tensor(tl.float32), 1 << 20, BLOCK=1024, grid=(1,))
launcher = nv.CudaLauncher(kern.src, kern.metadata)
print(json.dumps([utils.load_binary.__self__.__file__, launcher.launch.__self__.__file__]))
'''


def _launchers(tmp_path: Path, site: Path, **env: str) -> subprocess.CompletedProcess:
    stub = tmp_path / "stub"
    stub.mkdir(exist_ok=True)
    from aot.build.triton_launcher import _stub
    _stub(str(stub), [])
    return subprocess.run([sys.executable, "-c", LAUNCHERS], capture_output=True, text=True, timeout=300,
                          env=repo_env(PYTHONPATH=f"{site}{os.pathsep}{ROOT}", CC="false", LD_LIBRARY_PATH=str(stub),
                                       TRITON_LIBCUDA_PATH=str(stub), TRITON_CACHE_DIR=str(tmp_path / "tc"), **env))


def _ships_launchers() -> bool:
    """Whether this Triton builds its modules by ``compile_module_from_src`` in its NVIDIA driver (3.2 to 3.7)."""
    from triton.backends.nvidia import driver as nv
    return callable(nv.__dict__.get("compile_module_from_src"))


def test_triton_s_c_launchers_are_built_with_the_set_for_this_cpython(built):
    import sysconfig
    m = json.loads((built / "manifest.json").read_text())
    if not _ships_launchers():  # 3.8+: cuda_utils keyed by the user's folders (docs/triton.md): nothing shipped
        assert not any("triton_launcher_keys" in a for a in m["artifacts"])
        return
    assert {a.get("triton_launcher_abi") for a in m["artifacts"]} == {sysconfig.get_config_var("EXT_SUFFIX")}
    from aot.core.format import read
    doc = read(built / m["artifacts"][0]["path"]).header["triton_launchers"]
    assert {x["name"] for x in doc["modules"]} == {"cuda_utils", "__triton_launcher"}
    from aot.runtime.adapters.triton_launchers import decode
    for x in doc["modules"]:  # a CPython extension module that needs the driver, as Triton's own build makes it
        so = decode(x["data"], x["size"])
        assert so[:4] == b"\x7fELF" and b"libcuda.so.1" in so and f"PyInit_{x['name']}".encode() in so


def test_a_first_launch_builds_no_launcher_the_set_carries(tmp_path, built):
    if not _ships_launchers():
        pytest.skip("this Triton builds cuda_utils by compile_module_from_file (3.8+): not shipped")
    r = _launchers(tmp_path, _site(tmp_path, built))
    assert r.returncode == 0, r.stderr[-3000:]
    files = json.loads(r.stdout.strip().splitlines()[-1])
    assert [Path(f).name.split(".")[0] for f in files] == ["cuda_utils", "__triton_launcher"]
    assert all("aot-triton-" in f for f in files), files  # aot's folder: nothing built (CC=false), nothing cached
    assert not list((tmp_path / "tc").rglob("*.so"))


@pytest.mark.parametrize("change", ["abi", "include", "none"])
def test_a_launcher_is_built_by_triton_where_the_set_s_was_built_otherwise(tmp_path, built, change):
    """Another CPython ABI (the manifest says another ``EXT_SUFFIX``), other headers (``TRITON_CUDACRT_PATH``) or no
    set: Triton builds the module itself (here ``CC=false`` makes that build fail, which proves it was tried)."""
    if not _ships_launchers():
        pytest.skip("this Triton builds cuda_utils by compile_module_from_file (3.8+): not shipped")
    site = _site(tmp_path, built)
    mpath = site / "triton_mypkg" / "artifacts" / "manifest.json"
    if change == "abi":
        m = json.loads(mpath.read_text())
        for a in m["artifacts"]:
            a["triton_launcher_abi"] = ".cpython-399-x86_64-linux-gnu.so"
        mpath.write_text(json.dumps(m))
    elif change == "none":
        shutil.rmtree(site / "triton_mypkg" / "artifacts")
    r = _launchers(tmp_path, site, **({"TRITON_CUDACRT_PATH": str(tmp_path)} if change == "include" else {}))
    assert r.returncode != 0 and "CalledProcessError" in r.stderr and "'false'" in r.stderr, r.stderr[-3000:]


#: One process serves kernels and their launchers, then sees the kernel change under it: a module attribute Triton's
#: key misses (``cfg.OFFSET``) and Triton's own in-process source edit (``_unsafe_update_src``). Each kernel's
#: artifact is read and checked once per process, each launcher written once: neither may serve a changed kernel.
WITHIN = LAUNCHERS.split("import triton_mypkg")[0] + r'''
seen = []
knobs.compilation.listener = lambda src, metadata, metadata_group, times, cache_hit: seen.append(
    [src.fn.__name__, cache_hit])
import triton_mypkg
from triton_mypkg import cfg, kernels as k
from triton.backends.nvidia import driver as nv
f32 = tl.float32
add = lambda block: k.add.warmup(Tensor(f32), Tensor(f32), Tensor(f32), 1 << 20, BLOCK=block, grid=(1,))
shift = lambda: k.scale_shift.warmup(Tensor(f32), Tensor(f32), 1 << 20, BLOCK=1024, grid=(1,))
paths = [nv.CudaLauncher(c.src, c.metadata).launch.__self__.__file__ for c in (add(1024), add(256), shift())]
cache = os.environ["TRITON_CACHE_DIR"]
listed = sorted(os.listdir(cache)) if os.path.isdir(cache) else []
cfg.OFFSET = tl.constexpr(0.75)  # Triton's key misses it: the same key is asked again, aot's digest differs
k.scale_shift.device_caches.clear()
shift()
k.add._unsafe_update_src(k.add.src.replace("mask=m) + tl.load(y_ptr", "mask=m) - tl.load(y_ptr"))
k.add.device_caches.clear()
add(1024)
print(json.dumps({"seen": seen, "paths": paths, "cache": listed}))
'''


def test_a_kernel_changed_within_the_process_is_compiled_though_its_artifact_was_checked(tmp_path, built):
    if not _ships_launchers():
        pytest.skip("this Triton builds cuda_utils by compile_module_from_file (3.8+): not shipped")
    stub = tmp_path / "stub"
    stub.mkdir()
    from aot.build.triton_launcher import _stub
    _stub(str(stub), [])
    r = subprocess.run([sys.executable, "-c", WITHIN], capture_output=True, text=True, timeout=300,
                       env=repo_env(PYTHONPATH=f"{_site(tmp_path, built)}{os.pathsep}{ROOT}", CC="false",
                                    LD_LIBRARY_PATH=str(stub), TRITON_LIBCUDA_PATH=str(stub),
                                    TRITON_CACHE_DIR=str(tmp_path / "tc")))
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["seen"][:3] == [["add", True], ["add", True], ["scale_shift", True]], got  # served
    assert got["paths"][0] == got["paths"][1] and "aot-triton-" in got["paths"][0], got  # one launcher, written once
    assert got["cache"] == [], got  # nothing in the user's Triton cache, not even a folder per key
    assert got["seen"][3:] == [["scale_shift", False], ["add", False]], got  # both changes compiled by Triton
    assert "scale_shift" in r.stderr and "differs from the packaged build's" in r.stderr, r.stderr[-3000:]
