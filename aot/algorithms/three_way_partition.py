"""``three_way_partition``: elements where ``first_op`` holds, then (of the rest) where ``second_op`` holds,
then the others, each part in input order; ``d_num_selected_out`` gets the first two parts' sizes."""

from __future__ import annotations

from typing import Any, Mapping

from ._base import REQUIRED, AlgorithmBase, Build, Check, OpSlot, decided_input
from .forms import Seq

IN = Seq("input", "d_in")


class ThreeWayPartition(AlgorithmBase):
    name = "three_way_partition"
    factory = "make_three_way_partition"
    fields = {"dtype": REQUIRED, "first_op": REQUIRED, "second_op": REQUIRED, "count_dtype": "int64"}
    optional = {"input": "array"}
    ops = (OpSlot("first_op", "select_first_part_op", role="first predicate", arity=1),
           OpSlot("second_op", "select_second_part_op", role="second predicate", arity=1))
    seqs = (IN,)
    struct_fields = ("dtype",)

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt = p["dtype"]
        return dict(d_in=b.seq(p, IN), d_first_part_out=b.array(dt), d_second_part_out=b.array(dt),
                    d_unselected_out=b.array(dt), d_num_selected_out=b.array(p["count_dtype"]),
                    select_first_part_op=b.op(p["first_op"]), select_second_part_op=b.op(p["second_op"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        """The first two parts keep input order (CUB documents it); the unselected part is documented both
        as "in reverse order" and, in CUB's own example, as stable: compared as a multiset."""
        import numpy as np
        dt, n = p["dtype"], c.n
        src = c.source(p, IN, n, index_like=bool(p.get("state")))
        if not src.ordered:
            raise c.ref.NoReference("three_way_partition: a shuffled input's order has no numpy reference")
        x = decided_input(c, (p["first_op"], p["second_op"]), src.values, not src.plain)
        d_x = src.with_values(x)
        first = c.ref.expect_predicate(p["first_op"], x).want
        second = c.ref.expect_predicate(p["second_op"], x).want & ~first
        rest = ~(first | second)
        d_1, d_2, d_3, d_cnt = c.out(n, dt), c.out(n, dt), c.out(n, dt), c.out(2, p["count_dtype"])
        c.twice(lambda t: obj(temp_storage=t, d_in=d_x, d_first_part_out=d_1, d_second_part_out=d_2,
                              d_unselected_out=d_3, d_num_selected_out=d_cnt, num_items=n))
        cnt = d_cnt.to_host()
        want_cnt = (int(first.sum()), int(second.sum()))
        if (int(cnt[0]), int(cnt[1])) != want_cnt:
            raise c.ref.mismatch("three_way_partition counts",
                                 f"part sizes {tuple(int(v) for v in cnt)}, want {want_cnt}")
        c.ref.close(d_1.to_host()[:want_cnt[0]], x[first], "three_way_partition first part")
        c.ref.close(d_2.to_host()[:want_cnt[1]], x[second], "three_way_partition second part")
        got3 = d_3.to_host()[:int(rest.sum())]
        c.ref.close(np.sort(got3), np.sort(x[rest]), "three_way_partition unselected part (as a multiset)")


THREE_WAY_PARTITION = ThreeWayPartition()
