/* at_engine.c — candidates timed and checked inside the engine's step (at_engine.h).
 *
 * Invariants: at most one candidate binary is loaded at a time, routed for the buckets it serves and
 * nothing else (prepare pops the previous one first), so every other kernel of a probe step runs the
 * package's binaries and the references stay valid; the compiled binaries of a kernel's valid
 * candidates are kept until the next kernel starts, for keep() to store the winners' without compiling
 * again.
 */
#define _POSIX_C_SOURCE 200809L
#include "at_engine.h"
#include "at_ahead.h"

#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_engine.h"
#include "rt_file.h"

/* One probe step: T tokens, its logit rows, the package defaults' outputs, each kernel's bucket. */
typedef struct Step {
    int n, rows;
    float *logits; /* rows x vocab */
    int32_t *next; /* rows */
    int *bucket;   /* per plan kernel */
} Step;

/* What the tuner knows about a kernel it tunes, beside its AtKernel. */
typedef struct Tuned {
    int ki;                        /* plan kernel index */
    int bidx[RT_PLAN_MAX_BUCKETS]; /* per AtKernel bucket: the plan bucket index */
    int step[RT_PLAN_MAX_BUCKETS]; /* per AtKernel bucket: the probe step that meets it */
    char text[RT_PLAN_MAX_BUCKETS][16];
    const char *texts[RT_PLAN_MAX_BUCKETS];
    KirConfig first[RT_PLAN_MAX_BINS]; /* the package's binaries' configs: tried first */
    int base[RT_PLAN_MAX_BUCKETS];     /* per AtKernel bucket: the one the runtime runs there */
} Tuned;

/* A valid candidate's binary, kept for keep(). */
typedef struct Kept {
    char *key; /* kir_config_print of the search's config: the text its results carry */
    AtCompiled c;
} Kept;

struct AtEngine {
    AtEngineOptions o;
    KilnEngine *e;
    RtPlan *p;
    const CgTarget *target;
    RtTdbDevice dev;
    int vocab;
    int32_t *tokens; /* max_step_tokens random ids */
    Step *steps;
    int n_steps;
    IrArena *arena; /* specs */
    AtKernel *kernels;
    Tuned *tuned;
    int n_kernels;
    int loaded_ki; /* plan kernel of the loaded candidate, or -1 */
    int kept_for;  /* AtKernel index whose candidates are in kept, or -1 */
    Kept *kept;
    int n_kept, cap_kept;
    float *logits; /* scratch: rows x vocab */
    int32_t *next;
    double *us;
    int *launches;
    double *step_us; /* while creating: n_steps x plan kernels, each kernel's microseconds per probe step */
    AtAhead *ahead; /* compiles candidates on CPU threads while the device times (NULL: inline) */
};

static void tlog(const AtEngine *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void tlog(const AtEngine *t, const char *fmt, ...)
{
    if (!t->o.log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    t->o.log(t->o.log_user, line);
}

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void steps_free(AtEngine *t)
{
    for (int i = 0; t->steps && i < t->n_steps; i++)
        free(t->steps[i].logits), free(t->steps[i].next), free(t->steps[i].bucket);
    free(t->steps);
    t->steps = NULL, t->n_steps = 0;
}

static void kept_clear(AtEngine *t)
{
    for (int i = 0; i < t->n_kept; i++) {
        free(t->kept[i].key);
        at_compiled_free(&t->kept[i].c);
    }
    t->n_kept = 0;
}

/* Opens the engine and runs the probe steps (the references). */
static KilnStatus engine_setup(AtEngine *t, char *err, int errlen)
{
    KilnEngineOptions eo;
    kiln_engine_options_init(&eo);
    eo.device = t->o.device;
    eo.max_step_tokens = t->o.max_step_tokens;
    eo.host_threads = t->o.host_threads;
    eo.no_cuda_graphs = 1;
    eo.no_prefix_sharing = 1;
    KilnStatus s = rt_engine_open(t->o.package, t->o.weights, t->o.seed, &eo, &t->e, err, errlen);
    if (s) return s;
    t->p = rt_engine_plan(t->e);
    t->loaded_ki = -1;
    rt_engine_buckets_init(t->e);
    KilnEngineStats st;
    kiln_engine_stats(t->e, &st, sizeof st);
    t->vocab = kiln_engine_vocab(t->e);
    int max_t = rt_engine_probe_max(t->e), max_rows = st.max_seqs, nk = t->p->n_kernels;
    free(t->tokens), free(t->logits), free(t->next), free(t->us), free(t->launches);
    t->tokens = malloc((size_t)max_t * sizeof *t->tokens);
    t->logits = malloc((size_t)max_rows * (size_t)t->vocab * sizeof *t->logits);
    t->next = malloc((size_t)max_rows * sizeof *t->next);
    t->us = calloc((size_t)nk, sizeof *t->us);
    t->launches = calloc((size_t)nk, sizeof *t->launches);
    t->steps = calloc(RT_PLAN_MAX_BUCKETS, sizeof *t->steps);
    if (!t->tokens || !t->logits || !t->next || !t->us || !t->launches || !t->steps)
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    uint64_t seed = t->o.seed ^ 0x746f6b656e73ull;
    for (int i = 0; i < max_t; i++)
        t->tokens[i] = (int32_t)(mix(&seed) % (uint64_t)t->vocab);
    for (int n = 1; t->n_steps < RT_PLAN_MAX_BUCKETS; n *= 2) {
        Step *sp = &t->steps[t->n_steps++];
        sp->n = n < max_t ? n : max_t;
        sp->rows = sp->n < max_rows ? sp->n : max_rows;
        sp->logits = malloc((size_t)sp->rows * (size_t)t->vocab * sizeof *sp->logits);
        sp->next = malloc((size_t)sp->rows * sizeof *sp->next);
        sp->bucket = malloc((size_t)nk * sizeof *sp->bucket);
        if (!sp->logits || !sp->next || !sp->bucket)
            return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
        RtEngineProbe pr = {.logits = sp->logits, .next = sp->next, .kernel_bucket = sp->bucket};
        if ((s = rt_engine_probe(t->e, t->tokens, sp->n, sp->rows, &pr)))
            return rt_file_errf(err, errlen, s, "%s: a step of %d tokens with the package's kernels: %s",
                                t->o.package, sp->n, kiln_engine_errmsg(t->e));
        if (sp->n >= max_t) break;
    }
    return KILN_OK;
}

static void engine_teardown(AtEngine *t)
{
    kiln_engine_close(t->e);
    t->e = NULL, t->p = NULL, t->loaded_ki = -1;
    steps_free(t);
}

/* Each kernel's time in each probe step with the package's binaries (t->step_us; left NULL when a
 * timed step fails or memory runs out: then the budget is split evenly). */
static void step_times(AtEngine *t)
{
    size_t nk = (size_t)t->p->n_kernels;
    double *st = calloc((size_t)t->n_steps * nk + 1, sizeof *st);
    for (int si = 0; st && si < t->n_steps; si++) {
        const Step *sp = &t->steps[si];
        RtEngineProbe pr = {.kernel_us = t->us, .kernel_launches = t->launches};
        if (rt_engine_probe(t->e, t->tokens, sp->n, sp->rows, &pr)) {
            free(st);
            return;
        }
        for (size_t k = 0; k < nk; k++)
            st[(size_t)si * nk + k] = t->us[k];
    }
    t->step_us = st;
}

/* Adds plan kernel ki to the kernels to tune, when it can be. */
static KilnStatus add_kernel(AtEngine *t, int ki, char *err, int errlen)
{
    const RtPlanKernel *pk = &t->p->kernels[ki];
    if (!pk->n_pkg || (t->o.kernels && fnmatch(t->o.kernels, pk->name, 0))) return KILN_OK;
    const KfamFamily *f = kfam_find(pk->family);
    KfamSpec spec;
    char why[512], hash[17];
    if (!f) {
        tlog(t, "%s: skipped: no kernel family '%s' in this kiln", pk->name, pk->family);
        return KILN_OK;
    }
    KilnStatus s = at_spec_parse(t->arena, pk->spec, &spec, why, sizeof why);
    if (s == KILN_ERR_NOMEM) return rt_file_errf(err, errlen, s, "out of memory");
    if (!s) s = at_ir_hash(f, &spec, hash, why, sizeof why);
    if (s == KILN_ERR_NOMEM) return rt_file_errf(err, errlen, s, "out of memory");
    if (s) {
        tlog(t, "%s: skipped: %s", pk->name, why);
        return KILN_OK;
    }
    if (strcmp(hash, pk->ir_hash)) {
        tlog(t,
             "%s: skipped: its IR hashes to %s here, %s in the package (another kiln compiled it: "
             "recompile the package)",
             pk->name, hash, pk->ir_hash);
        return KILN_OK;
    }
    AtKernel *k = &t->kernels[t->n_kernels];
    Tuned *u = &t->tuned[t->n_kernels];
    memset(u, 0, sizeof *u);
    u->ki = ki;
    int nb = 0;
    for (int b = 0; b < pk->n_buckets; b++) /* buckets in order; the first step that meets each */
        for (int si = 0; si < t->n_steps; si++)
            if (t->steps[si].bucket[ki] == b) {
                u->bidx[nb] = b, u->step[nb] = si;
                if (pk->m_param >= 0) snprintf(u->text[nb], sizeof u->text[nb], "T=%lld", 1LL << b);
                u->texts[nb] = u->text[nb];
                nb++;
                break;
            }
    if (!nb) {
        tlog(t, "%s: skipped: no step launches it in one bucket", pk->name);
        return KILN_OK;
    }
    /* the package's binaries come first, and each bucket's baseline is the one an untuned engine runs
     * there: with a budget that stops early, the winner is still never slower than that */
    int n_first = 0, at[RT_PLAN_MAX_BINS];
    for (int i = 0; i < pk->n_pkg && i < RT_PLAN_MAX_BINS; i++) {
        at[i] = -1;
        s = at_config_parse(t->arena, pk->bins[i].config, &u->first[n_first], why, sizeof why);
        if (s == KILN_ERR_NOMEM) return rt_file_errf(err, errlen, s, "out of memory");
        if (s)
            tlog(t, "%s: its binary's %s", pk->name, why);
        else
            at[i] = n_first++;
    }
    for (int b = 0; b < nb; b++) {
        int pick = pk->m_param >= 0 ? rt_plan_pick_rows(pk, (int64_t)1 << u->bidx[b]) : 0;
        u->base[b] = pick < pk->n_pkg && pick < RT_PLAN_MAX_BINS ? at[pick] : -1;
    }
    *k = (AtKernel){.name = pk->name,
                    .ir_hash = pk->ir_hash,
                    .family = f,
                    .spec = spec,
                    .buckets = u->texts,
                    .n_buckets = nb,
                    .first = u->first,
                    .n_first = n_first,
                    .base = u->base};
    for (int b = 0; t->step_us && b < nb; b++) /* its time in the steps a candidate is timed in */
        k->weight += t->step_us[(size_t)u->step[b] * (size_t)t->p->n_kernels + (size_t)ki];
    t->n_kernels++;
    return KILN_OK;
}

KilnStatus at_engine_create(const AtEngineOptions *o, AtEngine **out, char *err, int errlen)
{
    *out = NULL;
    if (!o || !o->package) return rt_file_errf(err, errlen, KILN_ERR_ARG, "at_engine_create: no package");
    AtEngine *t = calloc(1, sizeof *t);
    if (!t) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    t->o = *o;
    if (t->o.tol <= 0) t->o.tol = AT_CHECK_TOL;
    t->loaded_ki = t->kept_for = -1;
    KilnStatus s = engine_setup(t, err, errlen);
    const char *target = s ? NULL : rt_exec_target(rt_engine_exec(t->e));
    if (!s && !(t->target = target ? cg_target_find(target) : NULL))
        s = rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED, "no compile target '%s'", target ? target : "?");
    if (!s) {
        rt_exec_tune_device(rt_engine_exec(t->e), &t->dev);
        t->arena = ir_arena_create();
        t->kernels = calloc((size_t)t->p->n_kernels + 1, sizeof *t->kernels);
        t->tuned = calloc((size_t)t->p->n_kernels + 1, sizeof *t->tuned);
        if (!t->arena || !t->kernels || !t->tuned)
            s = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    }
    if (!s) step_times(t);
    for (int i = 0; !s && i < t->p->n_kernels; i++)
        s = add_kernel(t, i, err, errlen);
    if (!s) { /* budget shares: each kernel's time in its steps, plus 3% of all kernels' for each, so a
               * kernel that takes little time still tries a few candidates */
        double total = 0;
        for (int i = 0; i < t->n_kernels; i++)
            total += t->kernels[i].weight;
        for (int i = 0; i < t->n_kernels; i++)
            t->kernels[i].weight = total > 0 ? t->kernels[i].weight + 0.03 * total : 0;
    }
    free(t->step_us); /* read by add_kernel only */
    t->step_us = NULL;
    if (!s) { /* auto: a GPU's candidates compile on up to 4 spare CPUs; the host's inline (its timing
               * runs on the CPUs) */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        int n = o->compile_threads >= 0                             ? o->compile_threads
                : t->target->backend == CG_BACKEND_HOST || cpus < 2 ? 0
                : cpus - 1 < 4                                      ? (int)cpus - 1
                                                                    : 4;
        t->ahead = at_ahead_create(n, t->target, o->cg);
    }
    if (s) {
        at_engine_destroy(t);
        return s;
    }
    *out = t;
    return KILN_OK;
}

void at_engine_destroy(AtEngine *t)
{
    if (!t) return;
    at_ahead_destroy(t->ahead);
    engine_teardown(t);
    kept_clear(t);
    free(t->kept), free(t->kernels), free(t->tuned), free(t->step_us);
    free(t->tokens), free(t->logits), free(t->next), free(t->us), free(t->launches);
    ir_arena_destroy(t->arena);
    free(t);
}

int at_engine_kernels(AtEngine *t, const AtKernel **out)
{
    *out = t->kernels;
    return t->n_kernels;
}

const RtTdbDevice *at_engine_device(AtEngine *t)
{
    return &t->dev;
}

const char *at_engine_target(AtEngine *t)
{
    return t->target->name;
}

const KirLimits *at_engine_limits(AtEngine *t)
{
    return cg_target_limits(t->target);
}

/* ---- the timer ---- */

static int config_serves(const KirConfig *cfg, int64_t rows)
{
    int64_t split = kir_config_get(cfg, "SPLIT_K", 1), bm = kir_config_get(cfg, "BM", 0);
    return split <= 1 || rows <= bm; /* split-K serves at most BM rows (rt_tune does the same) */
}

static int64_t bucket_rows(const Tuned *u, int b, const RtPlanKernel *pk)
{
    return pk->m_param >= 0 ? (int64_t)1 << u->bidx[b] : 0;
}

static int t_serves(void *ctx, const AtKernel *k, const KirConfig *cfg, const RtTdbBucket *b)
{
    (void)ctx, (void)k;
    return b->n != 1 || strcmp(b->key[0], "T") || config_serves(cfg, b->val[0]);
}

/* A failed probe: a device failure is a fault (the context may be lost), anything else a launch. */
static AtCandStatus probe_failed(AtEngine *t, KilnStatus s, const char *what, char *msg, int msglen)
{
    snprintf(msg, (size_t)msglen, "%s: %s", what, kiln_engine_errmsg(t->e));
    return s == KILN_ERR_DEVICE ? AT_CAND_FAULT : AT_CAND_LAUNCH;
}

/* Compares a probe's outputs with step sp's reference: relative L2 of the logits within tol, and each
 * sampled token one whose reference logit is within tol * (the row's largest magnitude) of the row's
 * maximum (so a near-tie may flip, a broken sampler may not). Returns 1 when they agree. */
static int outputs_agree(const AtEngine *t, const Step *sp, char *msg, int msglen)
{
    double d = 0, n2 = 0;
    size_t total = (size_t)sp->rows * (size_t)t->vocab;
    for (size_t i = 0; i < total; i++) {
        double x = t->logits[i], y = sp->logits[i];
        if (!isfinite(x)) {
            snprintf(msg, (size_t)msglen, "logit %zu is %g", i, x);
            return 0;
        }
        d += (x - y) * (x - y), n2 += y * y;
    }
    double rel = n2 > 0 ? sqrt(d / n2) : sqrt(d);
    if (rel > t->o.tol) {
        snprintf(msg, (size_t)msglen,
                 "logits differ from the default config's by %.3g (rel L2; tolerance %g)", rel, t->o.tol);
        return 0;
    }
    for (int r = 0; r < sp->rows; r++) {
        const float *row = sp->logits + (size_t)r * (size_t)t->vocab;
        float mx = row[0], amax = 0;
        for (int j = 0; j < t->vocab; j++)
            mx = row[j] > mx ? row[j] : mx, amax = fabsf(row[j]) > amax ? fabsf(row[j]) : amax;
        int32_t tok = t->next[r];
        if (tok < 0 || tok >= t->vocab || row[tok] < mx - t->o.tol * amax) {
            snprintf(msg, (size_t)msglen, "row %d sampled token %d, the default config %d", r, tok,
                     sp->next[r]);
            return 0;
        }
    }
    return 1;
}

static AtCandStatus t_prepare(void *ctx, const AtKernel *k, const KirConfig *cfg, char *msg, int msglen)
{
    AtEngine *t = ctx;
    int idx = (int)(k - t->kernels);
    const Tuned *u = &t->tuned[idx];
    RtPlanKernel *pk = &t->p->kernels[u->ki];
    if (t->kept_for != idx) kept_clear(t), t->kept_for = idx;
    if (t->loaded_ki >= 0) rt_engine_binary_pop(t->e, t->loaded_ki), t->loaded_ki = -1;
    AtCompiled c;
    KilnStatus s;
    if (at_ahead_take(t->ahead, cfg, &c, &s, msg, msglen) < 0)
        s = at_compile(k->family, &k->spec, cfg, t->target, t->o.cg, &c, msg, msglen);
    if (!s && strcmp(c.params, pk->params)) {
        snprintf(msg, (size_t)msglen, "params %.80s differ from the package kernel's", c.params);
        s = KILN_ERR_UNSUPPORTED;
    }
    if (s) {
        at_compiled_free(&c);
        return AT_CAND_COMPILE;
    }
    int bin = rt_engine_binary_add(t->e, u->ki, c.config, c.bin.format, c.bin.entry ? c.bin.entry : k->name,
                                   c.grid, c.block, c.smem, c.bin.data, c.bin.size, msg, msglen);
    if (bin < 0) {
        at_compiled_free(&c);
        return AT_CAND_LAUNCH;
    }
    t->loaded_ki = u->ki;
    for (int b = 0; b < k->n_buckets; b++)
        if (config_serves(cfg, bucket_rows(u, b, pk))) pk->route[u->bidx[b]] = (signed char)bin;
    AtCandStatus st = AT_CAND_OK;
    for (int b = 0; b < k->n_buckets && st == AT_CAND_OK; b++) {
        if (!config_serves(cfg, bucket_rows(u, b, pk))) continue;
        const Step *sp = &t->steps[u->step[b]];
        RtEngineProbe pr = {.logits = t->logits, .next = t->next};
        char what[64];
        snprintf(what, sizeof what, "a step of %d tokens", sp->n);
        if ((s = rt_engine_probe(t->e, t->tokens, sp->n, sp->rows, &pr)))
            st = probe_failed(t, s, what, msg, msglen);
        else if (!outputs_agree(t, sp, msg, msglen))
            st = AT_CAND_CHECK;
    }
    IrBuf key = {0};
    kir_config_print(cfg, &key);
    if (st == AT_CAND_OK && t->n_kept == t->cap_kept) {
        int cap = t->cap_kept ? 2 * t->cap_kept : 32;
        Kept *nk = realloc(t->kept, (size_t)cap * sizeof *nk);
        if (nk) t->kept = nk, t->cap_kept = cap;
    }
    if (st == AT_CAND_OK && t->n_kept < t->cap_kept && key.s && !key.oom) {
        t->kept[t->n_kept].key = strdup(key.s);
        t->kept[t->n_kept++].c = c;
    } else {
        at_compiled_free(&c);
    }
    ir_buf_free(&key);
    return st;
}

static AtCandStatus t_time(void *ctx, const AtKernel *k, const KirConfig *cfg, const RtTdbBucket *b,
                           double *us, int n, char *msg, int msglen)
{
    AtEngine *t = ctx;
    const Tuned *u = &t->tuned[k - t->kernels];
    char text[RT_TDB_MAX_BUCKET];
    rt_tdb_bucket_format(b, text);
    int bi = 0;
    while (bi < k->n_buckets && strcmp(k->buckets[bi], text))
        bi++;
    if (bi == k->n_buckets) {
        snprintf(msg, (size_t)msglen, "no probe step meets bucket %s", text);
        return AT_CAND_TIMING;
    }
    (void)cfg;
    const Step *sp = &t->steps[u->step[bi]];
    RtEngineProbe pr = {.kernel_us = t->us, .kernel_launches = t->launches};
    for (int i = -1; i < n; i++) { /* -1: the warm-up */
        KilnStatus s = rt_engine_probe(t->e, t->tokens, sp->n, sp->rows, &pr);
        if (s) return probe_failed(t, s, "timing", msg, msglen);
        if (i < 0) continue;
        if (t->launches[u->ki] < 1) {
            snprintf(msg, (size_t)msglen, "a step of %d tokens did not launch it", sp->n);
            return AT_CAND_TIMING;
        }
        us[i] = t->us[u->ki] / t->launches[u->ki];
    }
    return AT_CAND_OK;
}

static void t_start(void *ctx, const AtKernel *k, const AtCand *cands, int n)
{
    at_ahead_start(((AtEngine *)ctx)->ahead, k, cands, n);
}

static int t_recover(void *ctx)
{
    AtEngine *t = ctx;
    char err[512];
    engine_teardown(t);
    if (engine_setup(t, err, sizeof err)) {
        tlog(t, "recovering from a fault: %s", err);
        return -1;
    }
    return 0;
}

static KilnStatus t_keep(void *ctx, const AtKernel *k, const KirConfig *cfg, RtTdb *store, const char *device,
                         char *err, int errlen)
{
    AtEngine *t = ctx;
    IrBuf key = {0};
    kir_config_print(cfg, &key);
    const Kept *kp = NULL;
    for (int i = 0; i < t->n_kept && key.s && !kp; i++)
        if (!strcmp(t->kept[i].key, key.s)) kp = &t->kept[i];
    ir_buf_free(&key);
    if (!kp) /* the winner was compiled for this kernel: a lost one is a bug */
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: no binary kept for the winning config", k->name);
    const AtCompiled *c = &kp->c;
    AtBinary b = {.device = device,
                  .ir_hash = k->ir_hash,
                  .config = kp->key,
                  .target = t->target->name,
                  .format = c->bin.format,
                  .entry = c->bin.entry ? c->bin.entry : k->name,
                  .params = c->params,
                  .grid = c->grid,
                  .block = c->block,
                  .smem = c->smem,
                  .data = c->bin.data,
                  .size = c->bin.size,
                  .compile_ms = c->bin.compile_ms};
    return at_store_put_binary(store, &b, err, errlen);
}

AtTimer at_engine_timer(AtEngine *t)
{
    return (AtTimer){.ctx = t,
                     .start = t_start,
                     .prepare = t_prepare,
                     .time = t_time,
                     .recover = t_recover,
                     .serves = t_serves,
                     .keep = t_keep};
}
