"""``aot merge`` of CuPy sets built under different stacks (CuPy release, NVRTC, CUDA headers): one set that
serves each stack it was built under (issue 40).

A CuPy kernel is served where the user's CuPy hands NVRTC the same input as the build's did: aot's ``cupy_key``
(:mod:`aot.runtime.adapters.cupy_key`: source, options, architecture, the text of every reachable header). Two
stacks whose headers differ (``cupy-cuda13x[ctk]``'s runtime headers, CuPy 13.6's bundled CCCL) have other keys
for the same recorded compile, so one build cannot serve both: build under each, then merge. The merged set
keeps, per spec and SM, one artifact per distinct ``cupy_key``; where a spec and SM has several, each lives at
``cupy/<spec>/<key[:32]>/sm_<SM>.cubin.aot`` (:func:`cupy_path`), so two stacks never write one path, and the
runtime (:mod:`aot.runtime.adapters.cupy_attach`) serves whichever key the user's call has. Each entry lists
the stacks that built it (``cupy_stacks``: CuPy, NVRTC, ``nvidia-cuda-runtime`` and ``nvidia-cuda-crt`` as the
build had them): which releases it was measured to cover.

Used where every input holds CuPy artifacts only (:func:`cupy_only`). Their producers may differ in what a
CuPy artifact's content key leaves out (:data:`aot.core.spec._NOT_IN_KEY`: NVRTC, nvJitLink, cuda-core,
cuda-cccl); aot's release and the CUDA major must agree. Inputs are untrusted (built elsewhere): each entry's
``cupy_key`` must be a sha256 and equal its artifact header's, ``cupy_stacks`` short strings, and every output
path is made here from the spec's name, key and SM, and checked inside ``out``. Two different payloads under
one key are refused, every such conflict in one line before anything is written: one key is one input, and
which bytes serve it is not decided by which input came last.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..core import format as fmt
from ..core.errors import ArtifactError
from ..core.manifest import Manifest, remove_manifest, safe_join, write_manifest
from ..core.spec import _NOT_IN_KEY
from ..core.text import short
from .merge_inputs import WHERE_FIELDS, copy_artifact, header_of, refuse_conflicts

#: Producer fields CuPy sets of different stacks may differ in: those a CuPy content key leaves out.
STACK_MAY_DIFFER = _NOT_IN_KEY["cupy"]
#: What a ``cupy_stacks`` item may name (the build's :func:`aot.build.cupy_build.stack`), each a short string.
STACK_FIELDS = ("cupy", "nvrtc", "cuda_runtime", "cuda_crt")
MAX_STACKS = 32


def cupy_only(manifests: Sequence[Manifest]) -> bool:
    """Every input holds CuPy artifacts and nothing else (the stacks merge applies)."""
    return all(m.artifacts for m in manifests) and all(a["family"] == "cupy" for m in manifests for a in m.artifacts)


def cupy_path(name: str, key: str, sm: int) -> str:
    """Where a set keeping several CuPy keys for ``name`` and ``sm`` puts the one of ``key``."""
    return f"cupy/{name}/{key[:32]}/sm_{sm}.cubin.aot"


def plain_path(name: str, sm: int) -> str:
    """Where a build puts ``name``'s artifact for ``sm`` (:class:`aot.build.builder.Item`)."""
    return f"cupy/{name}/sm_{sm}.cubin.aot"


def _producer(manifests: Sequence[Manifest], shards: Sequence[Path]) -> Mapping[str, Any]:
    """The merged set's producer: the first input's (the hatch hook's own build). Every input's must agree
    with it outside :data:`STACK_MAY_DIFFER` (each artifact's content key is checked against it at load)."""
    first = manifests[0].producer
    for m, d in zip(manifests[1:], shards[1:]):
        diff = sorted(k for k in set(m.producer) | set(first)
                      if k not in STACK_MAY_DIFFER and m.producer.get(k) != first.get(k))
        if diff:
            raise ArtifactError(f"{d}: built with other versions than {shards[0]} ({', '.join(diff)}); CuPy sets "
                                f"of different stacks may differ only in {', '.join(sorted(STACK_MAY_DIFFER))}")
    return first


def _stacks(m: Manifest, a: Mapping[str, Any], i: int) -> list[dict[str, str]]:
    where = f"{m.root / 'manifest.json'}: artifact entry {i} ({short(a['path'])})"
    got = a.get("cupy_stacks", [])
    if not isinstance(got, list) or len(got) > MAX_STACKS or not all(
            isinstance(s, dict) and set(s) <= set(STACK_FIELDS)
            and all(isinstance(v, str) and 0 < len(v) <= 64 for v in s.values()) for s in got):
        raise ArtifactError(f"{where}: field 'cupy_stacks' must list stacks ({', '.join(STACK_FIELDS)}: short "
                            f"strings), got {short(got)}")
    return [dict(s) for s in got]


def _key(m: Manifest, a: Mapping[str, Any], i: int) -> tuple[str, str]:
    """The entry's CuPy key, checked against its artifact's header, and its payload's sha256 (two stacks' files
    of one payload differ in the stack their header names)."""
    where = f"{m.root / 'manifest.json'}: artifact entry {i} ({short(a['path'])})"
    key = a.get("cupy_key")
    if not fmt.is_sha256_hex(key):
        raise ArtifactError(f"{where}: field 'cupy_key' is {short(key)}, not a sha256")
    header = header_of(m, a)
    if header.get("cupy_key") != key or header.get("name") != a["name"] or header.get("sm") != a["sm"]:
        raise ArtifactError(f"{where}: its artifact's header names another CuPy key, spec or SM than the entry")
    return str(key), str(header["payload_sha256"])


def prepare_stacks(manifests: Sequence[Manifest], shards: Sequence[Path], out: Path, specs: Mapping[str, Any],
                   schemas: tuple[dict[str, int] | None, Sequence[str]]
                   ) -> Callable[[Callable[[int, int], None]], dict]:
    """Check the merge of CuPy-only sets into ``out`` (see the module's docstring), writing nothing; the step that
    writes it (:data:`aot.build.merge.Write`: it returns the summary :func:`aot.build.merge.merge` returns).
    ``specs``: the inputs' definitions, already checked to agree; ``schemas``: the merged set's ``key_schemas``
    and the inputs' conflicts over them (:func:`aot.build.merge_inputs.input_schemas`), listed with the CuPy
    conflicts."""
    producer = _producer(manifests, shards)
    found: dict[tuple[str, int, str], tuple[dict, Manifest, Mapping[str, Any], str]] = {}
    conflicts: list[str] = []
    for m in manifests:
        for i, a in enumerate(m.artifacts):
            key, payload = _key(m, a, i)
            stacks = _stacks(m, a, i)
            ident = (a["name"], a["sm"], key)
            prev = found.get(ident)
            if prev is None:
                entry = {k: v for k, v in a.items() if k not in ("cuda_cccl", "cupy_stacks", *WHERE_FIELDS)}
                entry["cupy_stacks"] = stacks
                found[ident] = (entry, m, a, payload)
            elif prev[3] != payload:
                conflicts.append(f"{a['name']} sm_{a['sm']} (CuPy key {key[:16]}) in {prev[1].root} and {m.root}")
            else:
                prev[0]["cupy_stacks"] += [s for s in stacks if s not in prev[0]["cupy_stacks"]]
    refuse_conflicts(schemas, conflicts, "CuPy artifact(s) conflict, other bytes under one CuPy key (one input, two "
                                         "builds: merge one of them)")
    per_item: dict[tuple[str, int], int] = {}
    for name, sm, _ in found:
        per_item[(name, sm)] = per_item.get((name, sm), 0) + 1
    targets: dict[str, tuple[dict, Manifest, Mapping[str, Any]]] = {}
    for (name, sm, key), (entry, m, src, _) in sorted(found.items()):
        entry["path"] = cupy_path(name, key, sm) if per_item[(name, sm)] > 1 else plain_path(name, sm)
        entry["cupy_stacks"] = sorted(entry["cupy_stacks"], key=lambda s: json.dumps(s, sort_keys=True))
        targets[entry["path"]] = (entry, m, src)
    dests = {path: safe_join(out, path) for path in targets}  # every write stays in --out, checked before any
    sms = sorted({sm for m in manifests for sm in (m.sms or ())})
    extra: dict = {"sms": sms}
    if schemas[0] is not None:
        extra["key_schemas"] = schemas[0]

    def write(on_copy: Callable[[int, int], None]) -> dict:
        out.mkdir(parents=True, exist_ok=True)
        remove_manifest(out)
        for n, (path, (_entry, m, src)) in enumerate(targets.items()):
            on_copy(n, len(targets))
            copy_artifact(m, src, dests[path])
        on_copy(len(targets), len(targets))
        write_manifest(out, producer=producer, specs=specs, artifacts=[t[0] for t in targets.values()], extra=extra)
        return {"artifacts": len(targets), "bytes": sum(t[0]["size"] for t in targets.values()),
                "shards": len(shards), "cuda_cccl": [], "cupy_keys": len(found)}
    return write
