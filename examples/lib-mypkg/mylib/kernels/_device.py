"""Device functions shared by several kernels: concatenated into their sources."""

HAVERSINE_FN = r"""
__device__ __forceinline__ double mylib_haversine(double lon1, double lat1, double lon2, double lat2) {
    const double r = 6371.0088;
    double dlat = (lat2 - lat1) * 0.017453292519943295, dlon = (lon2 - lon1) * 0.017453292519943295;
    double a = sin(dlat / 2) * sin(dlat / 2)
             + cos(lat1 * 0.017453292519943295) * cos(lat2 * 0.017453292519943295) * sin(dlon / 2) * sin(dlon / 2);
    return 2.0 * r * asin(sqrt(a));
}
"""

CROSS_FN = r"""
__device__ __forceinline__ double mylib_cross(double ax, double ay, double bx, double by, double cx, double cy) {
    return (bx - ax) * (cy - ay) - (by - ay) * (cx - ax);
}
"""

POINT_IN_RING_FN = CROSS_FN + r"""
__device__ bool mylib_point_in_ring(double px, double py, const double* xs, const double* ys, int n) {
    bool inside = false;
    for (int i = 0, j = n - 1; i < n; j = i++) {
        if (((ys[i] > py) != (ys[j] > py)) &&
            (px < (xs[j] - xs[i]) * (py - ys[i]) / (ys[j] - ys[i]) + xs[i])) inside = !inside;
    }
    return inside;
}
"""

MORTON_FN = r"""
__device__ __forceinline__ unsigned long long mylib_spread(unsigned int v) {
    unsigned long long x = v;
    x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
    x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;
    x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0Full;
    x = (x | (x << 2)) & 0x3333333333333333ull;
    x = (x | (x << 1)) & 0x5555555555555555ull;
    return x;
}
"""

INDEX = r"""
#define MYLIB_INDEX long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;
"""
