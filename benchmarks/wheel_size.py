"""How large a library's wheel gets when it carries every SM of CUDA 13 and several cuda-cccl releases, as files
and as packs (issue 40).

    python benchmarks/wheel_size.py --work .gpu/wheel-size --json benchmarks/results/wheel_size.json
    python benchmarks/wheel_size.py --work .gpu/wheel-size --release-python PY [--release-python PY ...] --json ...

The inventory is :mod:`gen_libset`'s library-shaped set (35 CCCL specs, 180 NVRTC units: the shape of a public GPU
geospatial library). It is built for real on this driverless host with ``aot build``, for every SM the installed
NVRTC targets (CUDA 13.0: 75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121) unless ``--sm`` says otherwise.
Building all of it for 12 SMs takes hours on the 2-core host, so a sample is built (every ``--cccl-every``-th CCCL
spec, every ``--units-every``-th NVRTC unit: spread over the algorithms, dtypes and unit widths) and the full
inventory is extrapolated from it: the sample's bytes per family times (full count / sample count).

cuda-cccl releases: the installed one builds the sample, and each ``--release-python`` (an interpreter of an
environment with another cuda-cccl, as ``.ci/cccl_envs.sh`` makes them; aot runs from this checkout) builds it
again; the sets are merged (``aot merge``: a blob per release) and bundled twice, as files and as packs
(:mod:`aot.package.packing`). Releases carried beyond the ones built (``--releases``) are counted as copies of
the built ones' bytes, files and packs alike (no sharing assumed: an overestimate for packs), said in the report.

What is measured: each layout zipped as a wheel stores it (deflate level 6, hatchling's and ``wheel``'s
default; the sum per family from the zip's own members, headers counted), per-file xz for comparison, and the
first-call cost of a pack: in a fresh process per (spec, SM), reading one CCCL blob out of its pack (the read,
the ``lzma`` import, decoding up to the member) for the newest and the oldest release, against reading the
same blob as a file.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # this checkout's aot, not an installed one
from gen_libset import CCCL_SPECS, NVRTC_UNITS, SOURCE, matrix  # noqa: E402 - the library-shaped set, one definition

#: The package index's default upload limit for one file (PyPI: 100 MB; more by request).
INDEX_LIMIT = 100 * 10 ** 6
#: What a zip member costs besides its data: local header (30) + central directory entry (46) + the name twice.
ZIP_OVERHEAD = 76


def supported_sms() -> list[int]:
    """Every SM the installed NVRTC can target (CUDA 13.0: twelve)."""
    from cuda.bindings import nvrtc
    _, archs = nvrtc.nvrtcGetSupportedArchs()
    return sorted(int(a) for a in archs)


def sample(every_cccl: int, every_unit: int) -> tuple[list[str], list[str]]:
    names = [line.split("name: ", 1)[1].split(",", 1)[0] for line in matrix().splitlines() if "{name: " in line]
    cccl = [n for n in names if not n.startswith("lib_unit_")][::every_cccl]
    units = [n for n in names if n.startswith("lib_unit_")][::every_unit]
    return cccl, units


def release_of(python: str) -> str:
    code = "import importlib.metadata as m; print(m.version('cuda-cccl'))"
    return subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def build(work: Path, names: list[str], sms: list[int], jobs: int, python: str = sys.executable) -> Path:
    """The sample built with ``python`` (aot from this checkout) into ``work/out`` (reused where up to date)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "build_matrix.yaml").write_text(matrix())
    (work / "libset.cu").write_text(SOURCE)
    out = work / "out"
    cmd = [python, "-m", "aot", "build", "--matrix", str(work / "build_matrix.yaml"), "--sm",
           ",".join(map(str, sms)), "--only", ",".join(names), "--jobs", str(jobs), "-q", "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(HERE.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, env=env)
    print(f"built {len(names)} specs x {len(sms)} SMs with {python} in {time.monotonic() - t0:.0f} s (reused what "
          f"was up to date)", file=sys.stderr)
    return out


def zipped(folder: Path, dest: Path, prefix: str = "mylib/artifacts/") -> dict[str, int]:
    """``folder`` zipped as a wheel stores it; bytes per family (the path's first part) with the members'
    headers, and the zip file's size."""
    per: dict[str, int] = {}
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, prefix + p.relative_to(folder).as_posix())
    with zipfile.ZipFile(dest) as z:
        for i in z.infolist():
            fam = i.filename[len(prefix):].split("/", 1)[0] if "/" in i.filename[len(prefix):] else "manifest"
            per[fam] = per.get(fam, 0) + i.compress_size + ZIP_OVERHEAD + 2 * len(i.filename)
    per["zip_file"] = dest.stat().st_size
    return per


FIRST_CALL = """
import sys, time
from pathlib import Path
from aot.core.manifest import load_manifest
from aot.core.format import read_file
m = load_manifest(sys.argv[1])
entry = next(a for a in m.artifacts if a["path"] == sys.argv[2])
t0 = time.perf_counter()
import lzma
t1 = time.perf_counter()
from aot.core.pack import read_member
data = read_member(m, entry)
t2 = time.perf_counter()
same = read_file(Path(sys.argv[3]) / entry["path"], expect_size=entry["size"])
t3 = time.perf_counter()
assert data == same
print((t2 - t0) * 1e3, (t1 - t0) * 1e3, (t3 - t2) * 1e3)
"""


def first_call(packed: Path, files: Path, releases: list[str]) -> dict:
    """ms to read one CCCL blob out of its pack in a fresh process (``lzma`` imported, the pack read, decoded
    up to the member), per (spec, SM), for the newest and the oldest release; of it, the ``lzma`` import; and
    the same blob read as a file (its check, the sha256 against the manifest, is the same for both)."""
    from aot.core.manifest import load_manifest
    m = load_manifest(packed)
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    out: dict[str, list[float]] = {"newest": [], "oldest": [], "lzma_import": [], "file": []}
    for a in m.artifacts:
        rel = m.release_of(a)
        which = "newest" if rel == releases[-1] else "oldest" if rel == releases[0] else None
        if a["family"] != "cccl" or which is None:
            continue
        r = subprocess.run([sys.executable, "-c", FIRST_CALL, str(packed), a["path"], str(files)], env=env,
                           check=True, capture_output=True, text=True)
        unpack, lzma_import, plain = map(float, r.stdout.split())
        out[which].append(unpack)
        out["lzma_import"].append(lzma_import)
        out["file"].append(plain)
    from aot.core.pack import unpack_member
    for a in m.artifacts:  # the decoding alone, in this (warm) process: what a quiet core pays
        if a["family"] == "cccl":
            data = (packed / a["pack"]).read_bytes()
            t0 = time.perf_counter()
            unpack_member(data, a["path"], a["size"])
            ms = (time.perf_counter() - t0) * 1e3
            out["warm_decode_all"] = out.get("warm_decode_all", []) + [ms]
            if m.release_of(a) == releases[-1]:
                out["warm_decode_newest"] = out.get("warm_decode_newest", []) + [ms]
    return {k: {"median": round(statistics.median(v), 2), "max": round(max(v), 2), "n": len(v)}
            for k, v in out.items() if v}


def measure(work: Path, merged: Path, cccl: list[str], units: list[str], sms: list[int], built: list[str],
            releases: int) -> dict:
    from aot.package.bundle import write_package_folder
    layouts = {}
    for name, pack in (("files", False), ("packs", True)):
        folder = work / name / "artifacts"
        write_package_folder(merged, folder, {"sms": sms}, pack=pack)
        layouts[name] = zipped(folder, work / f"{name}.zip")
    man = json.loads((merged / "manifest.json").read_text())
    xz = {"cccl": 0, "nvrtc": 0}
    raw = {"cccl": 0, "nvrtc": 0}
    for a in man["artifacts"]:
        data = (merged / a["path"]).read_bytes()
        fam = "cccl" if a["family"] == "cccl" else "nvrtc"
        raw[fam] += len(data)
        xz[fam] += len(lzma.compress(data, preset=6)) + ZIP_OVERHEAD + 2 * len("mylib/artifacts/" + a["path"])
    layouts["xz_per_file"] = dict(xz)
    # the full inventory: sample x (full count / sample count); releases not built: copies of the built ones
    scale = {"cccl": CCCL_SPECS / len(cccl) * releases / len(built), "nvrtc": NVRTC_UNITS / len(units)}
    full = {}
    for name, per in layouts.items():
        fams = {f: round(per.get(f, 0) * scale[f]) for f in ("cccl", "nvrtc")}
        full[name] = {**fams, "manifest": round(per.get("manifest", 0) * scale["cccl"]),
                      "total": round(sum(fams.values()) + per.get("manifest", 0) * scale["cccl"])}
    return {
        "inventory": {"cccl_specs": CCCL_SPECS, "nvrtc_units": NVRTC_UNITS, "sms": sms, "cccl_releases": releases},
        "sample": {"cccl_specs": cccl, "nvrtc_units": len(units), "releases_built": built,
                   "artifacts": len(man["artifacts"]), "raw_bytes": raw, "wheel_bytes": layouts},
        "extrapolated": {**full, "index_limit": INDEX_LIMIT,
                         "how": "sample x (full count / sample count); cuda-cccl releases carried beyond the ones "
                                "built counted as copies of the built ones (files and packs alike)"},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path(".gpu/wheel-size"), help="build folder (kept: reruns reuse it)")
    ap.add_argument("--sm", default=None, help="SM list (default: every SM the installed NVRTC targets)")
    ap.add_argument("--cccl-every", type=int, default=7, help="build every Nth CCCL spec of the 35 (default 7: 5)")
    ap.add_argument("--units-every", type=int, default=15, help="build every Nth NVRTC unit of the 180 (15: 12)")
    ap.add_argument("--release-python", action="append", default=[],
                    help="an interpreter with another cuda-cccl (.ci/cccl_envs.sh): the sample is built under it too")
    ap.add_argument("--releases", type=int, default=4, help="cuda-cccl releases carried (1.1.0, 1.1.1, 1.2.0, 1.2.1)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--first-call", action=argparse.BooleanOptionalAction, default=True,
                    help="time reading each CCCL blob out of its pack in fresh processes")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    from aot.build.merge import merge
    from aot.core.manifest import release_order
    sms = [int(s) for s in a.sm.split(",")] if a.sm else supported_sms()
    cccl, units = sample(a.cccl_every, a.units_every)
    sets = {release_of(sys.executable): build(a.work, cccl + units, sms, a.jobs)}
    for py in a.release_python:
        rel = release_of(py)
        sets[rel] = build(a.work / f"cuda-cccl-{rel}", cccl + units, sms, a.jobs, python=py)
    built = sorted(sets, key=release_order)
    merged = a.work / "merged"
    shutil.rmtree(merged, ignore_errors=True)
    merge([sets[r] for r in reversed(built)], merged)
    doc = measure(a.work, merged, cccl, units, sms, built, max(a.releases, len(built)))
    if a.first_call:
        doc["first_call_ms"] = first_call(a.work / "packs" / "artifacts", a.work / "files" / "artifacts", built)
        doc["first_call_ms"]["load_average"] = [round(x, 1) for x in os.getloadavg()]  # the host's, as measured
    ex, mb = doc["extrapolated"], 1e6
    print(f"inventory: {CCCL_SPECS} CCCL specs x {doc['inventory']['cccl_releases']} cuda-cccl releases + "
          f"{NVRTC_UNITS} NVRTC units, SMs {','.join(map(str, sms))}; built: {len(cccl)} CCCL specs and "
          f"{len(units)} units under {', '.join(built)}")
    for name in ("files", "xz_per_file", "packs"):
        e = ex[name]
        print(f"  {name:12s} CCCL {e['cccl'] / mb:6.1f} MB  NVRTC {e['nvrtc'] / mb:5.1f} MB  total "
              f"{e['total'] / mb:6.1f} MB: {'OVER' if e['total'] > INDEX_LIMIT else 'under'} the index's "
              f"{INDEX_LIMIT / mb:.0f} MB")
    fc = doc.get("first_call_ms")
    if fc:
        print(f"first call (fresh process, one CCCL blob out of its pack): newest release {fc['newest']['median']} "
              f"ms median ({fc['newest']['max']} max; lzma's import {fc['lzma_import']['median']} of it), oldest "
              f"{fc.get('oldest', {}).get('median')} ms; as a file {fc['file']['median']} ms")
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
