"""Running a command under ``aot record``'s hook (:mod:`aot.record.hook`): the private folder, the
command's environment, signals passed on, the records read back, and the re-rendering check after the command
(:mod:`aot.record.rerender`).

The private folder (0700, from ``mkdtemp``) is named to the command through this process's descriptor of it
(``/proc/<pid>/fd/<n>``, where the system has one): after the run the folder is gone and that name leads
nowhere anyone else can create, so a descendant that outlives the run cannot import someone else's
``sitecustomize`` from a recreated ``$TMPDIR/aot-record-XXXX``. The descriptor stays open for this process's
life (one per recording), so its number never comes to name another folder.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..core.errors import UsageError

#: Largest records file read back (the hook bounds its lines and their number; this bounds the whole).
MAX_RECORDS_BYTES = 256 * 1024 * 1024
#: Longest the re-rendering of the library's functions may take, after the command (seconds).
RERENDER_TIMEOUT = 600
HOOK = Path(__file__).with_name("hook.py")
RERENDER = Path(__file__).with_name("rerender.py")
#: Descriptors of the removed private folders, kept open for this process's life: their ``/proc`` names
#: then lead to a folder nothing can be created in, never to another descriptor numbered the same.
_KEEP: list[int] = []

def hook_sitecustomize(what: str, module: str, env: str) -> str:
    """The ``sitecustomize.py`` a watched process starts with (``aot record``'s hook, ``aot gate``'s launch hook):
    it loads the hook named by ``env`` by path as ``module`` (no ``import aot`` in the library's process), then the
    sitecustomize it hides, so ``import sitecustomize`` gives the user's module, as without aot."""
    return f'''\
"""aot {what}: load the hook by path (no `import aot`), then the sitecustomize this one hides."""
import importlib.machinery as _m, importlib.util as _u, os as _os, sys as _sys
_spec = _u.spec_from_file_location("{module}", _os.environ["{env}"])
_hook = _u.module_from_spec(_spec)
_sys.modules["{module}"] = _hook
_spec.loader.exec_module(_hook)
_hook.install()
_here = _os.path.dirname(_os.path.abspath(__file__))
_sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
_next = _m.PathFinder.find_spec("sitecustomize", _sys.path)
if _next is not None and _next.origin and _os.path.dirname(_os.path.abspath(_next.origin)) != _here:
    _mod = _u.module_from_spec(_next)
    _sys.modules["sitecustomize"] = _mod
    _next.loader.exec_module(_mod)
'''


_SITECUSTOMIZE = hook_sitecustomize("record", "_aot_record_hook", "AOT_RECORD_HOOK")



@dataclass
class Run:
    """One recorded command: its exit status, the records, and a signal this process got meanwhile."""

    returncode: int
    records: list[dict]
    interrupted: str | None = None
    #: The kept launches' files (``.npz`` name -> bytes), read before the private folder goes.
    launches: dict[str, bytes] = field(default_factory=dict)


def _private_name(work: Path) -> str:
    """A name for ``work`` that nobody else can recreate: this process's descriptor of it under ``/proc``
    (kept open: once the folder is removed, nothing can be created in it), else the path itself."""
    fd = os.open(work, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    name = f"/proc/{os.getpid()}/fd/{fd}"
    try:
        if os.path.samefile(name, work):
            _KEEP.append(fd)
            return name
    except OSError:
        pass
    os.close(fd)
    return str(work)


def run_recorded(command: Sequence[str], packages: Sequence[str], stand_in: str | None = None,
                 cwd: Path | None = None, launches: bool = True) -> Run:
    """Run ``command`` with the hook in its Python processes; its exit status and the records (the
    re-rendering checks of the library's functions done, after the command)."""
    if not command:
        raise UsageError("aot record: give the command to record after '--' (e.g. -- python -m pytest tests)")
    work = Path(tempfile.mkdtemp(prefix="aot-record-"))  # private (0700): the hook and the records file
    try:
        name = _private_name(work)
        (work / "site").mkdir()
        (work / "site" / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        (work / "records.jsonl").touch(mode=0o600)
        base = dict(os.environ)
        env = dict(base)
        env["PYTHONPATH"] = os.pathsep.join([f"{name}/site", *filter(None, [env.get("PYTHONPATH")])])
        env.update(AOT_RECORD_FILE=f"{name}/records.jsonl", AOT_RECORD_HOOK=str(HOOK),
                   AOT_RECORD_PACKAGES=",".join(packages))
        if stand_in:
            env["AOT_RECORD_STUB"] = stand_in
        if launches:  # numba-cuda launches kept (hook_numba), one small one per kernel signature
            (work / "launches").mkdir(mode=0o700)
            env["AOT_RECORD_LAUNCHES"] = f"{name}/launches"
        rc, got = _run(command, env, cwd)
        records = list(_read_records(work / "records.jsonl"))
        if got is None:
            _rerender(records, work, base)
        return Run(rc, records, got, _read_launches(work / "launches", records))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(command: Sequence[str], env: dict, cwd: Path | None) -> tuple[int, str | None]:
    """The command's exit status. SIGINT, SIGTERM and SIGHUP sent to this process are passed on to the
    command, which is then waited for (its own cleanup runs; it is never killed from here); a SIGINT the
    command's process group already got (:func:`_group_sent_it`) is not sent a second time."""
    got: list[str] = []
    procs: list[subprocess.Popen] = []

    def forward(signum: int, frame: Any) -> None:
        got.append(signal.Signals(signum).name)
        if procs and not (signum == signal.SIGINT and _group_sent_it(procs[0].pid)):
            try:
                procs[0].send_signal(signum)
            except ProcessLookupError:
                pass

    handled = [getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)]
    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, forward) for s in handled} if main else {}  # before the start: none is missed
    try:
        try:
            procs.append(subprocess.Popen(list(command), env=env, cwd=cwd))
        except FileNotFoundError:
            raise UsageError(f"aot record: command not found: {shlex.quote(command[0])}") from None
        if got:  # a signal before the command existed: it gets it now
            procs[0].send_signal(getattr(signal, got[0]))
        rc = procs[0].wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return rc, (got[0] if got else None)


def _group_sent_it(pid: int) -> bool:
    """Whether a SIGINT reached the command without us: it is in our process group (a Ctrl-C, CI cancelling a
    job, ``kill -INT -PGID``: the signal went to every process of the group), or in the terminal's foreground
    group. Looking at the terminal alone sent a second SIGINT where there is none (CI), interrupting the
    command's own cleanup. The price: a SIGINT sent to aot's PID alone is not passed on (SIGTERM is)."""
    try:
        if os.getpgid(pid) == os.getpgrp():
            return True
    except (OSError, AttributeError):  # the command is gone; no process groups on this system
        return False
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgid(pid):
                return True
        except (OSError, AttributeError):  # no terminal there
            continue
    return False


#: Run in a process of its own after the command (this source is the hook's, loaded by path: no aot import).
_RERENDER = ("import importlib.util as u, sys; s = u.spec_from_file_location('_aot_rerender', sys.argv[1]); "
             "m = u.module_from_spec(s); s.loader.exec_module(m); m.main(sys.argv[2], sys.argv[3])")


def _rerender(records: list[dict], work: Path, env: dict) -> None:
    """Call each function that rendered a source again with the plain arguments it was given, in a process
    of its own per interpreter (the recorded process's interpreter, ``sys.path`` and folder), and compare
    the text's hash: a function that depends on more than its arguments is listed, not named. Done after
    the command, so the command itself never sees its functions run twice."""
    jobs: dict[str, dict] = {}
    for rec in records:
        job = rec.get("rerender")
        if rec.get("kind") == "nvrtc" and isinstance(job, dict):
            jobs.setdefault(json.dumps(job, sort_keys=True), job)
    by_exe: dict[str, list[str]] = {}
    for key, job in jobs.items():
        by_exe.setdefault(str(job.get("executable") or sys.executable), []).append(key)
    results: dict[str, dict] = {}
    for n, (exe, keys) in enumerate(by_exe.items()):
        src, dst = work / f"rerender-{n}.json", work / f"rerendered-{n}.json"
        src.write_text(json.dumps([jobs[k] for k in keys]))
        why = None
        try:
            r = subprocess.run([exe, "-c", _RERENDER, str(RERENDER), str(src), str(dst)], env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               timeout=RERENDER_TIMEOUT, check=False)
            got = json.loads(dst.read_text()) if dst.is_file() else None
            if not isinstance(got, list) or len(got) != len(keys):
                why = f"the process calling it again failed ({r.stderr.decode(errors='replace').strip()[-200:]})"
        except (OSError, ValueError, subprocess.TimeoutExpired) as e:
            why, got = f"the process calling it again failed ({type(e).__name__})", None
        for i, key in enumerate(keys):
            res = got[i] if why is None and isinstance(got, list) else None
            results[key] = res if isinstance(res, dict) else {"why": why}
    for rec in records:
        job = rec.get("rerender")
        if rec.get("kind") == "nvrtc" and isinstance(job, dict):
            res = results.get(json.dumps(job, sort_keys=True), {})
            if not res.get("ok"):
                rec["why"] = f"rendered by {rec.get('ref')}; called again with {job.get('params')} {res.get('why')}"


def _read_launches(folder: Path, records: list[dict]) -> dict[str, bytes]:
    """The launch files the records name (plain files of the private folder, bounded in all)."""
    out: dict[str, bytes] = {}
    total = 0
    for rec in records:
        name = rec.get("file")
        if rec.get("kind") != "launch" or not isinstance(name, str) or "/" in name or name.startswith("."):
            continue
        try:
            data = (folder / name).read_bytes()
        except OSError:
            continue
        total += len(data)
        if total > MAX_RECORDS_BYTES:
            break
        out[name] = data
    return out


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
