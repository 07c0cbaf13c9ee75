"""A CCCL blob's bytes must not follow the build worker's PID (aot.build.nvrtc_seed, cccl_patches/nvrtc_seed.c).

NVRTC names an ``-rdc`` program's internal-linkage entities ``_INTERNAL_<crc>_<n>_<name>_<nonce>_<PID>``; aot
zeroed nonce and PID after the build but kept the PID's length, so workers whose PIDs straddled a power of ten
wrote blobs of other sizes (tests/test_wheel.py::test_cccl_artifacts_are_reproducible failed then). The seeding
library gives each program a seed drawn from its own inputs: the real NVRTC 13 compiles here, in a child process
per run (the library is loaded RTLD_GLOBAL, as in a build worker, never into pytest's own process)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import repo_env

#: An anonymous-namespace variable used from a template: NVRTC names it after nonce and PID (no external name
#: comes first to name the module by).
SOURCE = """
namespace { __device__ int table[4]; }
template <class T> __global__ void k(T* p) { p[0] = table[p[2]]; }
template __global__ void k<int>(int*);
"""

_CHILD = r"""
import ctypes, json, os, re, sys
from cuda.bindings import nvrtc
nvrtc.nvrtcVersion()  # the real libnvrtc.so.13 is loaded now, as cuda.compute's C library loads it
from aot.build import nvrtc_seed
seeding = nvrtc_seed.load()
real = ctypes.CDLL("libnvrtc.so.13", mode=os.RTLD_NOLOAD)

def names(lib, source):
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"device_reduce", 0, None, None) == 0
    opts = (ctypes.c_char_p * 2)(b"-arch=sm_90", b"-rdc=true")
    assert lib.nvrtcCompileProgram(prog, 2, opts) == 0
    n = ctypes.c_size_t()
    assert real.nvrtcGetPTXSize(prog, ctypes.byref(n)) == 0
    ptx = ctypes.create_string_buffer(n.value)
    assert real.nvrtcGetPTX(prog, ptx) == 0
    assert lib.nvrtcDestroyProgram(ctypes.byref(prog)) == 0
    return sorted({m.decode() for m in re.findall(rb"_INTERNAL_\w+?table", ptx.raw)})

print(json.dumps({"pid": os.getpid(), "plain": names(real, sys.argv[1]), "seeded": names(seeding, sys.argv[1]),
                  "other": names(seeding, sys.argv[1].replace("p[2]", "p[3]")),
                  "count": nvrtc_seed.seeded()}))
"""


def _run(source: str) -> dict:
    r = subprocess.run([sys.executable, "-c", _CHILD, source], capture_output=True, text=True, env=repo_env(),
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_seeded_programs_name_no_pid_and_agree_across_processes():
    pytest.importorskip("cuda.bindings.nvrtc")
    a, b = _run(SOURCE), _run(SOURCE)
    # NVRTC's own names carry the PID (what made the blob's size follow it) ...
    assert all(n.endswith(f"_{a['pid']}5table") for n in a["plain"]) and a["plain"], a
    # ... the seeded ones do not, are equal in two processes, and differ for another program
    assert a["seeded"] and not any(str(p["pid"]) in n for p in (a, b) for n in p["seeded"]), (a, b)
    assert a["seeded"] == b["seeded"] and a["seeded"] != a["other"]
    assert a["count"] == 2
