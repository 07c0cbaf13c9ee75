"""CuPy sets built under different stacks merge into one (issue 40): one artifact per distinct CuPy key, each at a
path named by its key, the stacks that built it recorded; the same key with other bytes is refused; the runtime
serves the entry whose key the user's compile has (the user's headers simulated through the key's inputs: a
header tree and CuPy's ``key_src`` as ``_compile_with_cache_cuda`` writes it). No compiler: synthetic payloads."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from aot.build.merge import merge
from aot.build.merge_cupy import cupy_path
from aot.core import format as fmt
from aot.core.errors import ArtifactError
from aot.core.manifest import load_manifest, verify_files, write_manifest
from aot.core.spec import CupyKernel, item_key
from aot.runtime.adapters import cupy_attach
from aot.runtime.adapters.cupy_key import Headers, content_key, split_key_src

SOURCE = '#include <cupy/carray.cuh>\nextern "C" __global__ void k(float* x) { x[0] = HALF; }\n'
SPEC = CupyKernel(name="k.0", what="k(float* x)", source_sha256=__import__("hashlib").sha256(SOURCE.encode())
                  .hexdigest(), options=("-I{cupy_include}", "-I{cuda_include}"), name_expressions=None,
                  jitify=False, cupy="14.2.0", source=SOURCE)
HOST = {"aot": "0.1.0", "cuda_cccl": "1.2.1", "cuda_major": "13", "nvrtc": "13.0", "nvjitlink": "13.0",
        "cuda_core": "1.2.2"}
CTK = {**HOST, "cuda_cccl": "missing", "nvrtc": "13.5", "nvjitlink": "13.5", "cuda_core": "missing"}


def _stack(runtime: str) -> dict[str, str]:
    return {"cupy": "14.2.0", "nvrtc": "13.0.88", "cuda_runtime": runtime, "cuda_crt": "missing"}


def _set(root: Path, key: str, payload: bytes, producer=HOST, runtime="13.0.96", path=None, spec=SPEC) -> Path:
    """A CuPy set as ``aot build`` writes it: one artifact of ``spec`` for sm_90 under CuPy key ``key``."""
    SPEC = spec  # noqa: N806 - the module's by default
    rel = path or f"cupy/{SPEC.name}/sm_90.cubin.aot"
    ck = item_key(SPEC, 90, "cubin", producer)
    header = fmt.make_header(family="cupy", name=SPEC.name, content_key=ck, sm=90, payload_kind="cubin",
                             payload=payload, producer={k: producer[k] for k in fmt.PRODUCER_FIELDS},
                             extra={"cupy_key": key, "cupy_name": "x.cubin", "cupy_stack": _stack(runtime)})
    data = fmt.encode(header, payload)
    (root / rel).parent.mkdir(parents=True)
    (root / rel).write_bytes(data)
    import hashlib
    write_manifest(root, producer=producer, specs={SPEC.name: SPEC.definition()}, extra={"sms": [90]},
                   artifacts=[{"path": rel, "name": SPEC.name, "family": "cupy", "sm": 90, "payload_kind": "cubin",
                               "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "content_key": ck,
                               "cupy_key": key, "cupy_stacks": [_stack(runtime)]}])
    return root


def test_two_stacks_keys_for_one_spec_merge_into_one_set_with_both(tmp_path):
    a = _set(tmp_path / "host", "a" * 64, b"cubin of the build host")
    b = _set(tmp_path / "ctk", "b" * 64, b"cubin under ctk headers", producer=CTK, runtime="13.5.37")
    summary = merge([a, b], tmp_path / "out")
    m = load_manifest(tmp_path / "out")
    assert summary["artifacts"] == 2 and verify_files(m) == []
    got = {e["cupy_key"]: e for e in m.artifacts}
    assert set(got) == {"a" * 64, "b" * 64}
    assert {e["path"] for e in got.values()} == {cupy_path(SPEC.name, "a" * 64, 90), cupy_path(SPEC.name, "b" * 64, 90)}
    assert got["b" * 64]["cupy_stacks"] == [_stack("13.5.37")]
    from aot.runtime.loader.sources import check_packaged  # each loads against the one producer the set keeps
    assert [check_packaged(m, SPEC, e, m.path_of(e)).payload for e in sorted(got.values(), key=lambda e: e["path"])] \
        == [b"cubin of the build host", b"cubin under ctk headers"]


def test_a_merged_set_merges_again_with_a_third_stack(tmp_path):
    a = _set(tmp_path / "a", "a" * 64, b"one")
    b = _set(tmp_path / "b", "b" * 64, b"two", producer=CTK, runtime="13.5.37")
    c = _set(tmp_path / "c", "c" * 64, b"three", runtime="13.0.88")
    merge([a, b], tmp_path / "ab")
    merge([tmp_path / "ab", c], tmp_path / "abc")
    m = load_manifest(tmp_path / "abc")
    assert verify_files(m) == [] and sorted(e["cupy_key"][0] for e in m.artifacts) == ["a", "b", "c"]
    assert all(e["path"] == cupy_path(SPEC.name, e["cupy_key"], 90) for e in m.artifacts)


def test_the_same_key_from_two_stacks_is_kept_once_naming_both(tmp_path):
    a = _set(tmp_path / "a", "a" * 64, b"same")
    b = _set(tmp_path / "b", "a" * 64, b"same", runtime="13.0.88")
    merge([a, b], tmp_path / "out")
    (e,) = load_manifest(tmp_path / "out").artifacts
    assert e["path"] == f"cupy/{SPEC.name}/sm_90.cubin.aot"
    assert e["cupy_stacks"] == [_stack("13.0.88"), _stack("13.0.96")]


def test_the_same_key_with_other_bytes_is_refused_and_nothing_is_written(tmp_path):
    a = _set(tmp_path / "a", "a" * 64, b"one cubin")
    b = _set(tmp_path / "b", "a" * 64, b"another cubin", producer=CTK)
    with pytest.raises(ArtifactError, match=r"other bytes under one CuPy key.*k\.0 sm_90"):
        merge([a, b], tmp_path / "out")
    assert not (tmp_path / "out" / "manifest.json").exists()
    assert not any(p.is_file() for p in (tmp_path / "out").rglob("*") if p.name != ".aot-lock")


@pytest.mark.parametrize("edit, field", [
    (lambda e: e.update(cupy_key="../../x"), "cupy_key"),
    (lambda e: e.update(cupy_key="c" * 64), "header names another CuPy key"),
    (lambda e: e.update(cupy_stacks=[{"cupy": "x" * 500}]), "cupy_stacks"),
])
def test_a_foreign_entry_is_refused_naming_the_field(tmp_path, edit, field):
    a = _set(tmp_path / "a", "a" * 64, b"one")
    b = _set(tmp_path / "b", "b" * 64, b"two", producer=CTK)
    doc = json.loads((b / "manifest.json").read_text())
    edit(doc["artifacts"][0])
    (b / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match=field):
        merge([a, b], tmp_path / "out")


def test_sets_differing_in_what_a_cupy_key_covers_are_refused(tmp_path):
    a = _set(tmp_path / "a", "a" * 64, b"one")
    b = _set(tmp_path / "b", "b" * 64, b"two", producer={**HOST, "aot": "0.1.1"})
    with pytest.raises(ArtifactError, match="aot"):
        merge([a, b], tmp_path / "out")
    # another CUDA major is never mixed in: it becomes a set of its own (aot.core.majorset, issue 40)
    c = _set(tmp_path / "c", "c" * 64, b"three", producer={**HOST, "cuda_major": "12"})
    assert merge([a, c], tmp_path / "both")["cuda_majors"] == [12, 13]
    assert (tmp_path / "both" / "cu12" / "manifest.json").is_file() and (tmp_path / "both" / "cu13").is_dir()


# --------------------------------------------------------------------------------------- served by key
def _headers(root: Path, half: str) -> tuple[Path, Path]:
    cupy, cuda = root / "cupy_include", root / "cuda_include"
    (cupy / "cupy").mkdir(parents=True)
    cuda.mkdir(parents=True)
    (cupy / "cupy" / "carray.cuh").write_text("#include <cuda_fp16.h>\n")
    (cuda / "cuda_fp16.h").write_text(f"#define HALF {half}\n")
    return cupy, cuda


def _call(cupy: Path, cuda: Path, extra: str) -> tuple[bytes, SimpleNamespace]:
    """CuPy's ``key_src`` of compiling ``SOURCE`` under these headers, and its compiler's memo (CuPy 14.2)."""
    env = ("90", (f"-I{cupy}", f"-I{cuda}", "-ftz=true"), (13, 0), "nvrtc", "-arch=sm_90", "cubin")
    banner = "// Cuda compilation tools, release 13.0, V13.0.88"
    compiler = SimpleNamespace(_empty_file_preprocess_cache={env: banner}, _get_cupy_cache_key=lambda: "87417f5d")
    return f"{env} {banner} {SOURCE} {extra} 87417f5d".encode(), compiler


def test_the_runtime_serves_the_entry_whose_key_the_users_headers_make(tmp_path, monkeypatch):
    core = pytest.importorskip("cupy._core.core")
    extra = core._get_header_source()
    stacks = {half: _headers(tmp_path / f"h{half}", half) for half in ("1.0", "2.0", "3.0")}
    calls = {half: _call(*stacks[half], extra) for half in stacks}
    keys = {half: content_key(*split_key_src(k, c, ("None", extra)), Headers()) for half, (k, c) in calls.items()}
    assert len(set(keys.values())) == 3
    a = _set(tmp_path / "a", keys["1.0"], b"built with HALF 1.0")
    b = _set(tmp_path / "b", keys["2.0"], b"built with HALF 2.0", producer=CTK)
    merge([a, b], tmp_path / "out")
    import aot
    reg = aot.Registry(tmp_path / "out", owner="cupy_merge_t")
    monkeypatch.setitem(cupy_attach._state, "registries", [reg])
    monkeypatch.setitem(cupy_attach._state, "table", None)
    monkeypatch.setitem(cupy_attach._state, "headers", None)
    served = {}
    for half, (key_src, compiler) in calls.items():
        monkeypatch.setitem(cupy_attach._state, "compiler", compiler)
        cupy_attach._local.last = ("f00d", key_src)
        served[half] = cupy_attach._serve("f00d", None)
    cupy_attach._local.__dict__.clear()
    assert served == {"1.0": (b"built with HALF 1.0", None), "2.0": (b"built with HALF 2.0", None), "3.0": None}


def test_the_examples_stack_data_names_this_environment_as_the_build_host_and_every_served_stack_a_built_one():
    """examples/cupy-mypkg/stacks.json is what .ci/cupy_stack_sets.sh builds from and what docs/cupy.md reports:
    its build host is this developer environment (the wheel's own build), and every stack measured served names
    a built set (the stack itself where it was built, or one handing NVRTC the same input)."""
    from aot.build.cupy_build import stack
    root = Path(__file__).parents[1] / "examples" / "cupy-mypkg"
    doc = json.loads((root / "stacks.json").read_text())
    built = {s["tag"]: s for s in doc["built"]}
    assert list(built) == ["host", "ctk", "cupy-13.6", "torch-cu130", "torch-cu130-cupy-13.6"] and built["host"]["install"] == []
    if stack()["cupy"] == "14.2.0":
        assert built["host"]["stack"] == stack()
    for row in doc["served"]:
        assert row["by"] in built and row["compiled"] == 0
        if row["by"] != "host":  # measured with the compiles recorded under that stack's CuPy (its own matrix)
            assert row.get("matrix") == built[row["by"]].get("matrix")
            matrix = yaml.safe_load((root / row.get("matrix", "build_matrix.yaml")).read_text())
            assert row["stack"] == built[row["by"]]["stack"] and row["before"] == len(matrix["cupy"])


def test_a_venv_reached_through_a_symlink_has_the_same_key_under_cupy_136s_repeated_include(tmp_path):
    """CuPy 13.6 adds the CUDA headers' folder a second time; in a venv reached through a symlink cuda-pathfinder
    names it resolved and CuPy through the link: the same folder, so the same key (measured: 0 of the example's 23
    keys were equal before)."""
    cupy, cuda = _headers(tmp_path / "real", "1.0")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    banner = "// Cuda compilation tools, release 13.0, V13.0.88"

    def key(options: tuple) -> str | None:
        env = ("90", options, (13, 0), "nvrtc", "-arch=sm_90", "cubin")
        compiler = SimpleNamespace(_empty_file_preprocess_cache={env: banner}, _get_cupy_cache_key=lambda: "k")
        return content_key(*split_key_src(f"{env} {banner} {SOURCE} x k".encode(), compiler, ("x",)), Headers())

    plain = key((f"-I{cupy}", f"-I{cuda}", f"-I{cuda}", "-ftz=true"))
    linked = tmp_path / "link" / "cuda_include"
    assert plain is not None
    assert key((f"-I{tmp_path / 'link' / 'cupy_include'}", f"-I{cuda}", f"-I{linked}", "-ftz=true")) == plain


def test_a_bundle_carries_the_cupy_specs_of_a_set_recorded_under_another_cupy_release(tmp_path):
    """CuPy 13.6 generates other code than 14.2 for the same calls (`const double in1`, --std=c++11): its set is
    recorded and built under 13.6 with its own names (examples/cupy-mypkg/recorded-cupy-13.6). The wheel's bundle
    merges it in (AOT_WHEEL_MERGE) and carries its specs although the project's matrix names 14.2's only (they were
    dropped before: the 13.6 user compiled all 21)."""
    from aot.package.bundle import bundle
    from aot.package.config import AotConfig
    pkg = tmp_path / "proj" / "p"
    pkg.mkdir(parents=True)
    (tmp_path / "proj" / "k.cu").write_text(SOURCE)
    (tmp_path / "proj" / "m.yaml").write_text(
        "version: 1\ncupy:\n  - {name: k.0, what: 'k(float* x)', source: k.cu, options: ['-I{cupy_include}', "
        "'-I{cuda_include}'], name_expressions: null, jitify: false, cupy: 14.2.0}\n")
    host = _set(tmp_path / "host", "a" * 64, b"cubin of 14.2's code")
    import dataclasses
    other = _set(tmp_path / "c136", "b" * 64, b"cubin of 13.6's code",
                 spec=dataclasses.replace(SPEC, name="k.cupy13.6.0", cupy="13.6.0"))
    cfg = AotConfig(project=tmp_path / "proj", pyproject=tmp_path / "proj" / "pyproject.toml", package="p",
                    package_dir=pkg, matrix=tmp_path / "proj" / "m.yaml", sm="90", folder="artifacts", prebuilt=None,
                    allow_partial=False, merge=(other,))
    res = bundle(cfg, prebuilt=host, require_pins=False, work=tmp_path / "work" / "aot")
    got = load_manifest(res.out)
    assert sorted(a["name"] for a in got.artifacts) == ["k.0", "k.cupy13.6.0"] and verify_files(got) == []
