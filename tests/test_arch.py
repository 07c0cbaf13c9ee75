"""aot.core.arch.rank: the load order for many device ccs x artifact sets (a pure function)."""

from __future__ import annotations

import itertools

import pytest

from aot.core.arch import Candidate, rank, sm_major

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
