"""The differential gate (issue 41): what the packaged kernels wrote, launch by launch, against the library's JIT.

``aot gate --package PKG -- COMMAND`` runs the library's own command three times on the GPU host
(:mod:`aot.verify.gate_run`): with its JIT (aot serving nothing), with the packaged kernels, and with its JIT
again. A hook in every Python process of each run (:mod:`aot.verify.gate_hook`) writes, after each launch it
sees, a digest of every buffer the launch was given. This module compares the three logs (:func:`compare`):

* per kernel, launch by launch (the n-th launch of a kernel in one run against its n-th in the other), each
  buffer's sha256. The packaged launch passes when it equals either JIT run's.
* A launch whose buffers differ between the two JIT runs is **nondeterministic** (atomics, a race of equal
  writers), never skipped: the packaged one must hold the same values in another order (an order-insensitive
  hash of the elements equal), or, for floating point, its sum, sum of magnitudes, sum of squares and
  extremes within :func:`tolerance`: ``max(rtol * scale, 4 * |JIT A - JIT B|)`` (``rtol`` per element size:
  :data:`RTOL`). Integers that differ otherwise between the JIT runs fail unless the packaged run equals one.
* CuPy kernels by image: the cubin aot served must be the one CuPy's own compile makes here (same name, the
  hash of CuPy's whole key).

Then the package's specs (:func:`listing`): each is ``ok`` (launched, served and equal), ``FAILED`` (the first
differing launch named), ``not launched`` by the command, or ``not served`` (launched, but compiled in the
packaged run). Anything but ``ok`` fails the gate, unless ``--allow-unlaunched`` accepts the last two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

#: Relative tolerance of a nondeterministic floating buffer, per element size (bytes), on its sum of magnitudes.
RTOL = {2: 1e-2, 4: 1e-4, 8: 1e-10}
OK, FAILED, NOT_LAUNCHED, NOT_SERVED = "ok", "FAILED", "not launched", "not served"


@dataclass
class KernelResult:
    """One kernel (or CuPy image) across the three runs."""

    family: str
    kernel: str
    launches: int = 0
    status: str = OK
    detail: str = ""
    nondeterministic: int = 0
    served: bool = True


@dataclass
class SpecRow:
    spec: str
    family: str
    status: str
    detail: str = ""
    kernels: list[str] = field(default_factory=list)


def by_kernel(records: Iterable[dict]) -> tuple[dict[tuple[str, str], list[dict]], dict[str, list[dict]]]:
    """A run's log as ``{(family, kernel): [launch...]}`` in order, and ``{cupy name: [record...]}``."""
    launches: dict[tuple[str, str], list[dict]] = {}
    cupy: dict[str, list[dict]] = {}
    for rec in records:
        if rec.get("kind") == "launch" and isinstance(rec.get("kernel"), str):
            launches.setdefault((str(rec.get("family")), rec["kernel"]), []).append(rec)
        elif rec.get("kind") == "cupy" and isinstance(rec.get("kernel"), str):
            cupy.setdefault(rec["kernel"], []).append(rec)
    return launches, cupy


def tolerance(dtype: str | None, a: dict, b: dict) -> dict[str, float]:
    """Per moment, the tolerance of a floating buffer whose two JIT runs ``a`` and ``b`` differ (a buffer of no known
    element type: of its float32 view, ``stats_dtype``): ``max(rtol * scale, 4 * |a - b|)``, the scale being the
    sum of magnitudes (sums), the sum of squares, or the largest magnitude (extremes)."""
    import numpy as np
    stats = a.get("stats_dtype") or dtype
    rtol = RTOL.get(np.dtype(stats).itemsize if stats else 8, 1e-10)
    ea, eb = a.get("extremes") or [0.0, 0.0], b.get("extremes") or [0.0, 0.0]
    return {"sum": max(rtol * a.get("abssum", 0.0), 4 * abs(a.get("sum", 0.0) - b.get("sum", 0.0))),
            "abssum": max(rtol * a.get("abssum", 0.0), 4 * abs(a.get("abssum", 0.0) - b.get("abssum", 0.0))),
            "sumsq": max(rtol * a.get("sumsq", 0.0), 4 * abs(a.get("sumsq", 0.0) - b.get("sumsq", 0.0))),
            "extremes": max(rtol * max((abs(x) for x in ea), default=0.0),
                            4 * max((abs(x - y) for x, y in zip(ea, eb)), default=0.0))}


def _first_sample(got: dict, want: dict) -> str:
    where = ""
    for k, (g, w) in enumerate(zip(got.get("chunks") or [], want.get("chunks") or [])):
        if g != w:
            step = int(got.get("chunk") or 1)
            where = f"; first difference in elements [{k * step}, {(k + 1) * step})"
            break
    for (i, g), (_, w) in zip(got.get("samples") or [], want.get("samples") or []):
        if g != w:
            return f"{where}; first differing sampled element [{i}]: got {_value(g, got)}, want {_value(w, want)}"
    return where


def _value(hexbytes: str, buf: dict) -> str:
    try:
        import numpy as np
        dt = np.dtype(buf.get("dtype") or "uint8")
        return repr(np.frombuffer(bytes.fromhex(hexbytes), dt)[0].item())
    except (ValueError, TypeError, IndexError):
        return hexbytes


def compare_buffer(p: dict, a: dict, b: dict) -> tuple[bool, bool, str]:
    """(passes, nondeterministic, why) for one buffer of one launch: packaged ``p``, JIT runs ``a`` and ``b``."""
    if p.get("size") != a.get("size"):
        return False, False, f"{p.get('size')} bytes, JIT {a.get('size')}"
    if p["digest"] in (a["digest"], b["digest"]):
        return True, a["digest"] != b["digest"], ""
    if a["digest"] == b["digest"]:
        return False, False, "differs from the JIT's (equal in both JIT runs)" + _first_sample(p, a)
    if a.get("multiset") is not None and a.get("multiset") == b.get("multiset"):
        if p.get("multiset") == a.get("multiset"):
            return True, True, "the same values in another order (as in the two JIT runs)"
        return False, True, "nondeterministic order in the JIT runs, and other values here" + _first_sample(p, a)
    if "sum" in a and "sum" in b and "sum" in p:
        tol = tolerance(p.get("dtype"), a, b)
        names = {"sum": "sum", "abssum": "sum of magnitudes", "sumsq": "sum of squares"}
        bad = [f"{names[k]} {p.get(k)!r} vs {a.get(k)!r} (tolerance {tol[k]:.3g})" for k in names
               if abs(p.get(k, 0.0) - a.get(k, 0.0)) > tol[k]]
        ep, ea = p.get("extremes") or [], a.get("extremes") or []
        if len(ep) != len(ea) or any(abs(x - y) > tol["extremes"] for x, y in zip(ep, ea)):
            bad.append(f"smallest and largest {ep} vs {ea} (tolerance {tol['extremes']:.3g})")
        if p.get("nan") != a.get("nan") and p.get("nan") != b.get("nan"):
            bad.append(f"{p.get('nan')} NaN, JIT {a.get('nan')}")
        if bad:
            return False, True, "nondeterministic in the JIT runs, and outside the tolerance: " + "; ".join(bad)
        return True, True, f"within tolerance (sum {tol['sum']:.3g})"
    return False, True, "nondeterministic integer output in the JIT runs, and equal to neither here"


def compare_kernel(family: str, kernel: str, pk: list[dict], ja: list[dict], jb: list[dict]) -> KernelResult:
    """A kernel's launches in the packaged run against the two JIT runs; the first differing one named."""
    res = KernelResult(family, kernel, len(pk))
    if not pk:
        res.status = NOT_LAUNCHED
        res.detail = f"launched {len(ja)} time(s) with the JIT, never with the packaged kernels"
        return res
    if not ja:
        res.status, res.detail = FAILED, f"launched {len(pk)} time(s) with the packaged kernels, never with the JIT"
        return res
    if len(pk) != len(ja) and len(pk) != len(jb or ja):
        res.status, res.detail = FAILED, f"launched {len(pk)} time(s) with the packaged kernels, {len(ja)} with the JIT"
        return res
    for i, (p, a) in enumerate(zip(pk, ja)):
        b = jb[i] if i < len(jb) else a
        pb, ab, bb = p.get("buffers") or [], a.get("buffers") or [], b.get("buffers") or []
        if len(pb) != len(ab):
            res.status, res.detail = FAILED, f"launch {i}: {len(pb)} buffers, JIT {len(ab)}"
            return res
        for j, (x, y) in enumerate(zip(pb, ab)):
            z = bb[j] if j < len(bb) else y
            ok, nondet, why = compare_buffer(x, y, z)
            res.nondeterministic += nondet
            if not ok:
                res.status = FAILED
                res.detail = (f"launch {i} (grid {p.get('grid')}, block {p.get('block')}), buffer {j} "
                              f"({x.get('size')} bytes, {x.get('dtype') or 'bytes'}): {why}")
                return res
    return res


def compare_cupy(name: str, pk: list[dict], ja: list[dict], jb: list[dict]) -> KernelResult:
    """A CuPy kernel by image: the cubin served in the packaged run against the one CuPy compiled, byte for byte
    or, built on another host, by its machine code (:func:`aot.verify.gate_hook.code_digest`: the names NVRTC
    derives from CuPy's path-hashed file name differ, the code does not)."""
    label = next((r.get("name") for r in ja + jb + pk if r.get("name")), "") or name
    res = KernelResult("cupy", f"{label} ({name})", len(pk))
    if not pk:
        res.status, res.detail = NOT_LAUNCHED, "compiled with the JIT, never asked for with the packaged kernels"
        return res
    served = [r for r in pk if r.get("how") == "served"]
    res.served = bool(served)
    jit = {r["sha256"] for r in ja + jb}
    code = {r["code"] for r in ja + jb if r.get("code")}  # the machine code alone: names differ across hosts
    if not jit:
        res.status, res.detail = FAILED, "asked for with the packaged kernels, never with the JIT"
        return res
    for r in served or pk:
        if r["sha256"] not in jit and not (r.get("code") and r["code"] in code):
            res.status = FAILED
            res.detail = (f"the image {'aot served' if r.get('how') == 'served' else 'CuPy used'} "
                          f"(sha256 {r['sha256'][:16]}, {r.get('size')} bytes) is not the one CuPy compiles here "
                          f"({sorted(jit)[0][:16]})")
            return res
    if not served:
        res.status, res.detail = NOT_SERVED, "CuPy compiled it in the packaged run"
    return res


def compare(jit_a: Iterable[dict], packaged: Iterable[dict], jit_b: Iterable[dict]) -> list[KernelResult]:
    """Every kernel seen in any run, compared (see the module's docstring), in a stable order."""
    (la, ca), (lp, cp), (lb, cb) = by_kernel(jit_a), by_kernel(packaged), by_kernel(jit_b)
    out = [compare_kernel(f, k, lp.get((f, k), []), la.get((f, k), []), lb.get((f, k), []))
           for f, k in sorted(set(la) | set(lp) | set(lb))]
    out += [compare_cupy(n, cp.get(n, []), ca.get(n, []), cb.get(n, [])) for n in sorted(set(ca) | set(cp) | set(cb))]
    return out


def listing(specs: dict[str, dict], results: list[KernelResult], compiled: Iterable[str] = ()) -> list[SpecRow]:
    """Each package spec's row. ``specs``: name -> ``{"family", "keys": [kernel keys it is launched as]}``
    (numba ``mod:qualname(argtypes)``; NVRTC ``symbol(parameter sizes)``, or a bare symbol, which matches it at
    every size; the CuPy results of its images; CCCL spec names); ``compiled``: the
    kernel keys the packaged run compiled (its no-JIT report)."""
    compiled = set(compiled)
    rows = []
    for name in sorted(specs):
        fam, keys = specs[name]["family"], list(specs[name].get("keys") or ())
        hits = [r for r in results if r.status != NOT_LAUNCHED and (r.kernel in keys or (
            fam == "nvrtc" and r.kernel.split("(", 1)[0] in keys and r.kernel.endswith(")")))]
        row = SpecRow(name, fam, OK, kernels=[h.kernel for h in hits])
        failed = [h for h in hits if h.status == FAILED]
        if failed:
            row.status, row.detail = FAILED, f"{failed[0].kernel}: {failed[0].detail}"
        elif not hits:
            row.status, row.detail = NOT_LAUNCHED, "the command never launched it with the packaged kernels"
        elif any(h.status == NOT_SERVED for h in hits) or any(k in compiled for k in keys):
            row.status, row.detail = NOT_SERVED, "launched, but compiled in the packaged run (aot did not serve it)"
        else:
            n = sum(h.launches for h in hits)
            nd = sum(h.nondeterministic for h in hits)
            row.detail = f"{n} launch(es) equal" + (f" ({nd} nondeterministic buffer(s) within tolerance)"
                                                     if nd else "")
        rows.append(row)
    return rows


def verdict(rows: list[SpecRow], results: list[KernelResult], allow_unlaunched: bool) -> tuple[bool, list[str]]:
    """(passes, lines under the table): failures first, then what was not launched or not served."""
    lines = [f"FAILED {r.spec} ({r.family}): {r.detail}" for r in rows if r.status == FAILED]
    spec_kernels = {k for r in rows for k in r.kernels}
    lines += [f"FAILED {r.kernel} ({r.family}, not a spec of the package): {r.detail}" for r in results
              if r.status == FAILED and r.kernel not in spec_kernels and not rows]
    missing = [r.spec for r in rows if r.status in (NOT_LAUNCHED, NOT_SERVED)]
    if missing:
        shown = ", ".join(missing[:12]) + (", ..." if len(missing) > 12 else "")
        lines.append(f"{len(missing)} not checked (not launched by the command, or not served): {shown}; "
                     + ("allowed (--allow-unlaunched)" if allow_unlaunched else
                        "the gate fails (run a command that launches them, or pass --allow-unlaunched)"))
    passes = not any(r.status == FAILED for r in rows) and (allow_unlaunched or not missing) and \
        not (not rows and any(r.status == FAILED for r in results))
    return passes, lines


def as_json(rows: list[SpecRow], results: list[KernelResult]) -> dict[str, Any]:
    return {"specs": [vars(r) for r in rows], "kernels": [vars(r) for r in results]}
