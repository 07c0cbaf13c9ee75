"""A killed or interrupted build leaves nothing running (issue 23): real builds, real signals.

Each trial starts ``python -m aot build`` (one cheap CCCL spec and one NVRTC unit, ``--force``, 2 jobs) in
a new session, waits until the build holds its output lock, waits a random moment more (0-3 s: imports,
the pool start, a compile in flight, the commit), and sends SIGINT (70% to the process group, as Ctrl-C
does, else to the build process), SIGTERM (30% to the group) or SIGKILL (to the build process). Then: the main process exits within 60 s, stdout/stderr reach EOF
(no worker or resource tracker keeps them open), no process of the session is alive (``/proc``), no
traceback, the exit code is the README's (130, 143, or 0 when the build finished first; -9 for SIGKILL),
and the output folder holds no manifest or a complete one that verifies. The same folder is reused
across trials, so each trial starts from what the previous one left.

The default run does one trial per signal; the slow job (.ci/slow) :data:`SLOW_TRIALS` per signal (``AOT_SIGNAL_TRIALS``).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aot.build.outlock import LOCK_NAME
from aot.core.fs import TMP_PREFIX
from aot.core.manifest import MANIFEST_NAME, load_manifest, verify_files

from conftest import repo_env

SLOW_TRIALS = int(os.environ.get("AOT_SIGNAL_TRIALS", "3"))  # per signal; the README gives a larger run
SPECS = "reduce_sum_i32,morton"
#: The exit each signal may give. Where the trial's random delay (up to 3 s) outlasted the build, the signal finds
#: it finished: 0 (gone before the signal: seen for SIGKILL on a quiet 2-core host), or death by the signal itself
#: while the interpreter shuts down, after the build, when Python has put SIGINT back to its default and the CLI
#: SIGTERM (seen for SIGINT to the group: -2). Those are checked as a finished build: its set whole, its lock gone.
EXPECTED = {signal.SIGINT: (130, 0, -signal.SIGINT), signal.SIGTERM: (143, 0, -signal.SIGTERM),
            signal.SIGKILL: (-signal.SIGKILL, 0)}
FINISHED = (0, -signal.SIGINT, -signal.SIGTERM)


def session_procs(sid: int) -> list[str]:
    """Live (not zombie) processes of session ``sid``, read from /proc (no psutil)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] not in ("Z", "X"):
            found.append(f"{d} {fields[0]} {cmd}")
    return found


def _wait_gone(sid: int, seconds: float = 10.0) -> list[str]:
    deadline = time.monotonic() + seconds
    while True:
        left = session_procs(sid)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def one_trial(out: Path, sig: signal.Signals, delay: float, group: bool) -> str:
    (out / LOCK_NAME).unlink(missing_ok=True)  # a SIGKILLed writer's lock file (nobody holds it)
    cmd = [sys.executable, "-m", "aot", "build", "--only", SPECS, "--sm", "90", "--jobs", "2", "--force",
           "--out", str(out), "-q"]
    proc = subprocess.Popen(cmd, env=repo_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        t0 = time.monotonic()
        while not (out / LOCK_NAME).exists() and proc.poll() is None and time.monotonic() - t0 < 60:
            time.sleep(0.01)
        time.sleep(delay)
        if group:
            os.killpg(proc.pid, sig)  # Ctrl-C reaches the whole foreground process group; so may a CI stop
        else:
            proc.send_signal(sig)
        what = f"{sig.name} to the {'group' if group else 'process'} after {delay:.2f} s"
        try:
            _out, err = proc.communicate(timeout=60)  # EOF: nothing holds the build's pipes any more
        except subprocess.TimeoutExpired:
            pytest.fail(f"{what}: no EOF after 60 s; alive: {session_procs(proc.pid)}")
        left = _wait_gone(proc.pid)
    finally:  # checked above; now, whatever happened, nothing of this trial outlives the test
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its session is its process group
        except ProcessLookupError:
            pass
        proc.wait()
    assert not left, f"{what}: still alive: {left}"
    text = err.decode(errors="replace")
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, f"{what}: {text[-2000:]}"
    assert proc.returncode in EXPECTED[sig], f"{what}: exit {proc.returncode}: {text[-2000:]}"
    if proc.returncode == 130:
        assert text == "aot: interrupted\n", f"{what}: {text!r}"
    elif proc.returncode == 143:
        assert text == "aot: terminated\n", f"{what}: {text!r}"
    if proc.returncode in FINISHED:  # finished before the signal: a whole set, its lock released
        assert (out / MANIFEST_NAME).exists() and not (out / LOCK_NAME).exists(), what
    if (out / MANIFEST_NAME).exists():
        assert verify_files(load_manifest(out)) == [], what
    if sig != signal.SIGKILL:  # an unwound build removes its temp files and its lock file
        assert not list(out.rglob(TMP_PREFIX + "*")), what
        assert not (out / LOCK_NAME).exists(), what
    return f"{what}: exit {proc.returncode}"


def _trials(tmp_path: Path, per_signal: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = tmp_path / "out"
    out.mkdir()
    plan = [sig for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL) for _ in range(per_signal)]
    rng.shuffle(plan)
    # SIGINT mostly to the group (Ctrl-C), SIGTERM mostly to the build process (kill PID), SIGKILL to it
    return [one_trial(out, sig, rng.uniform(0.0, 3.0),
                      group=sig != signal.SIGKILL and rng.random() < (0.7 if sig == signal.SIGINT else 0.3))
            for sig in plan]


def test_signals_at_random_moments_leave_nothing_running(tmp_path):
    seed = random.randrange(1 << 30)
    print(f"seed {seed}:", *_trials(tmp_path, 1, seed), sep="\n")


@pytest.mark.slow
def test_signals_at_random_moments_many_trials(tmp_path):
    seed = random.randrange(1 << 30)
    print(f"seed {seed}:", *_trials(tmp_path, SLOW_TRIALS, seed), sep="\n")


# ------------------------------------------------------------------------------- the parts, one by one
def _stubborn(_: int) -> None:
    """A worker stuck where SIGTERM does not reach it (as one inside a C compile may be)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)


def test_stop_pool_kills_a_worker_that_ignores_sigterm():
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from aot.build.workers import TERM_GRACE_S, stop_pool
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    fut = pool.submit(_stubborn, 0)
    procs = list(pool._processes.values())
    time.sleep(1.5)  # let it start and ignore SIGTERM
    t0 = time.monotonic()
    stop_pool(pool)
    took = time.monotonic() - t0
    assert not any(p.is_alive() for p in procs)
    assert took < 3 * TERM_GRACE_S + 1, took
    assert fut.done()


def test_workers_ignore_sigint_and_die_with_their_parent(tmp_path):
    """A parent that creates a pool through the builder's initializer and is then SIGKILLed: its worker
    (PDEATHSIG) is gone at once, and the worker ignored the SIGINT sent to it first."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import multiprocessing, os, signal, sys, time\n"
        "from concurrent.futures import ProcessPoolExecutor\n"
        "from aot.build.builder import _worker_init\n"
        "if __name__ == '__main__':\n"
        "    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context('spawn'),\n"
        "                               initializer=_worker_init, initargs=(None, os.getpid()))\n"
        "    print(pool.submit(os.getpid).result(), flush=True)\n"
        "    time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, str(script)], env=repo_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        worker = int(proc.stdout.readline())
        os.kill(worker, signal.SIGINT)
        time.sleep(0.5)
        assert Path(f"/proc/{worker}").exists()  # ignored
        proc.kill()
        proc.wait()
        assert _wait_gone(proc.pid) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


SIGTERM_SELF = """
import os, signal, sys, time
from aot.cli import main as cli_main

def terminated(args):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    return 0

cli_main.cmd_validate = terminated
before = signal.getsignal(signal.SIGTERM)
rc = cli_main.main(["validate"])
print(rc, signal.getsignal(signal.SIGTERM) is before)
"""


def test_sigterm_in_the_cli_is_one_line_and_143():
    """The CLI's SIGTERM handler unwinds like Ctrl-C, prints one line, returns 143 and restores the previous
    handler for a library caller (in a child process: without the handler SIGTERM would end the caller)."""
    proc = subprocess.run([sys.executable, "-c", SIGTERM_SELF], env=repo_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.split() == ["143", "True"], (proc.returncode, proc.stdout)
    assert proc.stderr == "aot: terminated\n"
