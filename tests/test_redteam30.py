"""The red team's cases of issue 30 in the runtime, verify, cache and CLI-output modules (CPU only).

Each test failed before its fix: ``verify --gpu`` of a set from elsewhere imported a module its manifest
named; ``cache clear`` kept 37 of 100 entries in 100 shard folders; ``cache info`` opened another uid's
entry; the binder let OverflowError, KeyError, struct.error and ValueError out where CallError is
promised; a C++ operator's ``cpp:`` followed a symlink out of the matrix folder; manifest text reached
the terminal with its escape sequences; ``verify --for-wheel`` named its temporary folder, not the wheel.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from aot.core.spec import CcclSpec

TWICE_CU = 'extern "C" __device__ void twice(void* a, void* r) { *(float*)r = *(float*)a * 2.0f; }\n'
EVILMOD = "import pathlib\npathlib.Path('PWNED').write_text('imported')\n\ndef twice(x):\n    return x * 2\n"
PRODUCER = {"aot": "0", "cuda_cccl": "0", "cuda_major": 13, "nvrtc": "0", "nvjitlink": "0"}


# ============================================================== 1. verify --gpu imports nothing a manifest names
def _evil_set(tmp_path: Path) -> Path:
    """A set from elsewhere: a C++ operator whose ``reference`` is ``evilmod:twice``, with an ``evilmod.py``
    in the set and in the current folder (on sys.path, as ``python -m aot`` puts it)."""
    root = tmp_path / "set"
    root.mkdir()
    d = {"name": "evil", "algorithm": "unary_transform", "dtype": "float32",
         "op": {"cpp": "ops/twice.cu", "function": "twice", "reference": "evilmod:twice"},
         "sources": {"ops/twice.cu": TWICE_CU}}
    doc = {"format": "aot-manifest", "manifest_version": 1, "producer": PRODUCER, "specs": {"evil": d},
           "artifacts": []}
    (root / "manifest.json").write_text(json.dumps(doc))
    (root / "evilmod.py").write_text(EVILMOD)
    (tmp_path / "evilmod.py").write_text(EVILMOD)
    return root


@pytest.fixture
def evil_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "evilmod", raising=False)
    yield tmp_path
    sys.modules.pop("evilmod", None)


def _fake_gpu(monkeypatch, registry, checked: list):
    """The GPU steps of ``verify_gpu`` replaced: a device, one packaged candidate that "loads", and a
    check that resolves the C++ operator's reference the way the numpy check does."""
    import aot.runtime.loader.objects
    import aot.verify.context
    import aot.verify.gpu
    from aot.verify.typed import resolve_code
    monkeypatch.setattr(aot.verify.gpu, "current_device", lambda: object())
    monkeypatch.setattr(registry, "device_sm", lambda: 90)
    monkeypatch.setattr(registry, "packaged_candidates",
                        lambda spec, sm: [SimpleNamespace(ref={"path": "x"}, sm=90, kind="cccl-blob")])
    monkeypatch.setattr(aot.runtime.loader.objects, "CcclAlgorithm", SimpleNamespace)
    monkeypatch.setattr(registry, "open_packaged", lambda *a: SimpleNamespace(obj=SimpleNamespace()))
    monkeypatch.setattr(type(registry), "manifest", SimpleNamespace(path_of=lambda e: Path("x")), raising=False)

    def check(obj, spec, device):
        checked.append(resolve_code(spec.params["op"]["reference"])(3.0))
    monkeypatch.setattr(aot.verify.context, "check_cccl", check)


def test_verify_gpu_of_a_foreign_set_imports_nothing_it_names(evil_cwd, monkeypatch):
    from aot.runtime.loader.registry import Registry
    from aot.verify.gpu import UNRUN, verify_gpu
    reg = Registry(_evil_set(evil_cwd))
    checked: list = []
    _fake_gpu(monkeypatch, reg, checked)
    rows = verify_gpu(reg)
    assert "evilmod" not in sys.modules and not (evil_cwd / "PWNED").exists() and checked == []
    assert [(r.spec, r.status, r.ok) for r in rows] == [("evil", UNRUN, True)]
    assert "'evilmod:twice'" in rows[0].detail and "--matrix" in rows[0].detail


def test_verify_gpu_with_the_users_own_matrix_runs_the_reference(evil_cwd, monkeypatch):
    """The same spec passed as the caller's own (``--matrix``): its reference is imported and run."""
    from aot.core.rules import spec_from_definition
    from aot.runtime.loader.registry import Registry
    from aot.verify.gpu import verify_gpu
    root = _evil_set(evil_cwd)
    d = json.loads((root / "manifest.json").read_text())["specs"]["evil"]
    reg = Registry(root, specs=[spec_from_definition(d)])
    checked: list = []
    _fake_gpu(monkeypatch, reg, checked)
    rows = verify_gpu(reg)
    assert [r.status for r in rows] == ["ok"], rows
    assert checked == [6.0] and (evil_cwd / "PWNED").exists()


def test_verify_gpu_with_package_imports_only_inside_it(evil_cwd, monkeypatch):
    from aot.runtime.loader.registry import Registry
    from aot.verify.gpu import UNRUN, verify_gpu
    reg = Registry(_evil_set(evil_cwd), owner="mypkg")
    _fake_gpu(monkeypatch, reg, [])
    assert [r.status for r in verify_gpu(reg)] == [UNRUN]
    assert "evilmod" not in sys.modules and not (evil_cwd / "PWNED").exists()


def test_only_code_refuses_what_nobody_vetted(evil_cwd):
    """The second line of defence: inside a check, a reference nobody vetted is refused, not imported."""
    from aot.verify.bound import only_code
    from aot.verify.compare import NoReference
    from aot.verify.typed import resolve_code
    with only_code(set()), pytest.raises(NoReference, match="not imported"):
        resolve_code("evilmod:twice")
    assert "evilmod" not in sys.modules


def test_code_references_finds_every_field():
    from aot.verify.gpu import code_references
    spec = CcclSpec(name="s", algorithm="reduce", code={"a.b:c": "0" * 64},
                    params={"op": {"cpp": "x.cu", "function": "f", "reference": "m.n:ref"},
                            "d_in": {"transform": "t.u:v", "over": {"zip": ["array", {"transform": "w:z"}]}},
                            "dtype": "float32"})
    assert code_references(spec) == {"a.b:c", "m.n:ref", "t.u:v", "w:z"}


# ============================================================== 2. cache clear clears a normal cache
OTHER = 4242
as_root = pytest.mark.skipif(sys.platform != "linux" or __import__("os").geteuid() != 0,
                             reason="planting another uid's files needs root")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    monkeypatch.setenv("AOT_CACHE_DIR", str(root))
    return root


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    from aot.cli.main import main
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


@pytest.mark.parametrize("shards, per_shard", [(100, 1), (256, 79)], ids=["100-shards", "20k-entries"])
def test_cache_clear_removes_every_entry(cache, capsys, shards, per_shard):
    """100 entries in 100 shard folders kept 37 ("nested deeper than 64 levels": the bound counted pending
    siblings); 20,000 entries kept 15,083. Now every one goes, and the folders with them."""
    import os
    n = 0
    for i in range(shards):
        shard = cache / "cccl" / f"{i:02x}"
        shard.mkdir(parents=True, mode=0o700)
        for j in range(per_shard):
            fd = os.open(shard / f"{i:02x}{j:062x}.aot", os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, b"x")
            os.close(fd)
            n += 1
    rc, out, err = _cli(capsys, "cache", "clear")
    assert rc == 0 and f"cleared: {n} files" in out, out + err
    assert not (cache / "cccl").exists() and "nested deeper" not in out + err


def test_remove_owned_bounds_depth_not_siblings(tmp_path):
    """The depth bound is depth: 70 siblings at depth 1 go, a folder 70 deep is one line and stays."""
    import os
    from aot.core.fs import DIR_FLAGS, MAX_REMOVE_DEPTH, Removal, remove_owned
    for i in range(70):
        (tmp_path / "wide" / f"d{i}").mkdir(parents=True)
    deep = tmp_path / "deep"
    p = deep
    for _ in range(MAX_REMOVE_DEPTH + 6):
        p = p / "d"
    p.mkdir(parents=True)
    fd = os.open(tmp_path, DIR_FLAGS)
    try:
        wide, nested = Removal(), Removal()
        remove_owned(fd, "wide", tmp_path / "wide", wide)
        remove_owned(fd, "deep", deep, nested)
    finally:
        os.close(fd)
    assert wide.left == [] and not (tmp_path / "wide").exists()
    assert len(nested.left) == 1 and f"nested deeper than {MAX_REMOVE_DEPTH} levels" in nested.left[0]


def test_remove_owned_stops_at_its_entry_bound(tmp_path, monkeypatch):
    import os
    import aot.core.fs
    from aot.core.fs import DIR_FLAGS, Removal, remove_owned
    monkeypatch.setattr(aot.core.fs, "MAX_REMOVE_ENTRIES", 50)
    for i in range(80):
        (tmp_path / "big" / f"{i:02}").mkdir(parents=True)
    fd = os.open(tmp_path, DIR_FLAGS)
    try:
        res = Removal()
        remove_owned(fd, "big", tmp_path / "big", res)
    finally:
        os.close(fd)
    assert len(res.left) == 1 and "more than 50 entries" in res.left[0] and str(tmp_path / "big") in res.left[0]


# ============================================================== 3. cache info never opens another uid's entry
def _artifact(name: str) -> bytes:
    from aot.core import format as fmt
    producer = {**PRODUCER, "cuda_cccl": "9.9.9"}
    import hashlib
    payload = b"payload"
    header = {"format_version": fmt.FORMAT_VERSION, "name": name, "family": "cccl", "sm": 90,
              "payload_kind": "cccl-blob", "content_key": "ab" * 32, "payload_size": len(payload),
              "payload_sha256": hashlib.sha256(payload).hexdigest(), "kernels": [], "producer": producer}
    return fmt.encode(header, payload)


@as_root
def test_cache_info_lists_but_never_reads_another_users_entry(cache, capsys):
    import os
    shard = cache / "cccl" / "ab"
    shard.mkdir(parents=True, mode=0o700)
    mine, theirs = shard / ("ab" * 32 + ".aot"), shard / ("cd" * 32 + ".aot")
    mine.write_bytes(_artifact("mine_spec"))
    theirs.write_bytes(_artifact("theirs_spec"))
    mine.chmod(0o600)
    theirs.chmod(0o600)
    os.chown(theirs, OTHER, OTHER)
    rc, out, _ = _cli(capsys, "cache", "info")
    assert rc == 0 and "mine_spec" in out and "theirs_spec" not in out, out
    assert f"{theirs}: entry is owned by uid {OTHER}" in out and "not read" in out, out


def test_cache_info_does_not_read_a_group_writable_entry(cache, capsys):
    shard = cache / "cccl" / "ab"
    shard.mkdir(parents=True, mode=0o700)
    entry = shard / ("ab" * 32 + ".aot")
    entry.write_bytes(_artifact("writable_spec"))
    entry.chmod(0o666)
    rc, out, _ = _cli(capsys, "cache", "info")
    assert rc == 0 and "writable_spec" not in out and "writable by" in out and "not read" in out, out


@pytest.fixture
def arena():
    """A world-traversable scratch folder (pytest's tmp_path is 0700: uid 4242 could not reach it)."""
    import shutil
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="aot-rt30-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@as_root
@pytest.mark.skipif(__import__("shutil").which("setpriv") is None, reason="needs setpriv")
def test_cache_clear_of_another_users_folder_names_it(arena):
    """As uid 4242, ``AOT_CACHE_DIR`` pointing at root's 0700 folder: the refusal names the folder."""
    import os
    import shutil
    import subprocess
    theirs = arena / "root-cache"
    theirs.mkdir(mode=0o700)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "AOT_CACHE_DIR": str(theirs),
           "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([shutil.which("setpriv"), f"--reuid={OTHER}", f"--regid={OTHER}", "--clear-groups",
                           sys.executable, "-m", "aot", "cache", "clear"], capture_output=True, text=True,
                          timeout=120, env=env, cwd=arena)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert str(theirs) in line and "Permission denied" in line, proc.stderr


# ============================================================== 4. the binder: only CallError
BINDER_MATRIX = '''version: 1
cccl:
  - {name: st, algorithm: unary_transform, dtype: int64, out_dtype: float32, input: counting,
     state: {k: int8, u: uint64, a: "float32[]"}, op: {cpp: ops/f.cu, function: f}}
  - {name: plain, algorithm: unary_transform, dtype: int32, input: counting, op: "lambda x: x * 2"}
'''


class Dev:
    """Just the ``__cuda_array_interface__`` the binder reads (nothing dereferences the address)."""

    def __init__(self, dtype="float32", **cai):
        import numpy as np
        self.__cuda_array_interface__ = {"shape": (16,), "typestr": np.dtype(dtype).str, "data": (0x7000, False),
                                         "version": 3, "strides": None, **cai}


@pytest.fixture
def binder_specs(tmp_path):
    from aot.build.matrix import load_matrix
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "f.cu").write_text('extern "C" __device__ void f(void* s, void* a, void* r) {}\n')
    (tmp_path / "m.yaml").write_text(BINDER_MATRIX)
    return {s.name: s for s in load_matrix(tmp_path / "m.yaml").specs}


def _state(**kw):
    import numpy as np
    return {"k": np.int8(1), "u": 2, "a": Dev(), **kw}


@pytest.mark.parametrize("state, fld, fragment", [
    (_state(k=300), "state.k", "300 does not fit a int8"),
    (_state(u=-1), "state.u", "-1 does not fit a uint64"),
    (_state(a=Dev(data=None)), "state.a", "'data' must be (address, read_only)"),
    (_state(a=SimpleNamespace(__cuda_array_interface__={"shape": (16,), "typestr": "<f4", "version": 3})),
     "state.a", "'data' must be"),
    (_state(a=Dev(data=(1 << 64, False))), "state.a", "64-bit address"),
    (_state(a=Dev(data=(-1, False))), "state.a", "64-bit address"),
    (_state(a=Dev(shape=5)), "state.a", "not a sequence"),
    (_state(a=Dev(typestr=["<f4"] * 3)), "state.a", "needs a device array of float32"),
    (_state(u=2 ** 1000), "state.u", "does not fit a uint64"),
], ids=["int8-300", "uint64-minus-1", "data-None", "no-data", "address-2**64", "address-negative", "shape-int",
        "typestr-list", "huge-int"])
def test_a_hostile_state_is_one_call_error(binder_specs, state, fld, fragment):
    from aot.core.errors import CallError
    from aot.runtime.loader.binder import Binder
    with pytest.raises(CallError) as err:
        Binder(binder_specs["st"]).check_state(state)
    msg = str(err.value)
    assert msg.startswith(f"st: {fld}: ") and fragment in msg and "\n" not in msg, msg


def test_state_of_an_array_for_a_stateless_spec_is_a_call_error(binder_specs):
    import numpy as np
    from aot.core.errors import CallError
    from aot.runtime.loader.binder import Binder
    b = Binder(binder_specs["plain"])
    with pytest.raises(CallError, match="plain: state: this spec declares no state, got a numpy.ndarray"):
        b.check_state(np.zeros(3))
    assert b.check_state(None) == {} and b.check_state({}) == {}


def test_a_counting_start_out_of_range_is_a_call_error(binder_specs, monkeypatch):
    """The counting leaf: 2**40 for an int32 counting iterator (it raised OverflowError)."""
    import aot.runtime.loader.binder
    from aot.algorithms.forms import tree
    from aot.core.errors import CallError
    from aot.runtime.loader.binder import Binder

    class Counting:
        def __init__(self, value):
            self.value = value
    fake = SimpleNamespace(CountingIterator=Counting, ConstantIterator=Counting, ShuffleIterator=Counting)
    monkeypatch.setattr(aot.runtime.loader.binder, "import_cuda_compute", lambda: fake)
    spec = binder_specs["plain"]
    node = tree(spec.params["input"], "int32", spec.types)
    b = Binder(spec)
    with pytest.raises(CallError, match=r"plain: d_in \(counting of int32\): 1099511627776 does not fit a int32"):
        b.leaf(node, iter([2 ** 40]), "d_in")
    assert b.leaf(node, iter([7]), "d_in").value == 7


def test_a_value_the_checks_pass_that_does_not_pack_is_a_call_error(binder_specs, monkeypatch):
    import aot.runtime.loader.binder
    from aot.core.errors import CallError
    from aot.runtime.loader.binder import Binder
    b = Binder(binder_specs["st"])

    def refuse(layout, values):
        import struct
        raise struct.error("argument out of range")
    monkeypatch.setattr(aot.runtime.loader.binder, "stand_in_op", refuse)
    with pytest.raises(CallError, match="st: state: cannot be packed as declared"):
        b.packed(b.fields, {})


# ============================================================== 5. one line per compile error, bounded memory
BAD_UNIT_CU = 'extern "C" __global__ void k(int* a) { oops; }\n'
BAD_OP_CU = 'extern "C" __device__ void twice(void* a, void* r) { oops; }\n'


def _programs_its_error_keeps(call) -> list:
    """Run ``call`` (it fails) and return the cuda.core Programs still alive while its error is held.

    cuda.core's ``Program.__dealloc__`` raises when the cycle collector clears the Program first
    (cuda-python#2876): ``aot build --jobs 2 --keep-going`` of two bad C++ operators and a bad NVRTC unit
    printed "Exception ignored in: 'cuda.core._program.Program.__dealloc__'" with two tracebacks. The error
    held the Program through its traceback's frames; a caller's cycle then handed it to the collector.
    An error that holds no Program cannot."""
    import gc
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the compile error under test
        held = e
    else:
        raise AssertionError("the compile was expected to fail")
    alive = [o for o in gc.get_objects() if type(o).__name__ == "Program" and type(o).__module__.startswith("cuda.core")]
    del held
    return alive


def test_a_failed_nvrtc_compile_leaves_no_program_for_the_collector():
    from aot.build.compile import compile_nvrtc_item
    from aot.core.spec import NvrtcUnit
    unit = NvrtcUnit(name="bad", source_path="bad.cu", source=BAD_UNIT_CU, kernels=("k",), options={})
    assert _programs_its_error_keeps(lambda: compile_nvrtc_item(unit, 90, "cubin")) == []


def test_a_failed_cpp_operator_leaves_no_program_for_the_collector():
    from aot.build.operators import cpp_op
    op = {"cpp": "ops/bad.cu", "function": "twice"}
    assert _programs_its_error_keeps(lambda: cpp_op(op, (), {"ops/bad.cu": BAD_OP_CU}, 90)) == []


CPP_MATRIX = '''version: 1
cccl:
  - {name: s, algorithm: unary_transform, dtype: float32, op: {cpp: OPS, function: twice}}
'''


@pytest.mark.parametrize("link, target", [("ops", "../private"), ("etc", "/etc")], ids=["ops-private", "etc"])
def test_cpp_paths_do_not_follow_links_out_of_the_matrix_folder(tmp_path, link, target):
    """``ops -> ../private`` and ``etc -> /etc``: refused in one line, the outside text in no spec."""
    from aot.build.matrix import load_matrix
    from aot.core.errors import MatrixError
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "twice.cu").write_text("SECRET " + TWICE_CU)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / link).symlink_to(target)
    rel = f"{link}/twice.cu" if link == "ops" else "etc/passwd"
    (proj / "m.yaml").write_text(CPP_MATRIX.replace("OPS", rel))
    with pytest.raises(MatrixError) as err:
        load_matrix(proj / "m.yaml")
    msg = str(err.value)
    assert "\n" not in msg and "leaves the matrix folder" in msg and "field 'op.cpp'" in msg, msg
    assert "SECRET" not in msg and "root:" not in msg


def test_cpp_link_inside_the_matrix_folder_still_works(tmp_path):
    from aot.build.matrix import load_matrix
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "twice.cu").write_text(TWICE_CU)
    (tmp_path / "ops").symlink_to("real")
    (tmp_path / "m.yaml").write_text(CPP_MATRIX.replace("OPS", "ops/twice.cu"))
    assert load_matrix(tmp_path / "m.yaml").specs[0].sources == {"ops/twice.cu": TWICE_CU}


def test_many_specs_naming_one_cpp_file_share_one_copy(tmp_path):
    """200 specs naming one 1 MB C++ file: one read, one string (it was one copy per spec: 1,000 specs of a
    3.9 MB file took 3.8 GB)."""
    import tracemalloc
    from aot.build.matrix import load_matrix
    (tmp_path / "ops").mkdir()
    big = TWICE_CU + "// " + "x" * (1 << 20) + "\n"
    (tmp_path / "ops" / "twice.cu").write_text(big)
    lines = ["version: 1", "cccl:"] + [
        f"  - {{name: s{i}, algorithm: unary_transform, dtype: float32, op: {{cpp: ops/twice.cu, function: twice}}}}"
        for i in range(200)]
    (tmp_path / "m.yaml").write_text("\n".join(lines) + "\n")
    tracemalloc.start()
    try:
        specs = load_matrix(tmp_path / "m.yaml").specs
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(specs) == 200 and len({id(s.sources["ops/twice.cu"]) for s in specs}) == 1
    assert current < 16 * (1 << 20), f"{current / 1e6:.0f} MB held by 200 specs of one 1 MB source"


# ============================================================== 6. manifest text never reaches the terminal raw
ESC = "\x1b]0;pwned\x07\x1b[2J\x1b[31m"


def _foreign_set(root: Path, producer: dict) -> Path:
    root.mkdir(parents=True)
    doc = {"format": "aot-manifest", "manifest_version": 1, "producer": producer, "specs": {}, "artifacts": []}
    (root / "manifest.json").write_text(json.dumps(doc))
    return root


def test_inspect_and_verify_escape_a_foreign_producer(tmp_path, capsys):
    root = _foreign_set(tmp_path / "set", {**PRODUCER, "aot": ESC + "1.0", "cuda_cccl": "9\r\nfake: line"})
    for argv in (["inspect", str(root)], ["verify", str(root)], ["verify", "--for-wheel", str(root)]):
        rc, out, err = _cli(capsys, *argv)
        assert "\x1b" not in out + err and "\x07" not in out + err and "\r" not in out + err, (argv, out, err)
        if argv[0] == "inspect":
            assert rc == 0 and "\\x1b]0;pwned\\x07" in out and "9\\x0d\\x0afake: line" in out, out


def test_the_error_line_escapes_what_it_quotes(tmp_path, capsys, monkeypatch):
    import aot.cli.main
    from aot.core.errors import VerificationError

    def hostile(args):
        raise VerificationError(f"set: produced by {ESC}\nsecond line")
    monkeypatch.setitem(aot.cli.main.__dict__, "cmd_verify", hostile)
    rc, out, err = _cli(capsys, "verify", str(tmp_path))
    assert rc == 7 and err.count("\n") == 1 and "\x1b" not in err and "\\x1b]0;pwned" in err, err


def test_cache_info_escapes_an_entry_header(cache, capsys):
    shard = cache / "cccl" / "ab"
    shard.mkdir(parents=True, mode=0o700)
    entry = shard / ("ab" * 32 + ".aot")
    data = _artifact("spec")
    from aot.core import format as fmt
    art = fmt.decode(data)
    entry.write_bytes(fmt.encode({**art.header, "name": "x" + ESC,
                                  "producer": {**art.header["producer"], "aot": ESC}}, art.payload))
    entry.chmod(0o600)
    rc, out, _ = _cli(capsys, "cache", "info")
    assert rc == 0 and "\x1b" not in out and "\\x1b" in out and "unreadable" not in out, repr(out)
    assert "1 CCCL entries" in out, repr(out)


def test_printable_escapes_controls_and_keeps_text():
    from aot.core.text import printable
    assert printable("é 日本 ok") == "é 日本 ok"
    assert printable("a\x1b[0m\x9b\u202e\ud800b") == "a\\x1b[0m\\x9b\\u202e\\ud800b"
    assert printable("line1\r\nline2", lines=True) == "line1\\x0d\nline2"
    assert printable("x" * 10, 4) == "xxxx..."


# ============================================================== 7. verify --for-wheel names the wheel
def test_verify_for_wheel_names_the_wheel_not_its_unpack_folder(tmp_path, capsys):
    import zipfile
    doc = {"format": "aot-manifest", "manifest_version": 1, "producer": PRODUCER, "specs": {}, "artifacts": []}
    whl = tmp_path / "mypkg-0.1-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("mypkg/artifacts/manifest.json", json.dumps(doc))
    rc, out, err = _cli(capsys, "verify", str(whl), "--for-wheel")
    assert "aot-wheel-" not in out + err, out + err
    assert f"{whl}, folder mypkg/artifacts" in out + err, out + err
    rc, out, err = _cli(capsys, "verify", str(whl))
    assert rc == 0 and f"{whl}, folder mypkg/artifacts: 0 artifacts, integrity OK" in out, out


def test_an_encrypted_wheel_member_is_one_line(tmp_path, capsys):
    """zipfile raises RuntimeError for a member flagged encrypted: it was a traceback."""
    import zipfile
    whl = tmp_path / "enc.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("mypkg/artifacts/manifest.json", "{}")
    data = bytearray(whl.read_bytes())
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):  # set the "encrypted" flag bit in both headers
        i = data.find(sig)
        off = i + (6 if sig == b"PK\x03\x04" else 8)
        data[off] |= 1
    whl.write_bytes(bytes(data))
    rc, out, err = _cli(capsys, "verify", str(whl))
    assert rc == 2 and "not a readable wheel" in err and err.count("\n") == 1, err


# ============================================================== 8. doctor says what it can show without a GPU
def _doctor(capsys, monkeypatch, sm, artifacts) -> str:
    import aot.build.toolchain
    import aot.runtime.loader.default
    reg = SimpleNamespace(names=lambda: ["a_spec", "b_spec"], spec=lambda n: n,
                          manifest=SimpleNamespace(artifacts=artifacts) if artifacts is not None else None,
                          packaged_candidates=lambda spec, sm: [SimpleNamespace(kind="cubin", sm=sm)]
                          if spec == "a_spec" else [])
    monkeypatch.setattr(aot.runtime.loader.default, "default_registry", lambda: reg)
    monkeypatch.setattr(aot.build.toolchain, "native_sm", lambda: sm)
    rc, out, _ = _cli(capsys, "doctor")
    assert rc == 0
    return out


def test_doctor_without_a_gpu_says_the_choice_needs_one_and_what_is_packaged(capsys, monkeypatch):
    arts = [{"name": "a_spec", "sm": 90, "payload_kind": "cubin"}, {"name": "a_spec", "sm": 80, "payload_kind": "cubin"},
            {"name": "a_spec", "sm": 80, "payload_kind": "ptx"}]
    out = _doctor(capsys, monkeypatch, None, arts)
    assert "loader's choice per spec: needs a GPU (none usable here" in out and "Packaged for 1 of 2 specs" in out
    assert "a_spec" in out and "-> sm_80, sm_90, compute_80" in out, out
    assert "b_spec" in out and "nothing packaged: user cache or JIT" in out, out
    out = _doctor(capsys, monkeypatch, None, None)
    assert "needs a GPU" in out and "packages no artifacts" in out and "a_spec" not in out, out


def test_doctor_with_a_gpu_shows_the_loaders_choice(capsys, monkeypatch):
    out = _doctor(capsys, monkeypatch, 90, [])
    assert "loader's choice per spec on this GPU (sm_90):" in out and "-> packaged cubin sm_90" in out, out
    assert "b_spec" in out and "user cache or JIT (no packaged fit)" in out, out


@pytest.mark.parametrize("buffered", [True, False])
def test_a_closed_pipe_is_not_an_error(tmp_path, buffered):
    """`aot cache info | head` (the reader leaves early): no "aot: error: Broken pipe", no traceback, 141.

    Deterministic: the reader has left before aot starts (the read end is closed first), with stdout buffered
    (the output leaves at the end: before, the interpreter's final flush printed "Exception ignored ...
    BrokenPipeError" and exited 120) and unbuffered (``PYTHONUNBUFFERED``: the first print meets it). The old
    form closed the pipe after starting aot, a race that failed under load (issue 37)."""
    import os
    import subprocess
    import sys

    from conftest import repo_env
    env = repo_env(AOT_CACHE_DIR=str(tmp_path))
    env.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    for args in (["doctor"], ["--help"]):
        read, write = os.pipe()
        os.close(read)
        try:
            r = subprocess.run([sys.executable, "-m", "aot", *args], stdout=write, stderr=subprocess.PIPE,
                               env=env, text=True, timeout=120)
        finally:
            os.close(write)
        assert "Broken pipe" not in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert "Exception ignored" not in r.stderr, (args, r.returncode, r.stderr)
        # argparse itself ignores a failed write of --help (then 0); a command's output is aot's: 141
        assert r.returncode in ((0, 141) if args == ["--help"] else (141,)), (args, r.returncode, r.stderr)


def test_a_packages_unit_named_like_a_default_one_gets_no_default_reference():
    """The built-in NVRTC references are for aot's own default units, matched by content: a library's own
    ``morton`` (another kernel under the same name) is "no reference", never launched with the default's
    arguments (seen on the H100: an out-of-bounds launch that poisoned every later check)."""
    from aot.core.spec import NvrtcUnit
    from aot.runtime.loader.default_specs import load
    from aot.verify.reference import NoReference
    from aot.verify.units import check_kernel

    default = next(s for s in load() if s.name == "morton")
    mine = NvrtcUnit(name="morton", source_path="mylib.kernels:MORTON", source='extern "C" __global__ void m() {}',
                     kernels=("m",), options={})
    launched = []
    with pytest.raises(NoReference):
        check_kernel(lambda k: launched.append(k), mine, device=None)
    assert launched == []
    assert default.content_key() != mine.content_key()
