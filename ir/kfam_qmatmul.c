/* kfam_qmatmul.c — weight-only quantized matmul: out[M,N] = x[M,K] @ dequant(w)[N,K]^T with an epilogue.
 * The weights are dequantized inside the K loop, tile by tile, into the activation dtype and fed to `dot`
 * (f32 accumulation); dequantized weights never go to memory.
 *
 * Formats (spec `wfmt`), each as kiln keeps it in GPU memory; q is the stored integer of element (n, k):
 *   "w4a16"  GPTQ/AWQ-style INT4 in groups of G = `group` (32, 64, 128) along K. The loader repacks
 *            checkpoints into this layout:
 *              w       ptr<i32> [N, K/8]   eight nibbles per word in the order of the tensor cores' A
 *                                         fragments: of each 32 k of a row (4 words), word t holds
 *                                         k = 2t + h + 8i (h < 2, i < 4) at nibble i + 4h,
 *                                         q = (w[n, (k & ~31)/8 + (k/2)%4] >> 4*((k/8)%4 + 4*(k%2))) & 15
 *                                         (a thread's pairs (k, k + 1) of a 32-k block are one word, each
 *                                         pair at bits 4i and 16 + 4i: see cg_cuda_nib.c)
 *              scales  ptr<dtype> [N, K/G]  s = scales[n, k/G]
 *              zeros   ptr<u8> [N, K/G]     (spec zeros=1, asymmetric) z = zeros[n, k/G] & 127 (7-bit:
 *                                         checkpoints' are 4-bit); zeros=0: z = 8
 *            value dtype(f32(q - z) * f32(s))
 *   "w8a16"  int8 with one scale per output channel:
 *              w       ptr<i8> [N, K]       q = w[n, k]
 *              scales  ptr<dtype> [N]       s = scales[n]
 *            the B tile is dtype(q) (exact) and the scale multiplies the f32 sum: acc_n * f32(s[n]), before
 *            the epilogue (the same product, without rounding q * s to dtype)
 *   "fp8"    FP8 e4m3fn weights (FP8 checkpoints: vLLM / llm-compressor / ModelOpt), f32 scales:
 *              w       ptr<f8e4m3> [N, K]   q = w[n, k]
 *              scales  ptr<f32> [N]         s = scales[n]; spec scale=tensor: ptr<f32> [1], s = scales[0]
 *            like w8a16: the B tile is dtype(q) (exact: e4m3 values are bf16/f16 values) and acc * s
 *            in f32 before the epilogue; spec group=G (32, 64, 128): block-scaled, scales ptr<f32> [N, K/G]
 * (DeepSeek/Qwen FP8 checkpoints' 128-wide blocks), value dtype(f32(q) * s[n, k/G]) in the K loop W8A8 (spec
 * act=fp8 with wfmt=fp8, act=int8 with wfmt=w8a16): x holds the activations quantized per row by quant_rows
 * (e4m3 or int8) and a param xs ptr<f32> [M] (their row scales) follows x; the dot multiplies the 8-bit
 * values themselves (f8 x f8 -> f32, i8 x i8 -> i32), and the f32 sum of (m, n) is multiplied by xs[m], then
 * by the weight's scale, before the epilogue "q4_0", "q4_1", "q8_0"  GGUF blocks of 32 along K exactly as
 * stored in the file, row n at byte n * (K/32) * B (B = 18, 20, 34 bytes per block), in one param w ptr<u8>;
 * block b of row n holds f16 d (little-endian) [, f16 m for q4_1], then the quants; j = k % 32: q4_0  bytes
 * d, qs[16]:    q = j < 16 ? qs[j] & 15 : qs[j-16] >> 4,  value (q - 8) * d q4_1  bytes d, m, qs[16]: q as
 * q4_0,                                value q * d + m q8_0  bytes d, qs[32] i8: q = qs[j], value q * d
 *            computed in f32 (q * d is exact, q4_1 adds m with one f32 rounding): bit-identical to
 *            rt_gguf_dequant / llama.cpp, then rounded once to dtype for the dot. The halves are read
 *            as two u8 loads and decoded with integer ops, casts and exact products:
 *            (-1)^s * (m + 1024 [e > 0]) * 2^(max(e, 1) - 25) for sign s, exponent e, mantissa m;
 *            non-finite halves (e = 31) decode to unspecified finite values.
 *   "q4_k", "q6_k"  GGUF K-quants: super-blocks of 256 along K as stored, row n at byte n * (K/256) * B
 *            (B = 144, 210); j = k % 256:
 *            q4_k  bytes d, dmin, scales[12], qs[128]: sub-block s = j / 32, q = qs[32(j/64) + j%32] >>
 *                  4(s%2) & 15; s < 4: sc = scales[s] & 63, m = scales[s+4] & 63; else sc = scales[s+4] &
 *                  15 | (scales[s-4] >> 6) << 4, m = scales[s+4] >> 4 | (scales[s] >> 6) << 4; value
 *                  (d * sc) * q - dmin * m
 *            q6_k  bytes ql[128], qh[64], i8 scales[16], d: h = j / 128, u = (j/32) % 4, l = j % 32: q =
 *                  (ql[64h + l + 32(u%2)] >> 4(u/2) & 15 | (qh[32h + l] >> 2u & 3) << 4) - 32, value
 *                  (d * scales[8h + l/16 + 2u]) * q
 *            in f32 in llama.cpp's order (every product exact; q4_k rounds once, at the difference):
 *            bit-identical to rt_gguf_dequant; BK is a multiple of 256, and up to 8 byte loads per element
 *            keep the default tiles narrow (BN 32, 8 warps; BM 64 for large M).
 * Epilogues (the dense matmul family's, docs/KERNELS.md): none, bias, residual, silu_mul (two quantized
 * weights of the same format, gate w and up w2, each with its own scales and zeros), pair (two weights
 * of the same format as silu_mul's, two outputs out = dtype(acc), out2 = dtype(acc2), each bit-identical
 * to epilogue none with its weight at the same config).
 *
 * Spec: N, K, dtype (bf16 | f16 | f32), wfmt, group (w4a16 only: 32, 64 or 128, default 128; GGUF formats
 * accept group=32, the K-quants 256), zeros (w4a16 only, 0 or 1, default 0), sdtype (w4a16: the scales'
 * dtype, f16 or the dtype, default the dtype; packages keep checkpoints' f16 scales as they are, which
 * bf16 kernels round to bf16 before the product; fp8: f32), scale (fp8: channel, default, or tensor), act
 * (dtype, default; fp8 or int8: W8A8, above), epilogue (default none), optional m_hint (typical M; only
 * the default config reads it). K must be a multiple of the group (32 for GGUF formats, 256 for the
 * K-quants); w8a16 and fp8 take any K. M is a runtime parameter.
 * Params, in order, SPLIT_K = 1 (bracketed ones only with their format, epilogue or option):
 *   x        ptr<dtype | f8e4m3 | i8> [M, K]   rdonly  (act=fp8 / int8: quantized, then xs ptr<f32> [M])
 *   w        ptr<i32 | i8 | u8 | f8e4m3>  rdonly   the format's quantized data (above)
 *   [scales  ptr<dtype | f16 | f32>      rdonly]  w4a16, w8a16, fp8
 *   [zeros   ptr<u8>             rdonly]  w4a16 with zeros=1
 *   [w2, scales2, zeros2]                 silu_mul, pair: the second weight, same format
 *   [bias    ptr<dtype> [N]      rdonly]  bias
 *   [r       ptr<dtype> [M, N]]           residual; out may alias r
 *   out      ptr<dtype> [M, N]
 *   [out2    ptr<dtype> [M, N]]           pair: x @ dequant(w2)^T
 *   M        i32
 * SPLIT_K > 1 without ws=1 (epilogue none, bias or residual; silu_mul and pair are INVALID): params x, w,
 * [scales], [zeros], ws, M, with ws ptr<f32> [M, N] zeroed by the caller; program z adds its partial
 * product over K slice [z*KS, z*KS + KS) (KS = cdiv(cdiv(K, SPLIT_K), BK) * BK) into ws with atomic_add,
 * and the dense family's matmul_splitk_epilogue (spec N, dtype, epilogue) finishes. w8a16 and fp8 scale the
 * partial first. Spec ws=1 (any epilogue): split-K reduced in the launch as the dense family's ws=1
 * (kfam_matmul.c): params ws ptr<f32> (KFAM_SPLITK_WS(N)) and sem ptr<i32> (KFAM_SPLITK_SEMS(N), zero at
 * entry, left zero) follow out (out2) at every SPLIT_K; the last program of a tile sums the slices in z
 * order and writes the epilogue; silu_mul and pair keep acc2's slices after acc's (SPLIT_K <= 4). The
 * decode default splits K when few column tiles would leave SMs idle.
 * Grid (cdiv(M, BM), cdiv(N, BN), SPLIT_K).
 * Config: BM, BN, BK, WARPS, STAGES, SPLIT_K as the dense family; BK must be a multiple of the group
 * (32 for GGUF formats, 256 for the K-quants), else the config is INVALID. SWAP (0/1, not with W8A8): 1
 * computes the transposed product out^T = dequant(w) x^T: the dequantized tile [BN,BK] is the dot's A
 * operand, x^T [BK,BM] its B, the accumulator [BN,BM], stored through transposed offsets (the CUDA backend
 * then dequantizes straight into the A fragments' registers; cg_cuda_layout.c). STAGES is the loop's pipeline
 * hint.
 *
 * The K loop keeps the dense family's canonical shape: `for k in [lo, hi) step BK` carrying acc (and acc2);
 * the body loads the A tile [BM,BK] at rows*K + k + cols and builds the B tile [BK,BN] from loads at
 * loop-invariant offset tiles plus a per-trip scalar (k/8 words, k/G groups, k/32 blocks * B bytes), the
 * integer unpacking (shr, and, xor), casts and f32 scale math, then a cast to dtype and `dot` (in the offset
 * tiles, k / 2^s is k >> s and k % 2^s is k & (2^s - 1): equal for k >= 0, and the CUDA axis info reads
 * them as runs, so a packed word or a group scale loads once per run). The scale
 * (and GGUF's f16 halves) is gathered per element of the B tile: a group's lanes read the same address.
 * Offsets are i32: the weight bytes (N*K/2, N*K, N*(K/32)*B) and M*max(N, K) must stay below 2^31.
 *
 * Backends: the interpreter and the LLVM host lowering run this as written. The CUDA backend streams the
 * loop's loads by cp.async STAGES - 1 trips ahead (the dot operands as loaded into shared rings; the
 * packed words of a dequantized tile into per-thread rings, or with SWAP=1 a shared image of one copy per
 * word) and, with SWAP=1, computes the dequantized tile in the A fragments' layout, so it goes from its
 * loads to wgmma or mma.sync without a shared-memory image (docs/KERNELS.md, qmatmul).
 */
#include "kfam_impl.h"

#include <string.h>

extern const KfamFamily kfam_qmatmul;

enum { QF_W4A16, QF_W8A16, QF_Q4_0, QF_Q4_1, QF_Q8_0, QF_FP8, QF_Q4_K, QF_Q6_K };

static const struct {
    const char *name;
    int block;       /* GGUF: elements per block (32, or 256 for the K-quants' super-blocks) */
    int block_bytes; /* GGUF: bytes per block */
    int quant_at;    /* GGUF: offset of the quants (q4_k: qs; q6_k: ql) in a block */
    int half_at;     /* GGUF: offset of the first f16 half (d) in a block */
} formats[] = {
    [QF_W4A16] = {"w4a16", 0, 0, 0, 0},    [QF_W8A16] = {"w8a16", 0, 0, 0, 0},
    [QF_Q4_0] = {"q4_0", 32, 18, 2, 0},    [QF_Q4_1] = {"q4_1", 32, 20, 4, 0},
    [QF_Q8_0] = {"q8_0", 32, 34, 2, 0},    [QF_FP8] = {"fp8", 0, 0, 0, 0},
    [QF_Q4_K] = {"q4_k", 256, 144, 16, 0}, [QF_Q6_K] = {"q6_k", 256, 210, 0, 208},
};

static int format_of(const KfamSpec *s)
{
    const char *f = kfam_spec_s(s, "wfmt", "");
    for (int i = 0; i < (int)(sizeof formats / sizeof formats[0]); i++)
        if (!strcmp(f, formats[i].name)) return i;
    return -1;
}

/* Formats whose scale multiplies the f32 sum of a whole row of K (w8a16, fp8): one byte per element. */
static int per_row_scale(int fmt)
{
    return fmt == QF_W8A16 || fmt == QF_FP8;
}

/* Elements along K that share one scale: the group (w4a16; fp8 with group=), a GGUF block (the
 * K-quants' super-block of 256), or 1 (w8a16, fp8: the scale multiplies the row's sum). */
static int64_t group_of(const KfamSpec *s, int fmt)
{
    if (fmt == QF_W4A16) return kfam_spec_i(s, "group", 128);
    if (fmt == QF_FP8) return kfam_spec_i(s, "group", 1);
    return per_row_scale(fmt) ? 1 : formats[fmt].block;
}

/* Is the B tile of format fmt with group g dequantized in the K loop (else it is the codes themselves, at
 * most cast: w8a16 and per-channel fp8, whose scale multiplies the row's sum; W8A8's codes the dot
 * pipelines itself)? */
static int b_computed(int fmt, int64_t g)
{
    return !(per_row_scale(fmt) && g == 1);
}

/* The host's defaults (facts->cpu; the dense family's reasons, kfam_matmul.c): the B tile is dequantized
 * per trip whatever the rows, so a decode step (m_hint 1) takes 1 row x 1 column x one group of K (32
 * for the GGUF blocks: one block a trip) per program, the dequantization's tiles a few dozen elements; 16
 * rows (m_hint <= 16) x 8 columns (as fast as 16 columns, half the LLVM time); else 128 rows x 32 columns
 * (prefill: each dequantized tile feeds 128 rows). SWAP=0 (a plain [BM,BK] x [BK,BN] dot; BM < 16 is fine on
 * a CPU), one warp, no stages, no split. Measured on SmolLM2's q4_1 shapes with bench/hbench.c
 * (docs/BACKENDS.md, "Host tiles"). */
static void qmatmul_host_defaults(int64_t N, int64_t m, int64_t g, KirConfig *cfg)
{
    int64_t bm = m == 1 ? 1 : m > 0 && m <= 16 ? 16 : 128;
    kir_config_set(cfg, "BM", bm);
    kir_config_set(cfg, "BN", kfam_clamp(kfam_pow2_ceil(N), 1, bm == 1 ? 1 : bm == 16 ? 8 : 32));
    kir_config_set(cfg, "BK", kfam_pow2_ceil(g < 32 ? 32 : g));
    kir_config_set(cfg, "WARPS", 1);
    kir_config_set(cfg, "STAGES", 1);
    kir_config_set(cfg, "SPLIT_K", 1);
    kir_config_set(cfg, "SWAP", 0);
}

/* Decode (small M, m_hint <= 64): pow2(m_hint) rows in [16, 64] (16: one mma row block), N tiles narrow
 * enough for about one program per SM (and BK x BN <= 128 x 64: Llama-3-8B's 28672 x 4096 at 128 x 128
 * needed ~272 registers per thread) and 128-long K steps (a few groups or blocks per trip: more bytes in
 * flight), 4 warps; with ws=1 and K >= 4096, K split in the launch and 8 warps (below). Large or unknown M:
 * 128x128 tiles (64 wide for the two accumulators and
 * dequantized tiles of silu_mul and pair), 8 warps, 3 stages; W8A8 (act=fp8: 128 x 256 x 128, int8: 128 x
 * 128 x 128), 4 stages: wgmma k32 reads whole 128-byte rows of 8-bit codes, and the 1-byte images leave room
 * for the wide tile. BK is
 * at least the group and at most pow2(K); stages (4 for decode, else 3) drop until the dot operands'
 * pipeline fits 200/227 of a program's shared memory (200 KiB on sm_90a). w4a16 with N, K >= 128: SWAP=1
 * (below). Program counts are fractions of the facts' SMs chosen so that sm_90a's 132 give the counts the
 * rules were measured with; the measurements: docs/KERNELS.md, "Why the defaults are what they are". */
static void qmatmul_defaults(const KfamSpec *s, const KfamFacts *facts, KirConfig *cfg)
{
    int64_t N = kfam_spec_i(s, "N", 4096), K = kfam_spec_i(s, "K", 4096), m = kfam_spec_i(s, "m_hint", 0);
    int fmt = format_of(s), two = kfam_epilogue_two_weights(kfam_epilogue_of(s));
    int small_m = m > 0 && m <= 64;
    int64_t g = fmt >= 0 ? group_of(s, fmt) : 32;
    if (facts->cpu) {
        qmatmul_host_defaults(N, m, g, cfg);
        return;
    }
    int64_t bm = small_m ? kfam_clamp(kfam_pow2_ceil(m), 16, 64) : 128;
    int64_t bn = kfam_clamp(kfam_pow2_ceil(N), 32, small_m || !two ? 128 : 64);
    while (small_m && bn > 32 && N / bn < facts->sms * 10 / 11)
        bn /= 2; /* decode streams weights: tiles for 10/11 of the SMs at least */
    const char *act = kfam_spec_s(s, "act", "dtype");
    int f8 = !strcmp(act, "fp8") || !strcmp(act, "int8"), esz = f8 ? 1 : 2; /* W8A8: 8-bit operands */
    int64_t bk = kfam_clamp(kfam_pow2_ceil(K), 32, small_m || f8 ? 128 : 64);
    if (bk < g) bk = kfam_pow2_ceil(g);
    if (f8 && !small_m && !two) /* int8 wgmma stops at n224 */
        bn = kfam_clamp(kfam_pow2_ceil(N), 32, !strcmp(act, "fp8") ? 256 : 128);
    while (small_m && bn > 32 && bk * bn > 128 * 64)
        bn /= 2; /* the dequantized [BK, BN] tile and its offset tiles stay within the registers */
    if (g == 256 && !small_m) { /* K-quants: up to 8 byte loads per element of a [256, BN] tile */
        bm = 64;
        bn = 32;
    }
    kir_config_set(cfg, "BM", bm);
    kir_config_set(cfg, "BN", bn);
    kir_config_set(cfg, "BK", bk);
    int64_t stage_bytes = (two ? 2 : 1) * (bm * bk + bk * bn) * esz, stages = small_m || f8 ? 4 : 3;
    while (stages > 1 && stages * stage_bytes > (int64_t)facts->smem_block * 200 / 227)
        stages--; /* the dot operands' pipeline leaves the rest of shared memory to the other tiles */
    if (fmt >= 0 && !f8)
        stages = 1; /* a B tile computed for the generic dot (dequantized, or cast): the loop is bound by
                     * its own instructions, so streaming its loads (STAGES > 1) does not pay; SWAP=1
                     * below streams */
    /* decode with split-K in the launch (ws=1): K slices of at least 512 (4 trips of 128), up to 8 slices
     * and about 31 programs per SM (1024/33 of the SMs: 4096 on sm_90a), 8 warps: each program's loads
     * are synchronous, so bytes in flight come from many resident programs */
    int64_t split = 1, tiles = kfam_cdiv(N, bn), warps = small_m ? 4 : 8;
    if (kfam_spec_i(s, "ws", 0) && small_m && bm <= KFAM_SPLITK_ROWS && K >= 4096) {
        /* silu_mul and pair: two accumulators' slices share the workspace (at most 4 slices each) */
        while (split < KFAM_SPLITK_MAX / (two ? 2 : 1) && tiles * split * 2 <= facts->sms * 1024 / 33 &&
               K / (split * 2) >= 512 && K / (split * 2) >= bk)
            split *= 2;
        if (split > 1) warps = 8;
    }
    if (g == 256) warps = 8; /* the K-quants' tile over 4 warps needs ~288 registers a thread */
    kir_config_set(cfg, "WARPS", warps);
    kir_config_set(cfg, "STAGES", stages);
    kir_config_set(cfg, "SPLIT_K", split);
    kir_config_set(cfg, "SWAP", 0);
    if (fmt != QF_W4A16 || N < 128 || K < 128) return;
    /* w4a16: SWAP=1, 128 weight rows on 8 warps, dequantized in the A fragments' registers (the packed
     * words streamed trips ahead; silu_mul and pair dequantize their second weight after the first's
     * dot), where SWAP=0 reads the fragment-ordered words one per element. */
    kir_config_set(cfg, "SWAP", 1);
    kir_config_set(cfg, "BN", 128);
    kir_config_set(cfg, "BK", 128);
    kir_config_set(cfg, "WARPS", 8);
    if (!small_m) { /* two accumulators of [128, 128] would not fit the registers: BM 64; 2 stages, what
                     * the shared memory left for the streamed loads' images holds at 3 requested */
        kir_config_set(cfg, "BM", two ? 64 : 128);
        kir_config_set(cfg, "STAGES", 2);
        return; /* SPLIT_K is 1 (above) */
    }
    /* decode: two programs per SM (MIN_BLOCKS 2: BM = 64 needs 134 registers unbounded, which leaves one
     * program per SM; M <= 16 stay below 128); with K split in the launch (ws=1, K >= 4096), K split only
     * until the programs fill 8/11 (about 3/4) of those resident at once (2 per SM: 264 on sm_90a): one
     * long pipeline per program beats waves of short ones, each with its fill and its slice reduction; 3
     * stages: a 4th is no faster unsplit and slower with K split; too few tiles of 128 rows for the SMs
     * even split the most: 64 rows on 4 warps (mma.sync) */
    int64_t resident = 2 * (int64_t)facts->sms; /* MIN_BLOCKS 2: programs that run at once */
    kir_config_set(cfg, "STAGES", 3);
    kir_config_set(cfg, "MIN_BLOCKS", 2);
    /* M <= 16, one weight, b16 x: 256-long K steps (half the trips' fixed cost: copies, barrier, wgmma
     * issue; at M = 64 the longer steps lose; 127 registers, no spills; f32 x spills) */
    const char *dtn = kfam_spec_s(s, "dtype", "bf16");
    int b16 = !strcmp(dtn, "bf16") || !strcmp(dtn, "f16");
    if (bm == 16 && !two && K % 256 == 0 && b16) kir_config_set(cfg, "BK", 256);
    int64_t rows = kfam_cdiv(N, 128) * KFAM_SPLITK_MAX / (two ? 2 : 1) < facts->sms ? 64 : 128;
    kir_config_set(cfg, "BN", rows);
    if (rows == 64) kir_config_set(cfg, "WARPS", 4);
    tiles = kfam_cdiv(N, rows), split = 1;
    while (kfam_spec_i(s, "ws", 0) && K >= 4096 && bm <= KFAM_SPLITK_ROWS &&
           split < KFAM_SPLITK_MAX / (two ? 2 : 1) && tiles * split < resident * 8 / 11 &&
           K / (split * 2) >= 512)
        split *= 2;
    kir_config_set(cfg, "SPLIT_K", split);
    /* M <= 8: BM 8 (one n8 fragment of x: half the x copies and mma of BM 16), BK 256, 64-row programs of
     * 4 warps (one warpgroup: wgmma m64n8) (silu_mul and pair: 32 rows on 2 warps, mma.sync), K split in the
     * launch (ws=1, K >= 4096, slices >= 512) while the programs stay within 64/33 of those resident (about
     * 4 per SM: 512 on sm_90a); taken when that gives every SM two programs: with fewer it loses to the
     * form above */
    int64_t rows8 = two ? 32 : 64, tiles8 = kfam_cdiv(N, rows8), split8 = 1;
    while (kfam_spec_i(s, "ws", 0) && K >= 4096 && split8 < KFAM_SPLITK_MAX / (two ? 2 : 1) &&
           tiles8 * split8 * 2 <= resident * 64 / 33 && K / (split8 * 2) >= 512)
        split8 *= 2;
    if (m <= 8 && K % 256 == 0 && tiles8 * split8 >= resident && b16) {
        kir_config_set(cfg, "BM", 8);
        kir_config_set(cfg, "BN", rows8);
        kir_config_set(cfg, "BK", 256);
        kir_config_set(cfg, "WARPS", rows8 / 16);
        kir_config_set(cfg, "SPLIT_K", split8);
    }
}

/* One quantized weight's params. */
typedef struct QWeight {
    KirValue *w, *scales, *zeros;
} QWeight;

/* What the B tile's dequantization needs, loop-invariant: offset tiles [BK,BN] ([BN,BK] with swap) at
 * k = 0 and shifts. */
typedef struct QTile {
    int fmt;
    KirDtype dt;
    int64_t group, block_bytes;
    KirValue *q_offs;    /* element (w8a16), word (w4a16) or quant byte (GGUF) of (k0 + kk, n) */
    KirValue *s_offs;    /* scale (w4a16) or block start (GGUF) of (k0 + kk, n) */
    KirValue *shift;     /* nibble shift, the tiles' shape (w4a16, q4_0, q4_1, q4_k; q6_k: ql's) */
    KirValue *shift2;    /* q6_k: the shift of qh's 2 bits */
    KirValue *hi;        /* q4_k: 1 where the sub-block is 4..7 (its 6-bit scale and min are split), else 0 */
    KirValue *e_offs[3]; /* K-quants' other bytes of (k0 + kk, n): q4_k scales[sub], [sub + 4],
                          * [sub % 4]; q6_k qh, scales */
    int n_e;
    int swap; /* SWAP=1: every B-tile value is [BN,BK] (the dot's A operand) */
    /* a CPU's q4_0 / q4_1 / q8_0 with BK one block: the block's halves are loaded and decoded once per
     * column, [1,BN] ([BN,1] with swap) at s_offs, masked by nmask1, and broadcast over the block's
     * elements; a GPU's lanes each load and decode their own (parallel, and the loads coalesce), a CPU's
     * would do it BK times over */
    int per_block;
    KirValue *nmask1; /* the columns' mask in the halves' shape, or NULL */
} QTile;

/* The f32 value of IEEE half bits (an i32 tile of values in [0, 65535]): see the design note. */
static KirValue *half_to_f32(KirBuilder *b, KirValue *bits)
{
    KirValue *c1 = kir_const_i32(b, 1);
    KirValue *e = kir_binary(b, KIR_OP_AND, kir_binary(b, KIR_OP_SHR, bits, kir_const_i32(b, 10)),
                             kir_const_i32(b, 31));
    KirValue *man =
        kir_binary(b, KIR_OP_OR, kir_binary(b, KIR_OP_AND, bits, kir_const_i32(b, 1023)),
                   kir_binary(b, KIR_OP_SHL, kir_binary(b, KIR_OP_MIN, e, c1), kir_const_i32(b, 10)));
    KirValue *sign =
        kir_sub(b, c1, kir_binary(b, KIR_OP_SHL, kir_binary(b, KIR_OP_SHR, bits, kir_const_i32(b, 15)), c1));
    KirValue *ee = kir_binary(b, KIR_OP_MIN, kir_binary(b, KIR_OP_MAX, e, c1), kir_const_i32(b, 30));
    KirValue *p2 = kir_cast(b, kir_binary(b, KIR_OP_SHL, c1, ee), KIR_F32);
    KirValue *v = kir_mul(b, kir_cast(b, kir_mul(b, man, sign), KIR_F32), p2);
    return kir_mul(b, v, kir_const_f(b, KIR_F32, 1.0 / 33554432.0)); /* 2^-25 */
}

/* Half bits (lo | hi << 8 of two u8 tiles) as f32. */
static KirValue *half_of(KirBuilder *b, KirValue *lo, KirValue *hi)
{
    lo = kir_cast(b, lo, KIR_I32);
    hi = kir_cast(b, hi, KIR_I32);
    return half_to_f32(b, kir_binary(b, KIR_OP_OR, lo, kir_binary(b, KIR_OP_SHL, hi, kir_const_i32(b, 8))));
}

/* x / p for x >= 0 and p a power of two, as a shift: the CUDA backend's axis info sees that x >> s is
 * constant over aligned runs of 2^s (so packed words and group scales load once per run); x / p is not
 * for negative x, so it gets no such fact. */
static KirValue *div_pow2(KirBuilder *b, KirValue *x, int64_t p)
{
    int s = 0;
    while (((int64_t)1 << s) < p)
        s++;
    return kir_binary(b, KIR_OP_SHR, x, kir_const_i32(b, s));
}

/* The loads of one K step's B tile (its leaves: codes or words, scales, zero points, GGUF block halves)
 * and what dequant_math makes of them (the CUDA backend may stream the loads trips ahead). */
enum { Q_LEAVES = 8 };
typedef struct QLeaves {
    KirValue *v[Q_LEAVES];
    int n;
} QLeaves;

/* Issues the loads of the B tile for the K step starting at k (a multiple of BK), masked by m. */
static void dequant_loads(KirBuilder *b, const QTile *t, const QWeight *qw, KirValue *k, KirValue *m,
                          QLeaves *lv)
{
    lv->n = 0;
    if (per_row_scale(t->fmt) || t->fmt == QF_FP8) {
        lv->v[lv->n++] = kir_load(b, qw->w, kir_add(b, t->q_offs, k), m, NULL);
        if (t->fmt == QF_FP8 && t->group > 1)
            lv->v[lv->n++] = kir_load(
                b, qw->scales, kir_add(b, t->s_offs, kir_div(b, k, kir_const_i32(b, t->group))), m, NULL);
        return;
    }
    if (t->fmt == QF_W4A16) {
        KirValue *g_offs = kir_add(b, t->s_offs, kir_div(b, k, kir_const_i32(b, t->group)));
        lv->v[lv->n++] =
            kir_load(b, qw->w, kir_add(b, t->q_offs, kir_div(b, k, kir_const_i32(b, 8))), m, NULL);
        lv->v[lv->n++] = kir_load(b, qw->scales, g_offs, m, NULL);
        if (qw->zeros) lv->v[lv->n++] = kir_load(b, qw->zeros, g_offs, m, NULL);
        return;
    }
    KirValue *step = kir_mul(b, kir_div(b, k, kir_const_i32(b, t->group)), kir_const_i32(b, t->block_bytes));
    KirValue *blk = kir_add(b, t->s_offs, step);
    lv->v[lv->n++] = kir_load(b, qw->w, kir_add(b, t->q_offs, step), m, NULL);
    /* d (q4_1: and m; q4_k: and dmin): little-endian halves, byte by byte */
    for (int i = 0; i < (t->fmt == QF_Q4_1 || t->fmt == QF_Q4_K ? 4 : 2); i++)
        lv->v[lv->n++] = kir_load(b, qw->w, i ? kir_add(b, blk, kir_const_i32(b, i)) : blk,
                                  t->per_block ? t->nmask1 : m, NULL);
    for (int i = 0; i < t->n_e; i++)
        lv->v[lv->n++] = kir_load(b, qw->w, kir_add(b, t->e_offs[i], step), m, NULL);
}

/* The f32 value of a K-quant element from its leaves, in llama.cpp's order (dequantize_row_q4_K / q6_K):
 * q4_k: (d * sc) * q - dmin * m, each product exact in f32, one rounding at the difference; q6_k:
 * (d * sc) * (q - 32), exact (11 + 8 + 6 bits). */
static KirValue *kquant_math(KirBuilder *b, const QTile *t, KirValue *const *lv)
{
    KirValue *c4 = kir_const_i32(b, 4), *q = kir_cast(b, lv[0], KIR_I32);
    q = kir_binary(b, KIR_OP_AND, kir_binary(b, KIR_OP_SHR, q, t->shift), kir_const_i32(b, 15));
    if (t->fmt == QF_Q6_K) {
        KirValue *h =
            kir_binary(b, KIR_OP_AND, kir_binary(b, KIR_OP_SHR, kir_cast(b, lv[3], KIR_I32), t->shift2),
                       kir_const_i32(b, 3));
        q = kir_sub(b, kir_binary(b, KIR_OP_OR, q, kir_binary(b, KIR_OP_SHL, h, c4)), kir_const_i32(b, 32));
        KirValue *sc =
            kir_sub(b, kir_binary(b, KIR_OP_XOR, kir_cast(b, lv[4], KIR_I32), kir_const_i32(b, 128)),
                    kir_const_i32(b, 128)); /* the i8 scale */
        KirValue *ds = kir_mul(b, half_of(b, lv[1], lv[2]), kir_cast(b, sc, KIR_F32));
        return kir_mul(b, ds, kir_cast(b, q, KIR_F32));
    }
    /* q4_k's 6-bit scale and min of sub-block s (get_scale_min_k4): s < 4: A & 63, B & 63; else
     * (B & 15) | (C >> 6) << 4, B >> 4 | (A >> 6) << 4, with A = scales[s], B = scales[s + 4], C =
     * scales[s - 4] */
    KirValue *A = kir_cast(b, lv[5], KIR_I32), *B = kir_cast(b, lv[6], KIR_I32),
             *C = kir_cast(b, lv[7], KIR_I32);
    KirValue *c6 = kir_const_i32(b, 6), *c63 = kir_const_i32(b, 63), *c15 = kir_const_i32(b, 15);
    KirValue *hi = kir_binary(b, KIR_OP_NE, t->hi, kir_const_i32(b, 0));
    KirValue *sc = kir_select(b, hi,
                              kir_binary(b, KIR_OP_OR, kir_binary(b, KIR_OP_AND, B, c15),
                                         kir_binary(b, KIR_OP_SHL, kir_binary(b, KIR_OP_SHR, C, c6), c4)),
                              kir_binary(b, KIR_OP_AND, A, c63));
    KirValue *mn = kir_select(b, hi,
                              kir_binary(b, KIR_OP_OR, kir_binary(b, KIR_OP_SHR, B, c4),
                                         kir_binary(b, KIR_OP_SHL, kir_binary(b, KIR_OP_SHR, A, c6), c4)),
                              kir_binary(b, KIR_OP_AND, B, c63));
    KirValue *d1 = kir_mul(b, half_of(b, lv[1], lv[2]), kir_cast(b, sc, KIR_F32));
    KirValue *m1 = kir_mul(b, half_of(b, lv[3], lv[4]), kir_cast(b, mn, KIR_F32));
    return kir_sub(b, kir_mul(b, d1, kir_cast(b, q, KIR_F32)), m1);
}

/* The dtype B tile [BK,BN] ([BN,BK] with swap) from its leaves (dequant_loads). */
static KirValue *dequant_math(KirBuilder *b, const QTile *t, const QWeight *qw, KirValue *const *lv)
{
    KirValue *v;
    if (!b_computed(t->fmt, t->group)) /* int8, e4m3 are exact in bf16/f16/f32; W8A8 as is */
        return lv[0]->type.dtype == t->dt ? lv[0] : kir_cast(b, lv[0], t->dt);
    if (t->fmt == QF_FP8) /* block-scaled e4m3: dtype(f32(q) * f32(s[n, k/G])) */
        return kir_cast(b, kir_mul(b, kir_cast(b, lv[0], KIR_F32), lv[1]), t->dt);
    if (t->fmt == QF_W4A16) {
        KirValue *q =
            kir_binary(b, KIR_OP_AND, kir_binary(b, KIR_OP_SHR, lv[0], t->shift), kir_const_i32(b, 15));
        /* f32(q) - f32(z), exact (both below 2^24) and each a conversion of a value of a few bits, which
         * the CUDA backend makes with integer ops instead of the slower int-to-float unit; zero points are
         * 7-bit (the byte's top bit is ignored), so 128 + z is a bf16 value and the CUDA backend's b16
         * pairs subtract it at once */
        KirValue *z =
            qw->zeros
                ? kir_cast(b, kir_binary(b, KIR_OP_AND, kir_cast(b, lv[2], KIR_I32), kir_const_i32(b, 127)),
                           KIR_F32)
                : kir_const_f(b, KIR_F32, 8);
        KirValue *qf = kir_sub(b, kir_cast(b, q, KIR_F32), z), *sc = lv[1];
        /* f16 scales with bf16 activations: each scale rounded to bf16 first (nearest even, 2^-9 of it,
         * as vLLM's Marlin does at load), so the CUDA backend's bf16 pairs multiply it in b16 */
        if (sc->type.dtype == KIR_F16 && t->dt == KIR_BF16) sc = kir_cast(b, sc, KIR_BF16);
        v = kir_mul(b, qf, kir_cast(b, sc, KIR_F32));
        return kir_cast(b, v, t->dt);
    }
    if (t->fmt == QF_Q4_K || t->fmt == QF_Q6_K) return kir_cast(b, kquant_math(b, t, lv), t->dt);
    KirValue *q = kir_cast(b, lv[0], KIR_I32);
    if (t->fmt == QF_Q8_0) /* the i8 value as f32((u ^ 128)) - 128 (exact), as for w4a16 above */
        q = kir_binary(b, KIR_OP_XOR, q, kir_const_i32(b, 128));
    else
        q = kir_binary(b, KIR_OP_AND, kir_binary(b, KIR_OP_SHR, q, t->shift), kir_const_i32(b, 15));
    KirValue *qf = kir_cast(b, q, KIR_F32);
    if (t->fmt != QF_Q4_1) qf = kir_sub(b, qf, kir_const_f(b, KIR_F32, t->fmt == QF_Q8_0 ? 128 : 8));
    int rows = qf->type.shape[0], cols = qf->type.shape[1]; /* per block: [1,BN] -> [BK,BN] */
    KirValue *dh = half_of(b, lv[1], lv[2]);
    v = kir_mul(b, qf, t->per_block ? kir_broadcast(b, dh, rows, cols) : dh);
    if (t->fmt == QF_Q4_1) {
        KirValue *mh = half_of(b, lv[3], lv[4]);
        v = kir_add(b, v, t->per_block ? kir_broadcast(b, mh, rows, cols) : mh);
    }
    return kir_cast(b, v, t->dt);
}

/* The [BK,BN] tile x[k] op y[n], or with t->swap its [BN,BK] transpose. */
static KirValue *kn_outer(KirBuilder *b, const QTile *t, KirOp op, KirValue *x, KirValue *y)
{
    return t->swap ? kfam_outer(b, op, y, x) : kfam_outer(b, op, x, y);
}

/* [BK] -> the B tile's shape, constant along n. */
static KirValue *k_bcast(KirBuilder *b, const QTile *t, KirValue *x, int bn)
{
    return t->swap ? kfam_cols(b, x, bn) : kfam_rows(b, x, bn);
}

/* Loop-invariant offsets of the B tile for rows rk [BK] (k0 = 0) and columns rn [BN]. */
static void qtile_init(KirBuilder *b, QTile *t, int64_t K, KirValue *rk, KirValue *rn)
{
    int bn = rn->type.shape[0];
    t->shift = t->shift2 = t->hi = NULL;
    t->n_e = 0;
    if (per_row_scale(t->fmt)) {
        t->q_offs = kn_outer(b, t, KIR_OP_ADD, rk, kir_mul(b, rn, kir_const_i32(b, K)));
        t->s_offs = t->group == 1 ? NULL
                                  : kn_outer(b, t, KIR_OP_ADD, div_pow2(b, rk, t->group),
                                             kir_mul(b, rn, kir_const_i32(b, K / t->group)));
        return;
    }
    if (t->fmt == QF_W4A16) { /* the fragment order above; k0 is a multiple of 32 */
        KirValue *c3 = kir_const_i32(b, 3);
        KirValue *word = kir_add(b, kir_mul(b, div_pow2(b, rk, 32), kir_const_i32(b, 4)),
                                 kir_binary(b, KIR_OP_AND, div_pow2(b, rk, 2), c3));
        KirValue *nib =
            kir_add(b, kir_binary(b, KIR_OP_AND, div_pow2(b, rk, 8), c3),
                    kir_mul(b, kir_binary(b, KIR_OP_AND, rk, kir_const_i32(b, 1)), kir_const_i32(b, 4)));
        t->q_offs = kn_outer(b, t, KIR_OP_ADD, word, kir_mul(b, rn, kir_const_i32(b, K / 8)));
        t->s_offs = kn_outer(b, t, KIR_OP_ADD, div_pow2(b, rk, t->group),
                             kir_mul(b, rn, kir_const_i32(b, K / t->group)));
        t->shift = k_bcast(b, t, kir_mul(b, nib, kir_const_i32(b, 4)), bn);
        return;
    }
    int B = (int)t->group; /* a GGUF block */
    KirValue *cb = kir_const_i32(b, t->block_bytes);
    KirValue *row = kir_mul(b, rn, kir_const_i32(b, K / B * t->block_bytes)); /* [BN] */
    KirValue *blk = kir_mul(b, div_pow2(b, rk, B), cb);                       /* [BK] */
    KirValue *j = kir_binary(b, KIR_OP_AND, rk, kir_const_i32(b, B - 1));     /* [BK] k % B */
    KirValue *byte, *c4 = kir_const_i32(b, 4);
    if (t->fmt == QF_Q4_K) {
        /* chunk c = j / 64 of qs[32c + j % 32], low nibbles then high; sub-block j / 32 */
        KirValue *sub = div_pow2(b, j, 32);
        byte = kir_add(b, kir_mul(b, div_pow2(b, j, 64), kir_const_i32(b, 32)),
                       kir_binary(b, KIR_OP_AND, j, kir_const_i32(b, 31)));
        t->shift = k_bcast(b, t, kir_mul(b, kir_binary(b, KIR_OP_AND, sub, kir_const_i32(b, 1)), c4), bn);
        t->hi = k_bcast(b, t, div_pow2(b, sub, 4), bn);
        KirValue *at[3] = {kir_add(b, sub, c4), kir_add(b, sub, kir_const_i32(b, 8)),
                           kir_add(b, kir_binary(b, KIR_OP_AND, sub, kir_const_i32(b, 3)), c4)};
        for (int i = 0; i < 3; i++)
            t->e_offs[t->n_e++] = kn_outer(b, t, KIR_OP_ADD, kir_add(b, blk, at[i]), row);
    } else if (t->fmt == QF_Q6_K) {
        /* half h = j / 128, quarter u = (j / 32) % 4, l = j % 32: ql[64h + l + 32(u % 2)] >> 4(u / 2),
         * qh[32h + l] >> 2u, scales[8h + l / 16 + 2u] */
        KirValue *h = div_pow2(b, j, 128),
                 *u = kir_binary(b, KIR_OP_AND, div_pow2(b, j, 32), kir_const_i32(b, 3));
        KirValue *l = kir_binary(b, KIR_OP_AND, j, kir_const_i32(b, 31));
        byte = kir_add(b, kir_add(b, kir_mul(b, h, kir_const_i32(b, 64)), l),
                       kir_mul(b, kir_binary(b, KIR_OP_AND, u, kir_const_i32(b, 1)), kir_const_i32(b, 32)));
        t->shift = k_bcast(b, t, kir_mul(b, div_pow2(b, u, 2), c4), bn);
        t->shift2 = k_bcast(b, t, kir_mul(b, u, kir_const_i32(b, 2)), bn);
        KirValue *qh = kir_add(b, kir_add(b, kir_mul(b, h, kir_const_i32(b, 32)), l), kir_const_i32(b, 128));
        KirValue *sc = kir_add(b, kir_add(b, kir_mul(b, h, kir_const_i32(b, 8)), div_pow2(b, l, 16)),
                               kir_add(b, kir_mul(b, u, kir_const_i32(b, 2)), kir_const_i32(b, 192)));
        t->e_offs[t->n_e++] = kn_outer(b, t, KIR_OP_ADD, kir_add(b, blk, qh), row);
        t->e_offs[t->n_e++] = kn_outer(b, t, KIR_OP_ADD, kir_add(b, blk, sc), row);
    } else {
        byte = t->fmt == QF_Q8_0 ? j : kir_binary(b, KIR_OP_AND, j, kir_const_i32(b, 15));
        if (t->fmt != QF_Q8_0) t->shift = k_bcast(b, t, kir_mul(b, div_pow2(b, j, 16), c4), bn);
    }
    t->q_offs = kn_outer(b, t, KIR_OP_ADD,
                         kir_add(b, blk, kir_add(b, byte, kir_const_i32(b, formats[t->fmt].quant_at))), row);
    if (t->per_block) { /* the block's start is the same for every kk: one row (column with swap) */
        int one[1] = {1};
        KirValue *h1 = kir_splat(b, kir_const_i32(b, formats[t->fmt].half_at), 1, one);
        t->s_offs = kn_outer(b, t, KIR_OP_ADD, h1, row);
        return;
    }
    KirValue *half =
        formats[t->fmt].half_at ? kir_add(b, blk, kir_const_i32(b, formats[t->fmt].half_at)) : blk;
    t->s_offs = kn_outer(b, t, KIR_OP_ADD, half, row);
}

/* acc * f32(scales[n]) for w8a16's and fp8's per-channel scale; fp8 scale=tensor: acc * scales[0]. acc is
 * [BM,BN], or [BN,BM] with swap. */
static KirValue *channel_scale(KirBuilder *b, KirValue *acc, KirValue *scales, KirValue *rn, KirValue *nmask,
                               int tensor, int swap)
{
    if (tensor) return kir_mul(b, acc, kir_load(b, scales, kir_const_i32(b, 0), NULL, NULL));
    KirValue *s = kir_cast(b, kir_load(b, scales, rn, nmask, NULL), KIR_F32);
    return kir_mul(b, acc, swap ? kfam_rows(b, s, acc->type.shape[1]) : kfam_cols(b, s, acc->type.shape[0]));
}

static void qweight_params(KirBuilder *b, int fmt, KirDtype dt, int zeros, const char *const names[3],
                           QWeight *qw)
{ /* dt: the scales' dtype */
    KirDtype wt = fmt == QF_W4A16 ? KIR_I32 : fmt == QF_W8A16 ? KIR_I8 : fmt == QF_FP8 ? KIR_F8E4M3 : KIR_U8;
    qw->w = kir_param(b, names[0], kir_ptr(wt), KIR_PARAM_RDONLY);
    /* scales: a package tensor of their own (noalias: the per-channel vector is read where each
     * accumulator element needs it, cg_cuda_layout.c virt_load) */
    qw->scales = fmt == QF_W4A16 || per_row_scale(fmt)
                     ? kir_param(b, names[1], kir_ptr(dt), KIR_PARAM_RDONLY | KIR_PARAM_NOALIAS)
                     : NULL;
    qw->zeros = zeros ? kir_param(b, names[2], kir_ptr(KIR_U8), KIR_PARAM_RDONLY) : NULL;
}

/* What a K step's loads need: the tiling, the B tile's offsets, the weights, the A tile's offsets and
 * masks. */
typedef struct QLoop {
    const KfamMmTiles *mt;
    const QTile *t;
    const QWeight *qw, *qw2;
    KirValue *x, *a_base, *a_mask, *b_mask, *zero;
    int64_t K;
    int bm, bn, bk;
} QLoop;

/* One K step's operands as loaded: the A tile and the leaves of the B tile(s), flattened in that order. */
typedef struct QTrip {
    KirValue *v[1 + 2 * Q_LEAVES];
    int n, n1;     /* all; the first weight's leaves */
    KirValue *bmk; /* the B tile's mask at this step */
} QTrip;

/* Issues the loads of the K step at k, masked by the k tail: the A tile and the first weight's leaves. */
static void trip_loads(KirBuilder *b, const QLoop *q, KirValue *k, QTrip *tr)
{
    KirValue *am = q->a_mask;
    tr->bmk = q->b_mask;
    kfam_mm_k_tail(b, q->mt, q->K, q->bm, q->bn, q->bk, k, &am, &tr->bmk, q->t->swap);
    QLeaves l1;
    dequant_loads(b, q->t, q->qw, k, tr->bmk, &l1);
    tr->n = 0;
    tr->v[tr->n++] = kir_load(b, q->x, kir_add(b, q->a_base, k), am, q->zero);
    for (int i = 0; i < l1.n; i++)
        tr->v[tr->n++] = l1.v[i];
    tr->n1 = l1.n;
}

/* The second weight's leaves (silu_mul, pair). SWAP=1 issues them after the first weight's dot: the first
 * weight's tiles are dead by then, so the two dequantizations in registers do not hold registers at once
 * (the CUDA backend streams the loads trips ahead either way); SWAP=0 issues them with the first's, so
 * their latency overlaps the first dot (a barrier of the generic dot lies between). */
static void trip_loads2(KirBuilder *b, const QLoop *q, KirValue *k, QTrip *tr)
{
    QLeaves l2;
    dequant_loads(b, q->t, q->qw2, k, tr->bmk, &l2);
    for (int i = 0; i < l2.n; i++)
        tr->v[tr->n++] = l2.v[i];
}

static IrStatus qmatmul_build(IrArena *a, const KfamSpec *s, const KfamFacts *facts, const KirConfig *given,
                              KirKernel **out, IrDiag *d)
{
    int64_t N, K;
    KirDtype dt;
    KirConfig cfg;
    if (kfam_spec_need(s, "N", 1, 1 << 24, &N, d) || kfam_spec_need(s, "K", 1, 1 << 24, &K, d) ||
        kfam_spec_dtype(s, &dt, d))
        return d->status;
    int epi = kfam_epilogue_of(s), fmt = format_of(s);
    if (epi < 0 || epi == KFAM_EPI_GROUP)
        return ir_diag_set(d, IR_ERR_INPUT,
                           "qmatmul: epilogue must be none, bias, residual, silu_mul or pair");
    if (fmt < 0)
        return ir_diag_set(d, IR_ERR_INPUT,
                           "qmatmul: wfmt must be w4a16, w8a16, fp8, q4_0, q4_1, q8_0, q4_k or q6_k (got %s)",
                           kfam_spec_s(s, "wfmt", "none"));
    int64_t g = group_of(s, fmt), zeros = kfam_spec_i(s, "zeros", 0), given_g = kfam_spec_i(s, "group", -1);
    if (fmt == QF_W4A16 && g != 32 && g != 64 && g != 128)
        return ir_diag_set(d, IR_ERR_INPUT, "qmatmul: w4a16 group must be 32, 64 or 128 (got %lld)",
                           (long long)g);
    if (fmt == QF_FP8 && g != 1 && g != 32 && g != 64 && g != 128)
        return ir_diag_set(d, IR_ERR_INPUT, "qmatmul: fp8 group must be 32, 64 or 128 (got %lld)",
                           (long long)g);
    if (fmt != QF_W4A16 && fmt != QF_FP8 && given_g != -1 && given_g != g)
        return ir_diag_set(d, IR_ERR_INPUT, "qmatmul: %s has no group=%lld", formats[fmt].name,
                           (long long)given_g);
    if (zeros != 0 && (zeros != 1 || fmt != QF_W4A16))
        return ir_diag_set(d, IR_ERR_INPUT, "qmatmul: zeros=%lld (0 or 1, w4a16 only)", (long long)zeros);

    const char *sdn = kfam_spec_s(s, "sdtype", NULL), *scn = kfam_spec_s(s, "scale", "channel");
    /* the scales' dtype: f32 for fp8 (FP8 checkpoints' own), else the activation dtype unless sdtype says
     * f16 (a w4a16 checkpoint's own scales) */
    KirDtype sdt = fmt == QF_FP8 ? KIR_F32 : dt;
    if (sdn && !strcmp(sdn, "f16") && fmt == QF_W4A16)
        sdt = KIR_F16;
    else if (sdn && strcmp(sdn, kir_dtype_name(sdt)))
        return ir_diag_set(d, IR_ERR_INPUT,
                           "qmatmul: sdtype must be f16 (w4a16), f32 (fp8) or the dtype, not '%s'", sdn);
    int tensor = !strcmp(scn, "tensor");
    if ((!tensor && strcmp(scn, "channel")) || (tensor && (fmt != QF_FP8 || g > 1)))
        return ir_diag_set(d, IR_ERR_INPUT, "qmatmul: scale must be channel or (fp8) tensor, not '%s'", scn);
    /* W8A8: activations quantized per row by quant_rows, the dot on the 8-bit values themselves */
    const char *actn = kfam_spec_s(s, "act", "dtype");
    KirDtype at = !strcmp(actn, "fp8") ? KIR_F8E4M3 : !strcmp(actn, "int8") ? KIR_I8 : dt;
    if ((at == dt && strcmp(actn, "dtype")) || (at == KIR_F8E4M3 && (fmt != QF_FP8 || g > 1)) ||
        (at == KIR_I8 && fmt != QF_W8A16))
        return ir_diag_set(d, IR_ERR_INPUT,
                           "qmatmul: act must be dtype, fp8 (wfmt=fp8) or int8 (wfmt=w8a16), "
                           "not '%s' with %s",
                           actn, formats[fmt].name);
    if (K % g)
        return ir_diag_set(d, IR_ERR_INPUT, "qmatmul: K=%lld is not a multiple of %s's group %lld",
                           (long long)K, formats[fmt].name, (long long)g);
    int64_t wbytes = fmt == QF_W4A16      ? N * K / 2
                     : per_row_scale(fmt) ? N * K
                                          : N * (K / g) * formats[fmt].block_bytes;
    if (wbytes > KFAM_MAX_I32_OFFSET)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "qmatmul: %lld weight bytes need 64-bit offsets",
                           (long long)wbytes);
    kfam_config_merge(&kfam_qmatmul, s, facts, given, &cfg);
    /* a config that names its tiles but not SWAP (a tuning store or a bench from before SWAP) means
     * SWAP=0: the defaults' SWAP=1 belongs with the defaults' own tiles */
    if (given && given->n && kir_config_get(given, "SWAP", -1) < 0) kir_config_set(&cfg, "SWAP", 0);
    if (kfam_config_pow2(s, &cfg, "BM", 512, d) || kfam_config_pow2(s, &cfg, "BN", 512, d) ||
        kfam_config_pow2(s, &cfg, "BK", 512, d) || kfam_config_pow2(s, &cfg, "WARPS", 32, d) ||
        kfam_config_pow2(s, &cfg, "SPLIT_K", 64, d))
        return d->status;
    int bm = (int)kir_config_get(&cfg, "BM", 0), bn = (int)kir_config_get(&cfg, "BN", 0);
    int bk = (int)kir_config_get(&cfg, "BK", 0), split = (int)kir_config_get(&cfg, "SPLIT_K", 1);
    int stages = (int)kir_config_get(&cfg, "STAGES", 1), swap = (int)kir_config_get(&cfg, "SWAP", 0);
    if (stages < 1 || stages > 8)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "qmatmul: STAGES=%d is outside [1, 8]", stages);
    if (swap != 0 && (swap != 1 || at != dt))
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "qmatmul: SWAP=%d (0, or 1 without W8A8)", swap);
    /* GPUs: BM 8 is x^T as one n8 fragment of the B operand, the SWAP=1 decode form; a CPU runs any BM */
    if (bm < 16 && !swap && !facts->cpu)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "qmatmul: BM=%d needs SWAP=1", bm);
    if (bk % g)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "qmatmul: BK=%d is not a multiple of the group %lld", bk,
                           (long long)g);
    int inl = (int)kfam_spec_i(s, "ws", 0), n_acc = kfam_epilogue_two_weights(epi) ? 2 : 1;
    if (split > 1 && !inl && n_acc == 2)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED,
                           "qmatmul: silu_mul and pair split K only in the launch (ws=1)");
    /* BM 8 (x's one n8 fragment, the M <= 8 decode form) splits too */
    if (kfam_mm_splitk_check("qmatmul", N, inl, split, bm, 8, bn, n_acc, d)) return d->status;
    if (split > kfam_cdiv(K, bk))
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "qmatmul: SPLIT_K=%d exceeds the %lld K blocks", split,
                           (long long)kfam_cdiv(K, bk));
    int64_t ks = kfam_cdiv(kfam_cdiv(K, split), bk) * bk;

    KirKernel *k;
    KirBuilder b;
    if (kfam_kernel_begin(a, s, &cfg, &k, &b, d)) return d->status;
    static const char *const names1[3] = {"w", "scales", "zeros"}, *const names2[3] = {"w2", "scales2",
                                                                                       "zeros2"};
    QWeight qw = {0}, qw2 = {0};
    KirValue *x = kir_param(&b, "x", kir_ptr(at), KIR_PARAM_RDONLY);
    KirValue *xs =
        at != dt ? kir_param(&b, "xs", kir_ptr(KIR_F32), KIR_PARAM_RDONLY | KIR_PARAM_NOALIAS) : NULL;
    qweight_params(&b, fmt, sdt, (int)zeros, names1, &qw);
    KirValue *bias = NULL, *r = NULL, *dst = NULL, *dst2 = NULL, *ws = NULL, *sem = NULL;
    if (split > 1 && !inl) {
        ws = kir_param(&b, "ws", kir_ptr(KIR_F32), 0);
    } else {
        if (kfam_epilogue_two_weights(epi)) qweight_params(&b, fmt, sdt, (int)zeros, names2, &qw2);
        if (epi == KFAM_EPI_BIAS) bias = kir_param(&b, "bias", kir_ptr(dt), KIR_PARAM_RDONLY);
        if (epi == KFAM_EPI_RESIDUAL) r = kir_param(&b, "r", kir_ptr(dt), 0);
        dst = kir_param(&b, "out", kir_ptr(dt), 0);
        if (epi == KFAM_EPI_PAIR) dst2 = kir_param(&b, "out2", kir_ptr(dt), 0);
        if (inl) {
            ws = kir_param(&b, "ws", kir_ptr(KIR_F32), 0);
            sem = kir_param(&b, "sem", kir_ptr(KIR_I32), 0);
        }
    }
    KfamMmTiles mt;
    kfam_mm_tiles(&b, kir_param(&b, "M", kir_scalar(KIR_I32), 0), N, K, bm, bn, bk, split, &mt);
    KirValue *cK = mt.cK, *cN = mt.cN, *rm = mt.rm, *rn = mt.rn, *rk = mt.rk, *mmask = mt.mmask,
             *nmask = mt.nmask;
    /* SWAP=1: out^T = dequant(w) x^T, the weights the dot's A operand ([BN,BK]) and x^T [BK,BM] its B, the
     * accumulator [BN,BM] (the CUDA backend dequantizes straight into mma A fragments) */
    KirValue *a_base = swap ? kfam_outer(&b, KIR_OP_ADD, rk, kir_mul(&b, rm, cK))  /* [BK,BM] */
                            : kfam_outer(&b, KIR_OP_ADD, kir_mul(&b, rm, cK), rk); /* [BM,BK] */
    KirValue *a_mask = swap ? kfam_cols(&b, mmask, bk) : kfam_rows(&b, mmask, bk);
    KirValue *b_mask = !nmask ? NULL : swap ? kfam_rows(&b, nmask, bk) : kfam_cols(&b, nmask, bk);
    QTile t = {.fmt = fmt, .dt = at, .group = g, .block_bytes = formats[fmt].block_bytes, .swap = swap};
    t.per_block = facts->cpu && bk == g && (fmt == QF_Q4_0 || fmt == QF_Q4_1 || fmt == QF_Q8_0);
    t.nmask1 = t.per_block && nmask ? kir_expand(&b, nmask, swap ? 1 : 0) : NULL;
    KirValue *lo, *hi;
    kfam_mm_k_range(&b, &mt, split, ks, &lo, &hi);
    int shape[2] = {swap ? bn : bm, swap ? bm : bn};
    KirDtype acc_t = at == KIR_I8 ? KIR_I32 : KIR_F32; /* i8 dots accumulate in i32 */
    KirValue *zero = kir_const_f(&b, at, 0);
    KirValue *inits[2], *yields[2];
    inits[0] = kir_splat(&b, kir_const_f(&b, acc_t, 0), 2, shape);
    if (qw2.w) inits[1] = kir_splat(&b, kir_const_f(&b, acc_t, 0), 2, shape);
    qtile_init(&b, &t, K, rk, rn);
    QLoop ql = {&mt, &t, &qw, &qw2, x, a_base, a_mask, b_mask, zero, K, bm, bn, bk};
    /* STAGES is the loop's pipeline hint: the CUDA backend streams the trip's loads (the dot operands as
     * loaded, or the A tile and packed words of a dequantized B tile) STAGES - 1 trips ahead by cp.async */
    QTrip tr = {{0}, 0, 0, NULL};
    KirBlock *body = kir_for_begin(&b, lo, hi, kir_const_i32(&b, bk), inits, n_acc, stages > 1 ? stages : 0);
    trip_loads(&b, &ql, body->args[0], &tr);
    if (n_acc > 1 && !swap) trip_loads2(&b, &ql, body->args[0], &tr);
    for (int j = 0; j < n_acc; j++) {
        if (j && swap) trip_loads2(&b, &ql, body->args[0], &tr);
        KirValue *wt = dequant_math(&b, &t, j ? &qw2 : &qw, tr.v + 1 + (j ? tr.n1 : 0));
        yields[j] =
            swap ? kir_dot(&b, wt, tr.v[0], body->args[1 + j]) : kir_dot(&b, tr.v[0], wt, body->args[1 + j]);
    }
    KirInst *loop = kir_for_end(&b, yields, n_acc);

    KirValue *acc = loop->res[0], *acc2 = qw2.w ? loop->res[1] : NULL;
    if (xs) { /* W8A8: the f32 sum times the row's activation scale (then the channel's below) */
        KirValue *rs =
            kfam_rows(&b, kir_load(&b, xs, rm, mmask, mmask ? kir_const_f(&b, KIR_F32, 0) : NULL), bn);
        acc = kir_mul(&b, acc_t == KIR_F32 ? acc : kir_cast(&b, acc, KIR_F32), rs);
        if (acc2) acc2 = kir_mul(&b, acc_t == KIR_F32 ? acc2 : kir_cast(&b, acc2, KIR_F32), rs);
    }
    if (per_row_scale(fmt) && g == 1) {
        acc = channel_scale(&b, acc, qw.scales, rn, nmask, tensor, swap);
        if (acc2) acc2 = channel_scale(&b, acc2, qw2.scales, rn, nmask, tensor, swap);
    }
    KirValue *c_offs = swap ? kfam_outer(&b, KIR_OP_ADD, rn, kir_mul(&b, rm, cN))
                            : kfam_outer(&b, KIR_OP_ADD, kir_mul(&b, rm, cN), rn);
    KirValue *c_mask =
        swap ? kfam_outer_mask(&b, nmask, mmask, bn, bm) : kfam_outer_mask(&b, mmask, nmask, bm, bn);
    if (split > 1 && !inl) {
        kir_atomic_add(&b, ws, c_offs, acc, c_mask);
        return kfam_kernel_end(&b, out);
    }
    if (split > 1) {
        KirValue *accs[2] = {acc, acc2};
        kfam_mm_splitk_sum(&b, accs, n_acc, ws, sem, N, bn, split, c_offs, &c_mask);
        acc = accs[0], acc2 = accs[1];
    }
    kfam_matmul_epilogue(&b, epi, dt, dt, acc, acc2, bias, r, dst, dst2, rn, nmask, c_offs, c_mask, swap);
    return kfam_kernel_end(&b, out);
}

const KfamFamily kfam_qmatmul = {
    .name = "qmatmul",
    .n_space = 7,
    .space = {{"BM", 6, {8, 16, 32, 64, 128, 256}},
              {"BN", 5, {16, 32, 64, 128, 256}},
              {"BK", 4, {32, 64, 128, 256}},
              {"WARPS", 3, {2, 4, 8}},
              {"STAGES", 4, {1, 2, 3, 4}},
              {"SPLIT_K", 4, {1, 2, 4, 8}},
              {"SWAP", 2, {0, 1}}},
    .defaults = qmatmul_defaults,
    .build = qmatmul_build,
};
