#!/usr/bin/env python3
"""A mutant of any family for the gates (issues 31, 41): a kernel built from edited code, shipped under the
original name and key. ``aot verify --gpu --package PKG`` (numba: .ci/gpu/numba.sh) and ``aot gate``
(.ci/gpu/gate_all.sh: CCCL, NVRTC, numba-cuda, CuPy) must FAIL on it.

From a project (its matrix and package) and the artifact folder built from it, writes ``--out``: the base's
artifact folder (manifest, aot-package.json) in which every artifact of ``--spec`` carries the payload of the
same spec built from the EDITED project (``--edit OLD NEW`` in the package's ``.py`` files, or in ``--file``: a
kernel's body, an NVRTC source, a CuPy kernel's ``.cu``, a CCCL spec's operator in the matrix; it must apply
once).
The manifest keeps the original definition (digest of the unedited source) and every header the original
name and content key; only the payload's size and sha256 are recomputed, so integrity, the loader's checks
and the attach gate (the installed source is the original) all pass: only running the kernel can tell.

    python .ci/gpu/edit_mutant.py --project examples/numba-mypkg --base SITE/numba_mypkg/artifacts \\
        --spec axpy.0 --edit "a * x[i] + y[i]" "a * x[i] - y[i]" --out MUTANT
    python .ci/gpu/edit_mutant.py --project examples/cupy-mypkg --base SITE/cupy_mypkg/artifacts --spec SPEC \\
        --file cupy-kernels/cupy_subtract__float32_float32_float32.0.cu --edit "in0 - in1" "in0 + in1" --out MUTANT
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_mutants import loader_problems, write_mutant  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--project", type=Path, required=True, help="the folder of build_matrix.yaml and the package")
    ap.add_argument("--base", type=Path, required=True, help="the artifact folder built from the project")
    ap.add_argument("--spec", required=True, help="the spec to mutate (e.g. axpy.0)")
    ap.add_argument("--edit", nargs=2, metavar=("OLD", "NEW"), required=True, help="a text edit of the kernel body")
    ap.add_argument("--file", default=None, help="the project file to edit (default: the one .py file holding OLD)")
    ap.add_argument("--matrix", default="build_matrix.yaml")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    base = a.base.resolve()
    doc = json.loads((base / "manifest.json").read_text())
    entries = [e for e in doc["artifacts"] if e["name"] == a.spec]
    if not entries or a.spec not in doc["specs"]:
        raise SystemExit(f"{base}: no spec {a.spec!r}")
    family = entries[0]["family"]
    sms = sorted({e["sm"] for e in entries if e["payload_kind"] in ("cubin", "cccl-blob")})
    with tempfile.TemporaryDirectory(prefix="aot-numba-mutant-") as tmp:
        proj = Path(tmp) / "project"
        shutil.copytree(a.project, proj, ignore=shutil.ignore_patterns("build", "artifacts", "dist", "*.egg-info",
                                                                       "__pycache__"))
        files = [proj / a.file] if a.file else list(proj.rglob("*.py"))
        hits = [p for p in files if p.is_file() and a.edit[0] in p.read_text()]
        if len(hits) != 1 or hits[0].read_text().count(a.edit[0]) != 1:
            raise SystemExit(f"--edit {a.edit[0]!r}: must occur exactly once in the project's files "
                             f"(found in {len(hits)} files)")
        hits[0].write_text(hits[0].read_text().replace(*a.edit))
        out = Path(tmp) / "out"
        r = subprocess.run([sys.executable, "-m", "aot", "build", "--matrix", str(proj / a.matrix), "--sm",
                            ",".join(map(str, sms)), "--only", a.spec, "--out", str(out), "--jobs", "1", "-q"],
                           cwd=proj, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"building the mutant failed: {(r.stderr or r.stdout)[-2000:]}")
        from aot.core.format import read
        swaps = {}
        for e in entries:
            art = read(out / e["path"])
            swaps[e["path"]] = (art.payload, {k: art.header[k] for k in ("entry", "links") if k in art.header})
        info = {"must_fail": a.spec, "mutation": f"{family}-edit", "description": f"{hits[0].name}: "
                f"{a.edit[0]!r} -> {a.edit[1]!r} after the build"}
        write_mutant(base, a.out, swaps, info)
    for extra in ("aot-package.json",):  # the package folder's own files (its checks)
        if (base / extra).is_file():
            shutil.copyfile(base / extra, a.out / extra)
    problems = loader_problems(base, a.out)
    if problems:
        raise SystemExit(f"{a.out}: the loader would notice the mutant: {problems[:3]}")
    print(f"{a.out}: {a.spec} ({len(entries)} artifacts) built from the edited body, under the original key")
    return 0


if __name__ == "__main__":
    sys.exit(main())
