#!/usr/bin/env python3
"""The numba-cuda mutant of issue 31 (.ci/gpu/numba.sh, prepare.sh): now any family's, in edit_mutant.py."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from edit_mutant import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
