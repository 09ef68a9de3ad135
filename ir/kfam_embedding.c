/* kfam_embedding.c — token embedding lookup: out[t, :] = table[ids[t], :].
 *
 * Spec: C (hidden size), V (rows of the table), dtype (bf16 | f16 | f32).
 * Params, in order:
 *   0 ids       ptr<i32>   [n_tokens]        token ids
 *   1 table     ptr<dtype> [V, C]            rdonly
 *   2 out       ptr<dtype> [n_tokens, C]
 *   3 n_tokens  i32
 * Grid (n_tokens, cdiv(C, BLOCK), 1): program (t, c) copies columns [c*BLOCK, c*BLOCK + BLOCK) of row t.
 * An id outside [0, V) reads nothing and writes a row of zeros (the out-of-range row is masked off).
 * Config: BLOCK (columns per program), WARPS. V*C and n_tokens*C must fit i32 offsets.
 */
#include "kfam_impl.h"

extern const KfamFamily kfam_embedding;

static void embedding_defaults(const KfamSpec *s, const KfamFacts *facts, KirConfig *cfg)
{
    int64_t block = kfam_clamp(kfam_pow2_ceil(kfam_spec_i(s, "C", 1024)), 32, 1024);
    kir_config_set(cfg, "BLOCK", block);
    kir_config_set(cfg, "WARPS", kfam_clamp(block / 256, 1, 4));
}

static IrStatus embedding_build(IrArena *a, const KfamSpec *s, const KfamFacts *facts, const KirConfig *given,
                                KirKernel **out, IrDiag *d)
{
    int64_t C, V;
    KirDtype dt;
    KirConfig cfg;
    if (kfam_spec_need(s, "C", 1, 1 << 24, &C, d) || kfam_spec_need(s, "V", 1, KFAM_MAX_I32_OFFSET, &V, d) ||
        kfam_spec_dtype(s, &dt, d))
        return d->status;
    if (V * C > KFAM_MAX_I32_OFFSET)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "embedding: V*C = %lld needs 64-bit offsets",
                           (long long)(V * C));
    kfam_config_merge(&kfam_embedding, s, facts, given, &cfg);
    if (kfam_config_pow2(s, &cfg, "BLOCK", 1 << 16, d) || kfam_config_pow2(s, &cfg, "WARPS", 32, d))
        return d->status;
    int block = (int)kir_config_get(&cfg, "BLOCK", 0);

    KirKernel *k;
    KirBuilder b;
    if (kfam_kernel_begin(a, s, &cfg, &k, &b, d)) return d->status;
    KirValue *ids = kir_param(&b, "ids", kir_ptr(KIR_I32), KIR_PARAM_RDONLY);
    KirValue *table = kir_param(&b, "table", kir_ptr(dt), KIR_PARAM_RDONLY);
    KirValue *dst = kir_param(&b, "out", kir_ptr(dt), 0);
    KirValue *n_tokens = kir_param(&b, "n_tokens", kir_scalar(KIR_I32), 0);
    kir_grid(&b, 0, n_tokens, 1, 1);
    kir_grid_const(&b, 1, kfam_cdiv(C, block));

    KirValue *t = kir_pid(&b, 0);
    KirValue *id = kir_load(&b, ids, t, NULL, NULL);
    KirValue *valid = kir_binary(&b, KIR_OP_AND, kir_binary(&b, KIR_OP_GE, id, kir_const_i32(&b, 0)),
                                 kir_lt(&b, id, kir_const_i32(&b, V)));
    KirValue *row = kir_select(&b, valid, id, kir_const_i32(&b, 0));
    KirValue *cC = kir_const_i32(&b, C);
    KirValue *cols =
        kir_add(&b, kir_mul(&b, kir_pid(&b, 1), kir_const_i32(&b, block)), kir_arange(&b, block));
    KirValue *cmask = C % block ? kir_lt(&b, cols, cC) : NULL;
    KirValue *v = kir_load(&b, table, kir_add(&b, kir_mul(&b, row, cC), cols), kfam_and(&b, cmask, valid),
                           kir_const_f(&b, dt, 0));
    kir_store(&b, dst, kir_add(&b, kir_mul(&b, t, cC), cols), v, cmask);
    return kfam_kernel_end(&b, out);
}

const KfamFamily kfam_embedding = {
    .name = "embedding",
    .n_space = 2,
    .space = {{"BLOCK", 6, {32, 64, 128, 256, 512, 1024}}, {"WARPS", 4, {1, 2, 4, 8}}},
    .defaults = embedding_defaults,
    .build = embedding_build,
};
