"""What ``aot record`` runs after the command, in a process of its own per interpreter (loaded by path from
:mod:`aot.record.run`, stdlib only): each library function that rendered an NVRTC source, called again
with the plain arguments it was given, its text's hash compared with the one recorded.

Done there rather than in the recorded process, where a second call would run the function's side effects
twice in the command (a counter, a log line, a cache entry)."""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
from typing import Any


def main(jobs_path: str, out_path: str) -> None:
    """Call each job's function with its plain arguments, in the recorded process's folder and ``sys.path``,
    and say whether the text's hash is the one recorded: one result per job, written to ``out_path`` (JSON)."""
    with open(jobs_path, encoding="utf-8") as f:
        jobs = json.load(f)
    out: list[dict[str, Any]] = []
    for job in jobs:
        where = f"{job['module']}:{job['function']}"
        try:
            os.chdir(job["cwd"])
            sys.path[:] = list(job["path"])
            fn = getattr(importlib.import_module(job["module"]), job["function"])
            text = fn(**job["params"])
        except BaseException as e:  # noqa: BLE001 - the library's function refused the plain spelling
            out.append({"why": f"it raised {type(e).__name__} ({where} in a fresh process)"})
            continue
        if not isinstance(text, str):
            out.append({"why": f"it returns a {type(text).__name__}, not the text"})
        elif hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest() != job["sha1"]:
            out.append({"why": "it returns another text (it depends on more than its arguments)"})
        else:
            out.append({"ok": True})
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f)
