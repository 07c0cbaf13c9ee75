"""``select``: the elements (or, with ``input: counting``, the indices) a unary predicate keeps."""

from __future__ import annotations

from typing import Any, Mapping

from ._base import REQUIRED, AlgorithmBase, Build, Check, OpSlot, decided_input
from .forms import Seq

IN, OUT = Seq("input", "d_in"), Seq("output", "d_out", output=True)


class Select(AlgorithmBase):
    name = "select"
    factory = "make_select"
    fields = {"dtype": REQUIRED, "op": REQUIRED, "count_dtype": "int64"}
    optional = {"input": "array", "output": "array"}
    ops = (OpSlot("op", "cond", role="predicate", arity=1),)
    seqs = (IN, OUT)
    struct_fields = ("dtype",)

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        return dict(d_in=b.seq(p, IN), d_out=b.seq(p, OUT), d_num_selected_out=b.array(p["count_dtype"]),
                    cond=b.op(p["op"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        n = c.n
        src = c.source(p, IN, n, index_like=bool(p.get("state")))
        if not src.ordered:
            raise c.ref.NoReference("select: a shuffled input's order has no numpy reference")
        x = src.values
        if src.plain and not p.get("state"):
            x[c.rng.random(n) < 0.5] = 0
        x = decided_input(c, (p["op"],), x, not src.plain)
        d_x = src.with_values(x)
        keep = c.ref.expect_predicate(p["op"], x).want
        out, d_cnt = c.sink(p, OUT, n), c.out(1, p["count_dtype"])
        c.twice(lambda t: obj(temp_storage=t, d_in=d_x, d_out=out.arg, d_num_selected_out=d_cnt, num_items=n))
        cnt = int(d_cnt.to_host()[0])
        if cnt != int(keep.sum()):
            raise c.ref.mismatch("select count", f"selected {cnt}, want {int(keep.sum())}")
        out.compare(x[keep], "select", count=cnt)


SELECT = Select()
