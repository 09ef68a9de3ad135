/* test_rt_quant.c — repacking GPTQ and AWQ INT4 checkpoints into kiln's w4a16 layout (runtime/rt_quant.c).
 * Each run draws fresh random Linears (the seed is printed; KILN_TEST_SEED repeats a run): N, K and the
 * group size G, including N and K that are not powers of two; 4-bit weights, zero points and f16 scales
 * (typical magnitudes plus raw bit patterns: subnormals, the largest halves). Each Linear is packed here
 * the way the quantizers write checkpoints (AutoGPTQ's QuantLinear.pack for gptq, with zero - 1, and
 * gptq_v2 with the zero as is; AutoAWQ's WQLinear_GEMM.from_linear for awq, nibble order
 * {0, 2, 4, 6, 1, 3, 5, 7}), repacked with rt_quant_repack, and the kiln layout is dequantized by the
 * kernel family's formula f32(q - z) * f32(s) and compared bit for bit with reference dequantizers that
 * read the checkpoint arrays directly, as AutoGPTQ's forward and AutoAWQ's dequantize_gemm do. Also:
 * the unpacked q and z against the drawn ones, symmetric detection and zeros=NULL, every finite f16
 * scale to f16 and bf16, no write past the output arrays, and hostile inputs (bad shapes, sizes and
 * pointers, act-order and out-of-range g_idx, NaN and infinite scales), each an error with a one-line
 * message naming the tensor and the outputs untouched. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kref.h"
#include "kt.h"
#include "runtime/rt_quant.h"

static KrefRng rng;

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "test_rt_quant: out of memory\n");
        exit(1);
    }
    return p;
}

static int64_t rand_in(int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(kref_next(&rng) % (uint64_t)(hi - lo + 1));
}

/* A random finite f16: mostly a typical scale, sometimes any finite bit pattern. */
static uint16_t rand_scale(void)
{
    if (kref_next(&rng) % 4) return kref_f32_to_f16((float)kref_uniform(&rng, -0.05, 0.05));
    uint16_t h;
    do
        h = (uint16_t)kref_next(&rng);
    while ((h & 0x7c00u) == 0x7c00u);
    return h;
}

/* ---- one quantized Linear: what the quantizer decided, and the checkpoint it wrote ------------------- */

typedef struct Linear {
    RtQuantFormat fmt;
    int64_t N, K, G, groups;
    uint8_t *q;  /* [N, K] 0..15 */
    uint8_t *z;  /* [N, groups] 0..15, gptq v1 1..16 */
    uint16_t *s; /* [groups, N] f16, as the checkpoint stores it */
    uint32_t *qweight, *qzeros;
    int32_t *g_idx; /* [K], the trivial k/G */
} Linear;

static const int awq_order[8] = {0, 2, 4, 6, 1, 3, 5, 7};   /* AutoAWQ's pack order */
static const int awq_reverse[8] = {0, 4, 1, 5, 2, 6, 3, 7}; /* AutoAWQ's AWQ_REVERSE_ORDER */

/* gptq: qweight [K/8, N], row r holds k = 8r..8r+7, nibble k%8; qzeros [groups, N/8], nibble n%8,
 * z - 1 for v1 (AutoGPTQ's pack: "zeros -= 1"). */
static void pack_gptq(Linear *L)
{
    int64_t N = L->N, K = L->K;
    for (int64_t k = 0; k < K; k++)
        for (int64_t n = 0; n < N; n++)
            L->qweight[(k / 8) * N + n] |= (uint32_t)L->q[n * K + k] << (4 * (k % 8));
    for (int64_t g = 0; g < L->groups; g++)
        for (int64_t n = 0; n < N; n++) {
            uint32_t stored = (uint32_t)L->z[n * L->groups + g] - (L->fmt == RT_QUANT_GPTQ);
            L->qzeros[g * (N / 8) + n / 8] |= stored << (4 * (n % 8));
        }
}

/* awq: qweight [K, N/8]; nibble i of word c holds column 8c + order[i]; qzeros [groups, N/8] alike. */
static void pack_awq(Linear *L)
{
    int64_t N = L->N, K = L->K, C = N / 8;
    for (int64_t k = 0; k < K; k++)
        for (int64_t c = 0; c < C; c++)
            for (int i = 0; i < 8; i++)
                L->qweight[k * C + c] |= (uint32_t)L->q[(8 * c + awq_order[i]) * K + k] << (4 * i);
    for (int64_t g = 0; g < L->groups; g++)
        for (int64_t c = 0; c < C; c++)
            for (int i = 0; i < 8; i++)
                L->qzeros[g * C + c] |= (uint32_t)L->z[(8 * c + awq_order[i]) * L->groups + g] << (4 * i);
}

/* Draws a Linear; sym: every zero point 8. */
static Linear linear_make(RtQuantFormat fmt, int64_t N, int64_t K, int64_t G, int sym)
{
    Linear L = {.fmt = fmt, .N = N, .K = K, .G = G, .groups = K / G};
    L.q = xcalloc((size_t)(N * K), 1);
    L.z = xcalloc((size_t)(N * L.groups), 1);
    L.s = xcalloc((size_t)(N * L.groups), 2);
    L.qweight = xcalloc((size_t)(N * K / 8), 4);
    L.qzeros = xcalloc((size_t)(N * L.groups / 8), 4);
    L.g_idx = xcalloc((size_t)K, 4);
    for (int64_t i = 0; i < N * K; i++)
        L.q[i] = (uint8_t)(kref_next(&rng) & 15);
    for (int64_t i = 0; i < N * L.groups; i++) {
        L.z[i] = sym ? 8 : (uint8_t)(kref_next(&rng) & 15);
        if (!sym && fmt == RT_QUANT_GPTQ) L.z[i]++; /* v1 stores z - 1 in a nibble: z in 1..16 */
        L.s[i] = rand_scale();
    }
    for (int64_t k = 0; k < K; k++)
        L.g_idx[k] = (int32_t)(k / G);
    if (fmt == RT_QUANT_AWQ)
        pack_awq(&L);
    else
        pack_gptq(&L);
    return L;
}

static void linear_free(Linear *L)
{
    free(L->q), free(L->z), free(L->s), free(L->qweight), free(L->qzeros), free(L->g_idx);
}

static RtQuantSrc linear_src(const Linear *L, int with_g_idx)
{
    return (RtQuantSrc){.format = L->fmt,
                        .name = "model.layers.3.mlp.down_proj",
                        .bits = 4,
                        .N = L->N,
                        .K = L->K,
                        .G = L->G,
                        .qweight = L->qweight,
                        .qweight_bytes = L->N * L->K / 2,
                        .qzeros = L->qzeros,
                        .qzeros_bytes = L->N * L->groups / 2,
                        .scales = L->s,
                        .scales_bytes = 2 * L->N * L->groups,
                        .g_idx = with_g_idx ? L->g_idx : NULL,
                        .g_idx_bytes = with_g_idx ? 4 * L->K : 0};
}

/* ---- reference dequantizers: from the checkpoint arrays to f32 [N, K] ---------------------------------- */

/* The scale as kiln will use it: the f16 value, or that value rounded to bf16 (kref's nearest even). */
static float ref_scale(uint16_t h, RtQuantDtype dt)
{
    float f = kref_f16_to_f32(h);
    return dt == RT_QUANT_BF16 ? kref_bf16_to_f32(kref_f32_to_bf16(f)) : f;
}

/* AutoGPTQ's forward: weight nibble k%8 of qweight[k/8, n]; zeros nibble n%8 of qzeros[g, n/8], + 1 (v1). */
static void ref_dequant_gptq(const RtQuantSrc *c, RtQuantDtype dt, float *out)
{
    const uint32_t *qw = c->qweight, *qz = c->qzeros;
    const uint16_t *sc = c->scales;
    int64_t N = c->N, K = c->K, G = c->G;
    for (int64_t k = 0; k < K; k++) {
        int64_t g = k / G;
        for (int64_t n = 0; n < N; n++) {
            int q = (int)((qw[(k / 8) * N + n] >> (4 * (k % 8))) & 15u);
            int z = (int)((qz[g * (N / 8) + n / 8] >> (4 * (n % 8))) & 15u) + (c->format == RT_QUANT_GPTQ);
            out[n * K + k] = (float)(q - z) * ref_scale(sc[g * N + n], dt);
        }
    }
}

/* AutoAWQ's dequantize_gemm: unpack each word to 8 columns (nibble i -> packed column 8c + i), then
 * reorder: column 8c + j is packed column 8c + reverse[j]; the same for the zeros. */
static void ref_dequant_awq(const RtQuantSrc *c, RtQuantDtype dt, float *out)
{
    const uint32_t *qw = c->qweight, *qz = c->qzeros;
    const uint16_t *sc = c->scales;
    int64_t N = c->N, K = c->K, G = c->G, C = N / 8;
    int unpacked_w[8], unpacked_z[8];
    for (int64_t k = 0; k < K; k++)
        for (int64_t col = 0; col < C; col++) {
            for (int i = 0; i < 8; i++) {
                unpacked_w[i] = (int)((qw[k * C + col] >> (4 * i)) & 15u);
                unpacked_z[i] = (int)((qz[(k / G) * C + col] >> (4 * i)) & 15u);
            }
            for (int j = 0; j < 8; j++) {
                int64_t n = 8 * col + j;
                int q = unpacked_w[awq_reverse[j]], z = unpacked_z[awq_reverse[j]];
                out[n * K + k] = (float)(q - z) * ref_scale(sc[(k / G) * N + n], dt);
            }
        }
}

/* The code of (n, k) in kiln's w4a16 words: the fragment order (rt_quant.h), 32 k per 4 words. */
static int kiln_q(const int32_t *w, int64_t K, int64_t n, int64_t k)
{
    uint32_t word = (uint32_t)w[n * (K / 8) + (k / 32) * 4 + (k / 2) % 4];
    return (int)((word >> (4 * ((k / 8) % 4 + 4 * (k % 2)))) & 15u);
}

/* kiln's w4a16 values of the repacked arrays, before the dtype rounding: kref_qdequant, the reference
 * the qmatmul kernels are checked against (tests/unit/test_kfam_qmatmul.c), so the repacker's layout is
 * the kernels' own. */
static void kiln_dequant(const RtQuantDst *d, int64_t N, int64_t K, int64_t G, float *out)
{
    kref_qdequant("w4a16", d->w, d->scales, d->zeros, d->dtype == RT_QUANT_BF16 ? KIR_BF16 : KIR_F16, (int)N,
                  (int)K, (int)G, out);
}

/* ---- outputs with guard elements past their ends ---------------------------------------------------------
 */

enum { GUARD = 16 };

typedef struct Out {
    RtQuantDst d;
    int32_t *w;
    uint16_t *s;
    uint8_t *z;
} Out;

static Out out_make(const RtQuantSrc *src, RtQuantDtype dt, int zeros)
{
    Out o = {.d = {.dtype = dt}};
    rt_quant_dst_sizes(src, &o.d);
    o.w = xcalloc((size_t)(o.d.w_len + GUARD), 4);
    o.s = xcalloc((size_t)(o.d.scales_len + GUARD), 2);
    o.z = xcalloc((size_t)(o.d.zeros_len + GUARD), 1);
    memset(o.w, 0xa5, (size_t)(o.d.w_len + GUARD) * 4);
    memset(o.s, 0xa5, (size_t)(o.d.scales_len + GUARD) * 2);
    memset(o.z, 0xa5, (size_t)(o.d.zeros_len + GUARD));
    o.d.w = o.w, o.d.scales = o.s, o.d.zeros = zeros ? o.z : NULL;
    return o;
}

static int all_a5(const void *p, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++)
        if (((const unsigned char *)p)[i] != 0xa5) return 0;
    return 1;
}

/* Nothing written past the lengths (or anywhere, when untouched is set). */
static int out_guards_ok(const Out *o, int untouched)
{
    int64_t w0 = untouched ? 0 : o->d.w_len, s0 = untouched ? 0 : o->d.scales_len;
    int64_t z0 = untouched || !o->d.zeros ? 0 : o->d.zeros_len;
    return all_a5(o->w + w0, (size_t)(o->d.w_len + GUARD - w0) * 4) &&
           all_a5(o->s + s0, (size_t)(o->d.scales_len + GUARD - s0) * 2) &&
           all_a5(o->z + z0, (size_t)(o->d.zeros_len + GUARD - z0));
}

static void out_free(Out *o)
{
    free(o->w), free(o->s), free(o->z);
}

/* ---- round trips ------------------------------------------------------------------------------------------
 */

/* Repacks L into dt (with or without zeros) and checks it against the drawn values and the reference. */
static void check_round_trip(const Linear *L, RtQuantDtype dt, int zeros, int with_g_idx)
{
    RtQuantSrc src = linear_src(L, with_g_idx);
    Out o = out_make(&src, dt, zeros);
    char err[512] = "";
    KilnStatus st = rt_quant_repack(&src, &o.d, err, sizeof err);
    KT_CHECK(st == KILN_OK, "%s N=%lld K=%lld G=%lld: %s", rt_quant_format_name(L->fmt), (long long)L->N,
             (long long)L->K, (long long)L->G, err);
    if (st != KILN_OK) goto done;
    KT_CHECK(out_guards_ok(&o, 0), "%s: wrote past an output array", rt_quant_format_name(L->fmt));

    int64_t N = L->N, K = L->K, G = L->G, bad_q = 0, bad_z = 0, bad_v = 0, first = -1;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) {
            bad_q += kiln_q(o.w, K, n, k) != L->q[n * K + k];
            if (k % G == 0 && zeros) bad_z += o.z[n * L->groups + k / G] != L->z[n * L->groups + k / G];
        }
    float *want = xcalloc((size_t)(N * K), 4), *got = xcalloc((size_t)(N * K), 4);
    if (L->fmt == RT_QUANT_AWQ)
        ref_dequant_awq(&src, dt, want);
    else
        ref_dequant_gptq(&src, dt, want);
    kiln_dequant(&o.d, N, K, G, got);
    for (int64_t i = 0; i < N * K; i++)
        if (memcmp(&want[i], &got[i], 4)) {
            if (first < 0) first = i;
            bad_v++;
        }
    const char *fmt = rt_quant_format_name(L->fmt), *dts = dt == RT_QUANT_BF16 ? "bf16" : "f16";
    KT_CHECK(bad_q == 0, "%s N=%lld K=%lld G=%lld: %lld weights unpack wrong", fmt, (long long)N,
             (long long)K, (long long)G, (long long)bad_q);
    KT_CHECK(bad_z == 0, "%s N=%lld K=%lld G=%lld: %lld zero points wrong", fmt, (long long)N, (long long)K,
             (long long)G, (long long)bad_z);
    KT_CHECK(bad_v == 0,
             "%s %s N=%lld K=%lld G=%lld zeros=%d: %lld values differ, first (%lld, %lld): %.9g vs %.9g", fmt,
             dts, (long long)N, (long long)K, (long long)G, zeros, (long long)bad_v,
             first < 0 ? 0LL : (long long)(first / K), first < 0 ? 0LL : (long long)(first % K),
             first < 0 ? 0.0 : (double)got[first], first < 0 ? 0.0 : (double)want[first]);
    free(want), free(got);
done:
    out_free(&o);
}

static void test_round_trips(void)
{
    static const int64_t groups[3] = {32, 64, 128};
    for (int it = 0; it < 90; it++) {
        RtQuantFormat fmt = (RtQuantFormat)(it % 3);
        int64_t G = groups[rand_in(0, 2)];
        int64_t N = 8 * rand_in(1, it < 80 ? 24 : 100), K = G * rand_in(1, it < 80 ? 5 : 12);
        int sym = it % 4 == 3;
        Linear L = linear_make(fmt, N, K, G, sym);
        RtQuantSrc src = linear_src(&L, 0);
        int got_sym = -1;
        char err[512] = "";
        KT_CHECK(rt_quant_is_symmetric(&src, &got_sym, err, sizeof err) == KILN_OK && got_sym == sym,
                 "%s: symmetric %d, detected %d (%s)", rt_quant_format_name(fmt), sym, got_sym, err);
        check_round_trip(&L, RT_QUANT_F16, 1, fmt != RT_QUANT_AWQ && it % 2);
        check_round_trip(&L, RT_QUANT_BF16, 1, 0);
        if (sym) check_round_trip(&L, it % 8 == 3 ? RT_QUANT_BF16 : RT_QUANT_F16, 0, 0);
        linear_free(&L);
    }
}

/* Every finite f16 scale: copied for f16, nearest even for bf16 (against kref's conversion). */
static void test_every_scale(void)
{
    int64_t N = 0;
    Linear L = linear_make(RT_QUANT_GPTQ_V2, 63488, 32, 32, 0); /* 63488 finite halves */
    for (uint32_t h = 0; h < 65536; h++)
        if ((h & 0x7c00u) != 0x7c00u) L.s[N++] = (uint16_t)h;
    KT_CHECK(N == L.N, "finite halves: %lld", (long long)N);
    RtQuantSrc src = linear_src(&L, 0);
    for (int dt = RT_QUANT_F16; dt <= RT_QUANT_BF16; dt++) {
        Out o = out_make(&src, (RtQuantDtype)dt, 1);
        char err[512] = "";
        KT_CHECK(rt_quant_repack(&src, &o.d, err, sizeof err) == KILN_OK, "every scale: %s", err);
        int64_t bad = 0;
        for (int64_t n = 0; n < N; n++) {
            uint16_t want = dt == RT_QUANT_BF16 ? kref_f32_to_bf16(kref_f16_to_f32(L.s[n])) : L.s[n];
            bad += o.s[n] != want;
        }
        KT_CHECK(bad == 0, "%s: %lld of the finite f16 scales convert wrong", dt ? "bf16" : "f16",
                 (long long)bad);
        out_free(&o);
    }
    linear_free(&L);
}

/* ---- hostile inputs ---------------------------------------------------------------------------------------
 */

/* Expects status want from check and repack, a one-line message that starts with the tensor's name and
 * holds `needle`, and the outputs untouched. */
static void expect_fail(const char *what, const RtQuantSrc *src, const RtQuantDst *dst, KilnStatus want,
                        const char *needle)
{
    char err[512] = "";
    Out o = {0};
    RtQuantDst d = dst ? *dst : (RtQuantDst){0};
    if (!dst && src) {
        o = out_make(src, RT_QUANT_BF16, 1);
        d = o.d;
    }
    KilnStatus got = rt_quant_repack(src, dst || !src ? dst : &d, err, sizeof err);
    const char *name = src && src->name ? src->name : "quantized tensor";
    KT_CHECK(got == want, "%s: status %s, want %s (%s)", what, kiln_status_name(got), kiln_status_name(want),
             err);
    KT_CHECK(strncmp(err, name, strlen(name)) == 0 && strstr(err, needle) && !strchr(err, '\n'),
             "%s: message '%s' (want '%s: ...%s...')", what, err, name, needle);
    if (o.w) KT_CHECK(out_guards_ok(&o, 1), "%s: outputs written on an error", what);
    out_free(&o);
}

static void test_hostile(void)
{
    Linear L = linear_make(RT_QUANT_GPTQ, 64, 256, 64, 0); /* 4 groups */
    RtQuantSrc good = linear_src(&L, 1), s;
    char err[512];
    KT_CHECK(rt_quant_check(&good, err, sizeof err) == KILN_OK, "the good source: %s", err);

    expect_fail("NULL source", NULL, NULL, KILN_ERR_ARG, "NULL source");
    s = good, s.format = (RtQuantFormat)7;
    expect_fail("format 7", &s, NULL, KILN_ERR_ARG, "unknown checkpoint format 7");
    s = good, s.bits = 8;
    expect_fail("bits 8", &s, NULL, KILN_ERR_UNSUPPORTED, "bits=8");
    s = good, s.name = NULL, s.bits = 3;
    expect_fail("bits 3, no name", &s, NULL, KILN_ERR_UNSUPPORTED, "bits=3");
    s = good, s.N = 0;
    expect_fail("N 0", &s, NULL, KILN_ERR_ARG, "N = 0");
    s = good, s.N = -64;
    expect_fail("N -64", &s, NULL, KILN_ERR_ARG, "N = -64");
    s = good, s.N = 60, s.qweight_bytes = 60 * 256 / 2;
    expect_fail("N 60", &s, NULL, KILN_ERR_ARG, "not a multiple of 8");
    s = good, s.K = (int64_t)1 << 31;
    expect_fail("K 2^31", &s, NULL, KILN_ERR_ARG, "[1, 2^31)");
    static const int64_t bad_groups[] = {-1, 0, 16, 96, 256};
    for (int i = 0; i < 5; i++) {
        s = good, s.G = bad_groups[i];
        expect_fail("group size", &s, NULL, KILN_ERR_UNSUPPORTED, "group_size");
    }
    s = good, s.K = 224; /* a multiple of 8 and 32, not of 64 */
    expect_fail("K % G", &s, NULL, KILN_ERR_ARG, "not a multiple of the group size");
    s = good, s.qweight = NULL;
    expect_fail("qweight NULL", &s, NULL, KILN_ERR_ARG, "qweight is NULL");
    s = good, s.qzeros = NULL;
    expect_fail("qzeros NULL", &s, NULL, KILN_ERR_ARG, "qzeros is NULL");
    s = good, s.scales = NULL;
    expect_fail("scales NULL", &s, NULL, KILN_ERR_ARG, "scales is NULL");
    s = good, s.qweight_bytes -= 4;
    expect_fail("qweight short", &s, NULL, KILN_ERR_ARG, "qweight is 8188 bytes, but i32 [32, 64] is 8192");
    s = good, s.format = RT_QUANT_AWQ, s.qweight_bytes += 4;
    expect_fail("awq qweight long", &s, NULL, KILN_ERR_ARG, "i32 [256, 8]");
    s = good, s.qzeros_bytes = 0;
    expect_fail("qzeros size", &s, NULL, KILN_ERR_ARG, "qzeros is 0 bytes");
    s = good, s.scales_bytes = 2 * 64 * 3;
    expect_fail("scales size", &s, NULL, KILN_ERR_ARG, "f16 [4, 64]");
    s = good, s.g_idx_bytes = 4 * 255;
    expect_fail("g_idx size", &s, NULL, KILN_ERR_ARG, "g_idx is 1020 bytes");
    s = good, s.g_idx = NULL;
    expect_fail("g_idx NULL, bytes set", &s, NULL, KILN_ERR_ARG, "g_idx is NULL");

    /* g_idx: out of range, act-order (desc_act: input j is in group invperm[j] / G), trivial (static_groups)
     */
    int32_t *gi = xcalloc(256, 4), perm[256];
    s = good, s.g_idx = gi;
    for (int k = 0; k < 256; k++)
        gi[k] = k / 64;
    gi[77] = 4;
    expect_fail("g_idx 4", &s, NULL, KILN_ERR_CORRUPT, "g_idx[77] = 4 is outside [0, K/G = 4)");
    gi[77] = -1;
    expect_fail("g_idx -1", &s, NULL, KILN_ERR_CORRUPT, "g_idx[77] = -1");
    for (int k = 0; k < 256; k++)
        perm[k] = k;
    for (int k = 255; k > 0; k--) {
        int j = (int)rand_in(0, k), t = perm[k];
        perm[k] = perm[j], perm[j] = t;
    }
    for (int k = 0; k < 256; k++)
        gi[k] = perm[k] / 64;
    expect_fail("act-order", &s, NULL, KILN_ERR_UNSUPPORTED, "act-order");
    for (int k = 0; k < 256; k++)
        gi[k] = k / 64;
    gi[64] = 0; /* one input moved to the previous group */
    expect_fail("one input off", &s, NULL, KILN_ERR_UNSUPPORTED, "input 64 is in group 0, not 1");
    free(gi);

    /* scales */
    uint16_t keep = L.s[3 * 64 + 5];
    L.s[3 * 64 + 5] = 0x7c00u;
    expect_fail("inf scale", &good, NULL, KILN_ERR_CORRUPT, "scales[3, 5] is infinite");
    L.s[3 * 64 + 5] = 0xfe01u;
    expect_fail("NaN scale", &good, NULL, KILN_ERR_CORRUPT, "scales[3, 5] is NaN");
    L.s[3 * 64 + 5] = keep;

    /* destinations */
    Out o = out_make(&good, RT_QUANT_F16, 1);
    RtQuantDst d;
    KilnStatus st = rt_quant_repack(&good, NULL, err, sizeof err);
    KT_CHECK(st == KILN_ERR_ARG && strstr(err, "NULL destination"), "NULL dst: %s", err);
    d = o.d, d.dtype = (RtQuantDtype)5;
    expect_fail("dtype 5", &good, &d, KILN_ERR_ARG, "unknown scale dtype 5");
    d = o.d, d.w = NULL;
    expect_fail("w NULL", &good, &d, KILN_ERR_ARG, "w holds 0 int32");
    d = o.d, d.w_len--;
    expect_fail("w short", &good, &d, KILN_ERR_ARG, "w holds 2047 int32, needs [N, K/8] = 2048");
    d = o.d, d.scales_len = 10;
    expect_fail("scales short", &good, &d, KILN_ERR_ARG, "scales hold 10 values");
    d = o.d, d.zeros_len = 255;
    expect_fail("zeros short", &good, &d, KILN_ERR_ARG, "zeros hold 255 bytes");
    d = o.d, d.zeros = NULL;
    expect_fail("asymmetric, no zeros", &good, &d, KILN_ERR_ARG, "asymmetric weights need a zeros array");
    KT_CHECK(out_guards_ok(&o, 1), "destinations: outputs written on an error");
    out_free(&o);

    /* symmetric detection: v1 stores 7 for 8; one zero off makes it asymmetric */
    Linear S = linear_make(RT_QUANT_GPTQ, 16, 64, 32, 1);
    RtQuantSrc ss = linear_src(&S, 0);
    int sym = -1;
    KT_CHECK(S.qzeros[0] == 0x77777777u, "v1 symmetric qzeros word 0x%08x", S.qzeros[0]);
    KT_CHECK(rt_quant_is_symmetric(&ss, &sym, err, sizeof err) == KILN_OK && sym == 1, "symmetric v1: %d",
             sym);
    ss.format = RT_QUANT_GPTQ_V2; /* the same words read as v2 say z = 7 */
    KT_CHECK(rt_quant_is_symmetric(&ss, &sym, err, sizeof err) == KILN_OK && sym == 0, "0x7 as v2: %d", sym);
    ss.format = RT_QUANT_GPTQ, S.qzeros[3] ^= 1u << 20;
    KT_CHECK(rt_quant_is_symmetric(&ss, &sym, err, sizeof err) == KILN_OK && sym == 0, "one zero off: %d",
             sym);
    KT_CHECK(rt_quant_is_symmetric(&ss, NULL, err, sizeof err) == KILN_ERR_ARG, "NULL sym");
    ss.G = 48;
    KT_CHECK(rt_quant_is_symmetric(&ss, &sym, err, sizeof err) == KILN_ERR_UNSUPPORTED && sym == 0,
             "is_symmetric checks first");
    linear_free(&S);

    /* messages: NULL err, and a buffer too small for the line */
    s = good, s.bits = 2;
    KT_CHECK(rt_quant_check(&s, NULL, 0) == KILN_ERR_UNSUPPORTED, "NULL err");
    char tiny[8];
    KT_CHECK(rt_quant_check(&s, tiny, sizeof tiny) == KILN_ERR_UNSUPPORTED && strlen(tiny) < sizeof tiny,
             "tiny err '%s'", tiny);
    RtQuantDst sizes = {0};
    s = good, s.K = 100;
    rt_quant_dst_sizes(&s, &sizes);
    KT_CHECK(sizes.w_len == 0 && sizes.scales_len == 0 && sizes.zeros_len == 0, "sizes of an invalid source");
    KT_CHECK(strcmp(rt_quant_format_name((RtQuantFormat)9), "?") == 0, "format name");
    linear_free(&L);
}

int main(void)
{
    rng = kref_rng(kref_seed());
    for (int i = 0; i < 8; i++) /* the test's two AWQ tables are each other's inverse */
        KT_CHECK(awq_reverse[awq_order[i]] == i, "awq order %d", i);
    test_round_trips();
    test_every_scale();
    test_hostile();
    return kt_done("test_rt_quant");
}
