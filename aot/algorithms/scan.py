"""``exclusive_scan`` and ``inclusive_scan``: a prefix scan under a binary operator, with an init value."""

from __future__ import annotations

from typing import Any, Mapping

from ._base import REQUIRED, AlgorithmBase, Build, Check, OpSlot
from .forms import Seq

IN, OUT = Seq("input", "d_in"), Seq("output", "d_out", output=True)


class Scan(AlgorithmBase):
    fields = {"dtype": REQUIRED, "op": REQUIRED, "init": REQUIRED}
    optional = {"input": "array", "output": "array"}
    ops = (OpSlot("op", "op"),)
    seqs = (IN, OUT)
    struct_fields = ("dtype",)

    def __init__(self, name: str, inclusive: bool):
        self.name, self.factory, self.inclusive = name, f"make_{name}", inclusive

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt = p["dtype"]
        return dict(d_in=b.seq(p, IN), d_out=b.seq(p, OUT), op=b.op(p["op"]), init_value=b.value(dt, p["init"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        import numpy as np
        dt, n = p["dtype"], c.n
        src = c.source(p, IN, n)
        if not src.ordered:
            raise c.ref.NoReference(f"{self.name}: a shuffled input's order has no numpy reference")
        x = src.values
        init = c.value(dt, p["init"])
        d_in, out = src.arg, c.sink(p, OUT, n)
        c.twice(lambda t: obj(temp_storage=t, d_in=d_in, d_out=out.arg, init_value=init, num_items=n))
        acc = c.ref.expect_scan(p["op"], init.dtype, np.concatenate([init, x]))  # per prefix, init first
        out.compare(acc.part(slice(1, None) if self.inclusive else slice(0, -1)), self.name)


EXCLUSIVE_SCAN = Scan("exclusive_scan", inclusive=False)
INCLUSIVE_SCAN = Scan("inclusive_scan", inclusive=True)
