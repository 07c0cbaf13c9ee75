"""What every command module of the CLI shares: the default output folder and the program name."""

from __future__ import annotations

import sys
from pathlib import Path

DEFAULT_OUT = "aot-out"


def _prog() -> str:
    """``aot`` for the console script, ``python -m aot`` when run as a module (what the user typed)."""
    argv0 = Path(sys.argv[0] or "")
    return "python -m aot" if (argv0.name, argv0.parent.name) == ("__main__.py", "aot") else "aot"
