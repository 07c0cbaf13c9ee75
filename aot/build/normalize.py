"""Deterministic artifacts: normalize the per-process names NVRTC gives internal-linkage symbols.

NVRTC names anonymous-namespace entities ``_INTERNAL_<8 hex>_<n>_<module>_<8-hex nonce>_<PID>...``; the
nonce changes with every compilation and the PID with every process, so the same spec built twice
differs in ~900 bytes of the cubin's ``.strtab`` (measured: a 188 KB reduce blob, 84 names, nothing
else differs). We rewrite nonce and PID to zeros *of the same length*: the string table keeps its size
and every offset in the ELF stays valid, so no relinking is needed. The names only label local
symbols (kernels are looked up by their external names), which is why the normalized artifacts load
and run unchanged (verified on the GPU with ``aot verify --gpu``).

cuda-cccl 1.1.x's C library names its translation unit's anonymous namespace
``_GLOBAL__N__<8 hex>_<n>_<module>_<8-hex nonce>_<PID>``
(``_GLOBAL__N__00000000_13_device_reduce_e994a141_145096`` in a 1.1.0 reduce blob; 1.2.x's have none):
the same shape, normalized the same way.

Residual: the PID's digit count is kept (a blob's size followed it). Build workers therefore seed cuda.compute's
NVRTC programs (:mod:`aot.build.nvrtc_seed`): their names then carry no nonce or PID, and this finds nothing to
zero; it still zeroes programs compiled without the seed (the seeding library missing).
"""

from __future__ import annotations

import re

_PREFIX = re.compile(rb"_(?:INTERNAL_|GLOBAL__N__)[0-9a-f]{8}_(\d{1,4})_")


def normalize_internal_symbols(blob: bytes, pid: int) -> tuple[bytes, int]:
    """Return ``blob`` with every ``_<nonce>_<pid>`` of an ``_INTERNAL_`` name zeroed, and how many."""
    pid_b = str(pid).encode()
    tail = re.compile(rb"_[0-9a-f]{8}_" + re.escape(pid_b))
    out = bytearray(blob)
    count = 0
    for m in _PREFIX.finditer(blob):
        start = m.end() + int(m.group(1))  # skip the length-prefixed module name
        if tail.match(blob, start):
            out[start + 1:start + 9] = b"0" * 8
            out[start + 10:start + 10 + len(pid_b)] = b"0" * len(pid_b)
            count += 1
    return bytes(out), count
