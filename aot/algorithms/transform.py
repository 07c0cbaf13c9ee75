"""``unary_transform`` (``out[i] = op(in[i])``) and ``binary_transform`` (``out[i] = op(a[i], b[i])``)."""

from __future__ import annotations

from typing import Any, Mapping

from ._base import REQUIRED, AlgorithmBase, Build, Check, OpSlot
from .forms import Seq

IN, OUT = Seq("input", "d_in"), Seq("output", "d_out", "out_dtype", output=True)


class UnaryTransform(AlgorithmBase):
    """``out_dtype`` defaults to ``dtype``; ``input: counting`` applies ``op`` to the indices 0, 1, 2, ..."""

    name = "unary_transform"
    factory = "make_unary_transform"
    fields = {"dtype": REQUIRED, "op": REQUIRED, "out_dtype": None, "input": "array"}
    optional = {"output": "array"}
    ops = (OpSlot("op", "op", role="operator", arity=1),)
    seqs = (IN, OUT)
    struct_fields = ("dtype", "out_dtype")

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        return dict(d_in=b.seq(p, IN), d_out=b.seq(p, OUT), op=b.op(p["op"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        """A shuffled input (a permutation of the indices) is compared as a multiset."""
        od, n = p["out_dtype"] or p["dtype"], c.n
        src = c.source(p, IN, n, index_like=bool(p.get("state")))
        out = c.sink(p, OUT, n)
        obj(d_in=src.arg, d_out=out.arg, num_items=n)
        out.compare(c.ref.expect_transform(p["op"], c.np_dtype(od), src.values), "unary_transform",
                    ordered=src.ordered)


class BinaryTransform(AlgorithmBase):
    name = "binary_transform"
    factory = "make_binary_transform"
    fields = {"dtype": REQUIRED, "op": REQUIRED, "dtype2": None, "out_dtype": None}
    ops = (OpSlot("op", "op", role="operator", arity=2),)
    struct_fields = ("dtype", "dtype2", "out_dtype")

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt = p["dtype"]
        return dict(d_in1=b.array(dt), d_in2=b.array(p["dtype2"] or dt), d_out=b.array(p["out_dtype"] or dt),
                    op=b.op(p["op"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        dt, n = p["dtype"], c.n
        d2, od = p["dtype2"] or dt, p["out_dtype"] or dt
        a, b = c.rand(dt, n, small=True), c.rand(d2, n, small=True)
        d_out = c.out(n, od)
        obj(d_in1=c.up(a), d_in2=c.up(b), d_out=d_out, num_items=n)
        c.ref.close_to(d_out.to_host(), c.ref.expect_transform(p["op"], c.np_dtype(od), a, b), "binary_transform")


UNARY_TRANSFORM = UnaryTransform()
BINARY_TRANSFORM = BinaryTransform()
