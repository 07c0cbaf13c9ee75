"""Measures of rings and lines: area, length, centroid per dtype (kernel names carry the C type)."""

from __future__ import annotations

from .._compile import compile_kernels
from ._device import INDEX

_CTYPE = {"float32": "float", "float64": "double"}

PERIMETER = INDEX + r"""
extern "C" __global__ void perimeter(const long long* offsets, const double* x, const double* y, double* out,
                                     long long n) {
    MYLIB_INDEX
    double s = 0;
    for (long long k = offsets[i] + 1; k < offsets[i + 1]; ++k) s += hypot(x[k] - x[k - 1], y[k] - y[k - 1]);
    out[i] = s;
}
"""


def area_source(dtype: str) -> str:
    """Signed shoelace area of each ring; the kernel is ``area_<ctype>``."""
    t = _CTYPE[dtype]
    return INDEX + f"""
extern "C" __global__ void area_{t}(const long long* offsets, const {t}* x, const {t}* y, {t}* out, long long n) {{
    MYLIB_INDEX
    {t} s = 0;
    for (long long k = offsets[i]; k + 1 < offsets[i + 1]; ++k) s += x[k] * y[k + 1] - x[k + 1] * y[k];
    out[i] = s / 2;
}}
"""


def length_source(dtype: str) -> str:
    """Length of each line string; the kernel is ``length_<ctype>``."""
    t = _CTYPE[dtype]
    return INDEX + f"""
extern "C" __global__ void length_{t}(const long long* offsets, const {t}* x, const {t}* y, {t}* out, long long n) {{
    MYLIB_INDEX
    {t} s = 0;
    for (long long k = offsets[i] + 1; k < offsets[i + 1]; ++k) {{
        {t} dx = x[k] - x[k - 1], dy = y[k] - y[k - 1];
        s += sqrt(dx * dx + dy * dy);
    }}
    out[i] = s;
}}
"""


def centroid_source(dtype: str) -> str:
    """Vertex centroid of each ring, in ``dtype``."""
    t = _CTYPE[dtype]
    return INDEX + f"""
extern "C" __global__ void centroid(const long long* offsets, const {t}* x, const {t}* y, {t}* out, long long n) {{
    MYLIB_INDEX
    {t} sx = 0, sy = 0; long long m = offsets[i + 1] - offsets[i];
    for (long long k = offsets[i]; k < offsets[i + 1]; ++k) {{ sx += x[k]; sy += y[k]; }}
    out[2 * i] = sx / m; out[2 * i + 1] = sy / m;
}}
"""


def compile_all(**kw) -> list:
    out = [compile_kernels(PERIMETER, ["perimeter"], **kw)]
    for d in ("float32", "float64"):
        t = _CTYPE[d]
        out += [compile_kernels(area_source(d), [f"area_{t}"], **kw),
                compile_kernels(length_source(d), [f"length_{t}"], **kw),
                compile_kernels(centroid_source(d), ["centroid"], **kw)]
    return out
