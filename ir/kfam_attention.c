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
 * Algorithm (docs/ATTENTION.md, "Prefill/mixed attention"): one program per (tile of BLOCK_M packed
 * rows, kv head, sequence). GQA packing: the G = H / Hkv query heads of a kv head share its K/V, so
 * they share a tile: packed row R = i * G + g is the sequence's query i for head kv_head * G + g, and
 * each K/V byte is read once per kv head (decode: the G heads of one token fill the tile's rows). It loops
 * over key blocks of BLOCK_N positions from the window's first key (rounded down to BLOCK_N) to the last
 * row's causal bound, gathering K^T [D, BLOCK_N] and V [BLOCK_N, D] through the block table, and keeps FA2's
 * running max m (log2 units, starting at a finite -1e30 so rows without keys yet never make NaN), running sum
 * l and f32 accumulator acc [BLOCK_M, D]: s = (q @ K^T) * scale * log2(e), masked keys -inf, m' = max(m,
 * rowmax s), p = exp2(s - m'), l = l * exp2(m - m') + rowsum p, acc = acc * exp2(m - m') + dtype(p) @ V; at
 * the end out = acc / l. The [T, T] score matrix never exists: only [BLOCK_M, BLOCK_N] tiles per program.
 * Programs whose query tile starts past their sequence's q_len run zero trips and store nothing.
 *
 * Tree verify (spec tree=1): an extra param tree_mask (i64 [T], after max_q): a key of the step's own
 * tokens (position >= seq_lens[b] - q_len_b) is allowed to query token r only when bit (key - (seq_lens[b]
 * - q_len_b)) of tree_mask[r] is set — speculative decoding's token tree, each draft token seeing its
 * ancestors and itself (the bits of a chain are all j <= r: plain causal). q_len_b <= 64 for such steps.
 * Split-KV (spec split=1): params ws_o, ws_lse (f32) and n_splits (i32) follow; grid axis 1 becomes
 * n_splits * Hkv; split z covers the z-th of n_splits equal runs of key blocks and writes its normalized
 * partial o and log2-sum-exp (-1e30 when it saw no key) for (token, head) row (t*H + h) at ws row
 * (t*H + h)*n_splits + z; attention_merge (below) combines them into out. With n_splits = 1 the kernel
 * writes out itself and leaves the workspace alone (the merge is not needed: its grid is 0 rows then).
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
 * Grid (cdiv(max_q * G, BLOCK_M), Hkv, n_seqs). Config: BLOCK_M, BLOCK_N (tile sizes), WARPS, STAGES (the key
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

/* 64x64 tiles of 4 warps, 16 rows per warp; at D > 128, 32x32 to bound shared memory and the
 * [BLOCK_M, D] f32 accumulator's registers (decode: 16 rows). A decode step (G rows per kv head) uses 64
 * rows too: a 16-row tile gives every warp the same 16 rows (the CUDA backend splits softmax rows over
 * warps only), so each warp would repeat the whole tile's math, while 64 rows cost each warp the same
 * and run on wgmma on sm_90a. The sm_90a prefill kernel needs 168 registers, so 3 programs share an SM
 * without a MIN_BLOCKS hint, and none is set. 4 warps (1 warp makes the CUDA backend keep whole tiles
 * per thread: 5x the code). */
static void attention_defaults(const KfamSpec *s, const KfamFacts *facts, KirConfig *cfg)
{
    int64_t D = kfam_spec_i(s, "D", 128);
    int decode = !strcmp(kfam_spec_s(s, "mode", "mixed"), "decode");
    kir_config_set(cfg, "BLOCK_M", D > 128 ? (decode ? 16 : 32) : 64);
    kir_config_set(cfg, "BLOCK_N", D > 128 ? 32 : 64);
    kir_config_set(cfg, "WARPS", 4);
    kir_config_set(cfg, "STAGES", 2);
}

/* What one part of the key loop needs from the kernel around it. */
typedef struct KeyLoop {
    KirBuilder *b;
    KirValue *qt, *kc, *vc, *bt, *bt_row, *kvh, *pos, *ctx, *tm, *dl64, *dmask, *zero_t, *qk_scale;
    KirValue *page_elems; /* i64: one page of one cache */
    int Hkv, D, S, W, causal, bm, bn, dp, stages;
    KirDtype dt;
} KeyLoop;

/* The FA2 trips over key blocks [lo, hi), from and back into carry = (m, l, acc). Unmasked parts read
 * every key of a block and apply no causal/window/tree mask (the caller proved them all visible). */
static KirInst *key_loop(const KeyLoop *c, KirValue *lo, KirValue *hi, int masked, KirValue **carry)
{
    KirBuilder *b = c->b;
    int bm = c->bm, bn = c->bn, dp = c->dp, shp_mn[2] = {bm, bn};
    KirValue *zero_i = kir_const_i32(b, 0), *f0 = kir_const_f(b, KIR_F32, 0);
    KirValue *cS = kir_const_i32(b, c->S), *dl64 = c->dl64;
    KirBlock *body = kir_for_begin(b, lo, hi, kir_const_i32(b, bn), carry, 3, c->stages > 1 ? c->stages : 0);
    KirValue *kb = body->args[0], *m = body->args[1], *l = body->args[2], *acc = body->args[3];
    KirValue *kpos = kir_add(b, kb, kir_arange(b, bn));
    KirValue *kmask = masked ? kir_lt(b, kpos, hi) : NULL;
    KirValue *page =
        kir_load(b, c->bt, kir_add(b, c->bt_row, kir_div(b, kpos, cS)), kmask, kmask ? zero_i : NULL);
    /* element offset of (page, kpos % S, kvh, 0) in the caches, i64 [BN] */
    KirValue *slot =
        kir_add(b, kir_mul(b, kir_binary(b, KIR_OP_REM, kpos, cS), kir_const_i32(b, c->Hkv)), c->kvh);
    KirValue *kbase = kir_add(b, kir_mul(b, kir_cast(b, page, KIR_I64), c->page_elems),
                              kir_cast(b, kir_mul(b, slot, kir_const_i32(b, c->D)), KIR_I64));
    KirValue *kt_mask = kfam_outer_mask(b, c->dmask, kmask, dp, bn);
    KirValue *kt = kir_load(b, c->kc, kfam_outer(b, KIR_OP_ADD, dl64, kbase), kt_mask,
                            kt_mask ? c->zero_t : NULL); /* [DP, BN] */
    KirValue *v_mask = kfam_outer_mask(b, kmask, c->dmask, bn, dp);
    KirValue *vt = kir_load(b, c->vc, kfam_outer(b, KIR_OP_ADD, kbase, dl64), v_mask,
                            v_mask ? c->zero_t : NULL); /* [BN, DP] */

    KirValue *sc = kir_mul(b, kir_dot(b, c->qt, kt, kir_splat(b, f0, 2, shp_mn)), c->qk_scale);
    if (masked) {
        KirValue *valid = kfam_cols(b, kmask, bm);
        if (c->causal) valid = kir_binary(b, KIR_OP_AND, valid, kfam_outer(b, KIR_OP_GE, c->pos, kpos));
        if (c->W > 0) {
            KirValue *wlo = kir_sub(b, c->pos, kir_const_i32(b, c->W)); /* keys > pos - W */
            valid = kir_binary(b, KIR_OP_AND, valid, kfam_outer(b, KIR_OP_LT, wlo, kpos));
        }
        if (c->tm) { /* keys of this step's own tokens: only the row token's ancestors (bit kpos - ctx) */
            KirValue *rel = kir_sub(b, kpos, c->ctx);
            KirValue *amt =
                kir_binary(b, KIR_OP_MIN, kir_binary(b, KIR_OP_MAX, rel, zero_i), kir_const_i32(b, 63));
            KirValue *bit = kfam_outer(b, KIR_OP_SHR, c->tm, kir_cast(b, amt, KIR_I64));
            bit = kir_binary(b, KIR_OP_NE, kir_binary(b, KIR_OP_AND, bit, kir_const_i64(b, 1)),
                             kir_const_i64(b, 0));
            KirValue *ok = kir_binary(b, KIR_OP_OR, kfam_cols(b, kir_lt(b, rel, zero_i), bm), bit);
            valid = kir_binary(b, KIR_OP_AND, valid, ok);
        }
        sc = kir_select(b, valid, sc, kir_const_f(b, KIR_F32, -INFINITY));
    }
    KirValue *m_new = kir_binary(b, KIR_OP_MAX, m, kir_reduce(b, sc, KIR_RED_MAX, 1));
    KirValue *p = kir_unary(b, KIR_OP_EXP2, kir_sub(b, sc, kfam_rows(b, m_new, bn)));
    KirValue *alpha = kir_unary(b, KIR_OP_EXP2, kir_sub(b, m, m_new));
    KirValue *l_new = kir_add(b, kir_mul(b, l, alpha), kir_reduce(b, p, KIR_RED_SUM, 1));
    KirValue *pv = c->dt == KIR_F32 ? p : kir_cast(b, p, c->dt);
    KirValue *acc_new = kir_dot(b, pv, vt, kir_mul(b, acc, kfam_rows(b, alpha, dp)));
    KirValue *yields[3] = {m_new, l_new, acc_new};
    KirInst *loop = kir_for_end(b, yields, 3);
    for (int i = 0; i < 3; i++)
        carry[i] = loop->res[i];
    return loop;
}

static IrStatus attention_build(IrArena *a, const KfamSpec *s, const KfamFacts *facts, const KirConfig *given,
                                KirKernel **out, IrDiag *d)
{
    int64_t H, Hkv, D, S, causal, W;
    KirDtype dt;
    KirConfig cfg;
    if (kfam_spec_need(s, "H", 1, 1024, &H, d) || kfam_spec_need(s, "Hkv", 1, 1024, &Hkv, d) ||
        kfam_spec_need(s, "D", 1, 256, &D, d) || kfam_spec_need(s, "page_size", 1, 1 << 16, &S, d) ||
        kfam_spec_dtype(s, &dt, d))
        return d->status;
    causal = kfam_spec_i(s, "causal", 1);
    int64_t split = kfam_spec_i(s, "split", 0), tree = kfam_spec_i(s, "tree", 0);
    if (split != 0 && split != 1) return ir_diag_set(d, IR_ERR_INPUT, "attention: split must be 0 or 1");
    if (tree != 0 && tree != 1) return ir_diag_set(d, IR_ERR_INPUT, "attention: tree must be 0 or 1");
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
    kfam_config_merge(&kfam_attention, s, facts, given, &cfg);
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
    KirValue *ws_o = NULL, *ws_lse = NULL, *n_splits = NULL, *tree_mask = NULL;
    if (tree) tree_mask = kir_param(&b, "tree_mask", kir_ptr(KIR_I64), KIR_PARAM_RDONLY | KIR_PARAM_NOALIAS);
    if (split) {
        ws_o = kir_param(&b, "ws_o", kir_ptr(KIR_F32), KIR_PARAM_NOALIAS);
        ws_lse = kir_param(&b, "ws_lse", kir_ptr(KIR_F32), KIR_PARAM_NOALIAS);
        n_splits = kir_param(&b, "n_splits", kir_scalar(KIR_I32), 0);
    }
    kir_grid(&b, 0, max_q, group, bm);
    if (split)
        kir_grid(&b, 1, n_splits, Hkv, 1);
    else
        kir_grid_const(&b, 1, Hkv);
    kir_grid(&b, 2, n_seqs, 1, 1);

    KirValue *one = kir_const_i32(&b, 1), *zero_i = kir_const_i32(&b, 0);
    KirValue *cBM = kir_const_i32(&b, bm), *cBN = kir_const_i32(&b, bn), *cG = kir_const_i32(&b, group);
    KirValue *tile = kir_pid(&b, 0), *kvh = kir_pid(&b, 1), *seq = kir_pid(&b, 2), *z = NULL;
    /* causal: the last query tiles have the most keys; they come first (the GPU starts programs in
     * order), so the short ones fill the tail of the grid */
    if (causal) tile = kir_sub(&b, kir_sub(&b, kir_nprog(&b, 0), tile), one);
    if (split) {
        KirValue *cHkv = kir_const_i32(&b, Hkv);
        z = kir_div(&b, kvh, cHkv);
        kvh = kir_binary(&b, KIR_OP_REM, kvh, cHkv);
    }
    KirValue *q0 = kir_load(&b, cu_q, seq, NULL, NULL);
    KirValue *qlen = kir_sub(&b, kir_load(&b, cu_q, kir_add(&b, seq, one), NULL, NULL), q0);
    KirValue *slen = kir_load(&b, seq_lens, seq, NULL, NULL);
    KirValue *ctx = kir_sub(&b, slen, qlen); /* position of query 0 */
    /* packed rows: R = i * G + g is query i of the sequence for query head kvh * G + g */
    KirValue *nrows = kir_mul(&b, qlen, cG);
    KirValue *first = kir_mul(&b, tile, cBM); /* the tile's first packed row */
    KirValue *rows = kir_add(&b, first, kir_arange(&b, bm));
    KirValue *qi = group > 1 ? kir_div(&b, rows, cG) : rows;
    KirValue *qh =
        kir_add(&b, kir_mul(&b, kvh, cG), group > 1 ? kir_binary(&b, KIR_OP_REM, rows, cG) : zero_i);
    KirValue *rmask = kir_lt(&b, rows, nrows);
    KirValue *pos = kir_add(&b, ctx, qi);

    /* the q tile [BM, DP]: row R reads q[q0 + i, head kvh * G + g, :] */
    KirValue *dl = kir_arange(&b, dp);
    KirValue *dmask = dp != D ? kir_lt(&b, dl, kir_const_i32(&b, D)) : NULL;
    KirValue *q_rows = kir_add(&b, kir_mul(&b, kir_add(&b, q0, qi), kir_const_i32(&b, H * D)),
                               kir_mul(&b, qh, kir_const_i32(&b, D)));
    KirValue *q_offs = kfam_outer(&b, KIR_OP_ADD, q_rows, dl);
    KirValue *q_mask = kfam_outer_mask(&b, rmask, dmask, bm, dp);
    KirValue *zero_t = kir_const_f(&b, dt, 0);
    KirValue *qt = kir_load(&b, q, q_offs, q_mask, zero_t);

    /* key range [lo, hi): lo = the first row's window start rounded down to BLOCK_N, hi = the last row's
     * causal bound (or the sequence's length); a tile past the packed rows runs zero trips */
    KirValue *pos_first = NULL, *pos_last = NULL; /* positions of the tile's first and last real rows */
    if (causal || W > 0) {
        KirValue *last = kir_sub(&b, kir_binary(&b, KIR_OP_MIN, kir_add(&b, first, cBM), nrows), one);
        pos_first = kir_add(&b, ctx, group > 1 ? kir_div(&b, first, cG) : first);
        pos_last = kir_add(&b, ctx, group > 1 ? kir_div(&b, last, cG) : last);
    }
    KirValue *hi = causal ? kir_add(&b, pos_last, one) : slen;
    KirValue *lo = zero_i;
    if (W > 0) {
        KirValue *w0 = kir_sub(&b, pos_first, kir_const_i32(&b, W - 1));
        w0 = kir_binary(&b, KIR_OP_MAX, w0, zero_i);
        lo = kir_mul(&b, kir_div(&b, w0, cBN), cBN);
    }
    hi = kir_select(&b, kir_binary(&b, KIR_OP_GE, first, nrows), lo, hi);
    if (split) { /* split z of n: the z-th run of cdiv(cdiv(hi - lo, n), BLOCK_N) key blocks */
        KirValue *nb = kir_div(&b, kir_sub(&b, kir_add(&b, kir_sub(&b, hi, lo), cBN), one), cBN);
        KirValue *per = kir_div(&b, kir_sub(&b, kir_add(&b, nb, n_splits), one), n_splits);
        KirValue *chunk = kir_mul(&b, per, cBN);
        lo = kir_add(&b, lo, kir_mul(&b, z, chunk));
        hi = kir_binary(&b, KIR_OP_MIN, hi, kir_add(&b, lo, chunk));
        lo = kir_binary(&b, KIR_OP_MIN, lo, hi);
    }

    /* Key blocks every row of the tile sees whole need no masks: [full_lo, e) on lo's BLOCK_N grid, keys
     * below the first row's causal bound (or the sequence's end), past the last row's window and, in a tree,
     * before the step's own tokens. The loop runs in up to three parts, masked [lo, full_lo), unmasked
     * [full_lo, e), masked [e, hi), carrying (m, l, acc) from one to the next. */
    KirValue *full_end = causal ? kir_add(&b, pos_first, one) : slen;
    if (tree) full_end = kir_binary(&b, KIR_OP_MIN, full_end, ctx);
    KirValue *full_lo = lo;
    if (W > 0) { /* keys > pos_last - W: the first block starting at or after pos_last - W + 1 */
        KirValue *w1 = kir_binary(&b, KIR_OP_MAX, kir_sub(&b, pos_last, kir_const_i32(&b, W - 1)), lo);
        full_lo = kir_add(
            &b, lo,
            kir_mul(&b, kir_div(&b, kir_sub(&b, kir_add(&b, kir_sub(&b, w1, lo), cBN), one), cBN), cBN));
        full_lo = kir_binary(&b, KIR_OP_MIN, full_lo, hi);
    }
    KirValue *e = kir_sub(&b, kir_binary(&b, KIR_OP_MAX, kir_binary(&b, KIR_OP_MIN, full_end, hi), lo), lo);
    e = kir_binary(&b, KIR_OP_MAX, kir_add(&b, lo, kir_mul(&b, kir_div(&b, e, cBN), cBN)), full_lo);

    KeyLoop kl = {.b = &b,
                  .qt = qt,
                  .kc = kc,
                  .vc = vc,
                  .bt = bt,
                  .bt_row = kir_mul(&b, seq, max_pages),
                  .kvh = kvh,
                  .pos = pos,
                  .ctx = ctx,
                  .tm = NULL,
                  .dl64 = kir_cast(&b, dl, KIR_I64),
                  .page_elems = kir_const_i64(&b, S * Hkv * D),
                  .dmask = dmask,
                  .zero_t = zero_t,
                  .Hkv = (int)Hkv,
                  .D = (int)D,
                  .S = (int)S,
                  .W = (int)W,
                  .causal = (int)causal,
                  .bm = bm,
                  .bn = bn,
                  .dp = dp,
                  .stages = stages,
                  .dt = dt,
                  .qk_scale = kir_const_f(&b, KIR_F32, scale * 1.4426950408889634)};
    /* tree verify: row R's ancestor mask, bit j = may attend to query token j of its sequence */
    if (tree) kl.tm = kir_load(&b, tree_mask, kir_add(&b, q0, qi), rmask, kir_const_i64(&b, 0));
    KirValue *f0 = kir_const_f(&b, KIR_F32, 0);
    int shp_md[2] = {bm, dp}, shp_m[1] = {bm};
    KirValue *carry[3] = {kir_splat(&b, kir_const_f(&b, KIR_F32, -1e30), 1, shp_m),
                          kir_splat(&b, f0, 1, shp_m), kir_splat(&b, f0, 2, shp_md)};
    if (W > 0) key_loop(&kl, lo, full_lo, 1, carry);
    key_loop(&kl, full_lo, e, 0, carry);
    KirInst *loop = key_loop(&kl, e, hi, 1, carry);

    KirValue *lf = loop->res[1], *has = kir_binary(&b, KIR_OP_GT, lf, f0);
    lf = kir_select(&b, has, lf, kir_const_f(&b, KIR_F32, 1.0));
    KirValue *o = kir_div(&b, loop->res[2], kfam_rows(&b, lf, dp));
    if (!split) {
        kir_store(&b, dst, q_offs, kir_cast(&b, o, dt), q_mask);
        return kfam_kernel_end(&b, out);
    }
    /* partial result of split z for query row (token q0 + i, head h): ws row (token * H + h) * n + z */
    KirValue *wrow = kir_add(
        &b, kir_mul(&b, kir_add(&b, kir_mul(&b, kir_add(&b, q0, qi), kir_const_i32(&b, H)), qh), n_splits),
        z);
    /* lse in log2 units like m: log2(sum 2^s) = m + log2(l); -1e30 for a split without keys */
    KirValue *lse =
        kir_add(&b, loop->res[0],
                kir_mul(&b, kir_unary(&b, KIR_OP_LOG, lf), kir_const_f(&b, KIR_F32, 1.4426950408889634)));
    lse = kir_select(&b, has, lse, kir_const_f(&b, KIR_F32, -1e30));
    /* one split (the runtime's choice for steps that fill the GPU anyway): the output itself, no merge */
    KirValue *direct = kir_binary(&b, KIR_OP_EQ, n_splits, one),
             *partial = kir_binary(&b, KIR_OP_NE, n_splits, one);
    kir_store(&b, dst, q_offs, kir_cast(&b, o, dt), kir_binary(&b, KIR_OP_AND, q_mask, direct));
    kir_store(&b, ws_o, kfam_outer(&b, KIR_OP_ADD, kir_mul(&b, wrow, kir_const_i32(&b, D)), dl), o,
              kir_binary(&b, KIR_OP_AND, q_mask, partial));
    kir_store(&b, ws_lse, wrow, lse, kir_binary(&b, KIR_OP_AND, rmask, partial));
    return kfam_kernel_end(&b, out);
}

const KfamFamily kfam_attention = {
    .name = "attention",
    .n_space = 5,
    .space = {{"BLOCK_M", 5, {16, 32, 64, 128, 256}},
              {"BLOCK_N", 5, {16, 32, 64, 128, 256}},
              {"WARPS", 4, {1, 2, 4, 8}},
              {"STAGES", 3, {1, 2, 3}},
              {"MIN_BLOCKS", 3, {0, 2, 3}}},
    .defaults = attention_defaults,
    .build = attention_build,
};

/* attention_merge — combines split-KV partials (attention with split=1) into the output.
 * For every (token t, head h): out[t, h, :] = sum_z 2^(lse_z - M) o_z / sum_z 2^(lse_z - M), M = max_z lse_z,
 * over z < n_splits, read from ws_o [(t*H + h)*n + z, D] and ws_lse [(t*H + h)*n + z] (f32, log2 units);
 * splits without keys have lse -1e30 and o 0, so a row without any key gives 0.
 * Spec: H, D, dtype. Params: ws_o (ptr<f32>, rdonly), ws_lse (ptr<f32>, rdonly), out (ptr<dtype>
 * [T, H*D]), n_tokens (i32), n_splits (i32). Grid (n_tokens, H, 1). Config: SPLITS (partials read as one
 * [SPLITS, D] tile per trip: one memory round trip for up to SPLITS splits, not one per split), WARPS. */
static void merge_defaults(const KfamSpec *s, const KfamFacts *facts, KirConfig *cfg)
{
    (void)s;
    kir_config_set(cfg, "SPLITS", 32);
    kir_config_set(cfg, "WARPS", 4);
}

extern const KfamFamily kfam_attention_merge;

static IrStatus merge_build(IrArena *a, const KfamSpec *s, const KfamFacts *facts, const KirConfig *given,
                            KirKernel **out, IrDiag *d)
{
    int64_t H, D;
    KirDtype dt;
    KirConfig cfg;
    if (kfam_spec_need(s, "H", 1, 1024, &H, d) || kfam_spec_need(s, "D", 1, 256, &D, d) ||
        kfam_spec_dtype(s, &dt, d))
        return d->status;
    kfam_config_merge(&kfam_attention_merge, s, facts, given, &cfg);
    if (kfam_config_pow2(s, &cfg, "WARPS", 32, d) || kfam_config_pow2(s, &cfg, "SPLITS", 256, d))
        return d->status;
    int dp = (int)kfam_pow2_ceil(D), nsb = (int)kir_config_get(&cfg, "SPLITS", 32);
    KirKernel *k;
    KirBuilder b;
    if (kfam_kernel_begin(a, s, &cfg, &k, &b, d)) return d->status;
    KirValue *ws_o = kir_param(&b, "ws_o", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *ws_lse = kir_param(&b, "ws_lse", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *dst = kir_param(&b, "out", kir_ptr(dt), 0);
    KirValue *n_tokens = kir_param(&b, "n_tokens", kir_scalar(KIR_I32), 0);
    KirValue *n = kir_param(&b, "n_splits", kir_scalar(KIR_I32), 0);
    kir_grid(&b, 0, n_tokens, 1, 1);
    kir_grid_const(&b, 1, H);
    KirValue *row = kir_add(&b, kir_mul(&b, kir_pid(&b, 0), kir_const_i32(&b, H)), kir_pid(&b, 1));
    KirValue *base = kir_mul(&b, row, n);
    KirValue *dl = kir_arange(&b, dp), *cD = kir_const_i32(&b, D);
    KirValue *dmask = dp != D ? kir_lt(&b, dl, cD) : NULL;
    KirValue *f0 = kir_const_f(&b, KIR_F32, 0), *lo_lse = kir_const_f(&b, KIR_F32, -1e30);
    int shp[1] = {dp};
    KirValue *inits[3] = {lo_lse, f0, kir_splat(&b, f0, 1, shp)};
    KirBlock *body = kir_for_begin(&b, kir_const_i32(&b, 0), n, kir_const_i32(&b, nsb), inits, 3, 0);
    KirValue *M = body->args[1], *L = body->args[2], *acc = body->args[3];
    KirValue *zs = kir_add(&b, body->args[0], kir_arange(&b, nsb)), *zm = kir_lt(&b, zs, n);
    KirValue *zr = kir_add(&b, base, zs);
    KirValue *lse = kir_load(&b, ws_lse, zr, zm, lo_lse);
    KirValue *o = kir_load(&b, ws_o, kfam_outer(&b, KIR_OP_ADD, kir_mul(&b, zr, cD), dl),
                           kfam_outer_mask(&b, zm, dmask, nsb, dp), f0); /* [SPLITS, DP] */
    KirValue *M2 = kir_binary(&b, KIR_OP_MAX, M, kir_reduce(&b, lse, KIR_RED_MAX, 0));
    KirValue *al = kir_unary(&b, KIR_OP_EXP2, kir_sub(&b, M, M2));
    KirValue *w = kir_select(&b, zm, kir_unary(&b, KIR_OP_EXP2, kir_sub(&b, lse, M2)), f0);
    KirValue *ow = kir_reduce(&b, kir_mul(&b, o, kfam_rows(&b, w, dp)), KIR_RED_SUM, 0);
    KirValue *ys[3] = {M2, kir_add(&b, kir_mul(&b, L, al), kir_reduce(&b, w, KIR_RED_SUM, 0)),
                       kir_add(&b, kir_mul(&b, acc, al), ow)};
    KirInst *loop = kir_for_end(&b, ys, 3);
    KirValue *Lf = kir_select(&b, kir_binary(&b, KIR_OP_GT, loop->res[1], f0), loop->res[1],
                              kir_const_f(&b, KIR_F32, 1));
    KirValue *res = kir_cast(&b, kir_div(&b, loop->res[2], Lf), dt);
    kir_store(&b, dst, kir_add(&b, kir_mul(&b, row, cD), dl), res, dmask);
    return kfam_kernel_end(&b, out);
}

const KfamFamily kfam_attention_merge = {
    .name = "attention_merge",
    .n_space = 2,
    .space = {{"SPLITS", 4, {8, 16, 32, 64}}, {"WARPS", 3, {1, 2, 4}}},
    .defaults = merge_defaults,
    .build = merge_build,
};
