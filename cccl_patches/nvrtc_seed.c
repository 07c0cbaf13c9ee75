/*
 * Build workers only (aot/build/nvrtc_seed.py): a CCCL blob's bytes must not depend on the worker's PID.
 *
 * NVRTC names the internal-linkage entities of a program _INTERNAL_<crc>_<n>_<name>_<nonce>_<PID>... (and
 * _GLOBAL__N__ the same way): a random nonce and the compiling process's PID, so that programs linked together
 * keep their internal entities apart. aot zeroes both after the build (aot/build/normalize.py), but the PID's
 * digit count stays: a worker with PID 9999 and one with PID 10000 wrote blobs of other sizes (every mangled
 * name one byte longer, the string table and every offset after it moved). Given -frandom-seed=S, NVRTC writes
 * _<crc(S)> in place of _<nonce>_<PID>: no PID at all.
 *
 * Loaded RTLD_GLOBAL in a build worker before cuda.compute's C library, this library's nvrtcCreateProgram and
 * nvrtcCompileProgram are the ones that library binds to (its references are versioned; an object without
 * version information satisfies them). Each program's seed is a hash of its own inputs (source, name, every
 * header and include name), so two different programs still get different names, as NVRTC's nonce gave them;
 * the real NVRTC (found by soname, loaded by then as the C library's dependency) does the work. A program this
 * library did not create (a table full, a lookup that failed) compiles as given: normalize.py still zeroes it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define SLOTS 1024

typedef int nvrtcResult;
typedef void *nvrtcProgram;
typedef nvrtcResult (*create_fn)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                                 const char *const *);
typedef nvrtcResult (*compile_fn)(nvrtcProgram, int, const char *const *);
typedef nvrtcResult (*destroy_fn)(nvrtcProgram *);
enum { NVRTC_ERROR_OUT_OF_MEMORY = 1, NVRTC_ERROR_INTERNAL_ERROR = 11 };

static struct { nvrtcProgram prog; uint64_t seed; } table[SLOTS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long seeded;

EXPORT const char aot_nvrtc_seed[] = "aot build worker: NVRTC programs seeded from their inputs";

/* How many compiles were given a seed (the build checks that its CCCL compiles were). */
EXPORT unsigned long aot_nvrtc_seeded(void) { return __atomic_load_n(&seeded, __ATOMIC_RELAXED); }

static void *real(const char *name) {
    static const char *const sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
    for (size_t i = 0; i < sizeof sonames / sizeof *sonames; i++) {
        void *h = dlopen(sonames[i], RTLD_NOW | RTLD_NOLOAD);
        if (h) {
            void *f = dlsym(h, name);
            dlclose(h);
            if (f) return f;
        }
    }
    return NULL;
}

/* FNV-1a over length-prefixed fields: no two input lists hash the same by moving a boundary. */
static uint64_t mix(uint64_t h, const char *s) {
    uint64_t n = s ? strlen(s) : UINT64_MAX;
    for (int i = 0; i < 8; i++) { h ^= (n >> (8 * i)) & 0xff; h *= 0x100000001b3ULL; }
    for (const char *p = s; p && *p; p++) { h ^= (unsigned char)*p; h *= 0x100000001b3ULL; }
    return h;
}

EXPORT nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name, int n,
                                      const char *const *headers, const char *const *include_names) {
    create_fn create = (create_fn)real("nvrtcCreateProgram");
    if (!create) return NVRTC_ERROR_INTERNAL_ERROR;
    nvrtcResult rc = create(prog, src, name, n, headers, include_names);
    if (rc != 0 || !prog || !*prog) return rc;
    uint64_t h = mix(mix(0xcbf29ce484222325ULL, src), name);
    for (int i = 0; i < n && headers && include_names; i++) h = mix(mix(h, headers[i]), include_names[i]);
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < SLOTS; i++) {
        if (!table[i].prog) { table[i].prog = *prog; table[i].seed = h; break; }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

static int take(nvrtcProgram prog, uint64_t *seed, int remove) {
    int found = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < SLOTS && !found; i++) {
        if (table[i].prog == prog) {
            found = 1;
            *seed = table[i].seed;
            if (remove) table[i].prog = NULL;
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

EXPORT nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int nopt, const char *const *opts) {
    compile_fn compile = (compile_fn)real("nvrtcCompileProgram");
    if (!compile) return NVRTC_ERROR_INTERNAL_ERROR;
    uint64_t seed;
    if (nopt < 0 || (nopt && !opts) || !take(prog, &seed, 0)) return compile(prog, nopt, opts);
    for (int i = 0; i < nopt; i++) {  /* the caller's own seed wins */
        if (opts[i] && strstr(opts[i], "random-seed")) return compile(prog, nopt, opts);
    }
    const char **with = malloc(sizeof *with * ((size_t)nopt + 1));
    if (!with) return NVRTC_ERROR_OUT_OF_MEMORY;
    char opt[64];
    /* 32 bits: NVRTC takes a number up to 0xffffffff as the seed itself, and a larger one as no seed at all */
    snprintf(opt, sizeof opt, "-frandom-seed=0x%08lx", (unsigned long)((seed ^ (seed >> 32)) & 0xffffffffUL));
    for (int i = 0; i < nopt; i++) with[i] = opts[i];
    with[nopt] = opt;
    nvrtcResult rc = compile(prog, nopt + 1, with);
    free(with);
    if (rc == 0) __atomic_fetch_add(&seeded, 1, __ATOMIC_RELAXED);
    return rc;
}

EXPORT nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog) {
    destroy_fn destroy = (destroy_fn)real("nvrtcDestroyProgram");
    if (!destroy) return NVRTC_ERROR_INTERNAL_ERROR;
    uint64_t seed;
    if (prog && *prog) take(*prog, &seed, 1);
    return destroy(prog);
}
