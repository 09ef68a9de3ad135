/* cg_cuda_nib.c — 4-bit dequantization in b16 pairs, for a register A operand of a dot.
 *
 * An A fragment (mma.sync's and wgmma's) holds its elements in pairs of columns (c, c + 1), c even, one
 * 32-bit register each. When the operand is the dequantized weight tile of qmatmul,
 *     x = dtype((f32((w >> sh) & 15) - z) * f32(s))    (x, s b16 of one dtype; z an integer in
 *                                                     [0, 255] (f16), [0, 127] (bf16: a u8 & 127);
 *                                                     s may be bf16(an f16 scale))
 * the pair is built in the b16 domain instead of element by element in f32, when its two codes sit in
 * one word at shifts sh(c + 1) = sh(c) + 16 (qmatmul's fragment-ordered words: each pair at bits 4i and
 * 16 + 4i; the shift is the same for the 4 threads of a fragment column, so a table by column gives it
 * as a constant) or sh(c + 1) = sh(c) + 4, sh(c) a multiple of 8 (a byte: `prmt` moves it to bit 0 and
 * a multiply by 0x1001 copies it to bit 12, the second code then at bit 16). One lop3 keeps the two codes
 * and ors in the b16 bits of `magic` (bf16 128, f16 1024, whose ulp is 1), making the pair magic + q
 * exactly; one b16 subtraction of magic + z (exact: f16 with z <= 255, bf16 with z <= 127, qmatmul's
 * 7-bit zero points) leaves q - z exactly, and one b16 multiplication by s rounds once, as dtype(f32
 * product) does (the f32 product of an integer below 2^8 and a b16 is exact). About 2 instructions per
 * element instead of 7 (shift, and, two conversions, sub, mul, half a pack). With f16 scales and bf16 x
 * (packages keep checkpoints' f16 scales) the IR rounds each scale to bf16 first; the rounding is done in
 * integer ops from the f16 value, so runs of equal scales share it.
 *
 * Recognized on the IR's structure; every condition is checked at compile time (the shifts by evaluating
 * the column-only shift tile), else the caller packs the f32 values as before.
 */
#include "cg_cuda_impl.h"

static const KirInst *def_of(const KirValue *v, KirOp op)
{
    return v && v->def && v->def->op == op ? v->def : NULL;
}

/* Equal in each pair of columns (c, c + 1), c even: aligned runs of at least 2 along dim 1. */
static int pair_const(const CgCudaGen *g, const KirValue *v)
{
    return v->type.rank == 0 || g->v[v->id].ax.cnst[1] >= 2;
}

/* A tile operand in registers of layout lay, or evaluated where it is used (VIRT, scalar). */
static int at_ok(const CgCudaGen *g, const KirValue *v, int lay)
{
    const CgCudaVal *V = &g->v[v->id];
    return V->form == CG_CUDA_SCALAR || V->form == CG_CUDA_VIRT || (V->form == CG_CUDA_REG && V->lay == lay);
}

/* The parts of x = dtype((f32((w >> sh) & 15) - z) * f32(s)). */
typedef struct Nib {
    const KirValue *w, *sh, *z, *s;
    const KirValue *s16; /* s = bf16(s16), an f16 scale rounded for bf16 x (kfam_qmatmul.c); else NULL */
    double zc;           /* z when it is a constant (z NULL) */
    int lanes;           /* 1: the pair's codes at bits sh and sh + 16; 0: at sh and sh + 4 */
} Nib;

/* Is x of that form, with every fact the pairs need (see the top)? Fills n. */
static int match(const CgCudaGen *g, const KirValue *x, Nib *n)
{
    KirDtype t = x->type.dtype;
    int lay = g->v[x->id].lay;
    const KirInst *cv = def_of(x, KIR_OP_CAST), *mul = cv ? def_of(cv->ops[0], KIR_OP_MUL) : NULL;
    /* an f32 product (the verifier gives the sub and the casts feeding it f32 too), rounded once to t */
    if (!mul || mul->res[0]->type.dtype != KIR_F32 || (t != KIR_BF16 && t != KIR_F16)) return 0;
    for (int i = 0; i < 2; i++) {
        const KirInst *sc = def_of(mul->ops[1 - i], KIR_OP_CAST), *sub = def_of(mul->ops[i], KIR_OP_SUB);
        if (!sc || !sub) continue;
        KirDtype st = sc->ops[0]->type.dtype;
        if (st != t) continue;
        const KirInst *q = def_of(sub->ops[0], KIR_OP_CAST), *msk = q ? def_of(q->ops[0], KIR_OP_AND) : NULL;
        if (!msk) continue;
        const KirValue *m = msk->ops[1], *sr = msk->ops[0];
        if (!def_of(m, KIR_OP_CONST)) m = msk->ops[0], sr = msk->ops[1];
        const KirInst *shr = def_of(sr, KIR_OP_SHR);
        if (!def_of(m, KIR_OP_CONST) || m->def->i != 15 || !shr || shr->ops[0]->type.dtype != KIR_I32)
            continue;
        n->w = shr->ops[0], n->sh = shr->ops[1], n->s = sc->ops[0], n->z = NULL, n->zc = 0, n->s16 = NULL;
        const KirInst *rs = def_of(n->s, KIR_OP_CAST);
        if (st == KIR_BF16 && rs && rs->ops[0]->type.dtype == KIR_F16 && pair_const(g, rs->ops[0]) &&
            at_ok(g, rs->ops[0], lay))
            n->s16 = rs->ops[0];
        const KirValue *z = sub->ops[1];
        if (def_of(z, KIR_OP_CONST)) {
            n->zc = z->def->f;
            if (!(n->zc >= -128 && n->zc <= 128) || n->zc != (double)(int)n->zc) continue;
        } else {
            /* z = f32(u8 zero point), possibly through i32 and an and with a constant c >= 0 (qmatmul's
             * 7-bit zero points: c = 127): an integer in [0, min(255, c)] */
            const KirInst *zc = def_of(z, KIR_OP_CAST), *za = zc ? def_of(zc->ops[0], KIR_OP_AND) : NULL;
            const KirValue *zv = zc ? zc->ops[0] : NULL;
            int64_t zmax = 255; /* z is at most this */
            if (za && za->ops[0]->type.dtype == KIR_I32) {
                const KirValue *c = za->ops[1];
                zv = za->ops[0];
                if (!def_of(c, KIR_OP_CONST)) c = za->ops[0], zv = za->ops[1];
                if (!def_of(c, KIR_OP_CONST) || c->def->i < 0) continue;
                if (c->def->i < zmax) zmax = c->def->i;
            }
            const KirInst *zi = zv ? def_of(zv, KIR_OP_CAST) : NULL;
            const KirValue *u = zi ? zi->ops[0] : zv;
            if (!u || u->type.dtype != KIR_U8 || (zi && zv->type.dtype != KIR_I32)) continue;
            if (t == KIR_BF16 && zmax > 127) continue; /* 128 + z would round in bf16 */
            n->z = z;
        }
        if (n->sh->type.rank != 2 || !pair_const(g, n->w) || !pair_const(g, n->s) ||
            (n->z && !pair_const(g, n->z)) || !at_ok(g, n->w, lay) || !at_ok(g, n->s, lay) ||
            (n->z && !at_ok(g, n->z, lay)) || !at_ok(g, n->sh, lay))
            continue;
        /* every pair a byte (sh, sh + 4), or every pair nibbles 16 bits apart (sh, sh + 16: the fragment
         * order of kfam_qmatmul.c) */
        for (n->lanes = 0; n->lanes < 2; n->lanes++) {
            int64_t a = 0, b = 0, ok = 1;
            for (int64_t c = 0; c + 1 < x->type.shape[1] && ok; c += 2)
                ok = cg_cuda_col_value(n->sh, c, &a) && cg_cuda_col_value(n->sh, c + 1, &b) && a >= 0 &&
                     (n->lanes ? a % 4 == 0 && a <= 12 && b == a + 16 : a % 8 == 0 && a <= 24 && b == a + 4);
            if (ok) return 1;
        }
    }
    return 0;
}

const char *cg_cuda_nib_pairs(CgCudaGen *g, const KirValue *x)
{
    const CgCudaVal *X = &g->v[x->id];
    Nib n;
    if (X->form != CG_CUDA_REG || g->lay[X->lay].kind != CG_CUDA_MMA || !match(g, x, &n)) return NULL;
    int bf = x->type.dtype == KIR_BF16;
    const char *name = cg_cuda_fmt(g, "%s_pr", X->name), *ty = bf ? "bf16x2" : "f16x2";
    const char *magic = bf ? "0x43004300u" : "0x64006400u", *mg = bf ? "128.0f" : "1024.0f";
    cg_cuda_line(g, "unsigned %s[%d];", name, g->lay[X->lay].slots / 2);
    /* lanes: a pair's shift is the same for the 4 threads of its columns (w4a16's fragment order): a
     * table by fragment column, so the shifts are constants, not computed from the lane */
    const CgCudaLayout *L = &g->lay[X->lay];
    int tab = n.lanes && L->wn == 1 && L->fn * 8 == x->type.shape[1] && L->fn <= 64;
    int64_t sh0[64];
    for (int a = 0; tab && a < L->fn; a++)
        for (int t = 0; tab && t < 4; t++) {
            int64_t v;
            tab = cg_cuda_col_value(n.sh, 8 * a + 2 * t, &v) && (t ? v == sh0[a] : (sh0[a] = v, 1));
        }
    const char *tname = cg_cuda_fmt(g, "%s_sh", name);
    if (tab) {
        IrBuf b = {0};
        for (int a = 0; a < L->fn; a++)
            ir_buf_printf(&b, "%s%d", a ? ", " : "", (int)sh0[a]);
        cg_cuda_line(g, "const int %s[%d] = {%s};", tname, L->fn, b.oom ? "" : b.s);
        if (b.oom) g->oom = 1;
        ir_buf_free(&b);
    }
    cg_cuda_slot_loop(g, X->lay, 2);
    const char *w = cg_cuda_at(g, n.w, X->lay);
    const char *sh = tab ? cg_cuda_fmt(g, "%s[(s / 4) %% %d]", tname, L->fn) : cg_cuda_at(g, n.sh, X->lay);
    /* an f16 scale rounded to bf16: rounded and splat in integer ops from the f16 value, which the
     * compiler computes once per run of equal scales (the cvt.rn asm was repeated per pair) */
    const char *s = n.s16 ? cg_cuda_fmt(g, "kd_f32_to_bf16_bits(%s)", cg_cuda_at(g, n.s16, X->lay))
                          : cg_cuda_at(g, n.s, X->lay);
    const char *q =
        cg_cuda_fmt(g, "kd_nib_pair%s((unsigned)%s, %s, %s)", n.lanes ? "_lanes" : "", w, sh, magic);
    if (!n.z) /* magic + z is an integer of at most 2^8 (bf16) or below 2^11 (f16): exact */
        q = cg_cuda_fmt(g, "kd_sub_%s(%s, kd_splat_%s(%s + %.1ff))", ty, q, ty, mg, n.zc);
    else /* magic + z: bf16 with z <= 127, f16 with z <= 255: exact */
        q = cg_cuda_fmt(g, "kd_sub_%s(%s, kd_splat_%s(%s + %s))", ty, q, ty, cg_cuda_at(g, n.z, X->lay), mg);
    if (n.s16)
        cg_cuda_line(g, "%s[s / 2] = kd_mul_bf16x2(%s, %s * 0x10001u);", name, q, s);
    else
        cg_cuda_line(g, "%s[s / 2] = kd_mul_%s(%s, kd_splat_%s(%s));", name, ty, q, ty, s);
    cg_cuda_close(g);
    return name;
}
