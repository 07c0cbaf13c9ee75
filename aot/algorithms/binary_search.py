"""``lower_bound`` and ``upper_bound``: where each value would go in sorted data."""

from __future__ import annotations

from typing import Any, Literal, Mapping

from ._base import REQUIRED, AlgorithmBase, Build, Check
from .forms import Seq

VALUES = Seq("values", "d_values")


class BinarySearch(AlgorithmBase):
    fields = {"dtype": REQUIRED, "index_dtype": "uint64"}
    optional = {"values": "array"}
    seqs = (VALUES,)
    call_defaults = {"comp": None}  # the default (less) comparator, compiled in
    choices = {"index_dtype": ("uint64",)}  # cuda.compute 1.2.1 takes pointer-sized (np.uintp) indices only

    def __init__(self, name: str, side: Literal["left", "right"]):
        self.name, self.factory = name, f"make_{name}"
        self.side: Literal["left", "right"] = side

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt = p["dtype"]
        return dict(d_data=b.array(dt), d_values=b.seq(p, VALUES), d_out=b.array(p["index_dtype"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        import numpy as np
        dt, n = p["dtype"], c.n
        data = np.sort(c.rand(dt, n, small=True))
        m = n // 2 + len(data[::3])
        src = c.source(p, VALUES, m)
        values = np.concatenate([src.values[:n // 2], data[::3]]) if src.plain else src.values
        if not src.ordered:
            raise c.ref.NoReference(f"{self.name}: a shuffled input's order has no numpy reference")
        d_res = c.out(len(values), p["index_dtype"])
        obj(d_data=c.up(data), num_items=n, d_values=src.with_values(values), num_values=len(values), d_out=d_res)
        want = np.searchsorted(data, values, side=self.side)
        c.ref.close(d_res.to_host(), want.astype(p["index_dtype"]), self.name)


LOWER_BOUND = BinarySearch("lower_bound", "left")
UPPER_BOUND = BinarySearch("upper_bound", "right")
