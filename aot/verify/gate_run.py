"""Running ``aot gate``: the library's command three times, each with the launch hook
(:mod:`aot.verify.gate_hook`), then :mod:`aot.verify.gate`'s comparison and the package's listing.

The runs, in order, each in fresh caches (its own ``CUPY_CACHE_DIR``, ``NUMBA_CACHE_DIR``, ``TRITON_CACHE_DIR``
and ``AOT_CACHE_DIR``, ``AOT_DISABLE_CACHE=1``): a JIT run (``AOT_JIT_ONLY=1``: the runtime serves nothing,
JIT-compiles the packaged specs from their definitions, and every family compiles as without aot), the packaged
run (``AOT_NO_JIT=report`` and its report: what compiled there was not served), and a second JIT run (what differs
between the two JIT runs is nondeterministic). CuPy's own kernel cache is empty in each run, so in the packaged run
a kernel comes from aot or from CuPy's compile. Triton's likewise: aot serves a Triton kernel only where the user's
Triton cache has none (it answers first), so with one cache the JIT run's compile answered the packaged run's
launch and the packaged kernels were never launched (a mutant passed the gate: issue 43).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..core.errors import UsageError
from ..record.run import hook_sitecustomize
from .gate import KernelResult, SpecRow, compare, listing

HOOK = Path(__file__).with_name("gate_hook.py")
RUNS = ("jit", "packaged", "jit-again")
#: Largest log read back per run.
MAX_LOG = 512 * 1024 * 1024

_SITECUSTOMIZE = hook_sitecustomize("gate", "_aot_gate_hook", "AOT_GATE_HOOK")  # the same chaining as aot record's


@dataclass
class GateRun:
    """The three runs' exit codes and logs, the comparison and the listing."""

    returncodes: dict[str, int]
    results: list[KernelResult]
    rows: list[SpecRow]
    compiled: list[dict] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)


def env_for(run: str, work: Path, base: dict[str, str]) -> dict[str, str]:
    """The environment of one run (see the module's docstring)."""
    env = dict(base)
    site = work / "site"
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [base.get("PYTHONPATH")])])
    for var, sub in (("CUPY_CACHE_DIR", "cupy"), ("NUMBA_CACHE_DIR", "numba"), ("TRITON_CACHE_DIR", "triton"),
                     ("AOT_CACHE_DIR", "aot")):
        (work / run / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(work / run / sub)
    env.update(AOT_GATE_HOOK=str(HOOK), AOT_GATE_LOG=str(work / f"{run}.jsonl"), AOT_DISABLE_CACHE="1")
    for var in ("AOT_DISABLE_PACKAGED", "AOT_JIT_ONLY", "AOT_NO_JIT", "AOT_NO_JIT_REPORT", "CUPY_CACHE_IN_MEMORY"):
        env.pop(var, None)
    if run == "packaged":
        env.update(AOT_NO_JIT="report", AOT_NO_JIT_REPORT=str(work / "packaged-nojit.json"))
    else:
        env["AOT_JIT_ONLY"] = "1"
    return env


def read_log(path: Path) -> list[dict]:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_LOG)
    except OSError:
        return []
    out = []
    for line in data.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def run_gate(command: Sequence[str], package: str | None, cwd: Path | None = None, timeout: float | None = None,
             logs: Path | None = None) -> GateRun:
    """Run ``command`` three times (JIT, packaged, JIT) and compare; ``logs``: copy the runs' logs there."""
    if not command:
        raise UsageError("aot gate: give the command after '--' (e.g. -- python -m pytest tests)")
    work = Path(tempfile.mkdtemp(prefix="aot-gate-"))
    try:
        (work / "site").mkdir()
        (work / "site" / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        rcs, got = {}, {}
        for run in RUNS:
            (work / f"{run}.jsonl").touch(mode=0o600)
            try:
                rcs[run] = subprocess.run(list(command), env=env_for(run, work, dict(os.environ)), cwd=cwd,
                                          timeout=timeout, check=False).returncode
            except FileNotFoundError:
                raise UsageError(f"aot gate: command not found: {command[0]}") from None
            except subprocess.TimeoutExpired:
                rcs[run] = 124
            got[run] = read_log(work / f"{run}.jsonl")
        if logs is not None:
            logs.mkdir(parents=True, exist_ok=True)
            for name in [f"{r}.jsonl" for r in RUNS] + ["packaged-nojit.json"]:
                if (work / name).is_file():
                    shutil.copyfile(work / name, logs / name)
        report = _read_json(work / "packaged-nojit.json")
        compiled = [k for k in report.get("kernels", []) if isinstance(k, dict)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if package:
        _mark_served(package, got["packaged"])
    results = compare(got["jit"], got["packaged"], got["jit-again"])
    rows = listing(package_keys(package, got["packaged"], results), results,
                   [str(k.get("kernel")) for k in compiled]) if package else []
    unseen = sorted({str(r.get("why")) for run in got.values() for r in run if r.get("kind") == "unseen"})
    return GateRun(rcs, results, rows, compiled, unseen)


def _read_json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _mark_served(package: str, packaged: list[dict]) -> None:
    """aot serves a CuPy kernel at CuPy's NVRTC call, inside a cache miss, so the hook sees CuPy save (or load from
    its own cache) an image it did not compile: a packaged-run image whose bytes are one of the package's CuPy
    payloads is aot's."""
    from ..core import format as fmt
    from ..core.majorset import installed_major
    from ..core.manifest import load_manifest
    from ..runtime.loader.registry import package_dir
    root = Path(package_dir(package)) / "artifacts"
    try:
        m = load_manifest(root, skip_bad_specs=True, major=installed_major)  # several majors: this one's
    except Exception:  # noqa: BLE001 - no readable manifest: nothing is marked, the listing says what it lacks
        return
    shas = set()
    for name, spec in m.built.items():
        for entry in m.entries_for(name) if spec.family == "cupy" else ():
            try:
                shas.add(hashlib.sha256(fmt.read(m.path_of(entry)).payload).hexdigest())
            except Exception:  # noqa: BLE001 - an unreadable artifact serves nothing
                continue
    for rec in packaged:
        if rec.get("kind") == "cupy" and rec.get("sha256") in shas:
            rec["how"] = "served"


def package_keys(package: str | None, packaged: list[dict], results: list[KernelResult]) -> dict[str, dict]:
    """Each spec of ``package``'s installed artifacts with the keys its kernels are seen under (see
    :func:`aot.verify.gate.listing`): numba ``mod:qualname(argtypes)``, NVRTC symbols (the listed names and
    the image's entries), CuPy results whose served image is one of the spec's payloads, CCCL the spec's name."""
    from ..core import format as fmt
    from ..core.majorset import installed_major
    from ..core.manifest import load_manifest
    from ..runtime.loader.registry import package_dir
    root = Path(package_dir(str(package))) / "artifacts"
    m = load_manifest(root, skip_bad_specs=True, major=installed_major)  # several majors: this one's
    served = {}
    for rec in packaged:
        if rec.get("kind") == "cupy" and rec.get("how") == "served":
            served[str(rec.get("kernel"))] = str(rec.get("sha256"))
    cupy_by_sha: dict[str, list[str]] = {}
    for r in results:
        name = r.kernel.rsplit(" (", 1)[-1].rstrip(")") if r.family == "cupy" else None
        if name in served:
            cupy_by_sha.setdefault(served[name], []).append(r.kernel)
    out: dict[str, dict] = {}
    for name, spec in m.built.items():
        keys: list[str] = []
        if spec.family == "numba":
            keys.append(_numba_key(spec))
        elif spec.family == "cccl":
            keys.append(name)
        elif spec.family == "triton":
            keys += _triton_keys(spec, sorted({int(e.get("sm") or 90) for e in m.entries_for(name)}))
        for entry in m.entries_for(name):
            try:
                art = fmt.read(m.path_of(entry))
            except Exception:  # noqa: BLE001 - an unreadable artifact has no key: its spec is listed unchecked
                continue
            if spec.family == "nvrtc":
                keys += [k for k in _nvrtc_keys(art.payload, art.kind) if k not in keys]
            elif spec.family == "cupy":
                keys += cupy_by_sha.get(hashlib.sha256(art.payload).hexdigest(), [])
        if spec.family == "nvrtc":
            keys += [k for k in getattr(spec, "kernels", ()) if k not in keys]
        out[name] = {"family": spec.family, "keys": keys}
    return out


_NO_DEVICE: list[bool] = []


def _nvrtc_keys(payload: bytes, kind: str) -> list[str]:
    """The names an NVRTC image's kernels are launched under (:func:`aot.verify.gate_hook.nvrtc_name`): each entry
    symbol with its parameters' sizes, read from the image loaded on this GPU; without one, the symbols alone
    (:func:`aot.verify.gate.listing` then matches every size of a symbol)."""
    from ..build.image_symbols import kernel_symbols
    from .gate_hook import nvrtc_name
    symbols = kernel_symbols(payload)
    if _NO_DEVICE:
        return symbols
    try:
        from cuda.core import ObjectCode
        from .gpu import current_device
        from .replay import kernel_symbol
        current_device()
        code = ObjectCode.from_cubin(payload) if kind == "cubin" else ObjectCode.from_ptx(payload)
        return [nvrtc_name(*kernel_symbol(code.get_kernel(s))) for s in symbols]
    except Exception:  # noqa: BLE001 - no device here (or an image it cannot load): the symbols alone
        _NO_DEVICE.append(True)
        return symbols


def _triton_keys(spec: Any, sms: list[int]) -> list[str]:
    """The names a Triton launch of ``spec`` carries (``aot/verify/gate_hook_triton.py``): its fields through the
    kernel's own binder (:func:`aot.build.triton_build.specialize`), per SM built (the options are Triton's per
    target); none where the kernel cannot be imported here (its spec is listed unchecked)."""
    from ..build.triton_build import specialize
    from ..runtime.adapters.triton_attach import resolve_kernel
    from ..runtime.adapters.triton_names import kernel_name
    keys: list[str] = []
    try:
        kernel = resolve_kernel(str(spec.kernel))
        for sm in sms or [90]:
            _, sig, consts, attrs, options = specialize(kernel, spec, sm)
            key = kernel_name(kernel, sig, consts, attrs, options)
            if key not in keys:
                keys.append(key)
    except Exception:  # noqa: BLE001 - no Triton or no kernel here: nothing to match
        return keys
    return keys


def _numba_key(spec: Any) -> str:
    """The name a numba-cuda launch of ``spec`` carries (:func:`aot.verify.gate_hook._numba_caller`)."""
    mod, _, attr = str(spec.kernel).partition(":")
    try:
        from cccl_patches.numba_cuda import argtypes_of
        types = ", ".join(str(t) for t in argtypes_of(spec.signature))
    except Exception:  # noqa: BLE001 - numba cannot read it here: the signature as written
        types = str(spec.signature)
    return f"{mod}:{attr}({types})"
