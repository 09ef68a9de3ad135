/* rt_quant.c — GPTQ and AWQ INT4 checkpoint tensors to kiln's w4a16 layout (rt_quant.h).
 *
 * The formats differ in where the nibble of (n, k) sits and in what a stored zero means (g = k/G):
 *   gptq, gptq_v2  q: qweight[k/8, n] nibble k%8       z: qzeros[g, n/8] nibble n%8,  + 1 for gptq (v1)
 *   awq            q: qweight[k, n/8] nibble slot(n%8) z: qzeros[g, n/8] nibble slot(n%8)
 *   scales[g, n] f16 in all three.
 * AutoAWQ (WQLinear_GEMM.from_linear) fills nibble i of a word with column 8c + order[i], order =
 * {0, 2, 4, 6, 1, 3, 5, 7}; column j therefore sits in nibble slot(j), the inverse permutation
 * {0, 4, 1, 5, 2, 6, 3, 7} (AutoAWQ's AWQ_REVERSE_ORDER). A GPTQ qweight word holds eight consecutive
 * k, low nibble first, so GPTQ weights are first a transpose of 32-bit words and AWQ words are rebuilt
 * nibble by nibble into that k order; then each row's 32-k blocks are shuffled into the fragment order.
 *
 * Invariant: rt_quant_check has passed before any array is indexed, so every read below stays inside
 * the byte sizes the caller gave, and rt_quant_repack checks dst before its first write.
 */
#include "rt_quant.h"
#include "rt_file.h"
#include "rt_gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const unsigned char awq_slot[8] = {0, 4, 1, 5, 2, 6, 3, 7};

static const char *const format_names[RT_QUANT_FORMAT_COUNT] = {
    [RT_QUANT_GPTQ] = "gptq",
    [RT_QUANT_GPTQ_V2] = "gptq_v2",
    [RT_QUANT_AWQ] = "awq",
};

const char *rt_quant_format_name(RtQuantFormat f)
{
    return (unsigned)f < RT_QUANT_FORMAT_COUNT ? format_names[f] : "?";
}

/* One line "<name>: <message>". */
static KilnStatus qerr(char *err, int errlen, KilnStatus s, const RtQuantSrc *src, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
static KilnStatus qerr(char *err, int errlen, KilnStatus s, const RtQuantSrc *src, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *name = src && src->name ? src->name : "quantized tensor";
    return rt_file_errf(err, errlen, s, "%s: %s", name, msg);
}

/* Element i of a little-endian array at any alignment. */
static uint32_t rd32(const void *p, int64_t i)
{
    uint32_t u;
    memcpy(&u, (const unsigned char *)p + 4 * i, 4);
    return u;
}

static uint16_t rd16(const void *p, int64_t i)
{
    uint16_t u;
    memcpy(&u, (const unsigned char *)p + 2 * i, 2);
    return u;
}

/* f16 bits to bf16 bits, nearest even. Finite inputs only (checked), so no NaN case. */
static uint16_t f16_to_bf16(uint16_t h)
{
    float f = rt_gguf_f16_to_f32(h);
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* The zero point of group g, output n (format's convention applied): 0..15, or 1..16 for gptq v1. */
static int zero_at(const RtQuantSrc *src, int64_t g, int64_t n)
{
    uint32_t word = rd32(src->qzeros, g * (src->N / 8) + n / 8);
    int slot = src->format == RT_QUANT_AWQ ? awq_slot[n % 8] : (int)(n % 8);
    return (int)((word >> (4 * slot)) & 15u) + (src->format == RT_QUANT_GPTQ);
}

/* ---- validation --------------------------------------------------------------------------------------- */

static KilnStatus check_size(const RtQuantSrc *src, const char *what, const void *p, int64_t bytes,
                             int64_t rows, int64_t cols, int elem, char *err, int errlen)
{
    const char *type = elem == 4 ? "i32" : "f16";
    if (!p) return qerr(err, errlen, KILN_ERR_ARG, src, "%s is NULL", what);
    if (bytes != rows * cols * elem)
        return qerr(err, errlen, KILN_ERR_ARG, src, "%s is %lld bytes, but %s [%lld, %lld] is %lld", what,
                    (long long)bytes, type, (long long)rows, (long long)cols,
                    (long long)(rows * cols * elem));
    return KILN_OK;
}

static KilnStatus check_g_idx(const RtQuantSrc *src, char *err, int errlen)
{
    int64_t K = src->K, G = src->G, groups = K / G;
    if (!src->g_idx) {
        if (src->g_idx_bytes)
            return qerr(err, errlen, KILN_ERR_ARG, src, "g_idx is NULL but g_idx_bytes is %lld",
                        (long long)src->g_idx_bytes);
        return KILN_OK;
    }
    if (src->g_idx_bytes != 4 * K)
        return qerr(err, errlen, KILN_ERR_ARG, src, "g_idx is %lld bytes, but i32 [%lld] is %lld",
                    (long long)src->g_idx_bytes, (long long)K, (long long)(4 * K));
    for (int64_t k = 0; k < K; k++) {
        int32_t g = (int32_t)rd32(src->g_idx, k);
        if (g < 0 || g >= groups)
            return qerr(err, errlen, KILN_ERR_CORRUPT, src, "g_idx[%lld] = %d is outside [0, K/G = %lld)",
                        (long long)k, (int)g, (long long)groups);
    }
    for (int64_t k = 0; k < K; k++) {
        int32_t g = (int32_t)rd32(src->g_idx, k);
        if (g != k / G)
            return qerr(
                err, errlen, KILN_ERR_UNSUPPORTED, src,
                "g_idx is act-order (desc_act): input %lld is in group %d, not %lld; kiln's w4a16 "
                "keeps groups contiguous along K (quantize with desc_act=False or static_groups=True)",
                (long long)k, (int)g, (long long)(k / G));
    }
    return KILN_OK;
}

KilnStatus rt_quant_check(const RtQuantSrc *src, char *err, int errlen)
{
    KilnStatus s;
    if (!src) return qerr(err, errlen, KILN_ERR_ARG, NULL, "NULL source");
    if ((unsigned)src->format >= RT_QUANT_FORMAT_COUNT)
        return qerr(err, errlen, KILN_ERR_ARG, src, "unknown checkpoint format %d", (int)src->format);
    const char *fmt = format_names[src->format];
    if (src->bits != 4)
        return qerr(err, errlen, KILN_ERR_UNSUPPORTED, src, "%s bits=%d: kiln's w4a16 takes 4-bit weights",
                    fmt, src->bits);
    int64_t N = src->N, K = src->K, G = src->G;
    if (N < 1 || N > INT32_MAX || K < 1 || K > INT32_MAX)
        return qerr(err, errlen, KILN_ERR_ARG, src, "N = %lld, K = %lld: each must be in [1, 2^31)",
                    (long long)N, (long long)K);
    if (N % 8)
        return qerr(err, errlen, KILN_ERR_ARG, src, "N = %lld is not a multiple of 8 (packed zeros)",
                    (long long)N);
    if (G != 32 && G != 64 && G != 128)
        return qerr(err, errlen, KILN_ERR_UNSUPPORTED, src,
                    "group_size %lld: kiln's w4a16 takes 32, 64 or 128", (long long)G);
    if (K % G)
        return qerr(err, errlen, KILN_ERR_ARG, src, "K = %lld is not a multiple of the group size %lld",
                    (long long)K, (long long)G);
    int awq = src->format == RT_QUANT_AWQ;
    if ((s = check_size(src, "qweight", src->qweight, src->qweight_bytes, awq ? K : K / 8, awq ? N / 8 : N, 4,
                        err, errlen)) ||
        (s = check_size(src, "qzeros", src->qzeros, src->qzeros_bytes, K / G, N / 8, 4, err, errlen)) ||
        (s = check_size(src, "scales", src->scales, src->scales_bytes, K / G, N, 2, err, errlen)) ||
        (s = check_g_idx(src, err, errlen)))
        return s;
    for (int64_t i = 0; i < K / G * N; i++) {
        uint16_t h = rd16(src->scales, i);
        if ((h & 0x7c00u) == 0x7c00u)
            return qerr(err, errlen, KILN_ERR_CORRUPT, src, "scales[%lld, %lld] is %s (f16 0x%04x)",
                        (long long)(i / N), (long long)(i % N), h & 0x3ffu ? "NaN" : "infinite", h);
    }
    return KILN_OK;
}

KilnStatus rt_quant_is_symmetric(const RtQuantSrc *src, int *sym, char *err, int errlen)
{
    if (sym) *sym = 0;
    KilnStatus s = rt_quant_check(src, err, errlen);
    if (s) return s;
    if (!sym) return qerr(err, errlen, KILN_ERR_ARG, src, "NULL sym");
    for (int64_t g = 0; g < src->K / src->G; g++)
        for (int64_t n = 0; n < src->N; n++)
            if (zero_at(src, g, n) != 8) return KILN_OK;
    *sym = 1;
    return KILN_OK;
}

void rt_quant_dst_sizes(const RtQuantSrc *src, RtQuantDst *dst)
{
    if (!dst) return;
    dst->w_len = dst->scales_len = dst->zeros_len = 0;
    if (!src || src->N < 1 || src->N > INT32_MAX || src->K < 1 || src->K > INT32_MAX || src->N % 8 ||
        (src->G != 32 && src->G != 64 && src->G != 128) || src->K % src->G)
        return;
    dst->w_len = src->N * (src->K / 8);
    dst->scales_len = dst->zeros_len = src->N * (src->K / src->G);
}

/* ---- repacking ---------------------------------------------------------------------------------------- */

static KilnStatus check_dst(const RtQuantSrc *src, const RtQuantDst *dst, char *err, int errlen)
{
    int64_t wn = src->N * (src->K / 8), gn = src->N * (src->K / src->G);
    if (!dst) return qerr(err, errlen, KILN_ERR_ARG, src, "NULL destination");
    if (dst->dtype != RT_QUANT_F16 && dst->dtype != RT_QUANT_BF16)
        return qerr(err, errlen, KILN_ERR_ARG, src, "unknown scale dtype %d", (int)dst->dtype);
    if (!dst->w || dst->w_len < wn)
        return qerr(err, errlen, KILN_ERR_ARG, src, "w holds %lld int32, needs [N, K/8] = %lld",
                    dst->w ? (long long)dst->w_len : 0LL, (long long)wn);
    if (!dst->scales || dst->scales_len < gn)
        return qerr(err, errlen, KILN_ERR_ARG, src, "scales hold %lld values, need [N, K/G] = %lld",
                    dst->scales ? (long long)dst->scales_len : 0LL, (long long)gn);
    if (dst->zeros && dst->zeros_len < gn)
        return qerr(err, errlen, KILN_ERR_ARG, src, "zeros hold %lld bytes, need [N, K/G] = %lld",
                    (long long)dst->zeros_len, (long long)gn);
    if (!dst->zeros)
        for (int64_t g = 0; g < src->K / src->G; g++)
            for (int64_t n = 0; n < src->N; n++) {
                int z = zero_at(src, g, n);
                if (z != 8)
                    return qerr(err, errlen, KILN_ERR_ARG, src,
                                "zero point of group %lld, output %lld is %d, not 8: asymmetric weights need "
                                "a zeros array",
                                (long long)g, (long long)n, z);
            }
    return KILN_OK;
}

/* gptq: w[n, j] = qweight[j, n] (j = k/8), the same eight nibbles. */
static void repack_gptq_w(const RtQuantSrc *src, int32_t *w)
{
    int64_t N = src->N, J = src->K / 8;
    for (int64_t j = 0; j < J; j++)
        for (int64_t n = 0; n < N; n++)
            w[n * J + j] = (int32_t)rd32(src->qweight, j * N + n);
}

/* awq: nibble k%8 of w[n, k/8] = nibble slot(n%8) of qweight[k, n/8]. The eight words of qweight
 * [8j..8j+7, c] make the eight words w[8c..8c+7, j]; reading row blocks keeps both sides cache-friendly. */
static void repack_awq_w(const RtQuantSrc *src, int32_t *w)
{
    int64_t N = src->N, J = src->K / 8, C = N / 8;
    for (int64_t j = 0; j < J; j++)
        for (int64_t c = 0; c < C; c++) {
            uint32_t in[8], out[8] = {0};
            for (int i = 0; i < 8; i++)
                in[i] = rd32(src->qweight, (8 * j + i) * C + c); /* k = 8j + i */
            for (int m = 0; m < 8; m++)                          /* n = 8c + m */
                for (int i = 0; i < 8; i++)
                    out[m] |= ((in[i] >> (4 * awq_slot[m])) & 15u) << (4 * i);
            for (int m = 0; m < 8; m++)
                w[(8 * c + m) * J + j] = (int32_t)out[m];
        }
}

/* Each row's words from k order (nibble k % 8 of word k / 8) to the fragment order (rt_quant.h): of each
 * 4 words (32 k), word t takes k = 2t + h + 8i at nibble i + 4h, that is nibble 2t + h of word i. */
static void fragment_order(int32_t *w, int64_t words)
{
    for (int64_t b = 0; b < words; b += 4) {
        uint32_t in[4], out[4] = {0};
        memcpy(in, w + b, sizeof in);
        for (int t = 0; t < 4; t++)
            for (int i = 0; i < 4; i++)
                for (int h = 0; h < 2; h++)
                    out[t] |= ((in[i] >> (4 * (2 * t + h))) & 15u) << (4 * (i + 4 * h));
        memcpy(w + b, out, sizeof out);
    }
}

KilnStatus rt_quant_repack(const RtQuantSrc *src, const RtQuantDst *dst, char *err, int errlen)
{
    KilnStatus s = rt_quant_check(src, err, errlen);
    if (s || (s = check_dst(src, dst, err, errlen))) return s;
    if (src->format == RT_QUANT_AWQ)
        repack_awq_w(src, dst->w);
    else
        repack_gptq_w(src, dst->w);
    fragment_order(dst->w, src->N * (src->K / 8)); /* K is a multiple of G, so of 32 */
    int64_t N = src->N, groups = src->K / src->G;
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < groups; g++) {
            uint16_t h = rd16(src->scales, g * N + n);
            dst->scales[n * groups + g] = dst->dtype == RT_QUANT_BF16 ? f16_to_bf16(h) : h;
            if (dst->zeros) dst->zeros[n * groups + g] = (uint8_t)zero_at(src, g, n);
        }
    return KILN_OK;
}
