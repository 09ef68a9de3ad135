/* test_kfam_sample.c — the sample family on every executor:
 *   greedy mode   exact argmax vs kref_argmax (ties to the smallest index, -inf entries, odd V);
 *   sample mode   every token lies in the reference's allowed set (float64 top-k / top-p threshold, loosened
 *                 by what a float32 bisection may add); T <= 0 gives the argmax exactly, top_k = 1 a
 *                 maximum (a tie for the maximum is in the top-1 set, as in HF);
 *   distribution  many seeds over a small V: chi-square of the token counts against softmax(x / T)
 *                 restricted to the allowed set and renormalized, rejected only beyond a 1e-4 tail bound.
 *                 Logits and seeds are fixed, so this check cannot flake. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kref.h"
#include "ksweep.h"
#include "kt.h"

static KirKernel *build(const KRunner *r, IrArena *a, int V, const char *mode, const KirConfig *cfg)
{
    KfamSpec s = kfam_spec("sample");
    kfam_spec_int(&s, "V", V);
    kfam_spec_str(&s, "mode", mode);
    return ksweep_build(r, a, &s, cfg);
}

/* Runs the kernel over R rows; params NULL for greedy. tokens get the result. 1 when it ran. */
static int run(const KRunner *r, const KirKernel *k, float *logits, float *params, int32_t *tokens, int R,
               int V)
{
    KRunArg args[4];
    int n = 0;
    kref_poison(tokens, sizeof(int32_t) * (size_t)R);
    args[n++] = (KRunArg){logits, sizeof(float) * (size_t)R * V, 0, 0};
    if (params) args[n++] = (KRunArg){params, sizeof(float) * (size_t)R * 4, 0, 0};
    args[n++] = (KRunArg){tokens, sizeof(int32_t) * (size_t)R, 0, 0};
    args[n++] = (KRunArg){NULL, 0, R, 0};
    return ksweep_run(r, k, args) > 0;
}

static void fill_logits(KrefRng *g, float *x, int R, int V)
{
    for (size_t i = 0; i < (size_t)R * V; i++)
        x[i] = (float)(3 * kref_normal(g));
    for (int row = 0; row < R; row++) {
        float *x_r = x + (size_t)row * V;
        if (row % 3 == 1 && V > 2) { /* a tie for the maximum: the smaller index must win */
            int j = (int)(kref_next(g) % (uint64_t)(V - 1)), m = kref_argmax(x_r, V);
            x_r[j] = x_r[m] = x_r[m] + 1.0f;
        }
        if (row % 4 == 2 && V > 3) x_r[kref_next(g) % (uint64_t)V] = -INFINITY;
        if (row == 5 && V > 1) x_r[0] = -INFINITY; /* never allowed */
    }
}

static void greedy_case(const KRunner *r, KrefRng *g, int V, int R, const KirConfig *cfg)
{
    IrArena *a = ir_arena_create();
    KirKernel *k = build(r, a, V, "greedy", cfg);
    float *x = malloc(sizeof(float) * (size_t)R * V);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)R);
    fill_logits(g, x, R, V);
    if (k && run(r, k, x, NULL, tok, R, V)) {
        int bad = -1;
        for (int row = 0; row < R && bad < 0; row++)
            if (tok[row] != kref_argmax(x + (size_t)row * V, V)) bad = row;
        ksweep_check(r, k, bad < 0, "sample greedy V=%d R=%d: row %d gave %d, argmax %d", V, R, bad,
                     bad < 0 ? 0 : tok[bad], bad < 0 ? 0 : kref_argmax(x + (size_t)bad * V, V));
    }
    free(x);
    free(tok);
    ir_arena_destroy(a);
}

static void sample_case(const KRunner *r, KrefRng *g, int V, int R, const KirConfig *cfg)
{
    static const float temps[] = {0.0f, 0.7f, 1.0f, 1.5f, -1.0f};
    static const float top_ps[] = {1.0f, 0.9f, 0.5f, 0.0f, 0.95f};
    IrArena *a = ir_arena_create();
    KirKernel *k = build(r, a, V, "sample", cfg);
    float *x = malloc(sizeof(float) * (size_t)R * V), *p = malloc(sizeof(float) * (size_t)R * 4);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)R);
    fill_logits(g, x, R, V);
    for (int row = 0; row < R; row++) {
        int top_ks[] = {0, 1, 5, V + 3, V / 2};
        p[row * 4 + 0] = temps[kref_next(g) % 5];
        p[row * 4 + 1] = (float)top_ks[kref_next(g) % 5];
        p[row * 4 + 2] = top_ps[kref_next(g) % 5];
        p[row * 4 + 3] = (float)(kref_next(g) % 1000000);
    }
    if (k && run(r, k, x, p, tok, R, V)) {
        int bad = -1;
        const char *why = "";
        for (int row = 0; row < R && bad < 0; row++) {
            const float *x_r = x + (size_t)row * V, *p_r = p + row * 4;
            int t = tok[row], am = kref_argmax(x_r, V);
            double lo = INFINITY, hi = -INFINITY;
            for (int j = 0; j < V; j++)
                if (x_r[j] > -INFINITY) lo = fmin(lo, x_r[j]), hi = fmax(hi, x_r[j]);
            double thr = kref_sample_threshold(x_r, V, p_r[0], (int)p_r[1], p_r[2], 1e-4);
            double slack = (hi - lo) * 0x1p-30;
            if (t < 0 || t >= V)
                bad = row, why = "token out of range";
            else if (p_r[0] <= 0 && t != am)
                bad = row, why = "greedy is not the argmax";
            else if (p_r[1] == 1 && x_r[t] != x_r[am])
                bad = row, why = "top_k=1 is not a maximum";
            else if (!(x_r[t] >= thr - slack))
                bad = row, why = "token outside the allowed set";
        }
        ksweep_check(r, k, bad < 0, "sample V=%d R=%d: row %d (T=%g k=%g p=%g seed=%g) token %d: %s", V, R,
                     bad, bad < 0 ? 0 : p[bad * 4], bad < 0 ? 0 : p[bad * 4 + 1],
                     bad < 0 ? 0 : p[bad * 4 + 2], bad < 0 ? 0 : p[bad * 4 + 3], bad < 0 ? 0 : tok[bad], why);
    }
    free(x);
    free(p);
    free(tok);
    ir_arena_destroy(a);
}

/* Chi-square of R draws (seeds 1..R, one row each) of one fixed distribution. */
static void distribution_case(const KRunner *r, float T, int top_k, float top_p, const KirConfig *cfg)
{
    enum { V = 12, R = 3000 };
    IrArena *a = ir_arena_create();
    KirKernel *k = build(r, a, V, "sample", cfg);
    KrefRng g = kref_rng(42); /* fixed: the test must not flake */
    float base[V], *x = malloc(sizeof(float) * R * V), *p = malloc(sizeof(float) * R * 4);
    int32_t *tok = malloc(sizeof(int32_t) * R);
    for (int j = 0; j < V; j++)
        base[j] = (float)(1.5 * kref_normal(&g));
    for (int row = 0; row < R; row++) {
        memcpy(x + (size_t)row * V, base, sizeof base);
        p[row * 4 + 0] = T;
        p[row * 4 + 1] = (float)top_k;
        p[row * 4 + 2] = top_p;
        p[row * 4 + 3] = (float)(row + 1);
    }
    if (k && run(r, k, x, p, tok, R, V)) {
        double thr = kref_sample_threshold(base, V, T, top_k, top_p, 0), prob[V], chi2 = 0;
        int count[V] = {0}, outside = 0, cells = 0;
        kref_sample_probs(base, V, T, thr, prob);
        for (int row = 0; row < R; row++) {
            if (tok[row] < 0 || tok[row] >= V || prob[tok[row]] == 0)
                outside++;
            else
                count[tok[row]]++;
        }
        for (int j = 0; j < V; j++)
            if (prob[j] > 0) {
                double e = R * prob[j];
                chi2 += (count[j] - e) * (count[j] - e) / e;
                cells++;
            }
        double bound = cells > 1 ? kref_chi2_bound(cells - 1) : 0;
        ksweep_check(r, k, outside == 0 && chi2 <= bound,
                     "sample distribution T=%g top_k=%d top_p=%g: %d tokens outside the allowed set, chi2 "
                     "%.2f over %d "
                     "cells (bound %.2f)",
                     T, top_k, top_p, outside, chi2, cells, bound);
    }
    free(x);
    free(p);
    free(tok);
    ir_arena_destroy(a);
}

static void sweep(const KRunner *r, KrefRng *g)
{
    static const int vs[] = {1, 7, 100, 1000, 50000};
    KirConfig cfgs[4];
    cfgs[0] = ksweep_cfg(0);
    cfgs[1] = ksweep_cfg(2, "BLOCK", 32, "WARPS", 1);
    cfgs[2] = ksweep_cfg(2, "BLOCK", 256, "WARPS", 4);
    cfgs[3] = ksweep_cfg(2, "BLOCK", 2048, "WARPS", 8);
    int big = ksweep_big(r);
    for (int i = 0; i < (big ? 5 : 4); i++)
        for (int c = 0; c < 4; c++) {
            greedy_case(r, g, vs[i], 9, &cfgs[c]);
            sample_case(r, g, vs[i], big ? 64 : 16, &cfgs[c]);
        }
    distribution_case(r, 1.0f, 0, 1.0f, &cfgs[1]);
    distribution_case(r, 0.7f, 5, 1.0f, &cfgs[0]);
    distribution_case(r, 1.3f, 0, 0.8f, &cfgs[1]);
    distribution_case(r, 1.0f, 6, 0.9f, &cfgs[2]);
}

int main(void)
{
    const KRunner *rs[3];
    int n = ksweep_runners(rs, 3);
    KrefRng g = kref_rng(kref_seed());
    for (int i = 0; i < n; i++)
        sweep(rs[i], &g);
    ksweep_summary("kfam_sample");
    return kt_done("test_kfam_sample");
}
