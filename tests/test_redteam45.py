"""The red team's cases of issue 45 (CPU only). Each test failed before its fix:

1. ``aot merge``: a release string from an input (``producer.cuda_cccl``, a merged input's ``producers``) built
   the output path unchecked, so a foreign input wrote a file of its choosing outside ``--out``, exit 0;
2. ``aot merge``: an input claiming a newer cuda-cccl release replaced the genuine NVRTC cubin under the same
   content key (logged at INFO), and every user of every release loaded the foreign bytes;
"""

from __future__ import annotations

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
