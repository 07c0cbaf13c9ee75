"""Verification: integrity of an artifact set (CPU), and correctness of every artifact on a GPU.

``verify_integrity`` is what ``aot verify DIR|WHEEL`` runs anywhere: every manifest entry present, sizes
and sha256 right, headers well-formed and consistent with their entries, one producer for the set.
``verify_gpu`` executes each artifact this GPU can load (not only the loader's first choice: a PTX
fallback is checked too) against the numpy references of :mod:`aot.reference`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from . import format as fmt
from .errors import ArtifactError
from .manifest import load_manifest, verify_files


def verify_integrity(root: str | Path) -> tuple[int, list[str]]:
    """(number of artifacts checked, problems). Problems name the file and what is wrong."""
    try:
        m = load_manifest(root)
    except ArtifactError as e:
        return 0, [str(e)]
    problems = verify_files(m)
    bad_paths = {p.split(":")[0] for p in problems}
    for entry in m.artifacts:
        if entry["path"] in bad_paths:
            continue
        try:
            art = fmt.read(m.path_of(entry))
        except ArtifactError as e:
            problems.append(str(e))
            continue
        h = art.header
        for key, hkey in (("name", "name"), ("family", "family"), ("sm", "sm"), ("payload_kind", "payload_kind"),
                          ("content_key", "content_key")):
            if entry[key] != h[hkey]:
                problems.append(f"{entry['path']}: header {hkey}={h[hkey]!r} but manifest says {entry[key]!r}")
        for k in fmt.PRODUCER_FIELDS:
            if str(h["producer"].get(k)) != str(m.producer.get(k)):
                problems.append(f"{entry['path']}: produced by {k} {h['producer'].get(k)}, the set by "
                                f"{m.producer.get(k)}")
    return len(m.artifacts), problems


@dataclass
class GpuRow:
    spec: str
    family: str
    sm: int | None
    kind: str
    source: str
    ok: bool
    ms: float
    detail: str = ""


def verify_gpu(registry, names: Iterable[str] | None = None,
               on_spec: Callable[[str, bool], None] | None = None) -> list[GpuRow]:
    """Run every spec (each loadable packaged artifact, else the loader's cache/JIT choice) on this GPU.
    ``on_spec(name, done)`` is called before (False) and after (True) each spec (the CLI's progress bar)."""
    progress = on_spec or (lambda name, done: None)
    from cuda.core import Device
    from .reference import check_cccl, check_kernel
    from .spec import CcclSpec
    device_sm = registry.device_sm()  # raises NoDeviceError (exit 6) when there is no usable GPU
    device = Device()
    device.set_current()
    rows: list[GpuRow] = []
    for name in (list(names) if names is not None else registry.names()):
        progress(name, False)
        spec = registry.spec(name)
        cands = registry.packaged_candidates(spec, device_sm)
        targets = [(c.ref, c.sm, c.kind) for c in cands] or [(None, None, "loader")]
        for entry, sm, kind in targets:
            t0 = time.perf_counter()
            source = "packaged"
            try:
                if entry is not None:
                    loaded = registry.open_packaged(spec, entry, registry.manifest.path_of(entry), device_sm)
                    obj = loaded.obj
                else:
                    loaded = registry._load(name)
                    source, sm, kind = loaded.source, loaded.sm, loaded.kind
                    obj = registry.cccl(name) if isinstance(spec, CcclSpec) else loaded.obj
                if isinstance(spec, CcclSpec):
                    from .loader import CcclAlgorithm
                    if not isinstance(obj, CcclAlgorithm):
                        obj = CcclAlgorithm(spec, obj)
                    check_cccl(obj, spec, device)
                else:
                    check_kernel(obj.get_kernel, spec, device)
                rows.append(GpuRow(name, spec.family, sm, kind, source, True, (time.perf_counter() - t0) * 1e3))
            except Exception as e:  # noqa: BLE001 - every failure is a row in the table
                rows.append(GpuRow(name, spec.family, sm, kind, source, False, (time.perf_counter() - t0) * 1e3,
                                   f"{type(e).__name__}: {e}"))
        progress(name, True)
    return rows
