"""What every command module of the CLI shares: the default output folder and the program name."""

from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_OUT = "aot-out"


def _prog() -> str:
    """``aot`` for the console script, ``python -m aot`` when run as a module (what the user typed)."""
    argv0 = Path(sys.argv[0] or "")
    return "python -m aot" if (argv0.name, argv0.parent.name) == ("__main__.py", "aot") else "aot"


#: The width a table or line gets when the output is not a terminal (a pipe, a file, CI's log) and ``COLUMNS`` is
#: unset: wide enough that nothing is cut or folded (rich's default there is 80 columns).
UNBOUNDED_WIDTH = 10_000


def console(stderr: bool = False):
    """A rich console for the CLI's output: a terminal's own width; piped or redirected, the full width of what
    is printed (``COLUMNS`` still wins), so ``aot inspect | grep`` sees whole lines."""
    import os
    from rich.console import Console
    out = Console(stderr=stderr)
    if not out.is_terminal and not os.environ.get("COLUMNS", "").strip():
        out.width = UNBOUNDED_WIDTH
    return out
