"""The manifest's ``cccl_legacy`` family: cuda.compute's compiles answered on cuda-cccl releases without
``serialize`` (< 1.1.0; issue 44, docs/build.md "CCCL releases without serialize").

Those releases build inside their C library; aot packs the NVRTC compile and nvJitLink link answers of each
spec (:mod:`aot.runtime.adapters.cccl_legacy`), one file per answer, keyed by every input. A set lists them per
release, beside its ``serialize`` blobs::

    "cccl_legacy": {"0.6.0": {"producer": {...}, "sms": [90], "specs": ["reduce:int32:plus:0"],
                              "answers": [{"path": "cccl-legacy/cuda-cccl-0.6.0/<key>.aot", "key": "<key>",
                                           "kind": "nvrtc", "spec": "reduce:int32:plus:0",
                                           "size": 240123, "sha256": "..."}]}}

One release may carry the answers of several toolchains (``"producers"``, each a ``"producer"`` object; the
first is ``"producer"`` too, as a set of one toolchain writes it alone): ``pip`` gives a library's users the
newest NVRTC, nvJitLink and numba its pins allow, so a library builds its answers under each it expects and
merges them. Each answer's key holds its compilers' bytes, so a user's install can only pick the answers of its
own toolchain.

A manifest comes from elsewhere: every field is typed and bounded here, a release must be a plain version
(it names a folder), and an answer's path is the one its release and key give (nothing else is accepted, so
no path a manifest names can lead anywhere else). The answers' own bytes are checked where they are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .errors import ArtifactError
from .format import is_sha256_hex
from .text import short

FIELD = "cccl_legacy"
#: The first bytes of an answer file (:func:`aot.runtime.adapters.cccl_legacy.encode_entry`).
MAGIC = b"AOTLGCY\0"
FOLDER = "cccl-legacy"
KINDS = ("nvrtc", "nvjitlink", "numba-ltoir")
MAX_RELEASES = 64
MAX_ANSWERS = 100_000
MAX_SPECS = 10_000
MAX_SPEC_LEN = 256
MAX_PRODUCER_FIELDS = 32
MAX_PRODUCERS = 64


@dataclass(frozen=True)
class LegacyRelease:
    """One release's answers: the toolchains that built them (in :func:`producer_order`), for which SMs and
    specs, and each answer's file."""

    release: str
    producers: tuple[Mapping[str, str], ...]
    sms: tuple[int, ...]
    specs: tuple[str, ...]
    answers: tuple[Mapping[str, Any], ...]

    @property
    def producer(self) -> Mapping[str, str]:
        """The first toolchain (the only one of a set built once)."""
        return self.producers[0]

    def to_json(self) -> dict:
        doc: dict[str, Any] = {"producer": dict(self.producer)}
        if len(self.producers) > 1:  # a set of one toolchain is written as before the field existed
            doc["producers"] = [dict(p) for p in self.producers]
        return {**doc, "sms": list(self.sms), "specs": list(self.specs),
                "answers": sorted((dict(a) for a in self.answers), key=lambda a: a["path"])}


def producer_order(producers: Any) -> tuple[Mapping[str, str], ...]:
    """``producers`` without repeats, in one order whatever the order they came in (a merge of the same inputs
    in another order writes the same bytes)."""
    import json
    unique = {json.dumps(dict(p), sort_keys=True): dict(p) for p in producers}
    return tuple(unique[k] for k in sorted(unique))


def answer_path(release: str, key: str) -> str:
    """Where a set keeps the answer of ``key`` for ``release`` (the only path a manifest may name for it)."""
    return f"{FOLDER}/cuda-cccl-{release}/{key}.aot"


def _fail(where: Path, what: str) -> ArtifactError:
    return ArtifactError(f"{where}: field '{FIELD}' {what}")


def _spec(where: Path, rel: str, value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_SPEC_LEN or not value.isprintable():
        raise _fail(where, f"release {rel}: spec {short(value)} is not a spec string")
    return value


def _answer(where: Path, rel: str, i: int, a: Any, specs: set[str]) -> Mapping[str, Any]:
    if not isinstance(a, dict) or len(a) > 8:
        raise _fail(where, f"release {rel}: answer {i} is not an object")
    for k, typ in (("path", str), ("key", str), ("kind", str), ("spec", str), ("size", int), ("sha256", str)):
        if isinstance(a.get(k), bool) or not isinstance(a.get(k), typ):
            raise _fail(where, f"release {rel}: answer {i} field {k!r} missing or not {typ.__name__}")
    if not is_sha256_hex(a["key"]) or not is_sha256_hex(a["sha256"]) or not 0 <= a["size"] < 1 << 40:
        raise _fail(where, f"release {rel}: answer {i} has a bad key, size or sha256")
    if a["path"] != answer_path(rel, a["key"]):
        raise _fail(where, f"release {rel}: answer {i} path {short(a['path'])} is not "
                           f"{answer_path(rel, a['key'])}")
    if a["kind"] not in KINDS:
        raise _fail(where, f"release {rel}: answer {i} kind {short(a['kind'])} is not one of {', '.join(KINDS)}")
    if a["spec"] not in specs:
        raise _fail(where, f"release {rel}: answer {i} names spec {short(a['spec'])} the release does not list")
    return a


def _producer(where: Path, rel: str, what: str, p: Any) -> None:
    if not isinstance(p, dict) or len(p) > MAX_PRODUCER_FIELDS or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) + len(v) <= 256 for k, v in p.items()) \
            or p.get("cuda_cccl") != rel:
        raise _fail(where, f"release {rel}: {what} must be an object of strings naming cuda_cccl {rel}")


def parse(where: Path, value: Any) -> dict[str, LegacyRelease]:
    """The ``cccl_legacy`` field of the manifest at ``where`` (absent: empty), checked; ArtifactError naming
    the manifest, the release, the answer and the field otherwise."""
    if value is None:
        return {}
    from .release import is_release  # the one rule for a release a manifest may name (it names a folder)
    if not isinstance(value, dict) or len(value) > MAX_RELEASES:
        raise _fail(where, f"must map at most {MAX_RELEASES} cuda-cccl releases to their answers")
    out: dict[str, LegacyRelease] = {}
    total = 0
    for rel, d in value.items():
        if not is_release(rel) or rel == "missing":
            raise _fail(where, f"names {short(rel)}, not a cuda-cccl release (a version such as 0.6.0)")
        if not isinstance(d, dict):
            raise _fail(where, f"release {rel}: not an object")
        producer, sms, specs, answers = d.get("producer"), d.get("sms"), d.get("specs"), d.get("answers")
        _producer(where, rel, "'producer'", producer)
        producers = d.get("producers", [producer])
        if not isinstance(producers, list) or not 0 < len(producers) <= MAX_PRODUCERS \
                or producers[0] != producer:
            raise _fail(where, f"release {rel}: 'producers' must be a list of at most {MAX_PRODUCERS} toolchains, "
                               "the first its 'producer'")
        for i, p in enumerate(producers):
            _producer(where, rel, f"'producers' item {i}", p)
        if not isinstance(sms, list) or not 0 < len(sms) <= 256 or not all(
                isinstance(x, int) and not isinstance(x, bool) and 10 <= x <= 1000 for x in sms):
            raise _fail(where, f"release {rel}: 'sms' must be a list of SM numbers, not {short(sms)}")
        if not isinstance(specs, list) or len(specs) > MAX_SPECS:
            raise _fail(where, f"release {rel}: 'specs' must be a list of at most {MAX_SPECS} spec strings")
        names = [_spec(where, rel, s) for s in specs]
        if not isinstance(answers, list):
            raise _fail(where, f"release {rel}: 'answers' must be a list")
        total += len(answers)
        if total > MAX_ANSWERS:
            raise _fail(where, f"lists more than {MAX_ANSWERS} answers")
        checked = [_answer(where, rel, i, a, set(names)) for i, a in enumerate(answers)]
        out[rel] = LegacyRelease(rel, tuple(dict(p) for p in producers), tuple(sms), tuple(names), tuple(checked))
    return out


def to_json(legacy: Mapping[str, LegacyRelease]) -> dict:
    """The field as a manifest writes it (empty where the set carries no answers: then leave it out)."""
    from .release import release_order
    return {rel: legacy[rel].to_json() for rel in sorted(legacy, key=release_order)}


def entries(legacy: Mapping[str, LegacyRelease]) -> list[Mapping[str, Any]]:
    """Every answer of every release (each has ``path``, ``size`` and ``sha256``, like an artifact entry)."""
    return [a for r in legacy.values() for a in r.answers]


def summary(legacy: Mapping[str, LegacyRelease]) -> list[str]:
    """One line per release, for ``aot verify`` and ``aot inspect``."""
    from .release import release_order
    return [f"cccl-legacy answers for cuda-cccl {rel}: {len(r.specs)} specs, {len(r.answers)} answers, "
            f"{sum(a['size'] for a in r.answers) / 1e6:.1f} MB, SMs {','.join(map(str, r.sms))}"
            + (f", {len(r.producers)} toolchains" if len(r.producers) > 1 else "")
            for rel, r in sorted(legacy.items(), key=lambda kv: release_order(kv[0]))]
