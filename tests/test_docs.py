"""The manual (docs/, MkDocs) and the front page (README.md): the strict build, and what they state about the
code checked against the code. The manual's commands are run where the feature is tested (the downstream page
in tests/test_isolated.py, the pins block in tests/test_downstream.py, the GPU table in tests/test_arch.py)."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import DOCS, ROOT

#: The front page's bound (issue 30: the README had become a 1,285-line manual, and the wheel's METADATA 109 KB).
README_MAX_LINES = 250


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def _code(block: str) -> list[str]:
    """A block's lines without comments and blank lines (the quickstart is the page's project, uncommented)."""
    lines = []
    for line in block.splitlines():
        if line.lstrip().startswith("#"):
            continue
        line = re.sub(r"\s+#.*$", "", line).rstrip()
        if line:
            lines.append(line)
    return lines


def test_the_manual_builds_strictly(tmp_path):
    """`mkdocs build --strict`, as CI runs it: a broken link or anchor, or a page left out of the nav, fails."""
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                        "--site-dir", str(tmp_path / "site")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (tmp_path / "site" / "downstream" / "index.html").is_file()
    assert "WARNING" not in r.stderr, r.stderr


def test_every_page_is_in_the_nav():
    import yaml
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]

    def pages(node) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [p for n in node for p in pages(n)]
        return [p for v in node.values() for p in pages(v)]
    assert sorted(pages(nav)) == sorted(p.name for p in DOCS.glob("*.md"))


def test_readme_is_a_front_page():
    """Under 250 lines, the two commands first, and links into docs/ that exist."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < README_MAX_LINES
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert links and all((ROOT / link).is_file() for link in links), links


def test_the_quickstart_is_the_downstream_page():
    """The README's quickstart is the downstream page's hatchling project and setup block, which
    tests/test_isolated.py runs as written (so the quickstart is run too, without a build of its own)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8").split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    page = (DOCS / "downstream.md").read_text(encoding="utf-8")
    setup, *checks = _blocks(readme, "bash")
    page_setup = _blocks(page, "bash")[0]
    assert _code(setup) == [" && ".join(_code(page_setup))]
    # the step a CPU user runs to see that it worked: a line of the page's hatchling block, which runs it
    hatch_run = page.split("**hatchling**", 1)[1].split("## ", 1)[0]
    assert checks and all(line in _code(_blocks(hatch_run, "bash")[0]) for b in checks for line in _code(b)), checks
    hatch = next(b for b in _blocks(page, "toml") if 'build-backend = "hatchling.build"' in b)
    assert _code(_blocks(readme, "toml")[0]) == _code(hatch)
    for lang, first in (("yaml", "# build_matrix.yaml"), ("python", "# mypkg/__init__.py")):
        (mine,) = [b for b in _blocks(readme, lang) if b.startswith(first)]
        (theirs,) = [b for b in _blocks(page, lang) if b.startswith(first)]
        assert mine == theirs, lang


def test_the_default_matrix_is_described_by_its_numbers():
    """docs/matrix.md says how many CCCL specs and NVRTC units the default matrix holds (it once said 23 of 24)."""
    from aot.build.matrix import load_matrix
    from aot.core.spec import CcclSpec, NvrtcUnit
    specs = list(load_matrix().select(None))
    text = " ".join((DOCS / "matrix.md").read_text(encoding="utf-8").split())
    m = re.search(r"The default matrix \(`build_matrix.yaml`\) holds (\d+) CCCL specs \(all (\d+) algorithms\) and "
                  r"(\d+) NVRTC units", text)
    assert m, "docs/matrix.md: the sentence on the default matrix"
    cccl = [s for s in specs if isinstance(s, CcclSpec)]
    assert int(m.group(1)) == len(cccl)
    assert int(m.group(2)) == len({s.algorithm for s in cccl})
    assert int(m.group(3)) == len([s for s in specs if isinstance(s, NvrtcUnit)])


def test_the_environment_table_names_every_variable():
    from aot.core.env import VARS
    table = {m.group(1) for m in re.finditer(r"^\| `([A-Z_]+)` \|", (DOCS / "environment.md").read_text(), re.M)}
    assert table == set(VARS), (sorted(set(VARS) - table), sorted(table - set(VARS)))


def test_the_development_page_quotes_the_two_commands():
    """docs/development.md repeats the README's two commands (which CI runs from README.md) word for word."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8").split("## The two commands", 1)[1].split("\n## ", 1)[0]
    page = (DOCS / "development.md").read_text(encoding="utf-8")
    assert [b.strip() for b in _blocks(readme, "bash")] == _blocks(page, "bash")[0].strip().splitlines()
