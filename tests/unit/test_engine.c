/* test_engine.c — the engine of kiln.h on the host backend, with the llama recipe's tiny config and fresh
 * random bf16 weights written as safetensors. The reference for every batched, chunked, shared or
 * preempted run is the same request run alone: on the host every output row is computed independently
 * of the others in its step, so the tokens must be identical.
 *   - batching: 6 requests of different lengths together == each alone (greedy);
 *   - chunked prefill (4 tokens per step) == whole prompts;
 *   - prefix sharing: a request whose prompt starts like a running one forks its pages (stats count
 *     them) and gets the tokens it gets alone; so does one that starts like a finished one (prefix
 *     cache); sharing off computes everything;
 *   - preemption: a KV pool too small for all requests at once preempts and recomputes, same tokens;
 *   - sampling: the same seed gives the same tokens, batched or alone; another seed other tokens;
 *   - stop tokens, max_tokens (finish reasons), abort from the callback and by id;
 *   - kiln_engine_score's last row argmax is the first greedy token;
 *   - bad requests: empty prompt, a token outside the vocabulary;
 *   - the tuning store (docs/AUTOTUNE.md): a store holding a host-so binary of one linear layer at
 *     another config (BM=16, compiled here as a tuner would) makes the log say tuned for it and default
 *     for the rest, with the same tokens and logits as untuned; nearest buckets; a copied store (export
 *     and import: another machine); damaged, unfit and foreign binaries ignored with a note; a broken
 *     store refused with one line.
 * Needs the kiln CLI (KILN_BIN, to compile the package) and the LLVM host backend; skips without them.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autotune/at_compile.h"
#include "autotune/at_store.h"
#include "codegen/cg_driver.h"
#include "codegen/llvm/cg_host.h"
#include "ir/kfam.h"
#include "ir/kir.h"
#include "kfile.h"
#include "kiln.h"
#include "kref.h"
#include "krun.h"
#include "kt.h"
#include "runtime/rt_exec.h"
#include "runtime/rt_package.h"
#include "runtime/rt_sample.h"
#include "runtime/rt_tunedb.h"

#include <sqlite3.h>

enum { MAXR = 16, MAXT = 256 };

typedef struct Out {
    int32_t tok[MAXT];
    int n, finish_calls, abort_after;
    KilnFinish finish;
} Out;

static char pkg_path[512], weights_path[512];

/* Re-entrancy: a callback that, when its request finishes, submits more requests (enough to move the
 * engine's request array) and tries to step from inside (refused). */
static int on_token(void *user, int64_t req, int32_t tok, KilnFinish fin);
#define on_token_cb on_token

typedef struct Chain {
    KilnEngine *e;
    const int32_t *prompt;
    int n, spawned, step_refused;
    Out outs[24];
} Chain;

static int on_chain(void *user, int64_t req, int32_t tok, KilnFinish fin)
{
    Chain *c = user;
    (void)req, (void)tok;
    if (fin == KILN_FINISH_NONE || c->spawned) return 0;
    KilnSampling s;
    kiln_sampling_init(&s);
    s.max_tokens = 6;
    for (int i = 0; i < 24; i++)
        c->spawned +=
            kiln_engine_submit(c->e, c->prompt, c->n, &s, on_token_cb, &c->outs[i], NULL) == KILN_OK;
    c->step_refused = kiln_engine_step(c->e, NULL) == KILN_ERR_ARG;
    return 0;
}

static int on_token(void *user, int64_t req, int32_t tok, KilnFinish fin)
{
    Out *o = user;
    (void)req;
    if (tok >= 0 && o->n < MAXT) o->tok[o->n++] = tok;
    if (fin != KILN_FINISH_NONE) o->finish = fin, o->finish_calls++;
    return o->abort_after && o->n >= o->abort_after;
}

static KilnEngine *open_engine(int step_tokens, int64_t kv_bytes, int no_share)
{
    KilnEngineOptions o;
    kiln_engine_options_init(&o);
    o.device = -2;
    o.max_step_tokens = step_tokens;
    o.kv_cache_bytes = kv_bytes;
    o.no_prefix_sharing = no_share;
    KilnEngine *e = NULL;
    char err[512];
    KilnStatus s = kiln_engine_open(pkg_path, weights_path, &o, &e, err, sizeof err);
    KT_CHECK(s == KILN_OK, "open: %s", err);
    return e;
}

static void drain(KilnEngine *e)
{
    int pending = 1, steps = 0;
    while (pending && steps++ < 10000)
        if (kiln_engine_step(e, &pending) != KILN_OK) {
            KT_CHECK(0, "step: %s", kiln_engine_errmsg(e));
            return;
        }
}

/* Runs one request alone on a fresh engine. */
static void run_alone(const int32_t *p, int n, const KilnSampling *s, Out *o)
{
    memset(o, 0, sizeof *o);
    KilnEngine *e = open_engine(0, 0, 1);
    int64_t id;
    if (!e) return;
    KT_CHECK(kiln_engine_submit(e, p, n, s, on_token, o, &id) == KILN_OK, "submit: %s",
             kiln_engine_errmsg(e));
    drain(e);
    kiln_engine_close(e);
}

static int same(const Out *a, const Out *b)
{
    return a->n == b->n && !memcmp(a->tok, b->tok, (size_t)a->n * sizeof a->tok[0]) && a->finish == b->finish;
}

/* The package's weights as random bf16 safetensors (norm weights around 1, the rest N(0, 0.08)). */
static int write_weights(KrefRng *g)
{
    KilnPackage *pkg;
    char err[512];
    if (kiln_package_open(pkg_path, &pkg, err, sizeof err) != KILN_OK) {
        KT_CHECK(0, "%s", err);
        return 0;
    }
    sqlite3_stmt *st;
    KfStTensor t[64];
    int n = 0;
    sqlite3_prepare_v2(rt_pkg_db(pkg), "SELECT name, shape FROM weights ORDER BY name", -1, &st, NULL);
    while (sqlite3_step(st) == SQLITE_ROW && n < 64) {
        KfStTensor *w = &t[n++];
        memset(w, 0, sizeof *w);
        w->name = strdup((const char *)sqlite3_column_text(st, 0));
        w->dtype = "BF16";
        size_t elems = 1;
        char *p = (char *)sqlite3_column_text(st, 1); /* "[a,b]" */
        while (*p == '[' || *p == ',') {
            w->shape[w->n_dims] = strtoll(p + 1, &p, 10);
            elems *= (size_t)w->shape[w->n_dims++];
        }
        uint16_t *d = malloc(elems * 2);
        int norm = strstr(w->name, "norm") != NULL;
        for (size_t i = 0; i < elems; i++) {
            float f = (float)(norm ? 1.0 + 0.1 * kref_normal(g) : 0.08 * kref_normal(g));
            uint32_t u;
            memcpy(&u, &f, 4);
            d[i] = (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
        }
        w->data = d, w->nbytes = elems * 2;
    }
    sqlite3_finalize(st);
    kiln_package_close(pkg);
    kf_st_write_tensors(weights_path, t, n);
    for (int i = 0; i < n; i++)
        free((void *)t[i].name), free((void *)t[i].data);
    return n > 0;
}

static void random_prompt(KrefRng *g, int32_t *p, int n, int vocab)
{
    for (int i = 0; i < n; i++)
        p[i] = (int32_t)(kref_next(g) % (uint64_t)vocab);
}

/* ---- the tuning store ---- */

static char tlog[32768]; /* the engine's log lines, one per line */

static void on_log(void *user, const char *line)
{
    (void)user;
    size_t n = strlen(tlog);
    snprintf(tlog + n, sizeof tlog - n, "%s\n", line);
}

static int has_line(const char *text)
{
    char want[512];
    snprintf(want, sizeof want, "%s\n", text);
    return strstr(tlog, want) != NULL;
}

/* Opens an engine on the host with the store at db (NULL: none), logging into tlog. */
static KilnEngine *open_tuned(const char *db, KilnStatus *status, char *err)
{
    KilnEngineOptions o;
    kiln_engine_options_init(&o);
    o.device = -2;
    o.tune_db = db;
    o.log = on_log;
    tlog[0] = 0;
    KilnEngine *e = NULL;
    *status = kiln_engine_open(pkg_path, weights_path, &o, &e, err, 512);
    return e;
}

typedef struct Run {
    Out out;
    float *logits; /* kiln_engine_score of the prompt */
    KilnEngineStats st;
} Run;

/* Greedy tokens of p (a prefill of n tokens, then decode steps) and the scored logits. */
static int tuned_run(const char *db, const int32_t *p, int n, int V, Run *r)
{
    KilnStatus s;
    char err[512];
    memset(r, 0, sizeof *r);
    KilnEngine *e = open_tuned(db, &s, err);
    KT_CHECK(e, "open with store %s: %s", db ? db : "(none)", err);
    if (!e) return 0;
    KilnSampling g;
    kiln_sampling_init(&g);
    g.max_tokens = 12;
    kiln_engine_submit(e, p, n, &g, on_token, &r->out, NULL);
    drain(e);
    r->logits = malloc((size_t)n * (size_t)V * sizeof *r->logits);
    KT_CHECK(r->logits && kiln_engine_score(e, p, n, r->logits) == KILN_OK, "score: %s",
             kiln_engine_errmsg(e));
    kiln_engine_stats(e, &r->st, sizeof r->st);
    kiln_engine_close(e);
    return 1;
}

/* Relative L2 distance of two runs' logits. */
static double logits_rel(const Run *a, const Run *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; a->logits && b->logits && i < n; i++) {
        double x = a->logits[i], y = b->logits[i];
        if (x != x || y != y) return 1e30;
        d += (x - y) * (x - y), s += x * x;
    }
    return s > 0 ? sqrt(d / s) : 1e30;
}

/* The package kernel `name`'s IR hash and params. */
static int kernel_row(const char *name, char *ir_hash, char *params, size_t n)
{
    KilnPackage *pkg;
    char err[512];
    sqlite3_stmt *st = NULL;
    int ok = 0;
    if (kiln_package_open(pkg_path, &pkg, err, sizeof err) != KILN_OK) return 0;
    sqlite3_prepare_v2(rt_pkg_db(pkg), "SELECT ir_hash, params FROM kernels WHERE name = ?1", -1, &st, NULL);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
        snprintf(ir_hash, n, "%s", (const char *)sqlite3_column_text(st, 0));
        snprintf(params, n, "%s", (const char *)sqlite3_column_text(st, 1));
        ok = 1;
    }
    sqlite3_finalize(st);
    kiln_package_close(pkg);
    return ok;
}

/* Compiles matmul N=64 K=64 (the tiny model's o_proj) for the host at BM=16, as the tuner does (at_compile),
 * and stores it with results for `buckets`. The kernel's IR at the default config must hash to the package's
 * ir_hash (the store's key). Returns 0 on failure. */
static int store_tuned(const char *db_path, const char *fp, const RtTdbDevice *dev,
                       const char *const *buckets, int n_buckets, const char *format)
{
    const char *name = "matmul_64_64_bf16_none";
    char ir_hash[64], params[512], hash[17], err[512];
    if (!kernel_row(name, ir_hash, params, sizeof params)) {
        KT_CHECK(0, "no kernel %s in the package", name);
        return 0;
    }
    const KfamFamily *f = kfam_find("matmul");
    IrArena *arena = ir_arena_create();
    KfamSpec spec;
    KirConfig cfg = {0};
    kir_config_set(&cfg, "BM", 16); /* the rest: the family's defaults */
    AtCompiled c = {0};
    int ok = at_spec_parse(arena, "matmul N=64 K=64 dtype=bf16 epilogue=none", &spec, err, sizeof err) ==
                 KILN_OK &&
             at_ir_hash(f, &spec, hash, err, sizeof err) == KILN_OK;
    KT_CHECK(ok && !strcmp(hash, ir_hash), "%s: IR hash %s (package %s): %s", name, hash, ir_hash, err);
    ok = ok && !strcmp(hash, ir_hash) &&
         at_compile(f, &spec, &cfg, cg_target_find("host"), NULL, &c, err, sizeof err) == KILN_OK;
    KT_CHECK(ok, "host compile of %s at BM=16: %s", name, err);
    ok = ok && !strcmp(c.params, params) && strstr(c.config, "BM=16 ") && !strcmp(c.bin.format, "host-so");
    RtTdb *db = NULL;
    if (ok && rt_tdb_open(db_path, RT_TDB_WRITE, &db, err, sizeof err) != KILN_OK) ok = 0;
    char got_fp[RT_TDB_FP_LEN];
    if (ok) ok = at_store_device(db, dev, got_fp, err, sizeof err) == KILN_OK && !strcmp(got_fp, fp);
    AtBinary b = {.device = fp,
                  .ir_hash = ir_hash,
                  .config = c.config,
                  .target = "host",
                  .format = format,
                  .entry = c.bin.entry ? c.bin.entry : name,
                  .params = c.params,
                  .grid = c.grid,
                  .block = c.block,
                  .data = c.bin.data,
                  .size = c.bin.size,
                  .compile_ms = c.bin.compile_ms};
    if (ok) ok = at_store_put_binary(db, &b, err, sizeof err) == KILN_OK;
    for (int i = 0; ok && i < n_buckets; i++) {
        AtResult r = {.device = fp,
                      .kernel = name,
                      .ir_hash = ir_hash,
                      .bucket = buckets[i],
                      .config = c.config,
                      .median_us = 2,
                      .p20_us = 1.9,
                      .p80_us = 2.1,
                      .samples = 20,
                      .default_us = 3};
        ok = at_store_put(db, &r, NULL, err, sizeof err) == KILN_OK;
    }
    KT_CHECK(ok, "storing the tuned binary: %s", err);
    rt_tdb_close(db);
    at_compiled_free(&c);
    ir_arena_destroy(arena);
    return ok;
}

static void copy_file(const char *from, const char *to)
{
    long n = 0;
    char *bytes = kf_slurp(from, &n);
    if (bytes) kf_spit(to, bytes, (size_t)n);
    free(bytes);
}

/* ---- the host's sampling path (runtime/rt_sample.h): penalties, logit bias, min-p ---- */

/* The reference draw: the allowed set by sorting (double), then argmax of x / T + Gumbel noise. */
static int32_t ref_draw(const float *x, int V, float T, int top_k, float top_p, float min_p, int64_t seed)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (x[v] > x[best]) best = v;
    if (!(T > 0)) return best;
    double mx = x[best], t = -INFINITY;
    float *sorted = malloc((size_t)V * sizeof *sorted);
    if (!sorted) return -1;
    memcpy(sorted, x, (size_t)V * sizeof *sorted);
    for (int i = 1; i < V; i++) /* insertion sort, descending: V is small here */
        for (int j = i; j > 0 && sorted[j] > sorted[j - 1]; j--) {
            float f = sorted[j];
            sorted[j] = sorted[j - 1], sorted[j - 1] = f;
        }
    if (top_k > 0 && top_k < V) t = sorted[top_k - 1];
    if (top_p < 1) {
        double z = 0, mass = 0;
        for (int i = 0; i < V; i++)
            z += sorted[i] >= t ? exp((sorted[i] - mx) / T) : 0;
        for (int i = 0; i < V && sorted[i] >= t; i++) {
            mass += exp((sorted[i] - mx) / T);
            if (mass >= top_p * z * (1 - 1e-9)) {
                t = sorted[i];
                break;
            }
        }
    }
    if (min_p > 0 && mx + T * log(min_p) > t) t = mx + T * log(min_p);
    free(sorted);
    double top = -INFINITY;
    for (int v = 0; v < V; v++) {
        double u = kir_rand_ref(seed, v), z;
        if (x[v] < t) continue;
        z = x[v] / (double)T - log(-log(u > 0x1p-25 ? u : 0x1p-25));
        if (z > top) top = z, best = v;
    }
    return best;
}

/* The request's tokens drawn through the host path again, from kiln_engine_score's logits: each must be
 * the reference draw of its row, adjusted by the reference penalties (double). */
static void check_host_draws(KilnEngine *e, const int32_t *p, int n, const Out *o, const KilnSampling *s,
                             const char *what)
{
    int V = kiln_engine_vocab(e), total = n + o->n - 1;
    int32_t *all = malloc((size_t)(n + o->n) * sizeof *all);
    float *lg = malloc((size_t)total * (size_t)V * sizeof *lg), *x = malloc((size_t)V * sizeof *x);
    if (!all || !lg || !x || o->n < 2) {
        KT_CHECK(0, "%s: out of memory or %d tokens", what, o->n);
        free(all), free(lg), free(x);
        return;
    }
    memcpy(all, p, (size_t)n * sizeof *all);
    memcpy(all + n, o->tok, (size_t)o->n * sizeof *all);
    KT_CHECK(kiln_engine_score(e, all, total, lg) == KILN_OK, "%s: score: %s", what, kiln_engine_errmsg(e));
    int bad = -1;
    for (int g = 0; g < o->n && bad < 0; g++) {
        const float *row = lg + (size_t)(n - 1 + g) * (size_t)V;
        for (int v = 0; v < V; v++) {
            double y = row[v];
            int in_prompt = 0, in_out = 0;
            for (int i = 0; i < n; i++)
                in_prompt |= all[i] == v;
            for (int i = 0; i < g; i++)
                in_out += o->tok[i] == v;
            if (in_prompt || in_out) y = y > 0 ? y / s->repetition_penalty : y * s->repetition_penalty;
            if (in_out) y -= s->presence_penalty + s->frequency_penalty * in_out;
            for (int i = 0; i < s->n_logit_bias; i++)
                y += s->logit_bias[i].token == v ? s->logit_bias[i].bias : 0;
            x[v] = (float)y;
        }
        /* the engine's per-token seed (rt_engine.c row_sampling): recomputed through the same rule */
        uint64_t z = (uint64_t)g + 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull, z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z = s->seed ^ (z ^ (z >> 31));
        z += 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull, z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        int64_t seed = (int64_t)((z ^ (z >> 31)) & 0xffffff);
        if (ref_draw(x, V, s->temperature, s->top_k, s->top_p, s->min_p, seed) != o->tok[g]) bad = g;
    }
    KT_CHECK(bad < 0, "%s: token %d (%d) is not the reference draw of its adjusted logits", what, bad,
             bad >= 0 ? o->tok[bad] : 0);
    free(all), free(lg), free(x);
}

static void test_host_sampling(const int32_t *p, int n, int V, KrefRng *g)
{
    /* the noise: the device's, bit for bit */
    int rand_ok = 1;
    for (int i = 0; i < 1000; i++) {
        int64_t seed = (int64_t)kref_next(g);
        int32_t c = (int32_t)(kref_next(g) & 0x7fffffff);
        rand_ok &= rt_sample_rand(seed, c) == kir_rand_ref(seed, c);
    }
    KT_CHECK(rand_ok, "rt_sample_rand differs from kir_rand_ref");
    /* rt_sample_row against the sorting reference on random rows (ties: some rows repeat values) */
    enum { RV = 300 };
    float x[RV], scratch[2 * RV];
    int row_bad = 0;
    for (int t = 0; t < 400; t++) {
        int ties = t % 4 == 0;
        for (int v = 0; v < RV; v++)
            x[v] = ties ? (float)(int)kref_uniform(g, -4, 4) : (float)kref_uniform(g, -6, 6);
        if (t % 7 == 0) x[(int)kref_uniform(g, 0, RV)] = -INFINITY;
        float T = t % 5 == 0 ? 0 : (float)kref_uniform(g, 0.2, 2);
        int k = t % 3 == 0 ? 0 : (int)kref_uniform(g, 1, RV + 20);
        float tp = t % 2 ? 1 : (float)kref_uniform(g, 0.05, 1),
              mp = t % 3 == 1 ? 0 : (float)kref_uniform(g, 0, 0.5);
        int64_t seed = (int64_t)(kref_next(g) & 0xffffff);
        int32_t got = rt_sample_row(x, RV, T, k, tp, mp, seed, scratch),
                want = ref_draw(x, RV, T, k, tp, mp, seed);
        if (got != want && !row_bad++)
            KT_CHECK(0, "rt_sample_row row %d (T %g, top_k %d, top_p %g, min_p %g): %d, reference %d", t, T,
                     k, tp, mp, got, want);
    }
    KT_CHECK(!row_bad, "rt_sample_row: %d of 400 rows differ from the reference", row_bad);

    KilnSampling base;
    kiln_sampling_init(&base);
    base.max_tokens = 12, base.ignore_eos = 1;
    /* min-p that drops nothing takes the host path and must draw what the device draws */
    KilnSampling hot = base, hot_host;
    hot.temperature = 0.9f, hot.top_k = 40, hot.top_p = 0.9f, hot.seed = 11;
    hot_host = hot, hot_host.min_p = 1e-30f;
    Out dev, host;
    run_alone(p, n, &hot, &dev);
    run_alone(p, n, &hot_host, &host);
    KT_CHECK(same(&dev, &host) && dev.n == 12, "the host path's draws differ from the device sampler's");
    /* logit bias +100 on one token: every greedy token is it; -100 on the greedy first token: not it */
    KilnLogitBias up = {(int32_t)(V / 3), 100.0f}, down;
    KilnSampling b = base;
    b.logit_bias = &up, b.n_logit_bias = 1;
    Out ob, plain;
    run_alone(p, n, &b, &ob);
    int all_up = ob.n == 12;
    for (int i = 0; i < ob.n; i++)
        all_up &= ob.tok[i] == up.token;
    KT_CHECK(all_up, "logit_bias +100 on %d: not every token is it", up.token);
    run_alone(p, n, &base, &plain);
    down = (KilnLogitBias){plain.tok[0], -100.0f};
    b.logit_bias = &down;
    run_alone(p, n, &b, &ob);
    KT_CHECK(ob.n == 12 && ob.tok[0] != plain.tok[0], "logit_bias -100 on the greedy token %d kept it",
             down.token);
    /* penalties, bias and min-p, greedy and sampled, batched with plain requests: each token is the
     * reference draw of the scored logits adjusted by a plain double reference */
    KilnLogitBias lb[3] = {{1, 1.5f}, {(int32_t)(V - 1), -2.0f}, {(int32_t)(V / 2), 0.75f}};
    KilnSampling cases[4] = {base, base, base, base};
    cases[0].presence_penalty = 1.5f, cases[0].frequency_penalty = 0.5f;
    cases[1].repetition_penalty = 1.3f, cases[1].logit_bias = lb, cases[1].n_logit_bias = 3;
    cases[2] = cases[0], cases[2].temperature = 0.8f, cases[2].top_p = 0.9f, cases[2].min_p = 0.05f,
    cases[2].seed = 5;
    cases[3].temperature = 1.1f, cases[3].top_k = 20, cases[3].repetition_penalty = 0.8f,
    cases[3].frequency_penalty = -0.5f, cases[3].seed = 6,
    cases[3].spec = KILN_SPEC_NGRAM; /* speculation: off for this request */
    KilnEngine *e = open_engine(0, 0, 0);
    if (!e) return;
    Out o[4], side = {0};
    memset(o, 0, sizeof o);
    kiln_engine_submit(e, p, n, &base, on_token, &side, NULL);
    for (int c = 0; c < 4; c++)
        KT_CHECK(kiln_engine_submit(e, p, n, &cases[c], on_token, &o[c], NULL) == KILN_OK,
                 "submit case %d: %s", c, kiln_engine_errmsg(e));
    drain(e);
    KilnEngineStats st;
    kiln_engine_stats(e, &st, sizeof st);
    KT_CHECK(same(&side, &plain), "a plain request beside host-sampled ones changed");
    KT_CHECK(st.spec_verifies == 0, "a host-sampled request speculated (%lld verifies)",
             (long long)st.spec_verifies);
    static const char *what[4] = {"presence+frequency", "repetition+bias", "sampled penalties+min_p",
                                  "sampled repetition<1, frequency<0"};
    for (int c = 0; c < 4; c++)
        check_host_draws(e, p, n, &o[c], &cases[c], what[c]);
    /* refused: out of range, a bias token outside the vocabulary */
    KilnSampling bad = base;
    bad.presence_penalty = 2.5f;
    KT_CHECK(kiln_engine_submit(e, p, n, &bad, NULL, NULL, NULL) == KILN_ERR_ARG,
             "presence_penalty 2.5 taken");
    bad = base, bad.repetition_penalty = 0;
    KT_CHECK(kiln_engine_submit(e, p, n, &bad, NULL, NULL, NULL) == KILN_ERR_ARG,
             "repetition_penalty 0 taken");
    bad = base, bad.min_p = NAN;
    KT_CHECK(kiln_engine_submit(e, p, n, &bad, NULL, NULL, NULL) == KILN_ERR_ARG, "min_p NaN taken");
    KilnLogitBias far = {V, 1};
    bad = base, bad.logit_bias = &far, bad.n_logit_bias = 1;
    KT_CHECK(kiln_engine_submit(e, p, n, &bad, NULL, NULL, NULL) == KILN_ERR_ARG,
             "a bias token past the vocabulary");
    kiln_engine_close(e);
}

static void test_tuning(const int32_t *prompt, int n, int V)
{
    char db_all[512], db_16[512], path[512], err[512], fp[RT_TDB_FP_LEN];
    RtExec *x = NULL;
    RtTdbDevice dev;
    if (rt_exec_open(-2, 1, &x, err, sizeof err) != KILN_OK) {
        KT_CHECK(0, "host executor: %s", err);
        return;
    }
    rt_exec_tune_device(x, &dev);
    rt_exec_close(x);
    rt_tdb_fingerprint(&dev, fp);
    Run ref, run;
    if (!tuned_run(NULL, prompt, n, V, &ref)) return;
    KT_CHECK(has_line("tuning: no store: every kernel runs the package's default configs") &&
                 ref.st.kernels_tuned == 0 && ref.st.kernels_nearest == 0 && ref.st.kernels_default > 0,
             "no store: %d/%d/%d\n%s", ref.st.kernels_tuned, ref.st.kernels_nearest, ref.st.kernels_default,
             tlog);
    int n_kernels = ref.st.kernels_default;
    size_t n_logits = (size_t)n * (size_t)V;

    /* (a, b) tuned at every bucket the runtime meets (max_step_tokens of the tiny plan, up to T=2^k) */
    static const char *const all[] = {"T=1",   "T=2",   "T=4",   "T=8",    "T=16",   "T=32",  "T=64",
                                      "T=128", "T=256", "T=512", "T=1024", "T=2048", "T=4096"};
    int n_all = 1;
    while (n_all < 13 && (1 << (n_all - 1)) < ref.st.max_step_tokens)
        n_all++;
    snprintf(db_all, sizeof db_all, "%s", kf_at("tuned-all.db"));
    if (!store_tuned(db_all, fp, &dev, all, n_all, "host-so")) return;
    tuned_run(db_all, prompt, n, V, &run);
    KT_CHECK(has_line("tuning: matmul_64_64_bf16_none: tuned") &&
                 has_line("tuning: rmsnorm_64_1e_05_bf16_0: default") &&
                 strstr(tlog, "binaries for 12 kernels (1 tuned, loaded from the store)"),
             "log of a tuned run:\n%s", tlog);
    KT_CHECK(run.st.kernels_tuned == 1 && run.st.kernels_nearest == 0 &&
                 run.st.kernels_default == n_kernels - 1,
             "stats: %d tuned, %d nearest, %d default", run.st.kernels_tuned, run.st.kernels_nearest,
             run.st.kernels_default);
    double rel = logits_rel(&ref, &run, n_logits);
    KT_CHECK(same(&ref.out, &run.out) && rel < 1e-3, "tuned run: tokens %s, logits rel %.3g",
             same(&ref.out, &run.out) ? "same" : "differ", rel);
    free(run.logits);

    /* (d) only T=16 tuned: the other buckets take the nearest */
    snprintf(db_16, sizeof db_16, "%s", kf_at("tuned-16.db"));
    static const char *const b16[] = {"T=16"};
    store_tuned(db_16, fp, &dev, b16, 1, "host-so");
    tuned_run(db_16, prompt, n, V, &run);
    char want[256], top[32] = "";
    if (n_all > 6) snprintf(top, sizeof top, "..%d", 1 << (n_all - 1));
    snprintf(want, sizeof want,
             "tuning: matmul_64_64_bf16_none: T=1..8 nearest T=16, T=16 tuned, T=32%s nearest T=16", top);
    KT_CHECK(has_line(want) && run.st.kernels_nearest == 1 && run.st.kernels_tuned == 0,
             "nearest buckets: want '%s'\n%s", want, tlog);
    KT_CHECK(same(&ref.out, &run.out) && logits_rel(&ref, &run, n_logits) < 1e-3, "nearest run differs");
    free(run.logits);

    /* another machine: the store exported and imported into a fresh one; still no compile at open */
    RtTdb *db = NULL;
    int64_t rows = 0;
    AtMergeStats ms;
    snprintf(path, sizeof path, "%s", kf_at("second.db"));
    KT_CHECK(rt_tdb_open(db_all, RT_TDB_READ, &db, err, sizeof err) == KILN_OK &&
                 at_store_export(db, NULL, kf_at("export.db"), &rows, err, sizeof err) == KILN_OK,
             "export: %s", err);
    rt_tdb_close(db);
    db = NULL;
    KT_CHECK(rt_tdb_open(path, RT_TDB_WRITE, &db, err, sizeof err) == KILN_OK &&
                 at_store_import(db, kf_at("export.db"), &ms, err, sizeof err) == KILN_OK && ms.binaries == 1,
             "import: %s", err);
    rt_tdb_close(db);
    tuned_run(path, prompt, n, V, &run);
    KT_CHECK(run.st.kernels_tuned == 1 && same(&ref.out, &run.out), "a copied store: %d tuned\n%s",
             run.st.kernels_tuned, tlog);
    free(run.logits);

    /* (c) a damaged blob: ignored with a note, the kernel runs its default */
    snprintf(path, sizeof path, "%s", kf_at("damaged.db"));
    copy_file(db_all, path);
    sqlite3 *raw = NULL;
    sqlite3_open(path, &raw);
    sqlite3_exec(raw, "UPDATE binaries SET data = CAST(x'00' || substr(data, 2) AS BLOB)", NULL, NULL, NULL);
    sqlite3_close(raw);
    tuned_run(path, prompt, n, V, &run);
    KT_CHECK(strstr(tlog, "tuning: matmul_64_64_bf16_none: ignored: ") &&
                 strstr(tlog, "binary damaged (hash") &&
                 has_line("tuning: matmul_64_64_bf16_none: default") && run.st.kernels_tuned == 0 &&
                 same(&ref.out, &run.out),
             "damaged binary:\n%s", tlog);
    free(run.logits);

    /* unfit: a binary whose format the host cannot run; rows of another device */
    snprintf(path, sizeof path, "%s", kf_at("unfit.db"));
    store_tuned(path, fp, &dev, all, 1, "cubin");
    tuned_run(path, prompt, n, V, &run);
    KT_CHECK(strstr(tlog, "a cubin binary cannot run on the host") && run.st.kernels_tuned == 0 &&
                 run.st.kernels_nearest == 0,
             "unfit binary:\n%s", tlog);
    free(run.logits);
    RtTdbDevice other = dev;
    char ofp[RT_TDB_FP_LEN];
    other.sm_count += 1;
    rt_tdb_fingerprint(&other, ofp);
    snprintf(path, sizeof path, "%s", kf_at("other.db"));
    store_tuned(path, ofp, &other, all, n_all, "host-so");
    tuned_run(path, prompt, n, V, &run);
    KT_CHECK(run.st.kernels_default == n_kernels, "another device's rows are not used:\n%s", tlog);
    free(run.logits);

    /* a broken or missing store is refused with one line */
    KilnStatus s;
    kf_spit(kf_at("text.db"), "not a database, just text long enough to look like a header.........", 68);
    KilnEngine *e = open_tuned(kf_at("text.db"), &s, err);
    KT_CHECK(!e && s == KILN_ERR_FORMAT && strstr(err, "not an SQLite file") && !strchr(err, '\n'),
             "text file as store: %s", err);
    e = open_tuned(kf_at("missing.db"), &s, err);
    KT_CHECK(!e && s == KILN_ERR_IO && strstr(err, "does not exist"), "missing store: %s", err);
    free(ref.logits);
}

int main(void)
{
    const char *kiln = getenv("KILN_BIN"), *src = getenv("KILN_SOURCE_DIR");
    if (!cg_host_jit_available())
        return kt_skip_toolkit("test_engine", "this build has no LLVM host backend");
    if (!kiln || !src) {
        printf("SKIP: needs KILN_BIN and KILN_SOURCE_DIR (run through ctest)\n");
        return 77;
    }
    if (!kf_scratch_open("engine")) return 1;
    snprintf(pkg_path, sizeof pkg_path, "%s", kf_at("tiny.kiln"));
    snprintf(weights_path, sizeof weights_path, "%s", kf_at("tiny.safetensors"));
    char cmd[2048], cache[1200];
    snprintf(cmd, sizeof cmd, "'%s' compile '%s/recipes/llama.lua' --model tiny --target host %s -o '%s'",
             kiln, src, krun_compile_cache_flag(cache, sizeof cache), pkg_path);
    KT_CHECK(system(cmd) == 0, "%s", cmd);
    KrefRng g = kref_rng(kref_seed()); /* printed; KILN_TEST_SEED replays it */
    if (!write_weights(&g)) return kt_done("test_engine");
    KilnEngine *e = open_engine(0, 0, 0);
    if (!e) return kt_done("test_engine");
    KilnEngineStats st;
    kiln_engine_stats(e, &st, sizeof st);
    int V = kiln_engine_vocab(e), S = st.page_size;

    /* prompts of lengths across page boundaries */
    static const int lens[] = {1, 7, 8, 9, 23, 40};
    enum { NR = sizeof lens / sizeof lens[0] };
    int32_t prompts[NR][64];
    for (int i = 0; i < NR; i++)
        random_prompt(&g, prompts[i], lens[i], V);
    KilnSampling greedy;
    kiln_sampling_init(&greedy);
    greedy.max_tokens = 24;
    Out alone[NR], together[NR];
    for (int i = 0; i < NR; i++)
        run_alone(prompts[i], lens[i], &greedy, &alone[i]);

    /* batching */
    memset(together, 0, sizeof together);
    for (int i = 0; i < NR; i++)
        KT_CHECK(kiln_engine_submit(e, prompts[i], lens[i], &greedy, on_token, &together[i], NULL) == KILN_OK,
                 "submit");
    drain(e);
    for (int i = 0; i < NR; i++)
        KT_CHECK(same(&alone[i], &together[i]) && alone[i].n == 24 && alone[i].finish == KILN_FINISH_LENGTH &&
                     together[i].finish_calls == 1,
                 "batched request %d (%d tokens): %d tokens, differs from alone (%d)", i, lens[i],
                 together[i].n, alone[i].n);
    kiln_engine_close(e);

    /* chunked prefill */
    e = open_engine(4, 0, 1);
    memset(together, 0, sizeof together);
    for (int i = 0; e && i < NR; i++)
        kiln_engine_submit(e, prompts[i], lens[i], &greedy, on_token, &together[i], NULL);
    if (e) drain(e);
    for (int i = 0; e && i < NR; i++)
        KT_CHECK(same(&alone[i], &together[i]), "chunked prefill: request %d differs", i);
    kiln_engine_close(e);

    /* prefix sharing: B starts with A's first 2 pages + 3 tokens, then differs */
    for (int share = 0; share < 2; share++) {
        e = open_engine(0, 0, !share);
        if (!e) break;
        int32_t b[64];
        int nb = 2 * S + 3 + 6;
        memcpy(b, prompts[NR - 1], (size_t)(2 * S + 3) * 4);
        random_prompt(&g, b + 2 * S + 3, 6, V);
        Out oa = {0}, ob = {0}, ref;
        run_alone(b, nb, &greedy, &ref);
        kiln_engine_submit(e, prompts[NR - 1], lens[NR - 1], &greedy, on_token, &oa, NULL);
        kiln_engine_step(e, NULL); /* A's prompt is in the cache now */
        kiln_engine_submit(e, b, nb, &greedy, on_token, &ob, NULL);
        drain(e);
        kiln_engine_stats(e, &st, sizeof st);
        KT_CHECK(same(&ob, &ref) && same(&oa, &alone[NR - 1]), "prefix sharing %d: tokens differ from alone",
                 share);
        KT_CHECK(st.prefix_tokens == (share ? 2 * S : 0), "prefix sharing %d: %lld shared tokens", share,
                 (long long)st.prefix_tokens);
        KT_CHECK(st.cached_prefixes == (share ? 2 : 0), "%d cached prefixes", st.cached_prefixes);
        /* prefix caching: both have finished; C starts with 4 pages of B's computed tokens (its prompt and
         * its first generated tokens) */
        int32_t c[64];
        int nc = 4 * S + 5;
        memcpy(c, b, (size_t)nb * 4);
        memcpy(c + nb, ob.tok, (size_t)(4 * S - nb) * 4);
        random_prompt(&g, c + 4 * S, 5, V);
        Out oc = {0}, refc;
        run_alone(c, nc, &greedy, &refc);
        kiln_engine_submit(e, c, nc, &greedy, on_token, &oc, NULL);
        drain(e);
        KilnEngineStats st2;
        kiln_engine_stats(e, &st2, sizeof st2);
        KT_CHECK(same(&oc, &refc), "prefix caching %d: tokens differ from alone", share);
        KT_CHECK(st2.prefix_tokens - st.prefix_tokens == (share ? 4 * S : 0),
                 "prefix caching %d: %lld cached tokens", share,
                 (long long)(st2.prefix_tokens - st.prefix_tokens));
        kiln_engine_close(e);
    }

    /* preemption: room for about two full requests (with sharing on, finished requests' cached pages
     * must be given back for the later ones) */
    int64_t page_bytes = 2LL * 2 /* layers */ * S * 2 /* kv heads */ * 16 /* head dim */ * 2 /* bf16 */;
    for (int share = 0; share < 2; share++) {
        e = open_engine(0, page_bytes * 9, !share);
        memset(together, 0, sizeof together);
        for (int i = 3; e && i < NR; i++)
            kiln_engine_submit(e, prompts[i], lens[i], &greedy, on_token, &together[i], NULL);
        if (e) drain(e);
        if (e) kiln_engine_stats(e, &st, sizeof st);
        for (int i = 3; e && i < NR; i++)
            KT_CHECK(same(&alone[i], &together[i]), "preemption (sharing %d): request %d differs", share, i);
        KT_CHECK(!e || st.preemptions > 0, "no preemption with %lld pages", (long long)st.kv_pages);
        /* prompt tokens count once however often a preempted request recomputes them (shared prefix
         * tokens are not computed at all); recomputed ones are counted apart */
        int64_t prompt_sum = 0;
        for (int i = 3; i < NR; i++)
            prompt_sum += lens[i];
        KT_CHECK(
            !e || (share ? st.prompt_tokens + st.prefix_tokens >= prompt_sum && st.prompt_tokens <= prompt_sum
                         : st.prompt_tokens == prompt_sum),
            "sharing %d: %lld prompt tokens (+%lld shared) for %lld", share, (long long)st.prompt_tokens,
            (long long)st.prefix_tokens, (long long)prompt_sum);
        KT_CHECK(!e || st.recomputed_tokens > 0, "sharing %d: %lld preemptions but nothing recomputed", share,
                 (long long)st.preemptions);
        kiln_engine_close(e);
    }

    /* sampling: seeds */
    KilnSampling hot = greedy;
    hot.temperature = 1.0f, hot.top_p = 0.95f, hot.seed = 7;
    Out h1, h2, h3 = {0}, h4;
    run_alone(prompts[4], lens[4], &hot, &h1);
    run_alone(prompts[4], lens[4], &hot, &h2);
    e = open_engine(0, 0, 0);
    if (e) {
        Out other = {0};
        kiln_engine_submit(e, prompts[2], lens[2], &hot, on_token, &other, NULL);
        kiln_engine_submit(e, prompts[4], lens[4], &hot, on_token, &h3, NULL);
        drain(e);
    }
    kiln_engine_close(e);
    hot.seed = 8;
    run_alone(prompts[4], lens[4], &hot, &h4);
    KT_CHECK(same(&h1, &h2) && same(&h1, &h3), "sampling with one seed is not reproducible");
    KT_CHECK(!same(&h1, &h4), "seeds 7 and 8 gave the same %d tokens", h1.n);

    /* stop tokens, max_tokens, abort */
    KilnSampling stop = greedy;
    int32_t stop_tok = alone[5].tok[5];
    stop.stop_tokens = &stop_tok, stop.n_stop = 1;
    Out os;
    run_alone(prompts[5], lens[5], &stop, &os);
    int first = 0;
    while (alone[5].tok[first] != stop_tok)
        first++;
    KT_CHECK(os.n == first + 1 && os.finish == KILN_FINISH_STOP, "stop token: %d tokens, finish %d", os.n,
             os.finish);
    e = open_engine(0, 0, 0);
    if (e) {
        Out a1 = {.abort_after = 3}, a2 = {0}, a3 = {0};
        int64_t id3;
        kiln_engine_submit(e, prompts[1], lens[1], &greedy, on_token, &a1, NULL);
        kiln_engine_submit(e, prompts[2], lens[2], &greedy, on_token, &a2, NULL);
        kiln_engine_submit(e, prompts[3], lens[3], &greedy, on_token, &a3, &id3);
        kiln_engine_step(e, NULL);
        KT_CHECK(kiln_engine_abort(e, id3) == KILN_OK, "abort");
        drain(e);
        KT_CHECK(a1.n == 3 && a1.finish == KILN_FINISH_ABORT && a1.finish_calls == 1,
                 "callback abort: %d, %d", a1.n, a1.finish);
        KT_CHECK(a3.finish == KILN_FINISH_ABORT && a3.n == 1, "abort by id: %d tokens, finish %d", a3.n,
                 a3.finish);
        KT_CHECK(same(&a2, &alone[2]), "a neighbour of aborted requests changed");
        KT_CHECK(kiln_engine_abort(e, 999) == KILN_ERR_ARG, "abort of no request");
        /* bad requests */
        int32_t bad = V;
        KT_CHECK(kiln_engine_submit(e, &bad, 1, &greedy, NULL, NULL, NULL) == KILN_ERR_ARG,
                 "token %d accepted", V);
        KT_CHECK(kiln_engine_submit(e, prompts[0], 0, &greedy, NULL, NULL, NULL) == KILN_ERR_ARG,
                 "empty prompt");
        /* callbacks that submit (the request array moves) and try to step */
        Chain ch = {.e = e, .prompt = prompts[3], .n = lens[3]};
        KilnSampling six = greedy;
        six.max_tokens = 6;
        Out ref6;
        run_alone(prompts[3], lens[3], &six, &ref6);
        KT_CHECK(kiln_engine_submit(e, prompts[1], lens[1], &six, on_chain, &ch, NULL) == KILN_OK, "chain");
        drain(e);
        int chain_ok = ch.spawned == 24 && ch.step_refused;
        for (int i = 0; i < 24; i++)
            chain_ok &= same(&ch.outs[i], &ref6);
        KT_CHECK(chain_ok, "requests submitted from a callback: %d spawned, step refused %d", ch.spawned,
                 ch.step_refused);
        /* option structs from an older kiln.h (shorter) still work; an unset size is refused */
        KilnSampling short_s = greedy;
        short_s.size = (int)offsetof(KilnSampling, stop_tokens);
        Out o1 = {0};
        KT_CHECK(kiln_engine_submit(e, prompts[2], lens[2], &short_s, on_token, &o1, NULL) == KILN_OK,
                 "short sampling");
        drain(e);
        KT_CHECK(same(&o1, &alone[2]), "a short sampling struct changed the tokens");
        short_s.size = 0;
        KT_CHECK(kiln_engine_submit(e, prompts[2], lens[2], &short_s, NULL, NULL, NULL) == KILN_ERR_ARG,
                 "size 0");
        KilnEngineOptions old;
        kiln_engine_options_init(&old);
        old.device = -2, old.size = (int)offsetof(KilnEngineOptions, no_cuda_graphs);
        KilnEngine *e2 = NULL;
        char err[512];
        KT_CHECK(kiln_engine_open(pkg_path, weights_path, &old, &e2, err, sizeof err) == KILN_OK,
                 "short options: %s", err);
        kiln_engine_close(e2);
        old.size = 0;
        KT_CHECK(kiln_engine_open(pkg_path, weights_path, &old, &e2, err, sizeof err) == KILN_ERR_ARG && !e2,
                 "options size 0");
        /* scoring */
        float *logits = malloc((size_t)lens[5] * (size_t)V * sizeof *logits);
        KT_CHECK(logits && kiln_engine_score(e, prompts[5], lens[5], logits) == KILN_OK, "score: %s",
                 kiln_engine_errmsg(e));
        if (logits) {
            const float *last = logits + (size_t)(lens[5] - 1) * (size_t)V;
            int best = 0;
            for (int j = 1; j < V; j++)
                if (last[j] > last[best]) best = j;
            KT_CHECK(best == alone[5].tok[0], "score argmax %d, greedy %d", best, alone[5].tok[0]);
        }
        free(logits);
        kiln_engine_close(e);
    }
    /* a KV cache of 3 pages: a prompt larger than it is refused; a request that outgrows it ends with
     * LENGTH when its tokens fill it (no endless waiting) */
    e = open_engine(0, page_bytes * 3, 0);
    if (e) {
        KilnSampling lng = greedy;
        lng.max_tokens = 100;
        lng.ignore_eos = 1;
        Out o = {0};
        KT_CHECK(kiln_engine_submit(e, prompts[5], 3 * S, &lng, NULL, NULL, NULL) == KILN_ERR_ARG,
                 "a prompt filling the whole cache was accepted");
        KT_CHECK(kiln_engine_submit(e, prompts[2], lens[2], &lng, on_token, &o, NULL) == KILN_OK,
                 "small pool");
        drain(e);
        KT_CHECK(o.finish == KILN_FINISH_LENGTH && lens[2] + o.n == 3 * S, "small pool: %d tokens, finish %d",
                 o.n, o.finish);
        kiln_engine_close(e);
    }
    test_host_sampling(prompts[4], lens[4], V, &g);
    test_tuning(prompts[4], lens[4], V);
    kf_scratch_close();
    return kt_done("test_engine");
}
