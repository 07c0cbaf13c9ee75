"""``aot doctor`` and ``aot cache``: this machine, what the loader would use, and the per-user cache."""

from __future__ import annotations

import sys

from ..core.errors import AotError, UsageError
from ..core.text import printable

#: Distributions a runtime install (``pip install cccl-aot-cu13`` or a package's wheel) leaves out on purpose.
BUILD_ONLY = {"numba-cuda-mlir": "expected in a runtime install: only building or JIT-compiling Python "
                                 "operators needs it, through the [jit] or [cu13] extra"}


def cmd_doctor(args) -> int:
    from ..core.env import describe
    from ..core.versions import dist_version
    from ..build.toolchain import native_sm, real_driver_present
    print(f"aot {__import__('aot').__version__}, Python {sys.version.split()[0]}")
    for dist in ("cuda-cccl", "cuda-core", "cuda-bindings", "numba-cuda-mlir"):
        v = dist_version(dist)
        if v == "missing" and dist in BUILD_ONLY:
            v = f"not installed ({BUILD_ONLY[dist]})"
        print(f"  {dist}: {v}")
    real = real_driver_present()
    print(f"driver: {'real NVIDIA driver' if real else 'none (builds use the stand-in libcuda)'}")
    sm = native_sm()
    print(f"GPU: {'sm_%d' % sm if sm else 'none usable'}")
    from ..runtime.loader.lean import prepare
    try:
        print(f"runtime toolchain: {prepare().describe()}")
    except AotError as e:
        print(f"runtime toolchain: unusable ({e})")
    _print_loader_choice(sm)
    _print_cache_summary()
    print("environment variables:")
    for name, default, doc in describe():
        print(f"  {name} (default {default or 'unset'}): {doc}")
    return 0


def _print_loader_choice(sm: int | None) -> None:
    """Per spec of aot's own registry: with a GPU, what the loader would use on it; without one, that the
    choice needs a device, and what is packaged for each spec (the SMs and PTX a device could load)."""
    from collections import defaultdict
    from ..runtime.loader.default import default_registry
    reg = default_registry()
    names = reg.names()
    if sm:
        print(f"loader's choice per spec on this GPU (sm_{sm}):")
        for name in names:
            cands = reg.packaged_candidates(reg.spec(name), sm)
            why = f"packaged {cands[0].kind} sm_{cands[0].sm}" if cands else "user cache or JIT (no packaged fit)"
            print(f"  {printable(name, 128):32} -> {why}")
        return
    have: dict = defaultdict(list)
    for a in (reg.manifest.artifacts if reg.manifest is not None else ()):
        have[a["name"]].append(("compute_" if a["payload_kind"] == "ptx" else "sm_") + str(a["sm"]))
    head = "loader's choice per spec: needs a GPU (none usable here; the choice depends on its SM)"
    if not have:
        print(f"{head}; this install packages no artifacts, so each of its {len(names)} specs would come from "
              f"the user cache or JIT")
        return
    print(f"{head}. Packaged for {len(have)} of {len(names)} specs (a GPU of one of these SMs loads its own; "
          f"another, a compatible one, PTX or JIT):")
    for name in names:
        got = sorted(set(have.get(name, ())), key=lambda t: (t.startswith("compute_"), int(t.split("_")[1])))
        print(f"  {printable(name, 128):32} -> {', '.join(got) if got else 'nothing packaged: user cache or JIT'}")


# ------------------------------------------------------------------------------------------- aot cache
def _cache_parser(sub) -> None:
    c = sub.add_parser("cache", help="the per-user JIT cache: where it is, what it holds (info), clear it")
    c.add_argument("action", nargs="?", choices=("info", "clear"), default="info",
                   help="info (default): path, safety, entries by spec, SM and cuda-cccl; clear: remove them")
    c.add_argument("--stale", action="store_true", help="with clear: only entries of another cuda-cccl or "
                   "aot version (and idle lock files, old temp files, other stand-in builds)")


def _size(nbytes: int) -> str:
    n = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def _print_cache_summary() -> None:
    from ..runtime.jit.cache_admin import inspect_cache
    info = inspect_cache()
    safety = {"ok": "safe", "absent": "not created yet", "disabled": "disabled (AOT_DISABLE_CACHE)",
              "unsafe": f"NOT USED: {info.problem}", "unusable": f"unusable: {info.problem}"}[info.state]
    skipped = (f"; {info.skipped_count} skipped (another user's, or writable by others: not counted)"
               if info.skipped_count else "")
    print(f"user cache: {info.root} ({safety}); {len(info.entries)} CCCL entries, "
          f"{_size(info.total_bytes)} in all, cap {_size(info.cap) if info.cap else 'none'}{skipped}")


def cmd_cache(args) -> int:
    from collections import Counter
    from ..runtime.jit.cache_admin import clear_cache, inspect_cache
    if args.action == "clear":
        res = clear_cache(stale=args.stale)
        what = f"{'stale ' if args.stale else ''}user cache"
        if not res.left:
            print(f"{what} cleared: {res.files} files, {_size(res.bytes)} removed")
            return 0
        print(f"{what} partly cleared: {res.files} files, {_size(res.bytes)} removed; {len(res.left)} left:")
        for line in res.left[:20]:
            print(f"  left {printable(line)}")
        if len(res.left) > 20:
            print(f"  ... and {len(res.left) - 20} more")
        raise AotError(f"{what} not fully cleared: {len(res.left)} left, first {res.left[0]}")
    if args.stale:
        raise UsageError("--stale goes with 'aot cache clear'")
    _print_cache_summary()
    info = inspect_cache()
    groups: Counter = Counter()
    sizes: Counter = Counter()
    for e in info.entries:
        k = (e.name, f"sm_{e.sm}" if e.sm is not None else "?", e.cuda_cccl, e.aot)
        groups[k] += 1
        sizes[k] += e.size
    if groups:
        print(f"  {'spec':32} {'SM':7} {'cuda-cccl':10} {'aot':10} {'entries':>7} {'size':>10}")
        for k in sorted(groups):
            print(f"  {k[0]:32} {k[1]:7} {k[2]:10} {k[3]:10} {groups[k]:>7} {_size(sizes[k]):>10}")
    bad = [e for e in info.entries if e.problem]
    for e in bad:
        print(f"  unreadable entry {printable(e.path)}: {printable(e.problem)}")
    for e in info.untrusted:
        print(f"  skipped entry {printable(e.path)}: {printable(e.problem)}")
    for line in info.skipped:
        print(f"  not read: {printable(line)}")
    if info.state == "ok":
        print(f"  NVRTC (cuda.core cache): {info.nvrtc_files} files, {_size(info.nvrtc_bytes)}; "
              f"stand-in libcuda: {info.stub_files} files, {_size(info.stub_bytes)}; lock files: {info.locks}")
    return 0


