/* rt_engine_open.c — opening and closing the engine of kiln.h (the state: rt_engine_impl.h).
 *
 * Open: plan (rt_plan) for the executor's target -> tuned binaries (rt_tune) -> kernels loaded (rt_exec)
 * -> weights checked (against the package, and a GGUF file's metadata against the config) and read into
 * device memory (rt_weights) -> activation arena and per-step input buffers at the plan's maxima -> the KV
 * pool (every input whose shape starts with P) from the budget -> page manager (rt_kvcache).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kiln.h"
#include "rt_engine.h"
#include "rt_engine_impl.h"
#include "rt_exec.h"
#include "rt_file.h"
#include "rt_gguf.h"
#include "rt_kvcache.h"
#include "rt_package.h"
#include "rt_plan.h"
#include "rt_spec.h"
#include "rt_tokenizer.h"
#include "rt_tune.h"
#include "rt_weights.h"

static const char *config_value(KilnPackage *pkg, const char *key, char *buf, size_t n)
{
    sqlite3_stmt *st = NULL;
    const char *v = NULL;
    if (sqlite3_prepare_v2(rt_pkg_db(pkg), "SELECT value FROM config WHERE key = ?1", -1, &st, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
            snprintf(buf, n, "%s", (const char *)sqlite3_column_text(st, 0));
            v = buf;
        }
    }
    sqlite3_finalize(st);
    return v;
}

/* Config value `key` as a whole decimal integer in [lo, hi] into *out (dflt when the package has no such
 * row). A value that is not one is a corrupt package: the config drives sizes the engine allocates. */
static KilnStatus config_int(KilnEngine *e, KilnPackage *pkg, const char *key, int64_t dflt, int64_t lo,
                             int64_t hi, int64_t *out)
{
    char buf[64], *end = NULL;
    const char *v = config_value(pkg, key, buf, sizeof buf);
    *out = dflt;
    if (!v) return KILN_OK;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || (*v < '0' || *v > '9') || x < lo || x > hi)
        return rt_engine_fail(e, KILN_ERR_CORRUPT, "package config %s '%s': want an integer in %lld..%lld",
                              key, v, (long long)lo, (long long)hi);
    *out = x;
    return KILN_OK;
}

/* The config rows that decide how the engine and the weight readers work (head counts and page size: the
 * engine pages the cache and reorders a GGUF file's Q/K rows by them; widths, eps and RoPE: what a
 * weights file is checked against) must be what the kernels were compiled for: each kernel's spec values
 * against the config's, and one KV write per layer. A config edited with its hash recomputed is caught. */
static KilnStatus config_agrees(KilnEngine *e, KilnPackage *pkg, const char *package)
{
    static const struct {
        const char *family, *key, *config;
    } t[] = {{"attention", "H", "n_heads"},
             {"attention", "Hkv", "n_kv_heads"},
             {"attention", "page_size", "page_size"},
             {"attention", "window", "sliding_window"},
             {"kv_write", "H", "n_heads"},
             {"kv_write", "Hkv", "n_kv_heads"},
             {"kv_write", "page_size", "page_size"},
             {"kv_write", "theta", "rope_theta"},
             {"kv_write", "scaling", "rope_scaling"},
             {"rmsnorm", "C", "hidden_size"},
             {"rmsnorm", "eps", "rms_eps"},
             {"embedding", "C", "hidden_size"},
             {"embedding", "V", "vocab_size"}};
    const RtPlan *p = e->plan;
    for (int i = 0; i < p->n_kernels; i++)
        for (size_t j = 0; j < sizeof t / sizeof t[0]; j++) {
            const RtPlanKernel *k = &p->kernels[i];
            if (strcmp(k->family, t[j].family)) continue;
            char want[64], buf[64], *end = NULL;
            size_t kl = strlen(t[j].key);
            const char *at = k->spec;
            while ((at = strstr(at, t[j].key)) && !(at[-1] == ' ' && at[kl] == '='))
                at += kl;
            const char *have = config_value(pkg, t[j].config, buf, sizeof buf);
            if (!at || !have) continue; /* a spec or config without the key: nothing to compare */
            snprintf(want, sizeof want, "%.*s", (int)strcspn(at + kl + 1, " "), at + kl + 1);
            double a = strtod(want, &end);
            int num = end != want && !*end, same = !strcmp(want, have);
            if (num && !same) {
                double b = strtod(have, &end);
                same = end != have && !*end && fabs(a - b) <= 1e-6 * fabs(a);
            }
            if (!same)
                return rt_engine_fail(e, KILN_ERR_CORRUPT, "%s: config %s is %s, but kernel %s has %s=%s",
                                      package, t[j].config, have, k->name, t[j].key, want);
        }
    char buf[64];
    const char *layers = config_value(pkg, "n_layers", buf, sizeof buf);
    int writes = 0;
    for (int i = 0; i < p->n_launches; i++)
        writes += !strcmp(p->kernels[p->launches[i].kernel].family, "kv_write");
    if (layers && writes && strtoll(layers, NULL, 10) != writes)
        return rt_engine_fail(e, KILN_ERR_CORRUPT,
                              "%s: config n_layers is %s, but the plan writes %d KV caches", package, layers,
                              writes);
    return KILN_OK;
}

/* A config value as a real number, or NAN when the package has none (or it is not a number). */
static double config_real(KilnPackage *pkg, const char *key)
{
    char buf[64], *end = NULL;
    const char *v = config_value(pkg, key, buf, sizeof buf);
    double x = v ? strtod(v, &end) : NAN;
    return v && end != v && !*end ? x : NAN;
}

/* A GGUF file's metadata against the package it is loaded into. Sizes that decide how tensors are read
 * (heads: llama.cpp's Q/K row order; layers, widths, vocabulary) must agree: a contradiction fails the
 * open. Values the kernels were compiled with (context, RoPE base, norm epsilon) are the package's: a
 * different one in the file is said once, as a warning, and the package wins. */
static KilnStatus gguf_agrees(KilnEngine *e, KilnPackage *pkg, const char *path, const RtGgufFile *g)
{
    const char *a = NULL;
    uint64_t alen = 0;
    char arch[64];
    if (rt_gguf_get_str(g, "general.architecture", &a, &alen, NULL, 0) != KILN_OK || !alen ||
        alen >= sizeof arch)
        return KILN_OK; /* the tensors' names and shapes are checked anyway */
    memcpy(arch, a, alen), arch[alen] = 0;
    for (size_t i = 0; i < alen; i++)
        if (!((arch[i] >= 'a' && arch[i] <= 'z') || (arch[i] >= '0' && arch[i] <= '9') || arch[i] == '_'))
            return KILN_OK;
    static const struct {
        const char *gguf, *config;
        int must; /* 1: a contradiction is an error; 0: a warning, the package wins */
    } keys[] = {
        {"attention.head_count", "n_heads", 1},
        {"attention.head_count_kv", "n_kv_heads", 1},
        {"block_count", "n_layers", 1},
        {"embedding_length", "hidden_size", 1},
        {"feed_forward_length", "intermediate_size", 1},
        {"context_length", "max_seq_len", 0},
        {"rope.freq_base", "rope_theta", 0},
        {"attention.layer_norm_rms_epsilon", "rms_eps", 0},
    };
    for (unsigned i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char key[128];
        snprintf(key, sizeof key, "%s.%s", arch, keys[i].gguf);
        float f = 0;
        uint64_t u = 0;
        int is_int = rt_gguf_get_u64(g, key, &u, NULL, 0) == KILN_OK;
        if (!is_int && rt_gguf_get_f32(g, key, &f, NULL, 0) != KILN_OK) continue;
        double file = is_int ? (double)u : (double)f, want = config_real(pkg, keys[i].config);
        if (isnan(want) || fabs(file - want) <= 1e-6 * fabs(want)) continue;
        if (keys[i].must)
            return rt_engine_fail(e, KILN_ERR_CORRUPT, "%s: %s is %g, but the package's %s is %g", path, key,
                                  file, keys[i].config, want);
        rt_engine_log(e, "warning: %s: %s is %g, the package's %s %g (the package's is used)", path, key,
                      file, keys[i].config, want);
    }
    const RtGgufKv *tok = rt_gguf_kv_find(g, "tokenizer.ggml.tokens");
    double vocab = config_real(pkg, "vocab_size");
    if (tok && tok->type == RT_GGUF_VAL_ARRAY && !isnan(vocab) && (double)tok->count > vocab)
        return rt_engine_fail(e, KILN_ERR_CORRUPT,
                              "%s: the tokenizer has %llu tokens, but the package's vocab_size is %g", path,
                              (unsigned long long)tok->count, vocab);
    return KILN_OK;
}

/* ---- open ---- */

static void tune_log(void *user, const char *line)
{
    KilnEngine *e = user;
    if (e->log) e->log(e->log_user, line);
}

/* The tuned binaries of the store at path for this device (rt_tune.h): routed into the plan before the
 * kernels load. The store must open; what is inside it only ever falls back to the defaults. */
static KilnStatus apply_tuning(KilnEngine *e, const char *path)
{
    RtTdb *db = NULL;
    KilnStatus s = rt_tdb_open(path, RT_TDB_READ, &db, e->err, sizeof e->err);
    if (s == KILN_OK)
        s = rt_tune_apply(e->plan, e->x, db, e->max_step_tokens, tune_log, e, e->err, sizeof e->err);
    rt_tdb_close(db);
    return s;
}

static KilnStatus load_kernels(KilnEngine *e)
{
    RtPlan *p = e->plan;
    if (!(e->kernels = calloc((size_t)p->n_kernels * RT_PLAN_MAX_BINS + 1, sizeof *e->kernels)))
        return rt_engine_fail(e, KILN_ERR_NOMEM, "out of memory");
    int n = 0, tuned = 0;
    for (int i = 0; i < p->n_kernels; i++)
        for (int b = 0; b < p->kernels[i].n_bins; b++) { /* none: not launched (rt_plan_load checked) */
            RtPlanKernel *k = &p->kernels[i];
            char why[512];
            KilnStatus s = rt_exec_load(e->x, k->name, &k->bins[b], &e->kernels[i * RT_PLAN_MAX_BINS + b],
                                        why, sizeof why);
            if (s != KILN_OK && !k->bins[b].tuned) return rt_engine_fail(e, s, "%s", why);
            if (s != KILN_OK) { /* a tuned binary that does not load: its buckets keep the defaults */
                rt_engine_log(e, "tuning: %s: ignored %s: %s", k->name, k->bins[b].config, why);
                rt_tune_drop(k, b);
                continue;
            }
            n++;
            tuned += k->bins[b].tuned;
        }
    rt_engine_log(e, "kernels: %d binaries for %d kernels (%d tuned, loaded from the store)", n, p->n_kernels,
                  tuned);
    for (int i = 0; i < p->n_kernels; i++) /* rt_plan_pick fills the device past every BM */
        p->kernels[i].n_sms = rt_exec_is_host(e->x) ? 0 : rt_exec_sm_count(e->x);
    e->attn_block_m = 64; /* the split heuristic counts the programs of the attention binary that runs */
    const int64_t no_m[RT_PLAN_MAX_ARGS] = {0}; /* attention has no M: one bucket */
    for (int i = 0; i < p->n_kernels; i++)
        if (!strcmp(p->kernels[i].family, "attention"))
            e->attn_block_m = (int)rt_plan_config_i(
                p->kernels[i].bins[rt_plan_pick(&p->kernels[i], no_m)].config, "BLOCK_M", 64);
    RtTuneCounts c;
    rt_tune_report(p, e->tuning ? tune_log : NULL, e, &c);
    if (!e->tuning) rt_engine_log(e, "tuning: no store: every kernel runs the package's default configs");
    e->stats.kernels_tuned = c.tuned, e->stats.kernels_nearest = c.nearest, e->stats.kernels_default = c.dflt;
    return KILN_OK;
}

/* Safetensors weights: the Hugging Face tokenizer.json in their directory (or in the directory given), when
 * there; a broken one is said at every use, as a GGUF's. */
static void hf_tokenizer(KilnEngine *e, const char *path)
{
    struct stat st;
    char tj[1200];
    int dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    const char *slash = strrchr(path, '/');
    if (dir)
        snprintf(tj, sizeof tj, "%s/tokenizer.json", path);
    else
        snprintf(tj, sizeof tj, "%.*stokenizer.json", slash ? (int)(slash - path + 1) : 0, path);
    if (stat(tj, &st) != 0) return; /* none: token ids still work */
    if (rt_tok_create_hf(tj, &e->tok, &e->chat_template, e->tok_why, sizeof e->tok_why) != KILN_OK) {
        rt_engine_log(e, "no tokenizer: %s", e->tok_why);
        e->tok = NULL;
    } else {
        rt_engine_log(e, "tokenizer: %s (%d tokens)", tj, rt_tok_n_vocab(e->tok));
    }
}

/* options.tokenizer: the tokenizer.json at path (or in the directory path) replaces the weights' tokenizer;
 * one that does not load or whose ids exceed the vocabulary fails the open. */
static KilnStatus given_tokenizer(KilnEngine *e, const char *path)
{
    struct stat st;
    char tj[1200];
    int dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    snprintf(tj, sizeof tj, dir ? "%s/tokenizer.json" : "%s", path);
    RtTokenizer *t = NULL;
    char *tpl = NULL, why[512];
    if (rt_tok_create_hf(tj, &t, &tpl, why, sizeof why) != KILN_OK)
        return rt_engine_fail(e, KILN_ERR_ARG, "options.tokenizer: %s", why);
    if (rt_tok_n_vocab(t) > e->vocab) {
        rt_engine_fail(e, KILN_ERR_ARG, "options.tokenizer: %s has %d tokens, the package's vocabulary %d",
                       tj, rt_tok_n_vocab(t), e->vocab);
        rt_tok_destroy(t), free(tpl);
        return KILN_ERR_ARG;
    }
    rt_tok_destroy(e->tok), free(e->chat_template);
    e->tok = t, e->chat_template = tpl, e->tok_why[0] = 0;
    snprintf(e->tok_src, sizeof e->tok_src, "%.*s", (int)sizeof e->tok_src - 1, tj);
    rt_engine_log(e, "tokenizer: %s (%d tokens, given)", tj, rt_tok_n_vocab(t));
    return KILN_OK;
}

/* Reads every weight the plan names into device memory, converted to the package's dtypes, each checked
 * for NaN/Inf (a sample, or every value with check_all: rt_w_finite); path NULL: random weights from seed
 * (rt_w_random). */
static KilnStatus load_weights(KilnEngine *e, KilnPackage *pkg, const char *package, const char *path,
                               uint64_t seed, int check_all)
{
    RtPlan *p = e->plan;
    RtWeights *w = NULL;
    RtWeightSpec *specs = calloc((size_t)p->n_weights + 1, sizeof *specs);
    void *stage = NULL;
    size_t stage_bytes = 0;
    KilnStatus s = !specs ? rt_engine_fail(e, KILN_ERR_NOMEM, "out of memory")
                   : path ? rt_w_open(path, &w, e->err, sizeof e->err)
                          : KILN_OK;
    for (int i = 0; s == KILN_OK && i < p->n_weights; i++) {
        const RtPlanWeight *pw = &p->weights[i];
        if (!rt_w_spec_parse(pw->name, pw->dtype, pw->shape, pw->nbytes, &specs[i]))
            s = rt_engine_fail(e, KILN_ERR_CORRUPT, "package weight %s: bad shape %s", pw->name, pw->shape);
    }
    if (s == KILN_OK && w) s = rt_w_check(w, specs, p->n_weights, e->err, sizeof e->err);
    for (int i = 0; s == KILN_OK && !w && i < p->n_weights; i++) /* random values: the package alone */
        s = rt_w_spec_check(&specs[i], package, e->err, sizeof e->err);
    if (s == KILN_OK && w && rt_w_gguf(w)) s = gguf_agrees(e, pkg, path, rt_w_gguf(w));
    /* all of them must fit before the first is read (a package may ask for more than the device has) */
    uint64_t want = 0, have = rt_exec_is_host(e->x) ? rt_exec_mem_total(e->x) : rt_exec_mem_free(e->x);
    for (int i = 0; s == KILN_OK && i < p->n_weights; i++)
        want += (uint64_t)specs[i].nbytes; /* each < 2^62 (checked above), at most 2^16 of them */
    if (s == KILN_OK && want > have)
        s = rt_engine_fail(e, KILN_ERR_NOMEM, "%s: the weights take %.1f GB; the %s has %.1f GB", package,
                           (double)want / 1e9,
                           rt_exec_is_host(e->x) ? "host's physical memory" : "GPU's free memory",
                           (double)have / 1e9);
    if (s == KILN_OK && !(e->weights = calloc((size_t)p->n_weights + 1, sizeof *e->weights)))
        s = rt_engine_fail(e, KILN_ERR_NOMEM, "out of memory");
    int64_t total = 0;
    for (int i = 0; s == KILN_OK && i < p->n_weights; i++) {
        size_t n = (size_t)specs[i].nbytes;
        s = rt_exec_alloc(e->x, n, &e->weights[i], e->err, sizeof e->err);
        if (s != KILN_OK) break;
        void *dst = (void *)(uintptr_t)e->weights[i];
        if (!rt_exec_is_host(e->x)) {
            if (n > stage_bytes) {
                free(stage);
                stage_bytes = n;
                if (!(stage = malloc(n))) {
                    s = rt_engine_fail(e, KILN_ERR_NOMEM, "out of host memory (weight %s, %zu bytes)",
                                       specs[i].name, n);
                    break;
                }
            }
            dst = stage;
        }
        if (w)
            s = rt_w_read(w, &specs[i], dst, e->err, sizeof e->err);
        else
            rt_w_random(&specs[i], seed, dst);
        int64_t at = 0;
        if (s == KILN_OK && w && !rt_w_finite(&specs[i], dst, check_all, &at))
            s = rt_engine_fail(e, KILN_ERR_CORRUPT, "%s: weight %s: element %lld is NaN or Inf (%s)", path,
                               specs[i].name, (long long)at,
                               check_all ? "every value checked" : "a sample of each tensor checked");
        if (s == KILN_OK && dst == stage)
            s = rt_exec_put(e->x, e->weights[i], stage, n, e->err, sizeof e->err);
        total += (int64_t)n;
    }
    if (path) snprintf(e->tok_src, sizeof e->tok_src, "%s", path);
    if (s == KILN_OK && w && rt_w_gguf(w)) {
        /* a file with no tokenizer is fine (token ids still work); a broken one is said at every use */
        if (rt_tok_create_gguf(rt_w_gguf(w), &e->tok, e->tok_why, sizeof e->tok_why) != KILN_OK) {
            rt_engine_log(e, "no tokenizer: %s", e->tok_why);
            e->tok = NULL;
            if (!rt_gguf_kv_find(rt_w_gguf(w), "tokenizer.ggml.model")) e->tok_why[0] = 0;
        }
        const RtGgufKv *ct = rt_gguf_kv_find(rt_w_gguf(w), "tokenizer.chat_template");
        if (ct && ct->type == RT_GGUF_VAL_STRING && ct->len < ((uint64_t)1 << 20) &&
            (e->chat_template = malloc((size_t)ct->len + 1))) {
            memcpy(e->chat_template, ct->data, (size_t)ct->len);
            e->chat_template[ct->len] = 0;
        }
    } else if (s == KILN_OK && w && path) {
        hf_tokenizer(e, path);
    }
    if (s == KILN_OK)
        rt_engine_log(e, "weights: %d tensors, %.1f MB from %s", p->n_weights, (double)total / 1e6,
                      path ? path : "random values (no weights file)");
    free(stage);
    free(specs);
    rt_w_close(w);
    return s;
}

static int input_index(KilnEngine *e, const char *name)
{
    int i = rt_plan_buf(e->plan, name);
    return i >= 0 && e->plan->bufs[i].kind == RT_BUF_INPUT ? i : -1;
}

/* Bytes of input `name` that a step of the maxima writes (0 for inputs the engine does not fill). */
static int64_t input_need(const KilnEngine *e, const char *name)
{
    int64_t T = e->max_step_tokens, B = e->max_seqs;
    if (!strcmp(name, "tokens") || !strcmp(name, "positions") || !strcmp(name, "slots")) return T * 4;
    if (!strcmp(name, "block_table")) return B * e->max_pages * 4;
    if (!strcmp(name, "seq_lens")) return B * 4;
    if (!strcmp(name, "logit_rows")) return (int64_t)e->max_rows * 4;
    if (!strcmp(name, "cu_q")) return (B + 1) * 4;
    if (!strcmp(name, "sampling")) return (int64_t)e->max_rows * 16;
    if (!strcmp(name, "tree_mask")) return T * 8;
    return 0;
}

/* Sizes the KV pool and allocates every input buffer at the step maxima. */
static KilnStatus alloc_inputs(KilnEngine *e, KilnPackage *pkg, int64_t kv_budget)
{
    RtPlan *p = e->plan;
    int64_t sym[RT_SYM_COUNT] = {0};
    int64_t page_bytes = 0;
    sym[RT_SYM_P] = 1;
    for (int i = 0; i < p->n_bufs; i++) {
        const RtPlanBuf *b = &p->bufs[i];
        int starts_p = 0;
        if (b->kind != RT_BUF_INPUT) continue;
        int64_t n = rt_engine_shape_elems(b->shape, sym, &starts_p);
        if (n < 0 || !rt_engine_dtype_bytes(b->dtype) ||
            n > (INT64_MAX / 4) / rt_engine_dtype_bytes(b->dtype) ||
            (starts_p && page_bytes > INT64_MAX / 4 - n * rt_engine_dtype_bytes(b->dtype)))
            return rt_engine_fail(e, KILN_ERR_CORRUPT, "package input %s: cannot size %s %s", b->name,
                                  b->dtype, b->shape);
        if (starts_p) page_bytes += n * rt_engine_dtype_bytes(b->dtype);
    }
    int64_t ps, ctx;
    KilnStatus cs = config_int(e, pkg, "page_size", 16, 1, 1024, &ps);
    if (cs == KILN_OK) cs = config_int(e, pkg, "max_seq_len", 4096, 1, 1 << 24, &ctx);
    if (cs != KILN_OK) return cs;
    e->page_size = (int32_t)ps, e->max_ctx = (int32_t)ctx;
    if (page_bytes <= 0) return rt_engine_fail(e, KILN_ERR_CORRUPT, "package has no paged KV cache inputs");
    /* the pages the kernels index are [P, page_size, ...]: the config must say the same size */
    for (int i = 0; i < p->n_bufs; i++) {
        const RtPlanBuf *b = &p->bufs[i];
        if (b->kind == RT_BUF_INPUT && !strncmp(b->shape, "[P,", 3) && strtoll(b->shape + 3, NULL, 10) != ps)
            return rt_engine_fail(e, KILN_ERR_CORRUPT,
                                  "package input %s %s: pages of another size than config page_size %d",
                                  b->name, b->shape, e->page_size);
    }
    /* KV pool: pages of page_size tokens; enough for max_seqs full contexts at most */
    int64_t per_seq = (e->max_ctx + e->page_size - 1) / e->page_size;
    int64_t want = per_seq * e->max_seqs + 1;
    if (kv_budget <= 0) {
        if (rt_exec_is_host(e->x))
            kv_budget = (int64_t)1 << 30;
        else
            kv_budget = (int64_t)((double)rt_exec_mem_free(e->x) * 0.9) - ((int64_t)64 << 20);
    }
    int64_t pages = kv_budget / page_bytes;
    if (pages > want) pages = want;
    if (pages > INT32_MAX / e->page_size) pages = INT32_MAX / e->page_size;
    if (pages < 2)
        return rt_engine_fail(e, KILN_ERR_FULL,
                              "KV cache: %lld bytes hold %lld pages of %lld bytes; need at least 2",
                              (long long)kv_budget, (long long)pages, (long long)page_bytes);
    e->n_pages = (int32_t)pages;
    e->max_pages = (int32_t)(per_seq < pages ? per_seq : pages);
    sym[RT_SYM_T] = e->max_step_tokens, sym[RT_SYM_B] = e->max_seqs, sym[RT_SYM_MP] = e->max_pages;
    sym[RT_SYM_R] = e->max_rows, sym[RT_SYM_P] = e->n_pages;
    if (!(e->inputs = calloc((size_t)p->n_bufs + 1, sizeof *e->inputs)) ||
        !(e->input_cap = calloc((size_t)p->n_bufs + 1, sizeof *e->input_cap)))
        return rt_engine_fail(e, KILN_ERR_NOMEM, "out of memory");
    static const char *const known[] = {"tokens", "positions",  "slots",    "block_table", "seq_lens",
                                        "cu_q",   "logit_rows", "sampling", "tree_mask"};
    for (int i = 0; i < p->n_bufs; i++) {
        const RtPlanBuf *b = &p->bufs[i];
        int starts_p = 0, ok = 0;
        if (b->kind != RT_BUF_INPUT) continue;
        int64_t elems = rt_engine_shape_elems(b->shape, sym, &starts_p);
        if (elems < 0 || elems > (INT64_MAX / 4) / rt_engine_dtype_bytes(b->dtype))
            return rt_engine_fail(e, KILN_ERR_CORRUPT, "package input %s: %s is too large", b->name,
                                  b->shape);
        int64_t bytes = elems * rt_engine_dtype_bytes(b->dtype);
        int64_t need = input_need(e, b->name);
        if (bytes < need)
            return rt_engine_fail(e, KILN_ERR_CORRUPT, "package input %s %s: %lld bytes, a step writes %lld",
                                  b->name, b->shape, (long long)bytes, (long long)need);
        for (unsigned k = 0; k < sizeof known / sizeof known[0]; k++)
            ok |= !strcmp(b->name, known[k]);
        if (!ok && !starts_p)
            return rt_engine_fail(e, KILN_ERR_UNSUPPORTED,
                                  "package input %s %s: not one this engine provides", b->name, b->shape);
        KilnStatus s = rt_exec_alloc(e->x, (size_t)bytes, &e->inputs[i], e->err, sizeof e->err);
        if (s != KILN_OK) return s;
        e->input_cap[i] = bytes;
        /* the KV pool starts as zeros: attention never reads unwritten rows, but keep them finite */
        if (starts_p && (s = rt_exec_fill(e->x, e->inputs[i], 0, (size_t)bytes, e->err, sizeof e->err)))
            return s;
    }
    e->in_tokens = input_index(e, "tokens"), e->in_positions = input_index(e, "positions");
    e->in_slots = input_index(e, "slots"), e->in_block_table = input_index(e, "block_table");
    e->in_seq_lens = input_index(e, "seq_lens"), e->in_cu_q = input_index(e, "cu_q");
    e->in_logit_rows = input_index(e, "logit_rows"), e->in_sampling = input_index(e, "sampling");
    e->in_tree_mask = input_index(e, "tree_mask");
    if (e->in_tokens < 0 || e->in_logit_rows < 0)
        return rt_engine_fail(e, KILN_ERR_UNSUPPORTED, "package has no tokens or logit_rows input");
    rt_engine_log(e, "KV cache: %d pages of %d tokens (%.1f MB), up to %d sequences x %d tokens per step",
                  e->n_pages, e->page_size, (double)page_bytes * (double)e->n_pages / 1e6, e->max_seqs,
                  e->max_step_tokens);
    return KILN_OK;
}

static KilnStatus alloc_step_arrays(KilnEngine *e)
{
    StepIn *in = &e->in;
    size_t T = (size_t)e->max_step_tokens, B = (size_t)e->max_seqs, R = (size_t)e->max_rows;
    in->tokens = calloc(T, 4), in->positions = calloc(T, 4), in->slots = calloc(T, 4);
    in->tree_mask = calloc(T, 8);
    in->block_table = calloc(B * (size_t)e->max_pages, 4), in->seq_lens = calloc(B, 4),
    in->cu_q = calloc(B + 1, 4);
    in->logit_rows = calloc(R, 4), in->sampling = calloc(R * 4, 4), in->row_req = calloc(R, sizeof(int));
    in->items = calloc(B, sizeof *in->items), in->item_req = calloc(B, sizeof(int));
    if (!in->tokens || !in->positions || !in->slots || !in->tree_mask || !in->block_table || !in->seq_lens ||
        !in->cu_q || !in->logit_rows || !in->sampling || !in->row_req || !in->items || !in->item_req)
        return rt_engine_fail(e, KILN_ERR_NOMEM, "out of memory");
    return KILN_OK;
}

void kiln_engine_options_init(KilnEngineOptions *o)
{
    memset(o, 0, sizeof *o);
    o->size = (int)sizeof *o;
    o->device = -1;
}

KilnStatus kiln_engine_open(const char *package, const char *weights, const KilnEngineOptions *opt,
                            KilnEngine **out, char *err, int errlen)
{
    if (out) *out = NULL;
    if (!weights) return rt_file_errf(err, errlen, KILN_ERR_ARG, "kiln_engine_open: NULL argument");
    return rt_engine_open(package, weights, 0, opt, out, err, errlen);
}

KilnStatus rt_engine_open(const char *package, const char *weights, uint64_t seed,
                          const KilnEngineOptions *opt, KilnEngine **out, char *err, int errlen)
{
    KilnEngineOptions given;
    kiln_engine_options_init(&given);
    if (out) *out = NULL;
    char why[256];
    if (kiln_engine_options_check(opt, why, sizeof why) != KILN_OK)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "kiln_engine_open: %s", why);
    if (opt) memcpy(&given, opt, (size_t)opt->size < sizeof given ? (size_t)opt->size : sizeof given);
    given.size = (int)sizeof given;
    opt = &given;
    if (!package || !out) return rt_file_errf(err, errlen, KILN_ERR_ARG, "kiln_engine_open: NULL argument");
    KilnEngine *e = calloc(1, sizeof *e);
    if (!e) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "out of memory");
    e->log = opt->log, e->log_user = opt->log_user, e->next_id = 1;
    e->profile = opt->profile, e->share_prefixes = !opt->no_prefix_sharing;
    KilnPackage *pkg = NULL;
    KilnStatus s = kiln_package_open(package, &pkg, e->err, sizeof e->err);
    if (s == KILN_OK) s = rt_exec_open(opt->device, opt->host_threads, &e->x, e->err, sizeof e->err);
    /* a pool beyond the memory there is fails here, before any allocation (the host would overcommit
     * and be killed later, not fail) */
    if (s == KILN_OK && (uint64_t)opt->kv_cache_bytes > (uint64_t)rt_exec_mem_total(e->x))
        s = rt_engine_fail(e, KILN_ERR_ARG,
                           "kiln_engine_open: options.kv_cache_bytes %lld: more than the %lld bytes of %s",
                           (long long)opt->kv_cache_bytes, (long long)rt_exec_mem_total(e->x),
                           rt_exec_is_host(e->x) ? "physical memory of the host" : "memory of the GPU");
    if (s == KILN_OK && !rt_exec_target(e->x))
        s = rt_engine_fail(e, KILN_ERR_UNSUPPORTED, "%s: kiln has no target for this GPU",
                           rt_exec_describe(e->x));
    if (s == KILN_OK) {
        rt_engine_log(e, "device: %s", rt_exec_describe(e->x));
        s = rt_plan_load(pkg, rt_exec_target(e->x), &e->plan, e->err, sizeof e->err);
    }
    if (s == KILN_OK) {
        RtPlan *p = e->plan;
        e->max_seqs = (int)(opt->max_seqs > 0 && opt->max_seqs < p->max_seqs ? opt->max_seqs : p->max_seqs);
        if (e->max_seqs > p->max_rows) e->max_seqs = (int)p->max_rows;
        int64_t t = opt->max_step_tokens > 0 ? opt->max_step_tokens : 2048;
        e->max_step_tokens = (int)(t < p->max_tokens ? t : p->max_tokens);
        /* logit rows per step: one per sequence, k+1 per speculating one (never more than tokens) */
        e->max_rows = (int)(p->max_rows < e->max_step_tokens ? p->max_rows : e->max_step_tokens);
        if (e->max_rows < e->max_seqs) e->max_rows = e->max_seqs;
        int64_t vocab = 0, heads = 1, kv_heads = 1;
        s = config_int(e, pkg, "vocab_size", 0, 1, 1 << 24, &vocab);
        if (s == KILN_OK) s = config_int(e, pkg, "n_heads", 1, 1, 1024, &heads);
        if (s == KILN_OK) s = config_int(e, pkg, "n_kv_heads", 1, 1, 1024, &kv_heads);
        e->vocab = (int32_t)vocab, e->heads = (int)heads, e->kv_heads = (int)kv_heads;
        if (s == KILN_OK) s = config_agrees(e, pkg, package);
        e->buf_next_tokens = rt_plan_output(p, "next_tokens");
        e->buf_logits = rt_plan_output(p, "logits");
        int lg = rt_plan_output(p, "logits");
        const RtPlanBuf *nt = e->buf_next_tokens >= 0 ? &p->bufs[e->buf_next_tokens] : NULL;
        if (s != KILN_OK)
            ;
        else if (!nt || e->vocab < 1)
            s = rt_engine_fail(e, KILN_ERR_UNSUPPORTED,
                               "%s: no next_tokens output or vocab_size (not a generator)", package);
        /* the engine reads the outputs from the arena: they must be activations big enough for a step */
        else if (nt->kind != RT_BUF_ACT || strcmp(nt->dtype, "i32") || nt->bytes < (int64_t)e->max_rows * 4)
            s = rt_engine_fail(e, KILN_ERR_CORRUPT,
                               "%s: output next_tokens is not an i32 activation of %d rows", package,
                               e->max_rows);
        else if (lg >= 0 &&
                 (p->bufs[lg].kind != RT_BUF_ACT || strcmp(p->bufs[lg].dtype, "f32") ||
                  p->bufs[lg].bytes / 4 / e->vocab < e->max_rows || strncmp(p->bufs[lg].shape, "[R,", 3) ||
                  strtoll(p->bufs[lg].shape + 3, NULL, 10) != e->vocab))
            s = rt_engine_fail(e, KILN_ERR_CORRUPT, "%s: output logits is not an f32 activation of %d x %d",
                               package, e->max_rows, e->vocab);
        rt_engine_log(e, "plan: %d kernels for %s, %d launches per step, %.1f MB of activations",
                      p->n_kernels, p->target, p->n_launches, (double)p->act_bytes / 1e6);
    }
    e->tuning = opt->tune_db && *opt->tune_db;
    if (s == KILN_OK && e->tuning) s = apply_tuning(e, opt->tune_db);
    if (s == KILN_OK) s = load_kernels(e);
    if (s == KILN_OK) s = load_weights(e, pkg, package, weights, seed, opt->check_weights);
    if (s == KILN_OK && opt->tokenizer && *opt->tokenizer) s = given_tokenizer(e, opt->tokenizer);
    if (s == KILN_OK) s = rt_exec_alloc(e->x, (size_t)e->plan->act_bytes, &e->arena, e->err, sizeof e->err);
    int sem = s == KILN_OK ? rt_plan_buf(e->plan, "%splitk_sem") : -1;
    if (sem >= 0) /* split-K tile counters (ir/sched.c): zero once; every launch leaves them zero */
        s = rt_exec_fill(e->x, e->arena + (uint64_t)e->plan->bufs[sem].offset, 0,
                         (size_t)e->plan->bufs[sem].bytes, e->err, sizeof e->err);
    if (s == KILN_OK) s = alloc_inputs(e, pkg, opt->kv_cache_bytes);
    if (s == KILN_OK) s = alloc_step_arrays(e);
    if (s == KILN_OK) {
        RtKvOptions ko = rt_kv_options_default();
        ko.n_pages = e->n_pages, ko.page_size = e->page_size;
        s = rt_kv_create(&ko, &e->kv, e->err, sizeof e->err);
    }
    e->eos = e->tok ? rt_tok_eos(e->tok) : -1;
    e->dump_dir = getenv("KILN_DUMP_DIR");
    if (e->dump_dir && !*e->dump_dir) e->dump_dir = NULL;
    e->use_graphs =
        s == KILN_OK && !rt_exec_is_host(e->x) && !opt->no_cuda_graphs && !e->profile && !e->dump_dir;
    if (s == KILN_OK && opt->draft_package && *opt->draft_package) {
        /* the draft model: the same device and options, its own pool; random weights when the target's are */
        KilnEngineOptions d = *opt;
        d.draft_package = d.draft_weights = d.tokenizer = NULL, d.profile = 0;
        char derr[512];
        if (weights && !(opt->draft_weights && *opt->draft_weights))
            s = rt_engine_fail(e, KILN_ERR_ARG,
                               "options.draft_weights: the draft model %s has no weights file",
                               opt->draft_package);
        else if ((s = rt_engine_open(opt->draft_package, weights ? opt->draft_weights : NULL, seed, &d,
                                     &e->draft, derr, sizeof derr)) != KILN_OK)
            rt_engine_fail(e, s, "draft model: %s", derr);
        else if (e->draft->vocab != e->vocab)
            s = rt_engine_fail(e, KILN_ERR_ARG, "draft model %s: vocabulary of %d tokens, the target's is %d",
                               opt->draft_package, e->draft->vocab, e->vocab);
    }
    if (s == KILN_OK && e->profile &&
        (!(e->prof_s = calloc((size_t)e->plan->n_kernels, sizeof *e->prof_s)) ||
         !(e->prof_n = calloc((size_t)e->plan->n_kernels, sizeof *e->prof_n))))
        s = rt_engine_fail(e, KILN_ERR_NOMEM, "out of memory");
    kiln_package_close(pkg);
    if (s != KILN_OK) { /* every line names its file: the package's own lines get its path */
        size_t pl = strlen(package), wl = weights ? strlen(weights) : 0;
        int named = (!strncmp(e->err, package, pl) && e->err[pl] == ':') ||
                    (weights && !strncmp(e->err, weights, wl) && e->err[wl] == ':') ||
                    !strncmp(e->err, "draft model", 11) || !strncmp(e->err, "options.", 8) ||
                    !strncmp(e->err, "kiln_engine_open", 16);
        rt_file_errf(err, errlen, s, named ? "%s%s" : "%s: %s", named ? "" : package, e->err);
        kiln_engine_close(e);
        return s;
    }
    e->stats.kv_pages = e->n_pages, e->stats.page_size = e->page_size;
    e->stats.max_seqs = e->max_seqs, e->stats.max_step_tokens = e->max_step_tokens;
    *out = e;
    return KILN_OK;
}

/* The profile: seconds per kernel, most first. */
static void log_profile(KilnEngine *e)
{
    const RtPlan *p = e->plan;
    double total = 0;
    for (int i = 0; i < p->n_kernels; i++)
        total += e->prof_s[i];
    rt_engine_log(e, "profile: %.3f s in kernels over %lld steps", total, (long long)e->stats.steps);
    for (int done = 0; done < p->n_kernels; done++) {
        int best = -1;
        for (int i = 0; i < p->n_kernels; i++)
            if (e->prof_n[i] >= 0 && (best < 0 || e->prof_s[i] > e->prof_s[best])) best = i;
        if (best < 0 || !e->prof_n[best]) break;
        rt_engine_log(e, "  %6.2f%% %9.3f ms %7lld launches  %s",
                      total > 0 ? 100 * e->prof_s[best] / total : 0, 1e3 * e->prof_s[best],
                      (long long)e->prof_n[best], p->kernels[best].name);
        e->prof_n[best] = -1;
    }
}

void kiln_engine_close(KilnEngine *e)
{
    if (!e) return;
    kiln_engine_close(e->draft); /* its sequences go with its pool */
    if (e->prof_s && e->prof_n && e->plan) log_profile(e);
    free(e->prof_s), free(e->prof_n);
    for (int i = 0; i < e->n_graphs; i++)
        rt_exec_graph_free(e->graphs[i].g);
    for (int i = 0; i < e->n_cache; i++)
        free(e->cache[i].tokens);
    for (int i = 0; i < e->n_reqs; i++)
        free(e->reqs[i].tokens), free(e->reqs[i].stop);
    free(e->reqs);
    if (e->x) {
        for (int i = 0; e->plan && e->kernels && i < e->plan->n_kernels * RT_PLAN_MAX_BINS; i++)
            rt_exec_unload(e->x, e->kernels[i]);
        for (int i = 0; e->plan && e->weights && i < e->plan->n_weights; i++)
            rt_exec_free(e->x, e->weights[i]);
        for (int i = 0; e->plan && e->inputs && i < e->plan->n_bufs; i++)
            if (e->inputs[i]) rt_exec_free(e->x, e->inputs[i]);
        if (e->arena) rt_exec_free(e->x, e->arena);
    }
    free(e->kernels), free(e->weights), free(e->inputs), free(e->input_cap);
    StepIn *in = &e->in;
    free(in->tokens), free(in->positions), free(in->slots), free(in->block_table), free(in->seq_lens);
    free(in->cu_q), free(in->tree_mask), free(in->logit_rows), free(in->sampling), free(in->row_req),
        free(in->items);
    free(in->item_req);
    rt_kv_destroy(e->kv);
    rt_tok_destroy(e->tok);
    free(e->chat_template);
    free(e->lp_logits), free(e->hs_row), free(e->hs_count);
    rt_plan_free(e->plan);
    rt_exec_close(e->x);
    free(e);
}

const char *kiln_engine_errmsg(const KilnEngine *e)
{
    return e ? e->err : "";
}

const char *kiln_engine_device(const KilnEngine *e)
{
    return e && e->x ? rt_exec_describe(e->x) : "";
}
