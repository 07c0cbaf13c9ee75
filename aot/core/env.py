"""Every ``AOT_*`` environment variable, declared once, typed, documented.

Code reads a variable through its declaration (``CACHE_DIR.get()``), never ``os.environ`` directly, so
the full list of knobs lives here, in ``aot doctor`` (:func:`describe`) and in the manual's table
(docs/environment.md). Values are read at access time, so tests can override them with ``monkeypatch.setenv``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Generic, TypeVar

from .errors import UsageError

T = TypeVar("T")


def _parse_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise UsageError(f"expected a boolean (1/0/true/false), got {raw!r}")


def _parse_path(raw: str) -> Path | None:
    return Path(raw).expanduser() if raw.strip() else None  # set but empty = unset


def _parse_int(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise UsageError(f"expected an integer, got {raw!r}") from None


def _parse_size(raw: str) -> int:
    n = _parse_int(raw)
    if n < 0:
        raise UsageError(f"expected a size in bytes >= 0, got {raw!r}")
    return n


@dataclass(frozen=True)
class Var(Generic[T]):
    """One environment variable: its name, parser, default and documentation. (A docstring: without one
    ``dataclass`` builds one from ``inspect.signature``, 4 ms on a library's first packaged hit, issue 42.)"""

    name: str
    parse: Callable[[str], T]
    default: T
    doc: str

    def get(self) -> T:
        raw = os.environ.get(self.name)
        if raw is None:
            return self.default
        try:
            return self.parse(raw)
        except UsageError as e:
            raise UsageError(f"environment variable {self.name}: {e}") from None


VARS: dict[str, Var] = {}


def _var(name: str, parse: Callable[[str], T], default: T, doc: str) -> Var[T]:
    v = Var(name, parse, default, doc)
    VARS[name] = v
    return v


CACHE_DIR = _var("AOT_CACHE_DIR", _parse_path, None,
                 "Per-user JIT cache directory (default: platformdirs' user cache dir for 'aot').")
DISABLE_CACHE = _var("AOT_DISABLE_CACHE", _parse_bool, False,
                     "1 = never read or write the per-user cache (JIT results stay in memory).")
CACHE_MAX_BYTES = _var("AOT_CACHE_MAX_BYTES", _parse_size, 2 * 1024 ** 3,
                       "Size cap of the user cache's CCCL entries (and, separately, of its NVRTC cache); the "
                       "least recently used entries are evicted past it (0 = no cap).")
DISABLE_PACKAGED = _var("AOT_DISABLE_PACKAGED", _parse_bool, False,
                        "1 = ignore packaged artifacts (forces the user cache / JIT path; for testing).")
JIT_ONLY = _var("AOT_JIT_ONLY", _parse_bool, False,
                "1 = serve no packaged artifact but keep the packaged specs' definitions (each JIT-compiled from "
                "it; numba-cuda, CuPy and a library's own compile call compile as without aot): aot gate's JIT runs.")
DEBUG_DIGEST = _var("AOT_DEBUG_DIGEST", _parse_path, None,
                    "File each numba kernel digest appends its labelled items to (comparing two hosts' digests).")
FORCE_STUB = _var("AOT_FORCE_STUB_DRIVER", _parse_bool, False,
                  "1 = build with the stand-in libcuda even where a real driver exists (CI parity).")
STUB_PATH = _var("AOT_STUB_LIBCUDA", _parse_path, None,
                 "Path of a prebuilt stand-in libcuda.so.1 (default: the packaged one, else built with cc).")
FORCE_STUB_TOOLCHAIN = _var("AOT_FORCE_STUB_TOOLCHAIN", _parse_bool, False,
                            "1 = import cuda.compute with aot's stand-in NVRTC/nvJitLink/cudart even where the real "
                            "ones exist (proves packaged artifacts never call them; JIT fallback is then off).")
IMPORT_HOOK = _var("AOT_IMPORT_HOOK", _parse_bool, True,
                   "0 = no import hook: a lean install's `import cuda.compute` (before aot prepared NVRTC/nvJitLink "
                   "or their stand-ins) then fails in cuda-pathfinder; read at interpreter start by cccl_aot.pth "
                   "and by `import aot` (aot/runtime/loader/import_hook.py).")
CC = _var("CC", str, "", "C compiler (and flags) that builds the stand-in libcuda when no packaged one exists "
                         "(default: cc, else gcc).")
JOBS = _var("AOT_JOBS", _parse_int, 0, "Default --jobs for builds (0 = CPU count).")
WHEEL_SM = _var("AOT_WHEEL_SM", str, "",
                "SMs the wheel build compiles and bundles ('all', '80,90'); unset or 'none': a tool-only wheel.")
WHEEL_MATRIX = _var("AOT_WHEEL_MATRIX", _parse_path, None,
                    "Build matrix the wheel build compiles with AOT_WHEEL_SM (default: build_matrix.yaml).")
WHEEL_ARTIFACTS = _var("AOT_WHEEL_ARTIFACTS", _parse_path, None,
                       "Bundle this prebuilt (merged) artifact directory into the wheel instead of building.")
def _parse_no_jit(raw: str) -> str:
    value = raw.strip().lower()
    if value in ("", "0", "off", "false", "no"):
        return "off"
    if value in ("warn", "raise", "report"):
        return value
    raise UsageError(f"expected warn, raise, report or off, got {raw!r}")


NO_JIT = _var("AOT_NO_JIT", _parse_no_jit, "off",
              "warn|raise = from `import aot` on, every compile of any family (NVRTC through cuda.core or raw, "
              "numba-cuda, CuPy, cuda.compute builds) warns once per kernel with the caller's stack, or raises "
              "(aot.no_jit(); docs/gate.md#no-jit-after-startup); report = only counted, for AOT_NO_JIT_REPORT.")
NO_JIT_REPORT = _var("AOT_NO_JIT_REPORT", _parse_path, None,
                     "With AOT_NO_JIT: write the compiles seen (aot.jit_report()) as JSON to this file at exit.")



def _parse_paths(raw: str) -> tuple[Path, ...]:
    return tuple(Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip())


WHEEL_MERGE: Var[tuple[Path, ...]] = _var("AOT_WHEEL_MERGE", _parse_paths, tuple(),
                   "Artifact sets built elsewhere (under other cuda-cccl releases) that the wheel build merges into "
                   "its own ('aot merge'), os.pathsep-separated; wins over [tool.aot] merge.")
SOURCE_DATE_EPOCH = _var("SOURCE_DATE_EPOCH", lambda raw: _parse_int(raw) if raw.strip() else None, None,
                        "Reproducible builds: timestamp given to the files 'aot bundle' writes (wheel backends "
                        "read it too).")


def describe() -> list[tuple[str, str, str]]:
    """(name, default, doc) for every variable: ``aot doctor`` prints this (docs/environment.md, its table)."""
    return [(v.name, "" if v.default is None else str(v.default), v.doc) for v in VARS.values()]
