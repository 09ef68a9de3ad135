/* test_kfam_spec_verify.c — the spec_verify family on every executor:
 *   greedy        exact vs kref_spec_verify_greedy: drafts that match the argmax for a random prefix and
 *                 then miss (another token, -1 or V), ties for the maximum, -inf entries and all -inf rows;
 *                 V 7 / 1000 / 32001, k 1..8, several configs;
 *   sample        vs the float64 reference with the family's counter noise: drafts drawn from q, q equal to,
 *                 near or far from p, holes (p = 0 where q > 0 and q = 0 where p > 0), T <= 0 rows
 *                 (greedy); every output in range. Sequences whose decisions lie within float32 resolution
 *                 (kref_spec_verify_sample's `ambiguous`) are not compared; they are counted and must be few;
 *   determinism   fixed inputs: two runs are bit-identical, and every executor gives the first one's outputs
 *                 (bit for bit, on every sequence the reference does not flag: rand is exact everywhere);
 *   distribution  20,000 sequences (seeds 1..20000) with fixed logits and q and drafts drawn from q: the
 *                 token emitted at each position, among the sequences that reach it, follows the target
 *                 softmax(x / T) (chi-square over cells pooled to >= 5 expected, rejected only beyond the
 *                 1e-4 tail bound); tokens with p = 0 never appear; the acceptance rate of position 0 is
 *                 sum_x min(p, q) and the mean accepted count its expectation, within 5 standard errors.
 *                 Inputs and seeds are fixed, so these checks cannot flake;
 *   graph         the spec_verify op through inference and sched in both modes: the launch's arguments
 *                 line up with the family's params; wrong input counts and params shapes are rejected;
 *   cuda compile  the default kernels through NVRTC for sm_90a (no GPU needed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"
#include "codegen/cg_target.h"
#include "codegen/cuda/cg_cuda.h"
#include "ir/sched.h"
#include "kfacts.h"
#include "kref.h"
#include "ksweep.h"
#include "kt.h"

enum { DIST_N = 20000 };
static const double MARGIN = 1e-3; /* relative error of the kernel's f32 probabilities the reference allows */
static int n_compared, n_close; /* sample-mode sequences checked against the reference / too close to call */

typedef struct Case {
    int V, K, B, sampling;
    float *logits, *q, *params; /* q, params: sample mode only */
    int32_t *draft, *acc, *bon;
} Case;

static size_t n_rows(const Case *c)
{
    return (size_t)c->B * (size_t)(c->K + 1);
}

static void case_alloc(Case *c, int V, int K, int B, int sampling)
{
    memset(c, 0, sizeof *c);
    c->V = V, c->K = K, c->B = B, c->sampling = sampling;
    c->logits = kref_alloc(KIR_F32, n_rows(c) * (size_t)V);
    c->draft = kref_alloc(KIR_I32, (size_t)B * K);
    c->acc = kref_alloc(KIR_I32, (size_t)B);
    c->bon = kref_alloc(KIR_I32, (size_t)B);
    if (sampling) {
        c->q = kref_alloc(KIR_F32, n_rows(c) * (size_t)V); /* rows j = K stay poisoned: never read */
        c->params = kref_alloc(KIR_F32, (size_t)B * 4);
    }
}

static void case_free(Case *c)
{
    free(c->logits);
    free(c->q);
    free(c->params);
    free(c->draft);
    free(c->acc);
    free(c->bon);
}

static KirKernel *build(const KRunner *r, IrArena *a, const Case *c, const KirConfig *cfg)
{
    KfamSpec s = kfam_spec("spec_verify");
    kfam_spec_int(&s, "V", c->V);
    kfam_spec_int(&s, "k", c->K);
    kfam_spec_str(&s, "mode", c->sampling ? "sample" : "greedy");
    return ksweep_build(r, a, &s, cfg);
}

/* A fixed case outside the config sweep (determinism_case): never sampled out. */
static KirKernel *build_always(const KRunner *r, IrArena *a, const Case *c, const KirConfig *cfg)
{
    KfamSpec s = kfam_spec("spec_verify");
    kfam_spec_int(&s, "V", c->V);
    kfam_spec_int(&s, "k", c->K);
    kfam_spec_str(&s, "mode", c->sampling ? "sample" : "greedy");
    return ksweep_build_always(r, a, &s, cfg);
}

/* Runs k on c (outputs poisoned first); 1 when it ran. */
static int run(const KRunner *r, const KirKernel *k, Case *c)
{
    KRunArg args[7];
    int n = 0;
    size_t cells = n_rows(c) * (size_t)c->V;
    kref_poison(c->acc, sizeof(int32_t) * (size_t)c->B);
    kref_poison(c->bon, sizeof(int32_t) * (size_t)c->B);
    args[n++] = (KRunArg){c->logits, sizeof(float) * cells, 0, 0};
    args[n++] = (KRunArg){c->draft, sizeof(int32_t) * (size_t)c->B * c->K, 0, 0};
    if (c->sampling) {
        args[n++] = (KRunArg){c->q, sizeof(float) * cells, 0, 0};
        args[n++] = (KRunArg){c->params, sizeof(float) * (size_t)c->B * 4, 0, 0};
    }
    args[n++] = (KRunArg){c->acc, sizeof(int32_t) * (size_t)c->B, 0, 0};
    args[n++] = (KRunArg){c->bon, sizeof(int32_t) * (size_t)c->B, 0, 0};
    args[n++] = (KRunArg){NULL, 0, c->B, 0};
    return ksweep_run(r, k, args) > 0;
}

/* ---- inputs ---- */

/* A logit row: N(0, 9) with, by `kind`, a tie for the maximum, -inf entries or nothing but -inf. */
static void fill_row(KrefRng *g, float *x, int V, uint64_t kind)
{
    for (int t = 0; t < V; t++)
        x[t] = (float)(3 * kref_normal(g));
    if (kind % 5 == 1 && V > 2) { /* a tie for the maximum: the smaller index must win */
        int t = (int)(kref_next(g) % (uint64_t)V), m = kref_argmax(x, V);
        if (t != m) x[t] = x[m] = x[m] + 1.0f;
    }
    if (kind % 5 == 2 && V > 3)
        for (int i = 0; i < 1 + V / 50; i++)
            x[kref_next(g) % (uint64_t)V] = -INFINITY;
    if (kind % 7 == 3) x[0] = -INFINITY;
    if (kind % 41 == 6)
        for (int t = 0; t < V; t++)
            x[t] = -INFINITY;
}

/* softmax(x / T) in float64 (all -inf: uniform). */
static void softmax(const float *x, int V, double T, double *p)
{
    double m = -INFINITY, z = 0;
    for (int t = 0; t < V; t++)
        m = fmax(m, x[t]);
    for (int t = 0; t < V; t++)
        z += (p[t] = m == -INFINITY ? 1.0 : exp((x[t] - m) / T));
    for (int t = 0; t < V; t++)
        p[t] /= z;
}

/* A token drawn from q (f32 probabilities, not all zero). */
static int32_t draw(KrefRng *g, const float *q, int V)
{
    double z = 0, cum = 0;
    int last = 0;
    for (int t = 0; t < V; t++)
        z += q[t];
    double u = kref_uniform(g, 0, z);
    for (int t = 0; t < V; t++) {
        if (q[t] > 0) last = t;
        cum += q[t];
        if (q[t] > 0 && u < cum) return t;
    }
    return last;
}

/* Greedy drafts of sequence b: the argmax for a random prefix, then a miss (another token, -1 or V),
 * then random tokens. */
static void greedy_drafts(KrefRng *g, Case *c, int b)
{
    int V = c->V, L = (int)(kref_next(g) % (uint64_t)(c->K + 1));
    for (int j = 0; j < c->K; j++) {
        int a = kref_argmax(c->logits + ((size_t)b * (c->K + 1) + j) * V, V), pick;
        uint64_t how = kref_next(g) % 4;
        if (j < L)
            pick = a;
        else if (j > L)
            pick = (int)(kref_next(g) % (uint64_t)V);
        else if (how == 0 || V == 1)
            pick = -1;
        else if (how == 1)
            pick = V;
        else
            pick = (a + 1 + (int)(kref_next(g) % (uint64_t)(V - 1))) % V;
        c->draft[(size_t)b * c->K + j] = pick;
    }
}

/* Sample-mode inputs: per sequence T in {1, 0.7, 1.5, 0, -1} (the last two greedy), q = softmax of the
 * logits plus N(0, sigma^2) noise (sigma 0: q = p), sometimes with holes (q = 0 at a few tokens), drafts
 * drawn from q (greedy rows: argmax prefix drafts). */
static void fill_sample(KrefRng *g, Case *c)
{
    static const float temps[] = {1.0f, 0.7f, 1.5f, 0.0f, -1.0f, 1.0f};
    static const double sigmas[] = {0, 0.2, 1, 4};
    int V = c->V, K = c->K;
    double *p = malloc(sizeof(double) * (size_t)V);
    float *ql = malloc(sizeof(float) * (size_t)V);
    for (int b = 0; b < c->B; b++) {
        float T = temps[kref_next(g) % 6];
        double sigma = sigmas[kref_next(g) % 4], Tq = T > 0 ? T : 1;
        int holes = kref_next(g) % 3 == 0;
        float *pr = c->params + (size_t)b * 4;
        pr[0] = T, pr[1] = 0, pr[2] = 1, pr[3] = (float)(kref_next(g) % (1u << 24));
        for (int j = 0; j <= K; j++) {
            size_t row = ((size_t)b * (K + 1) + j) * V;
            float *x = c->logits + row;
            fill_row(g, x, V, kref_next(g));
            if (j == K) continue;
            for (int t = 0; t < V; t++) /* q has mass where p has none (x = -inf) */
                ql[t] =
                    x[t] > -INFINITY ? (float)(x[t] + sigma * kref_normal(g)) : (float)(3 * kref_normal(g));
            softmax(ql, V, Tq, p);
            if (holes && V > 2)
                for (int i = 0; i < 1 + V / 20; i++)
                    p[kref_next(g) % (uint64_t)V] = 0; /* q has no mass where p has some */
            double z = 0;
            for (int t = 0; t < V; t++)
                z += p[t];
            if (!(z > 0)) p[0] = z = 1;
            for (int t = 0; t < V; t++)
                c->q[row + t] = (float)(p[t] / z);
            if (T > 0) c->draft[(size_t)b * K + j] = draw(g, c->q + row, V);
        }
        if (!(T > 0)) greedy_drafts(g, c, b);
    }
    free(p);
    free(ql);
}

/* ---- cases ---- */

static void greedy_case(const KRunner *r, KrefRng *g, int V, int K, int B, const KirConfig *cfg)
{
    IrArena *a = ir_arena_create();
    Case c;
    case_alloc(&c, V, K, B, 0);
    KirKernel *k = build(r, a, &c, cfg);
    for (size_t i = 0; i < n_rows(&c); i++)
        fill_row(g, c.logits + i * V, V, kref_next(g));
    for (int b = 0; b < B; b++)
        greedy_drafts(g, &c, b);
    if (k && run(r, k, &c)) {
        int32_t *want_n = malloc(sizeof(int32_t) * B), *want_t = malloc(sizeof(int32_t) * B);
        kref_spec_verify_greedy(c.logits, c.draft, B, K, V, want_n, want_t);
        int bad = -1;
        for (int b = 0; b < B && bad < 0; b++)
            if (c.acc[b] != want_n[b] || c.bon[b] != want_t[b]) bad = b;
        ksweep_check(r, k, bad < 0,
                     "spec_verify greedy V=%d k=%d B=%d: sequence %d gave (%d, %d), want (%d, %d)", V, K, B,
                     bad, bad < 0 ? 0 : c.acc[bad], bad < 0 ? 0 : c.bon[bad], bad < 0 ? 0 : want_n[bad],
                     bad < 0 ? 0 : want_t[bad]);
        free(want_n);
        free(want_t);
    }
    case_free(&c);
    ir_arena_destroy(a);
}

/* Compares c's outputs with the reference on the sequences it does not flag; returns how many it flags. */
static int check_sample(const KRunner *r, const KirKernel *k, const Case *c, const char *what)
{
    int B = c->B;
    int32_t *want_n = malloc(sizeof(int32_t) * B), *want_t = malloc(sizeof(int32_t) * B);
    unsigned char *amb = malloc((size_t)B);
    int n_amb = kref_spec_verify_sample(c->logits, c->draft, c->q, c->params, B, c->K, c->V, MARGIN, want_n,
                                        want_t, amb);
    int bad = -1, range = -1;
    n_compared += B - n_amb, n_close += n_amb;
    for (int b = 0; b < B; b++) {
        if (range < 0 && (c->acc[b] < 0 || c->acc[b] > c->K || c->bon[b] < 0 || c->bon[b] >= c->V)) range = b;
        if (bad < 0 && !amb[b] && (c->acc[b] != want_n[b] || c->bon[b] != want_t[b])) bad = b;
    }
    ksweep_check(r, k, range < 0, "%s V=%d k=%d: sequence %d out of range (%d, %d)", what, c->V, c->K, range,
                 range < 0 ? 0 : c->acc[range], range < 0 ? 0 : c->bon[range]);
    if (bad >= 0) {
        const float *pr = c->params + (size_t)bad * 4;
        ksweep_check(r, k, 0, "%s V=%d k=%d B=%d: sequence %d (T=%g seed=%g) gave (%d, %d), want (%d, %d)",
                     what, c->V, c->K, B, bad, pr[0], pr[3], c->acc[bad], c->bon[bad], want_n[bad],
                     want_t[bad]);
    } else {
        ksweep_check(r, k, 1, "%s: matches the reference", what);
    }
    ksweep_check(r, k, n_amb <= 2 + B / 10, "%s V=%d k=%d: %d of %d sequences too close to call", what, c->V,
                 c->K, n_amb, B);
    free(want_n);
    free(want_t);
    free(amb);
    return n_amb;
}

static void sample_case(const KRunner *r, KrefRng *g, int V, int K, int B, const KirConfig *cfg)
{
    IrArena *a = ir_arena_create();
    Case c;
    case_alloc(&c, V, K, B, 1);
    KirKernel *k = build(r, a, &c, cfg);
    fill_sample(g, &c);
    if (k && run(r, k, &c)) check_sample(r, k, &c, "spec_verify sample");
    case_free(&c);
    ir_arena_destroy(a);
}

/* Fixed inputs on every executor: each run twice (bit-identical), all against the first executor. */
static void determinism_case(const KRunner *const *rs, int n_rs)
{
    enum { V = 1000, K = 4, B = 64 };
    int32_t first_n[B], first_t[B];
    int have_first = 0;
    unsigned char amb[B];
    int32_t want_n[B], want_t[B];
    for (int i = 0; i < n_rs; i++) {
        IrArena *a = ir_arena_create();
        KrefRng g = kref_rng(7); /* fixed: the same inputs for every executor */
        Case c;
        case_alloc(&c, V, K, B, 1);
        fill_sample(&g, &c);
        KirConfig cfg = ksweep_cfg(2, "BLOCK", 256, "WARPS", 4);
        KirKernel *k = build_always(rs[i], a, &c, &cfg);
        if (i == 0)
            kref_spec_verify_sample(c.logits, c.draft, c.q, c.params, B, K, V, MARGIN, want_n, want_t, amb);
        if (k && run(rs[i], k, &c)) {
            int32_t n1[B], t1[B];
            memcpy(n1, c.acc, sizeof n1);
            memcpy(t1, c.bon, sizeof t1);
            int again = run(rs[i], k, &c);
            ksweep_check(rs[i], k, again && !memcmp(n1, c.acc, sizeof n1) && !memcmp(t1, c.bon, sizeof t1),
                         "spec_verify determinism: a second run differs");
            if (!have_first) {
                memcpy(first_n, c.acc, sizeof first_n);
                memcpy(first_t, c.bon, sizeof first_t);
                have_first = 1;
            } else {
                int bad = -1, compared = 0;
                for (int b = 0; b < B; b++) {
                    if (amb[b]) continue;
                    compared++;
                    if (bad < 0 && (c.acc[b] != first_n[b] || c.bon[b] != first_t[b])) bad = b;
                }
                ksweep_check(
                    rs[i], k, bad < 0 && compared > B / 2,
                    "spec_verify determinism: sequence %d gave (%d, %d), (%d, %d) on %s (%d compared)", bad,
                    bad < 0 ? 0 : c.acc[bad], bad < 0 ? 0 : c.bon[bad], bad < 0 ? 0 : first_n[bad],
                    bad < 0 ? 0 : first_t[bad], rs[0]->name, compared);
            }
        }
        case_free(&c);
        ir_arena_destroy(a);
    }
}

typedef struct Cell {
    double e;
    int n;
} Cell;

static int cell_cmp(const void *x, const void *y)
{
    const Cell *a = x, *b = y;
    return a->e < b->e ? -1 : a->e > b->e;
}

/* Chi-square of counts against total * prob over the tokens with prob > 0, the smallest cells pooled
 * until each has >= 5 expected; *df gets the degrees of freedom. */
static double chi2_pooled(const int *count, const double *prob, int V, int total, int *df)
{
    Cell *c = malloc(sizeof(Cell) * (size_t)V), *pool = malloc(sizeof(Cell) * (size_t)V);
    int n = 0, np = 0;
    for (int t = 0; t < V; t++)
        if (prob[t] > 0) c[n++] = (Cell){total * prob[t], count[t]};
    qsort(c, (size_t)n, sizeof *c, cell_cmp);
    Cell acc = {0, 0};
    for (int i = 0; i < n; i++) {
        acc.e += c[i].e, acc.n += c[i].n;
        if (acc.e >= 5) pool[np++] = acc, acc = (Cell){0, 0};
    }
    if (acc.e > 0) {
        if (np)
            pool[np - 1].e += acc.e, pool[np - 1].n += acc.n;
        else
            pool[np++] = acc;
    }
    double chi2 = 0;
    for (int i = 0; i < np; i++)
        chi2 += (pool[i].n - pool[i].e) * (pool[i].n - pool[i].e) / pool[i].e;
    *df = np - 1;
    free(c);
    free(pool);
    return chi2;
}

/* DIST_N sequences with the same logits and q and seeds 1..DIST_N. variant 0: q far from p; 1: q near p;
 * 2: holes (p = 0 at tokens 1 and 4 where q > 0, q = 0 at tokens 2 and 5 where p > 0); 3: q = p. */
static void distribution_case(const KRunner *r, int V, int K, float T, int variant, const KirConfig *cfg)
{
    IrArena *a = ir_arena_create();
    KrefRng g = kref_rng(1000 + 16 * (uint64_t)variant + (uint64_t)K); /* fixed: the test must not flake */
    Case c;
    case_alloc(&c, V, K, DIST_N, 1);
    KirKernel *k = build(r, a, &c, cfg);
    float *x = malloc(sizeof(float) * (size_t)(K + 1) * V), *q = malloc(sizeof(float) * (size_t)K * V);
    double *p = malloc(sizeof(double) * (size_t)(K + 1) * V), *qd = malloc(sizeof(double) * (size_t)V);
    float *ql = malloc(sizeof(float) * (size_t)V);
    for (int j = 0; j <= K; j++) {
        float *xj = x + (size_t)j * V;
        for (int t = 0; t < V; t++)
            xj[t] = (float)(1.5 * kref_normal(&g));
        if (variant == 2) xj[1] = xj[4] = -INFINITY;
        softmax(xj, V, T, p + (size_t)j * V);
        if (j == K) continue;
        for (int t = 0; t < V; t++)
            ql[t] = (float)(variant == 1 ? xj[t] + 0.5 * kref_normal(&g) : 1.5 * kref_normal(&g));
        softmax(ql, V, variant == 1 ? T : 1.0, qd);
        if (variant == 3) memcpy(qd, p + (size_t)j * V, sizeof(double) * V);
        if (variant == 2) qd[2] = qd[5] = 0;
        double z = 0;
        for (int t = 0; t < V; t++)
            z += qd[t];
        for (int t = 0; t < V; t++)
            q[(size_t)j * V + t] = (float)(qd[t] / z);
    }
    for (int b = 0; b < DIST_N; b++) {
        float *pr = c.params + (size_t)b * 4;
        pr[0] = T, pr[1] = 0, pr[2] = 1, pr[3] = (float)(b + 1);
        for (int j = 0; j <= K; j++) {
            size_t row = ((size_t)b * (K + 1) + j) * V;
            memcpy(c.logits + row, x + (size_t)j * V, sizeof(float) * V);
            if (j == K) continue;
            memcpy(c.q + row, q + (size_t)j * V, sizeof(float) * V);
            c.draft[(size_t)b * K + j] = draw(&g, q + (size_t)j * V, V);
        }
    }
    if (k && run(r, k, &c)) {
        int outside = 0, *count = calloc((size_t)V, sizeof(int)), n_sum = 0, reach1 = 0, len = 0;
        char chis[256] = "";
        for (int b = 0; b < DIST_N; b++) {
            n_sum += c.acc[b], reach1 += c.acc[b] >= 1;
            if (c.acc[b] < 0 || c.acc[b] > K || c.bon[b] < 0 || c.bon[b] >= V) outside++;
        }
        /* the token at position i, among the sequences that reach it, follows p_i */
        for (int i = 0; i <= K && !outside; i++) {
            int total = 0, df;
            memset(count, 0, sizeof(int) * (size_t)V);
            for (int b = 0; b < DIST_N; b++) {
                if (c.acc[b] < i) continue;
                int t = i < c.acc[b] ? c.draft[(size_t)b * K + i] : c.bon[b];
                const double *pi = p + (size_t)i * V;
                if (t < 0 || t >= V || pi[t] == 0)
                    outside++;
                else
                    count[t]++, total++;
            }
            if (total < 1000) continue;
            double chi2 = chi2_pooled(count, p + (size_t)i * V, V, total, &df);
            double bound = df > 0 ? kref_chi2_bound(df) : 0;
            if (len < 200)
                len += snprintf(chis + len, sizeof chis - (size_t)len, " %d:%.1f/%.1f", i, chi2, bound);
            ksweep_check(r, k, chi2 <= bound,
                         "spec_verify distribution V=%d k=%d T=%g variant %d: position %d, chi2 %.2f over %d "
                         "draws, df %d (bound %.2f)",
                         V, K, T, variant, i, chi2, total, df, bound);
        }
        ksweep_check(
            r, k, outside == 0,
            "spec_verify distribution V=%d k=%d T=%g variant %d: %d tokens out of range or with p = 0", V, K,
            T, variant, outside);
        /* acceptance: P(n >= i) = prod_{j<i} alpha_j, alpha_j = sum_x min(p_j(x), q_j(x)) */
        double reach = 1, mean = 0, sq = 0, alpha0 = 0;
        for (int i = 1; i <= K; i++) {
            double alpha = 0;
            for (int t = 0; t < V; t++)
                alpha += fmin(p[(size_t)(i - 1) * V + t], (double)q[(size_t)(i - 1) * V + t]);
            if (i == 1) alpha0 = alpha;
            reach *= alpha;
            mean += reach, sq += (2.0 * i - 1) * reach;
        }
        double se0 = sqrt(alpha0 * (1 - alpha0) / DIST_N), se = sqrt(fmax(sq - mean * mean, 0) / DIST_N);
        double rate = (double)reach1 / DIST_N, got = (double)n_sum / DIST_N;
        printf("distribution %s V=%d k=%d T=%g variant %d: accepted %.4f at position 0 (sum min(p, q) %.4f), "
               "mean "
               "n %.3f (expected %.3f), chi2/bound by position%s\n",
               r->name, V, K, T, variant, rate, alpha0, got, mean, chis);
        ksweep_check(
            r, k, fabs(rate - alpha0) <= 5 * se0 + 3.0 / DIST_N,
            "spec_verify acceptance V=%d k=%d T=%g variant %d: position 0 accepted %.4f, sum min(p, q) = "
            "%.4f (se %.4f)",
            V, K, T, variant, rate, alpha0, se0);
        ksweep_check(
            r, k, fabs(got - mean) <= 5 * se + 3.0 / DIST_N,
            "spec_verify acceptance V=%d k=%d T=%g variant %d: mean accepted %.4f, expected %.4f (se %.4f)",
            V, K, T, variant, got, mean, se);
        free(count);
    }
    free(x);
    free(q);
    free(p);
    free(qd);
    free(ql);
    case_free(&c);
    ir_arena_destroy(a);
}

/* The default kernels lower to CUDA C and NVRTC accepts them for sm_90a (no GPU needed). */
static void cuda_compile(void)
{
    static const char *const specs[][3] = {
        {"128256", "4", "sample"}, {"128256", "8", "greedy"}, {"7", "1", "sample"}};
    const CgTarget *t = cg_target_find("sm_90a");
    if (!t || !cg_backend_for(t, "cuda")) {
        printf("skip cuda compile: this build has no NVRTC\n");
        return;
    }
    for (unsigned i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        IrArena *a = ir_arena_create();
        KfamSpec s = kfam_spec("spec_verify");
        kfam_spec_int(&s, "V", atoi(specs[i][0]));
        kfam_spec_int(&s, "k", atoi(specs[i][1]));
        kfam_spec_str(&s, "mode", specs[i][2]);
        KirKernel *k = NULL;
        IrDiag d = {0};
        KT_CHECK(kfam_find("spec_verify")->build(a, &s, kfacts_sm90(), NULL, &k, &d) == IR_OK, "build: %s",
                 d.msg);
        if (k) {
            KT_CHECK(kir_verify(k, cg_target_limits(t), &d) == IR_OK, "%s: sm_90a budgets: %s", k->name,
                     d.msg);
            CgBinary cubin, ptx;
            double t0 = ir_now_ms();
            IrStatus st = cg_cuda_compile(k, t, &cubin, &ptx, &d);
            KT_CHECK(st == IR_OK, "%s: sm_90a: %s: %s", k->name, ir_status_name(st), d.msg);
            if (st == IR_OK) {
                printf("cuda sm_90a: %s compiled (%zu bytes cubin, %.1f s)\n", k->name, cubin.size,
                       (ir_now_ms() - t0) / 1000);
                cg_binary_free(&cubin);
                cg_binary_free(&ptx);
            }
        }
        ir_arena_destroy(a);
    }
}

/* ---- the graph op ---- */

static GirNode *spec_node(GirGraph *gr, int V, int K, const char *mode, int n_in, int params_cols, IrDiag *d)
{
    GirLoc loc = {"test", 1};
    GirDim R = gir_dim_sym(gr, "R"), B = gir_dim_sym(gr, "B");
    GirValue *in[4];
    in[0] =
        gir_leaf(gr, GIR_OP_INPUT, "logits", gir_type(GIR_F32, 2, (GirDim[]){R, gir_dim_const(V)}), loc, d);
    in[1] =
        gir_leaf(gr, GIR_OP_INPUT, "draft", gir_type(GIR_I32, 2, (GirDim[]){B, gir_dim_const(K)}), loc, d);
    in[2] = gir_leaf(gr, GIR_OP_INPUT, "draft_probs", gir_type(GIR_F32, 2, (GirDim[]){R, gir_dim_const(V)}),
                     loc, d);
    in[3] = gir_leaf(gr, GIR_OP_INPUT, "sampling",
                     gir_type(GIR_F32, 2, (GirDim[]){B, gir_dim_const(params_cols)}), loc, d);
    GirAttr attrs[2] = {gir_attr_int("k", K), gir_attr_str("mode", mode)};
    GirNode *n = gir_node_add(gr, GIR_OP_SPEC_VERIFY, in, n_in, attrs, 2, loc, d);
    if (!n) return NULL;
    GirAttr o0 = gir_attr_str("name", "accepted"), o1 = gir_attr_str("name", "bonus");
    if (!gir_node_add(gr, GIR_OP_OUTPUT, &n->out[0], 1, &o0, 1, loc, d) ||
        !gir_node_add(gr, GIR_OP_OUTPUT, &n->out[1], 1, &o1, 1, loc, d))
        return NULL;
    return n;
}

static void graph_case(void)
{
    static const struct {
        const char *mode;
        int n_in;
    } good[] = {{"greedy", 2}, {"sample", 4}};
    for (int m = 0; m < 2; m++) {
        GirGraph *gr = gir_graph_create("spec");
        IrDiag d = {0};
        GirNode *n = spec_node(gr, 1000, 5, good[m].mode, good[m].n_in, 4, &d);
        KT_CHECK(n && gir_verify(gr, &d) == IR_OK, "%s: %s", good[m].mode, d.msg);
        IrArena *a = ir_arena_create();
        Schedule *s = NULL;
        if (n) KT_CHECK(sched_build(gr, NULL, a, &s, &d) == IR_OK, "%s: sched: %s", good[m].mode, d.msg);
        if (s) {
            KT_CHECK(s->n_launches == 1 && s->n_kernels == 1, "%d launches", s->n_launches);
            const SchedLaunch *l = &s->launches[0];
            const SchedKernel *sk = &s->kernels[l->kernel];
            KirKernel *k = NULL;
            IrDiag kd = {0};
            KT_CHECK(sk->fam && sk->fam->build(a, &sk->spec, kfacts_sm90(), NULL, &k, &kd) == IR_OK,
                     "%s: build: %s", good[m].mode, kd.msg);
            if (k) {
                int ok = k->n_params == l->n_args;
                for (int i = 0; ok && i < l->n_args; i++)
                    ok = (l->args[i].kind == SCHED_ARG_BUF) == k->params[i].type.is_ptr;
                ok = ok && l->args[l->n_args - 1].kind == SCHED_ARG_SYM &&
                     !strcmp(gr->sym[l->args[l->n_args - 1].sym], "B");
                IrBuf b = {0};
                sched_launch_args(s, l, &b);
                KT_CHECK(ok, "%s: launch args (%s) vs %d params of %s", good[m].mode, b.s ? b.s : "",
                         k->n_params, k->name);
                ir_buf_free(&b);
            }
        }
        ir_arena_destroy(a);
        gir_graph_destroy(gr);
    }
    static const struct {
        const char *mode;
        int n_in, cols;
    } bad[] = {{"greedy", 3, 4}, {"greedy", 4, 4}, {"sample", 3, 4}, {"sample", 2, 4}, {"sample", 4, 3}};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        GirGraph *gr = gir_graph_create("spec");
        IrDiag d = {0};
        KT_CHECK(!spec_node(gr, 100, 3, bad[i].mode, bad[i].n_in, bad[i].cols, &d) && d.msg[0],
                 "%s with %d inputs (params [B,%d]) accepted", bad[i].mode, bad[i].n_in, bad[i].cols);
        gir_graph_destroy(gr);
    }
}

static void sweep(const KRunner *r, KrefRng *g)
{
    static const int vs[] = {7, 1000, 32001};
    KirConfig cfgs[4];
    cfgs[0] = ksweep_cfg(0);
    cfgs[1] = ksweep_cfg(2, "BLOCK", 32, "WARPS", 1);
    cfgs[2] = ksweep_cfg(2, "BLOCK", 256, "WARPS", 4);
    cfgs[3] = ksweep_cfg(2, "BLOCK", 2048, "WARPS", 8);
    int big = ksweep_big(r);
    for (int i = 0; i < 3; i++)
        for (int K = 1; K <= 8; K++) {
            int c = (K + i) % 4, B = vs[i] > 1000 ? (big ? 8 : 1) : big ? 48 : 12;
            if (vs[i] > 1000 && !big && K != 1 && K != 8) continue;
            greedy_case(r, g, vs[i], K, B, &cfgs[c]);
            sample_case(r, g, vs[i], K, 2 * B, &cfgs[c]);
        }
    printf("sample %s: %d sequences equal to the reference, %d too close to call\n", r->name, n_compared,
           n_close);
    n_compared = n_close = 0;
    if (big) { /* a Llama-3 vocabulary, streamed in chunks */
        greedy_case(r, g, 128256, 4, 4, &cfgs[0]);
        sample_case(r, g, 128256, 4, 8, &cfgs[0]);
    }
    distribution_case(r, 12, 1, 1.0f, 0, &cfgs[1]);
    distribution_case(r, 16, 3, 0.7f, 1, &cfgs[0]);
    distribution_case(r, 8, 2, 1.3f, 2, &cfgs[1]);
    distribution_case(r, 10, 2, 1.0f, 3, &cfgs[2]);
}

int main(void)
{
    const KRunner *rs[3];
    int n = ksweep_runners(rs, 3);
    KrefRng g = kref_rng(kref_seed());
    graph_case();
    cuda_compile();
    for (int i = 0; i < n; i++)
        sweep(rs[i], &g);
    determinism_case(rs, n);
    ksweep_summary("kfam_spec_verify");
    return kt_done("test_kfam_spec_verify");
}
