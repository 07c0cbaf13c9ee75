"""``reduce`` (cuda.compute ``reduce_into``) and ``segmented_reduce``: a fold under a binary operator."""

from __future__ import annotations

from typing import Any, Mapping

from ._base import REQUIRED, AlgorithmBase, Build, Check, OpSlot
from .forms import Seq

IN, OUT = Seq("input", "d_in"), Seq("output", "d_out", output=True)


class Reduce(AlgorithmBase):
    name = "reduce"
    factory = "make_reduce_into"
    fields = {"dtype": REQUIRED, "op": REQUIRED, "init": REQUIRED}
    optional = {"input": "array", "output": "array", "determinism": "run_to_run"}
    ops = (OpSlot("op", "op"),)
    seqs = (IN, OUT)
    choices = {"determinism": ("run_to_run", "not_guaranteed")}
    refused = {"determinism": {"gpu_to_gpu": "cuda-cccl 1.2.1 does not support gpu-to-gpu determinism "
                                              "(its reduce build fails); use run_to_run or not_guaranteed"}}
    struct_fields = ("dtype",)

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt = p["dtype"]
        kw = dict(d_in=b.seq(p, IN), d_out=b.seq(p, OUT), op=b.op(p["op"]), h_init=b.value(dt, p["init"]))
        if "determinism" in p:
            kw["determinism"] = b.determinism(p["determinism"])
        return kw

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        """Float sums may associate in any order: within H * eps * (sum of magnitudes), per field."""
        import numpy as np
        dt, n = p["dtype"], c.n
        src = c.source(p, IN, n)
        x = _edges(src.values) if src.plain else src.values
        init = c.value(dt, p["init"])
        d_in, out = src.with_values(x), c.sink(p, OUT, 1)
        c.twice(lambda t: obj(temp_storage=t, d_in=d_in, d_out=out.arg, num_items=n, h_init=init))
        out.compare(c.ref.expect_reduce(p["op"], init.dtype, np.concatenate([init, x])), "reduce")


class SegmentedReduce(AlgorithmBase):
    name = "segmented_reduce"
    factory = "make_segmented_reduce"
    fields = {"dtype": REQUIRED, "op": REQUIRED, "init": REQUIRED, "offset_dtype": "int64"}
    optional = {"input": "array", "output": "array"}
    ops = (OpSlot("op", "op"),)
    seqs = (IN, OUT)
    struct_fields = ("dtype",)

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt, od = p["dtype"], p["offset_dtype"]
        return dict(d_in=b.seq(p, IN), d_out=b.seq(p, OUT), start_offsets_in=b.array(od), end_offsets_in=b.array(od),
                    op=b.op(p["op"]), h_init=b.value(dt, p["init"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        import numpy as np
        dt = p["dtype"]
        sizes = c.rng.integers(0, 200, 2000)
        sizes[::17] = 0  # empty segments must yield init
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(p["offset_dtype"])
        src = c.source(p, IN, int(offsets[-1]))
        if not src.ordered:
            raise c.ref.NoReference("segmented_reduce: a shuffled input's order has no numpy reference")
        x = _edges(src.values) if src.plain else src.values
        init = c.value(dt, p["init"])
        m = len(sizes)
        out = c.sink(p, OUT, m)
        d_x, d_beg, d_end = src.with_values(x), c.up(offsets[:-1]), c.up(offsets[1:])
        c.twice(lambda t: obj(temp_storage=t, d_in=d_x, d_out=out.arg, num_segments=m, start_offsets_in=d_beg,
                              end_offsets_in=d_end, h_init=init))
        want = c.ref.expect_segmented_reduce(p["op"], init.dtype, init, x, offsets)
        out.compare(want, "segmented_reduce")


def _edges(x):
    """Float fields: the first and last input get magnitudes well above a sum's reassociation tolerance, so
    a result that misses either (an off-by-one) cannot hide inside it (dyadic: exact in every float type)."""
    if len(x) < 2:
        return x
    for name in x.dtype.names or (None,):
        f = x if name is None else x[name]
        if f.dtype.kind == "f":
            f[0], f[-1] = 0.875, -0.9375
    return x


REDUCE = Reduce()
SEGMENTED_REDUCE = SegmentedReduce()
