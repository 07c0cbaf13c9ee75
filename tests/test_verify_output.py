"""``aot verify --gpu`` failures are readable (issue 16): each failed check is one line under the table
(spec, SM, kind, what differs, how many, the first index, got and want), never inside a wrapped cell; the
--json rows carry the same facts; the one-line error says how many failed and points at the list. CPU only:
the GPU run is replaced by rows a real check's Mismatch produced."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from aot.core.errors import VerificationError
from aot.verify.compare import Mismatch, close
from aot.verify.gpu import GpuRow


def _mismatch() -> Mismatch:
    want = (np.arange(100_003, dtype=np.float32) ** 2).astype(np.float64) + 1.0
    got = want.copy()
    got[[17, 99]] += 1e-9
    with pytest.raises(Mismatch) as e:
        close(got, want, "unary_transform")
    return e.value


def rows() -> list[GpuRow]:
    m = _mismatch()
    long = "gate_a_spec_name_long_enough_to_be_cut_in_an_80_column_table_cell"
    return [GpuRow("reduce_sum_f64", "cccl", 90, "cccl-blob", "packaged", True, 12.5),
            GpuRow(long, "cccl", 90, "cccl-blob", "packaged", False, 30.0, str(m), failure=m.to_json()),
            GpuRow("morton", "nvrtc", 90, "cubin", "packaged", False, 3.0, "CUDAError: launch failed\nsecond line"),
            GpuRow("mine", "nvrtc", 90, "cubin", "packaged", True, 1.0, "no check", status="loaded, not executed")]


def test_mismatch_facts():
    m = _mismatch()
    assert str(m) == ("unary_transform: 2 of 100003 elements differ; first at [17]: got 290.000000001, "
                      "want 290.0")
    assert m.to_json() == {"what": "unary_transform", "count": 2, "total": 100003, "index": 17,
                           "got": "290.000000001", "want": "290.0", "reason": "differ"}
    dt = np.dtype([("w", "f8"), ("n", "i4")], align=True)
    want = np.array([(1.0, 3), (2.0, 4)], dt)
    got = want.copy()
    got["n"][1] = 5
    with pytest.raises(Mismatch) as e:
        close(got, want, "segmented_reduce", tol={"w": 1.0})
    assert e.value.to_json()["what"] == "segmented_reduce.n" and e.value.index == 1
    assert (e.value.got, e.value.want) == ("5", "4")


def _args(tmp_path, **kw):
    return argparse.Namespace(matrix=None, package=None, only=None, quiet=True, json=tmp_path / "rows.json", **kw)


class FakeRegistry:
    def __init__(self, root, specs=None, owner=None):
        self.root = root

    def names(self):
        return [r.spec for r in rows()]

    def device_sm(self):
        return 90


def test_failures_are_lines_under_the_table_and_in_json(tmp_path, monkeypatch, capsys):
    import aot.runtime.loader.registry
    import aot.verify.gpu
    from aot.cli.check_cmds import _verify_gpu
    monkeypatch.setattr(aot.runtime.loader.registry, "Registry", FakeRegistry)
    monkeypatch.setattr(aot.verify.gpu, "verify_gpu", lambda *a, **k: rows())
    monkeypatch.setenv("COLUMNS", "80")
    args = _args(tmp_path)
    with pytest.raises(VerificationError) as e:
        _verify_gpu(tmp_path, args)
    out = capsys.readouterr().out
    table, _, after = out.partition("FAILED (2):\n")
    assert "│ FAILED" in table and "elements differ" not in table  # the cell says FAILED, nothing more
    lines = after.splitlines()
    long = rows()[1].spec
    assert lines[0] == (f"  {long} sm_90 cccl-blob: unary_transform: 2 of 100003 elements differ; first at [17]: "
                        "got 290.000000001, want 290.0")
    assert lines[1] == "  morton sm_90 cubin: CUDAError: launch failed | second line"
    assert lines[2] == "1 of 4 checks passed; 2 FAILED; 1 loaded, not executed (no check: mine)"
    msg = str(e.value)
    assert msg.startswith("2 of 4 GPU checks FAILED (") and long in msg and "morton" in msg
    assert "listed above" in msg and str(args.json) in msg and "differ" not in msg
    doc = json.loads(args.json.read_text())
    assert [r["status"] for r in doc] == ["ok", "failed", "failed", "loaded, not executed"]
    assert doc[1]["failure"] == rows()[1].failure and doc[1]["failure"]["index"] == 17
    assert doc[2]["failure"] is None and doc[2]["detail"].startswith("CUDAError")


def test_all_ok_says_so(tmp_path, monkeypatch, capsys):
    import aot.runtime.loader.registry
    import aot.verify.gpu
    from aot.cli.check_cmds import _verify_gpu
    monkeypatch.setattr(aot.runtime.loader.registry, "Registry", FakeRegistry)
    monkeypatch.setattr(aot.verify.gpu, "verify_gpu", lambda *a, **k: rows()[:1])
    assert _verify_gpu(tmp_path, _args(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "FAILED" not in out and out.rstrip().endswith("1 of 1 checks passed")
