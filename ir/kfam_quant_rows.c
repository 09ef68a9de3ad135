/* kfam_quant_rows.c — dynamic per-row (per-token) quantization of activations, the first half of a W8A8
 * matmul (qmatmul with act=fp8 or act=int8 is the second).
 *
 *   amax = max_k |x[m, k]|           (f32 of the dtype values)
 *   fp8:  s = amax / 448,  q = f8e4m3(x / s)                      (nearest even, saturating to +-448)
 *   int8: s = amax / 127,  q = i8(min(max(round(x / s), -127), 127))    (nearest, ties to even)
 *   s = 1 when amax = 0 (an all-zero row quantizes to zeros); scales[m] = s, out[m, :] = q
 * so that x ~= q * s row by row; x / s is one f32 division per element (every backend's IEEE division).
 *
 * Spec: C (row length), dtype (bf16 | f16 | f32, the activations'), fmt (fp8 | int8).
 * Params, in order:
 *   x        ptr<dtype> [n_rows, C]          rdonly
 *   out      ptr<f8e4m3 | i8> [n_rows, C]
 *   scales   ptr<f32> [n_rows]
 *   n_rows   i32
 * Grid (n_rows, 1, 1): one program per row. Config: BLOCK (columns per tile: BLOCK >= C holds the row in
 * registers, one pass; else two passes over BLOCK chunks, the second re-reading x), WARPS.
 */
#include "kfam_impl.h"

#include <string.h>

extern const KfamFamily kfam_quant_rows;

static void quant_rows_defaults(const KfamSpec *s, const KfamFacts *facts, KirConfig *cfg)
{
    int64_t block = kfam_row_block(kfam_spec_i(s, "C", 4096));
    kir_config_set(cfg, "BLOCK", block);
    kir_config_set(cfg, "WARPS", kfam_clamp(block / 1024, 1, 8));
}

/* The quantized chunk of f32 values xf given the row's scale s. */
static KirValue *quantize(KirBuilder *b, KirValue *xf, KirValue *s, int fp8)
{
    KirValue *v = kir_div(b, xf, s);
    if (fp8) return kir_cast(b, v, KIR_F8E4M3);
    /* nearest, ties to even: adding and removing 1.5 * 2^23 rounds |v| < 2^22 to an integer in f32 */
    KirValue *magic = kir_const_f(b, KIR_F32, 12582912.0);
    v = kir_sub(b, kir_add(b, v, magic), magic);
    v = kir_binary(b, KIR_OP_MIN, kir_binary(b, KIR_OP_MAX, v, kir_const_f(b, KIR_F32, -127)),
                   kir_const_f(b, KIR_F32, 127));
    return kir_cast(b, v, KIR_I8);
}

static IrStatus quant_rows_build(IrArena *a, const KfamSpec *s, const KfamFacts *facts,
                                 const KirConfig *given, KirKernel **out, IrDiag *d)
{
    int64_t C;
    KirDtype dt;
    KirConfig cfg;
    if (kfam_spec_need(s, "C", 1, 1 << 24, &C, d) || kfam_spec_dtype(s, &dt, d)) return d->status;
    const char *fmt = kfam_spec_s(s, "fmt", "");
    int fp8 = !strcmp(fmt, "fp8");
    if (!fp8 && strcmp(fmt, "int8"))
        return ir_diag_set(d, IR_ERR_INPUT, "quant_rows: fmt must be fp8 or int8 (got '%s')", fmt);
    kfam_config_merge(&kfam_quant_rows, s, facts, given, &cfg);
    if (kfam_config_pow2(s, &cfg, "BLOCK", 1 << 16, d) || kfam_config_pow2(s, &cfg, "WARPS", 32, d))
        return d->status;
    int block = (int)kir_config_get(&cfg, "BLOCK", 0);

    KirKernel *k;
    KirBuilder b;
    if (kfam_kernel_begin(a, s, &cfg, &k, &b, d)) return d->status;
    KirValue *x = kir_param(&b, "x", kir_ptr(dt), KIR_PARAM_RDONLY);
    KirValue *q = kir_param(&b, "out", kir_ptr(fp8 ? KIR_F8E4M3 : KIR_I8), 0);
    KirValue *scales = kir_param(&b, "scales", kir_ptr(KIR_F32), 0);
    KirValue *n_rows = kir_param(&b, "n_rows", kir_scalar(KIR_I32), 0);
    kir_grid(&b, 0, n_rows, 1, 1);
    KirValue *row = kir_pid(&b, 0), *cC = kir_const_i32(&b, C), *lanes = kir_arange(&b, block);
    KirValue *base = kir_mul(&b, row, cC), *zero = kir_const_f(&b, dt, 0);
    KirValue *amax, *xf = NULL, *offs = NULL, *mask = NULL;
    if (block >= C) { /* the row in registers */
        mask = block > C ? kir_lt(&b, lanes, cC) : NULL;
        offs = kir_add(&b, base, lanes);
        xf = kir_cast(&b, kir_load(&b, x, offs, mask, mask ? zero : NULL), KIR_F32);
        amax = kir_reduce(&b, kir_unary(&b, KIR_OP_ABS, xf), KIR_RED_MAX, 0);
    } else { /* pass 1: elementwise running max of |x| over the chunks */
        int shape[1] = {block};
        KirValue *m0 = kir_splat(&b, kir_const_f(&b, KIR_F32, 0), 1, shape);
        KirBlock *body = kir_for_begin(&b, kir_const_i32(&b, 0), cC, kir_const_i32(&b, block), &m0, 1, 0);
        KirValue *cols = kir_add(&b, body->args[0], lanes);
        KirValue *cm = C % block ? kir_lt(&b, cols, cC) : NULL;
        KirValue *xc = kir_cast(&b, kir_load(&b, x, kir_add(&b, base, cols), cm, cm ? zero : NULL), KIR_F32);
        KirValue *m1 = kir_binary(&b, KIR_OP_MAX, body->args[1], kir_unary(&b, KIR_OP_ABS, xc));
        KirInst *loop = kir_for_end(&b, &m1, 1);
        amax = kir_reduce(&b, loop->res[0], KIR_RED_MAX, 0);
    }
    KirValue *f0 = kir_const_f(&b, KIR_F32, 0);
    KirValue *sc = kir_select(&b, kir_binary(&b, KIR_OP_GT, amax, f0),
                              kir_div(&b, amax, kir_const_f(&b, KIR_F32, fp8 ? 448.0 : 127.0)),
                              kir_const_f(&b, KIR_F32, 1.0));
    kir_store(&b, scales, row, sc, NULL);
    if (block >= C) {
        kir_store(&b, q, offs, quantize(&b, xf, sc, fp8), mask);
    } else { /* pass 2 */
        KirBlock *body = kir_for_begin(&b, kir_const_i32(&b, 0), cC, kir_const_i32(&b, block), NULL, 0, 0);
        KirValue *cols = kir_add(&b, body->args[0], lanes);
        KirValue *cm = C % block ? kir_lt(&b, cols, cC) : NULL;
        KirValue *o = kir_add(&b, base, cols);
        KirValue *xc = kir_cast(&b, kir_load(&b, x, o, cm, cm ? zero : NULL), KIR_F32);
        kir_store(&b, q, o, quantize(&b, xc, sc, fp8), cm);
        kir_for_end(&b, NULL, 0);
    }
    return kfam_kernel_end(&b, out);
}

const KfamFamily kfam_quant_rows = {
    .name = "quant_rows",
    .n_space = 2,
    .space = {{"BLOCK", 8, {64, 128, 256, 512, 1024, 2048, 4096, 8192}}, {"WARPS", 5, {1, 2, 4, 8, 16}}},
    .defaults = quant_rows_defaults,
    .build = quant_rows_build,
};
