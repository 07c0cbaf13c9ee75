"""``exclusive_scan`` and ``inclusive_scan``: a prefix scan under a binary operator, with an init value."""

from __future__ import annotations

from typing import Any, Mapping

from ._base import REQUIRED, AlgorithmBase, Build, Check, OpSlot


class Scan(AlgorithmBase):
    fields = {"dtype": REQUIRED, "op": REQUIRED, "init": REQUIRED}
    ops = (OpSlot("op", "op"),)
    struct_fields = ("dtype",)

    def __init__(self, name: str, inclusive: bool):
        self.name, self.factory, self.inclusive = name, f"make_{name}", inclusive

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt = p["dtype"]
        return dict(d_in=b.array(dt), d_out=b.array(dt), op=b.op(p["op"]), init_value=b.value(dt, p["init"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        import numpy as np
        dt, n = p["dtype"], c.n
        x = c.rand(dt, n, small=True)
        init = c.value(dt, p["init"])
        d_in, d_out = c.up(x), c.out(n, dt)
        c.twice(lambda t: obj(temp_storage=t, d_in=d_in, d_out=d_out, init_value=init, num_items=n))
        acc = c.ref.expect_scan(p["op"], init.dtype, np.concatenate([init, x]))  # per prefix, init first
        c.ref.close_to(d_out.to_host(), acc.part(slice(1, None) if self.inclusive else slice(0, -1)), self.name)


EXCLUSIVE_SCAN = Scan("exclusive_scan", inclusive=False)
INCLUSIVE_SCAN = Scan("inclusive_scan", inclusive=True)
