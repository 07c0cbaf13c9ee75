"""How large a library's wheel gets when it carries every SM of CUDA 13 and several cuda-cccl releases (issue 40).

    python benchmarks/wheel_size.py --work .gpu/wheel-size --json benchmarks/results/wheel_size.json

The inventory is :mod:`gen_libset`'s library-shaped set (35 CCCL specs, 180 NVRTC units: the shape of a public GPU
geospatial library). It is built for real on this driverless host with ``aot build``, for every SM the installed
NVRTC targets (CUDA 13.0: 75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121) unless ``--sm`` says otherwise.
Building all of it for 12 SMs takes hours on the 2-core host, so a sample is built (every ``--cccl-every``-th CCCL
spec, every ``--units-every``-th NVRTC unit: spread over the algorithms, dtypes and unit widths) and the full
inventory is extrapolated from it: the sample's bytes per family and SM times (full count / sample count).

What is measured: each artifact file's size as a wheel stores it (zip, deflate level 6, as ``wheel`` and hatchling
write; the member's headers counted), and an actual zip of the sample to check the sum. cuda-cccl releases: only
the installed one can build here; every further release is counted as another blob of the same size per spec and
SM (``--releases``; a blob loads only under the release that built it, so a wheel carries one per release; NVRTC
units do not depend on cuda-cccl and are carried once). That is an extrapolation, said in the report.

Cheaper encodings are measured on the same bytes: identical files stored once (sha256), and xz (lzma, preset 6)
per file with the time to undo it (the loader's first-call cost: decompressing one artifact).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import statistics
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
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


def build(work: Path, names: list[str], sms: list[int], jobs: int) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    (work / "build_matrix.yaml").write_text(matrix())
    (work / "libset.cu").write_text(SOURCE)
    out = work / "out"
    cmd = [sys.executable, "-m", "aot", "build", "--matrix", str(work / "build_matrix.yaml"), "--sm",
           ",".join(map(str, sms)), "--only", ",".join(names), "--jobs", str(jobs), "-q", "--out", str(out)]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True)
    print(f"built {len(names)} specs x {len(sms)} SMs in {time.monotonic() - t0:.0f} s (reused what was up to date)",
          file=sys.stderr)
    return out


def stored(data: bytes, name: str) -> int:
    """Bytes a wheel spends on one member: deflate level 6 (or stored, if deflate does not help) + headers."""
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    packed = len(c.compress(data) + c.flush())
    return min(packed, len(data)) + ZIP_OVERHEAD + 2 * len(name)


def measure(out: Path, cccl: list[str], units: list[str], sms: list[int], releases: int) -> dict:
    man = json.loads((out / "manifest.json").read_text())
    arts = [a for a in man["artifacts"] if a["name"] in set(cccl) | set(units)]
    prefix = "mylib/artifacts/"
    per: dict[str, dict[str, int]] = {"cccl": {}, "nvrtc": {}}
    raw = {"cccl": 0, "nvrtc": 0}
    xz = {"cccl": 0, "nvrtc": 0}
    digests: dict[str, int] = {}
    undo_ms = []
    for a in arts:
        data = (out / a["path"]).read_bytes()
        fam = "cccl" if a["family"] == "cccl" else "nvrtc"
        key = str(a["sm"]) if a.get("payload_kind") != "ptx" else f"ptx{a['sm']}"
        per[fam][key] = per[fam].get(key, 0) + stored(data, prefix + a["path"])
        raw[fam] += len(data)
        packed = lzma.compress(data, preset=6)
        xz[fam] += len(packed) + ZIP_OVERHEAD + 2 * len(prefix + a["path"])
        t0 = time.perf_counter()
        lzma.decompress(packed)
        undo_ms.append((time.perf_counter() - t0) * 1e3)
        digests[hashlib.sha256(data).hexdigest()] = len(data)
    scale = {"cccl": CCCL_SPECS / len(cccl) if cccl else 0.0, "nvrtc": NVRTC_UNITS / len(units) if units else 0.0}
    copies = {"cccl": releases, "nvrtc": 1}
    sample_deflate = {f: sum(v.values()) for f, v in per.items()}
    full = {f: sample_deflate[f] * scale[f] * copies[f] for f in per}
    full_xz = {f: xz[f] * scale[f] * copies[f] for f in per}
    # the manifest: one entry per artifact of the full inventory, compressed as its sample's share
    man_bytes = len(zlib.compress((out / "manifest.json").read_bytes(), 6))
    man_full = man_bytes * (sum(full.values()) / max(1, sum(sample_deflate.values())))
    check = out.parent / "sample.zip"
    with zipfile.ZipFile(check, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
        for a in arts:
            z.write(out / a["path"], prefix + a["path"])
    total = sum(full.values()) + man_full
    return {
        "inventory": {"cccl_specs": CCCL_SPECS, "nvrtc_units": NVRTC_UNITS, "sms": sms, "cccl_releases": releases},
        "sample": {"cccl_specs": cccl, "nvrtc_units": len(units), "artifacts": len(arts),
                   "raw_bytes": raw, "deflate_bytes": sample_deflate, "zip_file_bytes": check.stat().st_size,
                   "identical_files": len(arts) - len(digests)},
        "per_sm_deflate_bytes": per,
        "extrapolated": {"deflate_bytes": {**{f: round(v) for f, v in full.items()}, "manifest": round(man_full)},
                         "total_bytes": round(total), "over_index_limit": total > INDEX_LIMIT,
                         "xz_bytes": {f: round(v) for f, v in full_xz.items()},
                         "xz_total_bytes": round(sum(full_xz.values()) + man_full),
                         "per_release_cccl_bytes": round(full["cccl"] / max(1, releases)),
                         "how": "sample x (full count / sample count); every release beyond the installed one "
                                "counted as a blob of the same size (not built)"},
        "xz_undo_ms": {"median": round(statistics.median(undo_ms), 3), "max": round(max(undo_ms), 3)},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path(".gpu/wheel-size"), help="build folder (kept: reruns reuse it)")
    ap.add_argument("--sm", default=None, help="SM list (default: every SM the installed NVRTC targets)")
    ap.add_argument("--cccl-every", type=int, default=7, help="build every Nth CCCL spec of the 35 (default 7: 5)")
    ap.add_argument("--units-every", type=int, default=15, help="build every Nth NVRTC unit of the 180 (15: 12)")
    ap.add_argument("--releases", type=int, default=4, help="cuda-cccl releases carried (1.1.0, 1.1.1, 1.2.0, 1.2.1)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    sms = [int(s) for s in a.sm.split(",")] if a.sm else supported_sms()
    cccl, units = sample(a.cccl_every, a.units_every)
    out = build(a.work, cccl + units, sms, a.jobs)
    doc = measure(out, cccl, units, sms, a.releases)
    ex = doc["extrapolated"]
    mb = 1e6
    print(f"inventory: {CCCL_SPECS} CCCL specs x {a.releases} cuda-cccl releases + {NVRTC_UNITS} NVRTC units, "
          f"SMs {','.join(map(str, sms))}")
    print(f"sample built: {len(cccl)} CCCL specs, {len(units)} units; zip of the sample "
          f"{doc['sample']['zip_file_bytes'] / mb:.2f} MB (per-member sum "
          f"{sum(doc['sample']['deflate_bytes'].values()) / mb:.2f} MB)")
    print(f"wheel (deflate, as wheels store it): CCCL {ex['deflate_bytes']['cccl'] / mb:.1f} MB "
          f"({ex['per_release_cccl_bytes'] / mb:.1f} MB per release), NVRTC {ex['deflate_bytes']['nvrtc'] / mb:.1f} MB, "
          f"total {ex['total_bytes'] / mb:.1f} MB: {'OVER' if ex['over_index_limit'] else 'under'} the index's "
          f"{INDEX_LIMIT / mb:.0f} MB")
    print(f"identical files in the sample: {doc['sample']['identical_files']}; xz per file: total "
          f"{ex['xz_total_bytes'] / mb:.1f} MB, undoing one {doc['xz_undo_ms']['median']:.2f} ms median, "
          f"{doc['xz_undo_ms']['max']:.2f} ms max")
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
