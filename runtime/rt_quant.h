/* rt_quant.h — repacks GPTQ and AWQ INT4 checkpoint tensors into kiln's w4a16 layout (the layout the
 * qmatmul kernel family reads, ir/kfam_qmatmul.c and docs/KERNELS.md). Prefix rt_quant_. The two
 * checkpoint layouts, the mapping and what is refused: docs/WEIGHTS.md ("GPTQ and AWQ INT4 checkpoints").
 *
 *     // the tensors of one Linear, e.g. from rt_st_find(ck, "model.layers.0.mlp.down_proj.qweight")
 *     RtQuantSrc src = {.format = RT_QUANT_GPTQ, .name = "model.layers.0.mlp.down_proj",
 *                       .bits = 4, .N = 576, .K = 1536, .G = 128,
 *                       .qweight = qw->data, .qweight_bytes = qw->nbytes,
 *                       .qzeros = qz->data,  .qzeros_bytes = qz->nbytes,
 *                       .scales = sc->data,  .scales_bytes = sc->nbytes,
 *                       .g_idx = gi ? gi->data : NULL, .g_idx_bytes = gi ? gi->nbytes : 0};
 *     char err[512];
 *     int sym;
 *     if (rt_quant_is_symmetric(&src, &sym, err, sizeof err)) fail(err);
 *     RtQuantDst dst = {.dtype = RT_QUANT_BF16};
 *     rt_quant_dst_sizes(&src, &dst);                  // fills w_len, scales_len, zeros_len (elements)
 *     dst.w = malloc(4 * dst.w_len);
 *     dst.scales = malloc(2 * dst.scales_len);
 *     dst.zeros = sym ? NULL : malloc(dst.zeros_len);  // spec zeros=0 or zeros=1
 *     if (rt_quant_repack(&src, &dst, err, sizeof err)) fail(err);
 *
 * kiln's layout, for output feature n < N and input feature k < K (a Linear's weight is [N, K]):
 *     w       int32  [N, K/8]  in the tensor cores' fragment order: of each 32 k of a row (4 words),
 *                              word t holds k = 2t + h + 8i (h < 2, i < 4) at nibble i + 4h, so
 *                              q(n, k) = (w[n, (k & ~31)/8 + (k/2)%4] >> 4*((k/8)%4 + 4*(k%2))) & 15
 *                              (ir/kfam_qmatmul.c: a GPU thread's 8 codes of a 32-k block are one word)
 *     scales  u16    [N, K/G]  f16 or bf16 bits: s(n, k) = scales[n, k/G]
 *     zeros   u8     [N, K/G]  z(n, k) = zeros[n, k/G] (0..16 here; the kernel reads z & 127); without
 *                              zeros (symmetric) z = 8
 *     weight(n, k) = f32(q - z) * f32(s), rounded to the activation dtype by the kernel.
 * The checkpoint's tensors are its bytes as stored (little-endian, any alignment: read with memcpy).
 * This code assumes a little-endian host, as the rest of the runtime does.
 *
 * Errors: a status plus one line that starts with src->name (or "quantized tensor"). Every check runs
 * before the first write, so on an error dst's arrays are untouched. Never aborts.
 * Threads: the functions keep no state; concurrent calls on distinct outputs are fine.
 */
#ifndef KILN_RT_QUANT_H
#define KILN_RT_QUANT_H

#include <stdint.h>

#include "kiln.h"

typedef enum RtQuantFormat {
    RT_QUANT_GPTQ,    /* AutoGPTQ "gptq" (v1): qweight i32 [K/8, N] packed along K, qzeros stores z - 1 */
    RT_QUANT_GPTQ_V2, /* GPTQModel "gptq_v2": as GPTQ, qzeros stores z */
    RT_QUANT_AWQ,     /* AutoAWQ GEMM: qweight i32 [K, N/8] packed along N in AWQ's nibble order, z as is */
    RT_QUANT_FORMAT_COUNT
} RtQuantFormat;

typedef enum RtQuantDtype {
    RT_QUANT_F16, /* scales copied bit for bit */
    RT_QUANT_BF16 /* scales rounded to nearest even (every finite f16 is in bf16's range) */
} RtQuantDtype;

/* One quantized Linear as the checkpoint stores it. All arrays are borrowed; sizes in bytes. */
typedef struct RtQuantSrc {
    RtQuantFormat format;
    const char *name; /* for messages (the Linear's prefix); may be NULL */
    int bits;         /* quantize_config's bits: only 4 is accepted */
    int64_t N, K, G;  /* out_features, in_features, group_size (32, 64 or 128) */
    const void *qweight;
    int64_t qweight_bytes; /* GPTQ: i32 [K/8, N]; AWQ: i32 [K, N/8] */
    const void *qzeros;
    int64_t qzeros_bytes; /* i32 [K/G, N/8], both formats */
    const void *scales;
    int64_t scales_bytes; /* f16 [K/G, N] */
    const void *g_idx;    /* i32 [K] or NULL (AWQ has none; GPTQ's may be the trivial k/G) */
    int64_t g_idx_bytes;
} RtQuantSrc;

/* kiln's arrays, owned by the caller; lengths in elements (at least the sizes above). */
typedef struct RtQuantDst {
    RtQuantDtype dtype;
    int32_t *w;
    int64_t w_len; /* >= N*K/8 */
    uint16_t *scales;
    int64_t scales_len; /* >= N*K/G */
    uint8_t *zeros;     /* NULL: symmetric (every zero must be 8), else zeros_len >= N*K/G */
    int64_t zeros_len;
} RtQuantDst;

/* Checks src without writing anything: a known format, bits 4, N and K in [1, 2^31) with N % 8 == 0,
 * G in {32, 64, 128} with K % G == 0, non-NULL qweight/qzeros/scales of exactly their sizes above, every
 * scale finite, and g_idx (when given) exactly K entries, each in [0, K/G) and equal to k/G. Returns
 * KILN_OK or: KILN_ERR_ARG (NULL src, bad N/K/G, NULL array, byte size off), KILN_ERR_UNSUPPORTED (bits
 * other than 4, a group size kiln's kernel lacks, an act-order g_idx: kiln keeps groups contiguous along
 * K and would need K permuted), KILN_ERR_CORRUPT (a g_idx entry out of range, a NaN or infinite scale). */
KilnStatus rt_quant_check(const RtQuantSrc *src, char *err, int errlen);

/* Sets *sym to 1 when every zero point of src (after the format's convention) is 8, so kiln can drop the
 * zeros array (spec zeros=0), else 0. Runs rt_quant_check first and returns its status (*sym is 0 then). */
KilnStatus rt_quant_is_symmetric(const RtQuantSrc *src, int *sym, char *err, int errlen);

/* Fills dst's w_len, scales_len and zeros_len with the sizes src needs (0 when src's N, K or G are not
 * valid); touches nothing else. */
void rt_quant_dst_sizes(const RtQuantSrc *src, RtQuantDst *dst);

/* Repacks src into dst (layout above). Zero points range over 0..15, except GPTQ v1's 1..16: a stored
 * nibble 15 means z = 16, as AutoGPTQ's and exllama's dequantization read it (kiln's u8 zeros hold it).
 * Returns KILN_OK, or rt_quant_check's errors, or KILN_ERR_ARG for a NULL dst, an unknown dtype, NULL or
 * short output arrays, or dst->zeros NULL while some zero point is not 8. Writes only on KILN_OK. */
KilnStatus rt_quant_repack(const RtQuantSrc *src, const RtQuantDst *dst, char *err, int errlen);

/* "gptq", "gptq_v2", "awq", or "?". */
const char *rt_quant_format_name(RtQuantFormat f);

#endif
