"""A package's packaged NVRTC images as a cuda.core program cache (issue 28):

    Program(src, "c++", ProgramOptions(std="c++17")).compile("cubin", cache=aot.program_cache("mypkg"))

cuda.core's ``Program.compile(cache=...)`` derives ``make_program_cache_key(...)`` from the source, the
options and the target, and asks the cache for those bytes before it compiles. :class:`PackagedProgramCache`
answers from the package's artifacts: the build recorded each NVRTC entry's key (:mod:`aot.build.progkeys`),
so a hit is one dict lookup, then the artifact is read and checked exactly as the loader checks it (size,
sha256, header, content key, CUDA major: :func:`aot.runtime.loader.sources.check_packaged`) and its payload
returned. Nothing compiles; nothing is loaded here (cuda.core loads the image once, at ``get_kernel``).

Read-only: what cuda.core stores after a miss goes to the per-user NVRTC cache aot's JIT already keeps
(``<cache>/nvrtc``, a ``FileStreamProgramCache``, under the same owner and mode checks), and a miss here is
looked up there, so a source that was not packaged compiles once per user, not once per process.

The key covers the NVRTC ``major.minor`` (:mod:`aot.runtime.adapters.progkey` lists what else). Where this
process's NVRTC is not the build host's, or the library names its program (``ProgramOptions(name=...)``),
the recorded keys cannot match; the keys are then derived here once, with cuda.core's own function, for
every eligible entry (about 20 us each), so the packaged image still serves: the same bytes aot's own loader
would serve this device. ``same_nvrtc=True`` keeps to the recorded keys only.

A recorded key is not taken on trust (issue 37: a manifest whose ``progkey`` values were swapped between
units served one unit's image for the other's compile): the first time a recorded key hits, cuda.core's key
of that entry's own unit is derived again (about 20 us, once per key) and must be the key asked for; if it
is not, one warning, and the index is rebuilt from derived keys only (with ``same_nvrtc=True``: no packaged
keys at all). Checking the hit alone suffices (a wrong entry is only reached through a hit); deriving every
key up front would cost a cuda.core ``ProgramOptions`` per entry on every first use. Without a real NVRTC
(a lean install, aot's stand-in) cuda.core cannot construct a ``Program`` at all; use the lookup by
source (:mod:`aot.runtime.adapters.bysource`), which needs none.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from cuda.core.utils import FileStreamProgramCache, ProgramCacheResource

from ...core.errors import AotError, ArgumentError
from .progkey import DEFAULT_NAME, key_of, nvrtc_version
from ..loader.registry import package_registry

if TYPE_CHECKING:
    from ...core.spec import NvrtcUnit
    from ..loader.registry import Registry


def _log():  # aot.core.log imports logging (2 ms): only where something is logged, never on a packaged hit
    from ...core.log import get_logger
    return get_logger(__name__)


class _Hit:
    """One packaged image cuda.core's key names: its unit's name, source and options (to check the key
    against), the manifest entry (or the first-hit index's copy of it) and, from the manifest, the unit."""

    __slots__ = ("name", "source", "options", "entry", "unit")

    def __init__(self, name: str, source: str, options: Mapping[str, Any], entry: Mapping[str, Any],
                 unit: NvrtcUnit | None = None):
        self.name, self.source, self.options, self.entry, self.unit = name, source, options, entry, unit

_caches: dict[tuple[str, str, str, bool], PackagedProgramCache] = {}
_caches_lock = threading.Lock()


def program_cache(package: str, folder: str = "artifacts", *, name: str = DEFAULT_NAME, same_nvrtc: bool = False,
                  registry: Registry | None = None) -> PackagedProgramCache:
    """The program cache of ``package``'s packaged NVRTC images (one per process and arguments). ``name``:
    the ``ProgramOptions.name`` the library compiles with (cuda.core's default unless it sets one);
    ``registry``: the library's own ``aot.Registry.from_package(...)``, else the one shared with
    :func:`aot.by_source`."""
    if registry is not None:
        return PackagedProgramCache(registry, name=name, same_nvrtc=same_nvrtc)
    memo = (package, folder, name, same_nvrtc)
    with _caches_lock:
        cache = _caches.get(memo)
        if cache is None:
            cache = _caches[memo] = PackagedProgramCache(package_registry(package, folder), name=name,
                                                         same_nvrtc=same_nvrtc)
        return cache


def _key_bytes(key: bytes | str) -> bytes:
    if isinstance(key, (bytes, bytearray)):
        return bytes(key)
    if isinstance(key, str):
        return key.encode("utf-8")
    raise TypeError(f"cache keys must be bytes or str, got {type(key).__name__}")


class PackagedProgramCache(ProgramCacheResource):
    """Hits: the registry's packaged NVRTC images, by cuda.core's key. Misses and writes: the user cache."""

    def __init__(self, registry: Registry, *, name: str = DEFAULT_NAME, same_nvrtc: bool = False):
        if not isinstance(name, str) or not name:  # cuda.core hashes it into every key: refused here, at the edge
            raise ArgumentError(f"name: {name!r:.80} is not a program name (the ProgramOptions.name the library "
                                f"compiles with, a str)")
        self._reg = registry
        self._name = name
        self._same_nvrtc = same_nvrtc
        self._lock = threading.Lock()
        self._index: dict[bytes, _Hit] | None = None
        self._recorded: set[bytes] = set()  # keys of the index read from the manifest, not yet checked
        self._trust_recorded = True
        self._payloads: dict[bytes, bytes] = {}
        self._user: FileStreamProgramCache | None | bool = False  # False: not looked for yet
        #: Lookups answered from the package, from the user cache, and not at all (for tests and status).
        self.counts = {"packaged": 0, "user": 0, "miss": 0}

    # ------------------------------------------------------------------ the two sources
    def packaged_keys(self) -> dict[bytes, _Hit]:
        """cuda.core key -> the packaged image (:class:`_Hit`), built on first need: from the set's first-hit
        index (:mod:`aot.runtime.loader.firsthit`) while the recorded keys are trusted, else the manifest."""
        index = self._index
        if index is None:
            with self._lock:
                index = self._index
                if index is None:
                    index = self._index = self._build_index()
        return index

    def _build_index(self) -> dict[bytes, _Hit]:
        here = nvrtc_version()
        if self._trust_recorded and self._name == DEFAULT_NAME:
            from ..loader.firsthit import index_of
            lean = index_of(self._reg)
            if lean is not None and all(e.get("progkey_nvrtc") == here for e in lean[1]  # else: keys derived
                                        if lean[0][e["name"]]["program_cache"]):
                return self._lean_index(*lean)
        from ...core.spec import NvrtcUnit
        from .progkey import eligible, program_cache_key
        manifest = self._reg.manifest
        if manifest is None:
            return {}
        log = _log()
        index: dict[bytes, _Hit] = {}
        recorded_keys: set[bytes] = set()
        derived = 0
        for e in manifest.artifacts:
            unit = manifest.built.get(e["name"])
            if not isinstance(unit, NvrtcUnit) or e["payload_kind"] not in ("cubin", "ptx"):
                continue
            recorded = e.get("progkey")
            if isinstance(recorded, str) and e.get("progkey_nvrtc") == here and self._name == DEFAULT_NAME \
                    and self._trust_recorded and eligible(unit):
                try:
                    index[bytes.fromhex(recorded)] = _Hit(unit.name, unit.source, unit.options, e, unit)
                    recorded_keys.add(bytes.fromhex(recorded))
                except ValueError:
                    log.debug("%s: progkey of %s is not hex; ignored", unit.name, e["path"])
                continue
            if self._same_nvrtc or not eligible(unit):
                continue
            try:
                index[program_cache_key(unit, e["sm"], e["payload_kind"], self._name)] = _Hit(
                    unit.name, unit.source, unit.options, e, unit)
                derived += 1
            except (ValueError, TypeError) as err:
                log.debug("%s: cuda.core keys no compile of it: %s", unit.name, err)
        log.debug("program cache of %s: %d packaged keys (%d derived for NVRTC %s)", manifest.root, len(index),
                  derived, here)
        self._recorded = recorded_keys
        return index

    def _lean_index(self, units: Mapping[str, Mapping[str, Any]], entries: Sequence[Mapping[str, Any]]
                    ) -> dict[bytes, _Hit]:
        """The recorded keys of the first-hit index (every one of this NVRTC's ``major.minor``: checked by the
        caller), each checked against its unit's own source and options at its first hit, as the manifest's."""
        index: dict[bytes, _Hit] = {}
        for e in entries:
            u = units[e["name"]]
            if "progkey" in e and u["program_cache"]:
                index[bytes.fromhex(e["progkey"])] = _Hit(e["name"], u["source"], u["options"], e)
        self._recorded = set(index)
        return index

    def _packaged_hit(self, key: bytes) -> _Hit | None:
        """The packaged image cuda.core's ``key`` names, a recorded key checked against its own unit first
        (see the module doc)."""
        hit = self.packaged_keys().get(key)
        if hit is None or key not in self._recorded:
            return hit
        try:
            right = key_of(hit.source, hit.options, hit.entry["sm"], hit.entry["payload_kind"], self._name) == key
        except Exception:  # noqa: BLE001 - cuda.core refuses these options (an index's: checked only for shape)
            right = False
        if right:
            self._recorded.discard(key)
            return hit
        self._reg._warn(f"aot: {self._reg._source}: the manifest's progkey of {hit.entry['path']} (unit {hit.name}) "
                        f"is not cuda.core's key of that unit; deriving every key from the definitions (run "
                        f"'aot verify' on this set)")
        with self._lock:
            self._trust_recorded = False
            self._payloads.clear()
            self._index = self._build_index()
        return self._index.get(key)

    def _packaged_payload(self, key: bytes, hit: _Hit) -> bytes | None:
        data = self._payloads.get(key)
        if data is not None:
            return data
        entry, source = hit.entry, self._reg._source
        path: Any = f"{source}/{entry['path']}"
        try:
            if hit.unit is None:  # from the first-hit index: no manifest read (issue 42)
                from ..loader.firsthit import read_image
                assert source is not None  # an index is read from a folder
                art = read_image(source, hit.name, entry)
            else:
                from ..loader.sources import check_packaged
                manifest = self._reg.manifest
                assert manifest is not None  # the index comes from it
                path = manifest.path_of(entry)
                art = check_packaged(manifest, hit.unit, entry, path)
        except Exception as e:  # noqa: BLE001 - a damaged artifact: one warning, then compile as usual
            self._reg._warn(f"aot: skipping {path}: {e}")
            return None
        self._payloads[key] = data = art.payload
        return data

    def user_cache(self) -> FileStreamProgramCache | None:
        """The per-user NVRTC cache (:func:`aot.runtime.jit.jit.nvrtc_cache_dir`: owner and mode checked), or
        ``None`` when disabled, unusable or untrusted (warned once per process)."""
        if self._user is False:
            from ...core.env import CACHE_MAX_BYTES
            from ..jit.jit import nvrtc_cache_dir
            where = nvrtc_cache_dir(self._reg._warn)
            user = None
            if where is not None:
                try:
                    user = FileStreamProgramCache(where, max_size_bytes=CACHE_MAX_BYTES.get() or None)
                except OSError:
                    user = None
            self._user = user
        return self._user if isinstance(self._user, FileStreamProgramCache) else None

    # ------------------------------------------------------------------ ProgramCacheResource
    def __getitem__(self, key: bytes | str) -> bytes:
        k = _key_bytes(key)
        hit = self._packaged_hit(k)
        if hit is not None:
            data = self._packaged_payload(k, hit)
            if data is not None:
                self.counts["packaged"] += 1
                return data
        user = self.user_cache()
        data = None
        if user is not None:
            try:
                data = user.get(k)
            except Exception:  # noqa: BLE001 - an unreadable entry just means "compile"
                data = None
        if data is None:
            self.counts["miss"] += 1
            raise KeyError(key)
        self.counts["user"] += 1
        return data

    def __setitem__(self, key: bytes | str, value: Any) -> None:
        """A compile result: into the user cache (the packaged images are read-only; a key they serve is
        never compiled, so never written)."""
        k = _key_bytes(key)
        if k in self.packaged_keys():
            return
        user = self.user_cache()
        if user is None:
            return
        try:
            user[k] = value
        except OSError as e:  # a full or read-only cache: the compile result still serves from memory
            _log().debug("program cache: not persisted to %s: %s", getattr(user, "path", "the user cache"), e)

    def __delitem__(self, key: bytes | str) -> None:
        k = _key_bytes(key)
        if k in self.packaged_keys():
            raise TypeError("a packaged image is read-only (it ships in the package's wheel)")
        user = self.user_cache()
        if user is None:
            raise KeyError(key)
        del user[k]

    def __len__(self) -> int:
        user = self.user_cache()
        return len(self.packaged_keys()) + (len(user) if user is not None else 0)

    def clear(self) -> None:
        raise AotError("the packaged images are read-only; the user cache is cleared with "
                       "'python -m aot cache clear'")
