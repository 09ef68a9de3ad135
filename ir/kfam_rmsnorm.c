/* kfam_rmsnorm.c — RMS norm, optionally fused with the residual add before it.
 *
 *   residual=0:  y = x * rsqrt(mean(x^2) + eps) * w
 *   residual=1:  s = round_dtype(x + r); sum_out = s; y = s * rsqrt(mean(s^2) + eps) * w
 * Everything is computed in f32 (inputs widened, mean = sum / C, one rounding to dtype at the store).
 *
 * Spec: C (row length), eps (float), dtype (bf16 | f16 | f32), residual (0 | 1, default 0).
 * Params, in order (bracketed ones only with residual=1):
 *   x        ptr<dtype> [n_rows, C]
 *   [r       ptr<dtype> [n_rows, C]]
 *   w        ptr<dtype> [C]            rdonly
 *   out      ptr<dtype> [n_rows, C]    may alias x
 *   [sum_out ptr<dtype> [n_rows, C]]   may alias x or r
 *   n_rows   i32
 * Grid (cdiv(n_rows, ROWS), 1, 1). Each program does ROWS rows one after another; when BLOCK >= C the next
 * row's loads are issued before this row's reduction (a program keeps bytes in flight across barriers).
 * Config: BLOCK (columns per tile: BLOCK >= C is one pass over a row held in registers; BLOCK < C is two
 * passes over the row in BLOCK chunks, the second re-reading x (and r)), ROWS, WARPS.
 * Aliasing: every element is read before the same program writes it, and programs own disjoint rows,
 * so out == x and sum_out == r (the in-place residual stream) are fine.
 */
#include "kfam_impl.h"

extern const KfamFamily kfam_rmsnorm;

static void rmsnorm_defaults(const KfamSpec *s, const KfamFacts *facts, KirConfig *cfg)
{
    int64_t block = kfam_row_block(kfam_spec_i(s, "C", 4096));
    kir_config_set(cfg, "BLOCK", block);
    kir_config_set(cfg, "ROWS", 1);
    kir_config_set(cfg, "WARPS", kfam_clamp(block / 1024, 1, 8)); /* 4 warps for 4096 */
}

typedef struct Norm {
    KirDtype dt;
    int64_t C;
    int block, residual;
    double eps;
    KirValue *x, *r, *w, *out, *sum_out, *lanes;
} Norm;

/* The row's chunk at column c0 (scalar i32) as f32, with the residual sum stored when `store_sum`. */
static KirValue *load_chunk(KirBuilder *b, const Norm *n, KirValue *offs, KirValue *mask, int store_sum)
{
    KirValue *zero = kir_const_f(b, n->dt, 0);
    KirValue *x = kir_cast(b, kir_load(b, n->x, offs, mask, mask ? zero : NULL), KIR_F32);
    if (!n->residual) return x;
    KirValue *r = kir_cast(b, kir_load(b, n->r, offs, mask, mask ? zero : NULL), KIR_F32);
    KirValue *s = kir_cast(b, kir_add(b, x, r), n->dt);
    if (store_sum) kir_store(b, n->sum_out, offs, s, mask);
    return kir_cast(b, s, KIR_F32);
}

/* w[cols] as f32 (cols past C read as 0). */
static KirValue *load_w(KirBuilder *b, const Norm *n, KirValue *cols)
{
    KirValue *cmask = n->C % n->block ? kir_lt(b, cols, kir_const_i32(b, n->C)) : NULL;
    return kir_cast(b, kir_load(b, n->w, cols, cmask, cmask ? kir_const_f(b, n->dt, 0) : NULL), KIR_F32);
}

static void store_chunk(const Norm *n, KirBuilder *b, KirValue *xf, KirValue *inv, KirValue *w,
                        KirValue *offs, KirValue *mask)
{
    KirValue *y = kir_mul(b, kir_mul(b, xf, inv), w);
    kir_store(b, n->out, offs, kir_cast(b, y, n->dt), mask);
}

static KirValue *inv_rms(KirBuilder *b, const Norm *n, KirValue *sumsq)
{
    KirValue *mean = kir_div(b, sumsq, kir_const_f(b, KIR_F32, (double)n->C));
    return kir_unary(b, KIR_OP_RSQRT, kir_add(b, mean, kir_const_f(b, KIR_F32, (double)(float)n->eps)));
}

/* ROWS rows, one pass each (BLOCK >= C), software-pipelined: the next row's x (and r) is loaded before
 * this row's reduction and store, so a program always has a row's loads in flight across its barriers;
 * w is loaded once per program. Rows past n_rows are masked. */
static void emit_rows(KirBuilder *b, const Norm *n, int rows, KirValue *n_rows)
{
    KirValue *cC = kir_const_i32(b, n->C), *one = kir_const_i32(b, 1);
    KirValue *cmask = n->block > n->C ? kir_lt(b, n->lanes, cC) : NULL;
    KirValue *first = kir_mul(b, kir_pid(b, 0), kir_const_i32(b, rows));
    KirValue *w = load_w(b, n, n->lanes);
    KirValue *x0 = load_chunk(b, n, kir_add(b, kir_mul(b, first, cC), n->lanes),
                              kfam_and(b, cmask, kir_lt(b, first, n_rows)), 1);
    KirBlock *body = kir_for_begin(b, kir_const_i32(b, 0), kir_const_i32(b, rows), one, &x0, 1, 0);
    KirValue *row = kir_add(b, first, body->args[0]), *xf = body->args[1];
    KirValue *next = kir_add(b, row, one);
    KirValue *next_ok = kfam_and(b, kir_lt(b, next, n_rows),
                                 kir_lt(b, kir_add(b, body->args[0], one), kir_const_i32(b, rows)));
    KirValue *xn =
        load_chunk(b, n, kir_add(b, kir_mul(b, next, cC), n->lanes), kfam_and(b, cmask, next_ok), 1);
    KirValue *inv = inv_rms(b, n, kir_reduce(b, kir_mul(b, xf, xf), KIR_RED_SUM, 0));
    store_chunk(n, b, xf, inv, w, kir_add(b, kir_mul(b, row, cC), n->lanes),
                kfam_and(b, cmask, kir_lt(b, row, n_rows)));
    kir_for_end(b, &xn, 1);
}

/* One row: row (i32 scalar), row_ok (i1 scalar, NULL when the row always exists). */
static void emit_row(KirBuilder *b, const Norm *n, KirValue *row, KirValue *row_ok)
{
    KirValue *cC = kir_const_i32(b, n->C);
    KirValue *base = kir_mul(b, row, cC);
    if (n->block >= n->C) {
        KirValue *cols = n->lanes;
        KirValue *mask = kfam_and(b, n->block > n->C ? kir_lt(b, cols, cC) : NULL, row_ok);
        KirValue *offs = kir_add(b, base, cols);
        KirValue *w = load_w(b, n, cols); /* issued before the reduction's barriers */
        KirValue *xf = load_chunk(b, n, offs, mask, 1);
        KirValue *ss = kir_reduce(b, kir_mul(b, xf, xf), KIR_RED_SUM, 0);
        store_chunk(n, b, xf, inv_rms(b, n, ss), w, offs, mask);
        return;
    }
    /* pass 1: sum of squares in a [BLOCK] f32 accumulator */
    int shape[1] = {n->block};
    KirValue *acc0 = kir_splat(b, kir_const_f(b, KIR_F32, 0), 1, shape);
    KirValue *step = kir_const_i32(b, n->block), *lo = kir_const_i32(b, 0);
    KirBlock *body = kir_for_begin(b, lo, cC, step, &acc0, 1, 0);
    KirValue *cols = kir_add(b, body->args[0], n->lanes);
    KirValue *mask = kfam_and(b, n->C % n->block ? kir_lt(b, cols, cC) : NULL, row_ok);
    KirValue *xf = load_chunk(b, n, kir_add(b, base, cols), mask, 0);
    KirValue *acc = kir_add(b, body->args[1], kir_mul(b, xf, xf));
    KirInst *loop = kir_for_end(b, &acc, 1);
    KirValue *inv = inv_rms(b, n, kir_reduce(b, loop->res[0], KIR_RED_SUM, 0));
    /* pass 2: normalize, store (and store the residual sum) */
    body = kir_for_begin(b, lo, cC, step, NULL, 0, 0);
    cols = kir_add(b, body->args[0], n->lanes);
    mask = kfam_and(b, n->C % n->block ? kir_lt(b, cols, cC) : NULL, row_ok);
    KirValue *offs = kir_add(b, base, cols);
    xf = load_chunk(b, n, offs, mask, 1);
    store_chunk(n, b, xf, inv, load_w(b, n, cols), offs, mask);
    kir_for_end(b, NULL, 0);
}

static IrStatus rmsnorm_build(IrArena *a, const KfamSpec *s, const KfamFacts *facts, const KirConfig *given,
                              KirKernel **out, IrDiag *d)
{
    Norm n = {0};
    int64_t residual = kfam_spec_i(s, "residual", 0);
    KirConfig cfg;
    if (kfam_spec_need(s, "C", 1, 1 << 24, &n.C, d) || kfam_spec_dtype(s, &n.dt, d)) return d->status;
    n.eps = kfam_spec_f(s, "eps", -1);
    if (n.eps < 0 || (residual != 0 && residual != 1))
        return ir_diag_set(d, IR_ERR_INPUT, "rmsnorm: spec needs eps >= 0 and residual 0 or 1");
    n.residual = (int)residual;
    kfam_config_merge(&kfam_rmsnorm, s, facts, given, &cfg);
    if (kfam_config_pow2(s, &cfg, "BLOCK", 1 << 16, d) || kfam_config_pow2(s, &cfg, "WARPS", 32, d) ||
        kfam_config_pow2(s, &cfg, "ROWS", 64, d))
        return d->status;
    n.block = (int)kir_config_get(&cfg, "BLOCK", 0);
    int rows = (int)kir_config_get(&cfg, "ROWS", 1);

    KirKernel *k;
    KirBuilder b;
    if (kfam_kernel_begin(a, s, &cfg, &k, &b, d)) return d->status;
    n.x = kir_param(&b, "x", kir_ptr(n.dt), 0);
    if (n.residual) n.r = kir_param(&b, "r", kir_ptr(n.dt), 0);
    n.w = kir_param(&b, "w", kir_ptr(n.dt), KIR_PARAM_RDONLY | KIR_PARAM_NOALIAS);
    n.out = kir_param(&b, "out", kir_ptr(n.dt), 0);
    if (n.residual) n.sum_out = kir_param(&b, "sum_out", kir_ptr(n.dt), 0);
    KirValue *n_rows = kir_param(&b, "n_rows", kir_scalar(KIR_I32), 0);
    kir_grid(&b, 0, n_rows, 1, rows);
    n.lanes = kir_arange(&b, n.block);
    if (rows == 1) {
        emit_row(&b, &n, kir_pid(&b, 0), NULL);
    } else if (n.block >= n.C) {
        emit_rows(&b, &n, rows, n_rows);
    } else {
        KirValue *first = kir_mul(&b, kir_pid(&b, 0), kir_const_i32(&b, rows));
        KirBlock *body = kir_for_begin(&b, kir_const_i32(&b, 0), kir_const_i32(&b, rows),
                                       kir_const_i32(&b, 1), NULL, 0, 0);
        KirValue *row = kir_add(&b, first, body->args[0]);
        emit_row(&b, &n, row, kir_lt(&b, row, n_rows));
        kir_for_end(&b, NULL, 0);
    }
    return kfam_kernel_end(&b, out);
}

const KfamFamily kfam_rmsnorm = {
    .name = "rmsnorm",
    .n_space = 3,
    .space = {{"BLOCK", 8, {64, 128, 256, 512, 1024, 2048, 4096, 8192}},
              {"WARPS", 5, {1, 2, 4, 8, 16}},
              {"ROWS", 3, {1, 2, 4}}},
    .defaults = rmsnorm_defaults,
    .build = rmsnorm_build,
};
