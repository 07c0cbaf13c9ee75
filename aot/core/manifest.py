"""The per-output index of artifacts, written last as the build's commit marker.

A directory is a usable artifact set only if its ``manifest.json`` parses and every entry it names is
present with the recorded size and sha256. The build deletes the old manifest first and writes the
new one atomically after every artifact is in place, so an interrupted build never leaves a manifest
naming missing or partial files. Paths in a manifest are checked to stay inside its directory.

A set may carry CCCL blobs of several cuda-cccl releases (``aot merge`` of builds made under each; a blob
loads only under the exact cuda-cccl that built it). Each CCCL entry then names its release (``cuda_cccl``),
``producers`` holds the producer of every release (its content keys were made with it), and ``producer`` is
the newest release's. A single-release set needs neither: its entries' release is ``producer``'s.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .errors import ArtifactError
from .majorset import index_majors, is_index, major_dir, pick
from . import keyschemas
from .format import _read_regular, is_sha256_hex, loads_strict_json
from .text import MAX_SPECS, SpecError, short
from .spec import Spec
from .release import MAX_RELEASE_LEN, _RELEASE, is_release, release_order  # noqa: F401 - re-exported
from .rules import spec_from_definition

MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = "aot-manifest"
MANIFEST_VERSION = 1
MAX_MANIFEST_LEN = 16 * 1024 * 1024
ENTRY_FIELDS: dict[str, type] = {"path": str, "name": str, "family": str, "sm": int, "payload_kind": str,
                                 "size": int, "sha256": str, "content_key": str}


@dataclass(frozen=True)
class Manifest:
    root: Path
    producer: Mapping[str, Any]
    specs: Mapping[str, Mapping[str, Any]]
    artifacts: tuple[Mapping[str, Any], ...]
    #: The specs rebuilt (and checked) from ``specs``, once, by the matrix's own validator.
    built: Mapping[str, Spec] = field(default_factory=dict)
    #: The SMs the set was built for (``None``: an older manifest that does not say).
    sms: tuple[int, ...] | None = None
    #: Build items that failed (a ``--keep-going`` build), as output paths.
    incomplete: tuple[str, ...] = ()
    #: ``"K/N"`` for one shard of a sharded build, else ``None``.
    shard: str | None = None
    #: Specs left out by ``load_manifest(..., skip_bad_specs=True)``: (name, why), their artifacts dropped.
    skipped: tuple[tuple[str, str], ...] = ()
    #: cuda-cccl release -> the producer of the build made under it (a set merged from several; else empty).
    producers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: cuda-cccl release (< 1.1) -> its cuda.compute compile answers (:mod:`aot.core.legacy_manifest`).
    legacy: Mapping[str, Any] = field(default_factory=dict)
    #: The versions of the key and digest schemas the set was built by (:mod:`aot.core.keyschemas`); ``None``: an
    #: older manifest that does not say (its keys are compared as they are).
    key_schemas: Mapping[str, int] | None = None

    def release_of(self, entry: Mapping[str, Any]) -> str | None:
        """The cuda-cccl release ``entry`` was built under: its own ``cuda_cccl``, else the set's."""
        rel = entry.get("cuda_cccl", self.producer.get("cuda_cccl"))
        return rel if isinstance(rel, str) else None

    def producer_of(self, entry: Mapping[str, Any]) -> Mapping[str, Any]:
        """The producer ``entry`` was built with (its content key was made from it): its release's."""
        rel = entry.get("cuda_cccl")
        return self.producers.get(rel, self.producer) if isinstance(rel, str) else self.producer

    def cccl_releases(self) -> tuple[str, ...]:
        """The cuda-cccl releases whose CCCL blobs this set carries, oldest first (empty: no CCCL blob)."""
        found = self.__dict__.get("_releases")
        if found is None:
            rels = {self.release_of(a) for a in self.artifacts if a["family"] == "cccl"}
            found = tuple(sorted((r for r in rels if r is not None), key=release_order))
            object.__setattr__(self, "_releases", found)  # frozen: a cache, not a field
        return found

    def entries_for(self, name: str) -> list[Mapping[str, Any]]:
        """The artifact entries of spec ``name`` (an index built on first ask: a warmup asks once per spec)."""
        index = self.__dict__.get("_by_name")
        if index is None:
            index = {}
            for a in self.artifacts:
                index.setdefault(a["name"], []).append(a)
            object.__setattr__(self, "_by_name", index)  # frozen: a cache, not a field
        return list(index.get(name, ()))

    def path_of(self, entry: Mapping[str, Any]) -> Path:
        """``root / entry["path"]``, checked to stay inside ``root`` now (the folders resolved once per
        manifest; the file itself, if a symlink, every time)."""
        rel = entry["path"]
        real_dirs = self.__dict__.get("_real_dirs")
        if real_dirs is None:
            real_dirs = {}
            object.__setattr__(self, "_real_dirs", real_dirs)  # frozen: a cache, not a field
        _check_inside(self.root, rel, real_dirs)
        return self.root / rel


def cccl_specifier(releases: Sequence[str], known: Sequence[str] = ()) -> str:
    """The PEP 440 specifier of the cuda-cccl releases a set carries: ``==X`` for one, else
    ``>=oldest,<=newest`` with ``!=R`` for every ``known`` release in between that it does not carry
    (``known``: the releases that can serialize, :data:`cccl_patches.CHECKED`)."""
    rels = sorted(set(releases), key=release_order)
    if not rels:
        raise ValueError("no cuda-cccl release")
    if len(rels) == 1:
        return f"=={rels[0]}"
    lo, hi = release_order(rels[0]), release_order(rels[-1])
    skipped = sorted((r for r in set(known) - set(rels) if lo < release_order(r) < hi), key=release_order)
    return ",".join([f">={rels[0]}", f"<={rels[-1]}", *(f"!={r}" for r in skipped)])


def safe_join(root: Path, rel: str) -> Path:
    """``root / rel`` only if ``rel`` is a plain relative path that stays inside ``root`` (symlinks too)."""
    _check_inside(root, rel, {})
    return root / rel


def _check_inside(root: Path, rel: Any, real_dirs: dict[str, str]) -> None:
    """Refuse ``rel`` unless it is a plain relative path (``/``-separated, no empty, ``.`` or ``..`` part, no
    backslash, NUL or drive) that resolves inside ``root``. ``real_dirs`` caches resolved folders across
    one manifest's entries: a library's 1800 artifacts sit in 200 folders, and resolving every path whole
    was most of a registry's first use (strings only: pathlib objects cost more than the check). A file
    that is itself a symlink is resolved whole."""
    parts = _check_plain(root, rel)
    try:
        if not rel.isascii():
            os.fsencode(rel)  # a name the file system cannot encode (a lone surrogate): ValueError
        real_root = real_dirs.get("") or os.path.realpath(root)
        real_dirs[""] = real_root
        real_parent = _real_dir(root, parts[:-1], real_dirs)
        real = os.path.join(real_parent, parts[-1])
        if os.path.islink(real):
            real = str(Path(real).resolve())  # pathlib raises on a symlink loop
    except (OSError, RuntimeError, ValueError) as e:
        raise ArtifactError(f"manifest path {short(rel)}: cannot resolve: {e}") from None
    if not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise ArtifactError(f"manifest path {short(rel)} leads outside {root} (to {real})")


def _check_plain(root: Path, rel: Any) -> list[str]:
    """``rel`` split at ``/`` if it is a plain relative path (the text checks of :func:`_check_inside`)."""
    if not isinstance(rel, str):
        raise ArtifactError(f"manifest path {short(rel)} is not a string")
    parts = rel.split("/")
    if not rel or "\\" in rel or "\0" in rel or ":" in parts[0] or any(p in ("", ".", "..") for p in parts):
        raise ArtifactError(f"manifest path {short(rel)} is not a plain relative path inside {root}")
    return parts


def _real_dir(root: Path, parts: list[str], real_dirs: dict[str, str]) -> str:
    """The resolved folder ``root/parts...``, one ``lstat`` per folder not seen yet: a folder that is no
    symlink resolves to its resolved parent joined with its name (``realpath`` would ``lstat`` every
    component from ``/`` again); a symlink is resolved whole. A loop, not a recursion: a manifest from
    elsewhere may name a path of thousands of folders (the fuzzer's ``a/a/a/...`` hit Python's recursion limit)."""
    n = len(parts)
    while n > 0 and "/".join(parts[:n]) not in real_dirs:  # the longest prefix resolved already ("" always is)
        n -= 1
    here = real_dirs["/".join(parts[:n])]
    for i in range(n, len(parts)):
        key = "/".join(parts[:i + 1])
        here = os.path.join(here, parts[i])
        if os.path.islink(here):
            here = os.path.realpath(os.path.join(root, key))
        real_dirs[key] = here
    return here


def file_sha256(path: Path) -> str:
    import hashlib  # OpenSSL, 2-3 ms to import: not on a Registry's first use (names() reads no artifact)
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    with open(fd, "rb") as f:  # O_NONBLOCK: a FIFO put in a file's place cannot hang the reader
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ArtifactError(f"{path}: not a regular file")
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(root: Path, *, producer: Mapping[str, Any], specs: Mapping[str, Mapping[str, Any]],
                   artifacts: Sequence[Mapping[str, Any]], extra: Mapping[str, Any] | None = None) -> Path:
    doc = {
        "format": MANIFEST_FORMAT,
        "manifest_version": MANIFEST_VERSION,
        "producer": dict(producer),
        "specs": {k: dict(v) for k, v in sorted(specs.items())},
        "artifacts": sorted((dict(a) for a in artifacts), key=lambda a: a["path"]),
    }
    if extra:
        doc.update(extra)
    from .fs import atomic_write  # tempfile, shutil, random: the loader's first use never writes a manifest
    path = root / MANIFEST_NAME
    data = (json.dumps(doc, indent=1, sort_keys=True, allow_nan=False) + "\n").encode()
    if len(data) > MAX_MANIFEST_LEN:  # never write what every reader refuses (the build refuses it earlier)
        raise ArtifactError(f"{path}: {len(data)} bytes, over the {MAX_MANIFEST_LEN}-byte bound every reader "
                            f"applies; not written")
    from .hitindex import INDEX_NAME, derive
    index_path = root / INDEX_NAME
    try:  # never an old index beside a new manifest, even for an instant a reader could see
        os.unlink(index_path)
    except FileNotFoundError:
        pass
    atomic_write(path, data)
    index = derive(doc, data)  # the first hit's facts (issue 42): from these very bytes
    if index is not None:
        atomic_write(index_path, index)
    return path


def remove_manifest(root: Path) -> None:
    from .hitindex import INDEX_NAME
    for name in (INDEX_NAME, MANIFEST_NAME):
        try:
            os.unlink(root / name)
        except FileNotFoundError:
            pass


def spec_definition_problem(name: Any, d: Any) -> str | None:
    """What is wrong with a spec definition as a manifest stores it (``Spec.definition()``), else ``None``."""
    try:
        _build_spec(name, d)
    except SpecError as e:
        return f"field {short(e.field)}: {e}" if e.field else str(e)
    return None


def _build_spec(name: Any, d: Any) -> Spec:
    """The spec a manifest defines under ``name``, through the matrix's own validator
    (:func:`aot.core.rules.spec_from_definition`). Raises :class:`SpecError` for anything it refuses, including
    what the checks themselves could not survive (they are bounded, so this is a second line)."""
    if not isinstance(d, dict) or d.get("name") != name:
        raise SpecError(f"not an object named {short(name)}")
    try:
        return spec_from_definition(d)
    except SpecError:
        raise
    except (RecursionError, MemoryError, ValueError, TypeError, OverflowError) as e:
        raise SpecError(f"unreadable ({type(e).__name__})") from None


def _check_build_fields(path: Path, doc: Mapping[str, Any]
                        ) -> tuple[tuple[int, ...] | None, tuple[str, ...], str | None]:
    """``sms`` (a list of SM numbers), ``incomplete`` (a list of paths) and ``shard`` (``"K/N"`` or null):
    what ``aot merge`` and the wheel check rely on, typed here so they never see anything else."""
    sms = doc.get("sms")
    if sms is not None and (not isinstance(sms, list) or len(sms) > 256 or not all(
            isinstance(x, int) and not isinstance(x, bool) and 10 <= x <= 1000 for x in sms)):
        raise ArtifactError(f"{path}: field 'sms' must be a list of SM numbers, not {short(sms)}")
    incomplete = doc.get("incomplete", [])
    if not isinstance(incomplete, list) or not all(isinstance(x, str) for x in incomplete):
        raise ArtifactError(f"{path}: field 'incomplete' must be a list of paths, not {short(incomplete)}")
    shard = doc.get("shard")
    if shard is not None:
        parts = shard.split("/") if isinstance(shard, str) and len(shard) <= 16 else []
        if len(parts) != 2 or not all(p.isascii() and p.isdigit() and len(p) <= 4 for p in parts) \
                or not 1 <= int(parts[0]) <= int(parts[1]):
            raise ArtifactError(f"{path}: field 'shard' must be 'K/N' with 1 <= K <= N, not {short(shard)}")
    return (tuple(sms) if sms is not None else None), tuple(incomplete), shard


def load_manifest(root: str | os.PathLike, *, skip_bad_specs: bool = False, resolve_paths: bool = True,
                  major: str | Callable[[], str] | None = None) -> Manifest:
    """Parse and structurally check ``root/manifest.json`` (not the artifacts: see :func:`verify_files`).

    Every spec definition passes the matrix's own validator. A bad one is an :class:`ArtifactError` naming
    the manifest, the spec and the field; with ``skip_bad_specs`` (the runtime loader) it is left out
    instead, with its artifacts, and listed in ``Manifest.skipped``.

    ``resolve_paths=False`` (the runtime loader) checks each entry's path as text only (plain, relative)
    and leaves resolving it on disk to :meth:`Manifest.path_of`, which does so before every open anyway:
    a registry's first use then costs no ``lstat`` per artifact, and an entry that leads outside is
    skipped with one warning when it is opened.

    A set of several CUDA majors (:mod:`aot.core.majorset`) is read as the set of ``major`` (the loader: the
    installed one, asked only here); without the installed major's set, another's definitions with no
    artifact (and no cccl-legacy answer). ``major=None``: such a set is an error saying so (a tool reads each
    major's set itself).
    """
    root = Path(root)
    path = root / MANIFEST_NAME
    try:
        raw = _read_regular(path, MAX_MANIFEST_LEN)
    except OSError as e:
        raise ArtifactError(f"{path}: cannot read manifest: {e.strerror or e}") from None
    except ArtifactError as e:
        raise ArtifactError(f"{path}: cannot read manifest: {e}") from None
    try:
        doc = loads_strict_json(raw)
    except (ValueError, RecursionError, MemoryError) as e:
        raise ArtifactError(f"{path}: manifest is not valid JSON: {type(e).__name__}: "
                            f"{str(e)[:200]}") from None
    if is_index(doc):
        return _load_major(root, index_majors(path, doc), major, skip_bad_specs, resolve_paths)
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise ArtifactError(f"{path}: not an aot manifest")
    if doc.get("manifest_version") != MANIFEST_VERSION:
        raise ArtifactError(f"{path}: manifest version {short(doc.get('manifest_version'))}, this aot reads "
                            f"{MANIFEST_VERSION}")
    producer, specs, artifacts = doc.get("producer"), doc.get("specs"), doc.get("artifacts")
    if not isinstance(producer, dict) or not isinstance(specs, dict) or not isinstance(artifacts, list):
        raise ArtifactError(f"{path}: manifest lacks producer/specs/artifacts")
    if len(specs) > MAX_SPECS:
        raise ArtifactError(f"{path}: manifest defines {len(specs)} specs, over the limit of {MAX_SPECS}")
    sms, incomplete, shard = _check_build_fields(path, doc)
    producers = _check_producers(path, doc.get("producers"), producer)
    legacy: Mapping[str, Any] = {}
    if doc.get("cccl_legacy") is not None:  # the module only where the set carries answers (the loader's import set)
        from .legacy_manifest import parse as parse_legacy
        legacy = parse_legacy(path, doc["cccl_legacy"])
    schemas = keyschemas.check(doc["key_schemas"]) if "key_schemas" in doc else None
    if "key_schemas" in doc and schemas is None:
        raise ArtifactError(f"{path}: field 'key_schemas' must map schema names to versions, not "
                            f"{short(doc['key_schemas'])}")
    built: dict[str, Spec] = {}
    skipped: list[tuple[str, str]] = []
    for name, d in specs.items():  # the loader rebuilds specs (and their content keys) from these
        try:
            built[name] = _build_spec(name, d)
        except SpecError as e:
            why = f"field {short(e.field)}: {e}" if e.field else str(e)
            if not skip_bad_specs:
                raise ArtifactError(f"{path}: spec {short(name)}: {why}") from None
            skipped.append((name, why))
    if skipped:
        left_out = {name for name, _ in skipped}
        specs = {k: v for k, v in specs.items() if k in built}
        artifacts = [a for a in artifacts if not (isinstance(a, dict) and a.get("name") in left_out)]
    real_dirs: dict[str, str] = {}
    for i, a in enumerate(artifacts):
        if not isinstance(a, dict):
            raise ArtifactError(f"{path}: artifact entry {i} is not an object")
        for key, typ in ENTRY_FIELDS.items():
            if isinstance(a.get(key), bool) or not isinstance(a.get(key), typ):
                raise ArtifactError(f"{path}: artifact entry {i} field {key!r} missing or not {typ.__name__}")
        if a["size"] < 0 or not is_sha256_hex(a["sha256"]):
            raise ArtifactError(f"{path}: artifact entry {i} ({short(a['path'])}) has a bad size or sha256")
        rel = a.get("cuda_cccl", producer.get("cuda_cccl"))
        if "cuda_cccl" in a and (not isinstance(rel, str) or (producers and rel not in producers)
                                 or (not producers and rel != producer.get("cuda_cccl"))):
            raise ArtifactError(f"{path}: artifact entry {i} ({short(a['path'])}) field 'cuda_cccl' names "
                                f"{short(rel)}, a release the manifest has no producer for")
        if resolve_paths:
            _check_inside(root, a["path"], real_dirs)
        else:
            _check_plain(root, a["path"])
        if a["name"] not in specs:
            raise ArtifactError(f"{path}: artifact entry {i} names spec {short(a['name'])} the manifest does not "
                                f"define")
    return Manifest(root=root, producer=producer, specs=specs, artifacts=tuple(artifacts), built=built, sms=sms,
                    incomplete=incomplete, shard=shard, skipped=tuple(skipped), producers=producers,
                    legacy=legacy, key_schemas=schemas)


def _load_major(root: Path, majors: tuple[int, ...], major: str | Callable[[], str] | None, skip_bad_specs: bool,
                resolve_paths: bool) -> Manifest:
    """The set of one CUDA major out of a set of several (see :func:`load_manifest`)."""
    if major is None:
        names = ", ".join(str(m) for m in majors)
        raise ArtifactError(f"{root / MANIFEST_NAME}: a set of CUDA majors {names}, one folder each; read one of "
                            f"them ({', '.join(str(root / major_dir(m)) for m in majors)})")
    sub, served = pick(root, majors, major() if callable(major) else major)
    m = load_manifest(sub, skip_bad_specs=skip_bad_specs, resolve_paths=resolve_paths)  # major=None: not nested
    # another major's set: its definitions only; its artifacts and cccl-legacy answers came from another toolchain
    return m if served else replace(m, artifacts=(), legacy={})


def _check_producers(path: Path, producers: Any, producer: Mapping[str, Any]) -> dict[str, dict]:
    """``producers`` (release -> producer object whose ``cuda_cccl`` is that release), one of them the set's
    ``producer``; absent in a single-release set."""
    if producers is None:
        return {}
    if not isinstance(producers, dict) or not 1 <= len(producers) <= 64 or not all(
            isinstance(k, str) and isinstance(v, dict) and v.get("cuda_cccl") == k for k, v in producers.items()):
        raise ArtifactError(f"{path}: field 'producers' must map each cuda-cccl release to its producer")
    if producers.get(producer.get("cuda_cccl")) != producer:
        raise ArtifactError(f"{path}: field 'producers' lacks the set's own producer")
    return producers


def verify_files(m: Manifest) -> list[str]:
    """Every problem with the files a manifest names (missing, size, sha256), its cccl-legacy answers
    included; empty when all is well."""
    problems = []
    legacy: list = []
    if m.legacy:
        from .legacy_manifest import entries
        legacy = entries(m.legacy)
    for a in [*m.artifacts, *legacy]:
        if "pack" in a:  # inside a pack (aot.core.pack): unpacked and hashed like a file
            from .pack import pack_problems
            problem = pack_problems(m, a)
            if problem:
                problems.append(f"{a['path']}: {problem}")
            continue
        p = m.path_of(a)
        try:
            st = p.stat()
        except OSError:
            problems.append(f"{a['path']}: missing")
            continue
        if not stat.S_ISREG(st.st_mode):
            problems.append(f"{a['path']}: not a regular file")
        elif st.st_size != a["size"]:
            problems.append(f"{a['path']}: {st.st_size} bytes, manifest says {a['size']}")
        else:
            try:
                digest = file_sha256(p)
            except (OSError, ArtifactError) as e:
                problems.append(f"{a['path']}: cannot read: {getattr(e, 'strerror', None) or e}")
                continue
            if digest != a["sha256"]:
                problems.append(f"{a['path']}: sha256 differs from the manifest")
    return problems
