/*
 * aot's libnvrtc.so.<major> shim for cuda-cccl releases without `serialize` (see aot_shim_common.h).
 * Every client of libnvrtc.so.<major> in the process binds to this shim (cuda.bindings, numba, CuPy too), so
 * it is a whole NVRTC: a program wraps a real one created at once; every call is forwarded, except that
 * nvrtcCompileProgram first serializes the inputs (tag, source, name, headers and their include names, name
 * expressions, options) and, on a hit, takes the packaged answer (LTO-IR, log, one lowered name per name
 * expression) without compiling; a later call for anything else (PTX, CUBIN, ...) compiles for real then.
 */
#include "aot_shim_common.h"

typedef int nvrtcResult;
typedef void *nvrtcProgram;
enum { NVRTC_SUCCESS = 0, NVRTC_ERROR_OUT_OF_MEMORY = 1, NVRTC_ERROR_INVALID_INPUT = 3,
       NVRTC_ERROR_INVALID_PROGRAM = 4, NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID = 10,
       NVRTC_ERROR_INTERNAL_ERROR = 11 };

typedef struct {
    nvrtcProgram real;
    int ne; char **exprs; char **lowered;
    int nopt; char **opts;           /* kept for a served program's late real compile */
    int compiled, served, real_compiled;
    nvrtcResult real_rc;
    char *ltoir; size_t ltoir_n; int has_ltoir;
    char *log; size_t log_n;
    buf_t in;                        /* serialized inputs, built up from creation on */
} prog_t;

EXPORT const char aot_nvrtc_shim[] = "aot recording/serving libnvrtc shim";

static char *sdup(const char *s) { return s ? dup_bytes(s, strlen(s)) : NULL; }

typedef nvrtcResult (*create_fn)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                                 const char *const *);
typedef nvrtcResult (*pprog_fn)(nvrtcProgram *);
typedef nvrtcResult (*prog_fn)(nvrtcProgram);
typedef nvrtcResult (*expr_fn)(nvrtcProgram, const char *);
typedef nvrtcResult (*compile_fn)(nvrtcProgram, int, const char *const *);
typedef nvrtcResult (*size_fn)(nvrtcProgram, size_t *);
typedef nvrtcResult (*get_fn)(nvrtcProgram, char *);
typedef nvrtcResult (*lowered_fn)(nvrtcProgram, const char *, const char **);

EXPORT const char *nvrtcGetErrorString(nvrtcResult r) {
    typedef const char *(*fn)(nvrtcResult);
    fn f = REAL(fn, "nvrtcGetErrorString");
    return f ? f(r) : "NVRTC error (aot shim: real NVRTC not loaded)";
}
#define FWD0(name, T, arg) EXPORT nvrtcResult name(T arg) {                        \
        typedef nvrtcResult (*fn)(T); fn f = REAL(fn, #name);                        \
        return f ? f(arg) : NVRTC_ERROR_INTERNAL_ERROR; }
FWD0(nvrtcGetNumSupportedArchs, int *, n)
FWD0(nvrtcGetSupportedArchs, int *, a)
FWD0(nvrtcSetPCHHeapSize, size_t, n)
FWD0(nvrtcGetPCHHeapSize, size_t *, n)
EXPORT nvrtcResult nvrtcVersion(int *major, int *minor) {
    typedef nvrtcResult (*fn)(int *, int *); fn f = REAL(fn, "nvrtcVersion");
    return f ? f(major, minor) : NVRTC_ERROR_INTERNAL_ERROR;
}

EXPORT nvrtcResult nvrtcCreateProgram(nvrtcProgram *out, const char *src, const char *name, int nh,
                                      const char *const *headers, const char *const *incs) {
    create_fn create = REAL(create_fn, "nvrtcCreateProgram");
    if (!create) return NVRTC_ERROR_INTERNAL_ERROR;
    if (!out) return NVRTC_ERROR_INVALID_INPUT;
    prog_t *p = calloc(1, sizeof *p);
    if (!p) return NVRTC_ERROR_OUT_OF_MEMORY;
    nvrtcResult rc = create(&p->real, src, name, nh, headers, incs);
    if (rc != NVRTC_SUCCESS) { free(p); return rc; }
    put_str(&p->in, "aot-nvrtc-1");
    put_str(&p->in, src); put_str(&p->in, name);
    put_u64(&p->in, (uint64_t)(nh > 0 ? nh : 0));
    for (int i = 0; i < nh; i++) {
        put_str(&p->in, headers ? headers[i] : NULL);
        put_str(&p->in, incs ? incs[i] : NULL);
    }
    *out = p;
    return NVRTC_SUCCESS;
}

EXPORT nvrtcResult nvrtcDestroyProgram(nvrtcProgram *pp) {
    if (!pp || !*pp) return NVRTC_ERROR_INVALID_PROGRAM;
    prog_t *p = *pp;
    pprog_fn destroy = REAL(pprog_fn, "nvrtcDestroyProgram");
    nvrtcResult rc = destroy ? destroy(&p->real) : NVRTC_ERROR_INTERNAL_ERROR;
    for (int i = 0; i < p->ne; i++) { free(p->exprs[i]); if (p->lowered) free(p->lowered[i]); }
    for (int i = 0; i < p->nopt; i++) free(p->opts[i]);
    free(p->exprs); free(p->lowered); free(p->opts); free(p->ltoir); free(p->log); free(p->in.p); free(p);
    *pp = NULL;
    return rc;
}

EXPORT nvrtcResult nvrtcAddNameExpression(nvrtcProgram prog, const char *expr) {
    prog_t *p = prog;
    expr_fn add = REAL(expr_fn, "nvrtcAddNameExpression");
    if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
    if (!add) return NVRTC_ERROR_INTERNAL_ERROR;
    nvrtcResult rc = add(p->real, expr);
    if (rc != NVRTC_SUCCESS) return rc;
    char **e = realloc(p->exprs, sizeof(char *) * ((size_t)p->ne + 1));
    if (!e) { p->in.bad = 1; return NVRTC_SUCCESS; }
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
    if (rc != NVRTC_SUCCESS || has != 1) return 0;
    const char *lt, *lg; size_t ltn, lgn;
    if (!get_field(o, n, &pos, &lt, &ltn) || !get_field(o, n, &pos, &lg, &lgn)) return 0;
    char **low = calloc((size_t)p->ne + 1, sizeof(char *));
    if (!low) return 0;
    for (int i = 0; i < p->ne; i++) {
        if (!get_field(o, n, &pos, &d, &len) || !(low[i] = dup_bytes(d, len))) { pos = n + 1; break; }
    }
    if (pos != n || !(p->ltoir = dup_bytes(lt, ltn)) || !(p->log = dup_bytes(lg, lgn))) {
        for (int i = 0; i < p->ne; i++) free(low[i]);
        free(low); free(p->ltoir); p->ltoir = NULL;
        return 0;
    }
    p->lowered = low; p->has_ltoir = 1; p->ltoir_n = ltn; p->log_n = lgn;
    return 1;
}

/* The real compile (a miss, or a served program asked for something the table does not hold). */
static nvrtcResult real_compile(prog_t *p) {
    compile_fn comp = REAL(compile_fn, "nvrtcCompileProgram");
    if (!comp) return NVRTC_ERROR_INTERNAL_ERROR;
    if (!p->real_compiled) {
        p->real_rc = comp(p->real, p->nopt, (const char *const *)p->opts);
        p->real_compiled = 1;
    }
    return p->real_rc;
}

/* After a real compile, for the recorder: the same layout take_answer reads. */
static void read_back(prog_t *p, buf_t *out) {
    size_fn logsz = REAL(size_fn, "nvrtcGetProgramLogSize"), ltsz = REAL(size_fn, "nvrtcGetLTOIRSize");
    get_fn getlog = REAL(get_fn, "nvrtcGetProgramLog"), getlt = REAL(get_fn, "nvrtcGetLTOIR");
    lowered_fn low = REAL(lowered_fn, "nvrtcGetLoweredName");
    size_t n = 0, ln = 0;
    char *lt = NULL, *lg = NULL;
    if (!logsz || !ltsz || !getlog || !getlt || !low || ltsz(p->real, &n) != NVRTC_SUCCESS
        || !(lt = malloc(n ? n : 1)) || getlt(p->real, lt) != NVRTC_SUCCESS
        || logsz(p->real, &ln) != NVRTC_SUCCESS || !(lg = calloc(ln + 1, 1)) || getlog(p->real, lg) != NVRTC_SUCCESS) {
        out->bad = 1;
    } else {
        put_u64(out, NVRTC_SUCCESS); put_u64(out, 1);
        put_bytes(out, lt, n);
        put_bytes(out, lg, ln ? ln - 1 : 0); /* the size counts the terminating NUL */
        for (int i = 0; i < p->ne; i++) {
            const char *s = NULL;
            if (low(p->real, p->exprs[i], &s) != NVRTC_SUCCESS) { out->bad = 1; break; }
            put_str(out, s);
        }
    }
    free(lt); free(lg);
}

EXPORT nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int nopt, const char *const *opts) {
    prog_t *p = prog;
    if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
    if (p->compiled || nopt < 0 || (nopt && !opts)) return NVRTC_ERROR_INVALID_INPUT;
    p->compiled = 1;
    p->opts = calloc((size_t)nopt + 1, sizeof(char *));
    if (!p->opts) return NVRTC_ERROR_OUT_OF_MEMORY;
    p->nopt = nopt;
    for (int i = 0; i < nopt; i++) p->opts[i] = sdup(opts[i]);
    buf_t *in = &p->in;
    put_u64(in, (uint64_t)p->ne);
    for (int i = 0; i < p->ne; i++) put_str(in, p->exprs[i]);
    put_u64(in, (uint64_t)nopt);
    for (int i = 0; i < nopt; i++) put_str(in, opts[i]);
    const char *o = NULL; size_t on = 0;
    if (!in->bad && aot_lookup && aot_lookup(in->p, in->n, &o, &on) == 1 && o && take_answer(p, o, on)) {
        __atomic_fetch_add(&aot_hits, 1, __ATOMIC_RELAXED);
        p->served = 1;
        return NVRTC_SUCCESS;
    }
    __atomic_fetch_add(&aot_misses, 1, __ATOMIC_RELAXED);
    nvrtcResult rc = real_compile(p);
    if (aot_record && rc == NVRTC_SUCCESS && !in->bad) {
        buf_t out = {0};
        read_back(p, &out);
        if (!out.bad) aot_record(in->p, in->n, out.p, out.n);
        free(out.p);
    }
    return rc;
}

/* A served program answers the log, the LTO-IR and the lowered names from the table; anything else, or any
   call on a program that was not served, goes to the real one (compiled for real first where needed). */
static nvrtcProgram real_of(prog_t *p) {
    if (p->served) real_compile(p);
    return p->real;
}

EXPORT nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *n) {
    prog_t *p = prog;
    if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
    if (p->served) { if (!n) return NVRTC_ERROR_INVALID_INPUT; *n = p->log_n + 1; return NVRTC_SUCCESS; }
    size_fn f = REAL(size_fn, "nvrtcGetProgramLogSize");
    return f ? f(p->real, n) : NVRTC_ERROR_INTERNAL_ERROR;
}
EXPORT nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log) {
    prog_t *p = prog;
    if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
    if (p->served) {
        if (!log) return NVRTC_ERROR_INVALID_INPUT;
        if (p->log_n) memcpy(log, p->log, p->log_n);
        log[p->log_n] = 0;
        return NVRTC_SUCCESS;
    }
    get_fn f = REAL(get_fn, "nvrtcGetProgramLog");
    return f ? f(p->real, log) : NVRTC_ERROR_INTERNAL_ERROR;
}
EXPORT nvrtcResult nvrtcGetLTOIRSize(nvrtcProgram prog, size_t *n) {
    prog_t *p = prog;
    if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
    if (p->served) { if (!n) return NVRTC_ERROR_INVALID_INPUT; *n = p->ltoir_n; return NVRTC_SUCCESS; }
    size_fn f = REAL(size_fn, "nvrtcGetLTOIRSize");
    return f ? f(p->real, n) : NVRTC_ERROR_INTERNAL_ERROR;
}
EXPORT nvrtcResult nvrtcGetLTOIR(nvrtcProgram prog, char *out) {
    prog_t *p = prog;
    if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
    if (p->served) { if (!out) return NVRTC_ERROR_INVALID_INPUT; memcpy(out, p->ltoir, p->ltoir_n); return NVRTC_SUCCESS; }
    get_fn f = REAL(get_fn, "nvrtcGetLTOIR");
    return f ? f(p->real, out) : NVRTC_ERROR_INTERNAL_ERROR;
}
EXPORT nvrtcResult nvrtcGetLoweredName(nvrtcProgram prog, const char *expr, const char **lowered) {
    prog_t *p = prog;
    if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
    if (p->served) {
        if (!expr || !lowered) return NVRTC_ERROR_INVALID_INPUT;
        for (int i = 0; i < p->ne; i++)
            if (p->exprs[i] && strcmp(p->exprs[i], expr) == 0) { *lowered = p->lowered[i]; return NVRTC_SUCCESS; }
        return NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID;
    }
    lowered_fn f = REAL(lowered_fn, "nvrtcGetLoweredName");
    return f ? f(p->real, expr, lowered) : NVRTC_ERROR_INTERNAL_ERROR;
}

/* Everything else about a program: forwarded to the real one. */
#define FWD_SIZE(name) EXPORT nvrtcResult name(nvrtcProgram prog, size_t *n) {                   \
        prog_t *p = prog; size_fn f = REAL(size_fn, #name);                                     \
        if (!p) return NVRTC_ERROR_INVALID_PROGRAM;                                             \
        return f ? f(real_of(p), n) : NVRTC_ERROR_INTERNAL_ERROR; }
#define FWD_GET(name) EXPORT nvrtcResult name(nvrtcProgram prog, char *o) {                      \
        prog_t *p = prog; get_fn f = REAL(get_fn, #name);                                       \
        if (!p) return NVRTC_ERROR_INVALID_PROGRAM;                                             \
        return f ? f(real_of(p), o) : NVRTC_ERROR_INTERNAL_ERROR; }
FWD_SIZE(nvrtcGetPTXSize) FWD_GET(nvrtcGetPTX)
FWD_SIZE(nvrtcGetCUBINSize) FWD_GET(nvrtcGetCUBIN)
FWD_SIZE(nvrtcGetOptiXIRSize) FWD_GET(nvrtcGetOptiXIR)
FWD_SIZE(nvrtcGetTileIRSize) FWD_GET(nvrtcGetTileIR)  /* NVRTC 13.5; an older real one answers INTERNAL_ERROR */
FWD_SIZE(nvrtcGetPCHHeapSizeRequired)
EXPORT nvrtcResult nvrtcGetPCHCreateStatus(nvrtcProgram prog) {
    prog_t *p = prog; prog_fn f = REAL(prog_fn, "nvrtcGetPCHCreateStatus");
    if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
    return f ? f(real_of(p)) : NVRTC_ERROR_INTERNAL_ERROR;
}
EXPORT nvrtcResult nvrtcSetFlowCallback(nvrtcProgram prog, int (*cb)(void *, void *), void *payload) {
    typedef nvrtcResult (*fn)(nvrtcProgram, int (*)(void *, void *), void *);
    prog_t *p = prog; fn f = REAL(fn, "nvrtcSetFlowCallback");
    if (!p) return NVRTC_ERROR_INVALID_PROGRAM;
    return f ? f(p->real, cb, payload) : NVRTC_ERROR_INTERNAL_ERROR;
}
