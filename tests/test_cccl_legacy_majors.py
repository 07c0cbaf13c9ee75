"""cccl-legacy answers (cuda-cccl < 1.1, issue 44) in a set of several CUDA majors (``aot merge`` of builds under
each: ``cu12/`` and ``cu13/`` under an index, :mod:`aot.core.majorset`). Before, the search at ``import
cuda.compute`` looked only at ``<package>/artifacts/cccl-legacy/`` and the package's table read the index as a
manifest (an error): such a wheel never served its answers. Now both read the installed cuda-bindings major's set,
as the loader does for every other family, and never the other's. Real merge of real answer files (the shims'
format, stand-in payloads), as tests/test_cccl_legacy_wheel.py builds them; no cuda-cccl 0.6 needed."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from aot.build import legacy_set
from aot.build.merge import merge
from aot.runtime.adapters import cccl_legacy_activate as A
from tests.test_cccl_legacy_wheel import PROD, answers


# tests here patch sys.path or package metadata while the loader reads versions (cached per process)
pytestmark = pytest.mark.usefixtures("fresh_version_caches")

REL = "0.6.0"
SPEC = "reduce:int32:plus:0"


def _as_major(monkeypatch, major: str) -> None:
    """This process as an install of CUDA ``major`` (cuda-bindings' major: what the loader reads)."""
    from aot.core import versions
    here = dict(versions.runtime_versions())
    monkeypatch.setattr(versions, "runtime_versions", lambda: {**here, "cuda_major": major})
    monkeypatch.setattr(versions, "cuda_major", lambda: major)


@pytest.fixture
def site(tmp_path, monkeypatch) -> dict:
    """``site/lpkg/artifacts``: the ``aot merge`` of a cu12 and a cu13 build of the same spec's answers (other
    bytes each), as the only entry of ``sys.path``; the keys of each major's answers."""
    keys = {}
    for major, seed in (("12", "twelve"), ("13", "thirteen")):
        got = answers(REL, SPEC, seed)
        legacy_set.add_answers(tmp_path / f"b{major}", REL, dict(PROD, cuda_major=major), 90, [SPEC], got)
        keys[major] = sorted(k for k, *_ in got)
    art = tmp_path / "site" / "lpkg" / "artifacts"
    assert merge([tmp_path / "b12", tmp_path / "b13"], art)["cuda_majors"] == [12, 13]
    assert not (art / "cccl-legacy").exists() and (art / "cu13" / "cccl-legacy" / f"cuda-cccl-{REL}").is_dir()
    monkeypatch.setattr(A.sys, "path", [str(tmp_path / "site")])
    return {"art": art, "keys": keys}


@pytest.mark.parametrize("major", ["12", "13"])
def test_each_majors_install_activates_its_own_majors_answers(site, monkeypatch, major):
    """Before: ``package_roots`` found nothing (no ``artifacts/cccl-legacy/``) and ``package_table`` warned
    that the index is a set of several majors; nothing was served under either major."""
    _as_major(monkeypatch, major)
    assert A.package_roots(REL) == [site["art"]]
    table = A.package_table(site["art"], REL)
    assert sorted(table) == site["keys"][major]
    assert all(Path(p).is_relative_to(site["art"] / f"cu{major}") for p in table.values())
    started = []
    monkeypatch.setattr(A, "_start", lambda release, table: started.append((release, sorted(table))) or "shims")
    monkeypatch.setattr(A, "release_without_serialize", lambda: REL)
    monkeypatch.setattr(A, "_active", None)
    assert A.activate() == "shims" and started == [(REL, site["keys"][major])]


@pytest.mark.parametrize("major", ["14", "missing"])
def test_a_major_the_index_lacks_gets_no_answers_and_no_warning(site, monkeypatch, caplog, major):
    """The other majors' answers were compiled by another toolchain: not offered (as their artifacts are not)."""
    _as_major(monkeypatch, major)
    with caplog.at_level(logging.WARNING, logger="aot"):
        assert A.package_roots(REL) == []
        assert A.package_table(site["art"], REL) == {}
    assert caplog.records == []


def test_a_crafted_index_is_one_warning_and_nothing_served(site, monkeypatch, caplog):
    """The index is untrusted: a major mapped to a folder elsewhere, an oversized index, an index nested in a
    major's set are each refused; ``import cuda.compute`` goes on (cuda.compute JITs)."""
    _as_major(monkeypatch, "13")
    index = site["art"] / "manifest.json"
    index.write_text(json.dumps({"format": "aot-majors", "manifest_version": 1, "majors": {"13": "../../elsewhere"}}))
    with caplog.at_level(logging.WARNING, logger="aot"):
        assert A.package_roots(REL) == []
        assert A.package_table(site["art"], REL) == {}
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and all(str(index) in s and "field 'majors'" in s for s in said), said
    caplog.clear()
    index.write_text(json.dumps({"format": "aot-majors", "manifest_version": 1, "majors": {"13": "cu13"},
                                 "pad": "x" * (70 * 1024)}))
    assert A.package_roots(REL) == []  # over the index's bound: not read as an index
    (site["art"] / "cu13" / "manifest.json").write_text(json.dumps(
        {"format": "aot-majors", "manifest_version": 1, "majors": {"13": "cu13"}}))
    index.write_text(json.dumps({"format": "aot-majors", "manifest_version": 1, "majors": {"13": "cu13"}}))
    with caplog.at_level(logging.WARNING, logger="aot"):
        assert A.package_table(site["art"], REL) == {}  # an index inside an index: never followed
    assert any("a set of CUDA majors 13" in r.getMessage() for r in caplog.records)


def test_from_packages_family_step_reaches_the_installed_majors_answers(site, monkeypatch):
    """``Registry.from_package``'s family attach (:mod:`aot.runtime.loader.families`, a package whose folder is
    not ``artifacts`` has only this step): before, it looked for ``cccl-legacy/`` at the set's top only."""
    from aot.runtime.loader import families
    _as_major(monkeypatch, "13")
    started = []
    monkeypatch.setattr(A, "_start", lambda release, table: started.append((release, sorted(table))) or "shims")
    monkeypatch.setattr(A, "release_without_serialize", lambda: REL)
    monkeypatch.setattr(A, "_active", None)
    monkeypatch.setattr(families, "_cccl_without_serialize", lambda: True)
    families.attach_families(None, str(site["art"]), numba=False, cupy=False, triton=False)
    assert started == [(REL, site["keys"]["13"])]


def test_a_majors_package_folder_calls_its_answers_its_own(site):
    """The bundle replaces the package folder only where aot wrote every file in it (``foreign_files``); before,
    the answers under ``cu13/cccl-legacy/`` counted as foreign, so the next bundle of such a wheel stopped."""
    from aot.package.bundle import foreign_files
    art = site["art"]
    assert foreign_files(art) == []
    (art / "cu13" / "cccl-legacy" / f"cuda-cccl-{REL}" / "mine.aot").write_bytes(b"not ours")
    (art / "cu13" / "nvrtc").mkdir()
    (art / "cu13" / "nvrtc" / "x.aot").write_bytes(b"AOTLGCY\0 an answer's magic outside cccl-legacy/")
    assert foreign_files(art) == [f"cu13/cccl-legacy/cuda-cccl-{REL}/mine.aot", "cu13/nvrtc/x.aot"]
