"""The child process of :class:`aot.build.codeimport._Probe`: it imports each module a matrix names (or renders a
source) before the reading process does, so a module that ends the process (``os._exit()``), crashes the
interpreter or never returns costs this child, and the reader names the module in one line.

Started as ``python -c`` with the reader's environment and ``sys.path`` (first line of its input, JSON); then one JSON
request per line, one JSON answer per line on the stdout it had at start. What the modules print goes to
stderr (the reader discards it). It ignores SIGINT and dies with the reader, as a build worker does."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import Any

from ..core.errors import ToolchainError
from ..core.text import SpecError
from .codeimport import CodeImports, _install_root_hook, _why
from .pysource import render
from .toolchain import worker_setup
from .workers import worker_start


def main(request: dict[str, Any]) -> None:
    """The probe child: set up as the reader is (the stand-in libcuda it loaded, if ``prepare``), then one JSON
    answer line per request line until its input ends."""
    worker_start(int(request["ppid"]))
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what the modules print goes where stderr goes: fd 1 carries the answers only
    _install_root_hook()
    if request.get("prepare"):
        try:
            worker_setup(request["driver"])
        except ToolchainError:
            pass
    imports = CodeImports(None, import_parents=bool(request["parents"]), driver=False)
    for line in sys.stdin:
        answers.write(json.dumps(_answer(imports, json.loads(line))) + "\n")


def _answer(imports: CodeImports, q: dict[str, Any]) -> dict[str, Any]:
    try:
        if "import" in q:
            imports.module(q["import"])
            return {"ok": True}
        texts = [r.text for r in render(q["render"], q.get("psets"), imports)]
        return {"keys": [hashlib.sha256(t.encode()).hexdigest() for t in texts]}
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the parent decides what a failure means
        return {"why": str(e) if isinstance(e, SpecError) else _why(str(q.get("import", q)), e)}
