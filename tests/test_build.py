"""The build driver, end to end: the session's small real build, incremental rebuilds, failures.

Extra builds use NVRTC-only matrices (about 0.1 s per item) so the whole file stays fast.
"""

from __future__ import annotations

import json
import subprocess
import sys
import shutil
import struct
import time
from pathlib import Path

import pytest

import cccl_patches
from aot.core import format as fmt
from aot.build.builder import REPORT_NAME, build, plan
from aot.cli.main import main
from aot.core.errors import BuildError
from aot.core.manifest import MANIFEST_NAME, file_sha256, load_manifest, verify_files
from aot.build.matrix import load_matrix
from aot.core.spec import CcclSpec
from conftest import repo_env

EM_CUDA = 190
ELFOSABI_CUDA = 0x41
BROKEN_CU = 'extern "C" __global__ void broken_kernel(int* a) { a[0] = ; }\n'
NVRTC_ERROR = "error: expected an expression"


def entries_by_path(out: Path) -> dict:
    return {a["path"]: a for a in load_manifest(out).artifacts}


def report_json(out: Path) -> dict:
    return json.loads((out / REPORT_NAME).read_text())


def cuda_elf_sm(data: bytes) -> int:
    """The SM a CUDA ELF (cubin) was built for, from its ELF header."""
    assert data[:4] == b"\x7fELF", "not an ELF file"
    assert data[4] == 2 and data[5] == 1, "expected ELFCLASS64, little-endian"
    osabi, abiversion = data[7], data[8]
    (e_machine,) = struct.unpack_from("<H", data, 18)
    (e_flags,) = struct.unpack_from("<I", data, 48)
    assert e_machine == EM_CUDA
    assert osabi == ELFOSABI_CUDA
    # Measured with NVRTC 13.5 (sm_75..sm_120 all give EI_ABIVERSION 8): e_flags = 0x06000000 | sm << 8 | low
    # bits (0x04 up to sm_90, 0x02 from sm_100). Before ABI version 8 the SM was e_flags & 0xff.
    assert abiversion in (7, 8), f"unknown CUDA ELF ABI version {abiversion}"
    return (e_flags >> 8) & 0xFF if abiversion >= 8 else e_flags & 0xFF


# ------------------------------------------------------------------------------- the session build
def test_session_build_report(small_build):
    rep = small_build.report
    n_cccl = sum(isinstance(s, CcclSpec) for s in small_build.specs)
    n_nvrtc = len(small_build.specs) - n_cccl
    n_sms = len(small_build.sms)
    assert len(rep.items) == n_cccl * n_sms + n_nvrtc * (n_sms + 1)
    assert rep.counts() == {"built": len(rep.items)}
    assert rep.manifest_written and rep.failures == []
    print(f"small build: {len(rep.items)} items in {small_build.seconds:.1f} s with {small_build.jobs} jobs")


def test_report_json(small_build):
    from aot.build.toolchain import real_driver_present
    doc = report_json(small_build.out)
    assert doc["jobs"] == small_build.jobs and doc["sms"] == list(small_build.sms)
    assert doc["manifest_written"] is True and doc["counts"] == {"built": len(doc["items"])}
    assert doc["seconds"] > 0
    for it in doc["items"]:
        assert it["status"] == "built" and it["error"] is None
        assert it["seconds"] > 0 and it["bytes"] == (small_build.out / it["path"]).stat().st_size
    for key in fmt.PRODUCER_FIELDS:
        assert doc["versions"][key]
    if not real_driver_present():
        assert "stand-in" in doc["driver"] and "libcuda.so.1" in doc["driver"]
    else:
        assert doc["driver"] == "real NVIDIA driver"


def test_manifest_matches_files(small_build):
    out = small_build.out
    m = load_manifest(out)
    assert verify_files(m) == []
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*.aot")}
    assert {a["path"] for a in m.artifacts} == on_disk == {r.path for r in small_build.report.items}
    assert set(m.specs) == {s.name for s in small_build.specs}
    assert not list(out.rglob(".tmp-aot-*"))
    doc = json.loads((out / MANIFEST_NAME).read_text())
    assert doc["sms"] == list(small_build.sms) and "incomplete" not in doc


def test_artifact_headers(small_build):
    m = load_manifest(small_build.out)
    specs = {s.name: s for s in small_build.specs}
    for a in m.artifacts:
        art = fmt.read(m.path_of(a))
        h = art.header
        spec = specs[a["name"]]
        assert (h["name"], h["family"], h["sm"], h["payload_kind"]) == (a["name"], a["family"], a["sm"],
                                                                          a["payload_kind"])
        assert h["family"] == spec.family and h["content_key"] == a["content_key"]
        assert a["size"] == m.path_of(a).stat().st_size and a["sha256"] == file_sha256(m.path_of(a))
        if spec.family == "cccl":
            assert h["payload_kind"] == "cccl-blob" and h["kernels"] == []
            assert a["path"] == f"cccl/{spec.name}/sm_{h['sm']}.aot"
        else:
            assert h["payload_kind"] in ("cubin", "ptx") and h["kernels"] == list(spec.kernels)
        for key in fmt.PRODUCER_FIELDS:
            assert isinstance(h["producer"][key], str) and h["producer"][key]
            assert h["producer"][key] == m.producer[key]
    assert m.producer["cuda_cccl"] == "1.2.1"


def test_payload_kinds_per_sm(small_build):
    m = load_manifest(small_build.out)
    for spec in small_build.specs:
        got = sorted((a["payload_kind"], a["sm"]) for a in m.entries_for(spec.name))
        sms = list(small_build.sms)
        if spec.family == "cccl":
            assert got == [("cccl-blob", sm) for sm in sms]
        else:
            assert got == sorted([("cubin", sm) for sm in sms] + [("ptx", min(sms))])


def test_cubins_are_cuda_elf_for_their_sm(small_build):
    m = load_manifest(small_build.out)
    seen = set()
    for a in m.artifacts:
        if a["payload_kind"] == "cubin":
            assert cuda_elf_sm(fmt.read(m.path_of(a)).payload) == a["sm"], a["path"]
            seen.add(a["sm"])
    assert seen == set(small_build.sms)


def test_cuda_elf_sm_parser_rejects_other_elves():
    x86 = b"\x7fELF\x02\x01\x01\x00" + bytes(8) + struct.pack("<HHI", 2, 62, 1) + bytes(40)
    with pytest.raises(AssertionError):
        cuda_elf_sm(x86)


def test_ptx_targets_lowest_sm(small_build):
    m = load_manifest(small_build.out)
    ptx = [a for a in m.artifacts if a["payload_kind"] == "ptx"]
    assert len(ptx) == 2
    for a in ptx:
        text = fmt.read(m.path_of(a)).payload
        assert b".target sm_80" in text and b"\0" not in text
        for k in load_matrix().select([a["name"]])[0].kernels:
            assert f".entry {k}".encode() in text


def test_cccl_blobs(small_build):
    m = load_manifest(small_build.out)
    placeholder = cccl_patches.PLACEHOLDER_ADDRESS.to_bytes(8, "little")
    blobs = [a for a in m.artifacts if a["family"] == "cccl"]
    assert len(blobs) == 2 * len(small_build.sms)
    for a in blobs:
        payload = fmt.read(m.path_of(a)).payload
        assert payload.startswith(b"CCCLPYS1"), a["path"]
        assert placeholder not in payload, f"{a['path']}: the ProxyArray placeholder address was serialized"
    for a in m.artifacts:  # and not in anything else either
        assert placeholder not in fmt.read(m.path_of(a)).payload


# ----------------------------------------------------------------------------------- rebuilds
def test_incremental_rebuild_is_all_hits(small_build, small_build_copy):
    out = small_build_copy
    before = {p: p.read_bytes() for p in out.rglob("*.aot")}
    manifest_before = (out / MANIFEST_NAME).read_bytes()
    t0 = time.perf_counter()
    rep = build(small_build.specs, list(small_build.sms), out, jobs=small_build.jobs)
    seconds = time.perf_counter() - t0
    print(f"no-op rebuild of {len(rep.items)} items: {seconds:.2f} s")
    assert rep.counts() == {"hit": len(small_build.report.items)}
    assert all(r.seconds == 0 for r in rep.items)
    assert seconds < 5
    assert {p: p.read_bytes() for p in out.rglob("*.aot")} == before
    assert (out / MANIFEST_NAME).read_bytes() == manifest_before
    assert report_json(out)["counts"] == {"hit": len(rep.items)}


def test_corrupt_artifact_is_rebuilt(small_build, small_build_copy):
    out = small_build_copy
    specs = [s for s in small_build.specs if s.name == "morton"]
    victim = out / "nvrtc/morton/sm_89.cubin.aot"
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    rep = build(specs, list(small_build.sms), out, jobs=1)
    status = {r.path: r.status for r in rep.items}
    assert status.pop("nvrtc/morton/sm_89.cubin.aot") == "built"
    assert set(status.values()) == {"hit"}
    assert victim.read_bytes() == (small_build.out / "nvrtc/morton/sm_89.cubin.aot").read_bytes()


def test_force_rebuilds_one_unit(small_build, small_build_copy, capsys):
    out = small_build_copy
    sms = ",".join(map(str, small_build.sms))
    assert main(["build", "--only", "morton", "--force", "--sm", sms, "--out", str(out), "--jobs", "2", "-q"]) == 0
    doc = report_json(out)
    assert [i["name"] for i in doc["items"]] == ["morton"] * (len(small_build.sms) + 1)
    assert {i["status"] for i in doc["items"]} == {"built"}
    m = load_manifest(out)
    assert verify_files(m) == []
    for a in m.entries_for("morton"):  # NVRTC output is reproducible: the rebuilt files are byte-identical
        assert m.path_of(a).read_bytes() == (small_build.out / a["path"]).read_bytes()


# ------------------------------------------------------------------------------------- failures
@pytest.fixture
def broken_matrix(tmp_path) -> Path:
    """An NVRTC-only matrix: one good unit, one with a syntax error."""
    d = tmp_path / "matrix"
    d.mkdir()
    shutil.copy(Path(__file__).resolve().parent.parent / "aot" / "kernels" / "morton.cu", d / "morton.cu")
    (d / "broken.cu").write_text(BROKEN_CU)
    p = d / "build_matrix.yaml"
    p.write_text("version: 1\nnvrtc:\n"
                 "  - {name: good, source: morton.cu, kernels: [morton_codes_2d], options: {std: c++17}}\n"
                 "  - {name: broken, source: broken.cu, kernels: [broken_kernel]}\n")
    return p


BROKEN_SMS = [80, 90]
GOOD_PATHS = {"nvrtc/good/sm_80.cubin.aot", "nvrtc/good/sm_90.cubin.aot", "nvrtc/good/compute_80.ptx.aot"}
BROKEN_PATHS = {"nvrtc/broken/sm_80.cubin.aot", "nvrtc/broken/sm_90.cubin.aot",
                "nvrtc/broken/compute_80.ptx.aot"}


def test_keep_going(broken_matrix, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(BuildError) as ei:
        build(load_matrix(broken_matrix).specs, BROKEN_SMS, out, jobs=2, keep_going=True)
    assert ei.value.return_code == 4
    assert "3 of 6 build items failed" in str(ei.value) and "broken" in str(ei.value)
    doc = report_json(out)
    status = {i["path"]: i["status"] for i in doc["items"]}
    assert status == {**{p: "built" for p in GOOD_PATHS}, **{p: "failed" for p in BROKEN_PATHS}}
    for i in doc["items"]:
        if i["status"] == "failed":
            assert NVRTC_ERROR in i["error"] and "broken.cu" in i["error"]
    m = load_manifest(out)
    assert {a["path"] for a in m.artifacts} == GOOD_PATHS
    assert set(m.specs) == {"good"} and verify_files(m) == []
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert sorted(manifest["incomplete"]) == sorted(BROKEN_PATHS)
    assert {p.relative_to(out).as_posix() for p in out.rglob("*.aot")} == GOOD_PATHS


def test_keep_going_cli_exit_code(broken_matrix, tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["build", "--matrix", str(broken_matrix), "--sm", "80,90", "--out", str(out), "--jobs", "2",
               "--keep-going", "-q"])
    assert rc == 4
    err = capsys.readouterr().err
    assert "aot: error: 3 of 6 build items failed" in err
    assert (out / MANIFEST_NAME).exists()


def test_failure_without_keep_going_leaves_no_manifest(broken_matrix, tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(BuildError, match="no manifest written") as ei:
        build(load_matrix(broken_matrix).specs, BROKEN_SMS, out, jobs=2)
    assert ei.value.return_code == 4
    assert not (out / MANIFEST_NAME).exists()
    doc = report_json(out)
    assert doc["manifest_written"] is False
    statuses = {i["status"] for i in doc["items"]}
    assert "failed" in statuses and statuses <= {"failed", "built", "cancelled"}
    assert not list(out.rglob(".tmp-aot-*"))
    out2 = tmp_path / "out2"
    assert main(["build", "--matrix", str(broken_matrix), "--sm", "80,90", "--out", str(out2), "--jobs", "1",
                 "-q"]) == 4
    assert not (out2 / MANIFEST_NAME).exists()


def test_failed_build_removes_stale_manifest(broken_matrix, small_build_copy):
    out = small_build_copy
    assert (out / MANIFEST_NAME).exists()
    with pytest.raises(BuildError):
        build(load_matrix(broken_matrix).specs, BROKEN_SMS, out, jobs=2)
    assert not (out / MANIFEST_NAME).exists()
    assert report_json(out)["manifest_written"] is False


def test_good_nvrtc_matrix_round_trip(broken_matrix, tmp_path):
    """The same matrix minus the broken unit builds; a second build prunes what the first left over."""
    good = load_matrix(broken_matrix).select(["good"])
    out = tmp_path / "out"
    rep = build(good, BROKEN_SMS, out, jobs=1)
    assert rep.counts() == {"built": 3}
    rep = build(good, [90], out, jobs=1)  # a narrower SM list: sm_80 artifacts are pruned
    assert rep.counts() == {"hit": 1, "built": 1}  # sm_90 cubin reused, compute_90 PTX is new
    assert {p.relative_to(out).as_posix() for p in out.rglob("*.aot")} == {"nvrtc/good/sm_90.cubin.aot",
                                                                          "nvrtc/good/compute_90.ptx.aot"}
    assert verify_files(load_manifest(out)) == []


# ------------------------------------------------------------------------------------------ plan
def test_plan_and_shards(small_specs):
    items = plan(small_specs, [80, 89, 90])
    assert len(items) == 14
    shards = [plan(small_specs, [80, 89, 90], (k, 3)) for k in (1, 2, 3)]
    labels = [sorted(it.label + it.kind for it in s) for s in shards]
    assert sorted(sum(labels, [])) == sorted(it.label + it.kind for it in items)
    assert max(map(len, shards)) - min(map(len, shards)) <= 1


# ------------------------------------------------------------------------------------------- gpu
@pytest.mark.gpu
def test_native_sm_is_buildable():
    """On a GPU host: the device's SM parses as ``--sm native`` and this NVRTC can target it."""
    from aot.core.arch import parse_sm_list
    from aot.build.toolchain import cuda_major, native_sm, nvrtc_supported_sms
    sm = native_sm()
    assert sm is not None and 50 <= sm <= 200
    assert parse_sm_list("native", cuda_major=cuda_major(), native=sm, supported=nvrtc_supported_sms()) == [sm]


def test_verify_gpu_without_a_gpu_exits_6(small_build, capsys):
    from aot.cli.main import main
    from aot.build.toolchain import native_sm
    if native_sm() is not None:
        pytest.skip("checks the no-GPU path")
    assert main(["verify", str(small_build.out), "--gpu"]) == 6
    err = capsys.readouterr().err
    assert "no usable CUDA device" in err and "Traceback" not in err


def test_matrix_naming_its_own_operator_from_code_builds_without_pythonpath(tmp_path):
    """A package's matrix may name the package's own operator (``ownpkg.ops:f`` next to the matrix): the
    build imports it from the matrix's folder, in the parsing process and in every spawned worker, with
    nothing of the project on PYTHONPATH and the build run from another folder (as pip's backend does)."""
    proj = tmp_path / "proj"
    (proj / "ownpkg").mkdir(parents=True)
    (proj / "ownpkg" / "__init__.py").write_text("")
    (proj / "ownpkg" / "ops.py").write_text("def add3(a, b):\n    return a + b + 3\n")
    (proj / "build_matrix.yaml").write_text(
        "version: 1\ncccl:\n  - {name: own_sum, algorithm: reduce, dtype: int32, op: \"ownpkg.ops:add3\", init: 0}\n")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(proj / "build_matrix.yaml"),
                        "--sm", "90", "--jobs", "1", "--out", str(out), "--quiet"],
                       env=repo_env(), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert [a["name"] for a in manifest["artifacts"]] == ["own_sum"]
    assert "ownpkg.ops:add3" in json.dumps(manifest["specs"]["own_sum"])
