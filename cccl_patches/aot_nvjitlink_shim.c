/*
 * aot's libnvJitLink.so.<major> shim for cuda-cccl releases without `serialize` (see aot_shim_common.h).
 * Every client of libnvJitLink.so.<major> in the process binds to it (cuda.bindings, numba too), so it is a
 * whole nvJitLink: a handle wraps a real one created at once, every call is forwarded, and the inputs are
 * serialized as they come (tag, options, then each input's type, name and bytes, in order).  At
 * nvJitLinkComplete a hit takes the packaged answer (cubin, PTX, log) without linking; a later call for
 * anything else (LTO-IR, info log) links for real then.  A handle given a file (nvJitLinkAddFile) is never
 * served: the file's content is not in the inputs.
 */
#include "aot_shim_common.h"

typedef int nvJitLinkResult;
enum { NVJITLINK_SUCCESS = 0, NVJITLINK_ERROR_INVALID_INPUT = 3, NVJITLINK_ERROR_INTERNAL = 6 };
typedef void *nvJitLinkHandle;

typedef struct {
    nvJitLinkHandle real;
    buf_t in; uint64_t nin; size_t nin_at;   /* nin is patched into `in` at nin_at on completion */
    int done, served, real_done;
    nvJitLinkResult real_rc;
    char *cubin; size_t cubin_n;
    char *ptx; size_t ptx_n; int has_ptx;
    char *log; size_t log_n;
} link_t;

EXPORT const char aot_nvjitlink_shim[] = "aot recording/serving libnvJitLink shim";

typedef nvJitLinkResult (*create_fn)(nvJitLinkHandle *, uint32_t, const char **);
typedef nvJitLinkResult (*add_fn)(nvJitLinkHandle, int, const void *, size_t, const char *);
typedef nvJitLinkResult (*file_fn)(nvJitLinkHandle, int, const char *);
typedef nvJitLinkResult (*h_fn)(nvJitLinkHandle);
typedef nvJitLinkResult (*ph_fn)(nvJitLinkHandle *);
typedef nvJitLinkResult (*size_fn)(nvJitLinkHandle, size_t *);
typedef nvJitLinkResult (*get_fn)(nvJitLinkHandle, void *);

EXPORT nvJitLinkResult nvJitLinkVersion(unsigned int *major, unsigned int *minor) {
    typedef nvJitLinkResult (*fn)(unsigned int *, unsigned int *);
    fn f = REAL(fn, "nvJitLinkVersion");
    return f ? f(major, minor) : NVJITLINK_ERROR_INTERNAL;
}

EXPORT nvJitLinkResult nvJitLinkCreate(nvJitLinkHandle *h, uint32_t nopt, const char **opts) {
    create_fn create = REAL(create_fn, "nvJitLinkCreate");
    if (!create) return NVJITLINK_ERROR_INTERNAL;
    if (!h) return NVJITLINK_ERROR_INVALID_INPUT;
    link_t *l = calloc(1, sizeof *l);
    if (!l) return NVJITLINK_ERROR_INTERNAL;
    nvJitLinkResult rc = create(&l->real, nopt, opts);
    if (rc != NVJITLINK_SUCCESS) { free(l); return rc; }
    put_str(&l->in, "aot-nvjitlink-1");
    put_u64(&l->in, nopt);
    for (uint32_t i = 0; i < nopt; i++) put_str(&l->in, opts ? opts[i] : NULL);
    l->nin_at = l->in.n;
    put_u64(&l->in, 0);
    *h = l;
    return NVJITLINK_SUCCESS;
}

EXPORT nvJitLinkResult nvJitLinkAddData(nvJitLinkHandle h, int type, const void *data, size_t n, const char *name) {
    link_t *l = h;
    add_fn add = REAL(add_fn, "nvJitLinkAddData");
    if (!l) return NVJITLINK_ERROR_INVALID_INPUT;
    if (!add) return NVJITLINK_ERROR_INTERNAL;
    nvJitLinkResult rc = add(l->real, type, data, n, name);
    if (rc != NVJITLINK_SUCCESS) return rc;
    put_u64(&l->in, (uint64_t)(int64_t)type);
    put_str(&l->in, name);
    put_bytes(&l->in, data, n);
    l->nin++;
    return NVJITLINK_SUCCESS;
}

EXPORT nvJitLinkResult nvJitLinkAddFile(nvJitLinkHandle h, int type, const char *path) {
    link_t *l = h;
    file_fn add = REAL(file_fn, "nvJitLinkAddFile");
    if (!l) return NVJITLINK_ERROR_INVALID_INPUT;
    if (!add) return NVJITLINK_ERROR_INTERNAL;
    l->in.bad = 1; /* a file's content is not in the inputs: this link always runs for real */
    return add(l->real, type, path);
}

EXPORT nvJitLinkResult nvJitLinkDestroy(nvJitLinkHandle *h) {
    if (!h || !*h) return NVJITLINK_ERROR_INVALID_INPUT;
    link_t *l = *h;
    ph_fn destroy = REAL(ph_fn, "nvJitLinkDestroy");
    nvJitLinkResult rc = destroy ? destroy(&l->real) : NVJITLINK_ERROR_INTERNAL;
    free(l->in.p); free(l->cubin); free(l->ptx); free(l->log); free(l);
    *h = NULL;
    return rc;
}

/* Output layout: has_cubin (1), cubin, has_ptx, ptx, log. */
static int take_answer(link_t *l, const char *o, size_t n) {
    size_t pos = 0, len, cn, pn, ln; const char *d, *c, *pt, *lg;
    uint64_t hc, hp;
    if (!get_field(o, n, &pos, &d, &len) || len != 8) return 0;
    memcpy(&hc, d, 8);
    if (!get_field(o, n, &pos, &c, &cn)) return 0;
    if (!get_field(o, n, &pos, &d, &len) || len != 8) return 0;
    memcpy(&hp, d, 8);
    if (!get_field(o, n, &pos, &pt, &pn) || !get_field(o, n, &pos, &lg, &ln) || pos != n) return 0;
    if (hc != 1 || hp > 1) return 0;
    char *cb = dup_bytes(c, cn), *pb = dup_bytes(pt, pn), *lb = dup_bytes(lg, ln);
    if (!cb || !pb || !lb) { free(cb); free(pb); free(lb); return 0; }
    l->cubin = cb; l->cubin_n = cn; l->ptx = pb; l->ptx_n = pn; l->has_ptx = (int)hp; l->log = lb; l->log_n = ln;
    return 1;
}

static nvJitLinkResult real_complete(link_t *l) {
    h_fn complete = REAL(h_fn, "nvJitLinkComplete");
    if (!complete) return NVJITLINK_ERROR_INTERNAL;
    if (!l->real_done) { l->real_rc = complete(l->real); l->real_done = 1; }
    return l->real_rc;
}

static int read_real(nvJitLinkHandle r, const char *sz_name, const char *get_name, char **p, size_t *n) {
    size_fn sz = REAL(size_fn, sz_name);
    get_fn get = REAL(get_fn, get_name);
    size_t k = 0;
    *p = NULL;
    if (!sz || !get || sz(r, &k) != NVJITLINK_SUCCESS || !(*p = malloc(k + 1)) || get(r, *p) != NVJITLINK_SUCCESS) {
        free(*p); *p = NULL;
        return 0;
    }
    *n = k;
    return 1;
}

/* After a real link, for the recorder: the layout take_answer reads. */
static void read_back(link_t *l, buf_t *out) {
    char *c = NULL, *p = NULL, *g = NULL; size_t cn = 0, pn = 0, gn = 0;
    if (!read_real(l->real, "nvJitLinkGetLinkedCubinSize", "nvJitLinkGetLinkedCubin", &c, &cn)) {
        out->bad = 1;
    } else {
        int hp = read_real(l->real, "nvJitLinkGetLinkedPtxSize", "nvJitLinkGetLinkedPtx", &p, &pn);
        if (!read_real(l->real, "nvJitLinkGetErrorLogSize", "nvJitLinkGetErrorLog", &g, &gn)) gn = 0;
        put_u64(out, 1); put_bytes(out, c, cn);
        put_u64(out, (uint64_t)hp); put_bytes(out, p, hp ? pn : 0);
        put_bytes(out, g, gn ? gn - 1 : 0); /* the size counts the terminating NUL */
    }
    free(c); free(p); free(g);
}

EXPORT nvJitLinkResult nvJitLinkComplete(nvJitLinkHandle h) {
    link_t *l = h;
    if (!l || l->done) return NVJITLINK_ERROR_INVALID_INPUT;
    l->done = 1;
    buf_t *in = &l->in;
    if (!in->bad) memcpy(in->p + l->nin_at + 8, &l->nin, 8);
    const char *o = NULL; size_t on = 0;
    if (!in->bad && aot_lookup && aot_lookup(in->p, in->n, &o, &on) == 1 && o && take_answer(l, o, on)) {
        __atomic_fetch_add(&aot_hits, 1, __ATOMIC_RELAXED);
        l->served = 1;
        return NVJITLINK_SUCCESS;
    }
    __atomic_fetch_add(&aot_misses, 1, __ATOMIC_RELAXED);
    nvJitLinkResult rc = real_complete(l);
    if (aot_record && rc == NVJITLINK_SUCCESS && !in->bad) {
        buf_t out = {0};
        read_back(l, &out);
        if (!out.bad) aot_record(in->p, in->n, out.p, out.n);
        free(out.p);
    }
    return rc;
}

/* A served handle answers cubin, PTX and error log from the table; the rest goes to the real one. */
#define SERVED(sz_name, get_name, field, has)                                                     \
    EXPORT nvJitLinkResult sz_name(nvJitLinkHandle h, size_t *n) {                                \
        link_t *l = h; size_fn f = REAL(size_fn, #sz_name);                                       \
        if (!l) return NVJITLINK_ERROR_INVALID_INPUT;                                             \
        if (l->served && (has)) { if (!n) return NVJITLINK_ERROR_INVALID_INPUT;                   \
                                  *n = l->field##_n + EXTRA; return NVJITLINK_SUCCESS; }          \
        if (l->served) real_complete(l);                                                          \
        return f ? f(l->real, n) : NVJITLINK_ERROR_INTERNAL; }                                    \
    EXPORT nvJitLinkResult get_name(nvJitLinkHandle h, void *out) {                               \
        link_t *l = h; get_fn f = REAL(get_fn, #get_name);                                        \
        if (!l) return NVJITLINK_ERROR_INVALID_INPUT;                                             \
        if (l->served && (has)) { if (!out) return NVJITLINK_ERROR_INVALID_INPUT;                 \
                                  memcpy(out, l->field, l->field##_n);                            \
                                  if (EXTRA) ((char *)out)[l->field##_n] = 0;                     \
                                  return NVJITLINK_SUCCESS; }                                     \
        if (l->served) real_complete(l);                                                          \
        return f ? f(l->real, out) : NVJITLINK_ERROR_INTERNAL; }
#define EXTRA 0
SERVED(nvJitLinkGetLinkedCubinSize, nvJitLinkGetLinkedCubin, cubin, 1)
SERVED(nvJitLinkGetLinkedPtxSize, nvJitLinkGetLinkedPtx, ptx, l->has_ptx)
#undef EXTRA
#define EXTRA 1
SERVED(nvJitLinkGetErrorLogSize, nvJitLinkGetErrorLog, log, 1)
#undef EXTRA
#define EXTRA 0
SERVED(nvJitLinkGetLinkedLTOIRSize, nvJitLinkGetLinkedLTOIR, cubin, 0)
SERVED(nvJitLinkGetInfoLogSize, nvJitLinkGetInfoLog, log, 0)
