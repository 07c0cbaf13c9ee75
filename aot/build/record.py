"""``aot record``: run a command (a library's test suite, a script) with a recording hook in its Python
processes, and write the build matrix of what it compiled, each source named where it lives.

The hook (:mod:`aot.build.record_hook`, stdlib only) is loaded by a ``sitecustomize`` in a private folder
put first on the command's ``PYTHONPATH``; every Python process of the command (pytest's workers, scripts
it starts) appends JSON lines to one private, bounded records file. This module reads them back and writes
the matrix: NVRTC units as ``source: "pkg.mod:ATTR"`` (a ``str`` constant) or ``"pkg.mod:function"`` with
the ``params`` that gave the text seen (checked byte for byte in the recorded process), options as the
library spelled them, cuda.compute specs through :mod:`aot.build.record_cccl`. What cannot be named is
listed with the reason, in the result and as comments at the top of the matrix.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import yaml

from ..core.errors import UsageError
from ..core.nvsource import flags_to_options, short_value, suggest_name, variant_name
from ..core.text import SpecError
from .cupy_build import entries_from_records
from .record_cccl import Unnamed, spec_fields, spec_name

#: Largest records file read back (the hook bounds its lines and their number; this bounds the whole).
MAX_RECORDS_BYTES = 256 * 1024 * 1024
HOOK = Path(__file__).with_name("record_hook.py")

_SITECUSTOMIZE = '''\
"""aot record: load the recording hook by path (no `import aot`), then the sitecustomize this one hides."""
import importlib.machinery as _m, importlib.util as _u, os as _os, sys as _sys
_spec = _u.spec_from_file_location("_aot_record_hook", _os.environ["AOT_RECORD_HOOK"])
_hook = _u.module_from_spec(_spec)
_sys.modules["_aot_record_hook"] = _hook
_spec.loader.exec_module(_hook)
_hook.install()
_here = _os.path.dirname(_os.path.abspath(__file__))
_sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
_next = _m.PathFinder.find_spec("sitecustomize", _sys.path)
if _next is not None and _next.origin and _os.path.dirname(_os.path.abspath(_next.origin)) != _here:
    _mod = _u.module_from_spec(_next)
    _next.loader.exec_module(_mod)
'''


@dataclass
class Recording:
    """What a recorded run gave: its exit code, the matrix's specs and what could not be named."""

    returncode: int
    nvrtc: list[dict] = field(default_factory=list)
    cccl: list[dict] = field(default_factory=list)
    cupy: list[dict] = field(default_factory=list)
    cupy_files: dict[str, str] = field(default_factory=dict)  # the sources cupy: entries name, beside the matrix
    unnamed: list[str] = field(default_factory=list)
    compiles: int = 0
    builds: int = 0
    notes: list[str] = field(default_factory=list)


def run_recorded(command: Sequence[str], packages: Sequence[str], stand_in: str | None = None,
                 cwd: Path | None = None) -> tuple[int, list[dict]]:
    """Run ``command`` with the hook in its Python processes; its exit code and the records."""
    if not command:
        raise UsageError("aot record: give the command to record after '--' (e.g. -- python -m pytest tests)")
    work = Path(tempfile.mkdtemp(prefix="aot-record-"))  # private (0700): the hook and the records file
    try:
        site = work / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        records = work / "records.jsonl"
        records.touch(mode=0o600)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
        env.update(AOT_RECORD_FILE=str(records), AOT_RECORD_HOOK=str(HOOK), AOT_RECORD_PACKAGES=",".join(packages))
        if stand_in:
            env["AOT_RECORD_STUB"] = stand_in
        try:
            rc = subprocess.run(list(command), env=env, cwd=cwd, check=False).returncode
        except FileNotFoundError:
            raise UsageError(f"aot record: command not found: {shlex.quote(command[0])}") from None
        return rc, list(_read_records(records))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _read_records(path: Path) -> Iterator[dict]:
    with open(path, "rb") as f:
        data = f.read(MAX_RECORDS_BYTES + 1)
    if len(data) > MAX_RECORDS_BYTES:
        yield {"kind": "overflow", "why": f"the records file passed {MAX_RECORDS_BYTES} bytes"}
        data = data[:MAX_RECORDS_BYTES]
    for line in data.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line cut by a killed process
        if isinstance(rec, dict):
            yield rec


def _options(rec: dict) -> Any:
    """The options as the library spelled them: flags (raw NVRTC, CuPy) or ProgramOptions fields."""
    opts = rec.get("options")
    if isinstance(opts, list):
        flags_to_options(opts)  # refuses what aot cannot build the same way (SpecError: not named)
        return opts
    return dict(sorted((opts or {}).items()))


def _where(rec: dict) -> str:
    site = rec.get("site") or []
    return f" (from {' <- '.join(site[:3])})" if site else ""


def _nvrtc_entries(recs: list[dict], out: Recording) -> None:
    groups: dict[tuple, dict] = {}
    seen_unnamed: set[str] = set()
    for rec in recs:
        why = rec.get("why")
        if rec.get("ref") and rec.get("headers"):
            why = f"compiled with {rec['headers']} in-memory header(s) (include_dirs are files beside the matrix)"
        if rec.get("ref") and not rec.get("kernels"):
            why = "no kernel names: no name expressions were given and the source has no extern \"C\" kernels"
        try:
            opts = _options(rec) if rec.get("ref") and not why else None
        except SpecError as e:
            why = f"its options: {e}"
        if not rec.get("ref") or why:
            if rec.get("sha1") not in seen_unnamed:
                seen_unnamed.add(rec.get("sha1", ""))
                out.unnamed.append(f"nvrtc source {str(rec.get('head', ''))[:60]!r}{_where(rec)}: {why}")
            continue
        key = (rec["ref"], json.dumps(opts, sort_keys=True), tuple(rec["kernels"]), "params" in rec)
        g = groups.setdefault(key, {"ref": rec["ref"], "options": opts, "kernels": rec["kernels"], "psets": []})
        if "params" in rec and rec["params"] not in g["psets"]:
            g["psets"].append(rec["params"])
    taken: set[str] = set()
    for g in groups.values():
        attr = g["ref"].split(":")[1]
        for suffix in ("_source", "_src", "_kernel"):
            attr = attr.removesuffix(suffix) if attr != suffix else attr
        base = suggest_name(attr.lower())
        entry: dict[str, Any] = {"name": base, "source": g["ref"], "kernels": list(g["kernels"])}
        psets = g["psets"]
        if psets:
            if len(psets) == 1:
                entry["name"] = "_".join([base, *(short_value(v) for v in psets[0].values())])
                entry["params"] = dict(psets[0])
            elif len({tuple(p) for p in psets}) == 1 and len(psets[0]) == 1:
                (k,) = psets[0]
                entry["params"] = {k: [p[k] for p in psets]}
            else:
                entry["params"] = psets
        if g["options"]:
            entry["options"] = g["options"]
        _unique_name(entry, psets, taken)
        out.nvrtc.append(entry)


def _unit_names(entry: dict, psets: list[dict]) -> list[str]:
    if len(psets) <= 1:
        return [entry["name"]]
    varying = [k for k in dict.fromkeys(k for p in psets for k in p) if len({repr(p.get(k)) for p in psets}) > 1]
    return [variant_name(entry["name"], p, varying) for p in psets]


def _unique_name(entry: dict, psets: list[dict], taken: set[str]) -> None:
    base, n = entry["name"], 1
    while set(_unit_names(entry, psets)) & taken:
        n += 1
        entry["name"] = f"{base}_{n}"
    taken.update(_unit_names(entry, psets))


def _cccl_entries(recs: list[dict], out: Recording) -> None:
    specs: list[dict] = []
    names: set[str] = set()
    for rec in recs:
        try:
            fields = spec_fields(rec)
        except Unnamed as e:
            line = f"cuda.compute.{rec.get('factory')}{_where(rec)}: {e}"
            if line not in out.unnamed:
                out.unnamed.append(line)
            continue
        if fields in [{k: v for k, v in s.items() if k != "name"} for s in specs]:
            continue
        base = name = spec_name(fields, rec.get("site") or [])
        n = 1
        while name in names:
            n += 1
            name = f"{base}_{n}"
        names.add(name)
        specs.append({"name": name, **fields})
    out.cccl.extend(specs)


def matrix_of(records: list[dict], returncode: int = 0) -> Recording:
    """The matrix entries (and what is not named) that ``records`` describe."""
    out = Recording(returncode)
    nvrtc = [r for r in records if r.get("kind") == "nvrtc"]
    cccl = [r for r in records if r.get("kind") == "cccl"]
    out.compiles, out.builds = len(nvrtc), len(cccl)
    out.notes = [str(r.get("why"))[:300] for r in records if r.get("kind") in ("skipped", "overflow")]
    _nvrtc_entries(nvrtc, out)
    _cccl_entries(cccl, out)
    out.cupy, out.cupy_files, unnamed = entries_from_records(records)  # CuPy's compiles (record_hook_cupy)
    out.unnamed += unnamed
    return out


def _flow(entry: dict) -> str:
    return yaml.safe_dump(entry, default_flow_style=True, sort_keys=False, width=1 << 20).strip()


def render_matrix(rec: Recording, command: Sequence[str]) -> str:
    """The matrix text: a header saying how it was made, what was not named (comments), then the specs."""
    said = " ".join(shlex.quote(c) for c in command).replace("\n", " ")[:300]
    lines = [f"# Written by `aot record` from: {said}",
             f"# {rec.compiles} NVRTC compiles seen, {len(rec.nvrtc)} entries; {rec.builds} cuda.compute builds "
             f"seen, {len(rec.cccl)} specs." + (f" {len(rec.cupy)} CuPy kernels." if rec.cupy else "")]
    if rec.unnamed:
        lines.append(f"# Not named ({len(rec.unnamed)}; not in this matrix):")
        lines += [f"#   - {u}".replace("\n", " ") for u in rec.unnamed]
    lines.append("version: 1")
    for section, entries in (("cccl", rec.cccl), ("nvrtc", rec.nvrtc), ("cupy", rec.cupy)):
        if entries:
            lines.append(f"{section}:")
            lines += [f"  - {_flow(e)}" for e in entries]
    return "\n".join(lines) + "\n"


def write_matrix(text: str, out: Path) -> None:
    """Written whole or not at all (a temp file beside it, then renamed)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def record(command: Sequence[str], out: Path, packages: Sequence[str], stand_in: str | None = None) -> Recording:
    """Run ``command`` recorded and write the matrix to ``out``; the command's exit code is in the result."""
    rc, records = run_recorded(command, packages, stand_in)
    rec = matrix_of(records, rc)
    for rel, text in rec.cupy_files.items():  # before the matrix that names them
        write_matrix(text, out.parent / rel)
    write_matrix(render_matrix(rec, command), out)
    return rec
