"""Ranges, not pins, in what others install (issue 34 items 1 and 4, issue 37 items 9 and 10).

aot's runtime wheel and a downstream wheel of NVRTC units or numba kernels require ranges (no ``==``), so they
install beside a library's own stack (``cuda-cccl[cu13]>=0.6,<0.7`` brings cuda-core 0.7: the environment
matrix, noxfile.py, installs and loads them there); a wheel with numba kernels requires numba-cuda, and its absence
is said in words; the cuda-core features newer than the range's floor say so in one line where missing; every
install command the manual and the messages print names a distribution and extra that exist.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement

from conftest import ROOT

import aot
from aot.core import versions
from aot.core.errors import AotError, AotWarning
from aot.package.bundle import numba_requirement, required_pins


def _variant(tmp_path: Path, major: str) -> dict:
    target = tmp_path / major / "pyproject.toml"
    target.parent.mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", target)
    r = subprocess.run([sys.executable, str(ROOT / ".ci" / "variant.py"), major, str(target)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    return tomllib.loads(target.read_text())["project"]


def _exact(reqs) -> list[str]:
    return [r for r in reqs if any(s.operator in ("==", "===") for s in Requirement(r).specifier)]


# ------------------------------------------------------------------------------------------- ranges
def test_no_exact_pin_in_what_an_end_user_installs(tmp_path):
    """The Requires-Dist lines without an extra of cccl-aot-cu12/-cu13 (the base dependencies), of a wheel of
    NVRTC units only and of a wheel of numba kernels (what the hook adds) hold no ``==``; nor do they hold numba-cuda
    0.30.4's numpy < 2.5 (the ``numba`` extra is the build toolchain: exact, and its compiler needs numpy < 2.5).
    (Before: cuda-core==1.2.2.)"""
    for major in ("cu12", "cu13"):
        project = _variant(tmp_path, major)
        base = project["dependencies"]
        assert not _exact(base), base
        assert [r for r in base if Requirement(r).name == "cuda-core"] == ["cuda-core>=0.5.1,<2"], base
        assert not [r for r in base if "2.5" in r], base
    prod = {"aot": "0.1.0", "cuda_cccl": "1.2.1", "cuda_major": "13"}
    nvrtc_only = required_pins(prod, cccl=False) + numba_requirement([{"family": "nvrtc"}])
    numba_only = required_pins(prod, cccl=False) + numba_requirement([{"family": "numba"}])
    assert not _exact(nvrtc_only) and not _exact(numba_only), (nvrtc_only, numba_only)
    assert not [r for r in nvrtc_only + numba_only if Requirement(r).name == "numpy"]


def test_a_wheel_with_numba_kernels_requires_a_numba_cuda_range():
    """Loading numba kernels needs numba-cuda (they are the library's own dispatchers): a range, added only where
    the set holds a numba kernel. (Before: nothing was added.)"""
    assert numba_requirement([{"family": "nvrtc"}, {"family": "numba"}]) == [versions.NUMBA_CUDA_REQUIREMENT]
    assert numba_requirement([{"family": "nvrtc"}, {"family": "cccl"}]) == []
    req = Requirement(versions.NUMBA_CUDA_REQUIREMENT)
    assert req.name == "numba-cuda" and not req.extras  # no toolkit: packaged cubins need none
    assert all(req.specifier.contains(v) for v in ("0.23.0", "0.26.0", "0.30.4"))  # the matrix's releases


def test_numba_cuda_missing_is_said_in_words(monkeypatch):
    """Not "numba-cuda missing is not one ... checked against", and not "JIT-compiles them": nothing can."""
    from cccl_patches import numba_cuda as nc
    monkeypatch.setattr(nc, "installed_version", lambda: "missing")
    with pytest.raises(nc.NumbaCudaError) as e:
        nc.check_version()
    assert str(e.value) == "numba-cuda is not installed"

    class Reg:  # what attach_numba reads of a registry with one numba kernel
        root = "/site/mypkg/artifacts"
        _warned: set = set()

        def names(self):
            return ["k"]

        def spec(self, name):
            from aot.core.spec import NumbaKernel
            spec = object.__new__(NumbaKernel)
            object.__setattr__(spec, "name", name)
            return spec

        def _warn(self, msg):
            warnings.warn(msg, AotWarning, stacklevel=2)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        aot.attach_numba(Reg())
    (w,) = [str(w.message) for w in caught]
    assert "numba-cuda is not installed" in w and versions.NUMBA_CUDA_REQUIREMENT in w, w
    assert "missing" not in w and "JIT-compiles" not in w, w


# ----------------------------------------------------------------------------- cuda-core feature gates
def test_each_cuda_core_feature_says_in_one_line_what_it_needs(monkeypatch):
    """Where the installed cuda-core lacks what a feature needs (here: hidden), the feature says so in one line:
    the Kernel handle (cuda-core < 0.6), aot.program_cache (< 1.0: no attribute at all), the JIT's user cache."""
    import cuda.core
    import cuda.core.utils
    assert all(versions.cuda_core_missing(k) is None for k in versions.CUDA_CORE_FEATURES)  # the dev env: 1.2
    versions._cuda_core_missing.cache_clear()
    monkeypatch.delattr(cuda.core.utils, "ProgramCacheResource")
    monkeypatch.setattr(cuda.core, "Kernel", type("Kernel", (), {}))  # as cuda-core 0.5: no from_handle
    try:
        line = versions.cuda_core_missing("program_cache")
        assert line == (f"aot.program_cache needs cuda-core>=1.0.0 (cuda.core.utils.ProgramCacheResource); "
                        f"installed is cuda-core {versions.dist_version('cuda-core')}")
        assert not hasattr(aot, "program_cache")
        with pytest.raises(AttributeError, match=r"needs cuda-core>=1\.0\.0 .*aot\.by_source"):
            aot.program_cache  # noqa: B018
        assert "cuda-core>=0.6.0 (cuda.core.Kernel.from_handle)" in versions.cuda_core_missing("kernel")
        from aot.runtime.loader.library import DriverLibrary
        lib = object.__new__(DriverLibrary)
        lib.name, lib._kernels, lib._wrapped = "unit", {"k": 1}, {}
        with pytest.raises(AotError, match=r"^unit/k: a cuda\.core\.Kernel handle .* needs cuda-core>=0\.6\.0"):
            lib.get_kernel("k")
    finally:
        versions._cuda_core_missing.cache_clear()


# ------------------------------------------------------------------------------ install commands
#: Where install commands are printed: the manual, the README, the messages in aot's and cccl_patches' code.
SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "aot").rglob("*.py")),
           *sorted((ROOT / "cccl_patches").glob("*.py"))]
#: Options of `pip install` that take a value (the value is no requirement).
VALUED = {"--find-links", "-f", "-c", "-r", "--python", "-w", "-d", "--index-url", "-i", "--extra-index-url"}


def _install_commands() -> list[tuple[str, str]]:
    """(where, requirement) for every requirement an install command names: `pip install ...` in code, prose
    and messages; paths, placeholders (<dist>, {pin}) and options are not requirements."""
    found = []
    for path in SOURCES:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(r"pip install ([^`#)\n]*)", line):
                text = m.group(1).split('",')[0].split("\")")[0]
                try:
                    words = shlex.split(text)
                except ValueError:  # an unbalanced quote: a message split over lines
                    words = text.replace("'", " ").replace('"', " ").split()
                skip = False
                for w in words:
                    w = w.rstrip(",.;:")
                    if skip or w in VALUED:
                        skip = w in VALUED
                        continue
                    if w in ("or", "and", "&&", "(or", "then") or w.startswith(("-", ".", "/", "<", "$", "{", "(")) \
                            or "/" in w or w.endswith(".whl") or "{" in w or "<dist>" in w or "<" in w.split("[")[0]:
                        continue
                    found.append((f"{path.relative_to(ROOT)}:{n}", w))
    return found


def test_every_install_command_names_a_real_distribution_and_extra(tmp_path):
    """aot is published as cccl-aot-cu12 and cccl-aot-cu13 (.ci/variant.py; "cccl-aot" is only the source tree's
    name): every install command naming aot names one of them, with an extra that distribution has. Before:
    `pip install 'cccl-aot[numba]'` (docs/numba.md) and four messages naming 'cccl-aot[cu13]'."""
    real = {f"cccl-aot-{m}": set(_variant(tmp_path, m)["optional-dependencies"]) for m in ("cu12", "cu13")}
    found = _install_commands()
    assert len(found) > 10, found  # the scan sees the commands (a broken pattern would pass anything)
    bad = []
    for where, text in found:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue  # prose after the command ("pip install of the wheels")
        name = req.name.lower().replace("_", "-")
        if not name.startswith("cccl-aot"):
            continue
        if name not in real:
            bad.append(f"{where}: {text}: no distribution {name!r} (the real ones: {', '.join(real)})")
        elif not req.extras <= real[name]:
            bad.append(f"{where}: {text}: {name} has no extra {sorted(req.extras - real[name])}")
    # A command broken over two lines of prose: every "cccl-aot...[extras]" anywhere names a real pair too.
    for path in SOURCES + sorted((ROOT / "examples").glob("*/pyproject.toml")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(r"\bcccl-aot(-cu1[23])?\[([a-z0-9,-]*)\]", line):
                name, extras = m.group(0).split("[")[0], set(m.group(2).split(","))
                if name not in real or not extras <= real[name]:
                    bad.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)}: no such distribution and extra")
    assert not bad, "\n".join(bad)
    assert ("aot/core/versions.py:" in " ".join(w for w, t in found if t.startswith("cccl-aot-cu13[cu13]")))
