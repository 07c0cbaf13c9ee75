/*
 * Stand-in libnvrtc.so.12 / libnvrtc.so.13 for runtime-only installs (no CUDA toolkit).
 *
 * cuda-cccl's C library (libcccl.c.parallel.so) has a DT_NEEDED on libnvrtc.so.<major> and imports the
 * versioned symbols below (nvrtcCompileProgram@libnvrtc.so.13, ...): without a libnvrtc, `import
 * cuda.compute` fails even when only deserializing prebuilt artifacts, which never compile anything.
 * aot preloads this library only when cuda-pathfinder finds no real NVRTC (aot/_lean.py).  The version
 * node (libnvrtc.so.<major>) comes from the linker version script cccl_patches/stub.map.in.
 * Every entry point returns NVRTC_ERROR_INTERNAL_ERROR and counts the call (aot_stub_common.h).
 */
#include "aot_stub_common.h"

typedef int nvrtcResult;
typedef void *nvrtcProgram;
enum { NVRTC_ERROR_INTERNAL_ERROR = 11 };

#define FAIL do { aot_stub_count(); return NVRTC_ERROR_INTERNAL_ERROR; } while (0)

/* Marker so tools can tell this library from a real NVRTC. */
EXPORT const char aot_nvrtc_stub[] = "aot stand-in libnvrtc (no compiler installed)";

EXPORT const char *nvrtcGetErrorString(nvrtcResult result) {
    (void)result;
    aot_stub_count();
    return "NVRTC is not installed: aot stand-in libnvrtc (install the jit extra to compile)";
}
EXPORT nvrtcResult nvrtcVersion(int *major, int *minor) { SET(major, 0); SET(minor, 0); FAIL; }
EXPORT nvrtcResult nvrtcGetNumSupportedArchs(int *n) { SET(n, 0); FAIL; }
EXPORT nvrtcResult nvrtcGetSupportedArchs(int *archs) { (void)archs; FAIL; }
EXPORT nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name, int n,
                                      const char *const *headers, const char *const *include_names) {
    (void)src; (void)name; (void)n; (void)headers; (void)include_names;
    SET(prog, NULL);
    FAIL;
}
EXPORT nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog) { (void)prog; FAIL; }
EXPORT nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int n, const char *const *options) {
    (void)prog; (void)n; (void)options;
    FAIL;
}
EXPORT nvrtcResult nvrtcAddNameExpression(nvrtcProgram prog, const char *expr) { (void)prog; (void)expr; FAIL; }
EXPORT nvrtcResult nvrtcGetLoweredName(nvrtcProgram prog, const char *expr, const char **lowered) {
    (void)prog; (void)expr;
    SET(lowered, NULL);
    FAIL;
}
EXPORT nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *size) { (void)prog; SET(size, 0); FAIL; }
EXPORT nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log) { (void)prog; (void)log; FAIL; }
EXPORT nvrtcResult nvrtcGetLTOIRSize(nvrtcProgram prog, size_t *size) { (void)prog; SET(size, 0); FAIL; }
EXPORT nvrtcResult nvrtcGetLTOIR(nvrtcProgram prog, char *out) { (void)prog; (void)out; FAIL; }
EXPORT nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *size) { (void)prog; SET(size, 0); FAIL; }
EXPORT nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *out) { (void)prog; (void)out; FAIL; }
EXPORT nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *size) { (void)prog; SET(size, 0); FAIL; }
EXPORT nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *out) { (void)prog; (void)out; FAIL; }
