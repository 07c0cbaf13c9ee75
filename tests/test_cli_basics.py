"""CLI basics: --version and the program name, -v logging, every exit code of the README's table, the
newcomer defaults of inspect/verify, verify --json without --gpu, merge progress, any output encoding,
and one writer per --out (two real concurrent builds).

Builds here are NVRTC-only (about 2 s each, mostly worker start-up).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import aot
from aot.cli.main import main
from aot.core.manifest import MANIFEST_NAME, load_manifest
from aot.verify.gpu import verify_integrity

from conftest import ROOT, repo_env

MORTON = "kernels/morton.cu"  # relative to the aot package, where the bundled kernels live


def nvrtc_matrix(path: Path, *units: tuple[str, str]) -> Path:
    """A matrix of NVRTC units (name, source); sources relative to the matrix, else to the package."""
    lines = ["version: 1", "nvrtc:"]
    lines += [f"  - {{name: {n}, source: {src}, kernels: [morton_codes_2d]}}" for n, src in units]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_aot(*args: str, cwd: Path = ROOT, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "aot", *args], cwd=cwd, env=repo_env(**env), capture_output=True,
                          text=True, timeout=timeout)


def one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("aot: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


# ------------------------------------------------------------------------------ version and program name
def test_version_module_and_console_script_names():
    proc = run_aot("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"python -m aot {aot.__version__}"
    # The console script: argv[0] is .../bin/aot. Its usage line says `aot`, not `python -m aot`.
    code = ("import sys; sys.argv = ['/usr/local/bin/aot', *sys.argv[1:]]; from aot.cli.main import entry; entry()")
    for args, rc, stream, want in ((["--version"], 0, "stdout", f"aot {aot.__version__}"),
                                   (["build", "--jobs", "x"], 2, "stderr", "usage: aot build")):
        proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=repo_env(), capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == rc and getattr(proc, stream).startswith(want), proc
        assert "python -m aot" not in proc.stdout + proc.stderr


def test_version_in_process(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip().endswith(aot.__version__)


# ----------------------------------------------------------------------------------------------- -v
def test_verbose_logs_build_items_to_stderr(tmp_path, capsys):
    m = nvrtc_matrix(tmp_path / "m.yaml", ("morton", MORTON))
    out = tmp_path / "out"
    assert main(["build", "--matrix", str(m), "--sm", "80", "--out", str(out), "-q", "-vv"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"aot: DEBUG aot\.build\.builder: morton@sm_80: miss, built in \d+\.\d\d s", err), err
    assert "aot: INFO aot.build.builder: build into" in err and "2 built" in err
    assert main(["-v", "build", "--matrix", str(m), "--sm", "80", "--out", str(out), "-q"]) == 0
    err = capsys.readouterr().err
    assert "2 hit" in err and "DEBUG" not in err  # -v: INFO only
    assert main(["build", "--matrix", str(m), "--sm", "80", "--out", str(out), "-q"]) == 0
    assert capsys.readouterr().err == ""  # no -v: the handler is gone again


# ------------------------------------------------------------------------------------------ exit codes
def test_exit_0_and_2_usage(tmp_path, capsys):
    assert main(["validate"]) == 0
    assert main(["build", "--only", "no_such_spec", "--sm", "80", "--out", str(tmp_path / "o")]) == 2
    assert "unknown spec 'no_such_spec'" in one_error_line(capsys.readouterr().err)
    assert main(["build", "--jobs", "many"]) == 2  # argparse
    capsys.readouterr()
    if not _gpu():
        assert main(["build", "--sm", "native", "--out", str(tmp_path / "o")]) == 2
        assert "--sm native" in one_error_line(capsys.readouterr().err)


def test_exit_1_unwritable_out(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    m = nvrtc_matrix(tmp_path / "m.yaml", ("morton", MORTON))
    assert main(["build", "--matrix", str(m), "--sm", "80", "--out", str(tmp_path / "file" / "out"), "-q"]) == 1
    assert "Not a directory" in one_error_line(capsys.readouterr().err)


def test_exit_3_toolchain(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AOT_STUB_LIBCUDA", str(tmp_path / "missing.so"))
    m = nvrtc_matrix(tmp_path / "m.yaml", ("morton", MORTON))
    assert main(["build", "--matrix", str(m), "--sm", "80", "--out", str(tmp_path / "o"), "--force-stub-driver",
                 "-q"]) == 3
    assert "AOT_STUB_LIBCUDA" in one_error_line(capsys.readouterr().err)


def test_exit_4_build_failed(tmp_path, capsys):
    (tmp_path / "broken.cu").write_text('extern "C" __global__ void morton_codes_2d(int* a) { a[0] = ; }\n')
    m = nvrtc_matrix(tmp_path / "m.yaml", ("broken", "broken.cu"))
    assert main(["build", "--matrix", str(m), "--sm", "80", "--out", str(tmp_path / "o"), "-q"]) == 4
    assert "build items failed" in capsys.readouterr().err


def test_exit_5_7_6_artifacts(small_build_copy, capsys):
    assert main(["verify", str(small_build_copy), "--gpu"]) == (0 if _gpu() else 6)
    capsys.readouterr()
    victim = next(small_build_copy.rglob("*.aot"))
    victim.write_bytes(victim.read_bytes()[:-1] + b"\0")
    assert main(["verify", str(small_build_copy)]) == 7
    assert "problem(s)" in capsys.readouterr().err
    (small_build_copy / MANIFEST_NAME).write_text("{not json")
    assert main(["inspect", str(small_build_copy)]) == 5
    one_error_line(capsys.readouterr().err)


def test_exit_2_unknown_verify_only_name(small_build_copy, capsys):
    assert main(["verify", str(small_build_copy), "--gpu", "--only", "nope"]) == 2
    assert "'nope'" in one_error_line(capsys.readouterr().err)


def test_exit_130_interrupted(monkeypatch, capsys):
    import aot.cli.main

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(aot.cli.main, "cmd_validate", interrupted)
    assert main(["validate"]) == 130
    assert capsys.readouterr().err.strip() == "aot: interrupted"


def _gpu() -> bool:
    from aot.build.toolchain import native_sm
    return native_sm() is not None


# ------------------------------------------------------------------------------- newcomer rough edges
def _installed_artifacts() -> bool:
    from importlib import resources
    return (Path(str(resources.files("aot"))) / "artifacts" / MANIFEST_NAME).is_file()


@pytest.mark.skipif(_installed_artifacts(), reason="this aot carries packaged artifacts")
def test_inspect_and_verify_without_target(small_build, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for cmd in ("inspect", "verify"):
        assert main([cmd]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "carries no artifacts" in line and "aot-out" in line and "DIR|WHEEL" in line
    shutil.copytree(small_build.out, tmp_path / "aot-out")
    for cmd in ("inspect", "verify"):
        assert main([cmd]) == 0
        captured = capsys.readouterr()
        assert "uses ./aot-out" in captured.err
        assert "aot-out" in captured.out


def test_verify_json_without_gpu(small_build_copy, tmp_path, capsys):
    report = tmp_path / "verify.json"
    assert main(["verify", str(small_build_copy), "--json", str(report)]) == 0
    doc = json.loads(report.read_text())
    n = len(load_manifest(small_build_copy).artifacts)
    assert doc["artifacts"] == n and doc["integrity_ok"] is True and doc["problems"] == []
    victim = next(small_build_copy.rglob("*.aot"))
    victim.unlink()
    assert main(["verify", str(small_build_copy), "--json", str(report)]) == 7
    doc = json.loads(report.read_text())
    assert doc["integrity_ok"] is False and any(victim.name in p for p in doc["problems"])
    assert main(["verify", str(small_build_copy), "--json", str(tmp_path)]) == 2  # a directory: refused
    capsys.readouterr()


def test_readme_test_command_works_from_a_new_shell():
    """It activates the venv itself, and .ci/run runs exactly it (with its fresh .venv-ci)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"Run the tests[^\n]*\n+```bash\n(.+?)\n```", readme, re.S).group(1).strip()
    assert block.startswith(". .venv/bin/activate && ")
    setup = re.search(r"## The two commands.+?```bash\n(.+?)\n```", readme, re.S).group(1)
    assert setup.startswith("python3 -m venv .venv ")  # the setup command makes the .venv the test one uses
    proc = subprocess.run(["bash", str(ROOT / ".ci" / "run"), "--print-command"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == block.replace(".venv/", ".venv-ci/")


# ------------------------------------------------------------------------------------------- encoding
def test_ascii_terminal_with_non_ascii_names(tmp_path):
    m = nvrtc_matrix(tmp_path / "m.yaml", ("mort\u00f6n", MORTON))
    proc = run_aot("validate", "--matrix", str(m), PYTHONIOENCODING="ascii")
    assert proc.returncode == 0 and "mort\\xf6n" in proc.stdout and "Traceback" not in proc.stderr
    proc = run_aot("build", "--only", "\u00f1", "--sm", "80", "--out", str(tmp_path / "o"), PYTHONIOENCODING="ascii")
    assert proc.returncode == 2 and "'\\xf1'" in one_error_line(proc.stderr)


# ------------------------------------------------------------------------------------ merge progress
def test_merge_reports_progress_and_is_quiet_off_a_tty(tmp_path):
    from aot.build.merge import merge
    m = nvrtc_matrix(tmp_path / "m.yaml", ("morton", MORTON))
    for k in (1, 2):
        assert main(["build", "--matrix", str(m), "--sm", "80,90", "--shard", f"{k}/2", "--out",
                     str(tmp_path / f"s{k}"), "-q"]) == 0
    seen: list = []
    summary = merge([tmp_path / "s1", tmp_path / "s2"], tmp_path / "lib", on_copy=lambda d, t: seen.append((d, t)))
    assert summary["artifacts"] == 3 and seen[0] == (0, 3) and seen[-1] == (3, 3)
    proc = run_aot("merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "cli"))
    assert proc.returncode == 0 and proc.stderr == ""  # not a terminal: no bar
    assert "merged 2 shards, 3 artifacts" in proc.stdout


# ------------------------------------------------------------------------------- one writer per --out
def test_second_writer_is_refused_naming_dir_and_pid(tmp_path):
    from aot.build.outlock import output_lock
    m = nvrtc_matrix(tmp_path / "m.yaml", ("morton", MORTON))
    out = tmp_path / "out"
    out.mkdir()
    with output_lock(out, "build"):
        for args in (("build", "--matrix", str(m), "--sm", "80", "--out", str(out), "-q"),
                     ("merge", str(tmp_path / "s"), "--out", str(out))):
            proc = run_aot(*args)
            line = one_error_line(proc.stderr)
            assert proc.returncode == 1 and str(out) in line and f"PID {os.getpid()} (build)" in line, line
    assert not (out / MANIFEST_NAME).exists() and not (out / "build-report.json").exists()
    assert run_aot("build", "--matrix", str(m), "--sm", "80", "--out", str(out), "-q").returncode == 0  # released


def test_lock_file_symlink_is_not_followed(tmp_path, capsys):
    m = nvrtc_matrix(tmp_path / "m.yaml", ("morton", MORTON))
    out = tmp_path / "out"
    out.mkdir()
    (out / ".aot-lock").symlink_to(tmp_path / "planted")
    assert main(["build", "--matrix", str(m), "--sm", "80", "--out", str(out), "-q"]) == 2
    assert "symbolic link" in one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "planted").exists()


def test_two_concurrent_builds_into_one_out(tmp_path):
    """Different matrices into one --out at the same moment: one is refused (or they serialize); the final
    manifest names only files that exist and verify passes. Without the lock each pruned the other's files."""
    a = nvrtc_matrix(tmp_path / "a.yaml", ("morton", MORTON))
    b = nvrtc_matrix(tmp_path / "b.yaml", ("morton_b", MORTON))
    for trial in range(2):
        out = tmp_path / f"out{trial}"
        procs = [subprocess.Popen([sys.executable, "-m", "aot", "build", "--matrix", str(mx), "--sm", "80,90",
                                   "--out", str(out), "-q"], cwd=ROOT, env=repo_env(), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for mx in (a, b)]
        results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
        for p in procs:
            p.stdout.close()
            p.stderr.close()
        codes = sorted(rc for rc, _ in results)
        assert codes in ([0, 0], [0, 1]), results
        for rc, err in results:
            if rc == 1:
                line = one_error_line(err)
                assert str(out) in line and "PID" in line
        n, problems = verify_integrity(out)
        assert problems == [] and n == 3
        assert all((out / e["path"]).is_file() for e in load_manifest(out).artifacts)
        assert main(["verify", str(out)]) == 0
