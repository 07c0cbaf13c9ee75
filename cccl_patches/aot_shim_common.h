/*
 * Shared by aot's recording/serving shims of NVRTC and nvJitLink (aot_nvrtc_shim.c, aot_nvjitlink_shim.c),
 * used for cuda-cccl releases without `serialize` (< 1.1.0: docs/build.md "CCCL releases without serialize").
 *
 * Why a shim: those releases compile every algorithm inside their C library (cccl_device_*_build) with NVRTC
 * and link it with nvJitLink; Python never sees the compiler.  The shim has the real library's soname and
 * symbol versions, so once loaded (RTLD_GLOBAL, before cuda.compute) the C library binds to it; every call is
 * forwarded to the real library (dlopen'ed by path), except that a compile/link whose EXACT inputs Python
 * knows is answered with the packaged outputs.  The shim knows nothing about keys: it serializes every input
 * of a compile (length-prefixed fields, see put_*) and asks Python's lookup callback; on a miss it runs the
 * real compiler and hands (inputs, outputs) to the record callback (build time) and keeps the outputs.
 */
#ifndef AOT_SHIM_COMMON_H
#define AOT_SHIM_COMMON_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* lookup: 1 = hit (*out, *out_len point at bytes Python keeps alive), 0 = miss. */
typedef int (*aot_lookup_fn)(const char *in, size_t in_len, const char **out, size_t *out_len);
typedef void (*aot_record_fn)(const char *in, size_t in_len, const char *out, size_t out_len);

static void *aot_real;
static aot_lookup_fn aot_lookup;
static aot_record_fn aot_record;
static unsigned long aot_hits, aot_misses;

/* A growable byte buffer; on allocation failure `bad` is set and the call falls back to the real compiler. */
typedef struct { char *p; size_t n, cap; int bad; } buf_t;

static void put_bytes(buf_t *b, const void *data, size_t len) {
    if (b->bad) return;
    size_t need = b->n + 8 + len;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < need) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->bad = 1; return; }
        b->p = p; b->cap = cap;
    }
    uint64_t l = (uint64_t)len;
    memcpy(b->p + b->n, &l, 8);
    if (len) memcpy(b->p + b->n + 8, data, len);
    b->n = need;
}
static void put_str(buf_t *b, const char *s) { put_bytes(b, s ? s : "", s ? strlen(s) : 0); }
static void put_u64(buf_t *b, uint64_t v) { put_bytes(b, &v, 8); }

/* Reads field `*pos` of a served output; 0 when the answer is malformed (then the call is a miss). */
static int get_field(const char *p, size_t n, size_t *pos, const char **data, size_t *len) {
    uint64_t l;
    if (n - *pos < 8 || *pos > n) return 0;
    memcpy(&l, p + *pos, 8);
    if (l > n - *pos - 8) return 0;
    *data = p + *pos + 8; *len = (size_t)l; *pos += 8 + (size_t)l;
    return 1;
}

static char *dup_bytes(const char *p, size_t n) {
    char *d = malloc(n + 1);
    if (d) { if (n) memcpy(d, p, n); d[n] = 0; }
    return d;
}

/* Python: the real library's path (dlopen'ed RTLD_LOCAL|RTLD_DEEPBIND, so it binds to itself, never to this
   shim) and the callbacks (either may be NULL).  Returns 0, or -1 when the real library does not load. */
EXPORT int aot_shim_init(const char *real_path, aot_lookup_fn lookup, aot_record_fn record) {
    if (!aot_real) {
        aot_real = dlopen(real_path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
        if (!aot_real) return -1;
    }
    aot_lookup = lookup;
    aot_record = record;
    return 0;
}
/* How many compiles/links were answered from the table, and how many ran the real compiler. */
EXPORT unsigned long aot_shim_hits(void) { return aot_hits; }
EXPORT unsigned long aot_shim_misses(void) { return aot_misses; }

#define REAL(type, name) ((type)(aot_real ? dlsym(aot_real, name) : NULL))

#endif
