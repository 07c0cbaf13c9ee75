"""numba-cuda internals aot uses to build ``@cuda.jit`` kernels without a GPU and to hand their cubins back to
the library's own dispatcher. Version-gated: :data:`RELEASES` lists, as closed ranges of published releases,
the numba-cuda releases this module was read against and how each range spells what it uses; any other
release refuses (:class:`NumbaCudaError`) and the caller falls back to numba-cuda's JIT.

Across releases (0.23.0 to 0.30.4, each installed and checked by ``.ci/numba_releases.py``): the internals
below have the same names and call shapes, except three differences :data:`RELEASES` records per range:

* 0.23.0's ``CUDACodeLibrary`` keys its ``_cubin_cache``/``_ptx_cache`` by the device's ``(major, minor)`` and
  ``nvrtc.get_arch_option`` takes two arguments; from 0.24.0 the key is ``(major, minor, "a" | "")`` (``"a"``
  from 9.0 on, for the current device).
* ``_Kernel._rebuild`` takes ``shared_memory_carveout`` from 0.26.0 (and ``_Kernel._parse_carveout`` exists
  from then), ``launch_config_sensitive`` from 0.30.0.
* The code library's ``ObjectCode`` is cuda-core's: ``cuda.core.experimental`` in 0.23/0.24 (cuda-core < 1),
  ``cuda.core`` later: :class:`PackagedLibrary` takes the one numba-cuda's driver module imported.

A kernel built under one release is attached under another only where both releases' ranges flatten kernel
arguments alike (:attr:`Internals.args`; an array is ``meminfo, parent, nitems, itemsize, data, shape...,
strides...`` in every release here, ``_Kernel._prepare_args``), and the artifact's header records the
argument ABI fingerprint of its build (:func:`abi_fingerprint`), which must equal the installed release's.

Evidence (numba-cuda 0.30.4, ``numba_cuda/numba/cuda/``; the same in the other releases unless said above):

* ``dispatcher._Kernel.__init__`` compiles for ``get_current_device().compute_capability`` and calls
  ``lib.get_asm_str()`` for the current device: it needs a GPU. :func:`compile_kernel` does what it does
  (``compiler.compile_cuda`` with its flags and nvvm options, ``kernel_fixup``, ``nvvm.set_launch_bounds``,
  the ``reshape_funcs.cu`` / NRT link rule) for a given
  ``cc`` instead. ``CUDADispatcher.compile_device`` (a device function a kernel calls) also asks
  ``get_current_device()``, looked up in the ``dispatcher`` module's globals: :func:`_target` points that
  name at the SM being built, and clears the device functions' overloads so each SM lowers its own.
* Mangled kernel names carry a per-process counter (``B2v1``, ``B2v3``: ``core.bytecode.FunctionIdentity.
  _unique_ids``): seen on this host, the same kernel compiled twice in one process gets two names.
  Shared arrays are named ``_cudapy_smem_<N>`` from another (``cudaimpl._unique_smem_id``): seen here, the
  same kernel's PTX named its tile ``_cudapy_smem_1`` in one build and ``_cudapy_smem_2`` in another.
  :func:`_target` restarts both counters, so an item's bytes do not depend on what its worker built before
  (the names stay unique within the item, which is one module).
* ``CUDACodeLibrary._linking_libraries`` is a ``set`` of code libraries (hashed by ``id``) and ``modules``, the
  IR NVVM compiles, follows it: a kernel calling several device functions got its ``NumbaEnv`` lines in another
  order from process to process (same cubin). :func:`order_linked_libraries` fixes the order before the IR is
  rendered; :func:`order_linking_files` sorts the linked files' paths (a ``set`` of ``str``: PYTHONHASHSEED).
* ``_Kernel._rebuild(cooperative, name, signature, codelibrary, debug, lineinfo, call_helper, extensions,
  shared_memory_carveout, launch_config_sensitive)`` is how numba-cuda's own disk cache
  (``CUDACacheImpl.rebuild``) makes a kernel without compiling; it leaves ``objectmode`` unset, which
  ``nopython_signatures`` reads, so :func:`rebuild_kernel` sets it.
* ``CUDACodeLibrary.get_cufunc`` loads ``get_cubin()``; ``get_cubin(cc)`` returns ``_cubin_cache[cc]`` when
  present, else links ``_ptx_cache[cc]`` (plus ``_linking_files``) with nvJitLink. ``cc`` is the
  device's ``(major, minor, "a" if >= 9.0)``. :class:`PackagedLibrary` fills those caches from packaged
  artifacts on first use, per device, else compiles the kernel as ``_Kernel`` would (the JIT fallback).
* ``CUDADispatcher.compile(sig)`` asks ``self._cache.load_overload(sig, targetctx)`` before compiling and
  ``add_overload``\\ s what it returns: :class:`PackagedCache` answers there, the interface numba-cuda's
  ``cache=True`` uses, and hands every other signature to the cache it replaced.
* ``debug=True`` kernels report exceptions through ``call_helper``, Python objects numba-cuda pickles;
  aot ships no pickles, so they are refused at build. ``link=[...]`` files, ``extensions`` and
  cooperative (grid-synchronizing) kernels are refused too (not verified yet).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping


@dataclass(frozen=True)
class Internals:
    """How one range of numba-cuda releases spells the internals this module uses. Data, read by the code
    below and checked against each release it names (``.ci/numba_releases.py`` introspects them)."""

    #: The first and last release of the range (inclusive), and every release of it published on PyPI: each
    #: one was installed and checked; a release not listed (a later patch release) is not verified.
    first: str
    last: str
    releases: tuple[str, ...]
    #: Length of the device key of ``CUDACodeLibrary``'s caches: 2 ``(major, minor)``, 3 ``(major, minor, "a")``.
    device_key: int
    #: The keyword arguments ``_Kernel._rebuild`` takes beyond cooperative, name, signature, codelibrary,
    #: debug, lineinfo, call_helper and extensions.
    rebuild: tuple[str, ...]
    #: How kernel arguments are flattened (``_Kernel._prepare_args`` and the target's data model): ranges with
    #: the same value pass arrays and scalars alike, so a cubin built under one launches under the other.
    args: str
    #: What the check installed beside it (numba-cuda imports with these; newer numba or numpy may not).
    checked_with: str


#: The numba-cuda releases aot's numba support was checked against, by range.
RELEASES: tuple[Internals, ...] = (
    Internals("0.23.0", "0.23.0", ("0.23.0",), 2, (), "arrays-v1", "numba 0.65.1, numpy 2.3.5, cuda-core 0.7.0"),
    Internals("0.24.0", "0.24.0", ("0.24.0",), 3, (), "arrays-v1", "numba 0.65.1, numpy 2.3.5, cuda-core 0.7.0"),
    Internals("0.26.0", "0.29.0", ("0.26.0", "0.27.0", "0.28.0", "0.28.1", "0.28.2", "0.29.0"), 3,
              ("shared_memory_carveout",), "arrays-v1", "numba 0.65.1, numpy 2.4.6, cuda-core 0.7.0"),
    Internals("0.30.0", "0.30.4", ("0.30.0", "0.30.1", "0.30.2", "0.30.3", "0.30.4"), 3,
              ("shared_memory_carveout", "launch_config_sensitive"), "arrays-v1",
              "0.30.0-0.30.3: numba 0.65.1, numpy 2.4.6, cuda-core 0.7.0 (0.30.2-0.30.3: 1.2.2); "
              "0.30.4: numba 0.68.1, numpy 2.4.6 and 2.5.5, cuda-core 1.2.2"),
)
#: Every release of :data:`RELEASES`.
VERIFIED = frozenset(r for row in RELEASES for r in row.releases)
#: The files numba-cuda links on its own, by the name an artifact header records.
LINKS = ("reshape_funcs", "nrt")

log = logging.getLogger("aot")


class NumbaCudaError(RuntimeError):
    """numba-cuda is missing, of a version this module was not checked against, or a kernel uses what it
    does not ship."""


def installed_version() -> str:
    """The installed numba-cuda's version, or ``"missing"``; read once per process (a metadata scan of every path
    entry, 1-3 ms: an attach asked it once per kernel; the numba-cuda a process imported does not change)."""
    return _dist_version()


@functools.lru_cache(maxsize=1)
def _dist_version() -> str:
    import importlib.metadata as md
    try:
        return md.version("numba-cuda")
    except md.PackageNotFoundError:
        return "missing"


def internals(version: str) -> Internals:
    """The row of :data:`RELEASES` that holds ``version``; :class:`NumbaCudaError` for any other release."""
    for row in RELEASES:
        if version in row.releases:
            return row
    ranges = ", ".join(row.first if row.first == row.last else f"{row.first}-{row.last}" for row in RELEASES)
    raise NumbaCudaError(f"numba-cuda {version} is not one aot's numba support was checked against ({ranges})")


def check_version() -> str:
    """The installed numba-cuda version, if :data:`RELEASES` holds it; else :class:`NumbaCudaError`."""
    version = installed_version()
    if version == "missing":
        raise NumbaCudaError("numba-cuda is not installed")
    internals(version)
    return version


def _installed() -> Internals:
    return internals(check_version())


def attach_problem(built: str, installed: str) -> str | None:
    """Why kernels built under numba-cuda ``built`` may not be attached under ``installed`` (``None``: they may).
    The cubin does not depend on the release; how the release passes a kernel's arguments does: both must be
    checked releases whose ranges flatten arguments alike (each artifact's fingerprint is checked at load)."""
    if built == installed:
        return None
    try:
        a, b = internals(built), internals(installed)
    except NumbaCudaError as e:
        return str(e)
    if a.args != b.args:
        return (f"numba-cuda {built} and {installed} pass kernel arguments differently ({a.args} vs {b.args})")
    return None


@functools.lru_cache(maxsize=512)
def abi_fingerprint(argtypes: tuple[Any, ...]) -> str:
    """How the installed numba-cuda passes a kernel these arguments: the LLVM types of the parameters the target's
    data model flattens them into (an array: meminfo, parent, nitems, itemsize, data, shape..., strides...),
    hashed. A build records it in each artifact's header; loading under another release compares it."""
    from numba.cuda.descriptor import cuda_target
    packer = cuda_target.target_context.get_arg_packer(list(argtypes))
    text = ";".join(str(t) for t in packer.argument_types)
    return "v1:" + hashlib.sha256(text.encode()).hexdigest()[:32]


def device_key(cc: tuple[int, int], row: Internals | None = None) -> tuple:
    """The key under which this release's ``CUDACodeLibrary`` caches code for ``cc`` (no arch suffix: a build
    targets ``sm_<N>``)."""
    row = row or _installed()
    return (cc[0], cc[1]) if row.device_key == 2 else (cc[0], cc[1], "")


def is_dispatcher(obj: Any) -> bool:
    """Whether ``obj`` is a numba-cuda ``@cuda.jit`` dispatcher (a kernel or a device function)."""
    from numba.cuda.dispatcher import CUDADispatcher
    return isinstance(obj, CUDADispatcher)


def code_options(dispatcher: Any) -> dict[str, Any]:
    """The decorator's options that change code, spelled as :data:`aot.core.numbaspec.OPTIONS` spells them."""
    t = dispatcher.targetoptions
    fastmath = bool(t.get("fastmath", False))
    return {"fastmath": fastmath, "lineinfo": bool(t.get("lineinfo", False)),
            "debug": bool(t.get("debug", False)), "opt": bool(t.get("opt", True)),
            "max_registers": t.get("max_registers"), "lto": bool(t.get("lto", False)) if fastmath else None}


def refusal(dispatcher: Any) -> str | None:
    """Why a kernel cannot be packaged (a device function, ``debug``, ``link``, ``lto``), else ``None``."""
    t = dispatcher.targetoptions
    if t.get("device"):
        return "is a device function (cuda.jit(device=True)); name the kernel that calls it"
    if t.get("debug"):
        return "is compiled with debug=True, whose exceptions numba-cuda reports through pickled objects"
    if t.get("link"):
        return "links extra files (link=[...]), which aot does not ship yet"
    if t.get("extensions"):
        return "has argument extensions (extensions=[...]), which aot does not ship yet"
    return None


class _Target:
    """What ``dispatcher.get_current_device()`` answers while building: the SM being built."""

    def __init__(self, cc: tuple[int, int]):
        self.compute_capability = cc


@contextmanager
def _target(cc: tuple[int, int], device_functions: Iterator[Any]) -> Iterator[None]:
    import numba.cuda.cudaimpl as cudaimpl
    import numba.cuda.dispatcher as dispatcher_module
    from numba.cuda.core.bytecode import FunctionIdentity
    saved = dispatcher_module.get_current_device
    FunctionIdentity._unique_ids = itertools.count(1)
    cudaimpl._unique_smem_id = 0
    for fn in device_functions:
        fn.overloads.clear()
    dispatcher_module.get_current_device = lambda: _Target(cc)
    try:
        yield
    finally:
        dispatcher_module.get_current_device = saved


def _library_key(library: Any) -> tuple[Any, ...]:
    """A code library's place in its parent's link order: the names its own module defines (unique within one
    item once :func:`_target` restarted the counters), then its name."""
    module = getattr(library, "_module", None)
    names = sorted(fn.name for fn in getattr(module, "functions", ()) if not fn.is_declaration)
    return (tuple(names), str(getattr(library, "name", "")))


def order_linked_libraries(library: Any, _done: set[int] | None = None) -> None:
    """Give ``library`` and every library it links a fixed link order, so its PTX is the same bytes from build to
    build. Why: ``CUDACodeLibrary._linking_libraries`` is a ``set`` of library objects, hashed by ``id``; its
    ``modules`` (what NVVM compiles, in that order) follows the set, so the ``.common .global _ZN08NumbaEnv...``
    lines of a kernel calling several device functions came out in another order in some processes (seen here:
    two PTX texts among 8 builds of one kernel in one process; the cubins equal). The set becomes a list in
    :func:`_library_key` order; nothing adds to a finalized library, so numba-cuda never sees the difference.
    Must run before the library's IR is first rendered (``llvm_strs`` caches it): cleared here to be sure."""
    done = set() if _done is None else _done
    if id(library) in done:
        return
    done.add(id(library))
    linked = getattr(library, "_linking_libraries", None)
    if not isinstance(linked, (set, frozenset, list)):
        return
    for sub in linked:
        order_linked_libraries(sub, done)
    library._linking_libraries = _LinkOrder(sorted(linked, key=_library_key))
    library._llvm_strs = None


def order_linking_files(library: Any) -> None:
    """The files a library links (``_linking_files``, a ``set`` of paths whose order follows the string hash, so
    PYTHONHASHSEED) in sorted order, so nvJitLink sees them in one order in every build. Objects other than paths
    keep the set's order."""
    files = getattr(library, "_linking_files", None)
    if isinstance(files, (set, frozenset)) and all(isinstance(f, str) for f in files):
        library._linking_files = _LinkOrder(sorted(files))


class _LinkOrder(list):
    """The linked libraries of a finalized library, in a fixed order; ``add`` as the ``set`` it replaces has."""

    def add(self, item: Any) -> None:
        if item not in self:
            self.append(item)


def argtypes_of(signature: str) -> tuple[Any, ...]:
    """The numba argument types of a signature text."""
    from numba.cuda.core import sigutils
    args, _ = sigutils.normalize_signature(signature)
    return tuple(args)


def compile_kernel(dispatcher: Any, signature: str, sm: int, kind: str, device_functions: Any = (),
                   lto: bool | None = None) -> tuple[bytes, dict[str, Any]]:
    """The ``cubin`` (for ``sm_<sm>``) or ``ptx`` (``compute_<sm>``) of ``dispatcher`` at ``signature``, built as
    ``_Kernel.__init__`` builds it but for ``sm`` rather than the current device; and the header fields the
    loader needs (``entry``: the kernel's symbol; ``links``: the files numba-cuda links in). Compiled with a probe
    launch configuration current (:mod:`cccl_patches.numba_launch`): a kernel whose compile reads it is refused,
    since numba-cuda compiles it per launch configuration. ``lto``: link as numba-cuda does with (``True``) or
    without (``False``) nvJitLink's LTO; ``None``: as the decorator says."""
    from .numba_launch import probed
    check_version()
    why = refusal(dispatcher)
    if why:
        raise NumbaCudaError(f"the kernel {why}")
    got, reads, error = probed(lambda: _compile_kernel(dispatcher, signature, sm, kind, device_functions, lto))
    if reads:
        raise NumbaCudaError(f"compiling the kernel reads the launch configuration ({', '.join(reads[:3])}): "
                             f"numba-cuda compiles it again for each grid, block and shared memory size, so aot "
                             f"does not ship it; numba-cuda JIT-compiles it at its launches")
    if error is not None:
        raise error
    assert got is not None
    return got


def _compile_kernel(dispatcher: Any, signature: str, sm: int, kind: str, device_functions: Any,
                    lto: bool | None) -> tuple[bytes, dict[str, Any]]:
    from numba.cuda import types
    from numba.cuda.compiler import compile_cuda, kernel_fixup
    from numba.cuda.cudadrv import nvvm
    from numba.cuda.dispatcher import _Kernel, reshape_funcs
    t = dispatcher.targetoptions
    cc = (sm // 10, sm % 10)
    fastmath, lineinfo = bool(t.get("fastmath", False)), bool(t.get("lineinfo", False))
    nvvm_options = {"fastmath": fastmath, "opt": 3 if t.get("opt", True) else 0}
    argtypes = argtypes_of(signature)
    with _target(cc, device_functions):
        cres = compile_cuda(dispatcher.py_func, types.void, argtypes, debug=False, lineinfo=lineinfo,
                            forceinline=bool(t.get("forceinline", False)), fastmath=fastmath,
                            nvvm_options=nvvm_options, cc=cc, max_registers=t.get("max_registers"),
                            lto=bool(t.get("lto", False)) if lto is None else lto)
        lib = cres.library
        fn = lib.get_function(cres.fndesc.llvm_func_name)
        lib._entry_name = cres.fndesc.llvm_func_name
        kernel_fixup(fn, False)
        nvvm.set_launch_bounds(fn, t.get("launch_bounds"))
        order_linked_libraries(lib)
        full = device_key(cc)
        asm = lib.get_asm_str(cc=full)
        links = []
        if any(name in asm for name in reshape_funcs):
            links.append("reshape_funcs")
            lib.add_linking_file(os.path.join(os.path.dirname(os.path.abspath(_dispatcher_file())),
                                              "reshape_funcs.cu"))
        if cres.target_context.enable_nrt and any(name in asm for name in _Kernel.NRT_functions):
            from numba.cuda.memory_management.nrt import NRT_LIBRARY
            links.append("nrt")
            lib.add_linking_file(NRT_LIBRARY)
        order_linking_files(lib)
        if lib.use_cooperative:
            raise NumbaCudaError("the kernel synchronizes its grid (a cooperative launch), which aot does not "
                                 "ship yet")
        if kind == "ptx":  # plain PTX (not LTO-IR): any driver's JIT or nvJitLink takes it
            payload = asm.encode()
        else:
            payload = bytes(lib.get_cubin(cc=full).code)
    return payload, {"entry": lib._entry_name, "links": links, "abi": abi_fingerprint(argtypes)}


def _dispatcher_file() -> str:
    import numba.cuda.dispatcher as dispatcher_module
    return dispatcher_module.__file__ or ""


#: What a packaged library asks for its kernel's code on a device: ``(kind, payload, header)`` (``"cubin"``
#: bytes or ``"ptx"`` text; the header names the ``entry`` symbol and the ``links``) or ``None`` when no
#: packaged artifact serves it (then it compiles, as numba-cuda would).
Source = Callable[[tuple[int, int]], "tuple[str, bytes, Mapping[str, Any]] | None"]


def rebuild_kernel(dispatcher: Any, signature: str, name: str, source: Source) -> Any:
    """A numba-cuda ``_Kernel`` for ``signature`` whose code library takes its cubin from ``source`` per
    device (:class:`PackagedLibrary`); nothing is compiled or loaded here."""
    row = _installed()
    from numba.cuda import typing, types
    from numba.cuda.descriptor import cuda_target
    from numba.cuda.dispatcher import _Kernel
    t = dispatcher.targetoptions
    argtypes = argtypes_of(signature)
    lib = PackagedLibrary(cuda_target.target_context.codegen(), name, entry_name=name,
                          max_registers=t.get("max_registers"),
                          nvvm_options={"fastmath": bool(t.get("fastmath", False)),
                                        "opt": 3 if t.get("opt", True) else 0})
    lib._aot = (dispatcher, argtypes, source)
    lib._llvm_strs = []
    lib._finalized = True
    carveout = t.get("shared_memory_carveout")
    more: dict[str, Any] = {}
    if "shared_memory_carveout" in row.rebuild:
        more["shared_memory_carveout"] = None if carveout is None else _Kernel._parse_carveout(None, carveout)
    if "launch_config_sensitive" in row.rebuild:
        more["launch_config_sensitive"] = False  # a build runs outside any launch: nothing read a launch config
    kernel = _Kernel._rebuild(cooperative=False, name=name, signature=typing.signature(types.void, *argtypes),
                              codelibrary=lib, debug=False, lineinfo=bool(t.get("lineinfo", False)), call_helper=None,
                              extensions=t.get("extensions") or [], **more)
    kernel.objectmode = False
    return kernel


def _library_class() -> type:
    from numba.cuda.codegen import CUDACodeLibrary

    class _PackagedLibrary(CUDACodeLibrary):
        """A code library whose cubin comes from a packaged artifact, chosen on first use per device."""

        _aot: tuple[Any, tuple[Any, ...], Source]

        def get_cubin(self, cc=None):
            cc = self._ensure_cc(cc)
            if cc not in self._cubin_cache and cc not in self._ptx_cache:
                dispatcher, argtypes, source = self._aot
                got = source((cc[0], cc[1]))
                if got is None:
                    return self._jit(cc)
                kind, payload, header = got
                links = [x for x in header.get("links", []) if x in LINKS]
                self._entry_name = str(header["entry"])
                if kind == "cubin":  # the ObjectCode class numba-cuda's driver uses (cuda.core.experimental < 0.26)
                    from numba.cuda.cudadrv.driver import ObjectCode
                    self._cubin_cache[cc] = ObjectCode.from_cubin(payload)
                else:  # PTX of an older SM: nvJitLink makes this device's cubin, with the files it links
                    self._ptx_cache[cc] = [payload.decode() if isinstance(payload, bytes) else payload]
                    self._linking_files = set(_link_paths(links))
            return super().get_cubin(cc)

        def _jit(self, cc):
            """No packaged artifact serves this device: compile as numba-cuda's own dispatcher does."""
            from numba.cuda.dispatcher import _Kernel
            dispatcher, argtypes, _ = self._aot
            real = _Kernel(dispatcher.py_func, argtypes, **dispatcher.targetoptions)
            self._entry_name = real.library._entry_name
            cubin = real.library.get_cubin(cc)
            self._cubin_cache[cc] = cubin
            return cubin

    return _PackagedLibrary


def _link_paths(links: list[str]) -> list[str]:
    out = []
    for name in links:
        if name == "reshape_funcs":
            out.append(os.path.join(os.path.dirname(os.path.abspath(_dispatcher_file())), "reshape_funcs.cu"))
        elif name == "nrt":
            from numba.cuda.memory_management.nrt import NRT_LIBRARY
            out.append(NRT_LIBRARY)
    return out


class _Lazy:
    """:class:`PackagedLibrary`, made on first use: numba-cuda is imported only by a package that uses it."""

    _cls: type | None = None

    def __call__(self, *args: Any, **kw: Any) -> Any:
        if self._cls is None:
            self._cls = _library_class()
        return self._cls(*args, **kw)


PackagedLibrary = _Lazy()


def _cache_class() -> type:
    from numba.cuda.core.caching import NullCache

    class _PackagedCache(NullCache):
        """The dispatcher's cache: packaged signatures from aot, every other one from the cache it replaced
        (numba-cuda's own ``cache=True`` cache, or none), then numba-cuda's JIT."""

        def __init__(self, name: str, served: Mapping[tuple[Any, ...], Callable[[], Any]], inner: Any):
            self.name, self.served, self.inner = name, dict(served), inner
            self.noted: set[tuple[Any, ...]] = set()

        @property
        def cache_path(self):
            return self.inner.cache_path

        def load_overload(self, sig, target_context):
            argtypes = argtypes_of(sig) if isinstance(sig, str) else tuple(sig)
            make = self.served.get(argtypes)
            if make is not None:
                return make()
            if argtypes not in self.noted:
                self.noted.add(argtypes)
                log.info("%s: signature (%s) is not packaged: numba-cuda JIT-compiles it", self.name,
                         ", ".join(map(str, argtypes)))
            return self.inner.load_overload(sig, target_context)

        def save_overload(self, sig, data):
            return self.inner.save_overload(sig, data)

        def enable(self):
            self.inner.enable()

        def disable(self):
            self.inner.disable()

        def flush(self):
            self.inner.flush()

    return _PackagedCache


_CACHE_CLASS: list[type] = []
#: Installing is a read-modify-write of the dispatcher's cache: warmup threads attach one spec each.
_INSTALL = threading.Lock()


def _packaged_cache_class() -> type:
    with _INSTALL:
        if not _CACHE_CLASS:
            _CACHE_CLASS.append(_cache_class())
        return _CACHE_CLASS[0]


def install_cache(dispatcher: Any, name: str, served: Mapping[tuple[Any, ...], Callable[[], Any]]) -> Any:
    """Put packaged overloads in front of ``dispatcher``'s cache. Again: the signatures of ``served`` replace
    what an earlier call put for them, the others stay (a warmup attaches one spec at a time)."""
    check_version()
    cls: Any = _packaged_cache_class()
    with _INSTALL:
        inner: Any = dispatcher._cache
        before: dict = {}
        if isinstance(inner, cls):
            inner, before = inner.inner, inner.served
        dispatcher._cache = cls(name, {**before, **served}, inner)
        return dispatcher._cache


class _Refuse:
    """The inner cache of a gate copy (:func:`gate_dispatcher`): a signature it does not serve is an error,
    never a compile (a check must not pass on numba-cuda's JIT of the installed source)."""

    cache_path = None

    def __init__(self, name: str, signature: str):
        self.name, self.signature = name, signature

    def load_overload(self, sig, target_context):
        args = ", ".join(map(str, argtypes_of(sig) if isinstance(sig, str) else sig))
        raise NumbaCudaError(f"{self.name}: the check launched it with ({args}); the packaged signature is "
                             f"{self.signature}: pass arguments of those types")

    def save_overload(self, sig, data):
        return None

    def enable(self):
        return None

    disable = flush = enable


def gate_dispatcher(dispatcher: Any, signature: str, name: str, source: Source) -> Any:
    """A private copy of ``dispatcher`` (its function and options; the library's own dispatcher is not
    touched) whose one overload is the kernel at ``signature`` with its code from ``source``
    (:func:`rebuild_kernel`), already added, so arguments convert to it as for an eagerly typed
    ``@cuda.jit("void(...)")``. Launching it with types that do not convert raises :class:`NumbaCudaError`."""
    check_version()
    from numba.cuda.dispatcher import CUDADispatcher
    copy = CUDADispatcher(dispatcher.py_func, targetoptions=dict(dispatcher.targetoptions))
    argtypes = argtypes_of(signature)
    copy._cache = _packaged_cache_class()(name, {argtypes: lambda: rebuild_kernel(dispatcher, signature, name,
                                                                                   source)},
                                          _Refuse(name, signature))
    copy.compile(argtypes)  # the cache answers: a rebuilt kernel, nothing compiled or loaded yet
    return copy
