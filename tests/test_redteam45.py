"""The red team's cases of issue 45 (CPU only). Each test failed before its fix:

1. ``aot merge``: a release string from an input (``producer.cuda_cccl``, a merged input's ``producers``) built
   the output path unchecked, so a foreign input wrote a file of its choosing outside ``--out``, exit 0;
2. ``aot merge``: an input claiming a newer cuda-cccl release replaced the genuine NVRTC cubin under the same
   content key (logged at INFO), and every user of every release loaded the foreign bytes;
3. the numba launch store (``launches.json`` and its ``.npz``) was read unbounded: a 400 MB index took 837 MB, a
   symlink to ``/dev/zero`` ran until MemoryError, a FIFO blocked ``verify`` forever, a 2 MB zip bomb inflated
   to 2 GiB, and non-object ``args`` raised an AttributeError traceback;
4. ``aot/build/image_symbols.py`` (inside ``aot record``'s hook) was quadratic on hostile images: PTX with
   60,000 blank lines took 41 s, an ELF with 4,000 symbol tables of entry size 1 took 32 s;
5. the pin check evaluated markers for the build host only (``; python_version >= "3.12"`` on a 3.11 build)
   and read ``cuda-cccl @ URL`` as any version: wheels that cannot install built with exit 0;
6. the environment matrix resolved ``cccl-aot-cu13`` from the index and the wheelhouse together (a stand-in
   index offering 0.1.9 was installed and "checked" in place of the checkout's 0.1.0), and ``.ci/envs.sh``
   left 1.4 GB in ``~/.cache/uv`` and ``~/.cache/nox``;
7. ``aot record`` with no terminal (CI cancelling, ``kill -INT -PGID``) sent the command a second SIGINT after
   the group's, interrupting its own cleanup in 10 of 10 trials.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from aot.build.merge import merge
from aot.core.errors import ArtifactError
from aot.core.manifest import MANIFEST_NAME
from tests.conftest import ROOT, repo_env
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
    """Claiming another cuda-core and another content key as well does not change what can change a cubin that
    includes nothing from cuda-cccl: still a conflict."""
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


def _as_release(src: Path, dst: Path, release: str, payload: bytes | None = None) -> Path:
    """The real set ``src`` as if built under ``release``: every artifact's header stamped with it (as a build
    there stamps it); with ``payload``, every NVRTC cubin's payload replaced too (a foreign input)."""
    from aot.core import format as fmt
    from tests.hostile_util import restamp
    shutil.copytree(src, dst)
    doc = json.loads((dst / MANIFEST_NAME).read_text())
    doc["producer"]["cuda_cccl"] = release
    for e in doc["artifacts"]:
        if e["family"] == "cccl":
            e["cuda_cccl"] = release
        data = (dst / e["path"]).read_bytes()
        changes: dict = {"producer": {"cuda_cccl": release}}
        if payload is not None and e["family"] == "nvrtc" and e["payload_kind"] == "cubin":
            header = fmt.read(dst / e["path"]).header
            data = fmt.encode({**header, "payload_size": len(payload),
                               "payload_sha256": hashlib.sha256(payload).hexdigest()}, payload)
        data = restamp(data, **changes)
        (dst / e["path"]).write_bytes(data)
        e.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    (dst / MANIFEST_NAME).write_text(json.dumps(doc))
    return dst


def test_real_artifacts_of_two_releases_merge_and_a_foreign_cubin_does_not(small_build, tmp_path):
    """The session's real build beside itself as built under 9.9.9: the NVRTC artifacts' files differ (their
    headers name the release), their content does not: one copy each. A 9.9.9 set whose cubins hold other
    bytes under the same content keys: refused, every cubin named."""
    other = _as_release(small_build.out, tmp_path / "other", "9.9.9")
    merge([small_build.out, other], tmp_path / "merged")
    from aot.core.manifest import load_manifest, verify_files
    m = load_manifest(tmp_path / "merged")
    assert verify_files(m) == [] and len(m.cccl_releases()) == 2
    units = [e for e in m.artifacts if e["family"] == "nvrtc"]
    assert units and all(e["cuda_cccl"] == "9.9.9" for e in units)
    foreign = _as_release(small_build.out, tmp_path / "foreign", "9.9.9", payload=b"\x7fELF foreign")
    cubins = [e for e in load_manifest(foreign).artifacts if e["family"] == "nvrtc" and e["payload_kind"] == "cubin"]
    with pytest.raises(ArtifactError, match=rf"^merge: {len(cubins)} artifact\(s\) conflict") as e:
        merge([small_build.out, foreign], tmp_path / "refused")
    assert all(c["path"] in str(e.value) for c in cubins)


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


# ------------------------------------------------------------------------------------------ 3. the numba store
def _numba_store(folder: Path, npz: bytes, **entry_over) -> dict:
    """A numba launch store of one launch (``axpy.1``) whose ``.npz`` is ``npz``, as ``aot record`` writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "axpy.1.npz").write_bytes(npz)
    entry = {"kernel": "m:axpy", "signature": "void(int64[::1])", "grid": [1, 1, 1], "block": [1, 1, 1],
             "sharedmem": 0, "args": [{"array": True, "dtype": "int64", "shape": [2]}], "file": "axpy.1.npz",
             "sha256": hashlib.sha256(npz).hexdigest(), **entry_over}
    (folder / "launches.json").write_text(json.dumps({"version": 1, "launches": {"axpy.1": entry}}))
    return entry


def _npz(**arrays) -> bytes:
    import io

    import numpy as np
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _bomb(path: Path) -> bytes:
    """An ``.npz`` of 64 KiB whose one member inflates to 64 MiB (a valid array of zeros)."""
    import numpy as np
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z, z.open("in0.npy", "w",
                                                                                    force_zip64=True) as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": (8 << 20,)})
        for _ in range(64):
            f.write(bytes(1 << 20))
    return path.read_bytes()


def _claims(path: Path) -> bytes:
    """An ``.npz`` whose member's header claims 2**40 elements it does not hold."""
    import numpy as np
    with zipfile.ZipFile(path, "w") as z, z.open("in0.npy", "w") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": False, "shape": (1 << 40,)})
    return path.read_bytes()


_HOSTILE = {
    "big index": lambda d: os.truncate(d / "launches.json", 400 << 20),
    "index is /dev/zero": lambda d: ((d / "launches.json").unlink(), (d / "launches.json").symlink_to("/dev/zero")),
    "index is a FIFO": lambda d: ((d / "launches.json").unlink(), os.mkfifo(d / "launches.json")),
    "npz is /dev/zero": lambda d: ((d / "axpy.1.npz").unlink(), (d / "axpy.1.npz").symlink_to("/dev/zero")),
    "npz is a FIFO": lambda d: ((d / "axpy.1.npz").unlink(), os.mkfifo(d / "axpy.1.npz")),
    "npz is a zip bomb": lambda d: _numba_store(d, _bomb(d / "bomb.zip")),
    "npz claims 2**40 elements": lambda d: _numba_store(d, _claims(d / "claims.zip")),
}


@pytest.mark.parametrize("case", list(_HOSTILE))
def test_the_numba_store_is_read_bounded(tmp_path, case):
    """Each case in a process of its own with 1 GiB of address space and 20 s: before, the index cases read
    until memory ran out (or blocked), the bomb inflated whole; now each is one line naming the file."""
    folder = tmp_path / "build_matrix.launches"
    _numba_store(folder, _npz(in0=[0, 0], out0=[1, 1]))
    _HOSTILE[case](folder)
    script = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from pathlib import Path
        from aot.verify import launches
        folder = Path({str(folder)!r})
        try:
            index = launches.read_index(folder)
            launches._load(folder, index["axpy.1"])
        except Exception as e:
            print(type(e).__name__, str(e).replace(chr(10), "|"))
        else:
            print("read it whole")
    """)
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=20,
                              cwd=ROOT, env=repo_env())
    except subprocess.TimeoutExpired:
        pytest.fail(f"{case}: still reading after 20 s")
    kind, _, msg = proc.stdout.strip().partition(" ")
    assert proc.returncode == 0 and kind == "LaunchStoreError", (proc.stdout, proc.stderr[-2000:])
    assert str(folder) in msg and "|" not in msg, msg


@pytest.mark.parametrize("field, value", [("args", [1, 2]), ("args", {"a": 1}), ("grid", "x"), ("block", [0, 1, 1]),
                                          ("sharedmem", -1), ("file", "../x.npz"), ("sha256", 5)])
def test_a_numba_store_entry_of_the_wrong_shape_is_one_line(tmp_path, field, value):
    from aot.verify import launches
    from aot.verify.replay import LaunchStoreError
    folder = tmp_path / "l"
    _numba_store(folder, _npz(in0=[0, 0], out0=[1, 1]), **{field: value})
    with pytest.raises(LaunchStoreError) as e:
        launches._load(folder, launches.read_index(folder)["axpy.1"])
    assert "\n" not in str(e.value) and str(folder / "launches.json") in str(e.value) and field in str(e.value)


def test_a_good_numba_store_still_reads(tmp_path):
    from aot.verify import launches
    folder = tmp_path / "l"
    _numba_store(folder, _npz(in0=[0, 0], out0=[1, 1]))
    arrays = launches._load(folder, launches.read_index(folder)["axpy.1"])
    assert sorted(arrays) == ["in0", "out0"] and arrays["out0"].tolist() == [1, 1]


def test_aot_record_reads_an_earlier_index_bounded(tmp_path):
    """``aot record`` reads the index an earlier recording left (to remove the files only it named): a FIFO or
    ``/dev/zero`` in its place blocked or filled memory; now it is replaced like an unreadable one."""
    folder = tmp_path / "build_matrix.launches"
    folder.mkdir()
    os.mkfifo(folder / "launches.json")
    (folder / "index.json").symlink_to("/dev/zero")
    script = textwrap.dedent(f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from pathlib import Path
        from aot.record.record import write_launches
        from aot.record.launch_store import store
        folder = Path({str(folder)!r})
        write_launches({{}}, folder)
        store([], {{}}, folder)
        print("done")
    """)
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=20,
                              cwd=ROOT, env=repo_env())
    except subprocess.TimeoutExpired:
        pytest.fail("still reading after 20 s")
    assert proc.stdout.strip() == "done", proc.stderr[-2000:]
    assert json.loads((folder / "launches.json").read_text()) == {"version": 1, "launches": {}}


# ------------------------------------------------------------------------------------------ 4. image symbols
def _elf(tables: int, entsize: int, region: int = 8192) -> bytes:
    """An ELF64 image: a section-name table, a string table and ``tables`` symbol tables all over one region of
    ``region`` bytes of symbols (each a global entry function of one name in a section of that name)."""
    import struct
    shstr = b"\0.text.k\0.strtab\0.symtab\0"
    strtab = b"\0k\0"
    sym = struct.pack("<IBBHQQ", 1, 0x12, 0x10, 3, 0, 0)  # name "k", GLOBAL FUNC, entry, section 3 (.text.k)
    symbols = (sym * (region // len(sym) + 1))[:region]
    body = shstr + strtab + symbols
    shoff = 64 + len(body)
    sections = [(0, 0, 0, 0, 0, 0)]  # (name, type, offset, size, link, entsize)
    sections.append((shstr.index(b".strtab"), 3, 64, len(shstr), 0, 0))           # 1: .shstrtab (named .strtab)
    sections.append((shstr.index(b".strtab"), 3, 64 + len(shstr), len(strtab), 0, 0))  # 2: .strtab
    sections.append((shstr.index(b".text.k"), 1, 0, 0, 0, 0))                      # 3: .text.k
    sections += [(shstr.index(b".symtab"), 2, 64 + len(shstr) + len(strtab), region, 2, entsize)] * tables
    header = b"\x7fELF\x02\x01\x01" + bytes(9) + struct.pack("<HHIQQQIHHHHHH", 1, 190, 1, 0, 0, shoff, 0, 64, 0, 0,
                                                                64, len(sections), 1)
    table = b"".join(struct.pack("<IIQQQQIIQQ", n, t, 0, 0, o, sz, ln, 0, 0, es) for n, t, o, sz, ln, es in sections)
    return header + body + table


def _timed_symbols(tmp_path: Path, image: bytes) -> tuple[float, str]:
    """``kernel_symbols(image)`` in a process of its own (the module loaded by path, as the hook loads it):
    (seconds, what it returned or raised); a run past 20 s fails the test."""
    (tmp_path / "image").write_bytes(image)
    script = textwrap.dedent(f"""
        import importlib.util, time
        spec = importlib.util.spec_from_file_location("s", {str(ROOT / "aot/build/image_symbols.py")!r})
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        data = open({str(tmp_path / "image")!r}, "rb").read()
        t = time.perf_counter()
        try:
            got = repr(m.kernel_symbols(data))
        except m.ImageError as e:
            got = "ImageError: " + str(e)
        print(time.perf_counter() - t, got)
    """)
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("kernel_symbols still reading after 20 s")
    seconds, _, got = proc.stdout.strip().partition(" ")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return float(seconds), got


def test_ptx_with_many_blank_lines_is_read_in_linear_time(tmp_path):
    for ptx in (b".version 8.0\n.target sm_80\n" + b"\n" * 60_000,
                b".version 8.0\n" + b" \t\n" * 60_000 + b".visible .entry k(\n)\n",
                b".version 8.0\n" + b".visible \n" * 60_000 + b".func f(\n"):
        seconds, got = _timed_symbols(tmp_path, ptx)
        assert got == ("['k']" if b".entry" in ptx else "[]") and seconds < 2, (seconds, got)


def test_elf_with_many_symbol_tables_is_read_in_bounded_time(tmp_path):
    seconds, got = _timed_symbols(tmp_path, _elf(1, 24))
    assert got == "['k']", got  # the builder makes a readable image
    for tables, entsize in ((4000, 1), (4000, 24)):
        seconds, got = _timed_symbols(tmp_path, _elf(tables, entsize))
        assert seconds < 2 and got.startswith("ImageError"), (tables, entsize, seconds, got)


# ------------------------------------------------------------------------------------------ 5. the pin check
HOST = f"{sys.version_info[0]}.{sys.version_info[1]}"


@pytest.mark.parametrize("marker", [f'python_version != "{HOST}"', 'sys_platform == "win32"',
                                    'platform_machine == "aarch64" or python_version > "3.99"',
                                    f'extra == "gpu" and python_version != "{HOST}"'])
def test_a_requirement_is_checked_wherever_its_marker_holds(marker):
    """False on this build host, true on another Python or platform the wheel installs on: still checked."""
    from aot.package.pins import pin_problems
    from tests.test_cccl_releases import producer
    deps = ["cccl-aot-cu13>=0.1.0,<0.2", f"cuda-cccl==1.1.0; {marker}"]
    optional = {"gpu": deps[1:]} if "extra" in marker else {}
    problems = pin_problems(deps[:1] if optional else deps, producer("1.2.1"), require=False, optional=optional)
    assert len(problems) == 1 and "admits no cuda-cccl the artifacts load under" in problems[0], problems
    assert marker.split()[0] in problems[0]


def test_a_marker_that_holds_nowhere_is_still_skipped():
    from aot.package.pins import pin_problems
    from tests.test_cccl_releases import producer
    assert pin_problems(["cccl-aot-cu13", 'cuda-cccl==1.1.0; python_version < "3"'], producer("1.2.1"),
                        require=False) == []


@pytest.mark.parametrize("req", ["cuda-cccl @ https://example.invalid/cuda_cccl-9.9.9-py3-none-any.whl",
                                 "cccl-aot-cu13 @ file:///tmp/cccl_aot_cu13-0.1.0-py3-none-any.whl",
                                 "cuda-bindings @ git+https://example.invalid/cuda-python"])
def test_a_url_requirement_for_a_pinned_package_is_refused(req):
    from aot.package.pins import pin_problems
    from tests.test_cccl_releases import producer
    deps = ["cccl-aot-cu13>=0.1.0,<0.2", "cuda-cccl==1.2.1", req]
    problems = pin_problems(deps, producer("1.2.1"), require=False)
    assert len(problems) == 1 and "URL" in problems[0] and req in problems[0], problems


# ------------------------------------------------------------------------------------------ 6. the env matrix
def _wheel_file(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A minimal pure wheel (metadata only): enough for pip to resolve it."""
    dist = name.replace("-", "_")
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    files = {f"{info}/METADATA": "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
             + "".join(f"Requires-Dist: {r}\n" for r in requires),
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{k},,\n" for k in files) + f"{info}/RECORD,,\n"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        for k, v in files.items():
            z.writestr(k, v)
    return path


class _Session:
    """nox's session as ``noxfile.envs`` uses it: each ``run`` recorded; the load check writes its result."""

    def __init__(self):
        self.runs: list[tuple] = []

    def install(self, *args, **kw):
        pass

    def run(self, *args, env=None, **kw):
        self.runs.append(args)
        if "--out" in args:
            Path(args[args.index("--out") + 1]).write_text("{}")

    def chdir(self, where):
        pass

    def log(self, *a):
        pass


def test_the_matrix_installs_the_checkouts_own_runtime_whatever_the_index_offers(tmp_path, monkeypatch):
    """``noxfile.envs``'s own pip commands, run by pip (``--dry-run``) with a stand-in index offering
    cccl-aot-cu13 0.1.9 beside the wheelhouse's 0.1.0: the checkout's 0.1.0 is what gets installed."""
    import importlib
    import types
    stub = types.ModuleType("nox")
    stub.session = lambda *a, **k: (lambda f: f)  # type: ignore[attr-defined]
    stub.parametrize = lambda *a, **k: (lambda f: f)  # type: ignore[attr-defined]
    stub.options = types.SimpleNamespace()  # type: ignore[attr-defined]
    stub.Session = object  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nox", stub)
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delitem(sys.modules, "noxfile", raising=False)
    noxfile = importlib.import_module("noxfile")
    work = tmp_path / "envs"
    house, index = work / "wheelhouse", tmp_path / "index"
    _wheel_file(house, "cccl-aot-cu13", "0.1.0")
    _wheel_file(index, "cccl-aot-cu13", "0.1.9")
    for role in ("nvrtc", "numba"):
        _wheel_file(house, noxfile.EXAMPLES[role][1].replace("_", "-"), "0.1.0", ("cccl-aot-cu13>=0.1.0,<0.2",))
    monkeypatch.setattr(noxfile, "WORK", work)
    monkeypatch.setattr(noxfile, "WHEELHOUSE", house)
    monkeypatch.setattr(noxfile, "RESULTS", work / "results")
    monkeypatch.setitem(noxfile.ENVS, "stand-in", {"stack": [], "constraints": [], "cccl": False, "what": "test"})
    session = _Session()
    noxfile.envs(session, "stand-in")
    installs = [r for r in session.runs if r[1:4] == ("-m", "pip", "install")]
    assert len(installs) == 2
    for args in installs:
        report = tmp_path / "report.json"
        proc = subprocess.run([sys.executable, *args[1:], "--dry-run", "--ignore-installed", "--no-index",
                               "--find-links", str(index), "--report", str(report)],
                              capture_output=True, text=True, timeout=120, env=repo_env(PIP_NO_INPUT="1"))
        assert proc.returncode == 0, proc.stderr[-2000:]
        got = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
        assert got["cccl-aot-cu13"] == "0.1.0", got
        report.unlink()
    shutil.rmtree(work / "tmp", ignore_errors=True)


def test_envs_sh_leaves_no_cache_behind(tmp_path):
    """``.ci/envs.sh`` with a stand-in nox that fills whatever caches it is given: nothing in ``~/.cache``,
    nothing left in the temp dir."""
    repo, home, tmp = tmp_path / "repo", tmp_path / "home", tmp_path / "tmp"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "envs.sh", repo / ".ci" / "envs.sh")
    tools = repo / "build" / "envs" / "tools" / "bin"
    tools.mkdir(parents=True)
    (tools / "nox").write_text('#!/bin/sh\nfor d in "${UV_CACHE_DIR:-$HOME/.cache/uv}" "${XDG_CACHE_HOME:-$HOME/.cache}/nox" '
                               '"${PIP_CACHE_DIR:-$HOME/.cache/pip}"; do mkdir -p "$d/w" && chmod a-w "$d/w"; done\n')
    (tools / "nox").chmod(0o755)
    home.mkdir()
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("UV_CACHE_DIR", "PIP_CACHE_DIR", "XDG_CACHE_HOME")}
    proc = subprocess.run(["bash", str(repo / ".ci" / "envs.sh")], env={**env, "HOME": str(home), "TMPDIR": str(tmp)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert list(home.rglob("*")) == [] and list(tmp.iterdir()) == []


# ------------------------------------------------------------------------------------------ 7. SIGINT once
_COUNTER = """
import os, select, signal, sys, time
# Python runs a handler once for signals that arrive before it gets to it; the wakeup fd gets a byte per delivery.
r, w = os.pipe()
os.set_blocking(w, False)
signal.signal(signal.SIGINT, lambda *a: None)
signal.set_wakeup_fd(w)
open(sys.argv[1], "w").close()
got = b""
first = None
deadline = time.monotonic() + 15
while time.monotonic() < deadline and not (first and time.monotonic() - first > 1.0):
    if select.select([r], [], [], 0.05)[0]:
        got += os.read(r, 64)
        first = first or time.monotonic()
open(sys.argv[2], "w").write(str(got.count(bytes([signal.SIGINT]))))
"""

_DRIVER = """
import sys
from aot.record.run import _run
rc, got = _run([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]], dict(__import__("os").environ), None)
print(rc, got)
"""


@pytest.mark.parametrize("trial", range(3))
def test_a_group_sigint_reaches_the_command_once_without_a_terminal(tmp_path, trial):
    """``_run`` (what ``aot record`` runs the command with) in a session of its own, no terminal anywhere; the
    group gets one SIGINT (``kill -INT -PGID``); the command counts what it gets: one."""
    import signal
    import time
    ready, count = tmp_path / "ready", tmp_path / "count"
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER, _COUNTER, str(ready), str(count)], cwd=ROOT,
                            env=repo_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert ready.exists(), proc.communicate(timeout=5)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert out.split() == ["0", "SIGINT"], (out, err)
    assert count.read_text() == "1"
