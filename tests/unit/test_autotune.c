/* test_autotune.c — the search driver with the fake timer (no GPU): statistics, enumeration and pruning
 * by the verifier's limits, winners against an independent scan of the fake's costs, INVALID candidates
 * (compile, launch, check, fault + recovery, recovery failing), deterministic ties, tie_rel, the budget
 * and its split over kernels, writing winners to the store (pinned rows kept), progress reports. */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autotune/at_fake.h"
#include "autotune/at_search.h"
#include "codegen/cg.h"
#include "kfacts.h"
#include "kt.h"

static char scratch[64];

static const KirLimits *sm90(void)
{
    return cg_target_limits(cg_target_find("sm_90a"));
}

static const char *const rms_buckets[] = {"T=1", "T=128"};
static const char *const mm_buckets[] = {"T=16", "T=512", "T=4096"};

static AtKernel rmsnorm(void)
{
    KfamSpec s = kfam_spec("rmsnorm");
    kfam_spec_int(&s, "C", 4096);
    kfam_spec_str(&s, "dtype", "bf16");
    kfam_spec_float(&s, "eps", 1e-5);
    return (AtKernel){.name = "rmsnorm_4096_bf16_1e_05",
                      .ir_hash = "1111111111111111",
                      .family = kfam_find("rmsnorm"),
                      .spec = s,
                      .buckets = rms_buckets,
                      .n_buckets = 2};
}

static AtKernel matmul(void)
{
    KfamSpec s = kfam_spec("matmul");
    kfam_spec_int(&s, "N", 4096);
    kfam_spec_int(&s, "K", 4096);
    kfam_spec_str(&s, "dtype", "bf16");
    kfam_spec_str(&s, "epilogue", "none");
    return (AtKernel){.name = "matmul_4096_4096_bf16_none",
                      .ir_hash = "2222222222222222",
                      .family = kfam_find("matmul"),
                      .spec = s,
                      .buckets = mm_buckets,
                      .n_buckets = 3};
}

static void test_stats(void)
{
    double a[20];
    for (int i = 0; i < 20; i++)
        a[i] = 20 - i;
    AtStats s;
    at_stats(a, 20, &s);
    KT_CHECK(s.samples == 20 && s.median_us == 10.5 && fabs(s.p20_us - 4.8) < 1e-12 &&
                 fabs(s.p80_us - 16.2) < 1e-12,
             "stats of 1..20: %g %g %g", s.median_us, s.p20_us, s.p80_us);
    KT_CHECK(a[0] == 20, "the samples are not reordered");
    double b[5] = {5, 1, 4, 2, 3};
    at_stats(b, 5, &s);
    KT_CHECK(s.median_us == 3 && fabs(s.p20_us - 1.8) < 1e-12 && fabs(s.p80_us - 4.2) < 1e-12,
             "stats of 5: %g %g %g", s.median_us, s.p20_us, s.p80_us);
    at_stats(b, 1, &s);
    KT_CHECK(s.median_us == 5 && s.p20_us == 5 && s.p80_us == 5, "one sample");
}

static void test_enumerate(void)
{
    AtKernel k = rmsnorm();
    AtFake f = {.seed = 1};
    AtTimer t = at_fake_timer(&f);
    AtSearchOptions o = {.limits = sm90(), .max_candidates = 1000};
    AtSearchResult r;
    char err[512];
    KT_CHECK(at_search(&k, 1, &t, &o, &r, err, sizeof err) == KILN_OK, "search: %s", err);
    AtKernelResult *kr = &r.kernels[0];
    KT_CHECK(kr->status == KILN_OK && kr->n_space == 8 * 5 * 3, "space %lld", (long long)kr->n_space);
    KT_CHECK(kr->n_cands + kr->n_pruned == kr->n_space && kr->n_cands > 10 && kr->n_pruned > 0,
             "%d candidates, %d pruned", kr->n_cands, kr->n_pruned);
    KirConfig d = {0};
    k.family->defaults(&k.spec, kfacts_sm90(), &d);
    IrBuf b = {0};
    kir_config_print(&d, &b);
    KT_CHECK(kr->dflt == 0 && !strcmp(kr->cands[0].config, b.s), "the default comes first: %s vs %s",
             kr->cands[0].config, b.s);
    ir_buf_free(&b);
    KT_CHECK(kr->tried == kr->n_cands && kr->invalid == 0 && kr->skipped == 0 && f.prepares == kr->n_cands &&
                 f.timings == 2 * kr->n_cands,
             "every candidate prepared once and timed at both buckets");
    int full = kr->n_cands;
    at_search_result_free(&r);

    /* a target with at most 64 threads per program and 1 KiB of shared memory: fewer candidates */
    KirLimits tiny = {"tiny", 64, 1024, 255, 0};
    o.limits = &tiny;
    at_search(&k, 1, &t, &o, &r, err, sizeof err);
    kr = &r.kernels[0];
    KT_CHECK(kr->status == KILN_OK && kr->n_cands > 0 && kr->n_cands < full, "tiny: %d of %d", kr->n_cands,
             full);
    for (int i = 0; i < kr->n_cands; i++)
        KT_CHECK(kir_config_get(&kr->cands[i].cfg, "WARPS", 0) * 32 <= 64, "tiny: %s", kr->cands[i].config);
    at_search_result_free(&r);

    /* max_candidates cuts the list (keeping its order) */
    o.limits = sm90();
    o.max_candidates = 5;
    at_search(&k, 1, &t, &o, &r, err, sizeof err);
    KT_CHECK(r.kernels[0].n_cands == 5 && r.kernels[0].dflt == 0, "max_candidates");
    at_search_result_free(&r);

    /* `first` configs (a package's binaries) come before the space, once each, and survive
     * max_candidates; each bucket's default_us is its base config's median, not the family default's */
    KirConfig first[3] = {0};
    kir_config_set(&first[0], "BLOCK", 512), kir_config_set(&first[0], "WARPS", 2);
    kir_config_set(&first[0], "ROWS", 1);
    first[1] = d;
    first[2] = first[0];
    int base[2] = {0, 1};
    k.first = first, k.n_first = 3, k.base = base;
    o.max_candidates = 2;
    KT_CHECK(at_search(&k, 1, &t, &o, &r, err, sizeof err) == KILN_OK, "first: %s", err);
    kr = &r.kernels[0];
    IrBuf f0 = {0};
    kir_config_print(&first[0], &f0);
    KT_CHECK(kr->n_cands == 2 && !strcmp(kr->cands[0].config, f0.s) && kr->dflt == 1,
             "first configs first, once: %d candidates, [0] %s", kr->n_cands, kr->cands[0].config);
    ir_buf_free(&f0);
    for (int bi = 0; bi < 2; bi++)
        KT_CHECK(kr->buckets[bi].default_us == kr->buckets[bi].stats[base[bi]].median_us,
                 "bucket %d: default_us from its base config", bi);
    KT_CHECK(kr->buckets[0].default_us != kr->buckets[0].stats[kr->dflt].median_us,
             "bucket 0's base is not the family default");
    at_search_result_free(&r);
}

/* The expected winner of bucket b: the first candidate (in order) with the smallest cost among those the
 * fake does not fail. */
static int expected_best(const AtFake *f, const AtKernel *k, const AtKernelResult *kr, int b)
{
    RtTdbBucket bk;
    rt_tdb_bucket_parse(k->buckets[b], &bk, NULL, 0);
    int best = -1;
    double best_c = 0;
    for (int i = 0; i < kr->n_cands; i++) {
        if (at_fake_failure(f, k, &kr->cands[i].cfg) != AT_CAND_OK) continue;
        double c = at_fake_cost(f, k, &kr->cands[i].cfg, &bk);
        if (best < 0 || c < best_c) best = i, best_c = c;
    }
    return best;
}

static void test_search(void)
{
    AtKernel ks[2] = {rmsnorm(), matmul()};
    AtFake f = {.seed = 7, .compile_every = 5, .launch_every = 9, .check_every = 7, .fault_every = 11};
    AtTimer t = at_fake_timer(&f);
    AtSearchOptions o = {.limits = sm90(), .max_candidates = 64};
    AtSearchResult r;
    char err[512];
    KT_CHECK(at_search(ks, 2, &t, &o, &r, err, sizeof err) == KILN_OK, "search: %s", err);
    int counts[AT_CAND_SKIPPED + 1] = {0};
    for (int ki = 0; ki < 2; ki++) {
        AtKernelResult *kr = &r.kernels[ki];
        KT_CHECK(kr->status == KILN_OK && kr->n_cands == 64 && kr->tried == 64 && kr->dflt == 0,
                 "%s: %d tried", ks[ki].name, kr->tried);
        int invalid = 0;
        for (int i = 0; i < kr->n_cands; i++) {
            AtCand *c = &kr->cands[i];
            AtCandStatus want = at_fake_failure(&f, &ks[ki], &c->cfg);
            KT_CHECK(c->status == want, "%s %s: %s, want %s", ks[ki].name, c->config,
                     at_cand_status_name(c->status), at_cand_status_name(want));
            counts[c->status]++;
            invalid += c->status != AT_CAND_OK;
            KT_CHECK(c->status == AT_CAND_OK || c->msg[0], "an INVALID candidate says why");
            for (int b = 0; b < ks[ki].n_buckets; b++)
                KT_CHECK((kr->buckets[b].stats[i].samples == 20) == (c->status == AT_CAND_OK),
                         "only valid candidates have stats");
        }
        KT_CHECK(kr->invalid == invalid, "invalid count");
        for (int b = 0; b < ks[ki].n_buckets; b++) {
            AtBucketResult *br = &kr->buckets[b];
            int want = expected_best(&f, &ks[ki], kr, b);
            KT_CHECK(br->best == want && want >= 0, "%s %s: winner %d, want %d", ks[ki].name, br->bucket,
                     br->best, want);
            RtTdbBucket bk;
            rt_tdb_bucket_parse(br->bucket, &bk, NULL, 0);
            KT_CHECK(br->default_us == at_fake_cost(&f, &ks[ki], &kr->cands[0].cfg, &bk), "default time");
            KT_CHECK(!br->stored, "no store, nothing stored");
        }
        /* the winners differ between buckets somewhere: the fake's costs depend on the bucket */
    }
    KT_CHECK(counts[AT_CAND_COMPILE] > 0 && counts[AT_CAND_LAUNCH] > 0 && counts[AT_CAND_CHECK] > 0 &&
                 counts[AT_CAND_FAULT] > 0 && counts[AT_CAND_SKIPPED] == 0,
             "every kind of failure happened: %d %d %d %d", counts[AT_CAND_COMPILE], counts[AT_CAND_LAUNCH],
             counts[AT_CAND_CHECK], counts[AT_CAND_FAULT]);
    KT_CHECK(f.faults == counts[AT_CAND_FAULT] && f.recovers == f.faults && !f.faulted,
             "every fault was recovered: %d faults, %d recovers", f.faults, f.recovers);
    KT_CHECK(!r.budget_exhausted && r.seconds == f.clock, "no budget, virtual clock");
    at_search_result_free(&r);
}

static void test_determinism(void)
{
    AtKernel ks[2] = {rmsnorm(), matmul()};
    AtSearchResult r[2];
    char err[512];
    for (int run = 0; run < 2; run++) {
        AtFake f = {.seed = 3, .jitter = 0.2, .compile_every = 6, .fault_every = 13};
        AtTimer t = at_fake_timer(&f);
        AtSearchOptions o = {.limits = sm90(), .max_candidates = 48, .tie_rel = 0.01};
        KT_CHECK(at_search(ks, 2, &t, &o, &r[run], err, sizeof err) == KILN_OK, "search: %s", err);
    }
    for (int ki = 0; ki < 2; ki++)
        for (int b = 0; b < ks[ki].n_buckets; b++) {
            AtBucketResult *x = &r[0].kernels[ki].buckets[b], *y = &r[1].kernels[ki].buckets[b];
            KT_CHECK(
                x->best >= 0 && x->best == y->best &&
                    !strcmp(r[0].kernels[ki].cands[x->best].config, r[1].kernels[ki].cands[y->best].config) &&
                    x->stats[x->best].median_us == y->stats[y->best].median_us &&
                    x->stats[x->best].p20_us == y->stats[y->best].p20_us,
                "%s %s: the same winner twice", ks[ki].name, x->bucket);
            KT_CHECK(x->stats[x->best].p20_us < x->stats[x->best].median_us &&
                         x->stats[x->best].median_us < x->stats[x->best].p80_us,
                     "jittered samples spread");
        }
    at_search_result_free(&r[0]);
    at_search_result_free(&r[1]);
}

/* Cost: 100 us less 0.01% per position in a list, so each later candidate is a hair faster. */
typedef struct Ladder {
    const AtKernelResult *kr;
} Ladder;

static double ladder_cost(void *ctx, const AtKernel *k, const KirConfig *cfg, const RtTdbBucket *b)
{
    const Ladder *l = ctx;
    IrBuf buf = {0};
    kir_config_print(cfg, &buf);
    int pos = 0;
    for (int i = 0; i < l->kr->n_cands; i++)
        if (!strcmp(l->kr->cands[i].config, buf.s)) pos = i;
    ir_buf_free(&buf);
    return 100 * (1 - 1e-4 * pos);
}

static void test_ties(void)
{
    AtKernel k = rmsnorm();
    char err[512];
    /* every cost rounds to the same 1000 us: the first candidate (the default) wins every bucket */
    AtFake f = {.seed = 5, .quantum_us = 1000, .compile_every = 4};
    AtTimer t = at_fake_timer(&f);
    AtSearchOptions o = {.limits = sm90(), .max_candidates = 40};
    AtSearchResult r;
    at_search(&k, 1, &t, &o, &r, err, sizeof err);
    for (int b = 0; b < 2; b++)
        KT_CHECK(r.kernels[0].buckets[b].best == 0, "exact ties go to the earliest: %d",
                 r.kernels[0].buckets[b].best);

    /* each later candidate is 0.01% faster: with tie_rel 0 the last valid one wins, with 1% the default */
    Ladder l = {&r.kernels[0]};
    AtFake g = {.seed = 5, .cost = ladder_cost, .cost_ctx = &l};
    AtTimer tg = at_fake_timer(&g);
    AtSearchResult r2;
    at_search(&k, 1, &tg, &o, &r2, err, sizeof err);
    KT_CHECK(r2.kernels[0].buckets[0].best == r2.kernels[0].n_cands - 1, "tie_rel 0: the fastest wins (%d)",
             r2.kernels[0].buckets[0].best);
    at_search_result_free(&r2);
    o.tie_rel = 0.01;
    g = (AtFake){.seed = 5, .cost = ladder_cost, .cost_ctx = &l};
    at_search(&k, 1, &tg, &o, &r2, err, sizeof err);
    KT_CHECK(r2.kernels[0].buckets[0].best == 0, "tie_rel 1%%: within noise, the default stays (%d)",
             r2.kernels[0].buckets[0].best);
    at_search_result_free(&r2);
    at_search_result_free(&r);
}

static int progress_calls, progress_last_done, progress_bad;

static void on_progress(void *ctx, const AtProgress *p)
{
    progress_calls++;
    progress_last_done = p->done;
    if (p->eta_s < 0 || p->elapsed_s < 0 || p->done < 1 || p->done > p->n_cands || !p->kernel ||
        (p->best_config && p->best_us <= 0))
        progress_bad++;
}

static void test_budget(void)
{
    AtKernel ks[2] = {rmsnorm(), matmul()};
    char err[512];
    /* one second of virtual compile per candidate, ten seconds in all: about five candidates each */
    AtFake f = {.seed = 9, .compile_s = 1.0, .compile_every = 8};
    AtTimer t = at_fake_timer(&f);
    AtSearchOptions o = {.limits = sm90(), .max_candidates = 64, .budget_s = 10, .progress = on_progress};
    AtSearchResult r;
    KT_CHECK(at_search(ks, 2, &t, &o, &r, err, sizeof err) == KILN_OK, "search: %s", err);
    int tried = 0;
    for (int ki = 0; ki < 2; ki++) {
        AtKernelResult *kr = &r.kernels[ki];
        KT_CHECK(kr->tried >= 4 && kr->tried <= 6 && kr->skipped == kr->n_cands - kr->tried,
                 "%s: %d tried, %d skipped", ks[ki].name, kr->tried, kr->skipped);
        tried += kr->tried;
        for (int i = kr->tried; i < kr->n_cands; i++)
            KT_CHECK(kr->cands[i].status == AT_CAND_SKIPPED, "skipped, not invalid");
        for (int b = 0; b < ks[ki].n_buckets; b++) {
            AtBucketResult *br = &kr->buckets[b];
            KT_CHECK(br->best >= 0 && br->best < kr->tried, "the best so far is kept");
            int want = -1;
            for (int i = 0; i < kr->tried; i++)
                if (kr->cands[i].status == AT_CAND_OK &&
                    (want < 0 || br->stats[i].median_us < br->stats[want].median_us))
                    want = i;
            KT_CHECK(br->best == want, "best among those tried");
        }
    }
    KT_CHECK(r.budget_exhausted, "budget exhausted");
    KT_CHECK(f.clock <= 10 + 1.1, "stopped within one candidate of the budget: %g s", f.clock);
    KT_CHECK(progress_calls == tried && progress_last_done == r.kernels[1].tried && !progress_bad,
             "progress: %d calls for %d candidates", progress_calls, tried);
    at_search_result_free(&r);

    /* weights: a kernel of weight 3 gets three times the share of one of weight 1 (12 s: ~9 and ~3) */
    AtKernel wk[2] = {rmsnorm(), matmul()};
    wk[0].weight = 3, wk[1].weight = 1;
    AtFake fw = {.seed = 9, .compile_s = 1.0};
    AtTimer tw = at_fake_timer(&fw);
    o.budget_s = 12;
    o.progress = NULL;
    KT_CHECK(at_search(wk, 2, &tw, &o, &r, err, sizeof err) == KILN_OK, "weighted search: %s", err);
    KT_CHECK(r.kernels[0].tried >= 8 && r.kernels[0].tried <= 10 && r.kernels[1].tried >= 2 &&
                 r.kernels[1].tried <= 4,
             "weights 3 and 1 over 12 s: %d and %d candidates", r.kernels[0].tried, r.kernels[1].tried);
    at_search_result_free(&r);

    /* a budget already spent by the first kernel leaves nothing for the second, which stores nothing */
    AtFake g = {.seed = 9, .compile_s = 20};
    AtTimer tg = at_fake_timer(&g);
    o.budget_s = 5;
    o.progress = NULL;
    at_search(ks, 2, &tg, &o, &r, err, sizeof err);
    KT_CHECK(r.kernels[0].tried == 1 && r.kernels[1].tried == 0 && r.kernels[1].buckets[0].best == -1,
             "no time left: %d, %d", r.kernels[0].tried, r.kernels[1].tried);
    at_search_result_free(&r);

    /* samples: at least 20 */
    AtKernel k = rmsnorm();
    AtFake h = {.seed = 1};
    AtTimer th = at_fake_timer(&h);
    AtSearchOptions os = {.limits = sm90(), .max_candidates = 2, .samples = 5};
    at_search(&k, 1, &th, &os, &r, err, sizeof err);
    KT_CHECK(h.last_samples == AT_MIN_SAMPLES && r.kernels[0].buckets[0].stats[0].samples == 20,
             "samples raised");
    at_search_result_free(&r);
    os.samples = 31;
    at_search(&k, 1, &th, &os, &r, err, sizeof err);
    KT_CHECK(h.last_samples == 31, "samples: %d", h.last_samples);
    at_search_result_free(&r);
}

static void test_recover_fails(void)
{
    AtKernel ks[2] = {matmul(), rmsnorm()};
    AtFake f = {.seed = 11, .fault_every = 3, .recover_fails = 1};
    AtTimer t = at_fake_timer(&f);
    AtSearchOptions o = {.limits = sm90(), .max_candidates = 32};
    AtSearchResult r;
    char err[512] = "";
    KilnStatus s = at_search(ks, 2, &t, &o, &r, err, sizeof err);
    KT_CHECK(s == KILN_ERR_DEVICE && strstr(err, "could not recover") && strstr(err, ks[0].name),
             "lost device: %s", err);
    AtKernelResult *kr = &r.kernels[0];
    KT_CHECK(f.faults == 1 && f.recovers == 1, "one fault, one failed recovery");
    KT_CHECK(kr->tried < kr->n_cands && kr->skipped == kr->n_cands - kr->tried &&
                 kr->cands[kr->tried - 1].status == AT_CAND_FAULT && kr->buckets[0].best >= 0 &&
                 kr->buckets[0].best < kr->tried - 1,
             "the search stopped at the fault, keeping the best measured before it (%d tried)", kr->tried);
    KT_CHECK(r.kernels[1].status == KILN_ERR_DEVICE && r.kernels[1].tried == 0,
             "the next kernel was not tuned");
    KT_CHECK(!r.budget_exhausted, "not the budget");
    at_search_result_free(&r);
}

static void test_bad_kernels(void)
{
    AtKernel ks[4] = {rmsnorm(), rmsnorm(), rmsnorm(), rmsnorm()};
    static const char *const bad_bucket[] = {"T=0"};
    ks[0].buckets = bad_bucket;
    ks[0].n_buckets = 1;
    ks[1].family = NULL;
    ks[2].spec = kfam_spec("rmsnorm"); /* no C, no dtype */
    AtFake f = {.seed = 1};
    AtTimer t = at_fake_timer(&f);
    AtSearchOptions o = {.limits = sm90(), .max_candidates = 4};
    AtSearchResult r;
    char err[512];
    KT_CHECK(at_search(ks, 4, &t, &o, &r, err, sizeof err) == KILN_OK,
             "one bad kernel does not stop the others");
    KT_CHECK(r.kernels[0].status == KILN_ERR_ARG && strstr(r.kernels[0].msg, "T=0"), "bad bucket: %s",
             r.kernels[0].msg);
    KT_CHECK(r.kernels[1].status == KILN_ERR_ARG && strstr(r.kernels[1].msg, "family"), "no family: %s",
             r.kernels[1].msg);
    KT_CHECK(r.kernels[2].status == KILN_ERR_ARG && strstr(r.kernels[2].msg, "no config"), "bad spec: %s",
             r.kernels[2].msg);
    KT_CHECK(r.kernels[3].status == KILN_OK && r.kernels[3].buckets[1].best >= 0, "the good one is tuned");
    at_search_result_free(&r);
    KT_CHECK(at_search(ks, 1, NULL, &o, &r, err, sizeof err) == KILN_ERR_ARG, "no timer");
    o.store = (RtTdb *)&f; /* never touched: refused first */
    KT_CHECK(at_search(ks, 1, &t, &o, &r, err, sizeof err) == KILN_ERR_ARG && strstr(err, "fingerprint"),
             "store without device: %s", err);
    at_search_result_free(&r);
}

static int grab(void *ctx, const RtTdbRow *row)
{
    RtTdbRow *rows = ctx;
    for (int i = 0; i < 5; i++)
        if (!rows[i].id) {
            rows[i] = *row;
            break;
        }
    return 0;
}

static void test_store(void)
{
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/tune.db", scratch);
    RtTdb *db = NULL;
    KT_CHECK(rt_tdb_open(path, RT_TDB_WRITE, &db, err, sizeof err) == KILN_OK, "open: %s", err);
    if (!db) return;
    RtTdbDevice d = {.name = "NVIDIA H200",
                     .arch = "sm_90a",
                     .sm_count = 132,
                     .mem_bytes = 150754820096LL,
                     .driver = "580.159",
                     .cuda = "13.0"};
    char fp[RT_TDB_FP_LEN];
    at_store_device(db, &d, fp, err, sizeof err);
    AtKernel ks[2] = {rmsnorm(), matmul()};
    AtFake f = {.seed = 21, .compile_every = 6};
    AtTimer t = at_fake_timer(&f);
    AtSearchOptions o = {.limits = sm90(), .max_candidates = 24, .store = db, .device = fp};
    AtSearchResult r;
    KT_CHECK(at_search(ks, 2, &t, &o, &r, err, sizeof err) == KILN_OK, "search: %s", err);
    RtTdbRow rows[5];
    memset(rows, 0, sizeof rows);
    rt_tdb_rows(db, NULL, grab, rows, err, sizeof err);
    int n = 0;
    for (int ki = 0; ki < 2; ki++)
        for (int b = 0; b < ks[ki].n_buckets; b++) {
            AtBucketResult *br = &r.kernels[ki].buckets[b];
            KT_CHECK(br->stored && br->put == AT_PUT_INSERTED, "stored");
            for (int i = 0; i < 5; i++)
                if (!strcmp(rows[i].ir_hash, ks[ki].ir_hash) && !strcmp(rows[i].bucket, br->bucket)) {
                    n++;
                    KT_CHECK(!strcmp(rows[i].config, r.kernels[ki].cands[br->best].config) &&
                                 rows[i].median_us == br->stats[br->best].median_us &&
                                 rows[i].default_us == br->default_us && rows[i].samples == 20 &&
                                 rows[i].candidates == r.kernels[ki].tried &&
                                 rows[i].invalid == r.kernels[ki].invalid &&
                                 !strcmp(rows[i].kernel, ks[ki].name),
                             "row for %s %s", ks[ki].name, br->bucket);
                }
        }
    KT_CHECK(n == 5, "5 rows: %d", n);

    /* the runtime finds them */
    RtTdbHit hit;
    rt_tdb_lookup(db, fp, ks[1].ir_hash, "T=600", &hit, err, sizeof err);
    KT_CHECK(hit.match == RT_TDB_NEAREST && !strcmp(hit.bucket, "T=512") &&
                 !strcmp(hit.config, r.kernels[1].cands[r.kernels[1].buckets[1].best].config),
             "lookup of a tuned kernel: %s %s", hit.bucket, hit.config);

    /* pin one row and re-tune with other costs: the pinned row stays, the others are replaced */
    RtTdbFilter pin = {.ir_hash = ks[0].ir_hash, .bucket = "T=1"};
    at_store_pin(db, &pin, 1, NULL, err, sizeof err);
    char kept[RT_TDB_MAX_CONFIG];
    snprintf(kept, sizeof kept, "%s", r.kernels[0].cands[r.kernels[0].buckets[0].best].config);
    at_search_result_free(&r);
    AtFake g = {.seed = 22};
    AtTimer tg = at_fake_timer(&g);
    KT_CHECK(at_search(ks, 2, &tg, &o, &r, err, sizeof err) == KILN_OK, "re-tune: %s", err);
    KT_CHECK(r.kernels[0].buckets[0].put == AT_PUT_KEPT_PINNED &&
                 r.kernels[0].buckets[1].put == AT_PUT_REPLACED,
             "pinned kept, unpinned replaced: %s, %s", at_put_outcome_name(r.kernels[0].buckets[0].put),
             at_put_outcome_name(r.kernels[0].buckets[1].put));
    rt_tdb_lookup(db, fp, ks[0].ir_hash, "T=1", &hit, err, sizeof err);
    KT_CHECK(hit.match == RT_TDB_EXACT && hit.pinned && !strcmp(hit.config, kept), "the pinned config: %s",
             hit.config);
    at_search_result_free(&r);
    rt_tdb_close(db);
    unlink(path);
    char side[160];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}

int main(void)
{
    snprintf(scratch, sizeof scratch, "/tmp/kiln-test-autotune-XXXXXX");
    if (!mkdtemp(scratch)) {
        perror("mkdtemp");
        return 1;
    }
    double t0 = ir_now_ms();
    test_stats();
    test_enumerate();
    test_search();
    test_determinism();
    test_ties();
    test_budget();
    test_recover_fails();
    test_bad_kernels();
    test_store();
    rmdir(scratch);
    printf("test_autotune: %.0f ms\n", ir_now_ms() - t0);
    return kt_done("test_autotune");
}
