"""The Triton family's build side: a ``triton:`` matrix entry into specs (importing the kernel's module, as the
matrix being built may), and one (kernel, specialisation, SM) item into a cubin, on a driverless host, through
Triton's own compiler with an explicit target (``triton.compile(ASTSource(...), target=GPUTarget("cuda", sm,
32))``: ptxas ships in Triton's wheel; no driver is asked).

The specialisation is not re-derived: the arguments the matrix describes (a pointer of a dtype, 16-byte aligned
or not; an integer divisible by 16, equal to 1 or neither) are stood in for by objects of those properties and
handed to the kernel's own binder (``create_function_from_signature``) and ``_pack_args``, as ``JITFunction.run``
does at a launch: the signature, constexprs, attributes and options Triton compiles with, and so the key it looks
its cache up by, are the ones a launch with such arguments computes. The artifact carries that key
(``triton_key``), the file name Triton stores it under and its metadata (:mod:`aot.runtime.adapters.triton_attach`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping

from ..core.errors import AotError
from ..core.spec import TritonKernel
from ..core.text import SpecError
from ..core.tritonspec import check_entry, variant_names
from ..runtime.adapters.triton_attach import TRITON_DIR, installed_version, resolve_kernel
from ..runtime.adapters.triton_digest import autotune_configs, jit_function, kernel_digest
from .codeimport import CodeImports, _install_root_hook, make_project_importable

#: A stand-in integer per type: neither 1 nor divisible by 16, divisible by 16, and 1.
_INTS = {"i32": (17, 32, 1), "i64": (2 ** 40 + 17, 2 ** 40 + 32, 1), "u64": (2 ** 63 + 17, 2 ** 63 + 32, 1)}


class _Pointer:
    """A stand-in tensor: what Triton's specialisation reads of one (``dtype``, ``data_ptr()``)."""

    def __init__(self, dtype: Any, aligned: bool):
        self.dtype, self._ptr = dtype, 0 if aligned else 4

    def data_ptr(self) -> int:
        return self._ptr


def triton_build() -> str:
    """sha256 of Triton's own content key of the installed build (``triton.runtime.cache.triton_key``: its compiler
    and language sources and ``libtriton``), what every cubin it caches is keyed under."""
    from triton.runtime.cache import triton_key
    return hashlib.sha256(triton_key().encode()).hexdigest()


def _kernel(ref: str, root: Path, imports: CodeImports | None = None) -> Any:
    """The object ``ref`` names (a ``@triton.jit`` kernel or an ``@triton.autotune`` one), imported by the rule."""
    if installed_version() == "missing":
        raise SpecError("Triton is not installed (pip install 'cccl-aot-cu13[triton]')", "kernel")
    if imports is not None:
        imports.module(ref.partition(":")[0])  # ImportFailure: this spec's error alone
    else:
        make_project_importable(root, [ref.partition(":")[0]])
    try:
        return resolve_kernel(ref, wrapper=True)
    except AotError as e:
        raise SpecError(str(e), "kernel") from None


def _with_configs(variants: list[dict[str, Any]], configs: list[Any] | None) -> list[dict[str, Any]]:
    """An ``@triton.autotune`` kernel's specialisations: each variant once per config, the config's constexprs and
    launch options in (what the autotuner launches while it benchmarks, and after)."""
    if configs is None:
        return variants
    out = []
    for v in variants:
        for i, c in enumerate(configs):
            where = f"the autotune config {i} ({c})"
            if getattr(c, "ir_override", None):
                raise SpecError(f"{where} overrides the IR: aot builds from the source", "kernel")
            both = sorted(set(c.kwargs) & {n for n, _ in v["constexprs"]})
            if both:
                raise SpecError(f"{both[0]!r} is set by {where}: leave it out of constexprs", "constexprs")
            options = dict(v["options"])
            for k in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
                if getattr(c, k, None) is not None:
                    options[k] = getattr(c, k)
            out.append({**v, "constexprs": (*v["constexprs"], *c.kwargs.items()), "options": options,
                        "origin": v["origin"]})
    return out


def _fields(kernel: Any, v: Mapping[str, Any]) -> dict[str, Any]:
    """A specialisation's fields against the kernel's parameters: the signature in parameter order, every
    constexpr valued (a default from the ``def`` where the matrix gives none), nothing else named."""
    params = kernel.params
    sig, consts = dict(v["signature"]), dict(v["constexprs"])
    runtime = [p.name for p in params if not p.is_constexpr]
    for n in sig:
        if n not in runtime:
            raise SpecError(f"{n!r} is not a runtime parameter of {kernel.fn.__qualname__} "
                            f"(runtime: {', '.join(runtime) or 'none'})", "signature")
    missing = [n for n in runtime if n not in sig]
    if missing:
        raise SpecError(f"gives no type for {', '.join(missing)}", "signature")
    unknown = [n for n in consts if n not in {p.name for p in params}]
    if unknown:
        raise SpecError(f"{unknown[0]!r} is not a parameter of {kernel.fn.__qualname__}", "constexprs")
    out_consts = []
    for p in params:
        if not p.is_constexpr:
            if p.name in consts:
                raise SpecError(f"{p.name!r} is a runtime parameter, not a tl.constexpr", "constexprs")
            continue
        if p.name in consts:
            out_consts.append((p.name, consts.pop(p.name)))
        elif p.has_default:
            out_consts.append((p.name, p.default))
        else:
            raise SpecError(f"gives no value for the tl.constexpr {p.name!r}", "constexprs")
    pointers = [n for n in runtime if sig[n].startswith("*")]
    div = pointers if v["divisible_by_16"] is None else list(v["divisible_by_16"])
    for n in div:
        if not (sig[n].startswith("*") or sig[n] in _INTS):
            raise SpecError(f"{n!r} is a {sig[n]}: Triton specialises pointers and integers by divisibility",
                            "divisible_by_16")
    for n in v["equal_to_1"]:
        if sig[n] not in _INTS:
            raise SpecError(f"{n!r} is a {sig[n]}: Triton specialises integers as equal to 1", "equal_to_1")
    return {"signature": tuple((n, sig[n]) for n in runtime), "constexprs": tuple(out_consts),
            "divisible_by_16": tuple(n for n in runtime if n in div), "equal_to_1": tuple(v["equal_to_1"]),
            "options": dict(v["options"])}


def specialize(kernel: Any, spec: Any, sm: int) -> tuple[Any, dict, dict, dict, Any]:
    """``(backend, signature, constexprs, attrs, options)`` as a launch with the described arguments gives them
    to ``triton.compile`` (the module docstring says how)."""
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import create_function_from_signature
    backend = make_backend(GPUTarget("cuda", sm, 32))
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    args: dict[str, Any] = {}
    for n, t in spec.signature:
        if t.startswith("*"):
            args[n] = _Pointer(tl.dtype(t[1:]), n in spec.divisible_by_16)
        elif t in _INTS:
            plain, div16, one = _INTS[t]
            args[n] = one if n in spec.equal_to_1 else div16 if n in spec.divisible_by_16 else plain
        else:
            args[n] = {"fp32": 1.5, "i1": True}[t]
    args.update(dict(spec.constexprs))
    opts = {k: v for k, v in spec.options.items() if v is not None}
    opts["debug"] = bool(opts.get("debug") or kernel.debug)
    opts["instrumentation_mode"] = ""
    bound, specialization, options = binder(**args, **opts)
    got = dict(zip([p.name for p in kernel.params], [s[0] for s in specialization], strict=True))
    for n, t in spec.signature:
        want = "constexpr" if n in spec.equal_to_1 else t
        if got[n] != want:
            raise SpecError(f"Triton specialises {n!r} as {got[n]!r}, not {want!r}", "signature")
    options, signature, constexprs, attrs = kernel._pack_args(backend, opts, bound, specialization, options)
    return backend, signature, constexprs, attrs, options


def parse_triton(e: Mapping[str, Any], name: str, root: Path, imports: CodeImports | None = None) -> list[TritonKernel]:
    """The specs of one ``triton:`` entry, one per specialisation (:func:`aot.core.tritonspec.variant_names`),
    each checked against the kernel's parameters and Triton's own specialisation (for SM 90; the arch changes
    only the code)."""
    ref, variants = check_entry(e)
    wrapper = _kernel(ref, root, imports)
    kernel = jit_function(wrapper)
    variants = _with_configs([{**v, "origin": i} for i, v in enumerate(variants)], autotune_configs(wrapper))
    try:
        digest = kernel_digest(kernel)
    except AotError as err:
        raise SpecError(str(err), "kernel") from None
    release, build = installed_version(), triton_build()
    specs = []
    for n, v in zip(variant_names(name, len(variants)), variants, strict=True):
        where = f"specializations[{v.pop('origin')}]." if "specializations" in e else ""
        try:
            f = _fields(kernel, v)
            spec = TritonKernel(name=n, kernel=ref, digest=digest, triton=release, triton_build=build, **f)
            specialize(kernel, spec, 90)
        except SpecError as err:
            raise SpecError(str(err), f"{where}{err.field}") from None
        specs.append(spec)
    return specs


def parse_triton_entry(ctx: Any, e: Mapping[str, Any], name: str, types: Any = None) -> list[TritonKernel]:
    """:func:`parse_triton` in the shape of the matrix loader's section parsers (``ctx.path``: the matrix)."""
    if ctx.imports is None:  # validate --no-code: the entry's own fields checked, nothing imported (not buildable)
        ref, variants = check_entry(e)
        return [TritonKernel(name=n, kernel=ref, signature=v["signature"], constexprs=v["constexprs"],
                             divisible_by_16=tuple(v["divisible_by_16"] or ()), equal_to_1=v["equal_to_1"],
                             options=v["options"], digest="0" * 64, triton="not-imported", triton_build="0" * 64)
                for n, v in zip(variant_names(name, len(variants)), variants, strict=True)]
    return parse_triton(e, name, ctx.path.parent, ctx.imports)


def compile_triton_item(spec: TritonKernel, sm: int) -> tuple[bytes, dict[str, Any]]:
    """One item in a build worker: the kernel's cubin for ``sm_<sm>`` and the header fields the loader needs
    (``triton_key``: the name of Triton's cache folder for it; ``triton_name``; ``triton_metadata``). Triton
    compiles into a private cache folder, removed after; the user's Triton cache is not touched."""
    _install_root_hook()  # a spawned worker has the reader's root entries on sys.path, not yet their finder
    import triton
    from triton import knobs
    from triton.runtime.cache import _base32
    kernel = resolve_kernel(spec.kernel)
    if kernel_digest(kernel) != spec.digest:
        raise AotError(f"{spec.name}: the source of {spec.kernel}, a function it calls or a value it compiles in "
                       f"changed since the matrix was read")
    if installed_version() != spec.triton or triton_build() != spec.triton_build:
        raise AotError(f"{spec.name}: the matrix was read under another Triton build than this worker's")
    backend, signature, constexprs, attrs, options = specialize(kernel, spec, sm)
    src = triton.compiler.ASTSource(kernel, signature, constexprs, attrs)
    from ..runtime.adapters import triton_pykey
    triton_pykey.watch()  # aot's key of this compile: the one every CPython's launch of it computes
    folder = tempfile.mkdtemp(prefix="aot-triton-")
    try:
        with knobs.cache.scope():
            knobs.cache.dir = folder
            knobs.cache.manager_class = None  # Triton's own file cache in the private folder
            compiled = triton.compile(src, target=backend.target, options=options.__dict__)
        name = src.name[:150]
        meta = json.loads(Path(compiled.metadata_group[f"{name}.json"]).read_text())
        cubin = Path(compiled.metadata_group[f"{name}.cubin"]).read_bytes()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    home = os.path.dirname(triton.__file__)  # the build host's install path: written as a placeholder
    meta = json.loads(json.dumps(meta).replace(json.dumps(home)[1:-1], TRITON_DIR))
    header = {"triton_key": _base32(compiled.hash), "triton_name": name, "triton_metadata": meta,
              "triton": spec.triton, "triton_build": spec.triton_build}
    noted = triton_pykey.noted(header["triton_key"])
    if noted is not None:  # absent for a local Triton build: served only under Triton's key (its own CPython)
        header["triton_aot_key"] = noted[0]
    from .triton_launcher import header_fields
    header.update(header_fields(src, compiled.metadata))  # Triton's C launchers, for this CPython
    return cubin, header


# ---------------------------------------------------------------------------------------------- recording
def entries_from_records(records: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """``triton:`` entries of the ``triton-compile`` records (:mod:`aot.record.hook_triton`): one entry per
    kernel, its distinct specialisations in the order first launched (options at Triton's defaults left out), and
    what could not be made an entry."""
    from ..core.tritonspec import OPTIONS
    by_ref: dict[str, list[dict[str, Any]]] = {}
    unnamed: list[str] = []
    for rec in records:
        if rec.get("kind") != "triton-compile":
            continue
        if rec.get("why") or not isinstance(rec.get("kernel"), str):
            where = ", ".join(rec.get("site") or []) or "outside the recorded packages"
            unnamed.append(f"Triton kernel {rec.get('qualname')} at {where}: {rec.get('why') or 'not named'}")
            continue
        v: dict[str, Any] = {"signature": rec["signature"]}
        for key in ("constexprs", "equal_to_1"):
            if rec.get(key):
                v[key] = rec[key]
        v["divisible_by_16"] = rec.get("divisible_by_16") or []
        options = {k: x for k, x in (rec.get("options") or {}).items() if k in OPTIONS and x != OPTIONS[k][1]}
        if options:
            v["options"] = options
        seen = by_ref.setdefault(rec["kernel"], [])
        if v not in seen:
            seen.append(v)
    entries, taken = [], set()
    for ref, variants in by_ref.items():
        name = ref.rpartition(":")[2]
        n = 1
        while name in taken:
            n += 1
            name = f"{ref.rpartition(':')[2]}_{n}"
        taken.add(name)
        entry: dict[str, Any] = {"name": name, "kernel": ref}
        if len(variants) == 1:
            entry.update(variants[0])
        else:
            entry["specializations"] = variants
        entries.append(entry)
    return entries, unnamed
