"""``aot record``: run a command (a library's test suite, a script) with a recording hook in its Python
processes, and write the build matrix of what it compiled, each source named where it lives.

The hook (:mod:`aot.record.hook`, stdlib only) is loaded by a ``sitecustomize`` in a private folder
put first on the command's ``PYTHONPATH``; every Python process of the command (pytest's workers, scripts
it starts) appends JSON lines to one private, bounded records file. This module reads them back and writes
the matrix: NVRTC units as ``source: "pkg.mod:ATTR"`` (a ``str`` constant) or ``"pkg.mod:function"`` with
the ``params`` that gave the text seen (called again after the command, in a process of its own, and
compared by hash), options as the library spelled them, kernels as the compiled image defines them;
numba-cuda kernels as ``kernel: "pkg.mod:attr"`` with the signatures launched; cuda.compute specs through
:mod:`aot.record.cccl`. What cannot be named is listed with the reason, in the result and as
comments at the top of the matrix. Running the command is :mod:`aot.record.run`'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import yaml

from ..core.errors import NothingRecordedError
from ..core.fs import atomic_write
from ..core.numbaspec import variant_names
from ..core.nvsource import fill, flags_to_options, short_value, suggest_name, variant_name
from ..core.text import SpecError
from ..build.cupy_build import entries_from_records
from .cccl import Unnamed, spec_fields, spec_name
from .launch_store import old_index, store as store_launches
from .run import run_recorded

#: The families a recording reports, in the header's order: (record kind, what one is called).
FAMILIES = (("nvrtc", "NVRTC compiles"), ("numba", "numba-cuda kernel compiles"), ("cccl", "cuda.compute builds"),
            ("cupy", "CuPy compiles"), ("triton", "Triton compiles"))


@dataclass
class Recording:
    """What a recorded run gave: its exit code, the matrix's specs and what could not be named."""

    returncode: int
    nvrtc: list[dict] = field(default_factory=list)
    cccl: list[dict] = field(default_factory=list)
    numba: list[dict] = field(default_factory=list)
    cupy: list[dict] = field(default_factory=list)
    cupy_files: dict[str, str] = field(default_factory=dict)  # the sources cupy: entries name, beside the matrix
    triton: list[dict] = field(default_factory=list)
    unnamed: list[str] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)
    processes: int = 0
    notes: list[str] = field(default_factory=list)
    interrupted: str | None = None
    #: The kept launches (spec -> its index entry) and their folder's name, beside the matrix.
    launches: dict[str, dict] = field(default_factory=dict)
    launches_folder: str = ""

    @property
    def compiles(self) -> int:
        return self.seen.get("nvrtc", 0)

    @property
    def builds(self) -> int:
        return self.seen.get("cccl", 0)

    @property
    def exit_code(self) -> int:
        """The command's exit status as a shell reports it: 128 + N for a command killed by signal N."""
        return 128 - self.returncode if self.returncode < 0 else self.returncode

    def describe_exit(self) -> str:
        if self.returncode < 0:
            try:
                sig = signal.Signals(-self.returncode).name
            except ValueError:
                sig = f"signal {-self.returncode}"
            return f"was killed by {sig} (exit {self.exit_code})"
        return f"exited with {self.returncode}"

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


def _nvrtc_entries(recs: list[dict], out: Recording, taken: set[str]) -> None:
    groups: dict[tuple, dict] = {}
    seen_unnamed: set[str] = set()
    for rec in recs:
        why = rec.get("why")
        if rec.get("ref") and rec.get("failed"):
            why = f"its compile failed in the recorded process ({rec['failed']})"
        elif rec.get("ref") and rec.get("headers"):
            why = f"compiled with {rec['headers']} in-memory header(s) (include_dirs are files beside the matrix)"
        elif rec.get("ref") and not rec.get("kernels"):
            why = ("no kernel names: no name expressions were given and the compiled image defines no kernel"
                   if rec.get("image") else "no kernel names: no name expressions were given and no compiled "
                   "image was seen (LTO-IR, or compiled later than the call recorded)")
        try:
            opts = _options(rec) if rec.get("ref") and not why else None
        except SpecError as e:
            why = f"its options: {e}"
        if not rec.get("ref") or why:
            if rec.get("sha1") not in seen_unnamed:
                seen_unnamed.add(rec.get("sha1", ""))
                out.unnamed.append(f"nvrtc source {str(rec.get('head', ''))[:60]!r}{_where(rec)}: {why}")
            continue
        kernels = [str(k) for k in rec["kernels"]]
        pattern = _kernel_pattern(kernels, rec["params"]) if "params" in rec else kernels
        key = (rec["ref"], json.dumps(opts, sort_keys=True), tuple(pattern), "params" in rec)
        g = groups.setdefault(key, {"ref": rec["ref"], "options": opts, "kernels": kernels, "pattern": pattern,
                                    "psets": []})
        if kernels != g["kernels"]:
            g["kernels"] = pattern  # parameter sets whose kernel names differ by their values: one entry
        if "params" in rec and rec["params"] not in g["psets"]:
            g["psets"].append(rec["params"])
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


def _as_written(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _kernel_pattern(kernels: list[str], params: dict) -> list[str]:
    """``kernels`` with each parameter's value (as written, two characters or more) replaced by ``{param}``
    where filling it back gives the name again: ``bbox_float32`` with ``dtype: float32`` -> ``bbox_{dtype}``."""
    out = []
    for k in kernels:
        t = k
        if "{" not in k and "}" not in k:
            for name, value in sorted(params.items(), key=lambda kv: -len(_as_written(kv[1]))):
                v = _as_written(value)
                if len(v) >= 2 and v in t and "{" not in v:
                    t = t.replace(v, "{" + str(name) + "}")
            try:
                t = t if fill(t, params, "kernels") == k else k
            except SpecError:
                t = k
        out.append(t)
    return out


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


def _cccl_entries(recs: list[dict], out: Recording, taken: set[str]) -> None:
    specs: list[dict] = []
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
        while name in taken:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        specs.append({"name": name, **fields})
    out.cccl.extend(specs)


def _numba_entries(recs: list[dict], out: Recording, taken: set[str]) -> None:
    """One entry per kernel, its signatures in the order first launched (each compile once)."""
    kernels: dict[str, list[str]] = {}
    for rec in recs:
        ref, sig = rec.get("ref"), rec.get("signature")
        if not ref or not sig or rec.get("why"):
            where = f"{rec.get('module')}:{rec.get('qualname')}"
            line = f"numba kernel {where}{_where(rec)}: {rec.get('why') or 'not named'}"
            if line not in out.unnamed:
                out.unnamed.append(line)
            continue
        sigs = kernels.setdefault(str(ref), [])
        if sig not in sigs:
            sigs.append(str(sig))
    for ref, sigs in kernels.items():
        base = name = suggest_name(ref.split(":")[1])
        n = 1
        while {name, *variant_names(name, len(sigs))} & taken:
            n += 1
            name = f"{base}_{n}"
        taken.update([name, *variant_names(name, len(sigs))])
        out.numba.append({"name": name, "kernel": ref, "signatures": sigs})


def _not_compiled_by_cupy(nvrtc: list[dict], records: list[dict]) -> list[dict]:
    """The NVRTC records less those of a CuPy ``RawModule``/``RawKernel`` whose compile CuPy's hook recorded too
    (the same text, by sha1): that kernel is served at CuPy's compile call (:mod:`aot.runtime.adapters.
    cupy_attach`), so it is the CuPy family's, recorded once. One CuPy never compiled in the recording (a host
    without a GPU: CuPy's compile asks the device) keeps its NVRTC record."""
    by_cupy = {r.get("sha1") for r in records if r.get("kind") == "cupy-compile" and r.get("sha1")}
    return [r for r in nvrtc if not (str(r.get("via", "")).startswith("cupy.") and r.get("sha1") in by_cupy)]


def matrix_of(records: list[dict], returncode: int = 0) -> Recording:
    """The matrix entries (and what is not named) that ``records`` describe."""
    out = Recording(returncode)
    by_kind = {kind: [r for r in records if r.get("kind") == kind] for kind, _ in FAMILIES}
    by_kind["nvrtc"] = _not_compiled_by_cupy(by_kind["nvrtc"], records)
    out.seen = {kind: len(recs) for kind, recs in by_kind.items()}
    out.processes = sum(1 for r in records if r.get("kind") == "process")
    out.notes = [str(r.get("why"))[:300] for r in records if r.get("kind") in ("skipped", "overflow")]
    taken: set[str] = set()
    _nvrtc_entries(by_kind["nvrtc"], out, taken)
    _cccl_entries(by_kind["cccl"], out, taken)
    _numba_entries(by_kind["numba"], out, taken)
    out.cupy, out.cupy_files, unnamed = entries_from_records(records)  # CuPy's compiles (hook_cupy)
    out.seen["cupy"] = sum(1 for r in records if r.get("kind") == "cupy-compile")
    out.unnamed += unnamed
    from ..build.triton_build import entries_from_records as triton_entries  # the Triton family (record.hook_triton)
    out.triton, unnamed = triton_entries(records)
    out.seen["triton"] = sum(1 for r in records if r.get("kind") == "triton-compile")
    out.unnamed += unnamed
    return out


def comment(text: str) -> str:
    """``text`` safe inside a YAML comment: every character outside printable ASCII escaped (``\\r``,
    ``\\x85``, ``\\u2028``: YAML and Unicode line breaks that would end the comment and make the rest live)."""
    return "".join(c if " " <= c <= "~" else c.encode("unicode_escape").decode("ascii") for c in text)


def _flow(entry: dict) -> str:
    return yaml.safe_dump(entry, default_flow_style=True, sort_keys=False, width=1 << 20,
                          allow_unicode=False).strip()


SECTIONS = ("cccl", "nvrtc", "numba", "cupy", "triton")


def matrix_document(rec: Recording) -> dict:
    """The matrix as data: what :func:`render_matrix` writes and what reading it back must give."""
    doc: dict[str, Any] = {"version": 1}
    for section in SECTIONS:
        if getattr(rec, section):
            doc[section] = [dict(e) for e in getattr(rec, section)]
    return doc


def render_matrix(rec: Recording, command: Sequence[str]) -> str:
    """The matrix text: a header saying how it was made and what each family saw, what was not named
    (comments, escaped), then the specs (each emitted by PyYAML). Read back before it is returned: the
    parsed text must be exactly :func:`matrix_document`, so nothing in a comment can become a spec."""
    said = " ".join(shlex.quote(c) for c in command)[:300]
    counts = "; ".join(f"{rec.seen.get(kind, 0)} {what} seen, {len(getattr(rec, kind))} "
                       f"{'specs' if kind == 'cccl' else 'entries'}" for kind, what in FAMILIES)
    lines = [f"# Written by `aot record` from: {said}", f"# {counts}."]
    if rec.launches:
        lines.append(f"# {len(rec.launches)} launch(es) kept in {rec.launches_folder}/ (one per numba kernel "
                     f"signature; aot verify --gpu --launches replays them)")
    if rec.unnamed:
        lines.append(f"# Not named ({len(rec.unnamed)}; not in this matrix):")
        lines += [f"#   - {u}" for u in rec.unnamed]
    lines = [f"# {comment(ln[2:])}" for ln in lines]
    lines.append("version: 1")
    doc = matrix_document(rec)
    for section in SECTIONS:
        if section in doc:
            lines.append(f"{section}:")
            lines += [f"  - {_flow(e)}" for e in doc[section]]
    text = "\n".join(lines) + "\n"
    check_written(text, doc)
    return text


def check_written(text: str, doc: dict) -> None:
    """``text`` parses to ``doc`` and has the matrix's shape: the sections, each a list of named mappings."""
    got = yaml.safe_load(text)
    if got != doc or not isinstance(got, dict) or set(got) - {"version", *SECTIONS}:
        raise ValueError("aot record: the matrix text does not read back as the matrix recorded (not written)")
    for section in SECTIONS:
        for e in got.get(section, []):
            if not isinstance(e, dict) or not isinstance(e.get("name"), str):
                raise ValueError(f"aot record: a {section} entry without a name (not written)")


def write_matrix(text: str, out: Path) -> None:
    """Written whole or not at all (a temp file beside it, then renamed)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def nothing_seen(rec: Recording, command: Sequence[str], packages: Sequence[str], stand_in: bool) -> str:
    """One line: what was watched, and the likely reason nothing was compiled."""
    said = comment(" ".join(shlex.quote(c) for c in command))[:120]
    watched = ("NVRTC compiles (cuda.core, cuda.bindings.nvrtc, CuPy), numba-cuda kernel compiles and "
               "cuda.compute builds")
    if not rec.processes:
        why = ("the hook ran in no Python process: the command started none, or ran Python with -S/-I or its "
               "own PYTHONPATH")
    else:
        why = ("the command's GPU code paths were not taken: they need a device, so record on a GPU host" +
               ("" if stand_in else ", or pass --stand-in-driver (cuda.compute builds for a compute_capability "
                                    "the code passes)"))
    ran = "" if rec.returncode == 0 else f"; the command {rec.describe_exit()}"
    return (f"aot record: no compile seen in {rec.processes} Python process(es) of `{said}` (watched {watched}, "
            f"for package(s) {', '.join(packages)}); likely {why}{ran}; nothing written")


def launches_folder(out: Path) -> Path:
    """Where the kept launches of the matrix ``out`` live: ``build_matrix.yaml`` -> ``build_matrix.launches/``."""
    return out.with_name(f"{out.stem}.launches")


def kept_launches(rec: Recording, records: list[dict], files: dict[str, bytes]) -> dict[str, tuple[dict, bytes]]:
    """For each numba spec of ``rec`` (``axpy.0``) its first kept launch: (index entry, ``.npz`` bytes). A
    launch that could not be kept is a note saying why."""
    specs: dict[tuple[str, str], str] = {}
    for e in rec.numba:
        for spec, sig in zip(variant_names(e["name"], len(e["signatures"])), e["signatures"]):
            specs[(e["kernel"], sig)] = spec
    kept: dict[str, tuple[dict, bytes]] = {}
    for r in records:
        ref = f"{r.get('module')}:{r.get('qualname')}"
        name = specs.get((ref, str(r.get("signature"))))
        if r.get("kind") != "launch" or name is None or name in kept:
            continue
        data = files.get(str(r.get("file")))
        if r.get("why") or data is None:
            rec.notes.append(f"the launch of {name} was not kept: {r.get('why') or 'its file is missing'}")
            continue
        kept[name] = ({"kernel": ref, "signature": r["signature"], "grid": r.get("grid"), "block": r.get("block"),
                       "sharedmem": r.get("sharedmem", 0), "args": r.get("args"), "file": f"{name}.npz",
                       "sha256": hashlib.sha256(data).hexdigest()}, data)
    return kept


def write_launches(kept: dict[str, tuple[dict, bytes]], folder: Path) -> None:
    """One ``<spec>.npz`` per kept launch, then ``launches.json`` (the index, written last); files an earlier
    index named and this one does not are removed."""
    index_path = folder / "launches.json"
    doc = old_index(index_path)  # bounded: the folder may hold anything
    old = doc.get("launches", {}) if isinstance(doc, dict) else {}
    folder.mkdir(parents=True, exist_ok=True)
    for meta, data in kept.values():
        atomic_write(folder / meta["file"], data)
    index = {"version": 1, "launches": {name: meta for name, (meta, _) in kept.items()}}
    atomic_write(index_path, (json.dumps(index, indent=1, sort_keys=True) + "\n").encode())
    for name, meta in old.items() if isinstance(old, dict) else ():
        f = meta.get("file") if isinstance(meta, dict) else None
        if name not in kept and isinstance(f, str) and f == f"{name}.npz":
            (folder / f).unlink(missing_ok=True)


def record(command: Sequence[str], out: Path, packages: Sequence[str], stand_in: str | None = None,
           launches: bool = True) -> Recording:
    """Run ``command`` recorded and write the matrix to ``out``; the command's exit code is in the result.
    Nothing is written when no compile was seen (:class:`NothingRecordedError`) or when this process was
    interrupted (the result says by what)."""
    run = run_recorded(command, packages, stand_in, launches=launches)
    rec = matrix_of(run.records, run.returncode)
    rec.interrupted = run.interrupted
    if run.interrupted:
        return rec
    if not any(rec.seen.values()):
        raise NothingRecordedError(nothing_seen(rec, command, packages, stand_in is not None))
    kept = kept_launches(rec, run.records, run.launches)
    rec.launches = {name: meta for name, (meta, _) in kept.items()}
    rec.launches_folder = launches_folder(out).name
    for rel, text in rec.cupy_files.items():  # before the matrix that names them
        write_matrix(text, out.parent / rel)
    write_matrix(render_matrix(rec, command), out)
    if kept:
        write_launches(kept, launches_folder(out))
    rec.notes += store_launches(run.records, run.launches, launches_folder(out))  # every family's (launches)
    return rec
