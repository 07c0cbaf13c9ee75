"""Distances: great-circle, point to point, per-dtype Euclidean and nearest-neighbour kernels."""

from __future__ import annotations

from .._compile import compile_kernels, launch
from ._device import HAVERSINE_FN, INDEX

_CTYPE = {"float32": "float", "float64": "double"}

HAVERSINE = INDEX + HAVERSINE_FN + r"""
extern "C" __global__ void haversine_distance(const double* lon1, const double* lat1, const double* lon2,
                                              const double* lat2, double* out, long long n) {
    MYLIB_INDEX
    out[i] = mylib_haversine(lon1[i], lat1[i], lon2[i], lat2[i]);
}
"""

POINT_TO_POINT = INDEX + r"""
extern "C" __global__ void point_to_point(const double* ax, const double* ay, const double* bx, const double* by,
                                          double* out, long long n) {
    MYLIB_INDEX
    double dx = ax[i] - bx[i], dy = ay[i] - by[i];
    out[i] = sqrt(dx * dx + dy * dy);
}
"""

HAUSDORFF = r"""
extern "C" __global__ void directed_hausdorff(const double* ax, const double* ay, int na, const double* bx,
                                              const double* by, int nb, double* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= na) return;
    double best = 1e300;
    for (int j = 0; j < nb; ++j) {
        double dx = ax[i] - bx[j], dy = ay[i] - by[j];
        best = fmin(best, dx * dx + dy * dy);
    }
    out[i] = sqrt(best);
}
"""


def euclidean_source(dtype: str) -> str:
    """Euclidean distance of point pairs, in ``dtype``."""
    t = _CTYPE[dtype]
    return INDEX + f"""
extern "C" __global__ void euclidean(const {t}* ax, const {t}* ay, const {t}* bx, const {t}* by, {t}* out,
                                     long long n) {{
    MYLIB_INDEX
    {t} dx = ax[i] - bx[i], dy = ay[i] - by[i];
    out[i] = sqrt(dx * dx + dy * dy);
}}
"""


def nearest_source(dtype: str) -> str:
    """Index of the nearest of ``m`` candidates for each point, in ``dtype``."""
    t = _CTYPE[dtype]
    return INDEX + f"""
extern "C" __global__ void nearest(const {t}* px, const {t}* py, const {t}* cx, const {t}* cy, int m,
                                   int* out, long long n) {{
    MYLIB_INDEX
    {t} best = 0; int arg = -1;
    for (int j = 0; j < m; ++j) {{
        {t} dx = px[i] - cx[j], dy = py[i] - cy[j], d = dx * dx + dy * dy;
        if (arg < 0 || d < best) {{ best = d; arg = j; }}
    }}
    out[i] = arg;
}}
"""


_GATHER_HEAD = 'extern "C" __global__ void gather_columns(const long long* idx, long long n'
_GATHER_TAIL = "}\n"


def gather_columns_kernels(columns: int, **kw):
    """A kernel gathering ``columns`` double columns at once: its text is built here, at run time, from
    the column count (``aot record`` lists it as not named)."""
    params = "".join(f", const double* in{k}, double* out{k}" for k in range(columns))
    body = "".join(f"    out{k}[i] = in{k}[idx[i]];\n" for k in range(columns))
    src = INDEX + _GATHER_HEAD + params + ") {\n    MYLIB_INDEX\n" + body + _GATHER_TAIL
    return compile_kernels(src, ["gather_columns"], **kw)


def compile_all(**kw) -> list:
    out = [compile_kernels(HAVERSINE, ["haversine_distance"], **kw),
           compile_kernels(POINT_TO_POINT, ["point_to_point"], **kw),
           compile_kernels(HAUSDORFF, ["directed_hausdorff"], **kw)]
    for dtype in ("float32", "float64"):
        out.append(compile_kernels(euclidean_source(dtype), ["euclidean"], **kw))
        out.append(compile_kernels(nearest_source(dtype), ["nearest"], **kw))
    return out


def haversine(lon1, lat1, lon2, lat2):
    """Great-circle distances in km of device arrays (CuPy) of float64 degrees."""
    import cupy as cp
    n = int(lon1.size)
    out = cp.empty(n, cp.float64)
    launch(compile_kernels(HAVERSINE, ["haversine_distance"]), "haversine_distance", n, lon1, lat1, lon2, lat2, out, n)
    return out


def euclidean(ax, ay, bx, by):
    """Euclidean distances of point pairs (CuPy arrays of float32 or float64)."""
    import cupy as cp
    n = int(ax.size)
    out = cp.empty(n, ax.dtype)
    launch(compile_kernels(euclidean_source(ax.dtype.name), ["euclidean"]), "euclidean", n, ax, ay, bx, by, out, n)
    return out
