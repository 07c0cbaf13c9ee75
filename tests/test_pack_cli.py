"""The small things on a downstream author's path (issue 22, item 5; issue 23, item 6): `inspect` reads a
wheel in a runtime-only install, `verify --package` says which folder it read and is not fooled by the
source tree, `doctor` labels its versions, a misspelled required key gets a "did you mean", an oversized
`[tool.aot]` value is one short config error, and the build's leftovers are documented."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import DOCS, ROOT, repo_env

#: Runs the CLI with rich made unimportable: what a runtime-only install (no [build] extra) has.
NO_RICH = "import sys; sys.modules['rich'] = None; from aot.cli.main import main; sys.exit(main(sys.argv[1:]))"


def _wheel_of(build_out: Path, dest: Path) -> Path:
    whl = dest / "mypkg-0.1.0-py3-none-manylinux_2_26_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for p in sorted(build_out.rglob("*")):
            if p.is_file() and p.name != "build-report.json":
                z.write(p, f"mypkg/artifacts/{p.relative_to(build_out).as_posix()}")
        z.writestr("mypkg/__init__.py", "")
    return whl


def test_inspect_reads_a_wheel_without_rich(small_build, tmp_path):
    whl = _wheel_of(small_build.out, tmp_path)
    r = subprocess.run([sys.executable, "-c", NO_RICH, "inspect", str(whl)], capture_output=True, text=True,
                       env=repo_env(), cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"{whl}, folder mypkg/artifacts (sizes in KB)", lines[:3]
    assert re.match(r"family\s+spec\s+sm_\d+", lines[1]) and set(lines[2]) <= {"-", " "}, lines[:3]
    for spec in small_build.specs:
        assert any(re.match(rf"\S+\s+{re.escape(spec.name)}\s", ln) for ln in lines), spec.name
    assert "coverage:" in r.stdout and "cuda-cccl 1.2.1" in r.stdout and "rich" not in r.stderr


def _package(where: Path, artifacts: Path | None) -> Path:
    pkg = where / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise SystemExit('the package must not be imported by verify/inspect')\n")
    if artifacts is not None:
        shutil.copytree(artifacts, pkg / "artifacts")
    return pkg


def test_verify_package_reads_the_installed_copy_when_the_source_tree_shadows_it(small_build, tmp_path):
    """`python -m aot verify --package mypkg` in the project's folder: the source tree's mypkg/ (no artifacts)
    comes first on sys.path; the installed copy is read, and both streams say which."""
    installed = _package(tmp_path / "site", small_build.out)
    project = tmp_path / "project"
    _package(project, None)
    env = repo_env(COLUMNS="400")
    env["PYTHONPATH"] += f":{tmp_path / 'site'}"
    for command in ("verify", "inspect"):
        r = subprocess.run([sys.executable, "-m", "aot", command, "--package", "mypkg"], capture_output=True,
                           text=True, env=env, cwd=project, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert str(installed / "artifacts") in r.stdout, r.stdout
        assert f"{project / 'mypkg'} shadows the installed mypkg" in r.stderr, r.stderr
    v = subprocess.run([sys.executable, "-m", "aot", "verify", "--package", "mypkg"], capture_output=True,
                       text=True, env=env, cwd=project, timeout=120)
    assert v.stdout.startswith(f"package mypkg: reading {installed / 'artifacts'}\n"), v.stdout
    # Nothing installed: one line saying what shadows it and how to avoid it.
    r = subprocess.run([sys.executable, "-m", "aot", "verify", "--package", "mypkg"], capture_output=True,
                       text=True, env=repo_env(), cwd=project, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and "no manifest at" in line and "run from another folder" in line, line


def test_doctor_labels_python_and_expects_no_jit_stack_in_a_runtime_install(tmp_path):
    code = ("import sys, aot.core.versions as v\nreal = v.dist_version\n"
            "v.dist_version = lambda d: 'missing' if d == 'numba-cuda-mlir' else real(d)\n"
            "from aot.cli.main import main\nsys.exit(main(['doctor']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=repo_env(), cwd=tmp_path,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    first = r.stdout.splitlines()[0]
    assert re.fullmatch(rf"aot \S+, Python {re.escape(sys.version.split()[0])}", first), first
    line = next(ln for ln in r.stdout.splitlines() if "numba-cuda-mlir" in ln)
    assert "not installed (expected in a runtime install" in line and "[jit]" in line, line
    assert "missing" not in line, line


def test_misspelled_required_key_gets_did_you_mean(tmp_path):
    m = tmp_path / "m.yaml"
    m.write_text("version: 1\ncccl:\n  - {name: a, algoritm: reduce, dtype: int32, op: plus, init: 0}\n"
                 "  - {nme: b, algorithm: reduce, dtype: int32, op: plus, init: 0}\n")
    r = subprocess.run([sys.executable, "-m", "aot", "validate", "--matrix", str(m)], capture_output=True,
                       text=True, env=repo_env(), timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "field 'algorithm': missing required field; 'algoritm' is not a field (did you mean 'algorithm'?)" \
        in r.stderr, r.stderr
    from aot.core.rules import check_cccl
    from aot.core.text import SpecError
    with pytest.raises(SpecError, match=r"'nme' is not a field \(did you mean 'name'\?\)"):
        check_cccl({"nme": "b", "algorithm": "reduce", "dtype": "int32", "op": "plus", "init": 0})
    with pytest.raises(SpecError) as e:  # no near miss: the plain message
        check_cccl({"name": "b", "dtype": "int32"})
    assert str(e.value).endswith("missing required field"), e.value


@pytest.mark.parametrize("tool, key, message", [
    ('package = "{a300}"', "package", "a name longer than a file name (255 characters)"),
    ('package = "{a1m}"', "package", "is 1000000 characters, over the 4096-character limit"),
    ('package = "mypkg_skbuild"\nfolder = "{a300}"', "folder", "longer than a file name (255 characters)"),
    ('package = "mypkg_skbuild"\nfolder = "{a1m}"', "folder", "over the 4096-character limit"),
    ('package = "mypkg_skbuild"\nsm = "{n1m}"', "sm", "is 1000000 characters, over the 4096-character limit"),
    ('package = "mypkg_skbuild"\nsm = {{cu13 = "{n1m}"}}', "sm", "sm.cu13 is 1000000 characters"),
    ('package = "mypkg_skbuild"\nsm = 999999999999', "sm", "'999999999999' is not an SM"),
    ('package = "mypkg_skbuild"\nmatrix = "{a300}.yaml"', "matrix", "File name too long"),
])
def test_oversized_tool_aot_values_are_one_short_config_error(tmp_path, tool, key, message):
    p = tmp_path / "proj"
    shutil.copytree(ROOT / "examples" / "skbuild-mypkg", p, ignore=shutil.ignore_patterns("build", "artifacts"))
    text = tool.format(a300="a" * 300, a1m="a" * 1_000_000, n1m="9" * 1_000_000)
    (p / "pyproject.toml").write_text(f'[project]\nname = "x"\nversion = "1"\n\n[tool.aot]\n{text}\n')
    r = subprocess.run([sys.executable, "-m", "aot", "bundle", "--project", str(p)], capture_output=True,
                       text=True, env=repo_env(), timeout=120)
    assert r.returncode == 2, r.stdout[-500:] + r.stderr[-500:]
    line = r.stderr.strip()
    assert "\n" not in line and len(line) < 400, line[:600]
    assert f"{p / 'pyproject.toml'}: [tool.aot] key {key!r}" in line and message in line, line


def test_build_leftovers_are_documented():
    """The hatch hook builds into build/aot/ and stages into build/aot-bundle/; the manual says so and how
    to treat them, and the examples' build folders are ignored by git."""
    readme = (DOCS / "downstream.md").read_text()
    assert "`build/aot/`" in readme and "`build/aot-bundle/`" in readme and "`.gitignore`" in readme
    hook = (ROOT / "aot" / "package" / "hatch.py").read_text()
    bundle = (ROOT / "aot" / "package" / "bundle.py").read_text()
    assert '"build" / "aot-bundle"' in hook and '"build" / "aot"' in bundle
    assert "/examples/*/build/" in (ROOT / ".gitignore").read_text().splitlines()


@pytest.mark.parametrize("case", ["deep-arrays", "deep-tables", "fifo", "huge"])
def test_hostile_pyproject_is_one_config_line(tmp_path, case):
    """A pyproject.toml nested 2,000 deep (tomllib recurses), a FIFO in its place or one over 4 MiB: one
    line naming the file, exit 2, no traceback and no hang."""
    import os
    p = tmp_path / "proj"
    p.mkdir()
    f = p / "pyproject.toml"
    head = '[project]\nname = "x"\nversion = "1"\n\n[tool.aot]\npackage = "x"\n'
    if case == "deep-arrays":
        f.write_text(head + "deep = " + "[" * 2000 + "]" * 2000 + "\n")
    elif case == "deep-tables":
        f.write_text(head + "deep = " + "{a = " * 2000 + "1" + "}" * 2000 + "\n")
    elif case == "fifo":
        os.mkfifo(f)
    else:
        f.write_text(head + "# " + "x" * (5 << 20) + "\n")
    r = subprocess.run([sys.executable, "-m", "aot", "bundle", "--project", str(p)], capture_output=True,
                       text=True, env=repo_env(), timeout=60)
    assert r.returncode == 2, r.stdout[-500:] + r.stderr[-500:]
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line and str(f) in line, line[:600]


# ------------------------------------------------------------------- issue 30: the swap, the epoch, pip's line
def _pystr(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    shutil.copytree(ROOT / "examples" / "pystr-mypkg", proj,
                    ignore=shutil.ignore_patterns("build", "artifacts", "__pycache__"))
    return proj


#: `aot bundle` through the CLI (its SIGTERM handler included), paused inside the swap until killed.
PAUSED_BUNDLE = """
import sys, time
import aot.package.bundle as b
if sys.argv[1] == "fallback":
    b._exchange = lambda a, c: False  # a system without renameat2(RENAME_EXCHANGE)
def pause(where):
    print("PAUSED", where, flush=True)
    time.sleep(120)
b._swap_pause = pause
from aot.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("mode, sig", [("exchange", "KILL"), ("exchange", "TERM"), ("fallback", "TERM"),
                                       ("fallback", "KILL")])
def test_bundle_killed_inside_its_swap_keeps_or_restores_the_folder(tmp_path, mode, sig):
    """A bundle killed between its renames: with the atomic exchange the package holds the new set at once;
    with two renames SIGTERM puts the old set back before exiting, and after SIGKILL the next bundle does.
    Either way the next bundle leaves no `.artifacts.*` folder behind."""
    import signal
    proj = _pystr(tmp_path)
    art = proj / "pystr_mypkg" / "artifacts"
    args = ["bundle", "--project", str(proj), "--sm", "90", "--jobs", "1", "-q"]
    env = repo_env(AOT_CACHE_DIR=str(tmp_path / "cache"))
    first = subprocess.run([sys.executable, "-m", "aot", *args], capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    (art / "aot-package.json").write_text((art / "aot-package.json").read_text().replace('"folder"', '"old": 1, "folder"'))
    p = subprocess.Popen([sys.executable, "-c", PAUSED_BUNDLE, mode, *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stdout.readline()
        assert line.startswith("PAUSED " + ("exchanged" if mode == "exchange" else "renamed")), line + p.stderr.read()
        p.send_signal(getattr(signal, f"SIG{sig}"))
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()
    left = sorted(q.name for q in art.parent.iterdir() if q.name.startswith(".artifacts."))
    if mode == "fallback" and sig == "KILL":  # nothing could run: the old set waits beside the package
        assert not art.exists() and left[0] == f".artifacts.old-{p.pid}", left
        assert len(left) == 2 and left[1].startswith(f".artifacts.tmp-{p.pid}-"), left  # and the new one
    else:
        assert (art / "manifest.json").is_file()
        old = '"old": 1' in (art / "aot-package.json").read_text()
        assert old == (mode == "fallback"), mode  # exchange: the new set is in; fallback+TERM: the old is back
        if sig == "KILL":  # the old set, swapped out and not yet removed
            assert len(left) == 1 and left[0].startswith(f".artifacts.tmp-{p.pid}-"), left
        else:
            assert left == [], left
    again = subprocess.run([sys.executable, "-m", "aot", *args], capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert (art / "manifest.json").is_file() and '"old": 1' not in (art / "aot-package.json").read_text()
    assert not [q.name for q in art.parent.iterdir() if q.name.startswith(".artifacts.")]


def test_bundle_with_an_impossible_source_date_epoch_is_one_line(tmp_path):
    proj = _pystr(tmp_path)
    r = subprocess.run([sys.executable, "-m", "aot", "bundle", "--project", str(proj), "--sm", "90"],
                       capture_output=True, text=True, timeout=120,
                       env=repo_env(SOURCE_DATE_EPOCH="99999999999999999999", AOT_CACHE_DIR=str(tmp_path / "c")))
    assert r.returncode == 2, r.stdout + r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line and "SOURCE_DATE_EPOCH" in line, line
    assert not (proj / "build").exists()  # stopped before building anything


def _shim(where: Path) -> Path:
    """aot's entry points (hatch, cmake.module) for a source checkout, as an editable install has them."""
    info = where / "cccl_aot-0.0.dev0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cccl-aot\nVersion: 0.0.dev0\n")
    (info / "entry_points.txt").write_text("[cmake.module]\naot = aot.cmake\n\n[hatch]\naot = aot.package.hatch\n")
    return where


@pytest.mark.parametrize("example", ["pystr-mypkg", "skbuild-mypkg"])
def test_a_matrix_error_inside_pip_is_one_aot_line(tmp_path, example):
    """A misspelled matrix field inside `pip wheel` (hatchling's hook; scikit-build-core's CMake): pip's output
    holds one `aot: error:` line naming the file, the spec and the field, and no Python traceback."""
    proj = tmp_path / "proj"
    shutil.copytree(ROOT / "examples" / example, proj, ignore=shutil.ignore_patterns("build", "artifacts"))
    m = proj / "build_matrix.yaml"
    text = m.read_text()
    bad = text.replace("kernels: [", "kernals: [", 1)
    assert bad != text
    m.write_text(bad)
    env = repo_env(AOT_WHEEL_SM="80", AOT_CACHE_DIR=str(tmp_path / "c"))
    env["PYTHONPATH"] += os.pathsep + str(_shim(tmp_path / "shim"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w",
                        str(tmp_path / "w"), str(proj)], capture_output=True, text=True, env=env, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    lines = [ln.strip() for ln in out.splitlines() if "aot: error:" in ln]
    assert len(lines) == 1 and "build_matrix.yaml" in lines[0] and "kernals" in lines[0], out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    if example == "skbuild-mypkg":  # CMake's fatal error is that line, not a pointer to it
        every = [ln.strip() for ln in out.splitlines()]
        at = next(i for i, ln in enumerate(every) if ln.startswith("CMake Error at") and "Findaot.cmake" in ln)
        assert every[at + 1] == lines[0], every[at:at + 3]
