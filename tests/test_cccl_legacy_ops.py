"""The operators' LTO-IR on cuda-cccl < 1.1 (aot.runtime.adapters.cccl_legacy_ops): the key covers what changes
numba's bytes, refuses what it cannot see, and a served operator never reaches numba. The wrappers here have
the shape cuda-cccl 0.6.0-1.0.x's ``_odr_helpers`` gives them (``func_device``, ``inner_sig`` and ``arg_specs`` in
the wrapper's globals); the real release's round trip is the slow test in tests/test_cccl_legacy.py and the
GPU run (.ci/gpu/cccl_legacy.sh)."""

from __future__ import annotations

import enum
import sys
import types

import pytest

numba_cuda = pytest.importorskip("numba.cuda")

from aot.runtime.adapters import cccl_legacy_ops as ops  # noqa: E402

SCALE = 2


class _Mode(enum.Enum):
    LOAD = 0
    STORE = 2
    STATE = 3


def _spec(t, mode):
    return types.SimpleNamespace(numba_type=t, mode=mode)


def _wrapper(op, name="wrapped_op_0", modes=(_Mode.LOAD, _Mode.LOAD, _Mode.STORE)):
    from numba import types as nt
    from numba.cuda import jit
    g = {"func_device": jit(device=True)(op), "inner_sig": nt.int32(nt.int32, nt.int32),
         "arg_specs": [_spec(nt.int32, m) for m in modes]}
    src = f"def {name}(arg_0, arg_1, arg_2):\n    return impl(arg_0, arg_1, arg_2)\n"
    exec(src, g)  # noqa: S102 - the release builds its wrapper the same way
    return g[name]


def _add(a, b):
    return a + b


def _scaled(a, b):
    return a + b * SCALE


@pytest.fixture
def env(monkeypatch):
    """A device of compute capability 9.0 for numba, the release's modules as fixed content, NVVM hashed."""
    from numba.cuda.cudadrv import devices
    cc = {"value": (9, 0)}
    device = type("Device", (), {"compute_capability": property(lambda self: cc["value"])})()
    ctx = types.SimpleNamespace(device=device)
    monkeypatch.setattr(devices, "get_context", lambda *a, **k: ctx)
    monkeypatch.setattr(ops, "_file_sha", lambda module: f"sha-of-{module}")
    lib, libdevice = ops._nvvm_paths()
    return {"nvvm": {lib: b"nvvm", libdevice: b"libdevice"}, "cc": cc}


def _key(fn, env, **kw):
    from numba import types as nt
    sig = nt.void(nt.voidptr, nt.voidptr, nt.voidptr)
    return ops.key_of(fn, (), {"sig": sig, "output": "ltoir", **kw}, env["nvvm"])


def test_the_key_follows_the_operator_its_values_the_device_and_nvvm(env, monkeypatch):
    base = _key(_wrapper(_add), env)
    assert _key(_wrapper(_add), env) == base  # the same content, another wrapper object: the same key
    assert _key(_wrapper(_scaled), env) != base  # another body
    scaled = _key(_wrapper(_scaled), env)
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 3)
    assert _key(_wrapper(_scaled), env) != scaled  # a value the operator reads
    assert _key(_wrapper(_add, name="wrapped_op_1"), env) != base  # the wrapper's name is in the LTO-IR
    assert _key(_wrapper(_add), env, output="ptx") != base  # the call's own arguments
    env["cc"]["value"] = (10, 0)
    assert _key(_wrapper(_add), env) != base  # numba compiles for its device's compute capability
    env["cc"]["value"] = (9, 0)
    env["nvvm"] = {k: v + b"!" for k, v in env["nvvm"].items()}
    assert _key(_wrapper(_add), env) != base  # another NVVM


def test_what_the_key_cannot_see_is_refused(env):
    with pytest.raises(ops.Refused, match="stateful"):
        _key(_wrapper(_add, modes=(_Mode.STATE, _Mode.LOAD, _Mode.STORE)), env)
    with pytest.raises(ops.Refused, match="not a wrapper"):
        _key(_add, env)
    env["nvvm"] = {}
    with pytest.raises(ops.Refused, match="did not hash"):
        _key(_wrapper(_add), env)


def test_a_served_operator_never_reaches_numba_and_a_miss_compiles(env, monkeypatch):
    from numba import types as nt
    wrapper = _wrapper(_add)
    sig = nt.void(nt.voidptr, nt.voidptr, nt.voidptr)
    key = ops.key_of(wrapper, (), {"sig": sig, "output": "ltoir"}, env["nvvm"])
    shims = types.SimpleNamespace(nvvm_identity=env["nvvm"], refusals=[], answer={key: b"LTOIR"}.get)
    monkeypatch.setattr(ops, "_counts", [0, 0])
    calls = []

    def compile_(pyfunc, *args, **kwargs):
        calls.append(pyfunc.__name__)
        return b"compiled", nt.void

    monkeypatch.setattr(ops, "_shims", shims)
    assert ops.compile_or_serve(compile_, wrapper, (), {"sig": sig, "output": "ltoir"}) == (b"LTOIR", nt.void)
    assert calls == [] and ops.counts() == (1, 0)
    other = _wrapper(_scaled)
    assert ops.compile_or_serve(compile_, other, (), {"sig": sig, "output": "ltoir"})[0] == b"compiled"
    assert calls == [other.__name__] and ops.counts() == (1, 1)
    # building: every compile runs and is recorded under its key
    got = []
    monkeypatch.setattr(ops, "_recorder", lambda k, o: got.append((k, o)))
    assert ops.compile_or_serve(compile_, wrapper, (), {"sig": sig, "output": "ltoir"})[0] == b"compiled"
    assert got == [(key, b"compiled")]
