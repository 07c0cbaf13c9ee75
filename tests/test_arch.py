"""aot.core.arch.rank: the load order for many device ccs x artifact sets (a pure function)."""

from __future__ import annotations

import itertools
import re

import pytest

from conftest import DOCS

from aot.core.arch import DEFAULT_SMS, Candidate, rank, sm_major

SASS_SMS = (75, 80, 86, 87, 89, 90, 100, 103, 120)
DEVICES = (75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121)


def C(sm, kind="cubin", origin="packaged"):
    return Candidate(sm, kind, origin)


@pytest.mark.parametrize("device, cands, want", [
    (90, [C(80), C(90), C(86)], [C(90)]),                                  # exact; other majors never
    (89, [C(80), C(86), C(90)], [C(86), C(80)]),                           # same major, highest minor <= 9
    (86, [C(89), C(80)], [C(80)]),                                         # never a higher minor
    (90, [C(80, "ptx"), C(90)], [C(90), C(80, "ptx")]),                    # SASS before PTX
    (120, [C(90), C(80, "ptx"), C(100, "ptx")], [C(100, "ptx"), C(80, "ptx")]),  # PTX: highest SM <= cc
    (80, [C(90, "ptx")], []),                                              # PTX above the device: no
    (90, [C(90, origin="cache"), C(80, "ptx")], [C(80, "ptx"), C(90, origin="cache")]),  # packaged first
    (90, [C(90, "cccl-blob", "cache"), C(90, "cccl-blob")], [C(90, "cccl-blob"), C(90, "cccl-blob", "cache")]),
    (90, [C(90, "unknown-kind")], []),
])
def test_rank_cases(device, cands, want):
    assert rank(device, cands) == want


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_rank_invariants_over_all_artifact_sets(device, n):
    """For every set of up to 3 SASS SMs (+ optional PTX): nothing unloadable is offered, and the first
    choice is the best loadable one."""
    for sms in itertools.combinations(SASS_SMS, n):
        for ptx in (None, 75, 90):
            cands = [C(s) for s in sms] + ([C(ptx, "ptx")] if ptx else [])
            ranked = rank(device, cands)
            for c in ranked:
                if c.kind == "cubin":
                    assert sm_major(c.sm) == sm_major(device) and c.sm <= device
                else:
                    assert c.sm <= device
            loadable_sass = [s for s in sms if sm_major(s) == sm_major(device) and s <= device]
            if loadable_sass:
                assert ranked[0] == C(max(loadable_sass))
            elif ptx and ptx <= device:
                assert ranked == [C(ptx, "ptx")]
            else:
                assert ranked == []


def test_rank_is_stable_for_equal_candidates():
    a, b = Candidate(90, "cubin", "packaged", ref="a"), Candidate(90, "cubin", "packaged", ref="b")
    assert [c.ref for c in rank(90, [a, b])] == ["a", "b"]
    assert [c.ref for c in rank(90, [b, a])] == ["b", "a"]


# ------------------------------------------------------------------ the manual's table: every released GPU
#: Every compute capability released so far (docs/end-users.md's table has one row each).
RELEASED = ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1")
_CELL = re.compile(r"(none|(cubin |PTX )?sm_(\d+))\b")


def readme_cc_table() -> dict[str, list[str]]:
    """cc -> its four cells (CUDA 13 cuda.compute, CUDA 13 NVRTC, CUDA 12 cuda.compute, CUDA 12 NVRTC)."""
    text = (DOCS / "end-users.md").read_text()
    section = text.split("## Which artifact serves which GPU", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and re.fullmatch(r"\d+\.\d", cells[0]):
            rows[cells[0]] = cells[2:6]
    return rows


def default_build(major: int, family: str) -> list[Candidate]:
    """What a default build (``--sm all``) holds for one spec: a blob per SM (cuda.compute), or a cubin per SM
    plus PTX for the lowest SM (NVRTC)."""
    sms = DEFAULT_SMS[major]
    if family == "cccl":
        return [C(s, "cccl-blob") for s in sms]
    return [C(s) for s in sms] + [C(min(sms), "ptx")]


def _want(cell: str, family: str) -> Candidate | None:
    m = _CELL.match(cell)
    assert m, f"docs/end-users.md cell {cell!r}: expected 'none', 'sm_NN', 'cubin sm_NN' or 'PTX sm_NN'"
    if m.group(1) == "none":
        return None
    kind = "cccl-blob" if family == "cccl" else ("ptx" if m.group(2) == "PTX " else "cubin")
    return C(int(m.group(3)), kind)


def test_readme_cc_table_is_what_rank_picks_from_a_default_build():
    table = readme_cc_table()
    assert tuple(table) == RELEASED
    for cc, cells in table.items():
        device = round(float(cc) * 10)
        for cell, (major, family) in zip(cells, [(13, "cccl"), (13, "nvrtc"), (12, "cccl"), (12, "nvrtc")]):
            ranked = rank(device, default_build(major, family))
            assert (ranked[0] if ranked else None) == _want(cell, family), (cc, major, family, cell)


def test_every_gpu_from_a_t4_up_gets_sass_from_a_cuda13_default_build():
    for cc in RELEASED:
        device = round(float(cc) * 10)
        for family in ("cccl", "nvrtc"):
            best = rank(device, default_build(13, family))
            assert best and best[0].kind != "ptx", (cc, family)
