"""The lookup keys an NVRTC manifest entry records, computed again from the unit's own definition.

``source_key`` (the lookup by source, :mod:`aot.runtime.adapters.bysource`) and ``progkey`` (cuda.core's program
cache key, :mod:`aot.runtime.adapters.program_cache`) name an entry by what a library's compile call holds. The
artifact checks (size, sha256, header, content key) say nothing about them: a manifest whose keys were
swapped between two units passed them all, and the runtime then served one unit's kernels for the other's
source (issue 37). So each recorded key is recomputed here from the entry's own unit (its source text and
options in the manifest's definitions) and must match. ``progkey`` depends on the NVRTC version and on
cuda.core's key schema, so it is recomputed where this host's NVRTC is the one the entry names
(``progkey_nvrtc``) and this host's cuda-core the one the set's producer names (``cuda_core``); elsewhere
only its form is checked, and that no two entries of different compiles share one (a swap cannot hide
there), and the runtime checks a recorded key again at its first hit.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..core.manifest import Manifest
from ..core.spec import NvrtcUnit
from ..core.srckey import source_key
from ..core.text import short
from ..core.versions import dist_version


def _hex64(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def key_problems(m: Manifest, nvrtc: Callable[[], str | None] | None = None) -> list[str]:
    """Every recorded ``source_key``/``progkey`` that is not its own unit's, one line each naming the entry,
    the unit and the field. ``nvrtc``: this host's NVRTC version (default: asked of cuda.bindings, once, and
    only if an entry records a progkey)."""
    problems: list[str] = []
    here: list[str | None] = []
    same_core = str(m.producer.get("cuda_core")) == dist_version("cuda-core")
    seen: dict[str, tuple[Any, ...]] = {}  # progkey -> the compile it names
    for e in m.artifacts:
        unit = m.built.get(e["name"])
        if not isinstance(unit, NvrtcUnit):
            continue
        where = f"{e['path']} (unit {unit.name})"
        if "source_key" in e:
            want = source_key(unit.source, unit.options)
            if e["source_key"] != want:
                problems.append(f"{where}: field source_key {short(e['source_key'])} is not the key of the unit's "
                                f"own source and options ({want}); the lookup by source would serve it for "
                                f"another source")
        if "progkey" in e:
            what = (unit.source, source_key("", unit.options), e["sm"], e["payload_kind"])
            if seen.setdefault(str(e["progkey"]), what) != what:
                problems.append(f"{where}: field progkey is another entry's, of another compile")
                continue
            problems += _progkey_problems(e, unit, where, here if same_core else [None], nvrtc)
    return problems


def _progkey_problems(e: Mapping[str, Any], unit: NvrtcUnit, where: str, here: list[str | None],
                      nvrtc: Callable[[], str | None] | None) -> list[str]:
    from ..runtime.adapters.progkey import eligible, nvrtc_version, program_cache_key
    if not _hex64(e["progkey"]):
        return [f"{where}: field progkey {short(e['progkey'])} is not a 64-digit hex key"]
    if not eligible(unit, includes=False):  # an older set's key of a unit that includes headers: unused
        return [f"{where}: field progkey is recorded for a unit cuda.core's program cache cannot serve "
                f"(name expressions, headers, lineinfo or debug)"]
    if not here:
        here.append((nvrtc or nvrtc_version)())
    if here[0] is None or e.get("progkey_nvrtc") != here[0]:
        return []  # keyed by another NVRTC: not computable here (the runtime checks it at its first hit)
    try:
        want = program_cache_key(unit, e["sm"], e["payload_kind"]).hex()
    except (ValueError, TypeError, ImportError) as err:
        return [f"{where}: field progkey is recorded but cuda.core gives no key for this unit: {err}"]
    if e["progkey"] != want:
        return [f"{where}: field progkey is not cuda.core's key of the unit's own source and options for "
                f"NVRTC {here[0]}; aot.program_cache would serve it for another compile"]
    return []
