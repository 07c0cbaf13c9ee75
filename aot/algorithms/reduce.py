"""``reduce`` (cuda.compute ``reduce_into``) and ``segmented_reduce``: a fold under a binary operator."""

from __future__ import annotations

from typing import Any, Mapping

from ._base import REQUIRED, AlgorithmBase, Build, Check, OpSlot


class Reduce(AlgorithmBase):
    name = "reduce"
    factory = "make_reduce_into"
    fields = {"dtype": REQUIRED, "op": REQUIRED, "init": REQUIRED}
    ops = (OpSlot("op", "op"),)
    struct_fields = ("dtype",)

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt = p["dtype"]
        return dict(d_in=b.array(dt), d_out=b.array(dt), op=b.op(p["op"]), h_init=b.value(dt, p["init"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        import numpy as np
        dt, n = p["dtype"], c.n
        x = c.rand(dt, n, small=True)
        init = c.value(dt, p["init"])
        d_in, d_out = c.up(x), c.out(1, dt)
        c.twice(lambda t: obj(temp_storage=t, d_in=d_in, d_out=d_out, num_items=n, h_init=init))
        want = c.ref.reduce_reference(p["op"], init.dtype, np.concatenate([init, x]))
        c.ref.close(d_out.to_host(), want, "reduce", scale=_scale(x, want))


class SegmentedReduce(AlgorithmBase):
    name = "segmented_reduce"
    factory = "make_segmented_reduce"
    fields = {"dtype": REQUIRED, "op": REQUIRED, "init": REQUIRED, "offset_dtype": "int64"}
    ops = (OpSlot("op", "op"),)
    struct_fields = ("dtype",)

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        dt, od = p["dtype"], p["offset_dtype"]
        return dict(d_in=b.array(dt), d_out=b.array(dt), start_offsets_in=b.array(od), end_offsets_in=b.array(od),
                    op=b.op(p["op"]), h_init=b.value(dt, p["init"]))

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        import numpy as np
        dt = p["dtype"]
        sizes = c.rng.integers(0, 200, 2000)
        sizes[::17] = 0  # empty segments must yield init
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(p["offset_dtype"])
        x = c.rand(dt, int(offsets[-1]), small=True)
        init = c.value(dt, p["init"])
        m = len(sizes)
        d_out = c.out(m, dt)
        d_x, d_beg, d_end = c.up(x), c.up(offsets[:-1]), c.up(offsets[1:])
        c.twice(lambda t: obj(temp_storage=t, d_in=d_x, d_out=d_out, num_segments=m, start_offsets_in=d_beg,
                              end_offsets_in=d_end, h_init=init))
        segs = [x[offsets[i]:offsets[i + 1]] for i in range(m)]
        want = np.concatenate([c.ref.reduce_reference(p["op"], init.dtype, np.concatenate([init, s])) for s in segs])
        scale = None if x.dtype.names else np.concatenate([_scale(s, want[:1]) for s in segs])
        c.ref.close(d_out.to_host(), want, "segmented_reduce", scale=scale)


def _scale(x, want):
    """The magnitude a float sum's rounding error scales with (per struct field for structs)."""
    import numpy as np
    if x.dtype.names:
        return None
    return np.array([np.abs(x).sum() + 1])


REDUCE = Reduce()
SEGMENTED_REDUCE = SegmentedReduce()
