/* ksweep.c — the sweep-test driver (ksweep.h). Invariant: every config an executor is handed is counted
 * exactly once as tried (built or INVALID at build) or sampled out; INVALID counts both the build's and
 * the run's refusals, so the vacuity rule (ksweep_verdict) sees what each executor really ran. */
#include "ksweep.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kfacts.h"
#include "kref.h"
#include "kt.h"

enum { MAX_RUNNERS = 3, MAX_DUMPS = 3 };

static struct {
    const KRunner *r;
    int pass, fail, invalid, tried, sampled;
    double margin, ms;
} counts[MAX_RUNNERS];
static int n_counts, n_dumps;

static int slot(const KRunner *r)
{
    for (int i = 0; i < n_counts; i++)
        if (counts[i].r == r) return i;
    counts[n_counts].r = r;
    return n_counts++;
}

int ksweep_runners(const KRunner **out, int max)
{
    const KRunner *all[] = {&krun_interp, &krun_host, &krun_cuda};
    const char *only = getenv("KILN_TEST_EXECUTORS");
    int n = 0;
    for (int i = 0; i < 3; i++) {
        char why[256] = "";
        if (only && !strstr(only, all[i]->name)) {
            printf("skip %s: not in KILN_TEST_EXECUTORS=%s\n", all[i]->name, only);
        } else if (all[i]->available(why, sizeof why) && n < max) {
            out[n++] = all[i];
            slot(all[i]);
        } else {
            printf("skip %s: %s\n", all[i]->name, why);
            /* CI has no GPU, but it must have the host executor (LLVM) */
            KT_CHECK(all[i] != &krun_host || !kt_ci(), "CI=true: no host executor: %s", why);
        }
    }
    return n;
}

int ksweep_big(const KRunner *r)
{
    return strcmp(r->name, "interp") != 0;
}

static int shard = -1, shards = 1, n_cases;

static void shard_init(void)
{
    if (shard >= 0) return;
    const char *e = getenv("KILN_TEST_SHARD");
    shard = 0;
    if (e && (sscanf(e, "%d/%d", &shard, &shards) != 2 || shards < 1 || shard < 0 || shard >= shards)) {
        fprintf(stderr, "KILN_TEST_SHARD='%s' is not i/n with 0 <= i < n: running every case\n", e);
        shard = 0, shards = 1;
    }
}

/* Case i goes to shard mix(i) % n, not i % n: a sweep's cases come in periodic groups (a plain, a rope
 * and a GQA case per shape), which i % n would put each on one shard. */
int ksweep_mine(void)
{
    shard_init();
    return kir_mix32((uint32_t)n_cases++ * 0x9e3779b9u) % (uint32_t)shards == (uint32_t)shard;
}

int ksweep_shard0(void)
{
    shard_init();
    return shard == 0;
}

KirConfig ksweep_cfg(int n, ...)
{
    KirConfig c;
    memset(&c, 0, sizeof c);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        const char *key = va_arg(ap, const char *);
        kir_config_set(&c, key, va_arg(ap, int));
    }
    va_end(ap);
    return c;
}

static void dump(const KirKernel *k)
{
    if (!k || n_dumps++ >= MAX_DUMPS) return;
    IrBuf b = {0};
    kir_print(k, &b);
    fprintf(stderr, "---- kernel IR ----\n%s-------------------\n", b.s ? b.s : "(out of memory)\n");
    ir_buf_free(&b);
}

static int tier = -1;
static const char *const tier_names[] = {"full", "standard", "reduced"};

static int tier_get(void)
{
    if (tier >= 0) return tier;
    const char *e = getenv("KILN_TEST_TIER"), *from = "KILN_TEST_TIER";
    if (!e || !*e) e = getenv("KILN_TEST_TIER_DEFAULT"), from = "KILN_TEST_TIER_DEFAULT";
    tier = KSWEEP_FULL;
    for (int i = 0; e && i < 3; i++)
        if (!strcmp(e, tier_names[i])) tier = i;
    if (e && *e && strcmp(e, tier_names[tier]))
        fprintf(stderr, "%s='%s' is not full, standard or reduced: the full tier\n", from, e);
    return tier;
}

KsweepTier ksweep_tier(void)
{
    return (KsweepTier)tier_get();
}

int ksweep_reduced(void)
{
    return tier_get() == KSWEEP_REDUCED;
}

/* 1 when cfg is the family's default for s: NULL, empty, or every key it names at the default's value. */
static int is_default(const KfamFamily *f, const KfamSpec *s, const KirConfig *cfg)
{
    if (!cfg || !cfg->n) return 1;
    KirConfig def;
    memset(&def, 0, sizeof def);
    f->defaults(s, kfacts_sm90(), &def);
    for (int i = 0; i < cfg->n; i++)
        if (kir_config_get(&def, cfg->key[i], INT64_MIN) != cfg->val[i]) return 0;
    return 1;
}

/* The reduced tier's sample: FNV-1a over the seed, the spec's text and the config's, then a finalizer;
 * about one (seed, spec, config) in four. */
static int sampled_in(const KfamSpec *s, const KirConfig *cfg)
{
    uint64_t h = 0xcbf29ce484222325ull, seed = kref_seed();
    IrBuf b = {0};
    kfam_spec_print(s, &b);
    ir_buf_printf(&b, " | ");
    kir_config_print(cfg, &b);
    for (int i = 0; i < 8; i++)
        h = (h ^ ((seed >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    for (const char *p = b.s ? b.s : ""; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    ir_buf_free(&b);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (h >> 40) % 4 == 0;
}

static KirKernel *build(const KRunner *r, IrArena *a, const KfamSpec *s, const KfamFacts *facts,
                        const KirConfig *cfg, int sample)
{
    int i = slot(r);
    const KfamFamily *f = kfam_find(s->family);
    IrDiag d = {0};
    KirKernel *k = NULL;
    KirConfig none;
    memset(&none, 0, sizeof none);
    if (f && sample && ksweep_reduced() && !is_default(f, s, cfg) && !sampled_in(s, cfg)) {
        counts[i].sampled++;
        return NULL;
    }
    counts[i].tried++;
    IrStatus st = f ? f->build(a, s, facts, cfg ? cfg : &none, &k, &d) : IR_ERR_INPUT;
    /* the host executor's code: optimized as a package's for the default (and for host tiles, which
     * are the host's defaults), for every config in the full tier and for the seed's sample in the
     * standard one; else kiln's IR as emitted (fast to compile) */
    if (st == IR_OK)
        krun_host_optimize(k, !f || facts->cpu || is_default(f, s, cfg) || tier_get() == KSWEEP_FULL ||
                                  (tier_get() == KSWEEP_STANDARD && sampled_in(s, cfg)));
    if (st == IR_ERR_LIMIT || st == IR_ERR_UNSUPPORTED) {
        counts[i].invalid++;
        return NULL;
    }
    if (st != IR_OK) {
        IrBuf b = {0};
        kfam_spec_print(s, &b);
        kt_fail++;
        counts[i].fail++;
        fprintf(stderr, "%s: build failed: %s: %s\n", b.s ? b.s : "?", ir_status_name(st),
                f ? d.msg : "no family");
        ir_buf_free(&b);
        return NULL;
    }
    return k;
}

KirKernel *ksweep_build(const KRunner *r, IrArena *a, const KfamSpec *s, const KirConfig *cfg)
{
    return build(r, a, s, kfacts_sm90(), cfg, 1);
}

KirKernel *ksweep_build_always(const KRunner *r, IrArena *a, const KfamSpec *s, const KirConfig *cfg)
{
    return build(r, a, s, kfacts_sm90(), cfg, 0);
}

KirConfig ksweep_host_cfg(const KfamSpec *s, int64_t m_hint)
{
    KfamSpec hinted = *s;
    KirConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    if (m_hint > 0) kfam_spec_int(&hinted, "m_hint", m_hint);
    const KfamFamily *f = kfam_find(s->family);
    if (f) f->defaults(&hinted, kfacts_host(), &cfg);
    return cfg;
}

KirKernel *ksweep_build_host(const KRunner *r, IrArena *a, const KfamSpec *s, const KirConfig *cfg)
{
    return build(r, a, s, kfacts_host(), cfg, 0);
}

int ksweep_sampled_out(const KRunner *r)
{
    return counts[slot(r)].sampled;
}

int ksweep_run(const KRunner *r, const KirKernel *k, KRunArg *args)
{
    int i = slot(r);
    IrDiag d = {0};
    double t0 = ir_now_ms();
    IrStatus st = r->run(k, args, &d);
    counts[i].ms += ir_now_ms() - t0;
    if (st == IR_OK) return 1;
    if (st == IR_ERR_LIMIT || st == IR_ERR_UNSUPPORTED) {
        counts[i].invalid++;
        return 0;
    }
    kt_fail++;
    counts[i].fail++;
    fprintf(stderr, "%s: run of %s failed: %s: %s\n", r->name, k->name, ir_status_name(st), d.msg);
    dump(k);
    return -1;
}

void ksweep_check(const KRunner *r, const KirKernel *k, int ok, const char *fmt, ...)
{
    int i = slot(r);
    if (ok) {
        kt_pass++;
        counts[i].pass++;
        return;
    }
    kt_fail++;
    counts[i].fail++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: ", r->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (k) {
        IrBuf b = {0};
        kir_config_print(&k->cfg, &b);
        fprintf(stderr, "  kernel %s config %s\n", k->name, b.s ? b.s : "");
        ir_buf_free(&b);
    }
    dump(k);
}

void ksweep_margin(const KRunner *r, double ratio)
{
    int i = slot(r);
    if (!(ratio <= counts[i].margin)) counts[i].margin = ratio;
}

void ksweep_summary(const char *suite)
{
    shard_init();
    printf("%s: tier %s, shard %d/%d\n", suite, tier_names[tier_get()], shard, shards);
    for (int i = 0; i < n_counts; i++)
        printf("%s %s: %d checks passed, %d failed, %d invalid configs of %d tried, %d sampled out, worst "
               "error/tolerance %.3g, %.1f s in runs\n",
               suite, counts[i].r->name, counts[i].pass, counts[i].fail, counts[i].invalid, counts[i].tried,
               counts[i].sampled, counts[i].margin, counts[i].ms / 1000);
    kt_fail += ksweep_verdict(suite);
}

int ksweep_verdict(const char *suite)
{
    int bad = 0;
    for (int i = 0; i < n_counts; i++) {
        const char *name = counts[i].r->name;
        if (!counts[i].pass) {
            fprintf(stderr, "FAIL %s %s: a vacuous sweep: no check passed (%d configs tried, %d INVALID)\n",
                    suite, name, counts[i].tried, counts[i].invalid);
            bad++;
        } else if (counts[i].invalid * 10 >= counts[i].tried * 9) {
            fprintf(stderr, "FAIL %s %s: a vacuous sweep: %d of the %d configs tried are INVALID (>= 90%%)\n",
                    suite, name, counts[i].invalid, counts[i].tried);
            bad++;
        }
    }
    return bad;
}

void ksweep_reset(void)
{
    memset(counts, 0, sizeof counts);
    n_counts = n_dumps = 0;
    shard = -1, shards = 1, n_cases = 0;
    tier = -1;
}
