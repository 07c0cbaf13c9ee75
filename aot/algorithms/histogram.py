"""``histogram_even``: counts of samples in ``num_levels - 1`` equal-width bins over [lower, upper).

cuda.compute compiles the number of levels in (and picks 32-bit offsets for the representative sample
count aot builds with), so ``num_levels`` is a spec field and the loaded object binds it at call time;
the bounds stay call arguments (``h_lower_level``/``h_upper_level``, arrays of ``dtype``). One call
handles fewer than 2**31 bytes of samples.
"""

from __future__ import annotations

from typing import Any, Mapping

from ._base import REQUIRED, AlgorithmBase, Build, Check


class HistogramEven(AlgorithmBase):
    name = "histogram_even"
    factory = "make_histogram_even"
    fields = {"dtype": REQUIRED, "num_levels": REQUIRED, "counter_dtype": "int32"}
    int_ranges = {"num_levels": (2, 1 << 20)}
    choices = {"counter_dtype": ("int32", "uint32")}  # CUB counts with atomicAdd: no 64-bit signed counters

    def bound_arguments(self, p: Mapping[str, Any]) -> dict[str, Any]:
        import numpy as np
        return {**self.call_defaults, "h_num_output_levels": np.array([p["num_levels"]], dtype=np.int32)}

    def factory_kwargs(self, p: Mapping[str, Any], b: Build) -> dict[str, Any]:
        import numpy as np
        dt = b.np_dtype(p["dtype"])
        return dict(d_samples=b.array(p["dtype"]), d_histogram=b.array(p["counter_dtype"]),
                    h_num_output_levels=np.array([p["num_levels"]], dtype=np.int32),
                    h_lower_level=np.zeros(1, dt), h_upper_level=np.ones(1, dt), num_samples=1)

    def check(self, obj: Any, p: Mapping[str, Any], c: Check) -> None:
        """Samples sit where the bin is unambiguous (floats: bin midpoints of width-1 bins; integers: bins
        of width k from 0), some below and above the range (not counted)."""
        import numpy as np
        dt, n, bins = c.np_dtype(p["dtype"]), c.n, p["num_levels"] - 1
        if dt.kind == "f":
            width = 1
            x = (c.rng.integers(-3, bins + 3, n) + 0.5).astype(dt)
        else:
            width = 2 if 2 * bins + 2 <= np.iinfo(dt).max else 1
            if width * bins > np.iinfo(dt).max:
                raise c.ref.NoReference(f"histogram_even: {bins} bins do not fit {dt}")
            lo = 0 if dt.kind == "u" else -width * 2
            x = c.rng.integers(lo, min(width * bins + 2 * width, int(np.iinfo(dt).max)), n, endpoint=True).astype(dt)
        lower, upper = np.zeros(1, dt), np.array([width * bins], dt)
        d_hist = c.out(bins, p["counter_dtype"])
        d_x = c.up(x)
        c.twice(lambda t: obj(temp_storage=t, d_samples=d_x, d_histogram=d_hist, h_lower_level=lower,
                              h_upper_level=upper, num_samples=n))
        xi = np.floor(x.astype(np.float64) / width).astype(np.int64)
        inside = (x >= 0) & (xi < bins)
        want = np.bincount(xi[inside], minlength=bins).astype(p["counter_dtype"])
        c.ref.close(d_hist.to_host(), want, "histogram_even")


HISTOGRAM_EVEN = HistogramEven()
