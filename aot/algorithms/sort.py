"""``radix_sort``, ``merge_sort`` and ``segmented_sort``: keys, optionally with values carried along.

All three build their "pairs" kernels only because of the ProxyArray fix in :mod:`cccl_patches` (a NULL
values placeholder reads as "keys only"); their checks therefore always verify the values too.
"""

from __future__ import annotations

from typing import Any, Mapping

from ._base import REQUIRED, SORT_ORDERS, AlgorithmBase, Build, Check, OpSlot


def _stable_perm(keys, descending: bool):
    import numpy as np
    if descending:  # stable descending (equal keys keep input order): sort the reversed input, reverse back
        return len(keys) - 1 - np.argsort(keys[::-1], kind="stable")[::-1]
    return np.argsort(keys, kind="stable")


def _keys_with_duplicates(c: Check, dt: str):
    keys = c.rand(dt, c.n)
    n = c.n
    keys[: n // 4] = keys[n // 2: n // 2 + n // 4]  # duplicates, to check stability
    return keys


class RadixSort(AlgorithmBase):
    name = "radix_sort"
    factory = "make_radix_sort"
    fields = {"dtype": REQUIRED, "value_dtype": None, "order": "ascending"}
    choices = {"order": SORT_ORDERS}

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt, vd = p["dtype"], p["value_dtype"]
        return dict(d_in_keys=b.array(dt), d_out_keys=b.array(dt), d_in_values=b.array(vd) if vd else None,
                    d_out_values=b.array(vd) if vd else None, order=b.order(p["order"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        import numpy as np
        dt, vd, n = p["dtype"], p["value_dtype"], c.n
        keys = _keys_with_duplicates(c, dt)
        vals = np.arange(n, dtype=vd) if vd else None
        d_okeys = c.out(n, dt)
        d_vals, d_ovals = (c.up(vals), c.out(n, vd)) if vd else (None, None)
        d_keys = c.up(keys)
        c.twice(lambda t: obj(temp_storage=t, d_in_keys=d_keys, d_out_keys=d_okeys, d_in_values=d_vals,
                              d_out_values=d_ovals, num_items=n))
        perm = _stable_perm(keys, p["order"] == "descending")
        c.ref.close(d_okeys.to_host(), keys[perm], "radix_sort keys")
        if d_ovals is not None and vals is not None:
            c.ref.close(d_ovals.to_host(), vals[perm], "radix_sort values")


class MergeSort(AlgorithmBase):
    name = "merge_sort"
    factory = "make_merge_sort"
    fields = {"dtype": REQUIRED, "value_dtype": None, "op": "less"}
    ops = (OpSlot("op", "op", role="comparator"),)

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt, vd = p["dtype"], p["value_dtype"]
        return dict(d_in_keys=b.array(dt), d_in_values=b.array(vd) if vd else None, d_out_keys=b.array(dt),
                    d_out_values=b.array(vd) if vd else None, op=b.op(p["op"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        import numpy as np
        dt, vd, n = p["dtype"], p["value_dtype"], c.n
        keys = _keys_with_duplicates(c, dt)
        vals = np.arange(n, dtype=vd) if vd else None
        d_keys, d_okeys = c.up(keys), c.out(n, dt)
        d_vals, d_ovals = (c.up(vals), c.out(n, vd)) if vd else (None, None)
        c.twice(lambda t: obj(temp_storage=t, d_in_keys=d_keys, d_in_values=d_vals, d_out_keys=d_okeys,
                              d_out_values=d_ovals, num_items=n))
        if p["op"] not in ("less", "greater"):  # a lambda comparator: a checked order, not an exact one
            problem = c.ref.sorted_problem(p["op"], keys, d_okeys.to_host(), vals,
                                       d_ovals.to_host() if d_ovals is not None else None)
            if problem:
                raise c.ref.mismatch("merge_sort", problem)
            return
        perm = _stable_perm(keys, p["op"] == "greater")
        c.ref.close(d_okeys.to_host(), keys[perm], "merge_sort keys")
        if d_ovals is not None and vals is not None:
            c.ref.close(d_ovals.to_host(), vals[perm], "merge_sort values")


class SegmentedSort(AlgorithmBase):
    """Sorts each segment ``[start[i], end[i])`` independently (CUB ``DeviceSegmentedSort``, not stable)."""

    name = "segmented_sort"
    factory = "make_segmented_sort"
    fields = {"dtype": REQUIRED, "value_dtype": None, "offset_dtype": "int64", "order": "ascending"}
    choices = {"order": SORT_ORDERS}

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt, vd, od = p["dtype"], p["value_dtype"], p["offset_dtype"]
        return dict(d_in_keys=b.array(dt), d_out_keys=b.array(dt), d_in_values=b.array(vd) if vd else None,
                    d_out_values=b.array(vd) if vd else None, start_offsets_in=b.array(od),
                    end_offsets_in=b.array(od), order=b.order(p["order"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        import numpy as np
        dt, vd = p["dtype"], p["value_dtype"]
        sizes = c.rng.integers(0, 300, 700)
        sizes[::11] = 0
        sizes[5] = 5000  # one large segment: CUB sorts small, medium and large segments differently
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(p["offset_dtype"])
        n, m = int(offsets[-1]), len(sizes)
        keys = c.rand(dt, n, small=True)  # small range: many equal keys within a segment
        vals = c.rand(vd, n) if vd else None
        d_okeys = c.out(n, dt)
        d_vals, d_ovals = (c.up(vals), c.out(n, vd)) if vd else (None, None)
        d_keys, d_beg, d_end = c.up(keys), c.up(offsets[:-1]), c.up(offsets[1:])
        c.twice(lambda t: obj(temp_storage=t, d_in_keys=d_keys, d_out_keys=d_okeys, d_in_values=d_vals,
                              d_out_values=d_ovals, num_items=n, num_segments=m, start_offsets_in=d_beg,
                              end_offsets_in=d_end))
        seg = np.repeat(np.arange(m), sizes)
        descending = p["order"] == "descending"
        want = keys[np.lexsort((keys, seg))]
        if descending:  # per segment, reversed
            want = np.concatenate([want[offsets[i]:offsets[i + 1]][::-1] for i in range(m)])
        got = d_okeys.to_host()
        c.ref.close(got, want, "segmented_sort keys")
        # not stable: the (segment, key, value) triples must be the input's, in any order of equal keys
        if d_ovals is not None and vals is not None:
            gv = d_ovals.to_host()
            a, b = np.lexsort((vals, keys, seg)), np.lexsort((gv, got, seg))
            if not (np.array_equal(keys[a], got[b]) and np.array_equal(vals[a].view(np.uint8),
                                                                        gv[b].view(np.uint8))):
                raise c.ref.mismatch("segmented_sort values", "output (key, value) pairs are not the input's "
                                     "pairs, segment by segment")


RADIX_SORT = RadixSort()
MERGE_SORT = MergeSort()
SEGMENTED_SORT = SegmentedSort()
