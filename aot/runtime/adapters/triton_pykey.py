"""aot's key of a Triton compile that one build serves under every CPython of a Triton release.

Triton's own cache key (``get_cache_key``: ``triton_key()``, then the source's, the backend's and the options'
hashes and the cache-invalidating environment) starts with ``triton_key()``, which hashes the Triton build: its
frontend, compiler, backends and language sources, and ``libtriton``. A release's wheels carry the same sources for
every CPython, and one ``libtriton`` per CPython: the same C++ (MLIR, LLVM, the bindings) built against another
Python ABI. Its hash makes every key differ between Pythons, so a set built under 3.11 served nothing under 3.12,
although Triton compiles the same code under both (``benchmarks/triton_per_python.py``: equal cubin, PTX and
metadata for the example's kernels at SM 80 and 90 under 3.11.7 and 3.12.1, Triton 3.9.0; docs/triton.md).

aot's key (:func:`aot_key`) is Triton's key string with the ``libtriton`` hash taken out of ``triton_key()``:
everything else (the release, every source file Triton hashes, the kernel, its specialisation, the options,
ptxas's version and the target in the backend's hash, the environment) is Triton's own text. The ``libtriton``
hash is left out only for a PyPI release (a version without a local label: a source build's ``libtriton`` may be
any C++, so its key keeps the hash and such a build is served only from its own build). At run time
:func:`watch` wraps ``get_cache_key`` in the user's process and notes, for each key Triton computes, aot's key;
the cache manager (:mod:`aot.runtime.adapters.triton_attach`) answers from the artifact whose aot key it is.
Anything Triton appends to the key after ``get_cache_key`` (``add_stages_inspection_hook``) makes the hash of the
noted string differ from the manager's key: no answer, Triton compiles.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from typing import Any

from ...core.keyschemas import SCHEMAS

#: The schema of aot's key: another derivation is another key (its version: :data:`aot.core.keyschemas.SCHEMAS`).
SCHEMA = f"aot-triton-pykey-v{SCHEMAS['triton_aot_key']}"
#: Triton keys noted per process (the kernels launched); the oldest are dropped beyond it.
MAX_NOTED = 4096
_HEX64 = re.compile(r"[0-9a-f]{64}")
_lock = threading.Lock()
_state: dict[str, Any] = {"noted": {}, "release": None}


def release_key() -> str | None:
    """``triton_key()`` without the ``libtriton`` hash (the module's docstring), or ``None``: a local build, or a
    ``triton_key()`` whose layout is not the frontend, compiler and backends sources, ``libtriton``, the language
    sources, each one sha256 (then aot keys by Triton's key alone, per CPython)."""
    if _state["release"] is None:
        _state["release"] = _release_key() or ""
    return _state["release"] or None


def _release_key() -> str | None:
    import os
    import pkgutil

    import triton
    from triton.runtime import cache
    version = str(getattr(triton, "__version__", ""))
    if not version or "+" in version:
        return None
    full = cache.triton_key()
    if not full.startswith(version):
        return None
    parts = full[len(version):].split("-")
    root = os.path.dirname(os.path.abspath(triton.__file__))
    before = 1 + sum(1 for d in ("compiler", "backends")
                     for _ in pkgutil.walk_packages([os.path.join(root, d)], prefix=f"triton.{d}."))
    after = sum(1 for _ in pkgutil.walk_packages([os.path.join(root, "language")], prefix="triton.language."))
    if len(parts) != before + 1 + after or not all(_HEX64.fullmatch(p) for p in parts):
        return None
    with open(cache.__file__, "rb") as f:  # the frontend's hash is first: the layout is the one read here
        if parts[0] != hashlib.sha256(f.read()).hexdigest():
            return None
    return f"{version}-" + "-".join(parts[:before] + parts[before + 1:])


def aot_key(key: str) -> str | None:
    """aot's key of Triton's key string ``key`` (``get_cache_key``'s result), ``None`` where it has none."""
    release = release_key()
    if release is None:
        return None
    from triton.runtime.cache import triton_key
    full = triton_key()
    if not key.startswith(full):
        return None
    return hashlib.sha256(f"{SCHEMA}\0{release}\0{key[len(full):]}".encode()).hexdigest()


def noted(manager_key: str) -> tuple[str, str] | None:
    """(aot's key, Triton's sha256 hex) of the compile whose cache manager key is ``manager_key``, if noted."""
    with _lock:
        return _state["noted"].get(manager_key)


def watch() -> None:
    """Wrap ``triton.compiler.compiler.get_cache_key`` (once per process) to note aot's key of each Triton key
    (by the cache manager's key: Triton's base32 of the sha256 of the string). A Triton without that function
    is not watched: its kernels are served by Triton's key alone."""
    from triton.compiler import compiler
    original = getattr(compiler, "get_cache_key", None)
    if original is None or getattr(original, "_aot_pykey", False):
        return
    from triton.runtime.cache import _base32

    @functools.wraps(original)
    def get_cache_key(*args: Any, **kwargs: Any) -> Any:
        key = original(*args, **kwargs)
        try:
            mine = aot_key(key) if isinstance(key, str) else None
            if mine is not None:
                digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
                with _lock:
                    table = _state["noted"]
                    if len(table) >= MAX_NOTED:
                        table.pop(next(iter(table)))
                    table[_base32(digest)] = (mine, digest)
        except Exception:  # noqa: BLE001 - noting never breaks Triton's compile (it is then served by its key)
            pass
        return key

    get_cache_key._aot_pykey = True  # type: ignore[attr-defined]
    compiler.get_cache_key = get_cache_key
