"""SM targets: parse ``--sm`` selections and rank artifacts for a device.

Pure functions, no CUDA imports: the loader calls :func:`rank` on every first use, the build driver
calls :func:`parse_sm_list`, and both are unit-tested over many device/artifact combinations.

An SM is an int ``10 * major + minor`` (``89`` = sm_89, ``120`` = sm_120).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from .errors import UsageError
from .text import short

#: The full default SM list per CUDA major: what ``--sm all`` and the wheel build use. With CUDA 13 every GPU
#: from a T4 (7.5) up gets SASS: 75 and 110 (Thor) cost about 40 s of build each and 1.5 / 1.9 MB zipped
#: (docs/end-users.md, "Which artifact serves which GPU"). cu13 cannot target sm < 75; cu12's NVRTC predates sm_100 in
#: older 12.x releases.
DEFAULT_SMS: dict[int, tuple[int, ...]] = {
    12: (75, 80, 86, 89, 90),
    13: (75, 80, 86, 89, 90, 100, 110, 120),
}


_SM_DIGITS = re.compile(r"[0-9]{2,3}")


def sm_major(sm: int) -> int:
    return sm // 10


def parse_sm_list(text: str, *, cuda_major: int, native: int | None = None,
                  supported: Iterable[int] | None = None) -> list[int]:
    """Parse ``"80,89,90"``, ``"sm_80,sm_90"``, ``"all"`` or ``"native"`` into sorted unique SMs.

    ``native`` is the local GPU's SM (``None`` when there is none: ``native`` then fails clearly);
    ``supported`` is what this NVRTC can target, used to reject SMs the toolchain cannot build.
    """
    text = text.strip().lower()
    if not text:
        raise UsageError("--sm: empty SM list (try '80,89,90', 'native' or 'all')")
    supported = set(supported) if supported is not None else None
    result: set[int] = set()
    for token in (t.strip() for t in text.split(",")):
        if token == "all":  # the default list, as far as this toolkit's NVRTC can target it
            if cuda_major not in DEFAULT_SMS:
                raise UsageError(f"--sm all: no default SM list for CUDA {cuda_major}")
            result.update(s for s in DEFAULT_SMS[cuda_major] if supported is None or s in supported)
        elif token == "native":
            if native is None:
                raise UsageError("--sm native: no usable GPU on this machine (no driver or no device); "
                                 "name the SMs instead, e.g. --sm 80,90")
            result.add(native)
        else:
            digits = token[3:] if token.startswith("sm_") else token
            if not _SM_DIGITS.fullmatch(digits):  # ASCII only: str.isdigit() accepts '8²' and '¹²'
                raise UsageError(f"--sm: {short(token)} is not an SM (expected e.g. 80, 89, sm_90, native, all)")
            result.add(int(digits))
    if supported is not None:
        bad = sorted(result - supported)
        if bad:
            raise UsageError(f"--sm: this NVRTC (CUDA {cuda_major}) cannot target "
                             f"{', '.join(f'sm_{s}' for s in bad)}; supported: "
                             f"{', '.join(str(s) for s in sorted(supported))}")
    return sorted(result)


@dataclass(frozen=True)
class Candidate:
    """One loadable thing: an artifact's SM and payload kind (``cccl-blob``, ``cubin`` or ``ptx``)."""

    sm: int
    kind: str
    origin: str = "packaged"  # "packaged" or "cache"
    ref: object = None        # whatever the caller uses to find it again (a path, an entry)


def _preference(device_sm: int, c: Candidate) -> tuple | None:
    """Sort key (lower is better), or ``None`` when ``c`` cannot run on ``device_sm``.

    SASS (cubin, cuda.compute blob) runs only on the same major with device minor >= target minor;
    PTX runs on any device at or above its SM (the driver JIT-compiles it), so it ranks last.
    """
    if c.kind in ("cubin", "cccl-blob"):
        if sm_major(c.sm) != sm_major(device_sm) or c.sm > device_sm:
            return None
        return (0, device_sm - c.sm)
    if c.kind == "ptx":
        if c.sm > device_sm:
            return None
        return (1, device_sm - c.sm)
    return None


def rank(device_sm: int, candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates usable on ``device_sm``, best first.

    Order: exact SASS match; SASS of the same major with the highest minor <= the device's; PTX with
    the highest SM <= the device's. Packaged artifacts beat the user cache at every rank, because a
    packaged artifact was checked on a GPU before it shipped. A different major's SASS is never offered.
    """
    origin_order = {"packaged": 0, "cache": 1}
    keyed = []
    for i, c in enumerate(candidates):
        pref = _preference(device_sm, c)
        if pref is not None:
            keyed.append(((origin_order.get(c.origin, 2),) + pref + (i,), c))
    keyed.sort(key=lambda kc: kc[0])
    return [c for _, c in keyed]
