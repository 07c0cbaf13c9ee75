"""A registry's catalog: its manifest read and checked, the specs it can serve, the ones it trusts.

The heavy half of a :class:`aot.runtime.loader.registry.Registry`, read once per registry on first need (in a
warmup thread when ``request_warmup`` came first): ``manifest.json`` parsed with the strict JSON reader,
every spec definition rebuilt through the matrix's own validator (:func:`aot.core.manifest.load_manifest`),
plus the caller's specs, which win over the manifest's (packaged artifacts of another definition are
stale). Nothing here raises for a bad manifest: each problem is one message handed to ``warn`` (the
registry raises them as :class:`aot.AotWarning`, in the caller's thread), and the registry serves the rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from ...core.env import DISABLE_PACKAGED, JIT_ONLY
from ...core.errors import AotError, ArtifactError
from ...core.majorset import installed_major
from ...core.manifest import MANIFEST_NAME, Manifest, load_manifest
from ...core.spec import Spec
from ...core.text import short

#: A manifest with many unusable specs costs this many warnings naming them, then one for the rest.
MAX_SPEC_WARNINGS = 8


class Catalog:
    """What one registry serves: ``root`` (its directory), ``manifest`` (``None``: none, or unusable),
    ``specs`` (name -> definition) and ``trusted`` (the caller's specs: their operators from code may be
    imported)."""

    __slots__ = ("root", "manifest", "specs", "trusted")

    def __init__(self, root: Path | None, manifest: Manifest | None, specs: dict[str, Spec], trusted: set[str]):
        self.root, self.manifest, self.specs, self.trusted = root, manifest, specs, trusted

    def unknown(self, name: str, note: str | None) -> AotError:
        """The error for a name this catalog lacks, with the closest name it has and ``note`` (why there
        is no manifest, when that is the reason)."""
        import difflib
        close = difflib.get_close_matches(name, self.specs, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return AotError(f"unknown spec {name!r}{hint}" + (f"; {note}" if note else ""))


def read_catalog(source: str | None, caller_specs: Iterable[Spec], specs_from: Callable[[], Iterable[Spec]] | None,
                 warn: Callable[[str], None]) -> Catalog:
    """The catalog of the artifact directory ``source`` (``None``: none) with ``caller_specs``; ``specs_from``
    (the default registry's) is called here for more caller specs, and an AotError from it is one warning."""
    root = Path(source) if source is not None else None
    manifest: Manifest | None = None
    if root is not None and (root / MANIFEST_NAME).exists() and not DISABLE_PACKAGED.get():
        try:
            # path_of resolves each path; a set of several CUDA majors: the installed one's (core.majorset)
            manifest = load_manifest(root, skip_bad_specs=True, resolve_paths=False, major=installed_major)
        except ArtifactError as e:
            warn(f"ignoring packaged artifacts: {e}")
        except Exception as e:  # noqa: BLE001 - a crafted manifest must never crash the host application
            warn(f"ignoring packaged artifacts: {root / MANIFEST_NAME}: unreadable ({type(e).__name__})")
    specs: dict[str, Spec] = {}
    if manifest is not None:
        assert root is not None  # a manifest was read from it
        specs.update(manifest.built)  # checked by the matrix's own validator, once
        if JIT_ONLY.get():  # `aot gate`'s JIT runs: the definitions, to JIT them; no artifact is served
            return Catalog(root, None, {**specs, **{s.name: s for s in caller_specs}}, {s.name for s in caller_specs})
        skipped = manifest.skipped
        for name, why in skipped[:MAX_SPEC_WARNINGS]:
            warn(f"{root / MANIFEST_NAME}: spec {short(name)} skipped ({why}); it can only JIT if the caller's "
                 f"specs define it")
        if len(skipped) > MAX_SPEC_WARNINGS:
            warn(f"{root / MANIFEST_NAME}: {len(skipped) - MAX_SPEC_WARNINGS} more unusable specs skipped")
    extra: list[Spec] = []
    if specs_from is not None:
        try:
            extra = list(specs_from())
        except AotError as e:
            warn(f"aot: {e}; serving the packaged manifest's specs only")
    trusted: set[str] = set()
    for s in (*extra, *caller_specs):  # the caller's definition wins: packaged artifacts of another one are stale
        specs[s.name] = s
        trusted.add(s.name)
    return Catalog(root, manifest, specs, trusted)
