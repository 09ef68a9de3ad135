/* kfam_attention.c — FlashAttention-2 over a paged KV cache, for a ragged batch of query tokens.
 *
 * Semantics. Caches k_cache, v_cache are [P, S, Hkv, D] row-major (P pages of S = page_size tokens).
 * Sequence b's token at position p lives in page block_table[b, p / S] at offset p % S. Sequence b's
 * queries are rows cu_q[b] .. cu_q[b+1]-1 of q [T, H*D] and are the LAST q_len_b = cu_q[b+1] - cu_q[b]
 * positions of the sequence, whose length after this step is seq_lens[b] (their K/V are already in the
 * cache). Query row i of b has position pos = seq_lens[b] - q_len_b + (i - cu_q[b]) and attends to keys
 *   causal=1: 0 <= key <= pos;  causal=0: 0 <= key < seq_lens[b];
 *   window W > 0 additionally requires key > pos - W (the last W positions, itself included).
 * Query head h reads kv head h / (H / Hkv) (GQA). scores = (q . k) * scale (default 1/sqrt(D)), softmax
 * in f32 over the allowed keys, out = softmax @ v rounded to dtype. Rows with no allowed key (only
 * possible with causal=0 and seq_lens[b] = 0) give 0.
 *
 * Algorithm (docs/ATTENTION.md, "Prefill/mixed attention"): one program per (query tile of BLOCK_M
 * rows, query head, sequence). It loops over key blocks of BLOCK_N positions from the window's first
 * key (rounded down to BLOCK_N) to the last row's causal bound, gathering K^T [D, BLOCK_N] and
 * V [BLOCK_N, D] through the block table, and keeps FA2's running max m (log2 units, starting at a
 * finite -1e30 so rows without keys yet never make NaN), running sum l and f32 accumulator
 * acc [BLOCK_M, D]: s = (q @ K^T) * scale * log2(e), masked keys -inf, m' = max(m, rowmax s),
 * p = exp2(s - m'), l = l * exp2(m - m') + rowsum p, acc = acc * exp2(m - m') + dtype(p) @ V; at the end
 * out = acc / l. The [T, T] score matrix never exists: only [BLOCK_M, BLOCK_N] tiles per program.
 * Programs whose query tile starts past their sequence's q_len run zero trips and store nothing.
 *
 * Spec: mode (mixed | prefill | decode | verify; all build the same kernel today, the mode only picks
 * the default config), H, Hkv (H % Hkv == 0), D (1..256), page_size, causal (0/1, default 1), window
 * (>= 0, 0: none), dtype (bf16 | f16 | f32), optional scale (float).
 * Params, in order:
 *   q            ptr<dtype> [T, H*D]          rdonly
 *   k_cache      ptr<dtype> [P, S, Hkv, D]    rdonly
 *   v_cache      ptr<dtype> [P, S, Hkv, D]    rdonly
 *   block_table  ptr<i32>   [B, MP]           rdonly
 *   seq_lens     ptr<i32>   [B]               rdonly
 *   cu_q         ptr<i32>   [B+1]             rdonly
 *   out          ptr<dtype> [T, H*D]
 *   n_tokens     i32   T
 *   n_seqs       i32   B
 *   max_pages    i32   MP, the block table's row stride
 *   max_q        i32   the longest q_len_b of this step (sizes the grid; larger is fine, only slower)
 * Grid (cdiv(max_q, BLOCK_M), H, n_seqs). Config: BLOCK_M, BLOCK_N (tile sizes), WARPS, STAGES (the key
 * loop's pipelining hint). Cache offsets are i64 (P*S*Hkv*D may exceed 2^31); q/out offsets are i32
 * (T*H*D < 2^31), block-table offsets i32 (B*MP < 2^31).
 */
#include "kfam_impl.h"

#include <math.h>
#include <string.h>

extern const KfamFamily kfam_attention;

static int mode_ok(const char *m)
{
    return !strcmp(m, "mixed") || !strcmp(m, "prefill") || !strcmp(m, "decode") || !strcmp(m, "verify");
}

/* Decode steps have one query per sequence: a 16-row tile (the smallest tensor-core M) wastes least.
 * Otherwise 64x64 tiles; at D > 128, 32x32 to bound shared memory and the [BLOCK_M, D] f32 accumulator's
 * registers. 4 warps (1 warp makes the CUDA backend keep whole tiles per thread: 5x the code). */
static void attention_defaults(const KfamSpec *s, KirConfig *cfg)
{
    int64_t D = kfam_spec_i(s, "D", 128);
    int decode = !strcmp(kfam_spec_s(s, "mode", "mixed"), "decode");
    kir_config_set(cfg, "BLOCK_M", decode ? 16 : D > 128 ? 32 : 64);
    kir_config_set(cfg, "BLOCK_N", D > 128 ? 32 : 64);
    kir_config_set(cfg, "WARPS", 4);
    kir_config_set(cfg, "STAGES", 2);
}

static IrStatus attention_build(IrArena *a, const KfamSpec *s, const KirConfig *given, KirKernel **out,
                                IrDiag *d)
{
    int64_t H, Hkv, D, S, causal, W;
    KirDtype dt;
    KirConfig cfg;
    if (kfam_spec_need(s, "H", 1, 1024, &H, d) || kfam_spec_need(s, "Hkv", 1, 1024, &Hkv, d) ||
        kfam_spec_need(s, "D", 1, 256, &D, d) || kfam_spec_need(s, "page_size", 1, 1 << 16, &S, d) ||
        kfam_spec_dtype(s, &dt, d))
        return d->status;
    causal = kfam_spec_i(s, "causal", 1);
    W = kfam_spec_i(s, "window", 0);
    const char *mode = kfam_spec_s(s, "mode", "mixed");
    if (!mode_ok(mode))
        return ir_diag_set(d, IR_ERR_INPUT,
                           "attention: mode must be mixed, prefill, decode or verify (got %s)", mode);
    if (H % Hkv)
        return ir_diag_set(d, IR_ERR_INPUT, "attention: H=%lld is not a multiple of Hkv=%lld", (long long)H,
                           (long long)Hkv);
    if ((causal != 0 && causal != 1) || W < 0 || W > KFAM_MAX_I32_OFFSET / 2)
        return ir_diag_set(d, IR_ERR_INPUT, "attention: causal must be 0 or 1 and window >= 0");
    double scale = kfam_spec_f(s, "scale", 1.0 / sqrt((double)D));
    kfam_config_merge(&kfam_attention, s, given, &cfg);
    if (kfam_config_pow2(s, &cfg, "BLOCK_M", 256, d) || kfam_config_pow2(s, &cfg, "BLOCK_N", 256, d) ||
        kfam_config_pow2(s, &cfg, "WARPS", 32, d))
        return d->status;
    int bm = (int)kir_config_get(&cfg, "BLOCK_M", 0), bn = (int)kir_config_get(&cfg, "BLOCK_N", 0);
    int stages = (int)kir_config_get(&cfg, "STAGES", 1);
    if (stages < 1 || stages > 8)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "attention: STAGES=%d is outside [1, 8]", stages);
    int dp = (int)kfam_pow2_ceil(D); /* head-dim tile; lanes >= D are masked */
    int group = (int)(H / Hkv);

    KirKernel *k;
    KirBuilder b;
    if (kfam_kernel_begin(a, s, &cfg, &k, &b, d)) return d->status;
    KirValue *q = kir_param(&b, "q", kir_ptr(dt), KIR_PARAM_RDONLY);
    KirValue *kc = kir_param(&b, "k_cache", kir_ptr(dt), KIR_PARAM_RDONLY);
    KirValue *vc = kir_param(&b, "v_cache", kir_ptr(dt), KIR_PARAM_RDONLY);
    /* the step's metadata: never written while attention runs, by anyone */
    KirValue *bt = kir_param(&b, "block_table", kir_ptr(KIR_I32), KIR_PARAM_RDONLY | KIR_PARAM_NOALIAS);
    KirValue *seq_lens = kir_param(&b, "seq_lens", kir_ptr(KIR_I32), KIR_PARAM_RDONLY | KIR_PARAM_NOALIAS);
    KirValue *cu_q = kir_param(&b, "cu_q", kir_ptr(KIR_I32), KIR_PARAM_RDONLY | KIR_PARAM_NOALIAS);
    KirValue *dst = kir_param(&b, "out", kir_ptr(dt), 0);
    kir_param(&b, "n_tokens", kir_scalar(KIR_I32), 0);
    KirValue *n_seqs = kir_param(&b, "n_seqs", kir_scalar(KIR_I32), 0);
    KirValue *max_pages = kir_param(&b, "max_pages", kir_scalar(KIR_I32), 0);
    KirValue *max_q = kir_param(&b, "max_q", kir_scalar(KIR_I32), 0);
    kir_grid(&b, 0, max_q, 1, bm);
    kir_grid_const(&b, 1, H);
    kir_grid(&b, 2, n_seqs, 1, 1);

    KirValue *one = kir_const_i32(&b, 1), *zero_i = kir_const_i32(&b, 0);
    KirValue *cBM = kir_const_i32(&b, bm), *cBN = kir_const_i32(&b, bn);
    KirValue *tile = kir_pid(&b, 0), *h = kir_pid(&b, 1), *seq = kir_pid(&b, 2);
    KirValue *kvh = kir_div(&b, h, kir_const_i32(&b, group));
    KirValue *q0 = kir_load(&b, cu_q, seq, NULL, NULL);
    KirValue *qlen = kir_sub(&b, kir_load(&b, cu_q, kir_add(&b, seq, one), NULL, NULL), q0);
    KirValue *slen = kir_load(&b, seq_lens, seq, NULL, NULL);
    KirValue *first = kir_mul(&b, tile, cBM); /* the tile's first row within the sequence's queries */
    KirValue *ctx = kir_sub(&b, slen, qlen);  /* position of query row 0 */

    /* query rows, their positions and the q tile [BM, DP] */
    KirValue *rows = kir_add(&b, first, kir_arange(&b, bm));
    KirValue *rmask = kir_lt(&b, rows, qlen);
    KirValue *pos = kir_add(&b, ctx, rows);
    KirValue *dl = kir_arange(&b, dp);
    KirValue *dmask = dp != D ? kir_lt(&b, dl, kir_const_i32(&b, D)) : NULL;
    KirValue *hd = kir_mul(&b, h, kir_const_i32(&b, D));
    KirValue *q_rows = kir_add(&b, kir_mul(&b, kir_add(&b, q0, rows), kir_const_i32(&b, H * D)), hd);
    KirValue *q_offs = kfam_outer(&b, KIR_OP_ADD, q_rows, dl);
    KirValue *q_mask = kfam_outer_mask(&b, rmask, dmask, bm, dp);
    KirValue *zero_t = kir_const_f(&b, dt, 0);
    KirValue *qt = kir_load(&b, q, q_offs, q_mask, zero_t);

    /* key range [lo, hi): lo = the first row's window start rounded down to BLOCK_N, hi = the last row's
     * causal bound (or the sequence's length); a tile past q_len runs zero trips */
    KirValue *hi = slen;
    if (causal) {
        KirValue *last = kir_binary(&b, KIR_OP_MIN, kir_add(&b, first, cBM), qlen);
        hi = kir_add(&b, ctx, last);
    }
    KirValue *lo = zero_i;
    if (W > 0) {
        KirValue *w0 = kir_sub(&b, kir_add(&b, ctx, first), kir_const_i32(&b, W - 1));
        w0 = kir_binary(&b, KIR_OP_MAX, w0, zero_i);
        lo = kir_mul(&b, kir_div(&b, w0, cBN), cBN);
    }
    hi = kir_select(&b, kir_binary(&b, KIR_OP_GE, first, qlen), lo, hi);

    KirValue *f0 = kir_const_f(&b, KIR_F32, 0);
    int shp_md[2] = {bm, dp}, shp_m[1] = {bm}, shp_mn[2] = {bm, bn};
    KirValue *inits[3] = {kir_splat(&b, kir_const_f(&b, KIR_F32, -1e30), 1, shp_m),
                          kir_splat(&b, f0, 1, shp_m), kir_splat(&b, f0, 2, shp_md)};
    KirValue *qk_scale = kir_const_f(&b, KIR_F32, scale * 1.4426950408889634);
    KirValue *ninf = kir_const_f(&b, KIR_F32, -INFINITY);
    KirValue *bt_row = kir_mul(&b, seq, max_pages);
    KirValue *cS = kir_const_i32(&b, S);
    KirValue *page_elems = kir_const_i64(&b, S * Hkv * D);
    KirValue *dl64 = kir_cast(&b, dl, KIR_I64);

    KirBlock *body = kir_for_begin(&b, lo, hi, cBN, inits, 3, stages > 1 ? stages : 0);
    KirValue *kb = body->args[0], *m = body->args[1], *l = body->args[2], *acc = body->args[3];
    KirValue *kpos = kir_add(&b, kb, kir_arange(&b, bn));
    KirValue *kmask = kir_lt(&b, kpos, hi);
    KirValue *page = kir_load(&b, bt, kir_add(&b, bt_row, kir_div(&b, kpos, cS)), kmask, zero_i);
    /* element offset of (page, kpos % S, kvh, 0) in the caches, i64 [BN] */
    KirValue *slot =
        kir_add(&b, kir_mul(&b, kir_binary(&b, KIR_OP_REM, kpos, cS), kir_const_i32(&b, Hkv)), kvh);
    KirValue *kbase = kir_add(&b, kir_mul(&b, kir_cast(&b, page, KIR_I64), page_elems),
                              kir_cast(&b, kir_mul(&b, slot, kir_const_i32(&b, D)), KIR_I64));
    KirValue *kt_mask = kfam_outer_mask(&b, dmask, kmask, dp, bn);
    KirValue *kt = kir_load(&b, kc, kfam_outer(&b, KIR_OP_ADD, dl64, kbase), kt_mask, zero_t); /* [DP, BN] */
    KirValue *v_mask = kfam_outer_mask(&b, kmask, dmask, bn, dp);
    KirValue *vt = kir_load(&b, vc, kfam_outer(&b, KIR_OP_ADD, kbase, dl64), v_mask, zero_t); /* [BN, DP] */

    KirValue *sc = kir_mul(&b, kir_dot(&b, qt, kt, kir_splat(&b, f0, 2, shp_mn)), qk_scale);
    KirValue *valid = kfam_cols(&b, kmask, bm);
    if (causal) valid = kir_binary(&b, KIR_OP_AND, valid, kfam_outer(&b, KIR_OP_GE, pos, kpos));
    if (W > 0) {
        KirValue *wlo = kir_sub(&b, pos, kir_const_i32(&b, W)); /* keys > pos - W */
        valid = kir_binary(&b, KIR_OP_AND, valid, kfam_outer(&b, KIR_OP_LT, wlo, kpos));
    }
    sc = kir_select(&b, valid, sc, ninf);
    KirValue *m_new = kir_binary(&b, KIR_OP_MAX, m, kir_reduce(&b, sc, KIR_RED_MAX, 1));
    KirValue *p = kir_unary(&b, KIR_OP_EXP2, kir_sub(&b, sc, kfam_rows(&b, m_new, bn)));
    KirValue *alpha = kir_unary(&b, KIR_OP_EXP2, kir_sub(&b, m, m_new));
    KirValue *l_new = kir_add(&b, kir_mul(&b, l, alpha), kir_reduce(&b, p, KIR_RED_SUM, 1));
    KirValue *pv = dt == KIR_F32 ? p : kir_cast(&b, p, dt);
    KirValue *acc_new = kir_dot(&b, pv, vt, kir_mul(&b, acc, kfam_rows(&b, alpha, dp)));
    KirValue *yields[3] = {m_new, l_new, acc_new};
    KirInst *loop = kir_for_end(&b, yields, 3);

    KirValue *lf = loop->res[1];
    lf = kir_select(&b, kir_binary(&b, KIR_OP_GT, lf, f0), lf, kir_const_f(&b, KIR_F32, 1.0));
    KirValue *o = kir_cast(&b, kir_div(&b, loop->res[2], kfam_rows(&b, lf, dp)), dt);
    kir_store(&b, dst, q_offs, o, q_mask);
    return kfam_kernel_end(&b, out);
}

const KfamFamily kfam_attention = {
    .name = "attention",
    .n_space = 4,
    .space = {{"BLOCK_M", 5, {16, 32, 64, 128, 256}},
              {"BLOCK_N", 5, {16, 32, 64, 128, 256}},
              {"WARPS", 4, {1, 2, 4, 8}},
              {"STAGES", 3, {1, 2, 3}}},
    .defaults = attention_defaults,
    .build = attention_build,
};
