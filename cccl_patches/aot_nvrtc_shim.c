/*
 * aot's libnvrtc.so.<major> shim for cuda-cccl releases without `serialize` (see aot_shim_common.h).
 * A program is this shim's own object: creation only copies the inputs; nvrtcCompileProgram serializes them
 * (tag, source, name, headers and their include names, name expressions, options) and either takes the
 * packaged answer (LTO-IR, log, one lowered name per name expression) or creates, compiles and reads back a
 * real program.  Exports exactly what libcccl.c.parallel.so imports from NVRTC.
 */
#include "aot_shim_common.h"

typedef int nvrtcResult;
typedef void *nvrtcProgram;
enum { NVRTC_SUCCESS = 0, NVRTC_ERROR_OUT_OF_MEMORY = 1, NVRTC_ERROR_INVALID_INPUT = 3,
       NVRTC_ERROR_INVALID_PROGRAM = 4, NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID = 10,
       NVRTC_ERROR_INTERNAL_ERROR = 11 };

typedef struct {
    char *src, *name;
    int nh; char **headers, **incs;
    int ne; char **exprs; char **lowered;
    int compiled, has_ltoir;
    char *ltoir; size_t ltoir_n;
    char *log; size_t log_n;
} prog_t;

EXPORT const char aot_nvrtc_shim[] = "aot recording/serving libnvrtc shim";

static char *sdup(const char *s) { return s ? dup_bytes(s, strlen(s)) : NULL; }

EXPORT const char *nvrtcGetErrorString(nvrtcResult r) {
    typedef const char *(*fn)(nvrtcResult);
    fn f = REAL(fn, "nvrtcGetErrorString");
    return f ? f(r) : "NVRTC error (aot shim: real NVRTC not loaded)";
}

EXPORT nvrtcResult nvrtcCreateProgram(nvrtcProgram *out, const char *src, const char *name, int nh,
                                      const char *const *headers, const char *const *incs) {
    if (!out || !src || nh < 0) return NVRTC_ERROR_INVALID_INPUT;
    prog_t *p = calloc(1, sizeof *p);
    if (!p) return NVRTC_ERROR_OUT_OF_MEMORY;
    p->src = sdup(src); p->name = sdup(name); p->nh = nh;
    p->headers = calloc((size_t)nh + 1, sizeof(char *)); p->incs = calloc((size_t)nh + 1, sizeof(char *));
    for (int i = 0; i < nh && p->headers && p->incs; i++) {
        p->headers[i] = sdup(headers ? headers[i] : NULL);
        p->incs[i] = sdup(incs ? incs[i] : NULL);
    }
    *out = p;
    return NVRTC_SUCCESS;
}

static void free_prog(prog_t *p) {
    for (int i = 0; i < p->nh; i++) { free(p->headers ? p->headers[i] : NULL); free(p->incs ? p->incs[i] : NULL); }
    for (int i = 0; i < p->ne; i++) { free(p->exprs[i]); if (p->lowered) free(p->lowered[i]); }
    free(p->headers); free(p->incs); free(p->exprs); free(p->lowered);
    free(p->src); free(p->name); free(p->ltoir); free(p->log); free(p);
}

EXPORT nvrtcResult nvrtcDestroyProgram(nvrtcProgram *pp) {
    if (!pp || !*pp) return NVRTC_ERROR_INVALID_PROGRAM;
    free_prog((prog_t *)*pp);
    *pp = NULL;
    return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcAddNameExpression(nvrtcProgram prog, const char *expr) {
    prog_t *p = prog;
    if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!expr || p->compiled) return NVRTC_ERROR_INVALID_INPUT;
    char **e = realloc(p->exprs, sizeof(char *) * ((size_t)p->ne + 1));
    if (!e) return NVRTC_ERROR_OUT_OF_MEMORY;
    p->exprs = e; p->exprs[p->ne++] = sdup(expr);
    return NVRTC_SUCCESS;
}

/* Output layout (served and recorded): result code, has_ltoir, ltoir, log, then one lowered name per expr. */
static int take_answer(prog_t *p, const char *o, size_t n) {
    size_t pos = 0, len; const char *d;
    uint64_t rc, has;
    if (!get_field(o, n, &pos, &d, &len) || len != 8) return 0;
    memcpy(&rc, d, 8);
    if (!get_field(o, n, &pos, &d, &len) || len != 8) return 0;
    memcpy(&has, d, 8);
    if (rc != NVRTC_SUCCESS || has > 1) return 0;
    const char *lt, *lg; size_t ltn, lgn;
    if (!get_field(o, n, &pos, &lt, &ltn) || !get_field(o, n, &pos, &lg, &lgn)) return 0;
    char **low = calloc((size_t)p->ne + 1, sizeof(char *));
    if (!low) return 0;
    for (int i = 0; i < p->ne; i++) {
        if (!get_field(o, n, &pos, &d, &len) || !(low[i] = dup_bytes(d, len))) {
            for (int j = 0; j < i; j++) free(low[j]);
            free(low);
            return 0;
        }
    }
    if (pos != n) { for (int i = 0; i < p->ne; i++) free(low[i]); free(low); return 0; }
    p->lowered = low; p->has_ltoir = (int)has;
    p->ltoir = dup_bytes(lt, ltn); p->ltoir_n = ltn;
    p->log = dup_bytes(lg, lgn); p->log_n = lgn;
    return p->ltoir && p->log;
}

typedef nvrtcResult (*create_fn)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                                 const char *const *);
typedef nvrtcResult (*prog_fn)(nvrtcProgram);
typedef nvrtcResult (*pprog_fn)(nvrtcProgram *);
typedef nvrtcResult (*expr_fn)(nvrtcProgram, const char *);
typedef nvrtcResult (*compile_fn)(nvrtcProgram, int, const char *const *);
typedef nvrtcResult (*size_fn)(nvrtcProgram, size_t *);
typedef nvrtcResult (*get_fn)(nvrtcProgram, char *);
typedef nvrtcResult (*lowered_fn)(nvrtcProgram, const char *, const char **);

/* Miss: the real NVRTC compiles; the outputs are kept (and serialized into `out` for the recorder). */
static nvrtcResult run_real(prog_t *p, int nopt, const char *const *opts, buf_t *out) {
    nvrtcProgram r = NULL;
    nvrtcResult rc;
    create_fn create = REAL(create_fn, "nvrtcCreateProgram");
    pprog_fn destroy = REAL(pprog_fn, "nvrtcDestroyProgram");
    expr_fn add = REAL(expr_fn, "nvrtcAddNameExpression");
    compile_fn comp = REAL(compile_fn, "nvrtcCompileProgram");
    size_fn logsz = REAL(size_fn, "nvrtcGetProgramLogSize"), ltsz = REAL(size_fn, "nvrtcGetLTOIRSize");
    get_fn getlog = REAL(get_fn, "nvrtcGetProgramLog"), getlt = REAL(get_fn, "nvrtcGetLTOIR");
    lowered_fn low = REAL(lowered_fn, "nvrtcGetLoweredName");
    if (!create || !destroy || !add || !comp || !logsz || !ltsz || !getlog || !getlt || !low)
        return NVRTC_ERROR_INTERNAL_ERROR;
    rc = create(&r, p->src, p->name, p->nh, (const char *const *)p->headers, (const char *const *)p->incs);
    if (rc != NVRTC_SUCCESS) return rc;
    for (int i = 0; i < p->ne && rc == NVRTC_SUCCESS; i++) rc = add(r, p->exprs[i]);
    if (rc == NVRTC_SUCCESS) rc = comp(r, nopt, opts);
    size_t n = 0;
    if (logsz(r, &n) == NVRTC_SUCCESS && (p->log = calloc(n + 1, 1)) && getlog(r, p->log) == NVRTC_SUCCESS)
        p->log_n = n ? n - 1 : 0; /* the size counts the terminating NUL */
    if (rc == NVRTC_SUCCESS) {
        if (ltsz(r, &n) == NVRTC_SUCCESS && (p->ltoir = malloc(n ? n : 1)) && getlt(r, p->ltoir) == NVRTC_SUCCESS) {
            p->ltoir_n = n; p->has_ltoir = 1;
        }
        p->lowered = calloc((size_t)p->ne + 1, sizeof(char *));
        for (int i = 0; i < p->ne && p->lowered; i++) {
            const char *s = NULL;
            if (low(r, p->exprs[i], &s) == NVRTC_SUCCESS) p->lowered[i] = sdup(s);
        }
    }
    destroy(&r);
    if (out && rc == NVRTC_SUCCESS && p->lowered) {
        uint64_t code = (uint64_t)rc, has = (uint64_t)p->has_ltoir;
        put_u64(out, code); put_u64(out, has);
        put_bytes(out, p->ltoir, p->has_ltoir ? p->ltoir_n : 0);
        put_bytes(out, p->log ? p->log : "", p->log ? p->log_n : 0);
        for (int i = 0; i < p->ne; i++) {
            if (!p->lowered[i]) { out->bad = 1; break; }
            put_str(out, p->lowered[i]);
        }
    }
    return rc;
}

EXPORT nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int nopt, const char *const *opts) {
    prog_t *p = prog;
    if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
    if (p->compiled || nopt < 0 || (nopt && !opts)) return NVRTC_ERROR_INVALID_INPUT;
    p->compiled = 1;
    buf_t in = {0};
    put_str(&in, "aot-nvrtc-1");
    put_str(&in, p->src); put_str(&in, p->name);
    put_u64(&in, (uint64_t)p->nh);
    for (int i = 0; i < p->nh; i++) { put_str(&in, p->headers[i]); put_str(&in, p->incs[i]); }
    put_u64(&in, (uint64_t)p->ne);
    for (int i = 0; i < p->ne; i++) put_str(&in, p->exprs[i]);
    put_u64(&in, (uint64_t)nopt);
    for (int i = 0; i < nopt; i++) put_str(&in, opts[i]);
    const char *o = NULL; size_t on = 0;
    if (!in.bad && aot_lookup && aot_lookup(in.p, in.n, &o, &on) == 1 && o && take_answer(p, o, on)) {
        __atomic_fetch_add(&aot_hits, 1, __ATOMIC_RELAXED);
        free(in.p);
        return NVRTC_SUCCESS;
    }
    __atomic_fetch_add(&aot_misses, 1, __ATOMIC_RELAXED);
    buf_t out = {0};
    nvrtcResult rc = run_real(p, nopt, opts, aot_record ? &out : NULL);
    if (aot_record && rc == NVRTC_SUCCESS && !in.bad && !out.bad) aot_record(in.p, in.n, out.p, out.n);
    free(in.p); free(out.p);
    return rc;
}

EXPORT nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *n) {
    prog_t *p = prog;
    if (!p || !n) return NVRTC_ERROR_INVALID_INPUT;
    *n = p->log_n + 1;
    return NVRTC_SUCCESS;
}
EXPORT nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log) {
    prog_t *p = prog;
    if (!p || !log) return NVRTC_ERROR_INVALID_INPUT;
    if (p->log_n) memcpy(log, p->log, p->log_n);
    log[p->log_n] = 0;
    return NVRTC_SUCCESS;
}
EXPORT nvrtcResult nvrtcGetLTOIRSize(nvrtcProgram prog, size_t *n) {
    prog_t *p = prog;
    if (!p || !n) return NVRTC_ERROR_INVALID_INPUT;
    if (!p->has_ltoir) return NVRTC_ERROR_INVALID_PROGRAM;
    *n = p->ltoir_n;
    return NVRTC_SUCCESS;
}
EXPORT nvrtcResult nvrtcGetLTOIR(nvrtcProgram prog, char *out) {
    prog_t *p = prog;
    if (!p || !out) return NVRTC_ERROR_INVALID_INPUT;
    if (!p->has_ltoir) return NVRTC_ERROR_INVALID_PROGRAM;
    memcpy(out, p->ltoir, p->ltoir_n);
    return NVRTC_SUCCESS;
}
EXPORT nvrtcResult nvrtcGetLoweredName(nvrtcProgram prog, const char *expr, const char **lowered) {
    prog_t *p = prog;
    if (!p || !expr || !lowered) return NVRTC_ERROR_INVALID_INPUT;
    if (!p->compiled || !p->lowered) return NVRTC_ERROR_INVALID_PROGRAM;
    for (int i = 0; i < p->ne; i++)
        if (strcmp(p->exprs[i], expr) == 0 && p->lowered[i]) { *lowered = p->lowered[i]; return NVRTC_SUCCESS; }
    return NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID;
}
