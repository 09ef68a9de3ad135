/* at_search.c — the search driver (at_search.h): enumerate, prepare, time, pick, store.
 *
 * One kernel at a time: its candidates come from kfam_config_candidates (the declared space, built and
 * verified under the target's limits, the default first); each candidate is prepared once and timed at
 * every bucket, in that order, so when the budget stops a kernel every bucket has measured the same
 * candidates. Invariants: an INVALID candidate never has stats (what it measured before failing is
 * dropped) and never wins; the winner of a bucket only changes to a candidate faster by more than
 * tie_rel, so the result depends only on the medians and the enumeration order.
 */
#define _POSIX_C_SOURCE 200809L
#include "at_search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_target.h" /* cg_target_defaults: the facts packages shape their defaults by */
#include "rt_file.h"   /* rt_file_errf, rt_now_s */

const char *at_cand_status_name(AtCandStatus s)
{
    static const char *const names[] = {"ok", "compile", "launch", "check", "fault", "timing", "skipped"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

static double at_now(const AtTimer *t)
{
    return t->now ? t->now(t->ctx) : rt_now_s();
}

static int at_cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* The q-quantile of n sorted values, interpolating linearly between closest ranks. */
static double at_quantile(const double *s, int n, double q)
{
    double pos = q * (n - 1);
    int lo = (int)pos;
    if (lo >= n - 1) return s[n - 1];
    return s[lo] + (pos - lo) * (s[lo + 1] - s[lo]);
}

void at_stats(const double *us, int n, AtStats *out)
{
    memset(out, 0, sizeof *out);
    if (n <= 0) return;
    double *s = malloc(sizeof *s * (size_t)n);
    if (!s) return;
    memcpy(s, us, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, at_cmp_double);
    out->median_us = at_quantile(s, n, 0.5);
    out->p20_us = at_quantile(s, n, 0.2);
    out->p80_us = at_quantile(s, n, 0.8);
    out->samples = n;
    free(s);
}

static int at_config_same(const KirConfig *a, const KirConfig *b)
{
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++)
        if (kir_config_get(b, a->key[i], a->val[i] + 1) != a->val[i]) return 0;
    return 1;
}

/* Candidate i: its config and printed form. */
static void at_cand_set(AtCand *c, const KirConfig *cfg)
{
    c->cfg = *cfg;
    IrBuf b = {0};
    kir_config_print(&c->cfg, &b);
    snprintf(c->config, sizeof c->config, "%s", b.s && !b.oom ? b.s : "");
    ir_buf_free(&b);
}

/* The index of cfg among the first n candidates, or n. */
static int at_cand_find(const AtKernelResult *r, int n, const KirConfig *cfg)
{
    int j = 0;
    while (j < n && !at_config_same(&r->cands[j].cfg, cfg))
        j++;
    return j;
}

/* The kernel's candidates: its `first` configs, then the declared space pruned by kfam_config_candidates
 * (less the configs already there), cut to max (the first ones always stay). */
static KilnStatus at_enumerate(const AtKernel *k, const AtSearchOptions *o, int max, AtKernelResult *r)
{
    const KfamFamily *f = k->family;
    r->dflt = -1;
    if (!f) {
        snprintf(r->msg, sizeof r->msg, "%s: no kernel family", k->name);
        return r->status = KILN_ERR_ARG;
    }
    r->n_space = 1;
    for (int i = 0; i < f->n_space; i++)
        r->n_space *= f->space[i].n > 0 ? f->space[i].n : 1;
    int cap = r->n_space < (1 << 16) ? (int)r->n_space : 1 << 16;
    KirConfig *all = malloc(sizeof *all * (size_t)cap);
    if (!all) return r->status = KILN_ERR_NOMEM;
    /* the default and the candidates' order as the package's (cg_target_defaults: its rows' facts) */
    const KfamFacts *facts = cg_target_facts(cg_target_defaults());
    int found = kfam_config_candidates(f, &k->spec, facts, o->limits, all, cap);
    r->n_pruned = cap - found;
    int n_first = k->first ? k->n_first : 0;
    r->n_cands = found + n_first; /* capacity; cut below */
    if (r->n_cands == 0) {
        free(all);
        snprintf(r->msg, sizeof r->msg,
                 "%s: no config builds for this spec within the target's limits (a bad spec?)", k->name);
        return r->status = KILN_ERR_ARG;
    }
    r->cands = calloc((size_t)r->n_cands, sizeof *r->cands);
    if (!r->cands) {
        free(all);
        return r->status = KILN_ERR_NOMEM;
    }
    KirConfig dflt = {0};
    f->defaults(&k->spec, facts, &dflt);
    int n = 0, first_at[64];
    for (int i = 0; i < n_first && i < 64; i++) { /* the first configs, each once */
        first_at[i] = at_cand_find(r, n, &k->first[i]);
        if (first_at[i] == n) at_cand_set(&r->cands[n++], &k->first[i]);
    }
    int limit = max > n ? max : n; /* the first configs always stay */
    for (int i = 0; i < found && n < limit; i++)
        if (at_cand_find(r, n, &all[i]) == n) at_cand_set(&r->cands[n++], &all[i]);
    r->n_cands = n;
    int d = at_cand_find(r, n, &dflt);
    r->dflt = d < n ? d : -1;
    for (int b = 0; b < k->n_buckets; b++) {
        int fi = k->base ? k->base[b] : -1;
        r->base[b] = fi >= 0 && fi < n_first && fi < 64 ? first_at[fi] : r->dflt;
    }
    free(all);
    return KILN_OK;
}

/* Drops what an INVALID candidate measured. */
static void at_cand_invalid(AtKernelResult *r, int ci, AtCandStatus st)
{
    r->cands[ci].status = st;
    r->invalid++;
    for (int b = 0; b < r->kernel->n_buckets; b++)
        memset(&r->buckets[b].stats[ci], 0, sizeof(AtStats));
}

static void at_progress(const AtSearchOptions *o, const AtSearchResult *res, int ki, int n, int done,
                        double t0, double now, int64_t total_done)
{
    if (!o->progress) return;
    const AtKernelResult *r = &res->kernels[ki];
    AtProgress p = {.kernel = r->kernel->name,
                    .kernel_index = ki,
                    .n_kernels = n,
                    .done = done,
                    .n_cands = r->n_cands,
                    .elapsed_s = now - t0};
    if (r->buckets && r->buckets[0].best >= 0) {
        p.best_config = r->cands[r->buckets[0].best].config;
        p.best_us = r->buckets[0].stats[r->buckets[0].best].median_us;
    }
    /* the pace so far, over this kernel's candidates left and as many for each kernel after it */
    double per = total_done > 0 ? (now - t0) / (double)total_done : 0;
    p.eta_s = per * ((r->n_cands - done) + (double)(n - ki - 1) * r->n_cands);
    if (o->budget_s > 0 && p.eta_s > o->budget_s - p.elapsed_s) p.eta_s = fmax(0, o->budget_s - p.elapsed_s);
    o->progress(o->progress_ctx, &p);
}

/* Writes a kernel's winners, each winning config's binary (timer->keep) before the first result that
 * names it. */
static KilnStatus at_store_winners(const AtTimer *t, const AtSearchOptions *o, AtKernelResult *r, char *err,
                                   int errlen)
{
    const AtKernel *k = r->kernel;
    for (int b = 0; b < k->n_buckets; b++) {
        AtBucketResult *br = &r->buckets[b];
        if (br->best < 0) continue;
        int kept = 0;
        for (int e = 0; e < b && !kept; e++)
            kept = r->buckets[e].best == br->best;
        if (!kept && t->keep) {
            KilnStatus st = t->keep(t->ctx, k, &r->cands[br->best].cfg, o->store, o->device, err, errlen);
            if (st) return st;
        }
        const AtStats *s = &br->stats[br->best];
        AtResult row = {.device = o->device,
                        .kernel = k->name,
                        .ir_hash = k->ir_hash,
                        .bucket = br->bucket,
                        .config = r->cands[br->best].config,
                        .median_us = s->median_us,
                        .p20_us = s->p20_us,
                        .p80_us = s->p80_us,
                        .samples = s->samples,
                        .default_us = br->default_us,
                        .candidates = r->tried,
                        .invalid = r->invalid};
        KilnStatus st = at_store_put(o->store, &row, &br->put, err, errlen);
        if (st) return st;
        br->stored = 1;
    }
    return KILN_OK;
}

KilnStatus at_search(const AtKernel *kernels, int n, const AtTimer *timer, const AtSearchOptions *o,
                     AtSearchResult *res, char *err, int errlen)
{
    if (res) memset(res, 0, sizeof *res);
    if (!res || (n > 0 && !kernels) || n < 0 || !timer || !timer->prepare || !timer->time || !o)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "at_search: missing argument");
    if (o->store && !o->device)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "at_search: a store needs a device fingerprint");
    int samples = o->samples > AT_MIN_SAMPLES ? o->samples : AT_MIN_SAMPLES;
    int max = o->max_candidates > 0 ? o->max_candidates : AT_DEFAULT_MAX_CANDIDATES;
    double *us = malloc(sizeof *us * (size_t)samples);
    res->kernels = calloc((size_t)(n > 0 ? n : 1), sizeof *res->kernels);
    if (!us || !res->kernels) {
        free(us);
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "at_search: out of memory");
    }
    res->n_kernels = n;
    KilnStatus status = KILN_OK;
    double t0 = at_now(timer);
    int64_t total_done = 0;

    for (int ki = 0; ki < n; ki++) {
        const AtKernel *k = &kernels[ki];
        AtKernelResult *r = &res->kernels[ki];
        r->kernel = k;
        r->dflt = -1;
        if (status != KILN_OK) { /* an earlier kernel stopped the search */
            r->status = status;
            snprintf(r->msg, sizeof r->msg, "%s: not tuned (the search stopped)", k->name);
            continue;
        }
        if (k->n_buckets < 1 || !k->buckets || !k->name || !k->ir_hash) {
            r->status = KILN_ERR_ARG;
            snprintf(r->msg, sizeof r->msg, "%s: needs a name, an IR hash and at least one bucket",
                     k->name ? k->name : "(kernel)");
            continue;
        }
        r->buckets = calloc((size_t)k->n_buckets, sizeof *r->buckets);
        r->base = calloc((size_t)k->n_buckets, sizeof *r->base);
        RtTdbBucket *bk = calloc((size_t)k->n_buckets, sizeof *bk);
        if (!r->buckets || !r->base || !bk) {
            free(bk);
            status = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "at_search: out of memory");
            continue;
        }
        for (int b = 0; b < k->n_buckets && !r->status; b++) {
            char why[200];
            r->buckets[b].best = -1;
            r->buckets[b].default_us = -1;
            if (rt_tdb_bucket_parse(k->buckets[b], &bk[b], why, sizeof why)) {
                r->status = KILN_ERR_ARG;
                snprintf(r->msg, sizeof r->msg, "%s: %s", k->name, why);
            }
            rt_tdb_bucket_format(&bk[b], r->buckets[b].bucket);
        }
        if (r->status || at_enumerate(k, o, max, r)) {
            free(bk);
            if (r->status == KILN_ERR_NOMEM)
                status = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "at_search: out of memory");
            continue;
        }
        for (int b = 0; b < k->n_buckets; b++)
            if (!(r->buckets[b].stats = calloc((size_t)r->n_cands, sizeof(AtStats))))
                r->status = KILN_ERR_NOMEM;
        if (r->status) {
            free(bk);
            status = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "at_search: out of memory");
            continue;
        }

        if (timer->start) timer->start(timer->ctx, k, r->cands, r->n_cands);
        double kstart = at_now(timer);
        double wsum = 0;
        for (int j = ki; j < n; j++)
            wsum += kernels[j].weight > 0 ? kernels[j].weight : 1;
        double share = o->budget_s > 0 ? (o->budget_s - (kstart - t0)) * (k->weight > 0 ? k->weight : 1) / wsum
                                       : INFINITY;
        int ci = 0;
        for (; ci < r->n_cands; ci++) {
            double now = at_now(timer);
            if (o->budget_s > 0 && (now - kstart >= share || now - t0 >= o->budget_s)) break;
            AtCand *c = &r->cands[ci];
            r->tried++;
            AtCandStatus st = timer->prepare(timer->ctx, k, &c->cfg, c->msg, sizeof c->msg);
            for (int b = 0; b < k->n_buckets && st == AT_CAND_OK; b++) {
                if (timer->serves && !timer->serves(timer->ctx, k, &c->cfg, &bk[b])) continue;
                st = timer->time(timer->ctx, k, &c->cfg, &bk[b], us, samples, c->msg, sizeof c->msg);
                for (int i = 0; i < samples && st == AT_CAND_OK; i++)
                    if (!(isfinite(us[i]) && us[i] > 0)) {
                        st = AT_CAND_TIMING;
                        snprintf(c->msg, sizeof c->msg, "sample %d is %g us", i, us[i]);
                    }
                if (st == AT_CAND_OK) at_stats(us, samples, &r->buckets[b].stats[ci]);
            }
            if (st != AT_CAND_OK) {
                at_cand_invalid(r, ci, st);
                if (st == AT_CAND_FAULT && timer->recover && timer->recover(timer->ctx) != 0) {
                    status = rt_file_errf(err, errlen, KILN_ERR_DEVICE,
                                          "%s: config %s faulted the GPU and the timer could not recover: %s",
                                          k->name, c->config, c->msg);
                    ci++;
                    break;
                }
            } else {
                c->status = AT_CAND_OK;
                for (int b = 0; b < k->n_buckets; b++) {
                    AtBucketResult *br = &r->buckets[b];
                    double m = br->stats[ci].median_us;
                    if (!br->stats[ci].samples) continue; /* it does not serve this bucket */
                    if (br->best < 0 || m < br->stats[br->best].median_us * (1 - o->tie_rel)) br->best = ci;
                }
            }
            total_done++;
            at_progress(o, res, ki, n, ci + 1, t0, at_now(timer), total_done);
        }
        for (; ci < r->n_cands; ci++) {
            r->cands[ci].status = AT_CAND_SKIPPED;
            r->skipped++;
            if (status == KILN_OK) res->budget_exhausted = 1;
        }
        for (int b = 0; b < k->n_buckets; b++) {
            int d = r->base[b];
            if (d >= 0 && r->cands[d].status == AT_CAND_OK && r->buckets[b].stats[d].samples)
                r->buckets[b].default_us = r->buckets[b].stats[d].median_us;
        }
        r->seconds = at_now(timer) - kstart;
        free(bk);
        if (o->store) {
            KilnStatus s = at_store_winners(timer, o, r, err, errlen);
            if (s && status == KILN_OK) status = s;
        }
    }
    res->seconds = at_now(timer) - t0;
    free(us);
    return status;
}

void at_search_result_free(AtSearchResult *res)
{
    if (!res) return;
    for (int i = 0; i < res->n_kernels; i++) {
        AtKernelResult *r = &res->kernels[i];
        for (int b = 0; r->buckets && b < r->kernel->n_buckets; b++)
            free(r->buckets[b].stats);
        free(r->buckets);
        free(r->base);
        free(r->cands);
    }
    free(res->kernels);
    memset(res, 0, sizeof *res);
}
