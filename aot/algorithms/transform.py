"""``unary_transform`` (``out[i] = op(in[i])``) and ``binary_transform`` (``out[i] = op(a[i], b[i])``)."""

from __future__ import annotations

from typing import Any, Mapping

from ._base import REQUIRED, AlgorithmBase, Build, Check, OpSlot
from .forms import Seq

IN, OUT = Seq("input", "d_in"), Seq("output", "d_out", "out_dtype", output=True)
IN1, IN2 = Seq("input", "d_in1"), Seq("input2", "d_in2", "dtype2")


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
    optional = {"input": "array", "input2": "array", "output": "array"}
    ops = (OpSlot("op", "op", role="operator", arity=2),)
    seqs = (IN1, IN2, OUT)
    struct_fields = ("dtype", "dtype2", "out_dtype")

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        return dict(d_in1=b.seq(p, IN1), d_in2=b.seq(p, IN2), d_out=b.seq(p, OUT), op=b.op(p["op"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        od, n = p["out_dtype"] or p["dtype"], c.n
        index_like = bool(p.get("state"))
        a, b = c.source(p, IN1, n, index_like=index_like), c.source(p, IN2, n, index_like=index_like)
        if not (a.ordered and b.ordered):
            raise c.ref.NoReference("binary_transform: a shuffled input's order has no numpy reference")
        out = c.sink(p, OUT, n)
        obj(d_in1=a.arg, d_in2=b.arg, d_out=out.arg, num_items=n)
        out.compare(c.ref.expect_transform(p["op"], c.np_dtype(od), a.values, b.values), "binary_transform")


UNARY_TRANSFORM = UnaryTransform()
BINARY_TRANSFORM = BinaryTransform()
