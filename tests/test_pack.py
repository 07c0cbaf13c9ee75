"""The packed store (issue 40, aot/core/pack.py + aot/package/packing.py): a package folder whose artifacts are
packed round-trips byte for byte and serves through the registry; a damaged, truncated, oversized or
expanding pack costs one warning naming it, then JIT serves; a wheel built by the hatch hook with
``pack = true`` carries packs only, and a registry loads from the unpacked wheel. CPU only: the session's
small build (real artifacts) and a fake CUDA layer that records what reached it."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest
from conftest import SMALL_SMS, repo_env
from hostile_util import fake_cuda

import aot.runtime.jit.jit
from aot.core import format as fmt
from aot.core import pack
from aot.core.errors import ArtifactError
from aot.core.manifest import load_manifest, verify_files
from aot.package.bundle import foreign_files, write_package_folder
from aot.runtime.loader.objects import AotWarning
from aot.runtime.loader.registry import Registry
from aot.verify.gpu import verify_integrity

CCCL = "reduce_sum_i32"


def packed(src: Path, out: Path) -> Path:
    write_package_folder(src, out, {"sms": list(SMALL_SMS)}, pack=True)
    return out


def aot_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, AotWarning)]


def test_packed_folder_round_trips_and_serves(small_build, tmp_path, jit_stub):
    root = packed(small_build.out, tmp_path / "artifacts")
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert not [f for f in files if f.endswith(".aot")] and foreign_files(root) == []
    assert f"cccl/{CCCL}/sm_9x.aotpack" in files and "nvrtc/morton/all.aotpack" in files
    m, built = load_manifest(root), load_manifest(small_build.out)
    assert len(m.artifacts) == len(built.artifacts) and all("pack" in a for a in m.artifacts)
    for a in m.artifacts:  # every member is the built file, byte for byte
        assert pack.read_member(m, a) == (small_build.out / a["path"]).read_bytes(), a["path"]
    assert verify_files(m) == [] and verify_integrity(root) == (len(m.artifacts), [])
    index = json.loads((root / "hit-index.json").read_bytes())  # the first-hit index names the pack of a packed unit
    assert index["version"] == 2 and "nvrtc/morton/all.aotpack" in {e["pack"] for e in index["entries"]}
    assert all(e["pack"] == f"nvrtc/{e['name']}/all.aotpack" for e in index["entries"])
    with fake_cuda() as cuda, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reg = Registry(root, device_sm=89)
        loaded, unit = reg._load(CCCL), reg._load("morton")
    assert aot_warnings(caught) == [] and jit_stub == []
    assert loaded.source == unit.source == "packaged" and loaded.sm == unit.sm == 89
    want = fmt.read(small_build.out / f"cccl/{CCCL}/sm_89.aot").payload
    assert cuda.calls[0] == ("deserialize", want)
    assert cuda.calls[1] == ("cubin", fmt.read(small_build.out / "nvrtc/morton/sm_89.cubin.aot").payload)


def test_packs_are_deterministic_and_auto_keeps_small_sets_as_files(small_build, tmp_path):
    a, b = packed(small_build.out, tmp_path / "a"), packed(small_build.out, tmp_path / "b")
    packs = sorted(p.relative_to(a) for p in a.rglob("*.aotpack"))
    assert packs and all((a / p).read_bytes() == (b / p).read_bytes() for p in packs)
    assert (a / "manifest.json").read_bytes() == (b / "manifest.json").read_bytes()
    members = [("x/1.aot", b"one" * 1000), ("x/2.aot", b"two" * 1000)]
    assert pack.encode_pack(members) == pack.encode_pack(list(members))
    write_package_folder(small_build.out, tmp_path / "auto", {"sms": list(SMALL_SMS)}, pack="auto")
    assert not list((tmp_path / "auto").rglob("*.aotpack")) and list((tmp_path / "auto").rglob("*.aot"))


def _cccl_pack(root: Path) -> Path:
    return root / "cccl" / CCCL / "sm_9x.aotpack"


def _rewrite_header(data: bytes, edit) -> bytes:
    h, start = pack.decode_pack_header(data)
    edit(h)
    raw = json.dumps(h, sort_keys=True, separators=(",", ":")).encode()
    return pack.PACK_MAGIC + struct.pack("<I", len(raw)) + raw + data[start:]


def _flip_stream(data: bytes) -> bytes:
    _, start = pack.decode_pack_header(data)
    i = start + (len(data) - start) // 3
    return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:]


def _expanding(data: bytes, lead: bytes = b"", big: int = 16 << 20) -> bytes:
    """The pack ``data`` with its stream replaced by ``lead`` and ``big`` bytes of zeros, the header claiming a
    second member that covers them: a stream that expands far past the member a reader asks for."""
    import lzma
    h, _ = pack.decode_pack_header(data)
    first = h["members"][0]
    members = [dict(first, offset=0), {"path": "cccl/x/huge.aot", "offset": first["size"], "size": big,
                                       "sha256": "0" * 64}]
    body = lzma.compress(lead + b"\0" * (big + first["size"] - len(lead)), format=lzma.FORMAT_RAW,
                         filters=pack._filters())
    raw = json.dumps(dict(h, members=members, raw_size=first["size"] + big), sort_keys=True,
                     separators=(",", ":")).encode()
    return pack.PACK_MAGIC + struct.pack("<I", len(raw)) + raw + body


DAMAGE = {
    "flipped stream byte": (_flip_stream, "pack stream is corrupt"),
    "truncated": (lambda d: d[:len(d) // 2], "truncated"),
    "bad magic": (lambda d: b"XOTPACK\0" + d[8:], "not an aot pack"),
    "gap between members": (lambda d: _rewrite_header(d, lambda h: h["members"][-1].update(
        offset=h["members"][-1]["offset"] + 1)), "out of place"),
    "raw_size over the bound": (lambda d: _rewrite_header(d, lambda h: h.update(raw_size=pack.MAX_PACK_RAW + 1)),
                                "out of bounds"),
    "zeros where the member should be": (_expanding, "sha256"),
}


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_pack_is_one_warning_then_jit(small_build, tmp_path, jit_stub, kind):
    root = packed(small_build.out, tmp_path / "artifacts")
    damage, fragment = DAMAGE[kind]
    _cccl_pack(root).write_bytes(damage(_cccl_pack(root).read_bytes()))
    with fake_cuda() as cuda, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = Registry(root, device_sm=90)._load(CCCL)
    msgs = aot_warnings(caught)
    assert len(msgs) == 1 and str(_cccl_pack(root)) in msgs[0] or f"cccl/{CCCL}/" in msgs[0], msgs
    assert fragment in msgs[0], msgs
    assert loaded.source == "jit" and jit_stub == [(CCCL, 90)] and cuda.calls == []
    assert any(CCCL in p for p in verify_files(load_manifest(root)))  # aot verify names it too


def test_an_oversized_pack_is_refused_before_it_is_read(small_build, tmp_path, jit_stub, monkeypatch):
    root = packed(small_build.out, tmp_path / "artifacts")
    monkeypatch.setattr(pack, "MAX_PACK_FILE", _cccl_pack(root).stat().st_size - 1)
    with fake_cuda() as cuda, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = Registry(root, device_sm=90)._load(CCCL)
    msgs = aot_warnings(caught)
    assert len(msgs) == 1 and "refused before reading" in msgs[0] and str(_cccl_pack(root)) in msgs[0], msgs
    assert loaded.source == "jit" and cuda.calls == []


def test_a_bomb_decodes_only_to_its_members_end():
    """The stream is decoded up to the end of the member asked for, never whole: 32 MiB of zeros behind a
    small member cost that member's bytes and the decoder's own 8 MiB dictionary (liblzma allocates through
    Python's allocator, so tracemalloc sees it), never the zeros."""
    import tracemalloc
    member = fmt.encode(fmt.make_header(family="cccl", name="r", content_key="c" * 64, sm=90, payload_kind="cccl-blob",
                                        payload=b"p" * 10, producer={k: "x" for k in fmt.PRODUCER_FIELDS}), b"p" * 10)
    data = _expanding(pack.encode_pack([("cccl/r/sm_90.aot", member)]), lead=member, big=32 << 20)
    tracemalloc.start()
    try:
        got = pack.unpack_member(data, "cccl/r/sm_90.aot", len(member))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == member and peak < 12 << 20, peak
    with pytest.raises(ArtifactError, match="manifest says"):
        pack.unpack_member(data, "cccl/r/sm_90.aot", len(member) + 1)


def test_pack_field_outside_the_folder_is_refused(small_build, tmp_path):
    root = packed(small_build.out, tmp_path / "artifacts")
    m = load_manifest(root)
    entry = dict(m.artifacts[0], pack="../../elsewhere.aotpack")
    with pytest.raises(ArtifactError, match="leads outside|plain relative"):
        pack.read_member(m, entry)


def test_hatch_wheel_carries_packs_and_registry_loads_from_it(small_build, tmp_path, jit_stub):
    """The hook with ``pack = true`` over the session's build (prebuilt: nothing compiles): the wheel holds the
    manifest and packs, no ``.aot`` file, and a registry over the unpacked wheel serves from the packs."""
    project = tmp_path / "tinypkg"
    (project / "tinypkg").mkdir(parents=True)
    (project / "tinypkg" / "__init__.py").write_text("")
    matrix = "\n".join(line for line in (Path(aot.__file__).parent.parent / "build_matrix.yaml").read_text()
                       .splitlines() if line.startswith(("version", "cccl:")) or f"name: {CCCL}," in line)
    (project / "build_matrix.yaml").write_text(matrix + "\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
        '[project]\nname = "tinypkg"\nversion = "0.1.0"\ndependencies = ["cccl-aot-cu13"]\n'
        '[tool.hatch.build.hooks.aot]\n[tool.aot]\npackage = "tinypkg"\npack = true\n')
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps", "-w",
                        str(tmp_path / "dist"), str(project)], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path, env=repo_env(AOT_WHEEL_SM=",".join(map(str, SMALL_SMS)),
                                                  AOT_WHEEL_ARTIFACTS=str(small_build.out),
                                                  SOURCE_DATE_EPOCH="1700000000"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(whl).namelist()
    art = [n for n in names if n.startswith("tinypkg/artifacts/")]
    assert "tinypkg/artifacts/manifest.json" in art and f"tinypkg/artifacts/cccl/{CCCL}/sm_9x.aotpack" in art
    assert not [n for n in art if n.endswith(".aot")], art
    zipfile.ZipFile(whl).extractall(tmp_path / "site")
    with fake_cuda() as cuda, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = Registry(tmp_path / "site" / "tinypkg" / "artifacts", device_sm=90)._load(CCCL)
    assert aot_warnings(caught) == [] and loaded.source == "packaged" and jit_stub == []
    want = fmt.read(small_build.out / f"cccl/{CCCL}/sm_90.aot").payload
    assert cuda.calls == [("deserialize", want)]
    # the real cuda.compute deserializes the unpacked blob (aot's stand-in libcuda: this host has no driver)
    from aot.build.toolchain import stub_library
    code = ("import ctypes, sys, warnings; ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL); "
            "warnings.simplefilter('error'); from aot.runtime.loader.registry import Registry; "
            "reg = Registry(sys.argv[2], device_sm=90); algo = reg.cccl(sys.argv[3]); "
            "print(reg.status()[sys.argv[3]].source, type(algo.raw).__name__)")
    r = subprocess.run([sys.executable, "-c", code, str(stub_library()), str(tmp_path / "site" / "tinypkg" / "artifacts"),
                        CCCL], env=repo_env(AOT_FORCE_STUB_TOOLCHAIN="1"), capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and r.stdout.split() == ["packaged", "_Reduce"], r.stdout + r.stderr[-3000:]


def test_cccl_groups_are_per_gpu_major_newest_release_first():
    """A CCCL spec's pack holds every SM of one GPU major under every release, newest release first (a user
    most often has it, and the loader decodes only up to its member); other specs, every SM in one pack."""
    from types import SimpleNamespace

    from aot.package.packing import _group
    m = SimpleNamespace(release_of=lambda a: a["cuda_cccl"])
    entries = [{"family": "cccl", "name": "r", "sm": sm, "cuda_cccl": rel, "path": f"cccl/r/cuda-cccl-{rel}/sm_{sm}.aot"}
               for rel in ("1.1.0", "1.10.0", "1.2.1") for sm in (89, 80, 90)]
    groups: dict = {}
    for a in entries:
        rel, key = _group(m, a)  # type: ignore[arg-type]
        groups.setdefault(rel, []).append((key, a))
    assert sorted(groups) == ["cccl/r/sm_8x.aotpack", "cccl/r/sm_9x.aotpack"]
    order = [(a["cuda_cccl"], a["sm"]) for _, a in sorted(groups["cccl/r/sm_8x.aotpack"], key=lambda x: x[0])]
    assert order == [("1.10.0", 80), ("1.10.0", 89), ("1.2.1", 80), ("1.2.1", 89), ("1.1.0", 80), ("1.1.0", 89)]
    unit = {"family": "nvrtc", "name": "u", "payload_kind": "ptx", "sm": 75, "path": "nvrtc/u/compute_75.ptx.aot"}
    assert _group(m, unit)[0] == "nvrtc/u/all.aotpack"  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ['"yes"', "1", '"auto "'])
def test_tool_aot_pack_takes_auto_true_or_false(tmp_path, value):
    from aot.package.config import ConfigError, load_config
    (tmp_path / "p").mkdir()
    (tmp_path / "build_matrix.yaml").write_text("version: 1\n")
    (tmp_path / "pyproject.toml").write_text(f'[tool.aot]\npackage = "p"\npack = {value}\n')
    with pytest.raises(ConfigError, match="key 'pack': must be \"auto\", true or false"):
        load_config(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.aot]\npackage = "p"\npack = true\n')
    assert load_config(tmp_path).pack is True
