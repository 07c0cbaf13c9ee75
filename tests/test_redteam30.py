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
    import aot.runtime.objects
    import aot.verify.context
    import aot.verify.gpu
    from aot.verify.typed import resolve_code
    monkeypatch.setattr(aot.verify.gpu, "current_device", lambda: object())
    monkeypatch.setattr(registry, "device_sm", lambda: 90)
    monkeypatch.setattr(registry, "packaged_candidates",
                        lambda spec, sm: [SimpleNamespace(ref={"path": "x"}, sm=90, kind="cccl-blob")])
    monkeypatch.setattr(aot.runtime.objects, "CcclAlgorithm", SimpleNamespace)
    monkeypatch.setattr(registry, "open_packaged", lambda *a: SimpleNamespace(obj=SimpleNamespace()))
    monkeypatch.setattr(type(registry), "manifest", SimpleNamespace(path_of=lambda e: Path("x")), raising=False)

    def check(obj, spec, device):
        checked.append(resolve_code(spec.params["op"]["reference"])(3.0))
    monkeypatch.setattr(aot.verify.context, "check_cccl", check)


def test_verify_gpu_of_a_foreign_set_imports_nothing_it_names(evil_cwd, monkeypatch):
    from aot.runtime.registry import Registry
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
    from aot.runtime.registry import Registry
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
    from aot.runtime.registry import Registry
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
