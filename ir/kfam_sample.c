/* kfam_sample.c — token sampling from f32 logits, one program per row.
 *
 * mode "greedy": out[r] = argmax_j logits[r, j]; ties go to the smallest index; a row of all -inf gives 0.
 * mode "sample": params[r] = (temperature T, top_k, top_p, seed), all f32 (top_k and seed integral;
 * seed < 2^24 to be exact). Row by row:
 *   - T <= 0 (or NaN): greedy, as above.
 *   - Otherwise the allowed set is A = {j : x_j >= t} for a threshold t found by value bisection:
 *       mx = max x, mn = min of the finite x (-inf logits are never allowed);
 *       top-k (on when 0 < top_k < V): (lo, hi) = (mn, mx), 32 times: mid = (lo + hi) / 2,
 *         lo = mid if count(x >= mid) >= top_k else hi = mid;  t_k = lo  (else t_k = mn)
 *       top-p (on when top_p < 1), on the softmax of x / T restricted to {x >= t_k} and renormalized:
 *         Z = sum_{x >= t_k} e(x), e(x) = exp((x - mx) / T); (lo, hi) = (t_k, mx), 32 times:
 *         lo = mid if sum_{x >= mid} e(x) >= top_p * Z else hi = mid;  t = lo  (else t = t_k)
 *     All in f32. With converged bisections A is exactly "the top_k largest (ties at the k-th value
 *     included)" then "the smallest prefix of those, by value, whose mass reaches top_p (ties included)";
 *     32 halvings of [mn, mx] can leave values within (mx - mn) / 2^32 below the exact threshold in A.
 *     top_p <= 0 keeps only the values at (or just below) the maximum; top_k >= V or <= 0 is off.
 *   - The token is argmax_{j in A} (x_j / T + g_j), ties to the smallest index, with Gumbel noise
 *     g_j = -log(-log(u_j)), u_j = max(rand(seed, j), 2^-25) (rand = kir_rand_ref: counter = column j).
 *     This draws j with probability softmax(x / T) restricted to A and renormalized. Rows that share a
 *     seed share their noise: callers derive a per-row, per-step seed.
 * NaN or +inf logits give an unspecified token in [0, V).
 *
 * Spec: V (vocabulary), mode ("greedy" | "sample").
 * Params, in order:
 *   logits      ptr<f32> [n_rows, V]  rdonly
 *   [params     ptr<f32> [n_rows, 4]  rdonly]   mode "sample"
 *   out_tokens  ptr<i32> [n_rows]
 *   n_rows      i32
 * Grid (n_rows, 1, 1). Config: BLOCK (columns per tile of every pass over the row), WARPS. Cost: the
 * row is read once when greedy (mode greedy, or T <= 0 in mode sample: the other passes run over no
 * columns), else 2, +1 with top-p, + 32 per active bisection; n_rows * V must fit i32.
 */
#include "kfam_impl.h"

#include <math.h>
#include <string.h>

extern const KfamFamily kfam_sample;

enum { SAMPLE_ITERS = 32 };

static void sample_defaults(const KfamSpec *s, const KfamFacts *facts, KirConfig *cfg)
{
    /* wide tiles, 32 columns a thread: a vocabulary row in few trips, each with many loads in flight
     * (greedy reads the row once) */
    int64_t block = kfam_clamp(kfam_pow2_ceil(kfam_spec_i(s, "V", 32000)), 32, 8192);
    kir_config_set(cfg, "BLOCK", block);
    kir_config_set(cfg, "WARPS", kfam_clamp(block / 1024, 1, 8));
}

typedef struct Row {
    int64_t V;
    int block;
    KirValue *logits, *base, *lanes, *cV;
} Row;

/* Inside a loop over the row: the columns (i32 [BLOCK]), their mask (NULL when BLOCK divides V) and
 * the logits with masked lanes reading -inf. */
static KirValue *row_tile(KirBuilder *b, const Row *r, KirValue *c0, KirValue **cols, KirValue **mask)
{
    *cols = kir_add(b, c0, r->lanes);
    *mask = r->V % r->block ? kir_lt(b, *cols, r->cV) : NULL;
    return kir_load(b, r->logits, kir_add(b, r->base, *cols), *mask,
                    *mask ? kir_const_f(b, KIR_F32, -INFINITY) : NULL);
}

/* A loop over the row's columns [0, hi) in BLOCK steps; hi is V, or 0 to skip a pass a row does not need. */
static KirBlock *row_loop_to(KirBuilder *b, const Row *r, KirValue *hi, KirValue *const *inits, int n)
{
    return kir_for_begin(b, kir_const_i32(b, 0), hi, kir_const_i32(b, r->block), inits, n, 0);
}

static KirBlock *row_loop(KirBuilder *b, const Row *r, KirValue *const *inits, int n)
{
    return row_loop_to(b, r, r->cV, inits, n);
}

/* sum over the row of select(x >= t, e(x), 0) with e(x) = exp((x - mx) * inv_t) (f32 scalar); over
 * columns [0, hi) (hi = 0: 0). */
static KirValue *mass_to(KirBuilder *b, const Row *r, KirValue *hi, KirValue *t, KirValue *mx,
                         KirValue *inv_t)
{
    KirValue *zero = kir_const_f(b, KIR_F32, 0);
    KirBlock *body = row_loop_to(b, r, hi, &zero, 1);
    KirValue *cols, *mask;
    KirValue *x = row_tile(b, r, body->args[0], &cols, &mask);
    KirValue *e = kir_unary(b, KIR_OP_EXP, kir_mul(b, kir_sub(b, x, mx), inv_t));
    KirValue *part = kir_reduce(b, kir_select(b, kir_binary(b, KIR_OP_GE, x, t), e, zero), KIR_RED_SUM, 0);
    KirValue *acc = kir_add(b, body->args[1], part);
    return kir_for_end(b, &acc, 1)->res[0];
}

static KirValue *mass_at(KirBuilder *b, const Row *r, KirValue *t, KirValue *mx, KirValue *inv_t)
{
    return mass_to(b, r, r->cV, t, mx, inv_t);
}

/* Value bisection over (lo, hi), `iters` (i32 scalar) times; is_top_p picks the predicate. Returns lo. */
static KirValue *bisect(KirBuilder *b, const Row *r, KirValue *iters, KirValue *lo, KirValue *hi,
                        int is_top_p, KirValue *k, KirValue *target, KirValue *mx, KirValue *inv_t)
{
    KirValue *inits[2] = {lo, hi};
    KirBlock *it = kir_for_begin(b, kir_const_i32(b, 0), iters, kir_const_i32(b, 1), inits, 2, 0);
    KirValue *l = it->args[1], *h = it->args[2];
    KirValue *mid = kir_mul(b, kir_add(b, l, h), kir_const_f(b, KIR_F32, 0.5));
    KirValue *ok;
    if (is_top_p) {
        ok = kir_binary(b, KIR_OP_GE, mass_at(b, r, mid, mx, inv_t), target);
    } else {
        KirValue *zero = kir_const_i32(b, 0);
        KirBlock *body = row_loop(b, r, &zero, 1);
        KirValue *cols, *mask;
        KirValue *x = row_tile(b, r, body->args[0], &cols, &mask);
        KirValue *n = kir_reduce(b, kir_cast(b, kir_binary(b, KIR_OP_GE, x, mid), KIR_I32), KIR_RED_SUM, 0);
        KirValue *acc = kir_add(b, body->args[1], n);
        ok = kir_binary(b, KIR_OP_GE, kir_for_end(b, &acc, 1)->res[0], k);
    }
    KirValue *next[2] = {kir_select(b, ok, mid, l), kir_select(b, ok, h, mid)};
    return kir_for_end(b, next, 2)->res[0];
}

/* The index of the row's maximum over columns [0, hi) (ties: the smallest; 0 when hi = 0 or every
 * value is -inf). With seed: of x * inv_t + Gumbel noise over the allowed set {x >= thresh}. */
static KirValue *argmax_pass(KirBuilder *b, const Row *r, KirValue *hi, KirValue *seed, KirValue *inv_t,
                             KirValue *thresh, KirValue *hot)
{
    /* per lane, the best value so far and its first column: no reduction (and no barrier) inside the
     * loop, so a row streams at the memory's pace; one reduction after it */
    KirValue *ninf = kir_const_f(b, KIR_F32, -INFINITY);
    int shape[1] = {r->block};
    KirValue *inits[2] = {kir_splat(b, ninf, 1, shape), kir_splat(b, kir_const_i32(b, 0), 1, shape)};
    KirBlock *body = row_loop_to(b, r, hi, inits, 2);
    KirValue *cols, *mask;
    KirValue *x = row_tile(b, r, body->args[0], &cols, &mask);
    KirValue *zt = x, *allowed = mask;
    if (seed) {
        KirValue *u =
            kir_binary(b, KIR_OP_MAX, kir_rand(b, seed, cols), kir_const_f(b, KIR_F32, ldexp(1.0, -25)));
        KirValue *g = kir_unary(
            b, KIR_OP_NEG, kir_unary(b, KIR_OP_LOG, kir_unary(b, KIR_OP_NEG, kir_unary(b, KIR_OP_LOG, u))));
        g = kir_select(b, hot, g, kir_const_f(b, KIR_F32, 0));
        zt = kir_add(b, kir_mul(b, x, inv_t), g);
        allowed = kfam_and(b, kir_binary(b, KIR_OP_GE, x, thresh), mask);
    }
    if (allowed) zt = kir_select(b, allowed, zt, ninf);
    KirValue *better = kir_binary(b, KIR_OP_GT, zt, body->args[1]); /* strict: a lane keeps its first max */
    KirValue *next[2] = {kir_select(b, better, zt, body->args[1]),
                         kir_select(b, better, cols, body->args[2])};
    KirInst *loop = kir_for_end(b, next, 2);
    KirValue *best = loop->res[0], *tmax = kir_reduce(b, best, KIR_RED_MAX, 0);
    /* the smallest column holding the maximum; every lane at -inf (no allowed value): column 0 */
    KirValue *at_max = kir_binary(b, KIR_OP_EQ, best, tmax);
    return kir_reduce(b, kir_select(b, at_max, loop->res[1], kir_const_i32(b, 2147483647)), KIR_RED_MIN, 0);
}

static IrStatus sample_build(IrArena *a, const KfamSpec *s, const KfamFacts *facts, const KirConfig *given,
                             KirKernel **out, IrDiag *d)
{
    Row r = {0};
    KirConfig cfg;
    if (kfam_spec_need(s, "V", 1, KFAM_MAX_I32_OFFSET / 2, &r.V, d)) return d->status;
    const char *mode = kfam_spec_s(s, "mode", "greedy");
    int sampling = !strcmp(mode, "sample");
    if (!sampling && strcmp(mode, "greedy"))
        return ir_diag_set(d, IR_ERR_INPUT, "sample: mode must be greedy or sample (got %s)", mode);
    kfam_config_merge(&kfam_sample, s, facts, given, &cfg);
    if (kfam_config_pow2(s, &cfg, "BLOCK", 1 << 16, d) || kfam_config_pow2(s, &cfg, "WARPS", 32, d))
        return d->status;
    r.block = (int)kir_config_get(&cfg, "BLOCK", 0);

    KirKernel *k;
    KirBuilder b;
    if (kfam_kernel_begin(a, s, &cfg, &k, &b, d)) return d->status;
    r.logits = kir_param(&b, "logits", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *params = sampling ? kir_param(&b, "params", kir_ptr(KIR_F32), KIR_PARAM_RDONLY) : NULL;
    KirValue *dst = kir_param(&b, "out_tokens", kir_ptr(KIR_I32), 0);
    KirValue *n_rows = kir_param(&b, "n_rows", kir_scalar(KIR_I32), 0);
    kir_grid(&b, 0, n_rows, 1, 1);

    KirValue *row = kir_pid(&b, 0);
    r.cV = kir_const_i32(&b, r.V);
    r.base = kir_mul(&b, row, r.cV);
    r.lanes = kir_arange(&b, r.block);
    KirValue *ninf = kir_const_f(&b, KIR_F32, -INFINITY), *pinf = kir_const_f(&b, KIR_F32, INFINITY);
    KirValue *one = kir_const_f(&b, KIR_F32, 1.0);
    KirValue *inv_t = one, *thresh = NULL, *hot = NULL, *seed = NULL;

    if (sampling) {
        KirValue *p4 = kir_mul(&b, row, kir_const_i32(&b, 4));
        KirValue *T = kir_load(&b, params, p4, NULL, NULL);
        KirValue *topk =
            kir_cast(&b, kir_load(&b, params, kir_add(&b, p4, kir_const_i32(&b, 1)), NULL, NULL), KIR_I32);
        KirValue *topp = kir_load(&b, params, kir_add(&b, p4, kir_const_i32(&b, 2)), NULL, NULL);
        seed = kir_cast(&b, kir_load(&b, params, kir_add(&b, p4, kir_const_i32(&b, 3)), NULL, NULL), KIR_I64);
        hot = kir_binary(&b, KIR_OP_GT, T, kir_const_f(&b, KIR_F32, 0));
        inv_t = kir_select(&b, hot, kir_div(&b, one, T), one);

        /* pass: max, and min over the finite logits (hot rows only: a greedy row skips every pass but
         * the last) */
        KirValue *inits[2] = {ninf, pinf};
        KirValue *zero_i = kir_const_i32(&b, 0);
        KirBlock *body = row_loop_to(&b, &r, kir_select(&b, hot, r.cV, zero_i), inits, 2);
        KirValue *cols, *mask;
        KirValue *x = row_tile(&b, &r, body->args[0], &cols, &mask);
        KirValue *fin = kir_select(&b, kir_binary(&b, KIR_OP_GT, x, ninf), x, pinf);
        KirValue *mm[2] = {kir_binary(&b, KIR_OP_MAX, body->args[1], kir_reduce(&b, x, KIR_RED_MAX, 0)),
                           kir_binary(&b, KIR_OP_MIN, body->args[2], kir_reduce(&b, fin, KIR_RED_MIN, 0))};
        KirInst *pass = kir_for_end(&b, mm, 2);
        KirValue *mx = pass->res[0], *mn = pass->res[1];
        KirValue *live = kir_binary(&b, KIR_OP_AND, hot, kir_binary(&b, KIR_OP_GT, mx, ninf));

        KirValue *iters = kir_const_i32(&b, SAMPLE_ITERS), *none = kir_const_i32(&b, 0);
        KirValue *k_on = kir_binary(
            &b, KIR_OP_AND, live,
            kir_binary(&b, KIR_OP_AND, kir_binary(&b, KIR_OP_GT, topk, none), kir_lt(&b, topk, r.cV)));
        KirValue *t_k = bisect(&b, &r, kir_select(&b, k_on, iters, none), mn, mx, 0, topk, NULL, mx, inv_t);
        KirValue *p_on = kir_binary(&b, KIR_OP_AND, live, kir_lt(&b, topp, one));
        KirValue *z = mass_to(&b, &r, kir_select(&b, p_on, r.cV, none), t_k, mx, inv_t);
        thresh = bisect(&b, &r, kir_select(&b, p_on, iters, none), t_k, mx, 1, NULL, kir_mul(&b, topp, z), mx,
                        inv_t);
    }

    /* final pass: argmax over the allowed set of x / T + g (hot rows), or plain argmax (greedy rows and
     * mode greedy): two loops, each over the whole row or over nothing */
    KirValue *tok = argmax_pass(&b, &r, sampling ? kir_select(&b, hot, kir_const_i32(&b, 0), r.cV) : r.cV,
                                NULL, NULL, NULL, NULL);
    if (sampling)
        tok = kir_select(
            &b, hot,
            argmax_pass(&b, &r, kir_select(&b, hot, r.cV, kir_const_i32(&b, 0)), seed, inv_t, thresh, hot),
            tok);
    kir_store(&b, dst, row, tok, NULL);
    return kfam_kernel_end(&b, out);
}

const KfamFamily kfam_sample = {
    .name = "sample",
    .n_space = 2,
    .space = {{"BLOCK", 8, {32, 64, 128, 256, 512, 1024, 2048, 4096}}, {"WARPS", 5, {1, 2, 4, 8, 16}}},
    .defaults = sample_defaults,
    .build = sample_build,
};
