"""``aot verify`` for a set's cccl-legacy answers (cuda-cccl < 1.1; :mod:`aot.core.legacy_manifest`).

Beyond the size and sha256 every listed file gets (:func:`aot.core.manifest.verify_files`): each answer is
one of ours (magic, bounded header, payload digest) and says the key, kind and release the manifest lists it
under, and every spec a release lists has both a compile and a link answer (else that spec JITs wherever
the set is installed, and the wheel would claim what it does not serve).
"""

from __future__ import annotations

from ..core.manifest import Manifest


def legacy_problems(m: Manifest, skip: set[str]) -> list[str]:
    """Problems with ``m``'s answers (those whose paths are in ``skip`` were reported already)."""
    if not m.legacy:
        return []
    from ..runtime.adapters.cccl_legacy import MAGIC, MAX_HEADER, MAX_PAYLOAD, decode_entry
    problems = []
    for rel, r in m.legacy.items():
        kinds: dict[str, set[str]] = {s: set() for s in r.specs}
        for a in r.answers:
            kinds[a["spec"]].add(a["kind"])
            if a["path"] in skip:
                continue
            try:
                with open(m.path_of(a), "rb") as f:
                    header, _ = decode_entry(f.read(len(MAGIC) + 4 + MAX_HEADER + MAX_PAYLOAD + 1), a["path"])
            except (OSError, ValueError) as e:
                problems.append(str(e))
                continue
            for field, want in (("key", a["key"]), ("kind", a["kind"]), ("cuda_cccl", rel)):
                if header.get(field) != want:
                    problems.append(f"{a['path']}: header {field}={header.get(field)!r} but manifest says {want!r}")
        for spec, got in kinds.items():
            lacks = sorted({"nvrtc", "nvjitlink"} - got)
            if lacks:
                problems.append(f"cuda-cccl {rel}: spec {spec} has no {' and no '.join(lacks)} answer (it would "
                                f"JIT-compile)")
    return problems
