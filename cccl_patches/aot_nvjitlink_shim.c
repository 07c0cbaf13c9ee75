/*
 * aot's libnvJitLink.so.<major> shim for cuda-cccl releases without `serialize` (see aot_shim_common.h).
 * A link handle is this shim's own object: creation and nvJitLinkAddData only copy the inputs;
 * nvJitLinkComplete serializes them (tag, options, then each input's type, name and bytes, in order) and
 * either takes the packaged answer (cubin, PTX, log) or runs the real link and reads the outputs back.
 * Exports exactly what libcccl.c.parallel.so imports from nvJitLink.
 */
#include "aot_shim_common.h"

typedef int nvJitLinkResult;
enum { NVJITLINK_SUCCESS = 0, NVJITLINK_ERROR_INVALID_INPUT = 3, NVJITLINK_ERROR_INTERNAL = 6 };
typedef void *nvJitLinkHandle;

typedef struct { int type; char *name; char *data; size_t n; } input_t;
typedef struct {
    uint32_t nopt; char **opts;
    int nin; input_t *in;
    int done, has_cubin, has_ptx;
    char *cubin; size_t cubin_n;
    char *ptx; size_t ptx_n;
    char *log; size_t log_n;
} link_t;

EXPORT const char aot_nvjitlink_shim[] = "aot recording/serving libnvJitLink shim";

EXPORT nvJitLinkResult nvJitLinkCreate(nvJitLinkHandle *h, uint32_t nopt, const char **opts) {
    if (!h || (nopt && !opts)) return NVJITLINK_ERROR_INVALID_INPUT;
    link_t *l = calloc(1, sizeof *l);
    if (!l || !(l->opts = calloc((size_t)nopt + 1, sizeof(char *)))) { free(l); return NVJITLINK_ERROR_INTERNAL; }
    l->nopt = nopt;
    for (uint32_t i = 0; i < nopt; i++) l->opts[i] = opts[i] ? dup_bytes(opts[i], strlen(opts[i])) : NULL;
    *h = l;
    return NVJITLINK_SUCCESS;
}

EXPORT nvJitLinkResult nvJitLinkAddData(nvJitLinkHandle h, int type, const void *data, size_t n, const char *name) {
    link_t *l = h;
    if (!l || !data || l->done) return NVJITLINK_ERROR_INVALID_INPUT;
    input_t *in = realloc(l->in, sizeof(input_t) * ((size_t)l->nin + 1));
    if (!in) return NVJITLINK_ERROR_INTERNAL;
    l->in = in;
    input_t *e = &l->in[l->nin];
    e->type = type; e->n = n;
    e->name = name ? dup_bytes(name, strlen(name)) : NULL;
    e->data = dup_bytes(data, n);
    if (!e->data) return NVJITLINK_ERROR_INTERNAL;
    l->nin++;
    return NVJITLINK_SUCCESS;
}

EXPORT nvJitLinkResult nvJitLinkDestroy(nvJitLinkHandle *h) {
    if (!h || !*h) return NVJITLINK_ERROR_INVALID_INPUT;
    link_t *l = *h;
    for (uint32_t i = 0; i < l->nopt; i++) free(l->opts[i]);
    for (int i = 0; i < l->nin; i++) { free(l->in[i].name); free(l->in[i].data); }
    free(l->opts); free(l->in); free(l->cubin); free(l->ptx); free(l->log); free(l);
    *h = NULL;
    return NVJITLINK_SUCCESS;
}

/* Output layout: has_cubin, cubin, has_ptx, ptx, log. */
static int take_answer(link_t *l, const char *o, size_t n) {
    size_t pos = 0, len, cn, pn, ln; const char *d, *c, *pt, *lg;
    uint64_t hc, hp;
    if (!get_field(o, n, &pos, &d, &len) || len != 8) return 0;
    memcpy(&hc, d, 8);
    if (!get_field(o, n, &pos, &c, &cn)) return 0;
    if (!get_field(o, n, &pos, &d, &len) || len != 8) return 0;
    memcpy(&hp, d, 8);
    if (!get_field(o, n, &pos, &pt, &pn) || !get_field(o, n, &pos, &lg, &ln) || pos != n) return 0;
    if (hc > 1 || hp > 1 || !hc) return 0;
    l->cubin = dup_bytes(c, cn); l->ptx = dup_bytes(pt, pn); l->log = dup_bytes(lg, ln);
    if (!l->cubin || !l->ptx || !l->log) return 0;
    l->has_cubin = 1; l->cubin_n = cn; l->has_ptx = (int)hp; l->ptx_n = pn; l->log_n = ln;
    return 1;
}

typedef nvJitLinkResult (*create_fn)(nvJitLinkHandle *, uint32_t, const char **);
typedef nvJitLinkResult (*add_fn)(nvJitLinkHandle, int, const void *, size_t, const char *);
typedef nvJitLinkResult (*h_fn)(nvJitLinkHandle);
typedef nvJitLinkResult (*ph_fn)(nvJitLinkHandle *);
typedef nvJitLinkResult (*size_fn)(nvJitLinkHandle, size_t *);
typedef nvJitLinkResult (*get_fn)(nvJitLinkHandle, void *);

static void read_out(nvJitLinkHandle r, const char *sz_name, const char *get_name, char **p, size_t *n, int *has) {
    size_fn sz = REAL(size_fn, sz_name);
    get_fn get = REAL(get_fn, get_name);
    size_t k = 0;
    if (sz && get && sz(r, &k) == NVJITLINK_SUCCESS && (*p = malloc(k + 1)) && get(r, *p) == NVJITLINK_SUCCESS) {
        *n = k; if (has) *has = 1;
    } else if (has) { *has = 0; }
}

static nvJitLinkResult run_real(link_t *l, buf_t *out) {
    create_fn create = REAL(create_fn, "nvJitLinkCreate");
    add_fn add = REAL(add_fn, "nvJitLinkAddData");
    h_fn complete = REAL(h_fn, "nvJitLinkComplete");
    ph_fn destroy = REAL(ph_fn, "nvJitLinkDestroy");
    if (!create || !add || !complete || !destroy) return NVJITLINK_ERROR_INTERNAL;
    nvJitLinkHandle r = NULL;
    nvJitLinkResult rc = create(&r, l->nopt, (const char **)l->opts);
    if (rc != NVJITLINK_SUCCESS) return rc;
    for (int i = 0; i < l->nin && rc == NVJITLINK_SUCCESS; i++)
        rc = add(r, l->in[i].type, l->in[i].data, l->in[i].n, l->in[i].name);
    if (rc == NVJITLINK_SUCCESS) rc = complete(r);
    int has_log = 0;
    read_out(r, "nvJitLinkGetErrorLogSize", "nvJitLinkGetErrorLog", &l->log, &l->log_n, &has_log);
    if (has_log && l->log_n) l->log_n--; /* the size counts the terminating NUL */
    if (rc == NVJITLINK_SUCCESS) {
        read_out(r, "nvJitLinkGetLinkedCubinSize", "nvJitLinkGetLinkedCubin", &l->cubin, &l->cubin_n, &l->has_cubin);
        read_out(r, "nvJitLinkGetLinkedPtxSize", "nvJitLinkGetLinkedPtx", &l->ptx, &l->ptx_n, &l->has_ptx);
    }
    destroy(&r);
    if (out && rc == NVJITLINK_SUCCESS && l->has_cubin) {
        put_u64(out, 1); put_bytes(out, l->cubin, l->cubin_n);
        put_u64(out, (uint64_t)l->has_ptx); put_bytes(out, l->ptx, l->has_ptx ? l->ptx_n : 0);
        put_bytes(out, l->log ? l->log : "", l->log ? l->log_n : 0);
    } else if (out) {
        out->bad = 1;
    }
    return rc;
}

EXPORT nvJitLinkResult nvJitLinkComplete(nvJitLinkHandle h) {
    link_t *l = h;
    if (!l || l->done) return NVJITLINK_ERROR_INVALID_INPUT;
    l->done = 1;
    buf_t in = {0};
    put_str(&in, "aot-nvjitlink-1");
    put_u64(&in, l->nopt);
    for (uint32_t i = 0; i < l->nopt; i++) put_str(&in, l->opts[i]);
    put_u64(&in, (uint64_t)l->nin);
    for (int i = 0; i < l->nin; i++) {
        put_u64(&in, (uint64_t)(int64_t)l->in[i].type);
        put_str(&in, l->in[i].name);
        put_bytes(&in, l->in[i].data, l->in[i].n);
    }
    const char *o = NULL; size_t on = 0;
    if (!in.bad && aot_lookup && aot_lookup(in.p, in.n, &o, &on) == 1 && o && take_answer(l, o, on)) {
        __atomic_fetch_add(&aot_hits, 1, __ATOMIC_RELAXED);
        free(in.p);
        return NVJITLINK_SUCCESS;
    }
    __atomic_fetch_add(&aot_misses, 1, __ATOMIC_RELAXED);
    buf_t out = {0};
    nvJitLinkResult rc = run_real(l, aot_record ? &out : NULL);
    if (aot_record && rc == NVJITLINK_SUCCESS && !in.bad && !out.bad) aot_record(in.p, in.n, out.p, out.n);
    free(in.p); free(out.p);
    return rc;
}

#define GETTER(sz_name, get_name, field, has)                                                   \
    EXPORT nvJitLinkResult sz_name(nvJitLinkHandle h, size_t *n) {                              \
        link_t *l = h;                                                                          \
        if (!l || !n || !(has)) return NVJITLINK_ERROR_INVALID_INPUT;                           \
        *n = l->field##_n;                                                                      \
        return NVJITLINK_SUCCESS;                                                               \
    }                                                                                           \
    EXPORT nvJitLinkResult get_name(nvJitLinkHandle h, void *out) {                             \
        link_t *l = h;                                                                          \
        if (!l || !out || !(has)) return NVJITLINK_ERROR_INVALID_INPUT;                         \
        memcpy(out, l->field, l->field##_n);                                                    \
        return NVJITLINK_SUCCESS;                                                               \
    }
GETTER(nvJitLinkGetLinkedCubinSize, nvJitLinkGetLinkedCubin, cubin, l->has_cubin)
GETTER(nvJitLinkGetLinkedPtxSize, nvJitLinkGetLinkedPtx, ptx, l->has_ptx)

EXPORT nvJitLinkResult nvJitLinkGetErrorLogSize(nvJitLinkHandle h, size_t *n) {
    link_t *l = h;
    if (!l || !n) return NVJITLINK_ERROR_INVALID_INPUT;
    *n = l->log_n + 1;
    return NVJITLINK_SUCCESS;
}
EXPORT nvJitLinkResult nvJitLinkGetErrorLog(nvJitLinkHandle h, char *log) {
    link_t *l = h;
    if (!l || !log) return NVJITLINK_ERROR_INVALID_INPUT;
    if (l->log_n) memcpy(log, l->log, l->log_n);
    log[l->log_n] = 0;
    return NVJITLINK_SUCCESS;
}
