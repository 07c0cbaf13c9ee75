"""``unique_by_key``: the first (key, item) of each run of keys an equality operator calls equal."""

from __future__ import annotations

from typing import Any, Mapping

from ._base import REQUIRED, AlgorithmBase, Build, Check, OpSlot


class UniqueByKey(AlgorithmBase):
    name = "unique_by_key"
    factory = "make_unique_by_key"
    fields = {"dtype": REQUIRED, "value_dtype": REQUIRED, "op": "equal_to", "count_dtype": "int64"}
    ops = (OpSlot("op", "op", role="equality"),)
    struct_fields = ("value_dtype",)

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt, vd = p["dtype"], p["value_dtype"]
        return dict(d_in_keys=b.array(dt), d_in_items=b.array(vd), d_out_keys=b.array(dt), d_out_items=b.array(vd),
                    d_out_num_selected=b.array(p["count_dtype"]), op=b.op(p["op"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        import numpy as np
        dt, vd, n = p["dtype"], p["value_dtype"], c.n
        keys = np.sort(c.rand(dt, n, small=True))
        vals = c.rand(vd, n)
        first = c.ref.unique_first(p["op"], keys)
        d_ok, d_ov, d_cnt = c.out(n, dt), c.out(n, vd), c.out(1, p["count_dtype"])
        d_k, d_v = c.up(keys), c.up(vals)
        c.twice(lambda t: obj(temp_storage=t, d_in_keys=d_k, d_in_items=d_v, d_out_keys=d_ok, d_out_items=d_ov,
                              d_out_num_selected=d_cnt, num_items=n))
        cnt = int(d_cnt.to_host()[0])
        if cnt != int(first.sum()):
            raise c.ref.mismatch("unique_by_key count", f"{cnt} unique, want {int(first.sum())}")
        c.ref.close(d_ok.to_host()[:cnt], keys[first], "unique_by_key keys")
        c.ref.close(d_ov.to_host()[:cnt], vals[first], "unique_by_key items")


UNIQUE_BY_KEY = UniqueByKey()
