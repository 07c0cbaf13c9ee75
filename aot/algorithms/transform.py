"""``unary_transform`` (``out[i] = op(in[i])``) and ``binary_transform`` (``out[i] = op(a[i], b[i])``)."""

from __future__ import annotations

from typing import Any, Mapping

from ._base import INPUTS, REQUIRED, AlgorithmBase, Build, Check, OpSlot


class UnaryTransform(AlgorithmBase):
    """``out_dtype`` defaults to ``dtype``; ``input: counting`` applies ``op`` to the indices 0, 1, 2, ..."""

    name = "unary_transform"
    factory = "make_unary_transform"
    fields = {"dtype": REQUIRED, "op": REQUIRED, "out_dtype": None, "input": "array"}
    ops = (OpSlot("op", "op", role="operator", arity=1),)
    choices = {"input": INPUTS}
    struct_fields = ("dtype", "out_dtype")

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt = p["dtype"]
        return dict(d_in=b.input(p, dt), d_out=b.array(p["out_dtype"] or dt), op=b.op(p["op"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        import numpy as np
        dt, od, n = p["dtype"], p["out_dtype"] or p["dtype"], c.n
        if p["input"] == "counting":
            x, d_x = np.arange(n, dtype=dt), c.counting(dt)
        else:
            x = c.rand(dt, n, small=True)
            d_x = c.up(x)
        d_out = c.out(n, od)
        obj(d_in=d_x, d_out=d_out, num_items=n)
        c.ref.close_to(d_out.to_host(), c.ref.expect_transform(p["op"], c.np_dtype(od), x), "unary_transform")


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
