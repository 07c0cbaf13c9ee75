"""The red team's cases of issue 37 in the lookup by source, the program cache, verify and ``cache info``
(CPU only; the GPU half is ``.ci/gpu/flag_spellings.py``). Each test failed before its fix:

1. flags passed as an iterator (``itertools.chain``, a generator, ``iter``, ``map``, ``reversed``) found the
   unit built *without* them (the memo key consumed the iterator, the content key was made from nothing),
   the wrong answer was memoised for the list spelling too, and the JIT fallback compiled without them;
4. hostile options (``[["-DN=2"]]``, ``{"define_macro": ("N", 2)}``) and a ``bytes`` source raised
   TypeError/AttributeError; ``aot verify`` passed a manifest whose ``source_key``/``progkey`` were swapped
   between units, and the lookup then served the other unit;
13. ``cufunctions`` without a driver raised cuda-pathfinder's ``DynamicLibNotFoundError``; ``cache info``
   counted another user's entry.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import ROOT, repo_env

SRC = '#ifndef N\n#define N 7\n#endif\nextern "C" __global__ void write_n(int* out) { *out = N; }\n'
MATRIX = """version: 1
nvrtc:
  - {name: n7, source: k.cu, kernels: [write_n]}
  - {name: n2, source: k.cu, kernels: [write_n], options: ["-DN=2"]}
"""


@pytest.fixture(scope="module")
def flags_set(tmp_path_factory):
    """Two NVRTC units of one source, built for sm_90 (cubin + PTX): ``n7`` without flags, ``n2`` with -DN=2."""
    from aot.build.builder import build
    from aot.build.isolated import expose_build_env_toolkit
    from aot.build.matrix import load_matrix
    expose_build_env_toolkit()
    where = tmp_path_factory.mktemp("rt37")
    (where / "k.cu").write_text(SRC)
    (where / "build_matrix.yaml").write_text(MATRIX)
    build(load_matrix(where / "build_matrix.yaml").specs, [90], where / "out", jobs=1)
    return where / "out"


def _lookup(root: Path):
    import aot
    return aot.by_source("unused", registry=aot.Registry(root))


def _flavours():
    """Every way of passing the one flag -DN=2 (fresh objects each call: iterators are single-use)."""
    return {
        "list": ["-DN=2"], "tuple": ("-DN=2",), "chain": itertools.chain(["-DN=2"]),
        "generator": (f for f in ["-DN=2"]), "iter": iter(["-DN=2"]), "map": map(str, ["-DN=2"]),
        "reversed": reversed(["-DN=2"]), "bytes": [b"-DN=2"], "text": "-DN=2", "dict-pair": {"define_macro": ("N", 2)},
        "dict-map": {"define_macro": {"N": 2}}, "dict-list": {"define_macro": [("N", "2")]},
    }


# ============================================================== 1. flags as an iterator
@pytest.mark.parametrize("flavour", list(_flavours()))
def test_flags_in_any_iterable_find_the_unit_built_with_them(flags_set, flavour):
    lookup = _lookup(flags_set)
    assert lookup.unit(SRC, _flavours()[flavour]) == "n2"
    assert lookup.unit(SRC, ["-DN=2"]) == "n2"  # nothing wrong memoised for the list spelling
    assert lookup.unit(SRC) == "n7" and lookup.unit(SRC, []) == "n7"


class _Loaded:
    def __init__(self, name):
        self.obj = SimpleNamespace(get_kernel=lambda k: f"{name}/{k}")
        self.source = "packaged"


@pytest.mark.parametrize("flavour", ["chain", "generator", "iter", "map", "reversed"])
def test_kernels_source_of_and_warmup_serve_the_flagged_unit(flags_set, monkeypatch, flavour):
    """``kernels()``/``source_of()`` (one path with ``cufunctions``/``cupy_*``) and ``request_warmup``,
    the loading replaced (no GPU here): the unit built with -DN=2, for the iterator and then the list."""
    from aot.runtime.loader import firsthit
    lookup = _lookup(flags_set)
    monkeypatch.setattr(lookup.registry, "_load", _Loaded)  # the manifest's path and the first-hit index's
    monkeypatch.setattr(firsthit, "load_unit", lambda reg, name, kernels, entries: _Loaded(name).obj)
    warmed: list = []
    monkeypatch.setattr(lookup.registry, "request_warmup", warmed.append)
    assert lookup.kernels(SRC, ["write_n"], _flavours()[flavour]) == {"write_n": "n2/write_n"}
    assert lookup.kernels(SRC, ["write_n"], ["-DN=2"]) == {"write_n": "n2/write_n"}
    assert lookup.source_of(SRC, iter(["write_n"]), _flavours()[flavour]) == ("n2", "packaged")
    assert lookup.kernels(SRC, "write_n") == {"write_n": "n7/write_n"}  # one name as a str: that name
    # options for several bare texts: read once, serving every one of them
    assert lookup.request_warmup([SRC, SRC.encode()], options=_flavours()[flavour]) == ["n2"]
    assert warmed == [["n2"]]


@pytest.mark.parametrize("flavour", ["chain", "generator", "map", "dict-pair"])
def test_the_jit_fallback_compiles_with_the_flags(flags_set, monkeypatch, flavour):
    """A source the package lacks compiles with the caller's flags (it compiled without them): what
    ``cuda.core.Program`` receives, rendered by cuda.core itself."""
    import cuda.core
    import aot.runtime.loader.driver
    lookup = _lookup(flags_set)
    seen: list = []

    class FakeProgram:
        def __init__(self, source, lang, options):
            seen.append(options.as_bytes("nvrtc", "cubin"))

        def compile(self, kind, name_expressions=(), cache=None):
            return SimpleNamespace(get_kernel=lambda k: "compiled/" + k)

        def close(self):
            pass
    monkeypatch.setattr(cuda.core, "Program", FakeProgram)
    monkeypatch.setattr(aot.runtime.loader.driver, "require_driver", lambda what: None)
    monkeypatch.setattr(lookup.registry, "device_sm", lambda: 90)
    other = SRC.replace("write_n", "write_m")
    assert lookup.source_of(other, ["write_m"], _flavours()[flavour]) == (None, "jit")
    assert seen == [[b"-arch=sm_90", b"--define-macro=N=2"]]


# ============================================================== 4. hostile arguments: one AotError line
@pytest.mark.parametrize("options, words", [
    ([["-DN=2"]], "options: ['-DN=2'] (list) is not a flag"),
    ({"define_macro": ("N", object())}, "options: define_macro"),
    ({"define_macro": [["N", "2"]]}, "options: define_macro: ['N', '2'] is not 'NAME=VALUE'"),
    ({"std": {"c++": 17}}, "options: field 'std'"),
    ({1: "x"}, "options: field name 1 (int) is not text"),
    (42, "options: 42 (int) is not NVRTC flags"),
    ([b"-DN=\xff"], "is not UTF-8 text"),
    (["--no-such-flag"], "options: unknown NVRTC flag '--no-such-flag'"),
])
def test_hostile_options_are_one_argument_error(flags_set, options, words):
    from aot.core.errors import AotError, ArgumentError
    lookup = _lookup(flags_set)
    with pytest.raises(ArgumentError) as e:
        lookup.unit(SRC, options)
    assert isinstance(e.value, AotError) and words in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_bytes_source_is_its_text_and_other_sources_and_names_are_argument_errors(flags_set):
    from aot.core.errors import ArgumentError
    lookup = _lookup(flags_set)
    assert lookup.unit(SRC.encode(), ["-DN=2"]) == "n2" and lookup.unit(bytearray(SRC.encode())) == "n7"
    for source, words in ((b"\xff\xfe", "source: b'\\xff\\xfe' is not UTF-8 text"),
                          (None, "source: None (NoneType) is not text"), (17, "source: 17 (int)")):
        with pytest.raises(ArgumentError, match="^" + words.replace("\\", "\\\\").replace("(", r"\(")
                           .replace(")", r"\)")):
            lookup.unit(source)
    with pytest.raises(ArgumentError, match="kernel_names: 3 \\(int\\) is not text"):
        lookup.kernels(SRC, [3])
    with pytest.raises(ArgumentError, match="kernel_names: None"):
        lookup.kernels(SRC, None)


def test_the_memo_never_holds_the_callers_object(flags_set):
    """A list changed between calls means its new flags; ``1`` and ``True`` stay apart in the memo."""
    from aot.core.srckey import normalize_options
    lookup = _lookup(flags_set)
    flags = ["-DN=2"]
    assert lookup.unit(SRC, flags) == "n2"
    flags[0] = "-DN=3"
    assert lookup.unit(SRC, flags) is None
    flags.clear()
    assert lookup.unit(SRC, flags) == "n7"
    assert normalize_options({"use_fast_math": True}) != normalize_options({"use_fast_math": 1})
    assert normalize_options({"use_fast_math": 1}).canonical == '{"use_fast_math":1}'


def test_program_options_and_normalised_values_agree():
    from cuda.core import ProgramOptions
    from aot.core.srckey import normalize_options, source_key
    want = normalize_options(["-DN=2", "-std=c++17"])
    assert normalize_options(ProgramOptions(arch="sm_90", std="c++17", define_macro=("N", "2"))) == want
    assert normalize_options(itertools.chain(["-std=c++17"], [b"-DN=2"])) == want
    assert hash(normalize_options({"define_macro": "N=2", "std": "c++17", "arch": "sm_80"})) == hash(want)
    assert source_key(SRC, want) == source_key(SRC, {"std": "c++17", "define_macro": "N=2"})


# ============================================================== 4. swapped keys: verify and the runtime
def _rewrite(root: Path, doc: dict) -> None:
    """``doc`` written as ``root``'s manifest by aot's own writer (so with its first-hit index)."""
    from aot.core.manifest import write_manifest
    base = ("format", "manifest_version", "producer", "specs", "artifacts")
    write_manifest(root, producer=doc["producer"], specs=doc["specs"], artifacts=doc["artifacts"],
                   extra={k: v for k, v in doc.items() if k not in base})
    assert (root / "hit-index.json").is_file()


def _swapped(src: Path, dst: Path, field: str, reindex: bool = False) -> Path:
    """``src`` copied with ``field`` swapped between n2's and n7's entries: by hand (its first-hit index then
    stale), or (``reindex``) rewritten through aot's own writer, so the index carries the swapped keys too."""
    shutil.copytree(src, dst)
    doc = json.loads((dst / "manifest.json").read_text())
    by = {(e["name"], e["payload_kind"]): e for e in doc["artifacts"]}
    for kind in ("cubin", "ptx"):
        a, b = by[("n2", kind)], by[("n7", kind)]
        a[field], b[field] = b[field], a[field]
    if reindex:
        _rewrite(dst, doc)
    else:
        (dst / "manifest.json").write_text(json.dumps(doc))
    return dst


@pytest.mark.parametrize("field", ["source_key", "progkey"])
def test_verify_recomputes_the_lookup_keys(flags_set, tmp_path, capsys, field):
    from aot.cli.main import main
    assert main(["verify", str(flags_set)]) == 0
    capsys.readouterr()
    bad = _swapped(flags_set, tmp_path / "set", field)
    rc = main(["verify", str(bad)])
    out, err = capsys.readouterr()
    assert rc == 7, out + err
    lines = [ln for ln in out.splitlines() if ln.startswith("problem:")]
    assert len(lines) == 4 and all(f"field {field}" in ln for ln in lines), out
    assert any("(unit n2)" in ln for ln in lines) and any("(unit n7)" in ln for ln in lines), out


def test_verify_of_progkeys_from_another_cuda_core(flags_set, tmp_path, capsys):
    """A set keyed by another cuda-core (its key schema may differ): not recomputed, so a true set passes;
    a key shared by two different compiles is still found."""
    from aot.cli.main import main
    root = tmp_path / "set"
    shutil.copytree(flags_set, root)
    doc = json.loads((root / "manifest.json").read_text())
    doc["producer"]["cuda_core"] = "0.9.0"
    (root / "manifest.json").write_text(json.dumps(doc))
    assert main(["verify", str(root)]) == 0
    by = {(e["name"], e["payload_kind"]): e for e in doc["artifacts"]}
    by[("n7", "cubin")]["progkey"] = by[("n2", "cubin")]["progkey"]
    (root / "manifest.json").write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["verify", str(root)]) == 7
    out = capsys.readouterr().out
    assert "field progkey is another entry's, of another compile" in out and "nvrtc/n" in out, out


@pytest.mark.parametrize("reindex", [False, True], ids=["index-stale", "index-swapped-too"])
def test_the_lookup_does_not_trust_a_swapped_source_key(flags_set, tmp_path, reindex):
    """Keys swapped by hand (the first-hit index then stale: one more warning) or written by aot's writer (the
    index carries them too): the first hit's check against the unit's own text catches either."""
    import warnings
    import aot
    bad = _swapped(flags_set, tmp_path / "set", "source_key", reindex)
    lookup = _lookup(bad)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        assert lookup.unit(SRC, iter(["-DN=2"])) == "n2"
    said = [str(w.message) for w in said if issubclass(w.category, aot.AotWarning)]
    assert len(said) == (1 if reindex else 2), said
    assert "source_key for unit n7 is not the key of its own source" in said[-1], said
    assert lookup.unit(SRC) == "n7"


def test_a_wrong_key_on_one_entry_of_a_checked_unit_is_caught(flags_set, tmp_path):
    """n2's cubin entry keeps its key (checked at the first call), its PTX entry records n7's: the next call
    for n7's source must not be served n2 because n2 was checked once."""
    import aot
    root = tmp_path / "set"
    shutil.copytree(flags_set, root)
    doc = json.loads((root / "manifest.json").read_text())
    by = {(e["name"], e["payload_kind"]): e for e in doc["artifacts"]}
    by[("n2", "ptx")]["source_key"] = by[("n7", "cubin")]["source_key"]
    by[("n7", "cubin")]["source_key"] = by[("n7", "ptx")]["source_key"] = "0" * 64
    _rewrite(root, doc)  # through aot's writer: the first-hit index carries the wrong keys too
    lookup = _lookup(root)
    assert lookup.unit(SRC, ["-DN=2"]) == "n2"
    with pytest.warns(aot.AotWarning, match="source_key for unit n2 is not the key of its own source"):
        assert lookup.unit(SRC) == "n7"


@pytest.mark.parametrize("reindex", [False, True], ids=["index-stale", "index-swapped-too"])
def test_the_program_cache_does_not_trust_a_swapped_progkey(flags_set, tmp_path, reindex):
    """``Program.compile(cache=...)`` with -DN=2 got n7's image from a manifest with swapped progkeys. Edited
    by hand, the first-hit index is stale (one warning, the manifest read); rewritten by aot's writer, the
    index carries the swapped keys, and its first hit is checked against the unit's own source the same way."""
    import warnings
    import aot
    from cuda.core import Program, ProgramOptions
    from aot.core import format as fmt
    from aot.core.manifest import load_manifest
    bad = _swapped(flags_set, tmp_path / "set", "progkey", reindex)
    cache = aot.program_cache("unused", registry=aot.Registry(bad))
    cache._user = None  # no user cache: a miss must not write into ~/.cache
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        code = Program(SRC, "c++", ProgramOptions(arch="sm_90", define_macro="N=2")).compile("cubin", cache=cache)
    said = [str(w.message) for w in said if issubclass(w.category, aot.AotWarning)]
    assert len(said) == (1 if reindex else 2), said
    assert re.search(r"progkey of .* \(unit n7\) is not cuda.core's key", said[-1]), said
    assert reindex or "first-hit index" in said[0] and "stale" in said[0], said
    m = load_manifest(bad)
    n2 = next(e for e in m.artifacts if e["name"] == "n2" and e["payload_kind"] == "cubin")
    assert bytes(code.code) == fmt.decode(m.path_of(n2).read_bytes()).payload
    assert cache.counts["packaged"] == 1


# ============================================================== 13. no driver; cache info counts
def test_cufunctions_without_a_driver_is_no_device_error(flags_set):
    """In a child: a failed call into a missing driver can leave cuda.bindings' lock held (driver.py)."""
    code = textwrap.dedent(f"""
        import aot
        from aot.core.errors import NoDeviceError
        lookup = aot.by_source("unused", registry=aot.Registry({str(flags_set)!r}))
        try:
            lookup.cufunctions({SRC!r}, ["write_n"], iter(["-DN=2"]))
        except NoDeviceError as e:
            print("NoDeviceError", str(e).count(chr(10)), e)
    """)
    r = subprocess.run([sys.executable, "-c", code], env=repo_env(), cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("NoDeviceError 0 by_source(...).cufunctions needs an NVIDIA "
                                                     "driver"), r.stdout + r.stderr


OTHER = 4242
as_root = pytest.mark.skipif(sys.platform != "linux" or __import__("os").geteuid() != 0,
                             reason="planting another uid's files needs root")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    monkeypatch.setenv("AOT_CACHE_DIR", str(root))
    return root


def _entry_bytes(name: str) -> bytes:
    import hashlib
    from aot.core import format as fmt
    payload = b"payload"
    producer = {"aot": "0", "cuda_cccl": "9.9.9", "cuda_major": 13, "nvrtc": "0", "nvjitlink": "0"}
    header = {"format_version": fmt.FORMAT_VERSION, "name": name, "family": "cccl", "sm": 90,
              "payload_kind": "cccl-blob", "content_key": "ab" * 32, "payload_size": len(payload),
              "payload_sha256": hashlib.sha256(payload).hexdigest(), "kernels": [], "producer": producer}
    return fmt.encode(header, payload)


@as_root
def test_cache_info_counts_only_the_users_own_entries(cache, capsys):
    import os
    from aot.cli.main import main
    shard = cache / "cccl" / "ab"
    shard.mkdir(parents=True, mode=0o700)
    mine, theirs, loose = (shard / (c * 32 + ".aot") for c in ("ab", "cd", "ef"))
    for p in (mine, theirs, loose):
        p.write_bytes(_entry_bytes(p.stem[:2]))
        p.chmod(0o600)
    os.chown(theirs, OTHER, OTHER)
    loose.chmod(0o666)
    nvrtc = cache / "nvrtc"
    nvrtc.mkdir(mode=0o700)
    (nvrtc / "own").write_bytes(b"x" * 10)
    (nvrtc / "foreign").write_bytes(b"y" * 1000)
    os.chown(nvrtc / "foreign", OTHER, OTHER)
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "; 1 CCCL entries" in out and "3 skipped (another user's, or writable by others" in out, out
    assert f"skipped entry {theirs}: entry is owned by uid {OTHER}" in out and f"skipped entry {loose}" in out, out
    assert "NVRTC (cuda.core cache): 1 files, 10 B" in out, out


def test_program_cache_refuses_a_program_name_that_is_not_text(flags_set):
    import aot
    from aot.core.errors import ArgumentError
    with pytest.raises(ArgumentError, match="^name: b'x' is not a program name"):
        aot.program_cache("unused", registry=aot.Registry(flags_set), name=b"x")
