"""Frozen spec dataclasses (a CCCL algorithm spec, an NVRTC unit, a numba-cuda kernel, a CuPy kernel, a Triton
kernel) and their
content keys.

Plain data (no CUDA imports): the runtime reads specs back from a manifest cheaply. What a spec may
say is checked by :mod:`aot.core.rules`, the one validator the matrix and manifests share.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

from .keyschemas import SCHEMAS

#: Bumped whenever what a build produces from an unchanged spec changes (a patch, a recipe tweak):
#: it is part of every content key, so such a change invalidates incremental builds and user caches.
RECIPE_VERSION = 2  # 2: internal symbol names normalized
#: An ``#include`` directive (bounded: the text is a spec's source, read before any compile).
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\n]{1,512})[>"]', re.M)


def _key(*parts: tuple[str, bytes | str]) -> str:
    """sha256 over labelled, length-prefixed fields, so no two different inputs can collide."""
    import hashlib  # OpenSSL, 2-3 ms to import: not on a Registry's first use (names() reads no artifact)
    h = hashlib.sha256(b"aot-key-v1\0")
    for label, value in parts:
        data = value.encode() if isinstance(value, str) else value
        h.update(label.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class CcclSpec:
    """One cuda.compute algorithm instance: algorithm, dtypes, operator, init value.

    ``types``: the struct types (``types:`` of the matrix) this spec names, as ``{name: ((field, dtype),
    ...)}``; ``code``: its operators from code, ``{"pkg.mod:func": sha256 of the function's source}``;
    ``sources``: its C++ operators' source texts, ``{"ops/f.cu": text}`` (the bytes JIT elsewhere compiles).
    Each enters the definition (and so the content key) only when used, so specs without them keep the
    keys they always had."""

    name: str
    algorithm: str
    params: Mapping[str, Any]  # every field of ALGORITHMS[algorithm], defaults filled in
    types: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    code: Mapping[str, str] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    family: str = field(default="cccl", init=False)

    def definition(self) -> dict[str, Any]:
        d = {"name": self.name, "algorithm": self.algorithm, **dict(self.params)}
        if self.types:
            d["types"] = {n: [list(f) for f in fs] for n, fs in self.types.items()}
        if self.code:
            d["code"] = dict(self.code)
        if self.sources:
            d["sources"] = dict(self.sources)
        return d

    def content_key(self) -> str:
        d = self.definition()
        d.pop("name")  # renaming a spec does not change what it builds
        from cccl_patches import PATCH_VERSION  # plain data; no CUDA import
        return _key(("family", "cccl"), ("recipe", str(RECIPE_VERSION)), ("patch", str(PATCH_VERSION)),
                    ("definition", _canonical(d)))


@dataclass(frozen=True)
class NvrtcUnit:
    """One CUDA C source compiled with NVRTC; ``source`` is its text, ``source_path`` where it came from.

    ``kernels`` are names or name expressions (``axpy<float>``: a template instantiated by NVRTC and
    looked up by the same expression). ``headers`` maps each file under ``include_dirs`` the unit may
    include (path relative to its include dir) to its text: they ship with the definition, so a JIT
    elsewhere compiles the same bytes, and they are part of the content key."""

    name: str
    source_path: str
    source: str
    kernels: tuple[str, ...]
    options: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)
    family: str = field(default="nvrtc", init=False)

    def definition(self) -> dict[str, Any]:
        d = {"name": self.name, "source_path": self.source_path, "kernels": list(self.kernels),
             "options": dict(self.options)}
        if self.headers:
            d["headers"] = dict(self.headers)
        return d

    def content_key(self) -> str:
        parts = [("family", "nvrtc"), ("recipe", str(RECIPE_VERSION)), ("source", self.source),
                 ("kernels", _canonical(list(self.kernels))), ("options", _canonical(dict(self.options)))]
        if self.headers:
            parts.append(("headers", _canonical(dict(self.headers))))
        return _key(*parts)

    def includes_installed_headers(self) -> bool:
        """Whether the unit ``#include``s a header it does not carry itself: such a header comes from the
        include path (cuda-cccl's ``cub/``, ``thrust/``, ``cuda/std/`` and the CUDA headers beside them), so
        the cubin can change with cuda-cccl and its key must name it. A unit that includes nothing, or only
        its own ``headers``, cannot depend on cuda-cccl."""
        for text in (self.source, *dict(self.headers or {}).values()):
            for name in _INCLUDE.findall(text):
                if name not in (self.headers or {}):
                    return True
        return False

    def name_expressions(self) -> tuple[str, ...]:
        """The kernels that need NVRTC name expressions (templates); plain ``extern "C"`` names need none."""
        return tuple(k for k in self.kernels if not k.isidentifier())


@dataclass(frozen=True)
class NumbaKernel:
    """One numba-cuda ``@cuda.jit`` kernel at one signature (:mod:`aot.core.numbaspec` checks it).

    ``kernel`` names the dispatcher where it lives (``pkg.mod:kernel``); ``signature`` is numba's text of it
    (``"void(float32[::1], float32, int64)"``); ``options`` the decorator's options that change code
    (fastmath, max_registers, lineinfo, debug, opt); ``digest`` hashes the kernel's source and what it calls;
    ``numba_cuda`` is the numba-cuda version that compiled it. All of it is the content key: an edited
    kernel, device function or numba-cuda is another key."""

    name: str
    kernel: str
    signature: str
    options: Mapping[str, Any]
    digest: str
    numba_cuda: str
    family: str = field(default="numba", init=False)
    kernels: tuple[str, ...] = field(default=(), init=False)

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "kernel": self.kernel, "signature": self.signature,
                "options": dict(self.options), "digest": self.digest, "numba_cuda": self.numba_cuda}

    def content_key(self) -> str:
        d = self.definition()
        d.pop("name")
        return _key(("family", "numba"), ("recipe", str(RECIPE_VERSION)), ("definition", _canonical(d)))


@dataclass(frozen=True)
class CupyKernel:
    """One kernel CuPy compiles with NVRTC (:mod:`aot.core.cupyspec` checks it): the source and options CuPy's
    compiler is handed (``cupy.cuda.compiler._compile_module_with_cache``), install paths in the options written
    as placeholders (``{cupy_include}``, ``{cuda_include}``), and the CuPy release that generated and compiles it.
    ``what`` says what produced it (``cupy_add`` from ``mylib.ops:scale``), for people. The source's digest, not its
    text, is the definition (the loader never needs the text: the artifact's header carries CuPy's own key)."""

    name: str
    what: str
    source_sha256: str
    options: tuple[str, ...]
    name_expressions: tuple[str, ...] | None
    jitify: bool
    cupy: str
    source: str = field(default="", compare=False, repr=False)
    family: str = field(default="cupy", init=False)
    kernels: tuple[str, ...] = field(default=(), init=False)

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "what": self.what, "source_sha256": self.source_sha256,
                "options": list(self.options),
                "name_expressions": None if self.name_expressions is None else list(self.name_expressions),
                "jitify": self.jitify, "cupy": self.cupy}

    def content_key(self) -> str:
        d = self.definition()
        d.pop("name")
        d.pop("what")  # a label: the same compile under another description builds the same bytes
        return _key(("family", "cupy"), ("recipe", str(RECIPE_VERSION)), ("definition", _canonical(d)))


@dataclass(frozen=True)
class TritonKernel:
    """One ``@triton.jit`` kernel at one specialisation (:mod:`aot.core.tritonspec` checks it): where it lives
    (``pkg.mod:kernel``), the type of each runtime argument, the constexpr values, which arguments Triton
    specialises as divisible by 16 or equal to 1, the launch options that change code (``num_warps``,
    ``num_stages``, ...) and aot's digest of its code (:mod:`aot.runtime.adapters.triton_digest`): the definition
    and content key. The Triton build that compiles it (``triton``: the release; ``triton_build``: the sha256 of
    Triton's own content key of that build) is not: one definition is built under each Triton build a wheel carries,
    each artifact at its own path (``triton/<name>/<build>/sm_<N>.cubin.aot``) with the build and Triton's cache
    key in its header and manifest entry (one blob per build, as a CCCL set carries one per cuda-cccl release)."""

    name: str
    kernel: str
    signature: tuple[tuple[str, str], ...]
    constexprs: tuple[tuple[str, Any], ...]
    divisible_by_16: tuple[str, ...]
    equal_to_1: tuple[str, ...]
    options: Mapping[str, Any]
    digest: str
    triton: str = field(default="", compare=False)
    triton_build: str = field(default="", compare=False)
    family: str = field(default="triton", init=False)
    kernels: tuple[str, ...] = field(default=(), init=False)

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "kernel": self.kernel, "signature": [list(p) for p in self.signature],
                "constexprs": [list(p) for p in self.constexprs], "divisible_by_16": list(self.divisible_by_16),
                "equal_to_1": list(self.equal_to_1), "options": dict(self.options), "digest": self.digest}

    def content_key(self) -> str:
        d = self.definition()
        d.pop("name")
        return _key(("family", "triton"), ("recipe", str(RECIPE_VERSION)), ("definition", _canonical(d)))


Spec = Union[CcclSpec, NvrtcUnit, NumbaKernel, CupyKernel, TritonKernel]


#: Toolchain versions that cannot change a family's bytes, left out of its item keys: an NVRTC cubin or a
#: numba-cuda kernel never passes through cuda-cccl (unless the unit includes a header from the include path,
#: which cuda-cccl provides: :meth:`NvrtcUnit.includes_installed_headers`), so building one beside another
#: cuda-cccl (or none) must give the same key for the same bytes (issue 28: a library pinned to another
#: cuda-cccl adopts its NVRTC units). cuda-core's version is in none of them (issue 46): NVRTC, nvJitLink and
#: NVVM make the bytes, from the source, the options and the headers, each keyed by content; cuda-core only
#: hands the options over, and builds of two cuda-cccl releases (each bringing its own cuda-core) made two
#: keys for one cubin.
#: A Triton cubin passes through none of cuda-cccl, NVRTC, nvJitLink or cuda-core: Triton's own LLVM and ptxas,
#: whose build is in the spec (``triton_build``).
#: A CuPy artifact is found by its ``cupy_key`` (the content NVRTC is handed, never a compiler version:
#: :mod:`aot.runtime.adapters.cupy_key`), so neither NVRTC's release nor anything of the build's toolchain beyond
#: aot and the CUDA major names it: builds under several stacks (CuPy, NVRTC, CUDA headers) merge into one set
#: (:mod:`aot.build.merge_cupy`), each artifact checked against the one producer the set keeps.
_NOT_IN_KEY = {"nvrtc": frozenset({"cuda_cccl", "cuda_core"}), "numba": frozenset({"cuda_cccl", "cuda_core"}),
               "cupy": frozenset({"cuda_cccl", "nvrtc", "nvjitlink", "cuda_core"}),
               "triton": frozenset({"cuda_cccl", "nvrtc", "nvjitlink", "cuda_core"})}
#: The item-key schema of the families whose key changed (2: cuda-core's version left out, issue 46). An
#: artifact keyed by the schema before (:func:`item_key` with ``legacy=True``) is still accepted by the
#: loader: that key covered everything the new one does, and cuda-core's version besides.
_SCHEMA = {f: str(SCHEMAS["item_key"]) for f in ("nvrtc", "numba", "cupy")}
#: What each of those families left out of its key before schema 2.
_LEGACY_NOT_IN_KEY = {"nvrtc": frozenset({"cuda_cccl"}), "numba": frozenset({"cuda_cccl"}),
                      "cupy": frozenset({"cuda_cccl"})}


def item_key(spec: Spec, sm: int, payload_kind: str, toolchain: Mapping[str, str], legacy: bool = False) -> str:
    """Content key of one build item: the spec, the SM, the payload kind and the toolchain versions that can
    change its bytes (all of them for a CCCL spec; all but cuda-cccl and cuda-core for NVRTC units, numba and
    CuPy kernels; an NVRTC unit that includes installed headers keeps cuda-cccl's). ``legacy``: the key an
    artifact of this family was given before its schema changed (the same key where it never did)."""
    legacy = legacy and spec.family in _SCHEMA
    skip = (_LEGACY_NOT_IN_KEY if legacy else _NOT_IN_KEY).get(spec.family, frozenset())
    if isinstance(spec, NvrtcUnit) and spec.includes_installed_headers():
        skip = frozenset() if legacy else frozenset({"cuda_core"})
    tools = {k: v for k, v in toolchain.items() if k not in skip}
    parts = [("spec", spec.content_key()), ("sm", str(sm)), ("kind", payload_kind), ("toolchain", _canonical(tools))]
    if spec.family in _SCHEMA and not legacy:
        parts.append(("schema", _SCHEMA[spec.family]))
    return _key(*parts)
