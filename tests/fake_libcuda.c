/*
 * A fake libcuda.so.1 for tests/test_warm.py: a "device" that loads libraries and kernels, so the
 * warmup's kernel-forcing code runs on a driverless host. cuLibraryLoadData and cuLibraryGetKernel
 * hand out sentinel handles ("LIB"/"KRN" in the top bytes) that the test finds in cuda.compute's build
 * results; cuLibraryGetKernelCount / cuLibraryEnumerateKernels / cuKernelGetFunction reject any other
 * handle (CUDA_ERROR_INVALID_HANDLE) and count their calls (fake_calls). Launches fail: nothing runs.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <time.h>

typedef int CUresult;
#define EXPORT __attribute__((visibility("default")))
#define LIB_TAG 0x4C49420000000000ULL
#define KRN_TAG 0x4B524E0000000000ULL
#define FUN_TAG 0x46554E0000000000ULL
#define TAGGED(h, tag) ((((unsigned long long)(h)) >> 40) == ((tag) >> 40))
#define KERNELS_PER_LIBRARY 2
enum { INVALID_HANDLE = 400, NOT_FOUND = 500, NO_DEVICE = 100 };

static unsigned long long nlib, nkrn;
/* 0 cuLibraryLoadData, 1 cuLibraryGetKernel, 2 cuLibraryGetKernelCount, 3 cuLibraryEnumerateKernels,
   4 cuKernelGetFunction, 5 cuCtxGetDevice */
EXPORT unsigned long fake_calls[8];
/* Nanoseconds cuLibraryLoadData and cuKernelGetFunction spin, as a real driver's take (0: none):
   benchmarks set it to see what handing the GIL over around each call costs beside a busy thread. */
EXPORT unsigned long fake_delay_ns;

static void spin(void) {
    struct timespec t0, t;
    if (!fake_delay_ns) return;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((unsigned long)((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec)) < fake_delay_ns);
}

EXPORT CUresult cuInit(unsigned f) { (void)f; return 0; }
EXPORT CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
EXPORT CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
EXPORT CUresult cuDeviceGet(int *d, int o) { *d = o; return 0; }
EXPORT CUresult cuDeviceGetAttribute(int *v, int a, int d) {
    (void)d; *v = a == 75 ? 9 : a == 76 ? 0 : a == 16 ? 132 : 1024; return 0;  /* sm_90, 132 SMs */
}
EXPORT CUresult cuCtxGetCurrent(void **c) { *c = (void *)0x1000; return 0; }
EXPORT CUresult cuCtxGetDevice(int *d) { fake_calls[5]++; *d = 0; return 0; }
EXPORT CUresult cuCtxSetCurrent(void *c) { (void)c; return 0; }
EXPORT CUresult cuCtxPushCurrent_v2(void *c) { (void)c; return 0; }
EXPORT CUresult cuCtxPopCurrent_v2(void **c) { if (c) *c = (void *)0x1000; return 0; }
EXPORT CUresult cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = (void *)0x1000; return 0; }
EXPORT CUresult cuLibraryLoadData(void **lib, const void *code, void *jo, void *jov, unsigned nj, void *lo,
                                  void *lov, unsigned nl) {
    (void)code; (void)jo; (void)jov; (void)nj; (void)lo; (void)lov; (void)nl;
    fake_calls[0]++;
    spin();
    *lib = (void *)(LIB_TAG | (++nlib << 8));
    return 0;
}
EXPORT CUresult cuLibraryGetKernel(void **k, void *lib, const char *name) {
    (void)name;
    fake_calls[1]++;
    if (!TAGGED(lib, LIB_TAG)) return INVALID_HANDLE;
    *k = (void *)(KRN_TAG | (++nkrn << 8));
    return 0;
}
EXPORT CUresult cuLibraryGetKernelCount(unsigned *n, void *lib) {
    fake_calls[2]++;
    if (!TAGGED(lib, LIB_TAG)) return INVALID_HANDLE;
    *n = KERNELS_PER_LIBRARY;
    return 0;
}
EXPORT CUresult cuLibraryEnumerateKernels(void **ks, unsigned n, void *lib) {
    fake_calls[3]++;
    if (!TAGGED(lib, LIB_TAG)) return INVALID_HANDLE;
    for (unsigned i = 0; i < n; i++) ks[i] = (void *)(KRN_TAG | ((0x10000ULL + i) << 8));
    return 0;
}
EXPORT CUresult cuKernelGetFunction(void **f, void *k) {
    fake_calls[4]++;
    spin();
    if (!TAGGED(k, KRN_TAG)) return INVALID_HANDLE;
    *f = (void *)(FUN_TAG | ((unsigned long long)k & 0xffffffULL));
    return 0;
}
EXPORT CUresult cuLibraryUnload(void *l) { (void)l; return 0; }
EXPORT CUresult cuFuncGetAttribute(int *v, int a, void *f) { (void)a; (void)f; *v = 0; return 0; }
EXPORT CUresult cuFuncSetAttribute(void *f, int a, int v) { (void)f; (void)a; (void)v; return 0; }
EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *f, int b, size_t s) {
    (void)f; (void)b; (void)s; *n = 1; return 0;
}
EXPORT CUresult cuGetErrorString(CUresult e, const char **s) { (void)e; *s = "fake driver error"; return 0; }
EXPORT CUresult cuGetErrorName(CUresult e, const char **s) { (void)e; *s = "FAKE_ERROR"; return 0; }
#define NO(name) EXPORT CUresult name(void) { return NO_DEVICE; }
NO(cuLaunchKernel) NO(cuLaunchKernelEx) NO(cuMemcpyAsync) NO(cuMemsetD8Async) NO(cuStreamSynchronize)
NO(cuDevicePrimaryCtxRelease_v2) NO(cuDeviceGetName)

/* cuda.bindings resolves every entry point through cuGetProcAddress: answer from this library. */
EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *st) {
    (void)ver; (void)flags;
    void *self = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *p = self ? dlsym(self, sym) : NULL;
    if (st) *st = p ? 1 : 0;
    *pfn = p;
    return p ? 0 : NOT_FOUND;
}
EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags) {
    return cuGetProcAddress_v2(sym, pfn, ver, flags, NULL);
}
