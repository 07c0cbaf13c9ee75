"""numba-cuda kernels served from packaged cubins through the library's own ``@cuda.jit`` dispatcher.

:func:`attach_numba` (``aot.attach_numba(registry)``) puts a packaged-overload cache in front of each packaged
kernel's dispatcher (the ``load_overload`` interface numba-cuda's ``cache=True`` uses,
:mod:`cccl_patches.numba_cuda`): the library's unchanged ``kernel[grid, block](args)`` then gets, for a packaged
signature, a kernel whose cubin is the best packaged artifact for the device (checked as every artifact is:
:func:`aot.runtime.loader.sources.check_packaged`), and compiles nothing. Everything else is numba-cuda's own JIT,
said once:

* a signature that was not packaged: one log line (``INFO`` on ``aot``), the first time it compiles;
* a GPU the set does not cover, or an artifact that fails its checks: one log line or warning, then JIT;
* a numba-cuda aot was not checked against, or artifacts built by a numba-cuda that passes kernel arguments
  otherwise than the installed one (:func:`cccl_patches.numba_cuda.attach_problem`): one
  :class:`~aot.core.errors.AotWarning`, nothing attached; an artifact whose recorded argument ABI fingerprint
  differs from the installed release's: one warning at its first load, then JIT (:func:`check_abi`);
* a kernel whose source, a device function it calls, a value it compiles in (globals, module attributes, closure
  cells: :mod:`aot.runtime.adapters.numba_digest`) or decorator options differ from what was built: one warning
  naming it, nothing attached for it (the packaged code is not what the library's code says); a set whose
  manifest says another digest schema built it (:mod:`aot.core.keyschemas`): one warning saying so ("rebuild the
  set"), nothing attached. The digest is taken at attach and its values again when numba-cuda would compile the
  signature (its first launch): a value assigned in between is one warning and numba-cuda's JIT, as numba-cuda
  itself would compile it in then.

Importing a kernel's module runs it, so only modules inside the package that owns the artifacts are imported.
"""

from __future__ import annotations

import importlib
from typing import Any, Iterable, Mapping, cast

from ...core.arch import Candidate, rank
from ...core.errors import AotError
from ...core.keyschemas import mismatch
from ...core.log import get_logger
from ...core.opref import inside
from .numba_digest import Memo, device_functions, kernel_digest

__all__ = ["attach_numba", "device_functions", "kernel_digest", "resolve_dispatcher", "serve", "warm_spec"]

log = get_logger("aot.runtime.numba")


def resolve_dispatcher(ref: str) -> Any:
    """The ``@cuda.jit`` dispatcher ``pkg.mod:kernel`` names (imports its module)."""
    from cccl_patches.numba_cuda import is_dispatcher
    mod, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(mod)
    except Exception as e:  # noqa: BLE001 - any import failure is one line naming the kernel
        raise AotError(f"kernel {ref!r}: cannot import {mod!r} ({type(e).__name__}: {e})") from None
    obj = getattr(module, attr, None)
    if obj is None or not is_dispatcher(obj):
        raise AotError(f"kernel {ref!r}: {mod}.{attr} is not a numba-cuda @cuda.jit kernel")
    return obj


def attach_numba(registry: Any, names: Iterable[str] | None = None, *, warm: bool = False,
                 digest_now: bool = True) -> dict[str, str]:
    """Serve ``registry``'s numba-cuda kernels (all, or ``names``) through their own ``@cuda.jit`` dispatchers:
    ``kernel[grid, block](args)`` then launches the packaged cubin for a packaged signature and compiles nothing.
    Returns, per spec, ``"attached"`` or why not (said once as a warning; numba-cuda then JIT-compiles).
    ``warm``: also load each packaged cubin into the current device now, so the first launch only launches.
    Call it again after a ``request_warmup``-style reload: it replaces what it attached before.
    ``digest_now=False`` (:mod:`aot.runtime.adapters.numba_lazy`): each kernel's digest is taken at its own first
    compile, by the packaged cache, before it serves anything, not here for every kernel (an edited kernel is
    then said and JIT-compiled at its first launch; ``"attached"`` does not mean its digest was checked yet)."""
    from cccl_patches import numba_cuda as nc
    from ...core.spec import NumbaKernel
    wanted = set(names) if names is not None else None
    specs = [s for s in (registry.spec(n) for n in registry.names()) if isinstance(s, NumbaKernel)
             and (wanted is None or s.name in wanted)]
    result: dict[str, str] = {}
    if not specs:
        return result
    try:
        installed = nc.check_version()
    except nc.NumbaCudaError as e:
        if nc.installed_version() == "missing":  # nothing can JIT them either: say what to install
            from ...core.versions import NUMBA_CUDA_REQUIREMENT
            registry._warn(f"aot: {registry.root}: {e}: its numba kernels cannot run (pip install "
                           f"'{NUMBA_CUDA_REQUIREMENT}')")
        else:
            registry._warn(f"aot: {e}: packaged numba kernels are not attached; numba-cuda JIT-compiles them")
        return {s.name: str(e) for s in specs}
    stale = mismatch(getattr(registry.manifest, "key_schemas", None), "numba")
    if stale:  # every digest differs, though no kernel changed: said once, as what it is
        why = f"aot: {registry.root}: numba kernels were {stale}; numba-cuda JIT-compiles them"
        registry._warn(why)
        return {s.name: why for s in specs}
    by_kernel: dict[str, list[NumbaKernel]] = {}
    warned: set[str] = set()
    for s in specs:
        problem = nc.attach_problem(s.numba_cuda, installed)
        if problem:
            why = (f"aot: {registry.root}: numba kernels were built with numba-cuda {s.numba_cuda}, installed is "
                   f"{installed} ({problem}): they are not attached; numba-cuda JIT-compiles them")
            if s.numba_cuda not in warned:  # one warning per building release, not per kernel
                warned.add(s.numba_cuda)
                registry._warn(why)
            result[s.name] = why
            continue
        by_kernel.setdefault(s.kernel, []).append(s)
    owner = registry._owner
    for ref, group in by_kernel.items():
        try:
            if owner is None or not inside(ref, owner):
                raise AotError(f"aot: refusing to import kernel {ref!r}: it is outside the package that owns "
                               f"the artifacts ({owner!r})")
            dispatcher = resolve_dispatcher(ref)
            group, twins = _fitting(ref, group, nc.code_options(dispatcher))
            result.update(twins)
            memo = Memo()
            if digest_now:
                _check_digest(ref, dispatcher, group, memo)
        except AotError as e:
            registry._warn(str(e))
            result.update({s.name: str(e) for s in group})
            continue
        served = {nc.argtypes_of(s.signature): _maker(registry, s, dispatcher, memo) for s in group}
        nc.install_cache(dispatcher, ref, served)
        result.update({s.name: "attached" for s in group})
        registry._numba_attached = getattr(registry, "_numba_attached", frozenset()) | {s.name for s in group}
        if warm:
            for argtypes in served:
                dispatcher.compile(argtypes).bind()
    return result


def _fitting(ref: str, group: list[Any], now: Mapping[str, Any]) -> tuple[list[Any], dict[str, str]]:
    """The specs of one kernel built with the options numba-cuda compiles it with here, and why the others (a
    fastmath kernel's build for the other ``lto``: numba-cuda's decorator sets it from whether nvJitLink is
    installed) are not attached. Raises when a packaged signature has no build with these options."""
    fits = [s for s in group if s.options == now]
    if {s.signature for s in fits} != {s.signature for s in group}:
        raise AotError(f"aot: {ref}: its @cuda.jit options differ from the packaged build's; "
                       f"numba-cuda JIT-compiles it")
    why = (f"not attached: built for lto={{}}; numba-cuda compiles {ref} with lto={now.get('lto')} here (its "
           f"default: whether nvJitLink is installed), which the other build serves")
    return fits, {s.name: why.format(s.options.get("lto")) for s in group if s.options != now}


def _check_digest(ref: str, dispatcher: Any, group: list[Any], memo: Memo) -> None:
    """Raise unless what numba-cuda would compile into ``dispatcher`` now (:func:`kernel_digest`, computed once
    per kernel: its source, what it calls, the values of the globals, closure cells and module attributes it
    reads) is what the packaged build compiled in. A value the digest cannot key raises too: the kernel is then
    numba-cuda's to compile."""
    try:
        now = kernel_digest(dispatcher, memo)
    except AotError as e:
        raise AotError(f"aot: {ref}: {e}; numba-cuda JIT-compiles it") from None
    if any(s.digest != now for s in group):
        raise AotError(f"aot: {ref}: its source, a function it calls or a value it compiles in (a global, a module "
                       f"attribute, a closure cell) changed since the build; numba-cuda JIT-compiles it")


def warm_spec(registry: Any, name: str) -> int:
    """A warmup's task for a numba kernel (:mod:`aot.runtime.warmup.warmup`): nothing to do in the warmup's thread but
    say whether the kernel is attached (``Registry.from_package`` or :func:`attach_numba` attached it in the
    caller's thread); its cubin loads at the first launch. Returns the kernels loaded now (0). Why nothing
    more: attaching or loading from aot's warmup thread hung on the H100 (a request_warmup of numba_mypkg,
    tests/test_gpu_numba.py, twice; not yet diagnosed), so the warmup thread touches neither numba nor CUDA
    for these kernels. Raises why not attached (numba-cuda then compiles it); a kernel whose attach waits for
    numba-cuda's first compile (:mod:`aot.runtime.adapters.numba_lazy`) is not said to be."""
    if getattr(registry, "_numba_deferred", False):
        return 0
    if name not in getattr(registry, "_numba_attached", frozenset()):
        raise AotError(f"{name}: numba kernel not attached to its dispatcher (Registry.from_package attaches a "
                       f"package's kernels; else call aot.attach_numba(registry)): numba-cuda JIT-compiles it")
    return 0


def _maker(registry: Any, spec: Any, dispatcher: Any, memo: Memo | None = None):
    """The factory the dispatcher's cache calls for ``spec``'s signature, when numba-cuda would compile it: a
    rebuilt kernel, no I/O yet (the artifact is chosen, read and checked when the kernel first loads on a device).
    The values the kernel compiles in are checked again first (``memo``: the attach's sources and reads, so
    microseconds): one assigned since the attach (``cfg.TPB = 64``) is what numba-cuda would compile in, so the
    kernel is then numba-cuda's to compile (one warning, ``None``)."""
    from cccl_patches import numba_cuda as nc

    def make() -> Any:
        if getattr(dispatcher, "_launch_config_sensitive", False):  # numba-cuda 0.30+: compiled per launch config
            registry._warn(f"aot: {spec.kernel}: numba-cuda marked it launch-config sensitive (its compile reads the "
                           f"grid, block or shared memory size); numba-cuda JIT-compiles {spec.name}")
            return None
        first = memo is not None and not memo.sources  # the attach took no digest (digest_now=False): the whole one
        try:
            now = kernel_digest(dispatcher, memo)
        except AotError as e:
            now = str(e)
            if first:
                registry._warn(f"aot: {spec.kernel}: {e}; numba-cuda JIT-compiles {spec.name}")
                return None
        if now != spec.digest:
            what = ("its source, a function it calls or a value it compiles in (a global, a module attribute, a "
                    "closure cell) changed since the build" if first else "a value it compiles in (a global, a "
                    "module attribute, a closure cell) changed since it was attached")
            registry._warn(f"aot: {spec.kernel}: {what}; numba-cuda JIT-compiles {spec.name}")
            return None
        return nc.rebuild_kernel(dispatcher, spec.signature, spec.name,
                                 lambda cc: serve(registry, spec, cc[0] * 10 + cc[1]))
    return make


def check_abi(spec: Any, header: Mapping[str, Any]) -> None:
    """Raise (:class:`AotError`) unless the installed numba-cuda passes ``spec``'s arguments as the build's did:
    the header's ``abi`` fingerprint (:func:`cccl_patches.numba_cuda.abi_fingerprint`) equals the installed
    release's. An artifact without one (built before aot recorded it) serves only the release that built it."""
    from cccl_patches import numba_cuda as nc
    installed = nc.check_version()
    recorded = header.get("abi")
    if recorded is None:
        if spec.numba_cuda != installed:
            raise AotError(f"built by numba-cuda {spec.numba_cuda} without an argument ABI fingerprint; installed "
                           f"is {installed}")
        return
    here = nc.abi_fingerprint(nc.argtypes_of(spec.signature))
    if recorded != here:
        raise AotError(f"numba-cuda {installed} passes the arguments of {spec.signature} otherwise than numba-cuda "
                       f"{spec.numba_cuda}, which built it (argument ABI {here} vs {recorded})")


def serve(registry: Any, spec: Any, device_sm: int) -> tuple[str, bytes, dict] | None:
    """The best packaged artifact of ``spec`` for ``device_sm`` that passes every check, as ``(kind, payload,
    header)``;
    ``None`` (one log line) when none does and numba-cuda must compile."""
    from ..loader.sources import check_packaged
    manifest = registry.manifest
    cands = rank(device_sm, [Candidate(e["sm"], e["payload_kind"], "packaged", e)
                             for e in manifest.entries_for(spec.name)]) if manifest is not None else []
    for cand in cands:
        entry = cast(Mapping[str, Any], cand.ref)  # the manifest entry (as packaged_candidates puts it)
        path = manifest.path_of(entry)
        try:
            art = check_packaged(manifest, spec, entry, path)
            links = art.header.get("links", [])
            if not isinstance(art.header.get("entry"), str) or not (isinstance(links, list) and
                                                                     all(isinstance(x, str) for x in links)):
                raise AotError("header lacks the kernel's entry symbol or its links")
        except Exception as e:  # noqa: BLE001 - any failure: the next source
            registry._warn(f"aot: skipping {path}: {e}")
            continue
        try:
            check_abi(spec, art.header)
        except AotError as e:  # every artifact of the spec came from one build: none of them serves
            registry._warn(f"aot: {path}: {e}; numba-cuda JIT-compiles {spec.name}")
            return None
        log.debug("%s: %s sm_%d serves sm_%d", spec.name, art.kind, art.sm, device_sm)
        return art.kind, art.payload, dict(art.header)
    log.info("%s: no packaged artifact serves sm_%d: numba-cuda JIT-compiles it", spec.name, device_sm)
    return None
