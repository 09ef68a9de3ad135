/* kfam_rope.c — rotary position embedding, HF Llama convention (rotate_half).
 *
 * For token t, head h and pair i in [0, D/2), with x1 = x[t, h*D + i], x2 = x[t, h*D + i + D/2]:
 *   out[.. i]       = x1*cos(a) - x2*sin(a)
 *   out[.. i + D/2] = x2*cos(a) + x1*sin(a),      a = f32(pos[t]) * inv_freq_i   (f32)
 * inv_freq_i, every step in f32:  e = f32(2i) / f32(D);  inv_freq_i = exp2(-(e * f32(log2(theta))))
 * then by scaling:
 *   "none"    as is
 *   "linear"  inv_freq_i / factor          (HF's linear scaling, i.e. positions / factor)
 *   "llama3"  HF _compute_llama3_parameters: wavelen = f32(2*pi) / inv_freq_i;
 *             wavelen > original_max_pos / low_freq_factor        -> inv_freq_i / factor
 *             wavelen < original_max_pos / high_freq_factor       -> inv_freq_i
 *             otherwise smooth = (original_max_pos / wavelen - low_freq_factor)
 *                                / (high_freq_factor - low_freq_factor)
 *                       inv_freq_i = (1 - smooth) * inv_freq_i / factor + smooth * inv_freq_i
 * cos, sin and the rotation are f32; out is rounded to dtype once. The inv_freq and cos/sin builders are
 * kfam_rope_cos_sin / kfam_rope_check in kfam.c, shared with kv_write (rope=1).
 *
 * Spec: H (heads), D (head_dim, even), theta, scaling ("none" | "linear" | "llama3"), factor,
 * low_freq_factor, high_freq_factor, original_max_pos (the last four as the scaling needs), dtype.
 * Params, in order:
 *   x          ptr<dtype> [n_tokens, H*D]
 *   positions  ptr<i32>   [n_tokens]        rdonly
 *   out        ptr<dtype> [n_tokens, H*D]   may alias x (in place)
 *   n_tokens   i32
 * Grid (n_tokens, cdiv(H, BH), 1): program (t, g) rotates heads [g*BH, g*BH + BH) of token t as one
 * [BH, pow2(D/2)] tile per half. Config: BH (heads per program), WARPS.
 */
#include "kfam_impl.h"

extern const KfamFamily kfam_rope;

static void rope_defaults(const KfamSpec *s, const KfamFacts *facts, KirConfig *cfg)
{
    int64_t half = kfam_pow2_ceil(kfam_spec_i(s, "D", 128) / 2);
    int64_t bh = kfam_clamp(kfam_pow2_ceil(kfam_spec_i(s, "H", 32)), 1, kfam_clamp(1024 / half, 1, 32));
    kir_config_set(cfg, "BH", bh);
    kir_config_set(cfg, "WARPS", kfam_clamp(bh * half / 256, 1, 4));
}

static IrStatus rope_build(IrArena *a, const KfamSpec *s, const KfamFacts *facts, const KirConfig *given,
                           KirKernel **out, IrDiag *d)
{
    int64_t H, D;
    KirDtype dt;
    KirConfig cfg;
    if (kfam_spec_need(s, "H", 1, 4096, &H, d) || kfam_spec_need(s, "D", 2, 1 << 16, &D, d) ||
        kfam_spec_dtype(s, &dt, d))
        return d->status;
    if (kfam_rope_check(s, D, d)) return d->status;
    kfam_config_merge(&kfam_rope, s, facts, given, &cfg);
    if (kfam_config_pow2(s, &cfg, "BH", 1024, d) || kfam_config_pow2(s, &cfg, "WARPS", 32, d))
        return d->status;
    int bh = (int)kir_config_get(&cfg, "BH", 1), half = (int)(D / 2), hp = (int)kfam_pow2_ceil(half);

    KirKernel *k;
    KirBuilder b;
    if (kfam_kernel_begin(a, s, &cfg, &k, &b, d)) return d->status;
    KirValue *x = kir_param(&b, "x", kir_ptr(dt), 0);
    KirValue *positions = kir_param(&b, "positions", kir_ptr(KIR_I32), KIR_PARAM_RDONLY);
    KirValue *dst = kir_param(&b, "out", kir_ptr(dt), 0);
    KirValue *n_tokens = kir_param(&b, "n_tokens", kir_scalar(KIR_I32), 0);
    kir_grid(&b, 0, n_tokens, 1, 1);
    kir_grid_const(&b, 1, kfam_cdiv(H, bh));

    KirValue *t = kir_pid(&b, 0);
    KirValue *i = kir_arange(&b, hp), *c, *sn;

    KirValue *h = kir_add(&b, kir_mul(&b, kir_pid(&b, 1), kir_const_i32(&b, bh)), kir_arange(&b, bh));
    KirValue *hmask = H % bh ? kir_lt(&b, h, kir_const_i32(&b, H)) : NULL;
    KirValue *imask = hp != half ? kir_lt(&b, i, kir_const_i32(&b, half)) : NULL;
    KirValue *mask = kfam_outer_mask(&b, hmask, imask, bh, hp);
    KirValue *head =
        kir_add(&b, kir_mul(&b, t, kir_const_i32(&b, H * D)), kir_mul(&b, h, kir_const_i32(&b, D)));
    KirValue *o1 = kfam_outer(&b, KIR_OP_ADD, head, i);
    KirValue *o2 = kir_add(&b, o1, kir_const_i32(&b, half));
    KirValue *zero = mask ? kir_const_f(&b, dt, 0) : NULL;
    KirValue *x1 = kir_cast(&b, kir_load(&b, x, o1, mask, zero), KIR_F32);
    KirValue *x2 = kir_cast(&b, kir_load(&b, x, o2, mask, zero), KIR_F32);
    /* the angles after the loads: their latency hides the cos/sin math and its layout barriers */
    KirValue *pos = kir_cast(&b, kir_load(&b, positions, t, NULL, NULL), KIR_F32);
    kfam_rope_cos_sin(&b, s, pos, i, D, bh, &c, &sn);
    KirValue *y1, *y2;
    kfam_rope_rotate(&b, x1, x2, c, sn, &y1, &y2);
    kir_store(&b, dst, o1, kir_cast(&b, y1, dt), mask);
    kir_store(&b, dst, o2, kir_cast(&b, y2, dt), mask);
    return kfam_kernel_end(&b, out);
}

const KfamFamily kfam_rope = {
    .name = "rope",
    .n_space = 2,
    .space = {{"BH", 6, {1, 2, 4, 8, 16, 32}}, {"WARPS", 4, {1, 2, 4, 8}}},
    .defaults = rope_defaults,
    .build = rope_build,
};
