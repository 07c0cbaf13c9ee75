"""The GPU check scripts are found by what they check: ``.ci/gpu/README.md`` names every file of the folder, and
every ``.ci/gpu/<file>`` the repository mentions (docs, scripts, tests, code) exists, so a rename leaves no stale
path behind. Reads text only: no script runs."""

from __future__ import annotations

import re
import subprocess

from conftest import ROOT

GPU = ROOT / ".ci" / "gpu"
MENTION = re.compile(r"\.ci/gpu/([A-Za-z0-9_.-]+\.(?:sh|py|yaml|md))")


def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    # benchmarks/results/ are logs of past runs, kept as they were written.
    return [p for p in out if not p.startswith("benchmarks/results/") and (ROOT / p).is_file()]


def test_the_index_names_every_gpu_script():
    index = (GPU / "README.md").read_text()
    missing = sorted(p.name for p in GPU.iterdir() if p.is_file() and p.name != "README.md"
                     and f"`{p.name}`" not in index)
    assert missing == []


def test_every_mentioned_gpu_script_exists():
    stale = set()
    for rel in tracked():
        try:
            text = (ROOT / rel).read_text()
        except (UnicodeDecodeError, OSError):
            continue
        stale |= {f"{rel}: .ci/gpu/{m}" for m in MENTION.findall(text) if not (GPU / m).is_file()}
    assert sorted(stale) == []
