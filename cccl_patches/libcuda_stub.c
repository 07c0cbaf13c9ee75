/*
 * Stand-in libcuda.so.1 for driverless build hosts.
 *
 * cuda-cccl's extension modules carry a DT_NEEDED on libcuda.so.1, so on a CI host without an NVIDIA
 * driver `import cuda.compute` fails before any ahead-of-time compilation can start.  AoT builds
 * (ProxyArray + compute_capability=[sm]) never need a device: they only need these symbols to exist.
 * Every entry point reports "no device"; cuLibraryLoadData reports CUDA_ERROR_NO_BINARY_FOR_GPU,
 * which cuda-cccl tolerates after an AoT compile.  aot only puts this library on the loader path when
 * no real driver is found: a real driver always wins.
 */
#include <stddef.h>

typedef int CUresult;
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
};

#define EXPORT __attribute__((visibility("default")))
#define NO_DEVICE(name) EXPORT CUresult name() { return CUDA_ERROR_NO_DEVICE; }

/* Marker so tools can tell this library from a real driver. */
EXPORT const char aot_libcuda_stub[] = "aot stand-in libcuda (no device)";

EXPORT CUresult cuInit(unsigned int flags) { (void)flags; return CUDA_ERROR_NO_DEVICE; }
EXPORT CUresult cuDriverGetVersion(int *v) { if (v) *v = 0; return CUDA_ERROR_NO_DEVICE; }
EXPORT CUresult cuDeviceGetCount(int *n) { if (n) *n = 0; return CUDA_ERROR_NO_DEVICE; }
EXPORT CUresult cuLibraryLoadData(void **lib, const void *code, void *jo, void *jov, unsigned int nj,
                                  void *lo, void *lov, unsigned int nl) {
    (void)code; (void)jo; (void)jov; (void)nj; (void)lo; (void)lov; (void)nl;
    if (lib) *lib = NULL;
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
}
EXPORT CUresult cuGetErrorString(CUresult err, const char **s) {
    if (!s) return 1;
    switch (err) {
    case CUDA_SUCCESS: *s = "no error"; break;
    case CUDA_ERROR_NO_DEVICE: *s = "no CUDA-capable device is detected (aot stand-in libcuda)"; break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *s = "no kernel image is available for execution on the device (aot stand-in libcuda)"; break;
    default: *s = "unknown error (aot stand-in libcuda)"; break;
    }
    return CUDA_SUCCESS;
}
EXPORT CUresult cuGetErrorName(CUresult err, const char **s) {
    if (!s) return 1;
    *s = err == CUDA_ERROR_NO_BINARY_FOR_GPU ? "CUDA_ERROR_NO_BINARY_FOR_GPU"
       : err == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxGetCurrent(void **ctx) { if (ctx) *ctx = NULL; return CUDA_ERROR_NO_DEVICE; }
NO_DEVICE(cuCtxGetDevice)
NO_DEVICE(cuCtxPopCurrent_v2)
NO_DEVICE(cuCtxPushCurrent_v2)
NO_DEVICE(cuCtxSetCurrent)
NO_DEVICE(cuDeviceGet)
NO_DEVICE(cuDeviceGetAttribute)
NO_DEVICE(cuDeviceGetName)
NO_DEVICE(cuDevicePrimaryCtxRetain)
NO_DEVICE(cuDevicePrimaryCtxRelease_v2)
NO_DEVICE(cuFuncGetAttribute)
NO_DEVICE(cuFuncSetAttribute)
NO_DEVICE(cuKernelGetFunction)
NO_DEVICE(cuLaunchKernel)
NO_DEVICE(cuLaunchKernelEx)
NO_DEVICE(cuLibraryGetKernel)
NO_DEVICE(cuLibraryUnload)
NO_DEVICE(cuMemcpyAsync)
NO_DEVICE(cuMemsetD8Async)
NO_DEVICE(cuOccupancyMaxActiveBlocksPerMultiprocessor)
NO_DEVICE(cuStreamSynchronize)
