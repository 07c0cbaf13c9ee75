/*
 * Stand-in libcudart.so.12 / libcudart.so.13 for runtime-only installs (no CUDA toolkit).
 *
 * cuda.compute preloads libcudart through cuda-pathfinder before importing its bindings (its v2 backend
 * links it); the v1 backend aot uses imports no cudart symbol, and cuda.bindings' runtime module does
 * not call into libcudart.  So this library only has to exist: a few entry points, each returning
 * cudaErrorStubLibrary and counting the call (aot_stub_common.h).
 */
#include "aot_stub_common.h"

typedef int cudaError_t;
enum { cudaErrorStubLibrary = 34 };

#define FAIL do { aot_stub_count(); return cudaErrorStubLibrary; } while (0)

/* Marker so tools can tell this library from a real CUDA runtime. */
EXPORT const char aot_cudart_stub[] = "aot stand-in libcudart (no CUDA runtime installed)";

EXPORT cudaError_t cudaRuntimeGetVersion(int *v) { SET(v, 0); FAIL; }
EXPORT cudaError_t cudaDriverGetVersion(int *v) { SET(v, 0); FAIL; }
EXPORT cudaError_t cudaGetDeviceCount(int *n) { SET(n, 0); FAIL; }
EXPORT cudaError_t cudaGetLastError(void) { FAIL; }
EXPORT const char *cudaGetErrorString(cudaError_t e) {
    (void)e;
    aot_stub_count();
    return "CUDA runtime is not installed: aot stand-in libcudart";
}
EXPORT const char *cudaGetErrorName(cudaError_t e) {
    (void)e;
    aot_stub_count();
    return "cudaErrorStubLibrary";
}
