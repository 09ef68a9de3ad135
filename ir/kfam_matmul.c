/* kfam_matmul.c — out[M,N] = x[M,K] @ w[N,K]^T with an epilogue (a linear layer, weights row-major as
 * in safetensors), and matmul_splitk_epilogue, the second half of a split-K matmul.
 *
 * The product accumulates in f32 through `dot` (in k order within a program). Epilogues, in f32 until
 * the one rounding to dtype, except that the residual is added to the rounded product as HF does:
 *   "none"      out = dtype(acc)
 *   "bias"      out = dtype(acc + f32(bias[n]))
 *   "residual"  out = dtype(f32(dtype(acc)) + f32(r[m,n]))
 *   "silu_mul"  two weights, gate w and up w2:  out = dtype(silu(acc_g) * acc_u),  silu(g) = g / (1 +
 * exp(-g))
 *   "pair"      two weights w and w2 of one shape, two outputs:  out = dtype(acc),  out2 = dtype(acc2)
 *               (two linear layers of one x in one launch; each output bit-identical to epilogue none
 *               with its weight at the same config)
 *   "group"     two or three weights w [N,K], w2 [N2,K], w3 [N3,K] (N2, N3 from the spec; no N3: two),
 *               outputs out [M,N], out2 [M,N2], out3 [M,N3]: the column tiles of the three products side by
 *               side in one grid, each program computing one tile of one of them (its weight and output
 *               chosen by its column index): Llama's q, k and v projections in one launch that fills the
 *               GPU where k and v alone would not. BN must divide N and N2; each output bit-identical to
 *               epilogue none with its weight at the same config.
 *
 * Spec: N, K, dtype (bf16 | f16 | f32), epilogue (default "none"), optional m_hint (typical M; only the
 * default config reads it), gather (1: A's row m is x[rows[m]], the logits of selected tokens; epilogue
 * none), out_dtype (f32 or the dtype), wdtype (must equal dtype until the quantized matmul exists). M is
 * a runtime parameter.
 * Params, in order, SPLIT_K = 1 (bracketed ones only with their epilogue or option):
 *   x     ptr<dtype> [M, K]   rdonly    (gather: [T, K], rows index it)
 *   w     ptr<dtype> [N, K]   rdonly
 *   [w2   ptr<dtype> [N, K]   rdonly]   silu_mul: the up projection; pair: the second weight
 *   [bias ptr<dtype> [N]      rdonly]   bias
 *   [rows ptr<i32> [M]        rdonly]   gather
 *   [r    ptr<dtype> [M, N]]            residual; out may alias r
 *   out   ptr<out_dtype> [M, N]
 *   [out2 ptr<out_dtype> [M, N]]        pair: x @ w2^T
 * group: x, w, w2, [w3], out, out2, [out3], M.
 *   M     i32
 * SPLIT_K > 1 (epilogue none, bias or residual; silu_mul and pair are INVALID): params x, w, ws, M, where ws
 * is ptr<f32> [M, N], zeroed by the caller; program z adds (atomic_add) its partial product over K slice
 * [z*KS, z*KS + KS) into ws (KS = cdiv(cdiv(K, SPLIT_K), BK) * BK), and matmul_splitk_epilogue then
 * applies the epilogue and writes out.
 * Grid (cdiv(M, BM), cdiv(N, BN), SPLIT_K).
 * Config: BM, BN, BK (tile sizes), WARPS, STAGES (the K loop's pipelining hint), SPLIT_K.
 * The K loop is the canonical shape backends pattern-match: `for k in [lo, hi) step BK` carrying acc (and
 * acc2), whose body loads the A tile [BM,BK] at rows*K + k + cols, the B tile [BK,BN] at n*K + k + kk
 * (w read transposed through offsets) and does `dot` (two for silu_mul and pair). M is always masked; N and K
 * only when BN, BK do not divide them. Offsets are i32: N*K and M*max(N, K) must stay below 2^31.
 *
 * Split-K reduced in the launch (spec ws=1; epilogue none, bias or residual, no gather, out_dtype the
 * dtype): params ws (ptr<f32>, KFAM_SPLITK_WS(N) elements: slices [z][KFAM_SPLITK_ROWS][N]) and sem
 * (ptr<i32>, KFAM_SPLITK_SEMS(N) elements, all zero at entry and left zero at exit) follow out, so one
 * pair serves every launch of a step (the scheduler's %splitk_ws / %splitk_sem; the runtime zeroes sem
 * once). With SPLIT_K > 1 program z stores its partial tile into slice z, then arrives at its tile's
 * counter in sem; the last of the SPLIT_K to arrive sums the slices in z order (deterministic: the same
 * bits whatever the arrival order), applies the epilogue, writes out and resets the counter. Needs M <=
 * KFAM_SPLITK_ROWS, BM and BN >= 16, SPLIT_K <= KFAM_SPLITK_MAX (compile: only small-M variants whose BM
 * is below the default's take SPLIT_K > 1, so the runtime never picks one for more rows). With SPLIT_K =
 * 1 the two params are unused.
 *
 * matmul_splitk_epilogue — spec N, dtype, epilogue (none | bias | residual); params ws (ptr<f32> [M,N]
 * rdonly), [bias], [r], out, M; grid (M, cdiv(N, BLOCK)); config BLOCK, WARPS; the same epilogue math.
 */
#include "kfam_impl.h"

#include <string.h>

extern const KfamFamily kfam_matmul;
extern const KfamFamily kfam_matmul_splitk_epilogue;

int kfam_epilogue_of(const KfamSpec *s)
{
    const char *e = kfam_spec_s(s, "epilogue", "none");
    if (!strcmp(e, "none")) return KFAM_EPI_NONE;
    if (!strcmp(e, "bias")) return KFAM_EPI_BIAS;
    if (!strcmp(e, "residual")) return KFAM_EPI_RESIDUAL;
    if (!strcmp(e, "silu_mul")) return KFAM_EPI_SILU_MUL;
    if (!strcmp(e, "pair")) return KFAM_EPI_PAIR;
    if (!strcmp(e, "group")) return KFAM_EPI_GROUP;
    return -1;
}

int kfam_epilogue_two_weights(int epi)
{
    return epi == KFAM_EPI_SILU_MUL || epi == KFAM_EPI_PAIR;
}

/* The host's defaults (facts->cpu): its lowering computes every row of a tile, masked or not, and runs
 * each tile op as a loop over a stack array, so a tile is as tall as the rows its launches have and small
 * enough that one K trip's tiles stay in the L1 cache: 1 row (m_hint 1, a decode step) x 32 columns x 64
 * of K, 16 rows (m_hint <= 16) x 32 x 64, else 128 x 32 x 32 (prefill: each B tile feeds 128 rows). BN
 * divides N and N2 for epilogue group. One warp, no stages, no split (the host ignores them). Measured on
 * SmolLM2's shapes with bench/hbench.c (docs/BACKENDS.md, "Host tiles"). */
static void matmul_host_defaults(const KfamSpec *s, int64_t m, KirConfig *cfg)
{
    int64_t N = kfam_spec_i(s, "N", 4096), K = kfam_spec_i(s, "K", 4096);
    int64_t bm = m == 1 ? 1 : m > 0 && m <= 16 ? 16 : 128;
    int64_t bn = kfam_clamp(kfam_pow2_ceil(N), 1, 32),
            bk = kfam_clamp(kfam_pow2_ceil(K), 1, bm > 16 ? 32 : 64);
    while (kfam_epilogue_of(s) == KFAM_EPI_GROUP && bn > 1 && (N % bn || kfam_spec_i(s, "N2", 0) % bn))
        bn /= 2;
    kir_config_set(cfg, "BM", bm);
    kir_config_set(cfg, "BN", bn);
    kir_config_set(cfg, "BK", bk);
    kir_config_set(cfg, "WARPS", 1);
    kir_config_set(cfg, "STAGES", 1);
    kir_config_set(cfg, "SPLIT_K", 1);
}

/* Defaults shaped for the CUDA backend's fast paths (docs/BACKENDS.md): BM = 16 x WARPS and BK a multiple
 * of 64 let sm_90a use wgmma. Large or unknown M: 128x256x64 tiles, 8 warps (128x128 per accumulator for
 * the two of silu_mul and pair). M known to be small (m_hint <= 64): 64-row tiles, long K steps to stream
 * weights, and N tiles narrow enough that there are about as many programs as SMs. Small N or K shrink the
 * tiles; other targets fall back through kfam_config_candidates. Program counts are fractions of the
 * facts' SMs chosen so that sm_90a's 132 give the counts the rules were measured with (120, 128, 160,
 * 192); the measurements: docs/KERNELS.md, "Why the defaults are what they are". */
static void matmul_defaults(const KfamSpec *s, const KfamFacts *facts, KirConfig *cfg)
{
    int64_t N = kfam_spec_i(s, "N", 4096), K = kfam_spec_i(s, "K", 4096), m = kfam_spec_i(s, "m_hint", 0);
    if (facts->cpu) {
        matmul_host_defaults(s, m, cfg);
        return;
    }
    int two = kfam_epilogue_two_weights(kfam_epilogue_of(s)), group = kfam_epilogue_of(s) == KFAM_EPI_GROUP;
    if (group) N += kfam_spec_i(s, "N2", 0) + kfam_spec_i(s, "N3", 0); /* tiles sized for all the columns */
    int small_m = m > 0 && m <= 64;
    int64_t bm = small_m ? 64 : 128, warps = small_m ? 4 : 8;
    int64_t bn = kfam_clamp(kfam_pow2_ceil(N), 32, small_m || two ? 128 : 256);
    while (small_m && bn > 32 && N / bn < facts->sms * 10 / 11)
        bn /= 2; /* decode streams weights: tiles for 10/11 of the SMs at least */
    int64_t bk = kfam_clamp(kfam_pow2_ceil(K), 16, small_m ? 128 : 64);
    if (m == 1 && two)
        bm = 16; /* one row: 16-row A tiles leave room for a 4th stage beside the two B tiles */
    if (m == 1 && N / bn <= facts->sms * 16 / 11 && K >= 4096) { /* at most ~1.5 tiles per SM */
        /* one row, few output tiles, long rows (Llama's q/o/down projections, q+k+v as a group): 16 rows,
         * 32 or 16 columns (about one program per SM: 32/33 of the SMs at least), 256-long K steps, 2 warps:
         * each small program streams its weight columns with few trips */
        bm = 16, bn = N / 32 >= facts->sms * 32 / 33 ? 32 : 16, bk = kfam_clamp(kfam_pow2_ceil(K), 16, 256);
        warps = 2;
    }
    if (m > 64 && m <= 256) {
        /* 65-256 rows (verify steps at batch 16-64, short prefill chunks): the large-M tile's 128 rows,
         * N tiles narrowed to 64 at least until the 1-2 row tiles give about a wave of programs (the wide
         * tile leaves 32 programs for N 4096 at 160 rows) */
        while (bn > 64 && kfam_cdiv(m, bm) * kfam_cdiv(N, bn) < facts->sms)
            bn /= 2;
    }
    while (group && bn > 16 && (kfam_spec_i(s, "N", 0) % bn || kfam_spec_i(s, "N2", 0) % bn))
        bn /= 2; /* each program's columns in one product */
    int64_t split = 1;
    if (kfam_spec_i(s, "ws", 0) && m > 1 && m <= KFAM_SPLITK_ROWS && K >= 8192) {
        /* a few rows, few column tiles, long rows (Llama's down projection at batch 16-64): 128 columns a
         * program, so each A byte loaded feeds 4x the columns of a 32-wide tile, and K split inside the
         * launch until about as many programs as SMs run; K >= 8192 only: shorter rows gain less than the
         * split's reduction costs */
        int64_t wide = kfam_clamp(kfam_pow2_ceil(N), 16, 128), tiles = kfam_cdiv(N, wide);
        while (split < KFAM_SPLITK_MAX && tiles * split * 2 <= facts->sms * 40 / 33 &&
               K / (split * 2) >= 1024)
            split *= 2; /* up to ~1.2 programs per SM */
        if (split > 1) bm = 64, bn = wide, bk = 128, warps = 4;
    }
    kir_config_set(cfg, "BM", bm);
    kir_config_set(cfg, "BN", bn);
    kir_config_set(cfg, "BK", bk);
    kir_config_set(cfg, "WARPS", warps);
    /* decode: more bytes in flight per SM, as many stages as fit beside a second B tile (silu_mul, pair;
     * the operands' pipeline within 160/227 of a program's shared memory, 160 KiB on sm_90a, leaves room
     * for the epilogue) */
    int64_t stages = small_m ? 4 : 3, stage_bytes = (bm * bk + (two ? 2 : 1) * bk * bn) * 2;
    while (small_m && stages > 2 && stages * stage_bytes > (int64_t)facts->smem_block * 160 / 227)
        stages--;
    kir_config_set(cfg, "STAGES", stages);
    kir_config_set(cfg, "SPLIT_K", split);
}

/* out = epilogue(acc) for one [rows, cols] tile; offs/mask address it in out (and r), cols/nmask in bias. */
void kfam_matmul_epilogue(KirBuilder *b, int epi, KirDtype dt, KirDtype odt, KirValue *acc, KirValue *acc2,
                          KirValue *bias, KirValue *r, KirValue *dst, KirValue *dst2, KirValue *cols,
                          KirValue *nmask, KirValue *offs, KirValue *mask, int trans)
{
    int rows = acc->type.shape[0];
    KirValue *zero = kir_const_f(b, dt, 0);
    KirValue *y = acc;
    if (epi == KFAM_EPI_SILU_MUL) {
        KirValue *one = kir_const_f(b, KIR_F32, 1.0);
        KirValue *den = kir_add(b, one, kir_unary(b, KIR_OP_EXP, kir_unary(b, KIR_OP_NEG, acc)));
        y = kir_mul(b, kir_div(b, acc, den), acc2);
    }
    if (epi == KFAM_EPI_BIAS) {
        KirValue *bv = kir_cast(b, kir_load(b, bias, cols, nmask, nmask ? zero : NULL), KIR_F32);
        y = kir_add(b, y, trans ? kfam_rows(b, bv, acc->type.shape[1]) : kfam_cols(b, bv, rows));
    }
    KirValue *o = kir_cast(b, y, odt);
    if (epi == KFAM_EPI_RESIDUAL) {
        KirValue *rv = kir_cast(b, kir_load(b, r, offs, mask, mask ? zero : NULL), KIR_F32);
        o = kir_cast(b, kir_add(b, kir_cast(b, o, KIR_F32), rv), dt);
    }
    kir_store(b, dst, offs, o, mask);
    if (epi == KFAM_EPI_PAIR) kir_store(b, dst2, offs, kir_cast(b, acc2, odt), mask);
}

/* Epilogue group: which product program column j computes. Sets *w and *dst to its weight and output,
 * t->rn / t->nmask / t->cN to its columns within that product (N2, N3 from the spec; n3 = 0: two). */
static void group_select(KirBuilder *b, const KirValue *const ws[3], KirValue *const dsts[3], int64_t N,
                         int64_t n2, int64_t n3, int bn, KfamMmTiles *t, KirValue **w, KirValue **dst)
{
    KirValue *j = kir_pid(b, 1), *i1 = kir_binary(b, KIR_OP_GE, j, kir_const_i32(b, N / bn)), *i2 = NULL;
    *w = kir_select(b, i1, (KirValue *)ws[1], (KirValue *)ws[0]);
    *dst = kir_select(b, i1, dsts[1], dsts[0]);
    KirValue *first = kir_select(b, i1, kir_const_i32(b, N / bn), kir_const_i32(b, 0));
    t->cN = kir_select(b, i1, kir_const_i32(b, n2), kir_const_i32(b, N));
    int64_t last = n2;
    if (n3) {
        i2 = kir_binary(b, KIR_OP_GE, j, kir_const_i32(b, N / bn + n2 / bn));
        *w = kir_select(b, i2, (KirValue *)ws[2], *w);
        *dst = kir_select(b, i2, dsts[2], *dst);
        first = kir_select(b, i2, kir_const_i32(b, N / bn + n2 / bn), first);
        t->cN = kir_select(b, i2, kir_const_i32(b, n3), t->cN);
        last = n3;
    }
    t->rn = kir_add(b, kir_mul(b, kir_sub(b, j, first), kir_const_i32(b, bn)), kir_arange(b, bn));
    t->nmask = last % bn ? kir_lt(b, t->rn, t->cN) : NULL; /* only the last product can end mid-tile */
}

static IrStatus matmul_build(IrArena *a, const KfamSpec *s, const KfamFacts *facts, const KirConfig *given,
                             KirKernel **out, IrDiag *d)
{
    int64_t N, K;
    KirDtype dt;
    KirConfig cfg;
    if (kfam_spec_need(s, "N", 1, 1 << 24, &N, d) || kfam_spec_need(s, "K", 1, 1 << 24, &K, d) ||
        kfam_spec_dtype(s, &dt, d))
        return d->status;
    int epi = kfam_epilogue_of(s);
    if (epi < 0)
        return ir_diag_set(d, IR_ERR_INPUT,
                           "matmul: epilogue must be none, bias, residual, silu_mul, pair or group");
    int two = kfam_epilogue_two_weights(epi), group = epi == KFAM_EPI_GROUP;
    int64_t n2 = group ? kfam_spec_i(s, "N2", 0) : 0, n3 = group ? kfam_spec_i(s, "N3", 0) : 0;
    if (group && (n2 < 1 || n2 > 1 << 24 || n3 < 0 || n3 > 1 << 24 || n2 * K > KFAM_MAX_I32_OFFSET ||
                  n3 * K > KFAM_MAX_I32_OFFSET))
        return ir_diag_set(d, IR_ERR_INPUT,
                           "matmul: epilogue group needs N2 (and optionally N3) in [1, 2^24]");
    int gather = (int)kfam_spec_i(s, "gather", 0);
    KirDtype odt = dt;
    const char *os = kfam_spec_s(s, "out_dtype", NULL), *ws_ = kfam_spec_s(s, "wdtype", NULL);
    if (os && !strcmp(os, "f32"))
        odt = KIR_F32;
    else if (os && strcmp(os, kir_dtype_name(dt)))
        return ir_diag_set(d, IR_ERR_INPUT, "matmul: out_dtype must be f32 or the dtype, not '%s'", os);
    if (ws_ && strcmp(ws_, kir_dtype_name(dt)))
        return ir_diag_set(d, IR_ERR_UNSUPPORTED,
                           "matmul: %s weights need the quantized matmul (not built yet)", ws_);
    if (gather && epi != KFAM_EPI_NONE)
        return ir_diag_set(d, IR_ERR_INPUT, "matmul: gathered rows take epilogue none");
    if (odt != dt && epi == KFAM_EPI_RESIDUAL)
        return ir_diag_set(d, IR_ERR_INPUT, "matmul: a residual epilogue writes the dtype");
    if (N * K > KFAM_MAX_I32_OFFSET)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "matmul: N*K = %lld needs 64-bit offsets",
                           (long long)(N * K));
    kfam_config_merge(&kfam_matmul, s, facts, given, &cfg);
    if (kfam_config_pow2(s, &cfg, "BM", 512, d) || kfam_config_pow2(s, &cfg, "BN", 512, d) ||
        kfam_config_pow2(s, &cfg, "BK", 512, d) || kfam_config_pow2(s, &cfg, "WARPS", 32, d) ||
        kfam_config_pow2(s, &cfg, "SPLIT_K", 64, d))
        return d->status;
    int bm = (int)kir_config_get(&cfg, "BM", 0), bn = (int)kir_config_get(&cfg, "BN", 0);
    int bk = (int)kir_config_get(&cfg, "BK", 0), split = (int)kir_config_get(&cfg, "SPLIT_K", 1);
    int stages = (int)kir_config_get(&cfg, "STAGES", 1);
    if (stages < 1 || stages > 8)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "matmul: STAGES=%d is outside [1, 8]", stages);
    int inl = (int)kfam_spec_i(s, "ws", 0);
    if ((split > 1 || inl) && (two || group || gather || odt != dt))
        return ir_diag_set(
            d, IR_ERR_UNSUPPORTED,
            "matmul: silu_mul, pair, group, gathered rows and f32 output have no split-K form");
    if (kfam_mm_splitk_check("matmul", N, inl, split, bm, 16, bn, 1, d)) return d->status;
    if (group && (gather || N % bn || n2 % bn))
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "matmul: epilogue group needs BN=%d to divide N and N2",
                           bn);
    if (split > kfam_cdiv(K, bk))
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "matmul: SPLIT_K=%d exceeds the %lld K blocks", split,
                           (long long)kfam_cdiv(K, bk));
    int64_t ks = kfam_cdiv(kfam_cdiv(K, split), bk) * bk;

    KirKernel *k;
    KirBuilder b;
    if (kfam_kernel_begin(a, s, &cfg, &k, &b, d)) return d->status;
    KirValue *x = kir_param(&b, "x", kir_ptr(dt), KIR_PARAM_RDONLY);
    KirValue *w = kir_param(&b, "w", kir_ptr(dt), KIR_PARAM_RDONLY);
    KirValue *w2 = NULL, *bias = NULL, *r = NULL, *dst = NULL, *dst2 = NULL, *ws = NULL, *sem = NULL;
    KirValue *rows = NULL;
    KirValue *gw[3] = {w, NULL, NULL}, *gdst[3] = {NULL, NULL, NULL};
    if (group) {
        gw[1] = kir_param(&b, "w2", kir_ptr(dt), KIR_PARAM_RDONLY);
        if (n3) gw[2] = kir_param(&b, "w3", kir_ptr(dt), KIR_PARAM_RDONLY);
        gdst[0] = kir_param(&b, "out", kir_ptr(odt), 0);
        gdst[1] = kir_param(&b, "out2", kir_ptr(odt), 0);
        if (n3) gdst[2] = kir_param(&b, "out3", kir_ptr(odt), 0);
    } else if (split > 1 && !inl) {
        ws = kir_param(&b, "ws", kir_ptr(KIR_F32), 0);
    } else {
        if (two) w2 = kir_param(&b, "w2", kir_ptr(dt), KIR_PARAM_RDONLY);
        if (epi == KFAM_EPI_BIAS) bias = kir_param(&b, "bias", kir_ptr(dt), KIR_PARAM_RDONLY);
        if (gather) rows = kir_param(&b, "rows", kir_ptr(KIR_I32), KIR_PARAM_RDONLY | KIR_PARAM_NOALIAS);
        if (epi == KFAM_EPI_RESIDUAL) r = kir_param(&b, "r", kir_ptr(dt), 0);
        dst = kir_param(&b, "out", kir_ptr(odt), 0);
        if (epi == KFAM_EPI_PAIR) dst2 = kir_param(&b, "out2", kir_ptr(odt), 0);
        if (inl) {
            ws = kir_param(&b, "ws", kir_ptr(KIR_F32), 0);
            sem = kir_param(&b, "sem", kir_ptr(KIR_I32), 0);
        }
    }
    KfamMmTiles t;
    /* group: the grid spans the three products' column tiles */
    int64_t grid_n = group ? N + n2 + kfam_cdiv(n3, bn) * bn : N;
    kfam_mm_tiles(&b, kir_param(&b, "M", kir_scalar(KIR_I32), 0), grid_n, K, bm, bn, bk, split, &t);
    if (group) group_select(&b, (const KirValue *const *)gw, gdst, N, n2, n3, bn, &t, &w, &dst);
    KirValue *cK = t.cK, *cN = t.cN, *rm = t.rm, *rn = t.rn, *rk = t.rk, *mmask = t.mmask, *nmask = t.nmask;
    /* gathered: A's row m is x[rows[m]] (the logits of selected tokens); out row m stays m */
    KirValue *arow = rows ? kir_load(&b, rows, rm, mmask, kir_const_i32(&b, 0)) : rm;
    KirValue *a_base = kfam_outer(&b, KIR_OP_ADD, kir_mul(&b, arow, cK), rk); /* [BM,BK] */
    KirValue *b_base = kfam_outer(&b, KIR_OP_ADD, rk, kir_mul(&b, rn, cK));   /* [BK,BN] */
    KirValue *a_mask = kfam_rows(&b, mmask, bk);                              /* [BM,BK] */
    KirValue *b_mask = nmask ? kfam_cols(&b, nmask, bk) : NULL;               /* [BK,BN] */
    KirValue *lo, *hi;
    kfam_mm_k_range(&b, &t, split, ks, &lo, &hi);
    int shape[2] = {bm, bn};
    KirValue *zero = kir_const_f(&b, dt, 0);
    KirValue *inits[2] = {kir_splat(&b, kir_const_f(&b, KIR_F32, 0), 2, shape), NULL};
    int n_acc = 1;
    if (w2) inits[n_acc++] = kir_splat(&b, kir_const_f(&b, KIR_F32, 0), 2, shape);

    KirBlock *body = kir_for_begin(&b, lo, hi, kir_const_i32(&b, bk), inits, n_acc, stages > 1 ? stages : 0);
    KirValue *kk = body->args[0];
    KirValue *am = a_mask, *bmk = b_mask;
    kfam_mm_k_tail(&b, &t, K, bm, bn, bk, kk, &am, &bmk, 0);
    KirValue *at = kir_load(&b, x, kir_add(&b, a_base, kk), am, zero);
    KirValue *b_offs = kir_add(&b, b_base, kk);
    KirValue *bt = kir_load(&b, w, b_offs, bmk, bmk ? zero : NULL);
    KirValue *yields[2] = {kir_dot(&b, at, bt, body->args[1]), NULL};
    if (w2) yields[1] = kir_dot(&b, at, kir_load(&b, w2, b_offs, bmk, bmk ? zero : NULL), body->args[2]);
    KirInst *loop = kir_for_end(&b, yields, n_acc);

    KirValue *c_offs = kfam_outer(&b, KIR_OP_ADD, kir_mul(&b, rm, cN), rn);
    KirValue *c_mask = kfam_outer_mask(&b, mmask, nmask, bm, bn);
    KirValue *acc = loop->res[0];
    if (split > 1 && !inl) {
        kir_atomic_add(&b, ws, c_offs, acc, c_mask);
        return kfam_kernel_end(&b, out);
    }
    if (split > 1) kfam_mm_splitk_sum(&b, &acc, 1, ws, sem, N, bn, split, c_offs, &c_mask);
    kfam_matmul_epilogue(&b, epi, dt, odt, acc, w2 ? loop->res[1] : NULL, bias, r, dst, dst2, rn, nmask,
                         c_offs, c_mask, 0);
    return kfam_kernel_end(&b, out);
}

void kfam_mm_tiles(KirBuilder *b, KirValue *M, int64_t N, int64_t K, int bm, int bn, int bk, int split,
                   KfamMmTiles *t)
{
    kir_grid(b, 0, M, 1, bm);
    kir_grid_const(b, 1, kfam_cdiv(N, bn));
    kir_grid_const(b, 2, split);
    t->cK = kir_const_i32(b, K), t->cN = kir_const_i32(b, N);
    t->rm = kir_add(b, kir_mul(b, kir_pid(b, 0), kir_const_i32(b, bm)), kir_arange(b, bm));
    t->rn = kir_add(b, kir_mul(b, kir_pid(b, 1), kir_const_i32(b, bn)), kir_arange(b, bn));
    t->rk = kir_arange(b, bk);
    t->mmask = kir_lt(b, t->rm, M);
    t->nmask = N % bn ? kir_lt(b, t->rn, t->cN) : NULL;
}

IrStatus kfam_mm_splitk_check(const char *family, int64_t N, int inl, int split, int bm, int min_bm, int bn,
                              int n_acc, IrDiag *d)
{
    if (inl && KFAM_SPLITK_WS(N) > KFAM_MAX_I32_OFFSET)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "%s: ws=1 needs N <= %lld", family,
                           KFAM_MAX_I32_OFFSET / KFAM_SPLITK_WS(1));
    if (inl && split > 1 &&
        (bm > KFAM_SPLITK_ROWS || bm < min_bm || bn < 16 || n_acc * split > KFAM_SPLITK_MAX ||
         kfam_cdiv(KFAM_SPLITK_ROWS, bm) * kfam_cdiv(N, bn) > KFAM_SPLITK_SEMS(N)))
        return ir_diag_set(
            d, IR_ERR_UNSUPPORTED,
            "%s: split-K in the launch needs %d <= BM <= %d, BN >= 16 (BM 8: N / BN tiles within "
            "the tile counters), SPLIT_K <= %d",
            family, min_bm, KFAM_SPLITK_ROWS, KFAM_SPLITK_MAX / n_acc);
    return IR_OK;
}

void kfam_mm_splitk_sum(KirBuilder *b, KirValue **accs, int n_acc, KirValue *ws, KirValue *sem, int64_t N,
                        int bn, int split, KirValue *c_offs, KirValue **c_mask)
{
    int shape[2] = {accs[0]->type.shape[0], accs[0]->type.shape[1]};
    KirValue *slice = kir_const_i32(b, (int)(KFAM_SPLITK_ROWS * N));
    for (int j = 0; j < n_acc; j++) { /* accumulator j's partial in slice z + j * SPLIT_K */
        KirValue *z = j ? kir_add(b, kir_pid(b, 2), kir_const_i32(b, j * split)) : kir_pid(b, 2);
        kir_store(b, ws, kir_add(b, c_offs, kir_mul(b, z, slice)), accs[j], *c_mask);
    }
    KirValue *tile =
        kir_add(b, kir_mul(b, kir_pid(b, 0), kir_const_i32(b, (int)kfam_cdiv(N, bn))), kir_pid(b, 1));
    KirValue *last = kir_binary(b, KIR_OP_EQ, kir_arrive(b, sem, tile), kir_const_i32(b, split - 1));
    KirValue *lmask = kir_splat(b, last, 2, shape);
    *c_mask = *c_mask ? kir_binary(b, KIR_OP_AND, *c_mask, lmask) : lmask;
    KirValue *f0 = kir_const_f(b, KIR_F32, 0);
    for (int j = 0; j < n_acc; j++) {
        KirValue *sum = NULL;
        for (int z = j * split; z < (j + 1) * split; z++) {
            KirValue *o = z ? kir_add(b, c_offs, kir_const_i32(b, (int)(z * KFAM_SPLITK_ROWS * N))) : c_offs;
            KirValue *part = kir_load(b, ws, o, *c_mask, f0);
            sum = sum ? kir_add(b, sum, part) : part;
        }
        accs[j] = sum;
    }
    kir_store(b, sem, tile, kir_const_i32(b, 0), last);
}

void kfam_mm_k_range(KirBuilder *b, const KfamMmTiles *t, int split, int64_t ks, KirValue **lo, KirValue **hi)
{
    *lo = kir_const_i32(b, 0), *hi = t->cK;
    if (split > 1) {
        *lo = kir_mul(b, kir_pid(b, 2), kir_const_i32(b, ks));
        *hi = kir_binary(b, KIR_OP_MIN, kir_add(b, *lo, kir_const_i32(b, ks)), t->cK);
    }
}

void kfam_mm_k_tail(KirBuilder *b, const KfamMmTiles *t, int64_t K, int bm, int bn, int bk, KirValue *kk,
                    KirValue **am, KirValue **bmk, int trans)
{
    if (!(K % bk)) return;
    KirValue *kmask = kir_lt(b, kir_add(b, t->rk, kk), t->cK);
    *am = kir_binary(b, KIR_OP_AND, *am, trans ? kfam_rows(b, kmask, bm) : kfam_cols(b, kmask, bm));
    *bmk = kfam_and(b, trans ? kfam_cols(b, kmask, bn) : kfam_rows(b, kmask, bn), *bmk);
}

const KfamFamily kfam_matmul = {
    .name = "matmul",
    .n_space = 6,
    .space = {{"BM", 5, {16, 32, 64, 128, 256}},
              {"BN", 5, {16, 32, 64, 128, 256}},
              {"BK", 5, {16, 32, 64, 128, 256}},
              {"WARPS", 3, {2, 4, 8}},
              {"STAGES", 4, {1, 2, 3, 4}},
              {"SPLIT_K", 4, {1, 2, 4, 8}}},
    .defaults = matmul_defaults,
    .build = matmul_build,
};

/* ---- split-K epilogue ---- */

static void splitk_defaults(const KfamSpec *s, const KfamFacts *facts, KirConfig *cfg)
{
    int64_t block = kfam_clamp(kfam_pow2_ceil(kfam_spec_i(s, "N", 4096)), 32, 1024);
    kir_config_set(cfg, "BLOCK", block);
    kir_config_set(cfg, "WARPS", kfam_clamp(block / 256, 1, 4));
}

static IrStatus splitk_build(IrArena *a, const KfamSpec *s, const KfamFacts *facts, const KirConfig *given,
                             KirKernel **out, IrDiag *d)
{
    int64_t N;
    KirDtype dt;
    KirConfig cfg;
    if (kfam_spec_need(s, "N", 1, 1 << 24, &N, d) || kfam_spec_dtype(s, &dt, d)) return d->status;
    int epi = kfam_epilogue_of(s);
    if (epi < 0 || kfam_epilogue_two_weights(epi) || epi == KFAM_EPI_GROUP)
        return ir_diag_set(d, IR_ERR_INPUT,
                           "matmul_splitk_epilogue: epilogue must be none, bias or residual");
    kfam_config_merge(&kfam_matmul_splitk_epilogue, s, facts, given, &cfg);
    if (kfam_config_pow2(s, &cfg, "BLOCK", 1 << 16, d) || kfam_config_pow2(s, &cfg, "WARPS", 32, d))
        return d->status;
    int block = (int)kir_config_get(&cfg, "BLOCK", 0);

    KirKernel *k;
    KirBuilder b;
    if (kfam_kernel_begin(a, s, &cfg, &k, &b, d)) return d->status;
    KirValue *ws = kir_param(&b, "ws", kir_ptr(KIR_F32), KIR_PARAM_RDONLY);
    KirValue *bias = epi == KFAM_EPI_BIAS ? kir_param(&b, "bias", kir_ptr(dt), KIR_PARAM_RDONLY) : NULL;
    KirValue *r = epi == KFAM_EPI_RESIDUAL ? kir_param(&b, "r", kir_ptr(dt), 0) : NULL;
    KirValue *dst = kir_param(&b, "out", kir_ptr(dt), 0);
    KirValue *M = kir_param(&b, "M", kir_scalar(KIR_I32), 0);
    kir_grid(&b, 0, M, 1, 1);
    kir_grid_const(&b, 1, kfam_cdiv(N, block));

    KirValue *cN = kir_const_i32(&b, N);
    KirValue *cols =
        kir_add(&b, kir_mul(&b, kir_pid(&b, 1), kir_const_i32(&b, block)), kir_arange(&b, block));
    KirValue *nmask = N % block ? kir_lt(&b, cols, cN) : NULL;
    /* one row as a [1, BLOCK] tile, so the epilogue is the matmul's own */
    KirValue *offs = kir_expand(&b, kir_add(&b, kir_mul(&b, kir_pid(&b, 0), cN), cols), 0);
    KirValue *mask = nmask ? kir_expand(&b, nmask, 0) : NULL;
    KirValue *acc = kir_load(&b, ws, offs, mask, mask ? kir_const_f(&b, KIR_F32, 0) : NULL);
    kfam_matmul_epilogue(&b, epi, dt, dt, acc, NULL, bias, r, dst, NULL, cols, nmask, offs, mask, 0);
    return kfam_kernel_end(&b, out);
}

const KfamFamily kfam_matmul_splitk_epilogue = {
    .name = "matmul_splitk_epilogue",
    .n_space = 2,
    .space = {{"BLOCK", 6, {32, 64, 128, 256, 512, 1024}}, {"WARPS", 4, {1, 2, 4, 8}}},
    .defaults = splitk_defaults,
    .build = splitk_build,
};
