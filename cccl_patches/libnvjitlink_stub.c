/*
 * Stand-in libnvJitLink.so.12 / libnvJitLink.so.13 for runtime-only installs (no CUDA toolkit).
 *
 * Why it exists: see libnvrtc_stub.c.  libcccl.c.parallel.so imports these versioned symbols; CUDA 12's
 * nvJitLink exports them with a `__..._12_0` suffix (the header maps the plain names onto them), CUDA 13's
 * under the plain names: build with -DAOT_CUDA_MAJOR=12 or 13.
 * Every entry point returns NVJITLINK_ERROR_INTERNAL and counts the call (aot_stub_common.h).
 */
#include <stdint.h>

#include "aot_stub_common.h"

#ifndef AOT_CUDA_MAJOR
#error "define AOT_CUDA_MAJOR (12 or 13)"
#endif
#if AOT_CUDA_MAJOR == 12
#define JL(name) __##name##_12_0
#else
#define JL(name) name
#endif

typedef int nvJitLinkResult;
typedef void *nvJitLinkHandle;
enum { NVJITLINK_ERROR_INTERNAL = 6 };

#define FAIL do { aot_stub_count(); return NVJITLINK_ERROR_INTERNAL; } while (0)

/* Marker so tools can tell this library from a real nvJitLink. */
EXPORT const char aot_nvjitlink_stub[] = "aot stand-in libnvJitLink (no linker installed)";

EXPORT nvJitLinkResult nvJitLinkVersion(unsigned int *major, unsigned int *minor) {
    SET(major, 0);
    SET(minor, 0);
    FAIL;
}
EXPORT nvJitLinkResult JL(nvJitLinkCreate)(nvJitLinkHandle *handle, uint32_t n, const char **options) {
    (void)n; (void)options;
    SET(handle, NULL);
    FAIL;
}
EXPORT nvJitLinkResult JL(nvJitLinkDestroy)(nvJitLinkHandle *handle) { (void)handle; FAIL; }
EXPORT nvJitLinkResult JL(nvJitLinkAddData)(nvJitLinkHandle handle, int type, const void *data, size_t size,
                                            const char *name) {
    (void)handle; (void)type; (void)data; (void)size; (void)name;
    FAIL;
}
EXPORT nvJitLinkResult JL(nvJitLinkComplete)(nvJitLinkHandle handle) { (void)handle; FAIL; }
EXPORT nvJitLinkResult JL(nvJitLinkGetLinkedCubinSize)(nvJitLinkHandle handle, size_t *size) {
    (void)handle; SET(size, 0); FAIL;
}
EXPORT nvJitLinkResult JL(nvJitLinkGetLinkedCubin)(nvJitLinkHandle handle, void *out) { (void)handle; (void)out; FAIL; }
EXPORT nvJitLinkResult JL(nvJitLinkGetLinkedPtxSize)(nvJitLinkHandle handle, size_t *size) {
    (void)handle; SET(size, 0); FAIL;
}
EXPORT nvJitLinkResult JL(nvJitLinkGetLinkedPtx)(nvJitLinkHandle handle, char *out) { (void)handle; (void)out; FAIL; }
EXPORT nvJitLinkResult JL(nvJitLinkGetErrorLogSize)(nvJitLinkHandle handle, size_t *size) {
    (void)handle; SET(size, 0); FAIL;
}
EXPORT nvJitLinkResult JL(nvJitLinkGetErrorLog)(nvJitLinkHandle handle, char *log) { (void)handle; (void)log; FAIL; }
