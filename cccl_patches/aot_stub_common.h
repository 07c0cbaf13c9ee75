/*
 * Shared by the toolchain stand-ins (libnvrtc, libnvJitLink, libcudart) that let `import cuda.compute`
 * succeed in a runtime-only install, where only packaged artifacts are loaded and no compiler is needed.
 *
 * Every entry point returns an error code (never crashes, never writes through a NULL pointer) and
 * increments this library's call counter, so a GPU test can prove that loading and running packaged
 * artifacts never reached the stand-in.  The counter is read through `aot_stub_calls()`; each library
 * has its own (look it up through the library's handle, not the global scope).
 */
#ifndef AOT_STUB_COMMON_H
#define AOT_STUB_COMMON_H

#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

static unsigned long aot_stub_counter;

static inline void aot_stub_count(void) { __atomic_fetch_add(&aot_stub_counter, 1, __ATOMIC_RELAXED); }

/* How many times any entry point of this stand-in was called (aot_stub_calls itself not included). */
EXPORT unsigned long aot_stub_calls(void) { return __atomic_load_n(&aot_stub_counter, __ATOMIC_RELAXED); }

#define SET(ptr, value) do { if (ptr) *(ptr) = (value); } while (0)

#endif
