/* kfam_kv_write.c — writes a step's new K and V rows into the paged KV cache (docs/ATTENTION.md,
 * "Paged KV cache"), optionally rotating K with RoPE on the way.
 *
 * Layout: k_cache and v_cache are [P, S, Hkv, D] row-major (P pages, S = page_size tokens a page). Token
 * t goes to its slot = page * S + offset (the scheduler computes it from the sequence's block table), so
 * its row starts at element slot * Hkv * D of each cache; slot < 0 marks a padding token: nothing is
 * read or written for it. Slots of one launch must be distinct (no two programs write one row).
 *   k_cache[slot, h, :] = k[t, h*D : h*D + D]     (rope=1: rope(k[t, h*D : h*D + D], positions[t]))
 *   v_cache[slot, h, :] = v[t, h*D : h*D + D]
 * rope=0 is a copy (bitwise exact). rope=1 rotates K exactly as the rope family does (HF rotate_half;
 * f32 math, one rounding to dtype: the math is shared, kfam_rope_cos_sin in kfam.c), bit-identical to a
 * rope launch followed by rope=0, so the graph pass fuse-rope-kv-write folds the rope of K into it.
 * With rope=1 and H > 0 it also rotates the step's queries, q_out[t] = rope(q[t], positions[t]) for every
 * token (padding ones too, as the rope family does), bit-identical to a rope launch: the pass
 * fuse-rope-q-kv-write folds the rope of Q in as well (one launch a layer fewer).
 *
 * Invariant: cache offsets are i64 (slot widened before the multiply), since a pool can hold more than
 * 2^31 elements; offsets into k, v and q are i32 (n_tokens * max(Hkv, H) * D < 2^31, as the rope family).
 *
 * Spec: Hkv (kv heads), D (head_dim), page_size (S; fixes the layout, not the code), dtype (k, v and the
 * caches), rope 0/1 (default 0) and, with rope=1, the rope family's keys (theta, scaling, factor,
 * low_freq_factor, high_freq_factor, original_max_pos), H (query heads to rotate as well; default 0, needs
 * rope=1).
 * Params, in order:
 *   k          ptr<dtype> [n_tokens, Hkv*D]     rdonly
 *   v          ptr<dtype> [n_tokens, Hkv*D]     rdonly
 *   k_cache    ptr<dtype> [P, S, Hkv, D]        updated in place
 *   v_cache    ptr<dtype> [P, S, Hkv, D]        updated in place
 *   slots      ptr<i32>   [n_tokens]            rdonly
 *   positions  ptr<i32>   [n_tokens]            rdonly; only with rope=1
 *   [q         ptr<dtype> [n_tokens, H*D]       rdonly]   H > 0
 *   [q_out     ptr<dtype> [n_tokens, H*D]]      H > 0; may alias q
 *   n_tokens   i32
 * Grid (n_tokens, cdiv(Hkv, BH) + cdiv(H, BH), 1): program (t, g) writes heads [g*BH, g*BH + BH) of token t
 * as one [BH, pow2(D)] tile (rope=1: K as two [BH, pow2(D/2)] halves); with H > 0 the programs past the
 * KV heads' rotate query heads [(g - cdiv(Hkv, BH))*BH, ...) instead (each program runs both parts, one
 * of them fully masked). Config: BH (heads per program), WARPS.
 */
#include "kfam_impl.h"

extern const KfamFamily kfam_kv_write;

static void kv_write_defaults(const KfamSpec *s, const KfamFacts *facts, KirConfig *cfg)
{
    int64_t dp = kfam_pow2_ceil(kfam_spec_i(s, "D", 128));
    int64_t bh = kfam_clamp(kfam_pow2_ceil(kfam_spec_i(s, "Hkv", 8)), 1, kfam_clamp(2048 / dp, 1, 32));
    kir_config_set(cfg, "BH", bh);
    kir_config_set(cfg, "WARPS", kfam_clamp(bh * dp / 256, 1, 4));
}

/* The [rows, cols] store mask: m (NULL: all lanes) and the token's scalar `valid` (slot >= 0). */
static KirValue *with_valid(KirBuilder *b, KirValue *m, KirValue *valid, int rows, int cols)
{
    int shape[2] = {rows, cols};
    return m ? kir_binary(b, KIR_OP_AND, m, valid) : kir_splat(b, valid, 2, shape);
}

/* dst[dst_offs] = src[src_offs] under mask, unconverted (a bitwise copy). */
static void copy_rows(KirBuilder *b, KirValue *src, KirValue *dst, KirValue *src_offs, KirValue *dst_offs,
                      KirValue *mask, KirDtype dt)
{
    KirValue *x = kir_load(b, src, src_offs, mask, mask ? kir_const_f(b, dt, 0) : NULL);
    kir_store(b, dst, dst_offs, x, mask);
}

/* Rotates rows pairs (i, i + w): reads src at s1 and s1 + w, writes dst at d1 and d1 + dw (dw: w as d1's
 * offset type), all under mask, in f32 with one rounding to dt (the rope family's math). */
static void rotate_rows(KirBuilder *b, KirValue *src, KirValue *dst, KirValue *s1, KirValue *d1, int w,
                        KirValue *dw, KirValue *mask, KirValue *c, KirValue *sn, KirDtype dt)
{
    KirValue *zero = kir_const_f(b, dt, 0);
    KirValue *x1 = kir_cast(b, kir_load(b, src, s1, mask, zero), KIR_F32);
    KirValue *x2 = kir_cast(b, kir_load(b, src, kir_add(b, s1, kir_const_i32(b, w)), mask, zero), KIR_F32);
    KirValue *y1, *y2;
    kfam_rope_rotate(b, x1, x2, c, sn, &y1, &y2);
    kir_store(b, dst, d1, kir_cast(b, y1, dt), mask);
    kir_store(b, dst, kir_add(b, d1, dw), kir_cast(b, y2, dt), mask);
}

static IrStatus kv_write_build(IrArena *a, const KfamSpec *s, const KfamFacts *facts, const KirConfig *given,
                               KirKernel **out, IrDiag *d)
{
    int64_t H, D, S, rope;
    KirDtype dt;
    KirConfig cfg;
    if (kfam_spec_need(s, "Hkv", 1, 4096, &H, d) || kfam_spec_need(s, "D", 1, 1 << 16, &D, d) ||
        kfam_spec_need(s, "page_size", 1, 1 << 20, &S, d) || kfam_spec_dtype(s, &dt, d))
        return d->status;
    rope = kfam_spec_i(s, "rope", 0);
    int64_t hq = kfam_spec_i(s, "H", 0);
    if (rope != 0 && rope != 1)
        return ir_diag_set(d, IR_ERR_INPUT, "kv_write: rope must be 0 or 1 (got %lld)", (long long)rope);
    if (hq < 0 || hq > 4096 || (hq && !rope))
        return ir_diag_set(d, IR_ERR_INPUT,
                           "kv_write: H (query heads) must be in [0, 4096] and needs rope=1");
    if (rope && kfam_rope_check(s, D, d)) return d->status;
    kfam_config_merge(&kfam_kv_write, s, facts, given, &cfg);
    if (kfam_config_pow2(s, &cfg, "BH", 1024, d) || kfam_config_pow2(s, &cfg, "WARPS", 32, d))
        return d->status;
    int bh = (int)kir_config_get(&cfg, "BH", 1);
    int w = (int)(rope ? D / 2 : D), wp = (int)kfam_pow2_ceil(w); /* K's tile width: a half with rope */
    int dp = (int)kfam_pow2_ceil(D);

    KirKernel *k;
    KirBuilder b;
    if (kfam_kernel_begin(a, s, &cfg, &k, &b, d)) return d->status;
    KirValue *kp = kir_param(&b, "k", kir_ptr(dt), KIR_PARAM_RDONLY);
    KirValue *vp = kir_param(&b, "v", kir_ptr(dt), KIR_PARAM_RDONLY);
    KirValue *kc = kir_param(&b, "k_cache", kir_ptr(dt), 0);
    KirValue *vc = kir_param(&b, "v_cache", kir_ptr(dt), 0);
    KirValue *slots = kir_param(&b, "slots", kir_ptr(KIR_I32), KIR_PARAM_RDONLY);
    KirValue *positions = rope ? kir_param(&b, "positions", kir_ptr(KIR_I32), KIR_PARAM_RDONLY) : NULL;
    KirValue *qp = hq ? kir_param(&b, "q", kir_ptr(dt), KIR_PARAM_RDONLY) : NULL;
    KirValue *qo = hq ? kir_param(&b, "q_out", kir_ptr(dt), 0) : NULL;
    KirValue *n_tokens = kir_param(&b, "n_tokens", kir_scalar(KIR_I32), 0);
    kir_grid(&b, 0, n_tokens, 1, 1);
    kir_grid_const(&b, 1, kfam_cdiv(H, bh) + kfam_cdiv(hq, bh));

    KirValue *t = kir_pid(&b, 0);
    KirValue *slot = kir_load(&b, slots, t, NULL, NULL);
    KirValue *valid = kir_binary(&b, KIR_OP_GE, slot, kir_const_i32(&b, 0));
    KirValue *h = kir_add(&b, kir_mul(&b, kir_pid(&b, 1), kir_const_i32(&b, bh)), kir_arange(&b, bh));
    /* with query programs past the KV ones, every KV mask bounds the head */
    KirValue *hmask = H % bh || hq ? kir_lt(&b, h, kir_const_i32(&b, H)) : NULL;
    KirValue *src =
        kir_add(&b, kir_mul(&b, t, kir_const_i32(&b, H * D)), kir_mul(&b, h, kir_const_i32(&b, D)));
    KirValue *dst = kir_mul(&b, kir_cast(&b, slot, KIR_I64), kir_const_i64(&b, H * D));
    KirValue *hrow = kir_mul(&b, h, kir_const_i32(&b, D));

    /* V (and K without rope): [BH, pow2(D)] rows copied as they are. */
    KirValue *j = kir_arange(&b, dp);
    KirValue *jmask = dp != D ? kir_lt(&b, j, kir_const_i32(&b, (int64_t)D)) : NULL;
    KirValue *mask = with_valid(&b, kfam_outer_mask(&b, hmask, jmask, bh, dp), valid, bh, dp);
    KirValue *so = kfam_outer(&b, KIR_OP_ADD, src, j);
    KirValue *dof = kir_add(&b, kir_cast(&b, kfam_outer(&b, KIR_OP_ADD, hrow, j), KIR_I64), dst);
    copy_rows(&b, vp, vc, so, dof, mask, dt);
    if (!rope) {
        copy_rows(&b, kp, kc, so, dof, mask, dt);
        return kfam_kernel_end(&b, out);
    }

    /* K with rope: pairs (i, i + D/2) as two [BH, pow2(D/2)] halves, rotated in f32. */
    KirValue *pos = kir_cast(&b, kir_load(&b, positions, t, NULL, NULL), KIR_F32);
    KirValue *i = kir_arange(&b, wp), *c, *sn;
    kfam_rope_cos_sin(&b, s, pos, i, D, bh, &c, &sn);
    KirValue *imask = wp != w ? kir_lt(&b, i, kir_const_i32(&b, w)) : NULL;
    KirValue *hm = with_valid(&b, kfam_outer_mask(&b, hmask, imask, bh, wp), valid, bh, wp);
    KirValue *d1 = kir_add(&b, kir_cast(&b, kfam_outer(&b, KIR_OP_ADD, hrow, i), KIR_I64), dst);
    rotate_rows(&b, kp, kc, kfam_outer(&b, KIR_OP_ADD, src, i), d1, w, kir_const_i64(&b, w), hm, c, sn, dt);
    if (hq) { /* query heads hh = h - cdiv(Hkv, BH)*BH, in [0, H): rotated as the rope family does */
        KirValue *hh = kir_sub(&b, h, kir_const_i32(&b, kfam_cdiv(H, bh) * bh));
        KirValue *qm = kir_binary(&b, KIR_OP_AND, kir_binary(&b, KIR_OP_GE, hh, kir_const_i32(&b, 0)),
                                  kir_lt(&b, hh, kir_const_i32(&b, hq)));
        KirValue *m = kfam_outer_mask(&b, qm, imask, bh, wp);
        KirValue *q1 = kfam_outer(
            &b, KIR_OP_ADD,
            kir_add(&b, kir_mul(&b, t, kir_const_i32(&b, hq * D)), kir_mul(&b, hh, kir_const_i32(&b, D))), i);
        rotate_rows(&b, qp, qo, q1, q1, w, kir_const_i32(&b, w), m, c, sn, dt);
    }
    return kfam_kernel_end(&b, out);
}

const KfamFamily kfam_kv_write = {
    .name = "kv_write",
    .n_space = 2,
    .space = {{"BH", 6, {1, 2, 4, 8, 16, 32}}, {"WARPS", 4, {1, 2, 4, 8}}},
    .defaults = kv_write_defaults,
    .build = kv_write_build,
};
