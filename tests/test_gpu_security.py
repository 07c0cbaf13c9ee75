"""On a real GPU: a kernel another local user plants in a shared cache is never run (issue 8, item 1).

The attack as it was measured on an H100: with ``AOT_CACHE_DIR`` a mode-1777 shared directory, a second
user (uid 4242) plants a self-consistent entry under the victim's ``reduce_sum_f64`` cache key whose
payload is a *max* reduction; ``reduce_sum_f64([1, 2, 3, 4])`` returned 4.0. Now the victim gets 10.0,
from JIT, with one warning saying why the cache was not used. A control run proves the planted bytes
are a working attack: the same file in the victim's own private cache is served (and gives 4.0).

Needs a GPU, root and ``setpriv`` (the attacker runs as another uid); skipped otherwise. Self-contained:
it builds what it plants (``aot.build.compile.compile_cccl`` for this device's SM, ~5 s) and runs every
victim in a fresh process, as an end user would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from aot.build.toolchain import native_sm

ATTACKER = 4242
SETPRIV = shutil.which("setpriv")
NAME = "reduce_sum_f64"

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(native_sm() is None, reason="needs a CUDA GPU and driver"),
    pytest.mark.skipif(os.geteuid() != 0 or SETPRIV is None, reason="the attacker runs as a second uid: "
                       "needs root and setpriv"),
]

VICTIM = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    from cuda.core import Device
    from aot.verify.devarray import DeviceArray
    from aot.build.compile import init_value
    from aot.runtime.loader.objects import AotWarning
    from aot.runtime.loader.registry import Registry
    from aot.build.matrix import load_matrix
    spec = load_matrix().select([sys.argv[2]])[0]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        reg = Registry(sys.argv[1], specs=[spec])  # no packaged artifacts: the user cache, else JIT
        dev = Device()
        dev.set_current()
        alg = reg.cccl(spec.name)
        d_in = DeviceArray.from_host(np.array([1.0, 2.0, 3.0, 4.0]), dev)
        d_out = DeviceArray(1, np.float64, dev)
        h_init = init_value("float64", 0)
        nbytes = alg(temp_storage=None, d_in=d_in, d_out=d_out, num_items=4, h_init=h_init)
        temp = DeviceArray(int(nbytes or 1), np.uint8, dev, poison=False)
        alg(temp_storage=temp, d_in=d_in, d_out=d_out, num_items=4, h_init=h_init)
        result = float(d_out.to_host()[0])
    st = reg.status()[spec.name]
    print(json.dumps({"result": result, "source": st.source, "path": st.path,
                      "warnings": [str(m.message) for m in w if issubclass(m.category, AotWarning)]}))
""")


def victim(cache: Path, tmp_path: Path) -> dict:
    from conftest import repo_env
    proc = subprocess.run([sys.executable, "-c", VICTIM, str(tmp_path / "no-artifacts"), NAME],
                          capture_output=True, text=True, timeout=300, env=repo_env(AOT_CACHE_DIR=str(cache)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def planted_max_reduction(sm: int) -> tuple[str, bytes]:
    """(the victim's cache key for reduce_sum_f64 on ``sm``, an entry for it that computes a maximum)."""
    from aot.core import format as fmt
    from aot.build.compile import compile_cccl
    from aot.build.matrix import load_matrix
    from aot.core.spec import CcclSpec, item_key
    from aot.build.toolchain import versions
    sum_spec = load_matrix().select([NAME])[0]
    max_spec = CcclSpec(NAME, "reduce", {**sum_spec.params, "op": "maximum"})
    payload = compile_cccl(max_spec, sm)
    key = item_key(sum_spec, sm, "cccl-blob", versions())
    header = fmt.make_header(family="cccl", name=NAME, content_key=key, sm=sm, payload_kind="cccl-blob",
                             payload=payload, producer={k: versions()[k] for k in fmt.PRODUCER_FIELDS})
    return key, fmt.encode(header, payload)


def test_planted_kernel_in_a_shared_cache_is_refused_and_the_result_is_right(tmp_path):
    sm = native_sm()
    key, entry = planted_max_reduction(sm)
    arena = Path(tempfile.mkdtemp(prefix="aot-gpu-sec-"))
    try:
        arena.chmod(0o755)
        staged = arena / "entry.aot"
        staged.write_bytes(entry)
        staged.chmod(0o644)
        shared = arena / "shared"
        shared.mkdir()
        shared.chmod(0o1777)
        rel = f"cccl/{key[:2]}/{key}.aot"
        subprocess.run([SETPRIV, f"--reuid={ATTACKER}", f"--regid={ATTACKER}", "--clear-groups", "sh", "-c",
                        f"mkdir -p {shared}/cccl/{key[:2]} && cp {staged} {shared}/{rel}"],
                       check=True, timeout=60, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        assert os.stat(shared / rel).st_uid == ATTACKER

        # control: the planted bytes are a working attack where the cache is trusted
        own = tmp_path / "own-cache"
        (own / "cccl" / key[:2]).mkdir(parents=True)
        shutil.copy(staged, own / rel)
        control = victim(own, tmp_path)
        assert control["source"] == "cache" and control["result"] == 4.0, control

        # the attack: the victim's cache is the shared directory
        r = victim(shared, tmp_path)
        assert r["result"] == 10.0 and r["source"] == "jit", r
        assert len(r["warnings"]) == 1 and "mode 1777" in r["warnings"][0], r["warnings"]
        assert {os.lstat(p).st_uid for p in shared.rglob("*")} == {ATTACKER}  # nothing of ours written there
    finally:
        shutil.rmtree(arena, ignore_errors=True)
