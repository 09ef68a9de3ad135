/* test_tune.c — the pieces of `kiln tune` below the engine (the engine-backed timer itself runs in
 * tests/cli/tune.sh on a tiny host package):
 *   - at_spec_parse: every kernel spec of the model shapes printed by kfam_spec_print parses back to a
 *     spec that builds the same kernel (same IR hash); bad texts are one line, KILN_ERR_CORRUPT;
 *   - at_compile for the host: a host-so with params, grid and the full config; a config the verifier
 *     refuses under the host's limits (2048 threads) and one the family refuses are KILN_ERR_UNSUPPORTED
 *     (INVALID), a bad spec KILN_ERR_ARG;
 *   - at_ahead (compile-ahead on threads): each candidate taken, in order or not, is the same binary an
 *     inline at_compile gives (or the same INVALID status); a config not in the list is -1; starting
 *     another kernel mid-way drops the rest; create(0) is NULL and NULL takes nothing;
 *   - at_search's hooks: serves() keeps a config from buckets it does not serve (no stats, never the
 *     winner there); keep() is called once per distinct winning config, before its results are put.
 * at_compile needs the LLVM host backend; those checks skip without it. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autotune/at_ahead.h"
#include "autotune/at_compile.h"
#include "autotune/at_fake.h"
#include "autotune/at_search.h"
#include "codegen/llvm/cg_host.h"
#include "kt.h"

static void test_spec_parse(void)
{
    IrArena *a = ir_arena_create();
    char err[256], h1[17], h2[17];
    /* specs as the lowering makes them: ints, floats, strings */
    KfamSpec specs[4];
    specs[0] = kfam_spec("rmsnorm");
    kfam_spec_int(&specs[0], "C", 576), kfam_spec_float(&specs[0], "eps", 1e-5);
    kfam_spec_str(&specs[0], "dtype", "bf16"), kfam_spec_int(&specs[0], "residual", 1);
    specs[1] = kfam_spec("matmul");
    kfam_spec_int(&specs[1], "N", 1536), kfam_spec_int(&specs[1], "K", 576);
    kfam_spec_str(&specs[1], "dtype", "f32"), kfam_spec_str(&specs[1], "epilogue", "silu_mul");
    specs[2] = kfam_spec("embedding");
    kfam_spec_int(&specs[2], "C", 576), kfam_spec_int(&specs[2], "V", 49152);
    kfam_spec_str(&specs[2], "dtype", "bf16");
    specs[3] = kfam_spec("sample");
    kfam_spec_int(&specs[3], "V", 49152);
    for (int i = 0; i < 4; i++) {
        IrBuf text = {0};
        kfam_spec_print(&specs[i], &text);
        KfamSpec back;
        const KfamFamily *f = kfam_find(specs[i].family);
        KilnStatus st = at_spec_parse(a, text.s, &back, err, sizeof err);
        KT_CHECK(st == KILN_OK && at_ir_hash(f, &specs[i], h1, err, sizeof err) == KILN_OK &&
                     at_ir_hash(f, &back, h2, err, sizeof err) == KILN_OK && !strcmp(h1, h2),
                 "spec '%s' parsed back: %s (%s vs %s)", text.s, err, h1, h2);
        ir_buf_free(&text);
    }
    static const char *const bad[] = {"", "nofamily C=1", "rmsnorm C", "rmsnorm =4", "rmsnorm C=1 =2"};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        KfamSpec out;
        err[0] = 0;
        KT_CHECK(at_spec_parse(a, bad[i], &out, err, sizeof err) == KILN_ERR_CORRUPT &&
                     strstr(err, "kernel spec") && !strchr(err, '\n'),
                 "bad spec '%s': %s", bad[i], err);
    }
    ir_arena_destroy(a);
}

static void test_compile(void)
{
    if (!cg_host_jit_available()) {
        KT_CHECK(!kt_ci(), "CI=true: this build has no LLVM host backend for the at_compile checks");
        printf("skip: at_compile checks need the LLVM host backend\n");
        return;
    }
    const KfamFamily *f = kfam_find("rmsnorm");
    KfamSpec s = kfam_spec("rmsnorm");
    kfam_spec_int(&s, "C", 64), kfam_spec_float(&s, "eps", 1e-5), kfam_spec_str(&s, "dtype", "bf16");
    kfam_spec_int(&s, "residual", 0);
    const CgTarget *host = cg_target_find("host");
    char err[512] = "";
    AtCompiled c;
    KirConfig cfg = {0};
    kir_config_set(&cfg, "WARPS", 2);
    KilnStatus st = at_compile(f, &s, &cfg, host, NULL, &c, err, sizeof err);
    KT_CHECK(st == KILN_OK && !strcmp(c.bin.format, "host-so") && c.bin.size > 0 && c.bin.entry &&
                 strstr(c.config, "WARPS=2") && strstr(c.config, "BLOCK=") && strstr(c.params, "i32") &&
                 c.grid[0] && c.block == 1 && c.smem == 0,
             "host compile: %s (config %s, params %s, grid %s)", err, c.config ? c.config : "-",
             c.params ? c.params : "-", c.grid ? c.grid : "-");
    at_compiled_free(&c);
    /* 64 warps: 2048 threads, over the host's 1024 (kir_verify under the target's limits) */
    KirConfig big = {0};
    kir_config_set(&big, "BLOCK", 64), kir_config_set(&big, "WARPS", 64);
    err[0] = 0;
    st = at_compile(f, &s, &big, host, NULL, &c, err, sizeof err);
    KT_CHECK(st == KILN_ERR_UNSUPPORTED && err[0] && !strchr(err, '\n') && !c.bin.data,
             "a config over the host's thread limit: status %d, %s", st, err);
    at_compiled_free(&c);
    KirConfig odd = {0};
    kir_config_set(&odd, "BLOCK", 48); /* not a power of two: the family refuses it */
    err[0] = 0;
    st = at_compile(f, &s, &odd, host, NULL, &c, err, sizeof err);
    KT_CHECK(st == KILN_ERR_UNSUPPORTED && err[0], "BLOCK=48: status %d, %s", st, err);
    at_compiled_free(&c);
    KfamSpec none = kfam_spec("rmsnorm"); /* no C */
    kfam_spec_str(&none, "dtype", "q9");
    st = at_compile(f, &none, &cfg, host, NULL, &c, err, sizeof err);
    KT_CHECK(st == KILN_ERR_ARG || st == KILN_ERR_UNSUPPORTED, "a bad spec: status %d, %s", st, err);
    at_compiled_free(&c);
}

/* ---- compile-ahead ---- */

static void test_ahead(void)
{
    if (!cg_host_jit_available()) {
        KT_CHECK(!kt_ci(), "CI=true: this build has no LLVM host backend for the at_ahead checks");
        printf("skip: at_ahead checks need the LLVM host backend\n");
        return;
    }
    const CgTarget *host = cg_target_find("host");
    KT_CHECK(at_ahead_create(0, host, NULL) == NULL, "0 threads: no pool");
    AtKernel k = {.name = "rmsnorm", .ir_hash = "0", .family = kfam_find("rmsnorm")};
    k.spec = kfam_spec("rmsnorm");
    kfam_spec_int(&k.spec, "C", 128), kfam_spec_float(&k.spec, "eps", 1e-5), kfam_spec_str(&k.spec, "dtype", "bf16");
    kfam_spec_int(&k.spec, "residual", 1);
    enum { N = 7 };
    const int64_t blocks[N] = {128, 64, 256, 48 /* the family refuses it */, 32, 128, 64};
    const int64_t warps[N] = {1, 2, 4, 1, 1, 4, 64 /* over the host's threads */};
    AtCand cands[N];
    memset(cands, 0, sizeof cands);
    for (int i = 0; i < N; i++) {
        kir_config_set(&cands[i].cfg, "BLOCK", blocks[i]), kir_config_set(&cands[i].cfg, "WARPS", warps[i]);
        IrBuf b = {0};
        kir_config_print(&cands[i].cfg, &b);
        snprintf(cands[i].config, sizeof cands[i].config, "%s", b.s ? b.s : "");
        ir_buf_free(&b);
    }
    AtAhead *ah = at_ahead_create(3, host, NULL);
    KT_CHECK(ah != NULL, "a pool of 3 threads");
    char msg[300], err[300];
    KilnStatus st;
    AtCompiled got, want;
    for (int round = 0; round < 2 && ah; round++) {
        at_ahead_start(ah, &k, cands, N);
        /* round 0 in order, round 1 from the end (each waits for its own) */
        for (int n = 0; n < N; n++) {
            int i = round ? N - 1 - n : n;
            int r = at_ahead_take(ah, &cands[i].cfg, &got, &st, msg, sizeof msg);
            KilnStatus ws = at_compile(k.family, &k.spec, &cands[i].cfg, host, NULL, &want, err, sizeof err);
            KT_CHECK(r == 0 && st == ws, "round %d candidate %s: taken %d, status %d, inline %d (%s)", round,
                     cands[i].config, r, st, ws, msg);
            if (r == 0 && st == KILN_OK && ws == KILN_OK)
                KT_CHECK(!strcmp(got.config, want.config) && !strcmp(got.params, want.params) &&
                             !strcmp(got.grid, want.grid) && got.bin.size > 0 && !strcmp(got.bin.format, "host-so"),
                         "candidate %s: the inline compile's config, params and grid", cands[i].config);
            if (r == 0 && st != KILN_OK) KT_CHECK(msg[0] != 0, "an INVALID candidate says why");
            if (r == 0) at_compiled_free(&got);
            at_compiled_free(&want);
            KT_CHECK(at_ahead_take(ah, &cands[i].cfg, &got, &st, msg, sizeof msg) == -1,
                     "a candidate is taken once");
        }
    }
    KirConfig other = {0};
    kir_config_set(&other, "BLOCK", 512);
    if (ah) {
        at_ahead_start(ah, &k, cands, N); /* then another kernel after one take: the rest is dropped */
        KT_CHECK(at_ahead_take(ah, &other, &got, &st, msg, sizeof msg) == -1, "a config not in the list");
        KT_CHECK(at_ahead_take(ah, &cands[0].cfg, &got, &st, msg, sizeof msg) == 0, "the first candidate");
        at_compiled_free(&got);
        at_ahead_start(ah, &k, cands + 4, 2);
        KT_CHECK(at_ahead_take(ah, &cands[1].cfg, &got, &st, msg, sizeof msg) == -1,
                 "the previous kernel's candidates are gone");
        KT_CHECK(at_ahead_take(ah, &cands[5].cfg, &got, &st, msg, sizeof msg) == 0 && st == KILN_OK,
                 "the new kernel's candidate");
        at_compiled_free(&got);
    }
    at_ahead_destroy(ah); /* with compiles of cands[4] possibly in flight */
    KT_CHECK(at_ahead_take(NULL, &other, &got, &st, msg, sizeof msg) == -1, "no pool: compile inline");
}

/* ---- the search's hooks ---- */

typedef struct Hooks {
    AtFake fake;
    int keeps, keeps_before_put;
    char kept[8][RT_TDB_MAX_CONFIG];
    RtTdb *db;
} Hooks;

static AtCandStatus h_prepare(void *ctx, const AtKernel *k, const KirConfig *cfg, char *msg, int n)
{
    AtTimer t = at_fake_timer(&((Hooks *)ctx)->fake);
    return t.prepare(t.ctx, k, cfg, msg, n);
}

static AtCandStatus h_time(void *ctx, const AtKernel *k, const KirConfig *cfg, const RtTdbBucket *b,
                           double *us, int n, char *msg, int msglen)
{
    AtTimer t = at_fake_timer(&((Hooks *)ctx)->fake);
    return t.time(t.ctx, k, cfg, b, us, n, msg, msglen);
}

/* Serves T=64 only with BLOCK >= 256. */
static int h_serves(void *ctx, const AtKernel *k, const KirConfig *cfg, const RtTdbBucket *b)
{
    (void)ctx, (void)k;
    return b->val[0] != 64 || kir_config_get(cfg, "BLOCK", 0) >= 256;
}

typedef struct Named {
    const char *config;
    int n;
} Named;

static int count_named(void *ctx, const RtTdbRow *r)
{
    Named *w = ctx;
    w->n += !strcmp(r->config, w->config);
    return 0;
}

static KilnStatus h_keep(void *ctx, const AtKernel *k, const KirConfig *cfg, RtTdb *store, const char *device,
                         char *err, int errlen)
{
    Hooks *h = ctx;
    (void)k, (void)device, (void)err, (void)errlen;
    IrBuf b = {0};
    kir_config_print(cfg, &b);
    for (int i = 0; i < h->keeps && i < 8; i++)
        KT_CHECK(strcmp(h->kept[i], b.s), "keep called twice for %s", b.s);
    if (h->keeps < 8) snprintf(h->kept[h->keeps], RT_TDB_MAX_CONFIG, "%s", b.s);
    h->keeps++;
    Named w = {b.s, 0}; /* no result names it yet */
    RtTdbFilter f = {0};
    rt_tdb_rows(store, &f, count_named, &w, NULL, 0);
    KT_CHECK(w.n == 0, "keep(%s) after %d results naming it", b.s, w.n);
    ir_buf_free(&b);
    return KILN_OK;
}

static int row_uses(void *ctx, const RtTdbRow *r)
{
    Hooks *h = ctx;
    int found = 0;
    for (int i = 0; i < h->keeps && i < 8; i++)
        found |= !strcmp(h->kept[i], r->config);
    KT_CHECK(found, "result %s %s names a config keep() never saw: %s", r->kernel, r->bucket, r->config);
    return 0;
}

static void test_hooks(void)
{
    char dir[] = "/tmp/kiln_tune_XXXXXX", path[128], err[512], fp[RT_TDB_FP_LEN];
    if (!mkdtemp(dir)) return;
    snprintf(path, sizeof path, "%s/t.db", dir);
    Hooks h = {.fake = {.seed = 3}};
    KT_CHECK(rt_tdb_open(path, RT_TDB_WRITE, &h.db, err, sizeof err) == KILN_OK, "%s", err);
    if (!h.db) return;
    RtTdbDevice dev = {
        .name = "test", .arch = "host", .sm_count = 1, .mem_bytes = 1, .driver = "x", .cuda = "none"};
    at_store_device(h.db, &dev, fp, err, sizeof err);
    static const char *const buckets[] = {"T=1", "T=64"};
    KfamSpec s = kfam_spec("rmsnorm");
    kfam_spec_int(&s, "C", 4096), kfam_spec_str(&s, "dtype", "bf16"), kfam_spec_float(&s, "eps", 1e-5);
    AtKernel k = {.name = "rmsnorm_4096",
                  .ir_hash = "3333333333333333",
                  .family = kfam_find("rmsnorm"),
                  .spec = s,
                  .buckets = buckets,
                  .n_buckets = 2};
    AtTimer t = {.ctx = &h, .prepare = h_prepare, .time = h_time, .serves = h_serves, .keep = h_keep};
    AtSearchOptions o = {.max_candidates = 30, .store = h.db, .device = fp};
    AtSearchResult res;
    KilnStatus st = at_search(&k, 1, &t, &o, &res, err, sizeof err);
    KT_CHECK(st == KILN_OK, "search: %s", err);
    const AtKernelResult *r = &res.kernels[0];
    int small = 0;
    for (int c = 0; st == KILN_OK && c < r->n_cands; c++) {
        int serves = kir_config_get(&r->cands[c].cfg, "BLOCK", 0) >= 256;
        small += !serves;
        KT_CHECK(serves || (r->buckets[1].stats[c].samples == 0 && r->buckets[0].stats[c].samples > 0),
                 "candidate %s at T=64: %d samples", r->cands[c].config, r->buckets[1].stats[c].samples);
    }
    KT_CHECK(small > 0, "no candidate with BLOCK < 256 among %d", r->n_cands);
    KT_CHECK(r->buckets[1].best >= 0 && kir_config_get(&r->cands[r->buckets[1].best].cfg, "BLOCK", 0) >= 256,
             "T=64's winner %s does not serve it",
             r->buckets[1].best >= 0 ? r->cands[r->buckets[1].best].config : "-");
    int distinct = 1 + (r->buckets[0].best != r->buckets[1].best);
    KT_CHECK(h.keeps == distinct, "keep called %d times for %d distinct winners", h.keeps, distinct);
    RtTdbFilter f = {0};
    rt_tdb_rows(h.db, &f, row_uses, &h, err, sizeof err);
    at_search_result_free(&res);
    rt_tdb_close(h.db);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) {}
}

int main(void)
{
    test_spec_parse();
    test_compile();
    test_ahead();
    test_hooks();
    return kt_done("test_tune");
}
