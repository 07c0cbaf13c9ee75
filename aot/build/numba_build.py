"""The numba-cuda family's build side: a ``numba:`` matrix entry into specs (importing the kernel's module,
as the matrix being built may), and one (kernel, signature, SM) item into a cubin or PTX, on a driverless
host (:func:`cccl_patches.numba_cuda.compile_kernel`).

The spec's content key covers what numba-cuda compiles into the kernel (:func:`aot.runtime.adapters.numba_digest.
kernel_digest`: its source, what it calls, the values of the globals, module attributes and closure cells it
reads; a value it cannot key refuses the spec), its signature, the decorator's code-changing options and the
numba-cuda version; the item key adds the SM, the payload kind and the toolchain, as for every family.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..core.errors import AotError
from ..core.numbaspec import LTO_TWIN, check_entry, variant_names
from ..core.spec import NumbaKernel
from ..core.text import SpecError
from ..runtime.adapters.numba_attach import resolve_dispatcher
from ..runtime.adapters.numba_digest import device_functions, kernel_digest
from .codeimport import CodeImports, ImportFailure, _install_root_hook, make_project_importable


def _dispatcher(ref: str, root: Path, imports: CodeImports | None = None) -> Any:
    """The dispatcher ``ref`` names, importable from the matrix's folder; a bad one is the ``kernel`` field's error.
    With the matrix reader's ``imports``, the kernel's module is imported by the same rule as a ``source:``
    (its parent packages stay bare; a module that cannot import fails this spec alone)."""
    from cccl_patches import numba_cuda as nc
    try:
        nc.check_version()
    except nc.NumbaCudaError as e:
        raise SpecError(f"{e} (pip install 'cccl-aot-cu13[numba]' or 'cccl-aot-cu12[numba]')", "kernel") from None
    if imports is not None:
        try:
            imports.module(ref.partition(":")[0])  # ImportFailure: this spec's error alone
        except ImportFailure as e:  # labelled as the field the user wrote the module in
            raise ImportFailure(str(e), "kernel") from None
    else:  # the kernel's own top-level package from the matrix's folder, nothing else (the import rule)
        make_project_importable(root, [ref.partition(":")[0]])
    try:
        return resolve_dispatcher(ref)
    except AotError as e:
        raise SpecError(str(e), "kernel") from None


def parse_numba(e: Mapping[str, Any], name: str, root: Path, imports: CodeImports | None = None) -> list[NumbaKernel]:
    """The specs of one ``numba:`` entry, one per signature (:func:`aot.core.numbaspec.variant_names`), two for a
    fastmath kernel (with and without LTO: :data:`aot.core.numbaspec.LTO_TWIN`) unless the matrix states ``lto``.
    The matrix may state the options; they must be the decorator's (aot builds what numba-cuda would JIT)."""
    from cccl_patches import numba_cuda as nc
    ref, sigs, options = check_entry(e)
    dispatcher = _dispatcher(ref, root, imports)
    why = nc.refusal(dispatcher)
    if why:
        raise SpecError(f"{ref} {why}", "kernel")
    have = nc.code_options(dispatcher)
    for key, value in (options or {}).items():
        if key == "lto" and (value is None or have["lto"] is not None):
            continue  # unstated, or one of a fastmath kernel's two builds (below)
        if have[key] != value:
            raise SpecError(f"the matrix says {key}={value!r}, the @cuda.jit decorator of {ref} says {have[key]!r}; "
                            f"aot builds what numba-cuda would JIT, so state the decorator's", f"options.{key}")
    for sig in sigs:
        try:
            args = nc.argtypes_of(sig)
        except Exception as err:  # noqa: BLE001 - numba's own parser: one line naming the signature
            raise SpecError(f"{sig!r} is not a signature numba can read ({type(err).__name__}: {err})",
                            "signatures") from None
        if len(args) != dispatcher.py_func.__code__.co_argcount:
            raise SpecError(f"{sig!r} has {len(args)} arguments, {ref} takes "
                            f"{dispatcher.py_func.__code__.co_argcount}", "signatures")
    try:
        digest = kernel_digest(dispatcher)
    except AotError as err:
        raise SpecError(str(err), "kernel") from None
    version = nc.installed_version()
    stated = (options or {}).get("lto")
    twins = [("", have)]
    if have["lto"] is not None:  # fastmath: numba-cuda's code differs by lto, which it sets from nvJitLink's presence
        twins = ([("", {**have, "lto": stated})] if stated is not None else
                 [("", {**have, "lto": True}), (LTO_TWIN, {**have, "lto": False})])
    return [NumbaKernel(name=n + suffix, kernel=ref, signature=s, options=opts, digest=digest, numba_cuda=version)
            for n, s in zip(variant_names(name, len(sigs)), sigs, strict=True) for suffix, opts in twins]


def parse_numba_entry(ctx: Any, e: Mapping[str, Any], name: str, types: Any = None) -> list[NumbaKernel]:
    """:func:`parse_numba` in the shape of the matrix loader's section parsers (``ctx.path``: the matrix)."""
    if ctx.imports is None:  # validate --no-code: the entry's own fields checked, nothing imported (not buildable)
        ref, sigs, options = check_entry(e)
        names = variant_names(name, len(sigs))
        return [NumbaKernel(name=n, kernel=ref, signature=s, options=dict(options or {}), digest="0" * 64,
                            numba_cuda="not imported") for n, s in zip(names, sigs, strict=True)]
    return parse_numba(e, name, ctx.path.parent, ctx.imports)


def compile_numba_item(spec: NumbaKernel, sm: int, kind: str) -> tuple[bytes, dict[str, Any]]:
    """One item in a build worker: the kernel's cubin for ``sm_<sm>`` or PTX for ``compute_<sm>``, and the
    header fields the loader needs. The kernel must still be the one the spec was read from."""
    from cccl_patches import numba_cuda as nc
    _install_root_hook()  # a spawned worker has the reader's root entries on sys.path, not yet their finder
    dispatcher = resolve_dispatcher(spec.kernel)
    if kernel_digest(dispatcher) != spec.digest:
        raise AotError(f"{spec.name}: the source of {spec.kernel}, a function it calls or a value it compiles in "
                       f"changed since the matrix was read")
    return nc.compile_kernel(dispatcher, spec.signature, sm, kind, device_functions(dispatcher),
                             lto=spec.options.get("lto"))
