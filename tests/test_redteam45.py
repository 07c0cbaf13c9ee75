"""The red team's cases of issue 45 (CPU only). Each test failed before its fix:

1. ``aot merge``: a release string from an input (``producer.cuda_cccl``, a merged input's ``producers``) built
   the output path unchecked, so a foreign input wrote a file of its choosing outside ``--out``, exit 0;
2. ``aot merge``: an input claiming a newer cuda-cccl release replaced the genuine NVRTC cubin under the same
   content key (logged at INFO), and every user of every release loaded the foreign bytes;
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from aot.build.merge import merge
from aot.core.errors import ArtifactError
from aot.core.manifest import MANIFEST_NAME
from tests.test_cccl_releases import fake_set


def _outside(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if "ESC" in p.parts)


# ------------------------------------------------------------------------------------------ 1. merge paths
@pytest.mark.parametrize("release", ["9/../../../../ESC", "../ESC", "1.2.1/../../ESC", "", " 1.2.1", "1.2.1\n"])
def test_merge_refuses_a_release_that_is_no_version(tmp_path, release):
    good = fake_set(tmp_path / "good", "1.1.0")
    bad = fake_set(tmp_path / "in" / "a" / "b" / "c", release)
    with pytest.raises(ArtifactError) as e:
        merge([good, bad], tmp_path / "in" / "out")
    msg = str(e.value)
    assert "\n" not in msg and str(bad / MANIFEST_NAME) in msg and "'cuda_cccl'" in msg
    assert _outside(tmp_path) == [] and not (tmp_path / "in" / "out" / MANIFEST_NAME).exists()


def test_merge_refuses_a_bad_release_in_a_merged_inputs_producers(tmp_path):
    merged = tmp_path / "in" / "a" / "b" / "merged"
    merge([fake_set(tmp_path / "x", "1.1.0"), fake_set(tmp_path / "y", "1.2.0")], merged)
    doc = json.loads((merged / MANIFEST_NAME).read_text())
    bad = "9/../../../../ESC"
    doc["producers"][bad] = dict(doc["producers"].pop("1.1.0"), cuda_cccl=bad)
    for a in doc["artifacts"]:
        if a.get("cuda_cccl") == "1.1.0":
            a["cuda_cccl"] = bad
    (merged / MANIFEST_NAME).write_text(json.dumps(doc))
    with pytest.raises(ArtifactError) as e:
        merge([merged, fake_set(tmp_path / "z", "1.2.1")], tmp_path / "in" / "out")
    assert "\n" not in str(e.value) and str(merged / MANIFEST_NAME) in str(e.value) and "'producers'" in str(e.value)
    assert _outside(tmp_path) == []


def test_merge_keeps_every_write_inside_out(tmp_path):
    """A folder of ``--out`` that is a symlink leading elsewhere is refused, never written through."""
    a, b = fake_set(tmp_path / "a", "1.1.0"), fake_set(tmp_path / "b", "1.2.1")
    out = tmp_path / "out"
    (tmp_path / "ESC").mkdir()
    out.mkdir()
    (out / "nvrtc").symlink_to(tmp_path / "ESC")
    with pytest.raises(ArtifactError, match="leads outside"):
        merge([a, b], out)
    assert list((tmp_path / "ESC").iterdir()) == []


# ------------------------------------------------------------------------------------------ 2. merge conflicts
def _unit(root: Path) -> bytes:
    from aot.core import format as fmt
    return fmt.read(root / "nvrtc/morton/sm_90.cubin.aot").payload


def test_merge_refuses_other_bytes_under_one_content_key_whatever_release_they_claim(tmp_path):
    genuine = fake_set(tmp_path / "genuine", "1.2.1", unit_bytes=b"genuine cubin")
    foreign = fake_set(tmp_path / "foreign", "9.9.9", unit_bytes=b"foreign cubin")
    for order in ([genuine, foreign], [foreign, genuine]):
        with pytest.raises(ArtifactError) as e:
            merge(order, tmp_path / "out")
        msg = str(e.value)
        assert "\n" not in msg and "nvrtc/morton/sm_90.cubin.aot" in msg and "0" * 16 in msg
        assert str(genuine) in msg and str(foreign) in msg and "9.9.9" in msg
        assert not (tmp_path / "out" / MANIFEST_NAME).exists()


def test_merge_refuses_other_bytes_under_a_key_made_to_differ(tmp_path):
    """Claiming another cuda-core as well changes the unit's content key (cuda-core is in it) but not what can
    change a cubin that includes nothing from cuda-cccl: still a conflict."""
    from tests.test_cccl_releases import producer
    genuine = fake_set(tmp_path / "genuine", "1.2.1", unit_bytes=b"genuine cubin")
    foreign = fake_set(tmp_path / "foreign", "9.9.9", unit_bytes=b"foreign cubin", unit_key="f" * 64,
                       prod=producer("9.9.9", cuda_core="9.9.9"))
    with pytest.raises(ArtifactError, match=r"0{16} vs f{16}\).*genuine.*foreign"):
        merge([genuine, foreign], tmp_path / "out")


def test_merge_lists_every_conflict_in_one_line(tmp_path):
    a = fake_set(tmp_path / "a", "1.2.1", unit_bytes=b"a")
    b = fake_set(tmp_path / "b", "1.2.1", unit_bytes=b"b")
    for name in ("reduce_sum_i32", "lower_bound_i32"):  # one release: its blobs differ too
        (b / f"cccl/{name}/sm_90.aot").write_bytes(b"other")
    doc = json.loads((b / MANIFEST_NAME).read_text())
    for e in doc["artifacts"]:
        if e["family"] == "cccl":
            e.update(size=5, sha256=hashlib.sha256(b"other").hexdigest())
    (b / MANIFEST_NAME).write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match=r"^merge: 3 artifact\(s\) conflict") as e:
        merge([a, b], tmp_path / "out")
    assert "\n" not in str(e.value) and str(e.value).count(str(b)) == 3


def test_merge_keeps_same_content_stamped_by_two_releases(tmp_path):
    a = fake_set(tmp_path / "a", "1.2.1", unit_bytes=b"same cubin")
    b = fake_set(tmp_path / "b", "1.1.0", unit_bytes=b"same cubin")
    merge([a, b], tmp_path / "out")
    assert _unit(tmp_path / "out") == b"same cubin"


def test_a_unit_including_installed_headers_may_differ_by_release(tmp_path):
    """Its cubin may change with cuda-cccl's headers, and so does its content key: the newest release's stays
    (a key made to differ without such an include is refused above)."""
    sets = []
    for release, key in (("1.2.1", "a" * 64), ("1.1.0", "b" * 64)):
        root = fake_set(tmp_path / release, release, unit_bytes=f"cubin {release}".encode(), unit_key=key)
        doc = json.loads((root / MANIFEST_NAME).read_text())
        doc["specs"]["morton"]["source"] = "#include <cuda/std/cstdint>\n" + doc["specs"]["morton"]["source"]
        (root / MANIFEST_NAME).write_text(json.dumps(doc))
        sets.append(root)
    merge(sets, tmp_path / "out")
    assert _unit(tmp_path / "out") == b"cubin 1.2.1"
    doc["specs"]["morton"]["source"] = doc["specs"]["morton"]["source"].split("\n", 1)[1]
    (sets[1] / MANIFEST_NAME).write_text(json.dumps(doc))
    doc = json.loads((sets[0] / MANIFEST_NAME).read_text())
    doc["specs"]["morton"]["source"] = doc["specs"]["morton"]["source"].split("\n", 1)[1]
    (sets[0] / MANIFEST_NAME).write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="1 artifact"):
        merge(sets, tmp_path / "out2")
