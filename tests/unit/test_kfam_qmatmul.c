/* test_kfam_qmatmul.c — the weight-only quantized matmul (qmatmul) on every executor against a float64
 * reference that dequantizes the same bytes (kref_qdequant) and then multiplies (kref_qmatmul):
 *   - the reference's GGUF dequantization is bit-identical to rt_gguf_dequant on random blocks (every byte
 *     random: any half, NaN only where rt_gguf_dequant gives NaN);
 *   - the kernels' dequantization is exact: with x the identity (M = K) and epilogue none, out[m, n] is
 *     dtype(w[n, m]), compared bit for bit, with scales over the whole finite half range (subnormal,
 *     zero, negative, large) and configs whose BK spans several groups and K tails;
 *   - a sweep: every format (w4a16 with groups 32/64/128 and with or without zeros, w8a16, fp8 with
 *     per-channel, per-tensor and 32- or 128-wide block scales, q4_0, q4_1, q8_0, q4_k, q6_k; W8A8: fp8 and
 * int8 activations with row scales), bf16, f16 and f32, every epilogue, M and N no tile divides, K a multiple
 * of the group (w8a16, fp8: odd K), configs across tile sizes, warps, stages and split-K (then
 * matmul_splitk_epilogue), with outputs poisoned; relative L2 within kref_tol; epilogue pair's two outputs
 * also bit for bit equal to two epilogue-none launches of the same config, one per weight;
 *   - the host target's own tiles (BM 1, 16, 128: a package's host binaries) for every format;
 *   - the default kernels of model shapes compile with NVRTC for sm_90a (skipped without NVRTC).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg.h"
#include "codegen/cg_target.h"
#include "codegen/cuda/cg_cuda.h"
#include "kfacts.h"
#include "kref.h"
#include "ksweep.h"
#include "kt.h"
#include "runtime/rt_gguf.h"

typedef struct Fmt {
    const char *wfmt;
    int group, zeros; /* w4a16 only */
    int tensor;       /* fp8 only: one scale for the tensor */
    const char *act;  /* W8A8: "fp8" (wfmt fp8) or "int8" (w8a16): x quantized per row; else NULL */
    int f16s;         /* w4a16: f16 scales (spec sdtype=f16, as packages keep them) instead of the dtype */
} Fmt;

static const Fmt fmts[] = {
    {"w4a16", 32, 0, 0, NULL, 0},  {"w4a16", 64, 1, 0, NULL, 0}, {"w4a16", 128, 0, 0, NULL, 0},
    {"w4a16", 128, 1, 0, NULL, 0}, {"w8a16", 0, 0, 0, NULL, 0},  {"fp8", 0, 0, 0, NULL, 0},
    {"fp8", 0, 0, 1, NULL, 0},     {"q4_0", 0, 0, 0, NULL, 0},   {"q4_1", 0, 0, 0, NULL, 0},
    {"q8_0", 0, 0, 0, NULL, 0},    {"fp8", 0, 0, 0, "fp8", 0},   {"fp8", 0, 0, 1, "fp8", 0},
    {"w8a16", 0, 0, 0, "int8", 0}, {"fp8", 128, 0, 0, NULL, 0},  {"fp8", 32, 0, 0, NULL, 0},
    {"w4a16", 128, 1, 0, NULL, 1}, {"q4_k", 0, 0, 0, NULL, 0},   {"q6_k", 0, 0, 0, NULL, 0},
};

/* The scales' dtype of format f with activations dt (w4a16, w8a16). */
static KirDtype scale_dt(const Fmt *f, KirDtype dt)
{
    return f->f16s ? KIR_F16 : dt;
}

/* The activations' dtype in memory: dt, or W8A8's 8-bit codes. */
static KirDtype act_dtype(const Fmt *f, KirDtype dt)
{
    return !f->act ? dt : !strcmp(f->act, "fp8") ? KIR_F8E4M3 : KIR_I8;
}

/* Formats whose scale multiplies a whole row's sum (any K); fp8 with a group is block-scaled. */
static int per_row(const Fmt *f)
{
    return (!strcmp(f->wfmt, "w8a16") || !strcmp(f->wfmt, "fp8")) && !f->group;
}
static const KirDtype dtypes[] = {KIR_BF16, KIR_F16, KIR_F32};
static const char *const epilogues[] = {"none", "residual", "bias", "silu_mul", "pair"};
enum { N_EPI = sizeof epilogues / sizeof epilogues[0] };

/* The GGUF block formats and their files' types. */
static const struct {
    const char *wfmt;
    RtGgufType type;
} gguf_types[] = {{"q4_0", RT_GGUF_TYPE_Q4_0},
                  {"q4_1", RT_GGUF_TYPE_Q4_1},
                  {"q8_0", RT_GGUF_TYPE_Q8_0},
                  {"q4_k", RT_GGUF_TYPE_Q4_K},
                  {"q6_k", RT_GGUF_TYPE_Q6_K}};
enum { N_GGUF = sizeof gguf_types / sizeof gguf_types[0] };

/* Elements (*block) and bytes (*bytes) per block of GGUF format wfmt, from the reader's table
 * (test_weights.c checks it against gguf-py); 0 for a format that is not GGUF's. */
static int gguf_block(const char *wfmt, int *block, int *bytes)
{
    *block = 1, *bytes = 0;
    for (int i = 0; i < N_GGUF; i++)
        if (!strcmp(wfmt, gguf_types[i].wfmt)) return rt_gguf_type_block(gguf_types[i].type, block, bytes);
    return 0;
}

/* GGUF's K-quants (super-blocks of 256). */
static int kquant(const Fmt *f)
{
    return !strcmp(f->wfmt, "q4_k") || !strcmp(f->wfmt, "q6_k");
}

/* Elements along K per scale for the shapes: the group, a GGUF block, or 32 for w8a16 and fp8. */
static int group_of(const Fmt *f)
{
    int block, bytes;
    return f->group ? f->group : gguf_block(f->wfmt, &block, &bytes) ? block : 32;
}

static int gguf_bytes(const Fmt *f)
{
    int block, bytes;
    KT_CHECK(gguf_block(f->wfmt, &block, &bytes), "%s: no GGUF block size", f->wfmt);
    return bytes;
}

/* One quantized weight: its buffers as the kernel takes them and its dequantized f32 values [N, K]. */
typedef struct QW {
    void *w, *scales;
    uint8_t *zeros;
    size_t w_bytes, s_bytes, z_bytes;
    float *deq;
    const void *chan; /* the per-row scales [N] of dtype chan_t (w8a16, fp8 expanded), else NULL */
    KirDtype chan_t;
    float *chan_f32; /* fp8: the expansion */
} QW;

/* Any finite half whose biased exponent is at most e (subnormals and zeros included). */
static uint16_t rand_half_exp(KrefRng *g, int e)
{
    uint16_t h;
    do
        h = (uint16_t)kref_next(g);
    while (((h >> 10) & 31) > e);
    return h;
}

/* A random half: |v| in [lo, hi) with a random sign, or (wild) any finite half below 512 (q * d then
 * stays finite in f16). */
static uint16_t rand_half(KrefRng *g, double lo, double hi, int wild)
{
    if (wild) return rand_half_exp(g, 23);
    double v = kref_uniform(g, lo, hi);
    return kref_f32_to_f16((float)(kref_next(g) & 1 ? -v : v));
}

/* fp8 weights: nk random e4m3 codes (any byte but the two NaNs) and ns f32 scales (wild: 2^-20 .. 2^5). */
static void fp8_fill(KrefRng *g, QW *qw, size_t nk, size_t ns, int wild)
{
    qw->w = malloc(nk);
    qw->scales = malloc(sizeof(float) * ns);
    if (!qw->w || !qw->scales) abort();
    for (size_t i = 0; i < nk; i++) {
        uint8_t b;
        do
            b = (uint8_t)kref_next(g);
        while ((b & 0x7f) == 0x7f);
        ((uint8_t *)qw->w)[i] = b;
    }
    for (size_t i = 0; i < ns; i++) {
        double s = wild ? ldexp(kref_uniform(g, 1, 2), (int)(kref_next(g) % 25) - 20)
                        : kref_uniform(g, 0.0005, 0.004);
        ((float *)qw->scales)[i] = (float)(kref_next(g) & 1 ? -s : s);
    }
}

/* Fills qw for format f, dtype dt and [N, K] with random quants and scales that keep |w| around 1
 * (wild: scales over the whole finite half range, for the exactness test). */
static void qw_make(KrefRng *g, QW *qw, const Fmt *f, KirDtype dt, int N, int K, int wild)
{
    memset(qw, 0, sizeof *qw);
    size_t nk = (size_t)N * K;
    if (!strcmp(f->wfmt, "w4a16")) {
        size_t ng = (size_t)N * (K / f->group);
        qw->w_bytes = nk / 2;
        qw->s_bytes = kref_bytes(scale_dt(f, dt), ng);
        qw->w = malloc(qw->w_bytes);
        qw->scales = kref_alloc(scale_dt(f, dt), ng);
        for (size_t i = 0; i < nk / 8; i++)
            ((uint32_t *)qw->w)[i] = (uint32_t)kref_next(g);
        /* wild: over the scales' finite range (bf16: down to its subnormals, so products are subnormal) */
        int span = scale_dt(f, dt) == KIR_BF16 ? 150 : 40, low = scale_dt(f, dt) == KIR_BF16 ? 133 : 30;
        for (size_t i = 0; i < ng; i++) {
            double s = wild ? ldexp(kref_uniform(g, 1, 2), (int)(kref_next(g) % span) - low)
                            : kref_uniform(g, 0.02, 0.15);
            kref_set(qw->scales, scale_dt(f, dt), i, kref_next(g) & 1 ? -s : s);
        }
        if (f->zeros) {
            qw->z_bytes = ng;
            qw->zeros = malloc(ng);
            for (size_t i = 0; i < ng; i++)
                /* wild bf16: every byte (f16 would overflow to inf, and x = I would make 0 * inf) */
                qw->zeros[i] = (uint8_t)(kref_next(g) % (wild && dt == KIR_BF16 ? 256 : 16));
        }
    } else if (!strcmp(f->wfmt, "fp8") && f->group) { /* block-scaled: f32 scales [N, K/G] in the dequant */
        size_t ng = (size_t)N * (K / f->group);
        qw->w_bytes = nk;
        qw->s_bytes = sizeof(float) * ng;
        fp8_fill(g, qw, nk, ng, wild);
    } else if (!strcmp(f->wfmt, "fp8")) { /* any byte but the two NaNs; f32 scales */
        int ns = f->tensor ? 1 : N;
        qw->w_bytes = nk;
        qw->s_bytes = sizeof(float) * (size_t)ns;
        fp8_fill(g, qw, nk, (size_t)ns, wild);
        qw->chan_f32 = malloc(sizeof(float) * (size_t)N);
        if (!qw->chan_f32) abort();
        for (int i = 0; i < N; i++)
            qw->chan_f32[i] = ((float *)qw->scales)[f->tensor ? 0 : i];
        qw->chan = qw->chan_f32;
        qw->chan_t = KIR_F32;
    } else if (!strcmp(f->wfmt, "w8a16")) {
        qw->w_bytes = nk;
        qw->s_bytes = kref_bytes(dt, (size_t)N);
        qw->w = malloc(nk);
        qw->scales = kref_alloc(dt, (size_t)N);
        for (size_t i = 0; i < nk; i++)
            ((uint8_t *)qw->w)[i] = (uint8_t)kref_next(g);
        for (int i = 0; i < N; i++) {
            double s = wild ? ldexp(kref_uniform(g, 1, 2), (int)(kref_next(g) % 26) - 20)
                            : kref_uniform(g, 0.002, 0.015);
            kref_set(qw->scales, dt, (size_t)i, kref_next(g) & 1 ? -s : s);
        }
        qw->chan = qw->scales;
        qw->chan_t = dt;
    } else {
        int bytes = gguf_bytes(f), q4_1 = !strcmp(f->wfmt, "q4_1"), q4_k = !strcmp(f->wfmt, "q4_k");
        int q6_k = !strcmp(f->wfmt, "q6_k");
        size_t nb = nk / (size_t)group_of(f);
        qw->w_bytes = nb * (size_t)bytes;
        qw->w = malloc(qw->w_bytes);
        unsigned char *p = qw->w;
        for (size_t i = 0; i < qw->w_bytes; i++)
            p[i] = (unsigned char)kref_next(g);
        for (size_t b = 0; b < nb; b++) {
            unsigned char *blk = p + b * (size_t)bytes;
            /* d (q4_k: times a 6-bit scale and a nibble; q6_k: an i8 scale and a 6-bit q - 32) keeps |w|
             * around 1 */
            double lo = bytes == 34 ? 0.002 : q4_k ? 0.0005 : q6_k ? 0.0001 : 0.02;
            double hi = bytes == 34 ? 0.015 : q4_k ? 0.003 : q6_k ? 0.0005 : 0.15;
            /* wild K-quants: d below 32 (q4_k: d * 63 * 15 + dmin * 63) or 8 (q6_k: d * 128 * 32), so the
             * values stay finite in f16 (x = I: an infinite weight times 0 would be NaN) */
            uint16_t d =
                wild && (q4_k || q6_k) ? rand_half_exp(g, q4_k ? 19 : 17) : rand_half(g, lo, hi, wild);
            blk[q6_k ? 208 : 0] = (unsigned char)d;
            blk[q6_k ? 209 : 1] = (unsigned char)(d >> 8);
            if (q4_1 || q4_k) { /* m; q4_k: dmin, times a 6-bit min */
                uint16_t m = wild && q4_k ? rand_half_exp(g, 19) : rand_half(g, 0, q4_k ? 0.003 : 1, wild);
                blk[2] = (unsigned char)m;
                blk[3] = (unsigned char)(m >> 8);
            }
        }
    }
    if (!qw->w) abort();
    qw->deq = malloc(sizeof(float) * nk);
    if (!qw->deq) abort();
    const void *sc = qw->scales;
    KirDtype st = scale_dt(f, dt);
    void *sb = NULL;
    if (f->f16s && dt == KIR_BF16) { /* the kernel rounds f16 scales to bf16 first (docs/KERNELS.md) */
        size_t ng = (size_t)N * (K / f->group);
        sc = sb = kref_alloc(KIR_BF16, ng);
        st = KIR_BF16;
        for (size_t i = 0; i < ng; i++)
            kref_set(sb, KIR_BF16, i, kref_get(qw->scales, KIR_F16, i));
    }
    kref_qdequant(f->wfmt, qw->w, sc, qw->zeros, st, N, K, f->group, qw->deq);
    free(sb);
}

static void qw_free(QW *qw)
{
    free(qw->w);
    free(qw->scales);
    free(qw->zeros);
    free(qw->deq);
    free(qw->chan_f32);
}

/* Appends qw's kernel arguments (w, [scales], [zeros]). */
static int qw_args(const QW *qw, KRunArg *args, int n)
{
    args[n++] = (KRunArg){qw->w, qw->w_bytes, 0, 0};
    if (qw->scales) args[n++] = (KRunArg){qw->scales, qw->s_bytes, 0, 0};
    if (qw->zeros) args[n++] = (KRunArg){qw->zeros, qw->z_bytes, 0, 0};
    return n;
}

static KfamSpec spec_of(const Fmt *f, KirDtype dt, int N, int K, const char *epi)
{
    KfamSpec s = kfam_spec("qmatmul");
    kfam_spec_int(&s, "N", N);
    kfam_spec_int(&s, "K", K);
    kfam_spec_str(&s, "dtype", kir_dtype_name(dt));
    kfam_spec_str(&s, "wfmt", f->wfmt);
    if (f->group) kfam_spec_int(&s, "group", f->group);
    if (f->zeros) kfam_spec_int(&s, "zeros", 1);
    if (f->f16s) kfam_spec_str(&s, "sdtype", "f16");
    if (f->tensor) kfam_spec_str(&s, "scale", "tensor");
    if (f->act) kfam_spec_str(&s, "act", f->act);
    kfam_spec_str(&s, "epilogue", epi);
    return s;
}

/* ---- the reference's GGUF dequantization vs the runtime's ---- */

static void gguf_reference(KrefRng *g)
{
    enum { N = 7, K = 32 * 40 };
    for (unsigned t = 0; t < N_GGUF; t++) {
        int block, block_bytes;
        KT_CHECK(gguf_block(gguf_types[t].wfmt, &block, &block_bytes), "%s: no block size",
                 gguf_types[t].wfmt);
        size_t bytes = (size_t)N * (K / block) * block_bytes;
        unsigned char *w = malloc(bytes);
        float *want = malloc(sizeof(float) * N * K), *got = malloc(sizeof(float) * N * K);
        if (!w || !want || !got) abort();
        int bad = 0, nans = 0;
        for (int rep = 0; rep < 20; rep++) {
            for (size_t i = 0; i < bytes; i++)
                w[i] = (unsigned char)kref_next(g);
            KT_CHECK(rt_gguf_dequant(gguf_types[t].type, w, (int64_t)N * K, want) == KILN_OK,
                     "rt_gguf_dequant");
            kref_qdequant(gguf_types[t].wfmt, w, NULL, NULL, KIR_BF16, N, K, 0, got);
            for (int i = 0; i < N * K; i++) {
                nans += isnan(want[i]);
                bad += isnan(want[i]) ? !isnan(got[i]) : memcmp(&want[i], &got[i], sizeof(float)) != 0;
            }
        }
        KT_CHECK(bad == 0 && nans > 0, "kref_qdequant %s vs rt_gguf_dequant: %d of %d differ (%d NaN)",
                 gguf_types[t].wfmt, bad, 20 * N * K, nans);
        free(w);
        free(want);
        free(got);
    }
}

/* ---- exact dequantization: x = I ---- */

static void exact(const KRunner *r, KrefRng *g)
{
    for (unsigned fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++)
        for (int di = 0; di < 2; di++) {
            const Fmt *f = &fmts[fi];
            KirDtype dt = dtypes[di];
            if (f->act || !ksweep_mine()) continue; /* W8A8: the weights' dequantization is its twin's */
            int G = group_of(f), K = G == 128 ? 2 * G : 3 * G, N = 37, BK = G >= 128 ? 256 : 128;
            if (per_row(f)) K = 80;
            QW qw;
            qw_make(g, &qw, f, dt, N, K, 1);
            void *x = kref_alloc(dt, (size_t)K * K), *out = kref_alloc(dt, (size_t)K * N);
            for (int i = 0; i < K * K; i++)
                kref_set(x, dt, (size_t)i, i % (K + 1) == 0);
            /* SWAP=1 dequantizes in the A fragments (CUDA: w4a16 in b16 pairs, cg_cuda_nib.c), on mma.sync
             * (2 warps) and on wgmma (8 warps, 128 rows) */
            KirConfig cfgs[4] = {ksweep_cfg(0),
                                 ksweep_cfg(6, "BM", 16, "BN", 32, "BK", BK, "WARPS", G == 256 ? 8 : 4,
                                            "STAGES", 2, "SPLIT_K", 1),
                                 ksweep_cfg(7, "BM", 16, "BN", G == 256 ? 16 : 32, "BK", BK, "WARPS", 2,
                                            "STAGES", 3, "SPLIT_K", 1, "SWAP", 1),
                                 ksweep_cfg(7, "BM", 16, "BN", 128, "BK", G == 256 ? 256 : 128, "WARPS", 8,
                                            "STAGES", 2, "SPLIT_K", 1, "SWAP", 1)};
            for (int c = 0; c < 4; c++) {
                if (c == 3 && !strcmp(r->name, "host")) continue; /* a CUDA form; the host JIT's budget */
                if (c && G == 256 && ksweep_big(r)) continue;     /* the K-quants: their JIT is slow */
                IrArena *a = ir_arena_create();
                KfamSpec s = spec_of(f, dt, N, K, "none");
                KirKernel *k = ksweep_build(r, a, &s, &cfgs[c]);
                KRunArg args[8];
                int n = 0;
                args[n++] = (KRunArg){x, kref_bytes(dt, (size_t)K * K), 0, 0};
                n = qw_args(&qw, args, n);
                args[n++] = (KRunArg){out, kref_bytes(dt, (size_t)K * N), 0, 0};
                args[n++] = (KRunArg){NULL, 0, K, 0};
                kref_poison(out, kref_bytes(dt, (size_t)K * N));
                if (k && ksweep_run(r, k, args) > 0) {
                    int bad = 0;
                    for (int m = 0; m < K; m++)
                        for (int nn = 0; nn < N; nn++) {
                            double w = qw.deq[(size_t)nn * K + m];
                            if (qw.chan) /* the kernel's f32 product acc * s */
                                w = (float)((float)w * (float)kref_get(qw.chan, qw.chan_t, (size_t)nn));
                            double got = kref_get(out, dt, (size_t)m * N + nn), want = kref_round(w, dt);
                            if (!(got == want) && bad++ < 3)
                                fprintf(stderr, "  w[%d,%d]: got %.9g want %.9g\n", nn, m, got, want);
                        }
                    ksweep_check(r, k, bad == 0,
                                 "qmatmul %s g%d z%d%s %s identity (exact dequant): %d of %d differ", f->wfmt,
                                 f->group, f->zeros, f->f16s ? " f16-scales" : "", kir_dtype_name(dt), bad,
                                 K * N);
                }
                ir_arena_destroy(a);
            }
            free(x);
            free(out);
            qw_free(&qw);
        }
}

/* ---- the sweep ---- */

typedef struct Case {
    const Fmt *f;
    KirDtype dt;
    int M, N, K;
    const char *epi;
    QW w, w2;
    void *x, *bias, *res, *out, *out2, *sep; /* sep: a separate epilogue-none output */
    float *xs;                               /* W8A8: x's row scales */
    float *ws;
    double *want, *want2; /* want2: pair's second output */
    int inl;              /* spec ws=1: split-K reduced in the launch (ws, sem after out) */
    int host;             /* the configs are the host target's own tiles: built with its facts */
} Case;

/* Appends the activation arguments: x [, xs]. */
static int x_args(const Case *c, KRunArg *args, int n)
{
    KirDtype xt = act_dtype(c->f, c->dt);
    args[n++] = (KRunArg){c->x, kref_bytes(xt, (size_t)c->M * c->K), 0, 0};
    if (xt != c->dt) args[n++] = (KRunArg){c->xs, sizeof(float) * (size_t)c->M, 0, 0};
    return n;
}

/* Split-K in the launch (ws=1): appends the workspace pair, the partial slices (poisoned) and the tile
 * counters (zero; the kernel leaves them zero), allocated into *ws and *sem for the caller to free. */
static int inl_args(const Case *c, float **ws, int32_t **sem, KRunArg *args, int n)
{
    size_t n_ws = (size_t)KFAM_SPLITK_WS(c->N), n_sem = (size_t)KFAM_SPLITK_SEMS(c->N);
    *ws = malloc(sizeof(float) * n_ws);
    *sem = calloc(n_sem, sizeof(int32_t));
    if (!*ws || !*sem) abort();
    kref_poison(*ws, sizeof(float) * n_ws);
    args[n++] = (KRunArg){*ws, sizeof(float) * n_ws, 0, 0};
    args[n++] = (KRunArg){*sem, sizeof(int32_t) * n_sem, 0, 0};
    return n;
}

/* Epilogue pair: each output equals, bit for bit, an epilogue-none launch of k's config with its weight. */
static void check_pair_bits(const KRunner *r, IrArena *a, const Case *c, const KirKernel *k)
{
    KfamSpec s = spec_of(c->f, c->dt, c->N, c->K, "none");
    if (c->inl) kfam_spec_int(&s, "ws", 1); /* the same split, summed in the same order */
    KirKernel *nk = c->host ? ksweep_build_host(r, a, &s, &k->cfg) : ksweep_build_always(r, a, &s, &k->cfg);
    size_t mn = kref_bytes(c->dt, (size_t)c->M * c->N);
    for (int i = 0; nk && i < 2; i++) {
        KRunArg args[8];
        int n = 0;
        float *iws = NULL;
        int32_t *sem = NULL;
        kref_poison(c->sep, mn);
        n = x_args(c, args, n);
        n = qw_args(i ? &c->w2 : &c->w, args, n);
        args[n++] = (KRunArg){c->sep, mn, 0, 0};
        if (c->inl) n = inl_args(c, &iws, &sem, args, n);
        args[n++] = (KRunArg){NULL, 0, c->M, 0};
        if (ksweep_run(r, nk, args) > 0)
            ksweep_check(r, k, !memcmp(c->sep, i ? c->out2 : c->out, mn),
                         "qmatmul pair %s g%d z%d %s M=%d N=%d K=%d: out%s differs from epilogue none's bits",
                         c->f->wfmt, c->f->group, c->f->zeros, kir_dtype_name(c->dt), c->M, c->N, c->K,
                         i ? "2" : "");
        free(iws);
        free(sem);
    }
}

static int ws_split_runs; /* launches of split-K reduced in the launch (ws=1, SPLIT_K > 1) that ran */

static void run_config(const KRunner *r, const Case *c, const KirConfig *cfg)
{
    IrArena *a = ir_arena_create();
    KirDtype dt = c->dt;
    KfamSpec s = spec_of(c->f, dt, c->N, c->K, c->epi);
    if (c->inl) kfam_spec_int(&s, "ws", 1);
    KirKernel *k = c->host ? ksweep_build_host(r, a, &s, cfg) : ksweep_build(r, a, &s, cfg), *ek = NULL;
    float *iws = NULL; /* ws=1: inl_args */
    int32_t *sem = NULL;
    size_t n_sem = c->inl ? (size_t)KFAM_SPLITK_SEMS(c->N) : 0;
    int split = (int)kir_config_get(cfg, "SPLIT_K", 1), pair = !strcmp(c->epi, "pair");
    int two = pair || !strcmp(c->epi, "silu_mul");
    int bias = !strcmp(c->epi, "bias"), resid = !strcmp(c->epi, "residual");
    size_t mn = (size_t)c->M * c->N;
    ksweep_check(r, k, !(two && split > 1 && !c->inl && k), "qmatmul %s SPLIT_K=%d built", c->epi, split);
    if (k && split > 1 && !c->inl) {
        KfamSpec es = kfam_spec("matmul_splitk_epilogue");
        kfam_spec_int(&es, "N", c->N);
        kfam_spec_str(&es, "dtype", kir_dtype_name(dt));
        kfam_spec_str(&es, "epilogue", c->epi);
        ek = ksweep_build(r, a, &es, NULL);
    }
    if (!k || (split > 1 && !c->inl && !ek)) goto done;
    kref_poison(c->out, kref_bytes(dt, mn));
    kref_poison(c->out2, kref_bytes(dt, mn));
    memset(c->ws, 0, sizeof(float) * mn);
    KRunArg args[12];
    int n = 0, ran;
    n = x_args(c, args, n);
    n = qw_args(&c->w, args, n);
    if (split > 1 && !c->inl) {
        args[n++] = (KRunArg){c->ws, sizeof(float) * mn, 0, 0};
    } else {
        if (two) n = qw_args(&c->w2, args, n);
        if (bias) args[n++] = (KRunArg){c->bias, kref_bytes(dt, (size_t)c->N), 0, 0};
        if (resid) args[n++] = (KRunArg){c->res, kref_bytes(dt, mn), 0, 0};
        args[n++] = (KRunArg){c->out, kref_bytes(dt, mn), 0, 0};
        if (pair) args[n++] = (KRunArg){c->out2, kref_bytes(dt, mn), 0, 0};
        if (c->inl) n = inl_args(c, &iws, &sem, args, n);
    }
    args[n++] = (KRunArg){NULL, 0, c->M, 0};
    ran = ksweep_run(r, k, args);
    if (ran > 0 && c->inl && split > 1) ws_split_runs++;
    for (size_t i = 0; ran > 0 && i < n_sem; i++)
        if (sem[i]) {
            ksweep_check(r, k, 0, "qmatmul ws=1 M=%d N=%d: tile counter %zu left %d", c->M, c->N, i,
                         (int)sem[i]);
            break;
        }
    if (ran > 0 && ek) {
        n = 0;
        args[n++] = (KRunArg){c->ws, sizeof(float) * mn, 0, 0};
        if (bias) args[n++] = (KRunArg){c->bias, kref_bytes(dt, (size_t)c->N), 0, 0};
        if (resid) args[n++] = (KRunArg){c->res, kref_bytes(dt, mn), 0, 0};
        args[n++] = (KRunArg){c->out, kref_bytes(dt, mn), 0, 0};
        args[n++] = (KRunArg){NULL, 0, c->M, 0};
        ran = ksweep_run(r, ek, args);
    }
    for (int o = 0; ran > 0 && o < 1 + pair; o++) {
        double *got = kref_to_double(o ? c->out2 : c->out, dt, mn);
        double err = kref_rel_l2(got, o ? c->want2 : c->want, mn);
        ksweep_margin(r, err / kref_tol(dt));
        ksweep_check(r, k, err < kref_tol(dt),
                     "qmatmul %s g%d z%d%s %s M=%d N=%d K=%d epilogue=%s%s: out%s rel-L2 %.3g", c->f->wfmt,
                     c->f->group, c->f->zeros, c->f->f16s ? " f16-scales" : "", kir_dtype_name(dt), c->M,
                     c->N, c->K, c->epi, c->inl ? " ws=1" : "", o ? "2" : "", err);
        free(got);
    }
    if (ran > 0 && pair) check_pair_bits(r, a, c, k);
done:
    free(iws);
    free(sem);
    ir_arena_destroy(a);
}

/* Runs c with configs cfgs[pick[i]], i < n_cfgs. */
static void run_case(const KRunner *r, KrefRng *g, Case c, const KirConfig *cfgs, const int *pick, int n_cfgs)
{
    KirDtype dt = c.dt;
    size_t mk = (size_t)c.M * c.K, mn = (size_t)c.M * c.N;
    int pair = !strcmp(c.epi, "pair"), two = pair || !strcmp(c.epi, "silu_mul");
    qw_make(g, &c.w, c.f, dt, c.N, c.K, 0);
    if (two) qw_make(g, &c.w2, c.f, dt, c.N, c.K, 0);
    KirDtype xt = act_dtype(c.f, dt);
    c.x = kref_alloc(xt, mk);
    c.xs = malloc(sizeof(float) * (size_t)c.M);
    if (!c.xs) abort();
    c.bias = kref_alloc(dt, (size_t)c.N);
    c.res = kref_alloc(dt, mn);
    c.out = kref_alloc(dt, mn);
    c.out2 = kref_alloc(dt, mn);
    c.sep = kref_alloc(dt, mn);
    c.ws = kref_alloc(KIR_F32, mn);
    c.want = malloc(sizeof(double) * mn);
    c.want2 = malloc(sizeof(double) * mn);
    if (xt == dt) {
        kref_fill(g, c.x, dt, mk, -1, 1);
    } else { /* 8-bit codes as quant_rows makes them: |q| <= 448 (no NaN) or 127, scales ~ amax / range */
        for (size_t i = 0; i < mk; i++) {
            uint8_t b = (uint8_t)kref_next(g);
            if (xt == KIR_I8) b = (uint8_t)(int8_t)((int)(kref_next(g) % 255) - 127);
            while (xt == KIR_F8E4M3 && (b & 0x7f) > 0x7e)
                b = (uint8_t)kref_next(g);
            ((uint8_t *)c.x)[i] = b;
        }
        for (int m = 0; m < c.M; m++)
            c.xs[m] = (float)kref_uniform(g, 1.0 / 448, 4.0 / 448) * (xt == KIR_I8 ? 448.0f / 127 : 1.0f);
    }
    kref_fill(g, c.bias, dt, (size_t)c.N, -1, 1);
    kref_fill(g, c.res, dt, mn, -2, 2);
    /* pair: two epilogue-none products */
    const float *xs = xt == dt ? NULL : c.xs;
    kref_qmatmul(c.x, xt, xs, c.w.deq, two && !pair ? c.w2.deq : NULL, c.w.chan,
                 two && !pair ? c.w2.chan : NULL, c.w.chan_t, c.bias, c.res, dt, c.M, c.N, c.K,
                 pair ? "none" : c.epi, c.want);
    if (pair)
        kref_qmatmul(c.x, xt, xs, c.w2.deq, NULL, c.w2.chan, NULL, c.w2.chan_t, NULL, NULL, dt, c.M, c.N, c.K,
                     "none", c.want2);
    for (int i = 0; i < n_cfgs; i++)
        run_config(r, &c, &cfgs[pick[i]]);
    qw_free(&c.w);
    if (two) qw_free(&c.w2);
    free(c.x);
    free(c.xs);
    free(c.bias);
    free(c.res);
    free(c.out);
    free(c.out2);
    free(c.sep);
    free(c.ws);
    free(c.want);
    free(c.want2);
}

static void sweep(const KRunner *r, KrefRng *g)
{
    /* M, N, K in groups (w8a16, fp8: K = groups * 32 + 15) */
    static const int small[][3] = {{1, 33, 2}, {3, 64, 4}, {17, 97, 3}, {130, 50, 5}, {5, 40, 3}};
    static const int large[][3] = {{1, 1000, 8}, {130, 257, 4}};
    KirConfig cfgs[11];
    cfgs[0] = ksweep_cfg(0);
    cfgs[1] = ksweep_cfg(6, "BM", 16, "BN", 32, "BK", 32, "WARPS", 4, "STAGES", 1, "SPLIT_K", 1);
    cfgs[2] = ksweep_cfg(6, "BM", 32, "BN", 64, "BK", 64, "WARPS", 4, "STAGES", 2, "SPLIT_K", 2);
    cfgs[3] = ksweep_cfg(6, "BM", 64, "BN", 16, "BK", 128, "WARPS", 2, "STAGES", 3, "SPLIT_K", 1);
    cfgs[4] = ksweep_cfg(6, "BM", 16, "BN", 128, "BK", 256, "WARPS", 8, "STAGES", 2, "SPLIT_K", 4);
    cfgs[5] = ksweep_cfg(6, "BM", 128, "BN", 64, "BK", 128, "WARPS", 8, "STAGES", 4, "SPLIT_K", 1);
    /* SWAP=1: out^T = w x^T, the dequantized weights an A operand in registers (2 warps: mma.sync) */
    cfgs[6] = ksweep_cfg(7, "BM", 16, "BN", 32, "BK", 128, "WARPS", 2, "STAGES", 3, "SPLIT_K", 1, "SWAP", 1);
    /* ... and with more warps than the tile's rows (slots a warp does not use: their reads of the run
     * images stay inside them) */
    cfgs[7] = ksweep_cfg(7, "BM", 16, "BN", 32, "BK", 128, "WARPS", 8, "STAGES", 3, "SPLIT_K", 1, "SWAP", 1);
    /* the K-quants' (BK a multiple of 256; narrow tiles: up to 8 byte loads per element), then cfgs[4] */
    cfgs[8] = ksweep_cfg(6, "BM", 32, "BN", 16, "BK", 256, "WARPS", 4, "STAGES", 2, "SPLIT_K", 2);
    cfgs[9] = ksweep_cfg(7, "BM", 16, "BN", 16, "BK", 256, "WARPS", 2, "STAGES", 3, "SPLIT_K", 1, "SWAP", 1);
    /* the M <= 8 decode form: one n8 fragment of x (BM 8), 64 weight rows on 4 warps (CUDA: one warpgroup) */
    cfgs[10] = ksweep_cfg(7, "BM", 8, "BN", 64, "BK", 256, "WARPS", 4, "STAGES", 3, "SPLIT_K", 1, "SWAP", 1);
    /* the interpreter runs every config; compiled executors (compile-bound; NVRTC on a GPU machine) the
     * default and one other, rotating with the case */
    static const int all[9] = {0, 1, 2, 3, 4, 5, 6, 7, 10}, all_kq[4] = {0, 8, 9, 4};
    int big = ksweep_big(r), n_case = 0;
    for (unsigned fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++)
        for (int d = 0; d < 2; d++) {
            const Fmt *f = &fmts[fi];
            int G = group_of(f), w8 = per_row(f);
            /* compiled executors: the variants of a format (per-tensor or block scales, W8A8) and the
             * K-quants in one dtype (the host JIT's time is the test's budget) */
            if (big && (f->tensor || f->act || (f->group && !strcmp(f->wfmt, "fp8")) || kquant(f)) && d == 1)
                continue;
            for (int i = 0; i < N_EPI; i++, n_case++) {
                /* every epilogue once per (format, dtype) */
                const char *epi = epilogues[(i + d * 2 + (int)fi) % N_EPI];
                Case c = {.f = f, .dt = dtypes[d], .M = small[i][0], .N = small[i][1], .epi = epi};
                int kq = kquant(f), pick[2] = {0, all[1 + n_case % 8]};
                c.K = small[i][2] * G + (w8 ? 15 : 0);
                /* compiled executors: the K-quants' default config, three epilogues (their JIT is slow) */
                if (ksweep_mine() && !(big && kq && i >= 3))
                    run_case(r, g, c, cfgs, big ? pick : kq ? all_kq : all, big ? 2 - kq : kq ? 4 : 9);
            }
            for (int i = 0; big && i < 2; i++)
                if ((i + (int)fi) % 2 == d) {
                    Case c = {
                        .f = f, .dt = dtypes[d], .M = large[i][0], .N = large[i][1], .epi = epilogues[i]};
                    int pick[2] = {0, kquant(f) ? 8 : 1 + (n_case + 2 * i) % 7};
                    c.K = large[i][2] * (G < 64 ? 64 : G) + (w8 ? 15 : 0);
                    if (ksweep_mine()) run_case(r, g, c, cfgs, pick, 2);
                }
        }
    /* split-K reduced in the launch (ws=1, the runtime's decode form), every format, every epilogue over
     * the formats (silu_mul and pair keep acc2's slices after acc's: 4 x 2 fills the workspace's 8):
     * 4 slices of 16 rows and 2 of 32 rows (STAGES 2: streamed a trip ahead), BK 128 (a
     * multiple of every group), K of 8 such steps (+ a tail where the format allows), M within BM (the
     * runtime takes a split binary for at most its BM rows); each format must run at least one; the
     * K-quants: the same at BK 256 (4 and 2 steps), 8 warps */
    KirConfig wcfg[4], kcfg[2];
    kcfg[0] = ksweep_cfg(6, "BM", 16, "BN", 32, "BK", 256, "WARPS", 8, "STAGES", 1, "SPLIT_K", 4);
    kcfg[1] = ksweep_cfg(6, "BM", 32, "BN", 32, "BK", 256, "WARPS", 8, "STAGES", 2, "SPLIT_K", 2);
    wcfg[0] = ksweep_cfg(6, "BM", 16, "BN", 32, "BK", 128, "WARPS", 4, "STAGES", 1, "SPLIT_K", 4);
    wcfg[1] = ksweep_cfg(6, "BM", 32, "BN", 64, "BK", 128, "WARPS", 8, "STAGES", 2, "SPLIT_K", 2);
    /* the decode form with SWAP=1: 128 weight rows on 8 warps (wgmma with A in registers), N = 72 masked,
     * 4 trips per slice: every stage of the rings is written (the packed words' image beside the x ring) */
    wcfg[2] = ksweep_cfg(7, "BM", 16, "BN", 128, "BK", 128, "WARPS", 8, "STAGES", 4, "SPLIT_K", 2, "SWAP", 1);
    /* the M <= 8 decode form split: x's one n8 fragment (BM 8, M <= 8), 64 rows on 4 warps, one trip a slice
     */
    wcfg[3] = ksweep_cfg(7, "BM", 8, "BN", 64, "BK", 256, "WARPS", 4, "STAGES", 3, "SPLIT_K", 4, "SWAP", 1);
    for (unsigned fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++) {
        if (!ksweep_mine()) continue; /* a format's cases stay together: the check below is per format */
        int before = ws_split_runs, sampled = ksweep_sampled_out(r);
        for (int j = 0; j < 4; j++) {
            Case c = {.f = &fmts[fi],
                      .dt = dtypes[0],
                      .M = j == 1   ? 29
                           : j == 3 ? 1 + (int)fi % 8
                                    : 1 + (int)fi % 16,
                      .N = 72,
                      .epi = epilogues[(fi + 2 * (unsigned)j) % N_EPI],
                      .inl = 1};
            c.K = 8 * 128 + (per_row(c.f) ? 15 : 0);
            int pick = j;
            if ((j == 2 && (!strcmp(r->name, "host") || kquant(c.f))) || (j == 3 && kquant(c.f)))
                continue; /* a CUDA form (w4a16's); the host JIT's time is the budget */
            run_case(r, g, c, kquant(c.f) ? kcfg : wcfg, &pick, 1);
        }
        /* (the reduced tier may have sampled every one of them out) */
        ksweep_check(r, NULL, ws_split_runs > before || ksweep_sampled_out(r) > sampled,
                     "qmatmul %s g%d: no split-K launch with ws=1 ran", fmts[fi].wfmt, fmts[fi].group);
    }
}

/* The host target's own tiles (its facts: BM 1 x BN 1 for a decode step, 16 x 16, 128 x 32; SWAP=0,
 * which GPUs refuse below BM 16; q4_0 / q4_1 / q8_0 load each block's halves once per column), as a
 * package's host binaries run them, and the 16-row tile transposed: every launch size against
 * each, M and N that no tile divides, every format once in f32 and a 16-bit dtype over the epilogues. */
static void host_tiles(const KRunner *r, KrefRng *g)
{
    static const int hints[3] = {1, 16, 0}, shapes[][2] = {{1, 37}, {5, 24}, {19, 33}};
    for (unsigned fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++)
        for (int d = 0; d < 2; d++) {
            if (ksweep_reduced() && d != (int)fi % 2) continue; /* the reduced tier: one dtype a format */
            if (!ksweep_mine()) continue;                       /* (KILN_TEST_SHARD) */
            const Fmt *f = &fmts[fi];
            Case c = {.f = f, .dt = dtypes[d ? 2 : (int)fi % 2], .host = 1};
            int sh = ((int)fi + d) % 3, G = group_of(f);
            c.M = shapes[sh][0], c.N = shapes[sh][1], c.K = 2 * (G < 64 ? 64 : G) + (per_row(f) ? 15 : 0);
            c.epi = epilogues[(fi * 2 + (unsigned)d) % N_EPI];
            KfamSpec s = spec_of(f, c.dt, c.N, c.K, c.epi);
            KirConfig cfgs[4];
            int pick[4] = {0, 1, 2, 3};
            for (int h = 0; h < 3; h++)
                cfgs[h] = ksweep_host_cfg(&s, hints[h]);
            /* and the transposed form (SWAP=1, which a tuned host config may pick) of the 16-row tile: the
             * block formats' halves then load as [BN,1] columns */
            cfgs[3] = cfgs[1];
            kir_config_set(&cfgs[3], "SWAP", 1);
            ksweep_check(
                r, NULL, kir_config_get(&cfgs[0], "BM", 0) == 1 && kir_config_get(&cfgs[2], "BM", 0) > 16,
                "qmatmul %s host tiles: BM %lld for a decode step, %lld for prefill", f->wfmt,
                (long long)kir_config_get(&cfgs[0], "BM", 0), (long long)kir_config_get(&cfgs[2], "BM", 0));
            run_case(r, g, c, cfgs, pick, act_dtype(f, c.dt) == c.dt ? 4 : 3); /* SWAP=1: no W8A8 */
        }
}

/* The default kernels of model shapes build, fit sm_90a and host budgets and compile with NVRTC. */
static void cuda_compile(void)
{
    static const struct {
        Fmt f;
        KirDtype dt;
        int N, K;
        const char *epi;
        int m_hint, ws; /* ws: split-K in the launch, as the scheduler gives K >= 4096 */
    } specs[] = {
        {{"w4a16", 128, 0, 0, NULL, 0}, KIR_BF16, 4096, 4096, "none", 1, 0},
        {{"w4a16", 128, 1, 0, NULL, 0}, KIR_BF16, 4096, 14336, "none", 1, 1},
        {{"w4a16", 128, 1, 0, NULL, 0}, KIR_BF16, 14336, 4096, "silu_mul", 1, 1},
        {{"w4a16", 128, 1, 0, NULL, 0}, KIR_BF16, 1024, 4096, "pair", 16, 1},
        {{"w4a16", 128, 1, 0, NULL, 0}, KIR_BF16, 14336, 4096, "silu_mul", 512, 0},
        {{"w4a16", 32, 0, 0, NULL, 0}, KIR_F16, 4096, 14336, "residual", 0, 0},
        {{"w8a16", 0, 0, 0, NULL, 0}, KIR_F16, 4096, 4096, "residual", 1, 0},
        {{"fp8", 0, 0, 0, NULL, 0}, KIR_BF16, 4096, 4096, "none", 1, 0},
        {{"fp8", 0, 0, 0, "fp8", 0}, KIR_BF16, 8192, 8192, "none", 0, 0},
        {{"w8a16", 0, 0, 0, "int8", 0}, KIR_BF16, 8192, 8192, "residual", 0, 0},
        {{"w8a16", 0, 0, 0, "int8", 0}, KIR_BF16, 4096, 4096, "residual", 1, 0},
        {{"fp8", 0, 0, 1, NULL, 0}, KIR_BF16, 14336, 4096, "silu_mul", 512, 0},
        {{"q4_0", 0, 0, 0, NULL, 0}, KIR_BF16, 4096, 4096, "residual", 1, 0},
        {{"q4_1", 0, 0, 0, NULL, 0}, KIR_BF16, 1536, 576, "silu_mul", 1, 0},
        {{"q4_1", 0, 0, 0, NULL, 0}, KIR_BF16, 192, 576, "pair", 1, 0},
        {{"w4a16", 128, 1, 0, NULL, 0}, KIR_BF16, 1024, 4096, "pair", 1, 0},
        {{"q8_0", 0, 0, 0, NULL, 0}, KIR_BF16, 1024, 4096, "pair", 0, 0},
        {{"q8_0", 0, 0, 0, NULL, 0}, KIR_BF16, 4096, 4096, "none", 0, 0},
        {{"q4_k", 0, 0, 0, NULL, 0}, KIR_BF16, 4096, 4096, "none", 1, 1},
        {{"q4_k", 0, 0, 0, NULL, 0}, KIR_BF16, 14336, 4096, "silu_mul", 16, 1},
        {{"q4_k", 0, 0, 0, NULL, 0}, KIR_BF16, 4096, 14336, "residual", 512, 0},
        {{"q6_k", 0, 0, 0, NULL, 0}, KIR_BF16, 4096, 14336, "residual", 1, 1},
        {{"q6_k", 0, 0, 0, NULL, 0}, KIR_BF16, 1024, 4096, "pair", 0, 0},
        {{"q6_k", 0, 0, 0, NULL, 0}, KIR_F16, 128256, 4096, "none", 1, 0},
    };
    const CgTarget *t = cg_target_find("sm_90a");
    int nvrtc = t && cg_backend_for(t, "cuda");
    if (!nvrtc) printf("skip cuda compile: this build has no NVRTC\n");
    for (unsigned i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        if (!ksweep_mine()) continue; /* each spec in one shard: NVRTC's compiles are the cost */
        KfamSpec s = spec_of(&specs[i].f, specs[i].dt, specs[i].N, specs[i].K, specs[i].epi);
        if (specs[i].m_hint) kfam_spec_int(&s, "m_hint", specs[i].m_hint);
        if (specs[i].ws) kfam_spec_int(&s, "ws", 1);
        IrArena *a = ir_arena_create();
        KirKernel *k = NULL;
        IrDiag d = {0};
        KirConfig none = {0};
        KT_CHECK(kfam_find("qmatmul")->build(a, &s, kfacts_sm90(), &none, &k, &d) == IR_OK,
                 "qmatmul %s N=%d K=%d: %s", specs[i].f.wfmt, specs[i].N, specs[i].K, d.msg);
        if (k) {
            KT_CHECK(kir_verify(k, cg_target_limits(cg_target_find("host")), &d) == IR_OK, "%s: host: %s",
                     k->name, d.msg);
            KT_CHECK(!t || kir_verify(k, cg_target_limits(t), &d) == IR_OK, "%s: sm_90a: %s", k->name, d.msg);
        }
        if (k && nvrtc) {
            CgBinary cubin, ptx;
            double t0 = ir_now_ms();
            IrStatus st = cg_cuda_compile(k, t, &cubin, &ptx, &d);
            KT_CHECK(st == IR_OK, "qmatmul %s: sm_90a: %s: %s", k->name, ir_status_name(st), d.msg);
            if (st == IR_OK) {
                printf("cuda sm_90a: %s compiled (%zu bytes cubin, %.1f s)\n", k->name, cubin.size,
                       (ir_now_ms() - t0) / 1000);
                cg_binary_free(&cubin);
                cg_binary_free(&ptx);
            }
        }
        ir_arena_destroy(a);
    }
}

/* kir_verify's shared-memory estimate of a SWAP=1 silu_mul trip: each dequantized weight tile [BN, BK]
 * (computed: not multi-buffered) once, the x^T tile both dots read (loaded: x STAGES) once, and the
 * cross-warp reduction buffer; before, every dot operand counted x STAGES for every dot. */
static void smem_estimate(void)
{
    static const Fmt w4 = {"w4a16", 128, 1, 0, NULL, 0};
    KfamSpec s = spec_of(&w4, KIR_BF16, 14336, 4096, "silu_mul");
    KirConfig c =
        ksweep_cfg(7, "BM", 16, "BN", 128, "BK", 128, "WARPS", 8, "STAGES", 3, "SPLIT_K", 1, "SWAP", 1);
    IrArena *a = ir_arena_create();
    KirKernel *k = NULL;
    IrDiag d = {0};
    KT_CHECK(kfam_find("qmatmul")->build(a, &s, kfacts_sm90(), &c, &k, &d) == IR_OK,
             "qmatmul silu_mul SWAP=1: %s", d.msg);
    int64_t want = 2 * 128 * 128 * 2 + 3 * 128 * 16 * 2 + 32 * 4 * 2;
    KT_CHECK(!k || kir_estimate_smem_bytes(k) == want, "silu_mul SWAP=1: smem estimate %lld, want %lld",
             k ? (long long)kir_estimate_smem_bytes(k) : 0LL, (long long)want);
    ir_arena_destroy(a);
}

int main(void)
{
    const KRunner *rs[3];
    int n = ksweep_runners(rs, 3);
    KrefRng g = kref_rng(kref_seed());
    if (ksweep_shard0()) gguf_reference(&g);
    for (int i = 0; i < n; i++) {
        exact(rs[i], &g);
        sweep(rs[i], &g);
        host_tiles(rs[i], &g);
    }
    cuda_compile();
    if (ksweep_shard0()) smem_estimate();
    ksweep_summary("kfam_qmatmul");
    return kt_done("test_kfam_qmatmul");
}
