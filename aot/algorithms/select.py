"""``select``: the elements (or, with ``input: counting``, the indices) a unary predicate keeps."""

from __future__ import annotations

from typing import Any, Mapping

from ._base import INPUTS, REQUIRED, AlgorithmBase, Build, Check, OpSlot, decided_input


class Select(AlgorithmBase):
    name = "select"
    factory = "make_select"
    fields = {"dtype": REQUIRED, "op": REQUIRED, "count_dtype": "int64"}
    optional = {"input": "array"}
    ops = (OpSlot("op", "cond", role="predicate", arity=1),)
    choices = {"input": INPUTS}
    struct_fields = ("dtype",)

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt = p["dtype"]
        return dict(d_in=b.input(p, dt), d_out=b.array(dt), d_num_selected_out=b.array(p["count_dtype"]),
                    cond=b.op(p["op"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        import numpy as np
        dt, n = p["dtype"], c.n
        counting = p.get("input", "array") == "counting"
        if counting:
            x = np.arange(n, dtype=dt)
        else:
            x = c.rand(dt, n, small=True)
            x[c.rng.random(n) < 0.5] = 0
        x = decided_input(c, (p["op"],), x, counting)
        d_x = c.counting(dt) if counting else c.up(x)
        keep = c.ref.expect_predicate(p["op"], x).want
        d_out, d_cnt = c.out(n, dt), c.out(1, p["count_dtype"])
        c.twice(lambda t: obj(temp_storage=t, d_in=d_x, d_out=d_out, d_num_selected_out=d_cnt, num_items=n))
        cnt = int(d_cnt.to_host()[0])
        if cnt != int(keep.sum()):
            raise c.ref.mismatch("select count", f"selected {cnt}, want {int(keep.sum())}")
        c.ref.close(d_out.to_host()[:cnt], x[keep], "select")


SELECT = Select()
