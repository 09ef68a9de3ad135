/* test_rt_weights.c — binding weight files to a package's weight table (runtime/rt_weights.c).
 * Small GGUF and safetensors files are written here (kfile.h) from fresh random data each run (the seed
 * is printed; KILN_TEST_SEED repeats a run) and read back through rt_w_read against plain C references:
 * every float conversion (all 65,536 f16 and bf16 values, random and hand-picked f32 values: ties,
 * subnormals, overflow, NaNs), GGUF q4_0/q4_1/q8_0 dequantization then rounding, block copies, the
 * q/k un-permutation (HF rows permuted here as llama.cpp's converter does, read back in f32, q4_1 and
 * q8_0), the name mapping, how a path is opened, every error with its one-line message, and reads from
 * several threads. With the real SmolLM2-135M-Instruct Q4_1 GGUF in $KILN_SOURCE_DIR/models/ (skipped
 * with a note otherwise): every tensor maps, the recipe's weight table checks, and reads agree with
 * gguf-py's dequantization hashes. Run under the ASan build too. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kfile.h"
#include "kref.h"
#include "kt.h"
#include "runtime/rt_gguf.h"
#include "runtime/rt_weights.h"

static KrefRng rng;

/* ---- plain C references ---------------------------------------------------------------------------- */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int is_nan32(uint32_t u)
{
    return (u & 0x7fffffffu) > 0x7f800000u;
}

/* The f32 bits of a 16-bit value: exact; a NaN keeps its payload (docs/WEIGHTS.md). */
static uint32_t ref_f16_to_f32(uint16_t h)
{
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu))
        return ((uint32_t)(h & 0x8000u) << 16) | 0x7f800000u | ((uint32_t)(h & 0x3ffu) << 13);
    return f32_bits(kref_f16_to_f32(h));
}

static uint32_t ref_bf16_to_f32(uint16_t h)
{
    return (uint32_t)h << 16;
}

/* f32 bits to f16 bits, nearest even (kref's float64 rounding); a NaN: quiet, same sign, top payload. */
static uint16_t ref_f32_to_f16(uint32_t u)
{
    if (is_nan32(u)) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu));
    return kref_f32_to_f16(bits_f32(u));
}

/* f32 bits to bf16 bits: rounded in float64 to 8 significant bits (exact afterwards); NaN quieted. */
static uint16_t ref_f32_to_bf16(uint32_t u)
{
    if (is_nan32(u)) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)(f32_bits((float)kref_round(bits_f32(u), KIR_BF16)) >> 16);
}

enum { D_F32, D_F16, D_BF16 };
static const char *const dnames[] = {"f32", "f16", "bf16"};

/* Element i of a float buffer of dtype d, as f32 bits. */
static uint32_t get_as_f32(const void *p, int d, size_t i)
{
    const unsigned char *b = p;
    if (d == D_F32) {
        uint32_t u;
        memcpy(&u, b + 4 * i, 4);
        return u;
    }
    uint16_t h;
    memcpy(&h, b + 2 * i, 2);
    return d == D_F16 ? ref_f16_to_f32(h) : ref_bf16_to_f32(h);
}

/* Expected bits of f32 value u stored as dtype d (low 16 bits for f16/bf16). */
static uint32_t want_bits(uint32_t u, int d)
{
    return d == D_F32 ? u : d == D_F16 ? ref_f32_to_f16(u) : ref_f32_to_bf16(u);
}

static uint32_t got_bits(const void *p, int d, size_t i)
{
    const unsigned char *b = p;
    if (d == D_F32) return get_as_f32(p, d, i);
    uint16_t h;
    memcpy(&h, b + 2 * i, 2);
    return h;
}

/* Reference dequantization from the format description (docs/WEIGHTS.md), one block of 32. */
static void ref_dequant(RtGgufType t, const unsigned char *blk, float *out)
{
    uint16_t dh, mh;
    memcpy(&dh, blk, 2);
    float d = kref_f16_to_f32(dh);
    if (t == RT_GGUF_TYPE_Q8_0) {
        for (int j = 0; j < 32; j++)
            out[j] = (float)(int8_t)blk[2 + j] * d;
    } else if (t == RT_GGUF_TYPE_Q4_0) {
        for (int j = 0; j < 32; j++)
            out[j] = (float)((j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4) - 8) * d;
    } else {
        memcpy(&mh, blk + 2, 2);
        float m = kref_f16_to_f32(mh);
        for (int j = 0; j < 32; j++) {
            float q = (float)(j < 16 ? blk[4 + j] & 15 : blk[4 + j - 16] >> 4) * d;
            out[j] = q + m;
        }
    }
}

/* Bytes per block of a GGUF type, from the reader's table (test_weights.c checks it against gguf-py). */
static int block_bytes(RtGgufType t)
{
    int block, bytes;
    return rt_gguf_type_block(t, &block, &bytes) ? bytes : 0;
}

/* Elements per block of a GGUF type (32; the K-quants' super-blocks 256). */
static int block_elems(RtGgufType t)
{
    int block, bytes;
    return rt_gguf_type_block(t, &block, &bytes) ? block : 0;
}

/* Random blocks with finite scales (spanning subnormal to large halves, so some results overflow f16). */
static void random_blocks(RtGgufType t, unsigned char *p, int64_t n_blocks)
{
    int bb = block_bytes(t);
    for (int64_t b = 0; b < n_blocks; b++, p += bb) {
        for (int k = 0; k < bb; k++)
            p[k] = (unsigned char)kref_next(&rng);
        int scale = (int)(kref_next(&rng) % 40) - 24; /* 2^-24 .. 2^15 */
        uint16_t d = kref_f32_to_f16((float)ldexp(kref_normal(&rng), scale));
        memcpy(p + (t == RT_GGUF_TYPE_Q6_K ? 208 : 0), &d, 2);
        if (t == RT_GGUF_TYPE_Q4_1 || t == RT_GGUF_TYPE_Q4_K) { /* m; q4_k: dmin */
            uint16_t m = kref_f32_to_f16((float)ldexp(kref_normal(&rng), scale));
            memcpy(p + 2, &m, 2);
        }
    }
}

/* llama.cpp's converter on rows: w.reshape(n_head, 2, D/2, ...).swapaxes(1, 2).reshape(w.shape), i.e.
 * out[h][j][s] = in[h][s][j] over (n_head, D/2, 2) rows, whole rows of row_bytes each. */
static void converter_permute(const unsigned char *in, unsigned char *out, int64_t n_rows, int64_t n_head,
                              size_t row_bytes)
{
    int64_t half = n_rows / n_head / 2;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t j = 0; j < half; j++)
            for (int64_t s = 0; s < 2; s++)
                memcpy(out + (size_t)((h * half + j) * 2 + s) * row_bytes,
                       in + (size_t)((h * 2 + s) * half + j) * row_bytes, row_bytes);
}

/* ---- specs and expectations ------------------------------------------------------------------------ */

/* A spec for name as dtype with shape {d0[, d1]} (rank 1 when d1 < 0), nbytes computed. */
static RtWeightSpec spec2(const char *name, const char *dtype, int64_t d0, int64_t d1)
{
    RtWeightSpec s = {.name = name, .dtype = dtype, .rank = d1 < 0 ? 1 : 2, .shape = {d0, d1 < 0 ? 0 : d1}};
    int64_t n = d0 * (d1 < 0 ? 1 : d1);
    if (!strcmp(dtype, "f32"))
        s.nbytes = 4 * n;
    else if (!strcmp(dtype, "f16") || !strcmp(dtype, "bf16"))
        s.nbytes = 2 * n;
    else if (!strcmp(dtype, "q4_0"))
        s.nbytes = n / 32 * 18;
    else if (!strcmp(dtype, "q4_1"))
        s.nbytes = n / 32 * 20;
    else if (!strcmp(dtype, "q8_0"))
        s.nbytes = n / 32 * 34;
    else if (!strcmp(dtype, "q4_k"))
        s.nbytes = n / 256 * 144;
    else if (!strcmp(dtype, "q6_k"))
        s.nbytes = n / 256 * 210;
    else
        s.nbytes = 4 * n;
    return s;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) abort();
    return p;
}

/* Reads spec into a new buffer (poisoned first), checking the status. NULL on failure. */
static void *read_new(const RtWeights *w, const RtWeightSpec *s)
{
    char err[512] = "";
    unsigned char *p = xmalloc((size_t)s->nbytes + 16);
    memset(p, 0xa5, (size_t)s->nbytes + 16);
    KilnStatus st = rt_w_read(w, s, p, err, sizeof err);
    KT_CHECK(st == KILN_OK, "read %s as %s: %s", s->name, s->dtype, err);
    int guard = 1;
    for (int k = 0; k < 16; k++)
        guard &= p[s->nbytes + k] == 0xa5;
    KT_CHECK(guard, "read %s as %s: wrote past nbytes", s->name, s->dtype);
    if (st != KILN_OK) {
        free(p);
        return NULL;
    }
    return p;
}

/* rt_w_check on {specs[0..n)} and rt_w_read of specs[n-1] must both fail with `want` and the message
 * `path: ` + msg (exact when exact, else contained), one line. */
static void expect_fail_at(int line, const RtWeights *w, const RtWeightSpec *specs, int n, KilnStatus want,
                           const char *msg, int exact)
{
    char err[1024] = "", err2[1024] = "", full[1200];
    snprintf(full, sizeof full, "%s: %s", rt_w_path(w), msg);
    KilnStatus s = rt_w_check(w, specs, n, err, sizeof err);
    KT_CHECK(s == want, "line %d: check: got %s, want %s (%s)", line, kiln_status_name(s),
             kiln_status_name(want), err);
    KT_CHECK(exact ? !strcmp(err, full) : kf_starts_with(err, rt_w_path(w)) && strstr(err, msg) != NULL,
             "line %d: check message:\n  got  %s\n  want %s", line, err, full);
    KT_CHECK(!strchr(err, '\n'), "line %d: two lines", line);
    const RtWeightSpec *last = &specs[n - 1];
    void *dst = xmalloc(last->nbytes > 0 && last->nbytes < (1 << 26) ? (size_t)last->nbytes : 16);
    KilnStatus s2 = rt_w_read(w, last, dst, err2, sizeof err2);
    free(dst);
    KT_CHECK(s2 == want && !strcmp(err, err2), "line %d: read: %s: %s (check said %s)", line,
             kiln_status_name(s2), err2, err);
    KT_CHECK(rt_w_check(w, specs, n, NULL, 0) == want, "line %d: without an err buffer", line);
}
#define expect_fail(w, specs, n, want, msg)  expect_fail_at(__LINE__, w, specs, n, want, msg, 1)
#define expect_failc(w, specs, n, want, msg) expect_fail_at(__LINE__, w, specs, n, want, msg, 0)

static RtWeights *open_ok(const char *path)
{
    RtWeights *w = NULL;
    char err[512] = "";
    KilnStatus s = rt_w_open(path, &w, err, sizeof err);
    KT_CHECK(s == KILN_OK && w, "open %s: %s", path, err);
    return w;
}

/* ---- spec text, names, un-permute ------------------------------------------------------------------ */

static void test_spec_parse(void)
{
    RtWeightSpec s;
    KT_CHECK(rt_w_spec_parse("w", "q4_1", "[576,576]", 576 * 18 * 20, &s) && s.rank == 2 &&
                 s.shape[0] == 576 && s.shape[1] == 576 && s.shape[2] == 0 && s.nbytes == 576 * 18 * 20 &&
                 !strcmp(s.name, "w") && !strcmp(s.dtype, "q4_1"),
             "[576,576]");
    KT_CHECK(rt_w_spec_parse("w", "f32", "[]", 4, &s) && s.rank == 0, "scalar");
    KT_CHECK(rt_w_spec_parse("w", "f32", "[0]", 0, &s) && s.rank == 1 && s.shape[0] == 0, "[0]");
    KT_CHECK(rt_w_spec_parse("w", "f32", "[1,2,3,4]", 96, &s) && s.rank == 4 && s.shape[3] == 4, "rank 4");
    KT_CHECK(rt_w_spec_parse("w", "f32", "[4611686018427387903]", 0, &s) &&
                 s.shape[0] == 4611686018427387903LL,
             "2^62 - 1");
    static const char *const bad[] = {"",       "[",      "]",
                                      "[5",     "[5,]",   "[,5]",
                                      "[05]",   "[-1]",   "[+1]",
                                      "[1 ,2]", "[ 1]",   "[1,2,3,4,5]",
                                      "[a]",    "[1]x",   "[1] ",
                                      "(1,2)",  "[1,,2]", "[4611686018427387904]",
                                      "[1.5]",  "[0x10]", "[99999999999999999999999]",
                                      "[N,576]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&s, 0x55, sizeof s);
        KT_CHECK(!rt_w_spec_parse("w", "f32", bad[i], 4, &s) && s.rank == 0 && s.name == NULL, "'%s' parsed",
                 bad[i]);
    }
    KT_CHECK(!rt_w_spec_parse("w", "f32", "[1]", -1, &s), "negative nbytes");
    KT_CHECK(!rt_w_spec_parse(NULL, "f32", "[1]", 4, &s) && !rt_w_spec_parse("w", NULL, "[1]", 4, &s) &&
                 !rt_w_spec_parse("w", "f32", NULL, 4, &s) && !rt_w_spec_parse("w", "f32", "[1]", 4, NULL),
             "NULL arguments");
}

static void test_names(void)
{
    static const char *const pairs[][2] = {
        {"token_embd.weight", "model.embed_tokens.weight"},
        {"output.weight", "lm_head.weight"},
        {"output_norm.weight", "model.norm.weight"},
        {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
        {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"},
        {"blk.0.attn_q.bias", "model.layers.0.self_attn.q_proj.bias"},
        {"blk.3.attn_k.weight", "model.layers.3.self_attn.k_proj.weight"},
        {"blk.3.attn_k.bias", "model.layers.3.self_attn.k_proj.bias"},
        {"blk.10.attn_v.weight", "model.layers.10.self_attn.v_proj.weight"},
        {"blk.10.attn_v.bias", "model.layers.10.self_attn.v_proj.bias"},
        {"blk.29.attn_output.weight", "model.layers.29.self_attn.o_proj.weight"},
        {"blk.29.attn_output.bias", "model.layers.29.self_attn.o_proj.bias"},
        {"blk.7.ffn_norm.weight", "model.layers.7.post_attention_layernorm.weight"},
        {"blk.123.ffn_gate.weight", "model.layers.123.mlp.gate_proj.weight"},
        {"blk.4.ffn_up.weight", "model.layers.4.mlp.up_proj.weight"},
        {"blk.999999.ffn_down.weight", "model.layers.999999.mlp.down_proj.weight"},
    };
    char out[256];
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        KT_CHECK(rt_w_gguf_name(pairs[i][1], out, sizeof out) && !strcmp(out, pairs[i][0]), "%s -> '%s'",
                 pairs[i][1], out);
        KT_CHECK(rt_w_hf_name(pairs[i][0], out, sizeof out) && !strcmp(out, pairs[i][1]), "%s -> '%s'",
                 pairs[i][0], out);
    }
    static const char *const unmapped[] = {"model.layers.x.self_attn.q_proj.weight",
                                           "model.layers.01.self_attn.q_proj.weight",
                                           "model.layers.1000000.mlp.up_proj.weight",
                                           "model.layers..mlp.up_proj.weight",
                                           "model.layers.1.self_attn.q_norm.weight",
                                           "model.layers.1.mlp.up_proj.weight.x",
                                           "layers.1.mlp.up_proj.weight",
                                           "model.embed_tokens",
                                           "",
                                           "blk.0.attn_q.weight",
                                           "model.layers.-1.mlp.up_proj.weight",
                                           "model.layers.1mlp.up_proj.weight"};
    for (size_t i = 0; i < sizeof unmapped / sizeof unmapped[0]; i++) {
        strcpy(out, "junk");
        KT_CHECK(!rt_w_gguf_name(unmapped[i], out, sizeof out) && out[0] == 0, "'%s' mapped to '%s'",
                 unmapped[i], out);
    }
    static const char *const unmapped_gguf[] = {
        "blk.1.attn_qkv.weight", "blk.01.attn_q.weight", "blk.1", "token_embd",
        "model.norm.weight",     "blk.1.ffn_up.weight2"};
    for (size_t i = 0; i < sizeof unmapped_gguf / sizeof unmapped_gguf[0]; i++)
        KT_CHECK(!rt_w_hf_name(unmapped_gguf[i], out, sizeof out) && out[0] == 0, "'%s' mapped to '%s'",
                 unmapped_gguf[i], out);
    /* too small an output buffer: 0 and "", never a cut name */
    KT_CHECK(!rt_w_gguf_name("model.layers.12.mlp.up_proj.weight", out, 12) && out[0] == 0, "short buffer");
    KT_CHECK(!rt_w_gguf_name("model.layers.12.mlp.up_proj.weight", out, 20) && out[0] == 0, "one byte short");
    KT_CHECK(rt_w_gguf_name("model.layers.12.mlp.up_proj.weight", out, 21) &&
                 !strcmp(out, "blk.12.ffn_up.weight"),
             "exact fit");
    KT_CHECK(!rt_w_hf_name("output_norm.weight", out, 17) && !rt_w_gguf_name(NULL, out, 8) &&
                 !rt_w_gguf_name("lm_head.weight", NULL, 8) && !rt_w_gguf_name("lm_head.weight", out, 0),
             "bad arguments");
}

static void test_unpermute_row(void)
{
    static const int64_t cases[][2] = {{2, 1}, {8, 1}, {8, 4}, {32, 4}, {192, 3}, {576, 9}, {24, 6}, {64, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t n = cases[c][0], heads = cases[c][1];
        int32_t *hf = xmalloc(sizeof(int32_t) * (size_t)n), *gg = xmalloc(sizeof(int32_t) * (size_t)n);
        for (int64_t r = 0; r < n; r++)
            hf[r] = (int32_t)r;
        converter_permute((unsigned char *)hf, (unsigned char *)gg, n, heads, sizeof(int32_t));
        int ok = 1;
        for (int64_t r = 0; r < n; r++) {
            int64_t g = rt_w_unpermute_row(r, n, heads);
            ok &= g >= 0 && g < n && gg[g] == hf[r];
        }
        KT_CHECK(ok, "un-permute %lld rows in %lld heads", (long long)n, (long long)heads);
        free(hf);
        free(gg);
    }
    /* within a head of D rows, GGUF row 2j+s holds HF row s*D/2+j (the brief's statement of it) */
    KT_CHECK(rt_w_unpermute_row(0, 8, 1) == 0 && rt_w_unpermute_row(4, 8, 1) == 1 &&
                 rt_w_unpermute_row(1, 8, 1) == 2 && rt_w_unpermute_row(7, 8, 1) == 7 &&
                 rt_w_unpermute_row(8 + 4, 16, 2) == 8 + 1,
             "small cases");
    KT_CHECK(rt_w_unpermute_row(0, 9, 3) == -1 && rt_w_unpermute_row(0, 10, 3) == -1 &&
                 rt_w_unpermute_row(8, 8, 1) == -1 && rt_w_unpermute_row(-1, 8, 1) == -1 &&
                 rt_w_unpermute_row(0, 8, 0) == -1 && rt_w_unpermute_row(0, 0, 1) == -1,
             "invalid arguments");
}

/* ---- conversions ----------------------------------------------------------------------------------- */

/* f32 test values: hand-picked specials, then random bits, random magnitudes, exact f16 and bf16 ties. */
static void fill_f32_values(uint32_t *v, int n)
{
    static const uint32_t special[] = {
        0x00000000, 0x80000000,
        0x7f800000, 0xff800000,
        0x7fc00000, 0xffc00000,
        0x7f800001, 0xff812345,
        0x7fbfffff, 0x7fffffff,
        0x477fe000, /* 65504 */ 0x477fefff,
        0x477ff000, /* 65520: inf */
        0xc77ff000, 0x477ff001,
        0x7f7fffff, 0xff7fffff,
        0x7f7f8000, /* bf16 tie at the top: inf */
        0x7f7f7fff, 0x00800000,
        0x00000001, 0x807fffff,
        0x33800000, /* 2^-24 */ 0x33000000, /* 2^-25: 0 */
        0x33000001, 0xb3000000,
        0x33c00000, /* 1.5 * 2^-24: tie to 2^-23 */ 0x34200000, /* 2.5 * 2^-24 */
        0x38800000, /* 2^-14 */ 0x387fe000,
        0x387ff000, /* tie below 2^-14 */ 0x3f800000,
        0x3f801000, 0x3f803000,
        0x3f808000, 0x3f818000,
        0x3f7fffff, 0x3effffff,
        0x3a000000, 0x3c7fffff};
    int k = 0;
    for (; k < n && k < (int)(sizeof special / sizeof special[0]); k++)
        v[k] = special[k];
    for (; k < n; k++) {
        uint32_t r = (uint32_t)kref_next(&rng);
        switch (k % 5) {
        case 0: v[k] = r; break; /* any class */
        case 1: v[k] = f32_bits((float)ldexp(kref_normal(&rng), (int)(r % 60) - 40)); break;
        case 2: { /* halfway between two adjacent finite halves (exact in f32), or a hair off it */
            uint16_t h = (uint16_t)(r & 0x7bfe), sign = (uint16_t)(r >> 31 << 15);
            double a = kref_f16_to_f32(h), b = kref_f16_to_f32((uint16_t)(h + 1));
            uint32_t mid = f32_bits((float)((a + b) / 2));
            v[k] = (sign ? 0x80000000u : 0) | (mid + (uint32_t)((r >> 16) % 3) - 1);
            break;
        }
        case 3: v[k] = (r & 0xffff0000u) | 0x8000u; break;      /* an exact bf16 tie */
        default: v[k] = (r & 0x8fffffffu) | 0x30000000u; break; /* around the f16 range */
        }
    }
}

/* Every float dtype to every float dtype through a safetensors file; all 16-bit values, many f32. */
static void test_float_conversions(void)
{
    enum { N16 = 65536, N32 = 65536 };
    uint16_t *h = xmalloc(2 * N16), *b = xmalloc(2 * N16);
    uint32_t *f = xmalloc(4 * N32);
    for (int i = 0; i < N16; i++)
        h[i] = b[i] = (uint16_t)i;
    fill_f32_values(f, N32);
    KfStTensor t[] = {{"h", "F16", 2, {256, 256}, h, 2 * N16},
                      {"b", "BF16", 2, {256, 256}, b, 2 * N16},
                      {"f", "F32", 2, {N32 / 64, 64}, f, 4 * N32},
                      {"scalar", "F32", 0, {0}, f + 12, 4},
                      {"empty", "BF16", 2, {0, 3}, NULL, 0}};
    kf_st_write_tensors(kf_at("conv.safetensors"), t, 5);
    RtWeights *w = open_ok(kf_at("conv.safetensors"));
    if (!w) goto done;
    KT_CHECK(!strcmp(rt_w_kind(w), "safetensors") && rt_w_gguf(w) == NULL &&
                 !strcmp(rt_w_path(w), kf_at("conv.safetensors")),
             "safetensors handle");
    const struct {
        const char *name;
        int src;
        int64_t d0, d1;
        const void *data;
    } srcs[] = {{"h", D_F16, 256, 256, h}, {"b", D_BF16, 256, 256, b}, {"f", D_F32, N32 / 64, 64, f}};
    for (int si = 0; si < 3; si++)
        for (int d = 0; d < 3; d++) {
            RtWeightSpec s = spec2(srcs[si].name, dnames[d], srcs[si].d0, srcs[si].d1);
            void *got = read_new(w, &s);
            if (!got) continue;
            int64_t n = srcs[si].d0 * srcs[si].d1, bad = 0;
            for (int64_t i = 0; i < n; i++) {
                uint32_t x = get_as_f32(srcs[si].data, srcs[si].src, (size_t)i);
                uint32_t want = srcs[si].src == d ? got_bits(srcs[si].data, d, (size_t)i) : want_bits(x, d);
                uint32_t have = got_bits(got, d, (size_t)i);
                if (have != want && bad++ < 5)
                    fprintf(stderr, "%s -> %s: element %lld (f32 0x%08x): got 0x%x, want 0x%x\n",
                            dnames[srcs[si].src], dnames[d], (long long)i, x, have, want);
            }
            KT_CHECK(bad == 0, "%s -> %s: %lld of %lld elements differ", dnames[srcs[si].src], dnames[d],
                     (long long)bad, (long long)n);
            free(got);
        }
    /* a scalar and an empty tensor */
    RtWeightSpec sc = {.name = "scalar", .dtype = "f16", .rank = 0, .nbytes = 2};
    uint16_t one = 0;
    char err[512];
    KT_CHECK(rt_w_read(w, &sc, &one, err, sizeof err) == KILN_OK && one == ref_f32_to_f16(f[12]),
             "scalar: %s", err);
    RtWeightSpec em = spec2("empty", "f32", 0, 3);
    KT_CHECK(rt_w_read(w, &em, NULL, err, sizeof err) == KILN_OK, "empty tensor: %s", err);
    rt_w_close(w);
done:
    free(h);
    free(b);
    free(f);
}

/* GGUF block types to f32/f16/bf16 against ref_dequant, and block types copied byte for byte. */
static void test_gguf_conversions(void)
{
    enum { ROWS = 7, K = 512, NQ = 5, NT = NQ + 3 };
    const RtGgufType qt[NQ] = {RT_GGUF_TYPE_Q4_0, RT_GGUF_TYPE_Q4_1, RT_GGUF_TYPE_Q8_0, RT_GGUF_TYPE_Q4_K,
                               RT_GGUF_TYPE_Q6_K};
    const char *const qname[NQ] = {"q4_0", "q4_1", "q8_0", "q4_k", "q6_k"};
    const char *const gname[NQ] = {"blk.0.ffn_up.weight", "blk.0.ffn_gate.weight", "blk.1.ffn_down.weight",
                                   "blk.1.ffn_up.weight", "blk.1.ffn_gate.weight"};
    const char *const hname[NQ] = {"model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.gate_proj.weight",
                                   "model.layers.1.mlp.down_proj.weight", "model.layers.1.mlp.up_proj.weight",
                                   "model.layers.1.mlp.gate_proj.weight"};
    unsigned char *q[NQ];
    KfGgTensor t[NT];
    for (int i = 0; i < NQ; i++) {
        size_t nb = (size_t)(ROWS * K / block_elems(qt[i]) * block_bytes(qt[i]));
        q[i] = xmalloc(nb);
        random_blocks(qt[i], q[i], ROWS * K / block_elems(qt[i]));
        t[i] = (KfGgTensor){gname[i], qt[i], 2, {K, ROWS}, q[i], nb};
    }
    /* float tensors in GGUF too: f16, bf16, f32 norms */
    uint32_t f[K];
    uint16_t hh[K], bb[K];
    fill_f32_values(f, K);
    for (int i = 0; i < K; i++) {
        hh[i] = (uint16_t)kref_next(&rng);
        bb[i] = (uint16_t)kref_next(&rng);
    }
    t[NQ] = (KfGgTensor){"output_norm.weight", RT_GGUF_TYPE_F32, 1, {K}, f, sizeof f};
    t[NQ + 1] = (KfGgTensor){"blk.0.attn_norm.weight", RT_GGUF_TYPE_F16, 1, {K}, hh, sizeof hh};
    t[NQ + 2] = (KfGgTensor){"blk.0.ffn_norm.weight", RT_GGUF_TYPE_BF16, 1, {K}, bb, sizeof bb};
    KfGgKvs kv = {0};
    kf_gg_kv_str(&kv, "general.architecture", "llama");
    kf_gg_kv_u32(&kv, "llama.attention.head_count", 4);
    kf_gg_write(kf_at("conv.gguf"), &kv, t, NT);
    kf_gg_kvs_free(&kv);
    RtWeights *w = open_ok(kf_at("conv.gguf"));
    if (!w) goto done;
    KT_CHECK(!strcmp(rt_w_kind(w), "gguf") && rt_w_gguf(w) != NULL &&
                 rt_gguf_tensor_count(rt_w_gguf(w)) == NT,
             "gguf handle");
    static float ref[ROWS * K];
    for (int i = 0; i < NQ; i++) {
        if (block_elems(qt[i]) == 256) /* the K-quants: the kernels' reference (tests/unit/kref.c) */
            kref_qdequant(qname[i], q[i], NULL, NULL, KIR_F32, ROWS, K, 0, ref);
        for (int blk = 0; block_elems(qt[i]) == 32 && blk < ROWS * K / 32; blk++)
            ref_dequant(qt[i], q[i] + blk * block_bytes(qt[i]), ref + 32 * blk);
        for (int d = 0; d < 3; d++) {
            RtWeightSpec s = spec2(hname[i], dnames[d], ROWS, K);
            void *got = read_new(w, &s);
            if (!got) continue;
            int bad = 0;
            for (int e = 0; e < ROWS * K; e++)
                bad += got_bits(got, d, (size_t)e) != want_bits(f32_bits(ref[e]), d);
            KT_CHECK(bad == 0, "%s -> %s: %d of %d elements differ", qname[i], dnames[d], bad, ROWS * K);
            free(got);
        }
        RtWeightSpec s = spec2(hname[i], qname[i], ROWS, K);
        void *got = read_new(w, &s);
        KT_CHECK(got && !memcmp(got, q[i], t[i].nbytes), "%s copied byte for byte", qname[i]);
        free(got);
    }
    const struct {
        const char *hf;
        int src;
        const void *data;
    } fl[] = {{"model.norm.weight", D_F32, f},
              {"model.layers.0.input_layernorm.weight", D_F16, hh},
              {"model.layers.0.post_attention_layernorm.weight", D_BF16, bb}};
    for (int i = 0; i < 3; i++)
        for (int d = 0; d < 3; d++) {
            RtWeightSpec s = spec2(fl[i].hf, dnames[d], K, -1);
            void *got = read_new(w, &s);
            if (!got) continue;
            int bad = 0;
            for (int e = 0; e < K; e++) {
                uint32_t want = fl[i].src == d ? got_bits(fl[i].data, d, (size_t)e)
                                               : want_bits(get_as_f32(fl[i].data, fl[i].src, (size_t)e), d);
                bad += got_bits(got, d, (size_t)e) != want;
            }
            KT_CHECK(bad == 0, "gguf %s -> %s: %d differ", dnames[fl[i].src], dnames[d], bad);
            free(got);
        }
    rt_w_close(w);
done:
    for (int i = 0; i < NQ; i++)
        free(q[i]);
}

/* ---- un-permute through files ---------------------------------------------------------------------- */

enum { NH = 4, NKV = 2, HD = 8, KD = 64 }; /* heads, kv heads, head dim, row length */

/* HF q (NH*HD rows) and k (NKV*HD rows) as f32 rows, q4_1 rows and q8_0 rows, biases; and their
 * converter-permuted copies, written as GGUF files of architecture arch. */
typedef struct QkData {
    float q[NH * HD * KD], k[NKV * HD * KD], qb[NH * HD], kb[NKV * HD];
    unsigned char q41[NH * HD * KD / 32 * 20], k80[NKV * HD * KD / 32 * 34];
} QkData;

static void qk_random(QkData *d)
{
    for (size_t i = 0; i < sizeof d->q / sizeof d->q[0]; i++)
        d->q[i] = (float)kref_normal(&rng);
    for (size_t i = 0; i < sizeof d->k / sizeof d->k[0]; i++)
        d->k[i] = (float)kref_normal(&rng);
    for (int i = 0; i < NH * HD; i++)
        d->qb[i] = (float)kref_normal(&rng);
    for (int i = 0; i < NKV * HD; i++)
        d->kb[i] = (float)kref_normal(&rng);
    random_blocks(RT_GGUF_TYPE_Q4_1, d->q41, NH * HD * KD / 32);
    random_blocks(RT_GGUF_TYPE_Q8_0, d->k80, NKV * HD * KD / 32);
}

static void qk_permute(const QkData *in, QkData *out)
{
    converter_permute((const void *)in->q, (void *)out->q, NH * HD, NH, KD * 4);
    converter_permute((const void *)in->k, (void *)out->k, NKV * HD, NKV, KD * 4);
    converter_permute((const void *)in->qb, (void *)out->qb, NH * HD, NH, 4);
    converter_permute((const void *)in->kb, (void *)out->kb, NKV * HD, NKV, 4);
    converter_permute(in->q41, out->q41, NH * HD, NH, KD / 32 * 20);
    converter_permute(in->k80, out->k80, NKV * HD, NKV, KD / 32 * 34);
}

/* Layer 0: f32 weights and biases; layer 1: q4_1 q and q8_0 k. kv_heads 0: no head_count_kv key. */
static void qk_write(const char *path, const QkData *d, const char *arch, uint32_t heads, uint32_t kv_heads)
{
    KfGgTensor t[] = {
        {"blk.0.attn_q.weight", RT_GGUF_TYPE_F32, 2, {KD, NH * HD}, d->q, sizeof d->q},
        {"blk.0.attn_k.weight", RT_GGUF_TYPE_F32, 2, {KD, NKV * HD}, d->k, sizeof d->k},
        {"blk.0.attn_q.bias", RT_GGUF_TYPE_F32, 1, {NH * HD}, d->qb, sizeof d->qb},
        {"blk.0.attn_k.bias", RT_GGUF_TYPE_F32, 1, {NKV * HD}, d->kb, sizeof d->kb},
        {"blk.1.attn_q.weight", RT_GGUF_TYPE_Q4_1, 2, {KD, NH * HD}, d->q41, sizeof d->q41},
        {"blk.1.attn_k.weight", RT_GGUF_TYPE_Q8_0, 2, {KD, NKV * HD}, d->k80, sizeof d->k80},
        /* v is never permuted: the same bytes as k's f32 */
        {"blk.0.attn_v.weight", RT_GGUF_TYPE_F32, 2, {KD, NKV * HD}, d->k, sizeof d->k},
    };
    char key[64];
    KfGgKvs kv = {0};
    kf_gg_kv_str(&kv, "general.architecture", arch);
    snprintf(key, sizeof key, "%s.attention.head_count", arch);
    if (heads) kf_gg_kv_u32(&kv, key, heads);
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    if (kv_heads) kf_gg_kv_u32(&kv, key, kv_heads);
    kf_gg_write(path, &kv, t, (int)(sizeof t / sizeof t[0]));
    kf_gg_kvs_free(&kv);
}

/* Reads the q/k tensors from path and compares them with `want` (HF order, or file order for qwen2). */
static void qk_expect(const char *what, const char *path, const QkData *want, const QkData *file)
{
    RtWeights *w = open_ok(path);
    if (!w) return;
    const struct {
        const char *name, *dtype;
        int64_t d0, d1;
        const void *want;
        size_t n;
    } c[] = {
        {"model.layers.0.self_attn.q_proj.weight", "f32", NH * HD, KD, want->q, sizeof want->q},
        {"model.layers.0.self_attn.k_proj.weight", "f32", NKV * HD, KD, want->k, sizeof want->k},
        {"model.layers.0.self_attn.q_proj.bias", "f32", NH * HD, -1, want->qb, sizeof want->qb},
        {"model.layers.0.self_attn.k_proj.bias", "f32", NKV * HD, -1, want->kb, sizeof want->kb},
        {"model.layers.1.self_attn.q_proj.weight", "q4_1", NH * HD, KD, want->q41, sizeof want->q41},
        {"model.layers.1.self_attn.k_proj.weight", "q8_0", NKV * HD, KD, want->k80, sizeof want->k80},
        {"model.layers.0.self_attn.v_proj.weight", "f32", NKV * HD, KD, file->k, sizeof file->k},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        RtWeightSpec s = spec2(c[i].name, c[i].dtype, c[i].d0, c[i].d1);
        void *got = read_new(w, &s);
        KT_CHECK(got && (size_t)s.nbytes == c[i].n && !memcmp(got, c[i].want, c[i].n), "%s: %s as %s", what,
                 c[i].name, c[i].dtype);
        free(got);
    }
    /* the block rows dequantized: the same rows, as f32 */
    RtWeightSpec s = spec2("model.layers.1.self_attn.q_proj.weight", "f32", NH * HD, KD);
    float *got = read_new(w, &s), ref[NH * HD * KD];
    for (int b = 0; b < NH * HD * KD / 32; b++)
        ref_dequant(RT_GGUF_TYPE_Q4_1, want->q41 + 20 * b, ref + 32 * b);
    KT_CHECK(got && !memcmp(got, ref, sizeof ref), "%s: q4_1 q_proj as f32", what);
    free(got);
    rt_w_close(w);
}

static void test_unpermute_files(void)
{
    QkData *hf = xmalloc(sizeof *hf), *gg = xmalloc(sizeof *gg);
    qk_random(hf);
    qk_permute(hf, gg);
    qk_write(kf_at("qk-llama.gguf"), gg, "llama", NH, NKV);
    qk_expect("llama", kf_at("qk-llama.gguf"), hf, gg);
    /* qwen2: its converter does not permute, so the file's rows are served as they are */
    qk_write(kf_at("qk-qwen2.gguf"), gg, "qwen2", NH, NKV);
    qk_expect("qwen2", kf_at("qk-qwen2.gguf"), gg, gg);
    /* no head_count_kv: llama.cpp's default is head_count (so k here has NH heads too) */
    QkData *gg2 = xmalloc(sizeof *gg2), *hf2 = xmalloc(sizeof *hf2);
    *hf2 = *hf;
    qk_permute(hf2, gg2);
    converter_permute((const void *)hf->k, (void *)gg2->k, NKV * HD, NH, KD * 4);
    converter_permute((const void *)hf->kb, (void *)gg2->kb, NKV * HD, NH, 4);
    converter_permute(hf->k80, gg2->k80, NKV * HD, NH, KD / 32 * 34);
    qk_write(kf_at("qk-nokv.gguf"), gg2, "llama", NH, 0);
    qk_expect("llama without head_count_kv", kf_at("qk-nokv.gguf"), hf2, gg2);

    /* no head count at all; heads that do not divide the rows */
    qk_write(kf_at("qk-noheads.gguf"), gg, "llama", 0, 0);
    RtWeights *w = open_ok(kf_at("qk-noheads.gguf"));
    RtWeightSpec s = spec2("model.layers.0.self_attn.q_proj.weight", "f32", NH * HD, KD);
    if (w)
        expect_fail(w, &s, 1, KILN_ERR_FORMAT,
                    "tensor blk.0.attn_q.weight (model.layers.0.self_attn.q_proj.weight): no valid "
                    "llama.attention.head_count, which un-permuting its rows needs");
    RtWeightSpec v = spec2("model.layers.0.self_attn.v_proj.weight", "f32", NKV * HD, KD);
    KT_CHECK(w && rt_w_check(w, &v, 1, NULL, 0) == KILN_OK, "v needs no head count");
    rt_w_close(w);
    qk_write(kf_at("qk-5heads.gguf"), gg, "llama", 5, 3);
    w = open_ok(kf_at("qk-5heads.gguf"));
    RtWeightSpec k = spec2("model.layers.1.self_attn.k_proj.weight", "q8_0", NKV * HD, KD);
    if (w) {
        expect_fail(
            w, &s, 1, KILN_ERR_CORRUPT,
            "tensor blk.0.attn_q.weight (model.layers.0.self_attn.q_proj.weight): 32 rows do not divide "
            "into 5 heads of an even size (llama.attention.head_count)");
        expect_fail(
            w, &k, 1, KILN_ERR_CORRUPT,
            "tensor blk.1.attn_k.weight (model.layers.1.self_attn.k_proj.weight): 16 rows do not divide "
            "into 3 heads of an even size (llama.attention.head_count_kv)");
    }
    rt_w_close(w);

    /* a bias in a block format: its rows (elements) are not whole blocks, so it cannot be un-permuted */
    unsigned char qb[NH * HD / 32 * 34];
    random_blocks(RT_GGUF_TYPE_Q8_0, qb, NH * HD / 32);
    KfGgTensor bt[] = {{"blk.0.attn_q.bias", RT_GGUF_TYPE_Q8_0, 1, {NH * HD}, qb, sizeof qb}};
    KfGgKvs kv = {0};
    kf_gg_kv_str(&kv, "general.architecture", "llama");
    kf_gg_kv_u32(&kv, "llama.attention.head_count", NH);
    kf_gg_write(kf_at("qk-qbias.gguf"), &kv, bt, 1);
    kf_gg_kvs_free(&kv);
    w = open_ok(kf_at("qk-qbias.gguf"));
    RtWeightSpec qbs = spec2("model.layers.0.self_attn.q_proj.bias", "f32", NH * HD, -1);
    if (w)
        expect_fail(
            w, &qbs, 1, KILN_ERR_UNSUPPORTED,
            "tensor blk.0.attn_q.bias (model.layers.0.self_attn.q_proj.bias): its rows are not whole q8_0 "
            "blocks, so they cannot be un-permuted");
    rt_w_close(w);
    free(hf);
    free(gg);
    free(hf2);
    free(gg2);
}

/* ---- opening ---------------------------------------------------------------------------------------- */

static void test_open(void)
{
    float a[4] = {1, 2, 3, 4}, b[2] = {5, 6};
    char err[512];
    RtWeights *w;
    /* a sharded checkpoint in a directory, with a stray GGUF beside it: the index wins */
    mkdir(kf_at("ck"), 0755);
    KfStTensor s1[] = {{"model.embed_tokens.weight", "F32", 2, {2, 2}, a, sizeof a}};
    KfStTensor s2[] = {{"model.norm.weight", "F32", 1, {2}, b, sizeof b}};
    kf_st_write_tensors(kf_at("ck/model-00001-of-00002.safetensors"), s1, 1);
    kf_st_write_tensors(kf_at("ck/model-00002-of-00002.safetensors"), s2, 1);
    const char *index =
        "{\"weight_map\": {\"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\","
        " \"model.norm.weight\": \"model-00002-of-00002.safetensors\"}}";
    kf_spit(kf_at("ck/model.safetensors.index.json"), index, strlen(index));
    kf_gg_write(kf_at("ck/stray.gguf"), NULL, NULL, 0);
    w = open_ok(kf_at("ck"));
    if (w) {
        KT_CHECK(!strcmp(rt_w_kind(w), "safetensors") &&
                     !strcmp(rt_w_path(w), kf_at("ck/model.safetensors.index.json")),
                 "directory -> index: %s", rt_w_path(w));
        RtWeightSpec n = spec2("model.norm.weight", "bf16", 2, -1);
        uint16_t got[2] = {0};
        KT_CHECK(rt_w_read(w, &n, got, err, sizeof err) == KILN_OK && got[0] == 0x40a0 && got[1] == 0x40c0,
                 "read from shard 2: %s", err);
        RtWeightSpec m = spec2("lm_head.weight", "f32", 2, 2);
        expect_fail(w, &m, 1, KILN_ERR_ARG, "missing tensor lm_head.weight");
        /* a shape mismatch names the shard that holds the tensor */
        RtWeightSpec e = spec2("model.embed_tokens.weight", "f32", 4, -1);
        char want[600];
        KT_CHECK(rt_w_check(w, &e, 1, err, sizeof err) == KILN_ERR_ARG, "shard shape");
        snprintf(want, sizeof want,
                 "%s: tensor model.embed_tokens.weight: shape [2,2] in the file, the package "
                 "wants [4]",
                 kf_at("ck/model-00001-of-00002.safetensors"));
        KT_CHECK(!strcmp(err, want), "shard message: %s", err);
        rt_w_close(w);
    }
    /* the index by name, with a trailing slash on a directory, and shards alone */
    w = open_ok(kf_at("ck/model.safetensors.index.json"));
    rt_w_close(w);
    char slash[600];
    snprintf(slash, sizeof slash, "%s/", kf_at("ck"));
    w = open_ok(slash);
    KT_CHECK(w && !strcmp(rt_w_path(w), kf_at("ck/model.safetensors.index.json")), "trailing slash");
    rt_w_close(w);
    unlink(kf_at("ck/model.safetensors.index.json"));
    KT_CHECK(rt_w_open(kf_at("ck"), &w, err, sizeof err) == KILN_ERR_ARG && !w &&
                 kf_starts_with(err, kf_at("ck")) && strstr(err, "holds 2 *.safetensors files") &&
                 strstr(err, "model-00001-of-00002.safetensors, model-00002-of-00002.safetensors"),
             "two safetensors: %s", err);
    unlink(kf_at("ck/model-00002-of-00002.safetensors"));
    w = open_ok(kf_at("ck"));
    KT_CHECK(w && !strcmp(rt_w_path(w), kf_at("ck/model-00001-of-00002.safetensors")), "one safetensors");
    rt_w_close(w);
    unlink(kf_at("ck/model-00001-of-00002.safetensors"));
    w = open_ok(kf_at("ck"));
    KT_CHECK(w && !strcmp(rt_w_kind(w), "gguf") && rt_w_gguf(w), "one gguf");
    rt_w_close(w);
    kf_gg_write(kf_at("ck/other.gguf"), NULL, NULL, 0);
    KT_CHECK(rt_w_open(kf_at("ck"), &w, err, sizeof err) == KILN_ERR_ARG && strstr(err, "2 *.gguf files"),
             "two gguf: %s", err);
    /* a non-default index name; GGUF by magic under another name; an index by its '{' */
    mkdir(kf_at("ck2"), 0755);
    kf_st_write_tensors(kf_at("ck2/model-00001-of-00002.safetensors"), s1, 1);
    kf_st_write_tensors(kf_at("ck2/model-00002-of-00002.safetensors"), s2, 1);
    kf_spit(kf_at("ck2/pytorch.safetensors.index.json"), index, strlen(index));
    w = open_ok(kf_at("ck2"));
    KT_CHECK(w && !strcmp(rt_w_path(w), kf_at("ck2/pytorch.safetensors.index.json")), "other index name");
    rt_w_close(w);
    kf_spit(kf_at("ck2/weights.idx"), index, strlen(index));
    w = open_ok(kf_at("ck2/weights.idx"));
    KT_CHECK(w && !strcmp(rt_w_kind(w), "safetensors"), "index by content");
    rt_w_close(w);
    kf_gg_write(kf_at("model.bin"), NULL, NULL, 0);
    w = open_ok(kf_at("model.bin"));
    KT_CHECK(w && !strcmp(rt_w_kind(w), "gguf"), "gguf by magic");
    rt_w_close(w);

    /* failures: each one line naming the path, *out NULL */
    mkdir(kf_at("empty"), 0755);
    kf_spit(kf_at("empty/readme.txt"), "x", 1);
    kf_spit(kf_at("fake.gguf"), "GGML....", 8);
    kf_spit(kf_at("short.safetensors"), "\x10\0\0", 3);
    const struct {
        const char *path, *needle;
        KilnStatus want;
    } bad[] = {
        {kf_at("missing.gguf"), "does not exist", KILN_ERR_IO},
        {kf_at("missing"), "does not exist", KILN_ERR_IO},
        {kf_at("empty"), "holds no weight file", KILN_ERR_IO},
        {kf_at("fake.gguf"), "not a GGUF file", KILN_ERR_FORMAT},
        {kf_at("short.safetensors"), "truncated", KILN_ERR_CORRUPT},
        {kf_at("missing.index.json"), "does not exist", KILN_ERR_IO},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        w = (RtWeights *)1;
        KilnStatus s = rt_w_open(bad[i].path, &w, err, sizeof err);
        KT_CHECK(s == bad[i].want && w == NULL && kf_starts_with(err, bad[i].path) &&
                     strstr(err, bad[i].needle) && !strchr(err, '\n'),
                 "%s: %s: %s", bad[i].path, kiln_status_name(s), err);
    }
    w = (RtWeights *)1;
    KT_CHECK(rt_w_open(NULL, &w, err, sizeof err) == KILN_ERR_ARG && w == NULL &&
                 rt_w_open("x", NULL, NULL, 0) == KILN_ERR_ARG,
             "NULL arguments");
    rt_w_close(NULL);
    KT_CHECK(rt_w_kind(NULL) == NULL && rt_w_gguf(NULL) == NULL && rt_w_path(NULL) == NULL, "NULL handle");
}

/* A real GGUF written in full, then cut at many lengths: every open fails cleanly, naming the file. */
static void test_truncated(void)
{
    uint32_t f[64];
    fill_f32_values(f, 64);
    KfGgTensor t[] = {{"output_norm.weight", RT_GGUF_TYPE_F32, 1, {64}, f, sizeof f}};
    KfGgKvs kv = {0};
    kf_gg_kv_str(&kv, "general.architecture", "llama");
    kf_gg_write(kf_at("full.gguf"), &kv, t, 1);
    kf_gg_kvs_free(&kv);
    KfStTensor st[] = {{"model.norm.weight", "F32", 1, {64}, f, sizeof f}};
    kf_st_write_tensors(kf_at("full.safetensors"), st, 1);
    const char *const files[] = {"full.gguf", "full.safetensors"};
    for (int fi = 0; fi < 2; fi++) {
        long n;
        char *all = kf_slurp(kf_at(files[fi]), &n);
        if (!all) continue;
        int bad = 0;
        for (long cut = 0; cut < n; cut += cut < 64 ? 1 : 7) {
            char name[64], err[512] = "";
            snprintf(name, sizeof name, "cut-%ld-%s", cut, files[fi]);
            kf_spit(kf_at(name), all, (size_t)cut);
            RtWeights *w = (RtWeights *)1;
            KilnStatus s = rt_w_open(kf_at(name), &w, err, sizeof err);
            if (s == KILN_OK || w || !kf_starts_with(err, kf_at(name)) || strchr(err, '\n')) {
                if (bad++ < 3)
                    fprintf(stderr, "%s cut at %ld: %s: %s\n", files[fi], cut, kiln_status_name(s), err);
                if (s == KILN_OK) rt_w_close(w);
            }
            unlink(kf_at(name));
        }
        KT_CHECK(bad == 0, "%s: %d truncated files opened or gave bad messages", files[fi], bad);
        free(all);
    }
}

/* ---- errors ----------------------------------------------------------------------------------------- */

static void test_errors(void)
{
    enum { C = 576 };
    /* the brief's examples, with real sizes: q4_1 q_proj, a q8_0 o_proj, an f32 norm, a q5_k tensor */
    size_t nq = (size_t)C * C / 32 * 20, no = (size_t)C * C / 32 * 34;
    unsigned char *q = xmalloc(nq), *o = xmalloc(no), k4[2 * 176];
    random_blocks(RT_GGUF_TYPE_Q4_1, q, C * C / 32);
    random_blocks(RT_GGUF_TYPE_Q8_0, o, C * C / 32);
    memset(k4, 0, sizeof k4);
    float norm[C] = {0};
    KfGgTensor t[] = {
        {"blk.3.attn_q.weight", RT_GGUF_TYPE_Q4_1, 2, {C, C}, q, nq},
        {"blk.3.attn_output.weight", RT_GGUF_TYPE_Q8_0, 2, {C, C}, o, no},
        {"blk.3.attn_norm.weight", RT_GGUF_TYPE_F32, 1, {C}, norm, sizeof norm},
        {"blk.3.ffn_up.weight", RT_GGUF_TYPE_Q5_K, 2, {256, 2}, k4, sizeof k4},
        {"token_embd.weight", RT_GGUF_TYPE_F32, 2, {C, 1}, norm, sizeof norm},
    };
    KfGgKvs kv = {0};
    kf_gg_kv_str(&kv, "general.architecture", "llama");
    kf_gg_kv_u32(&kv, "llama.attention.head_count", 9);
    kf_gg_kv_u32(&kv, "llama.attention.head_count_kv", 3);
    kf_gg_write(kf_at("model.gguf"), &kv, t, 5);
    kf_gg_kvs_free(&kv);
    RtWeights *w = open_ok(kf_at("model.gguf"));
    if (!w) goto done;
    RtWeightSpec good = spec2("model.layers.3.self_attn.q_proj.weight", "q4_1", C, C);
    KT_CHECK(rt_w_check(w, &good, 1, NULL, 0) == KILN_OK, "good spec");
    RtWeightSpec s[2] = {good, spec2("model.layers.3.self_attn.q_proj.weight", "q4_1", C, 640)};
    expect_fail(
        w, s, 2, KILN_ERR_ARG,
        "tensor blk.3.attn_q.weight (model.layers.3.self_attn.q_proj.weight): shape [576,576] in the file, "
        "the package wants [576,640]");
    s[1] = spec2("model.layers.3.self_attn.q_proj.weight", "q4_1", C, -1);
    expect_fail(
        w, s, 2, KILN_ERR_ARG,
        "tensor blk.3.attn_q.weight (model.layers.3.self_attn.q_proj.weight): shape [576,576] in the file, "
        "the package wants [576]");
    s[1] = spec2("model.layers.3.self_attn.o_proj.weight", "q4_1", C, C);
    expect_fail(
        w, s, 2, KILN_ERR_UNSUPPORTED,
        "tensor blk.3.attn_output.weight (model.layers.3.self_attn.o_proj.weight): file has q8_0, the "
        "package wants q4_1 (compile with --set weight_dtype=q8_0, or gguf:FILE for a file of mixed "
        "formats)");
    s[1] = spec2("model.layers.3.input_layernorm.weight", "q4_0", C, -1);
    expect_fail(
        w, s, 2, KILN_ERR_UNSUPPORTED,
        "tensor blk.3.attn_norm.weight (model.layers.3.input_layernorm.weight): file has f32, the package "
        "wants q4_0; kiln does not quantize (compile without --set weight_dtype, or use a GGUF file with "
        "q4_0 weights)");
    s[1] = spec2("model.layers.3.mlp.up_proj.weight", "f32", 2, 256);
    expect_fail(
        w, s, 2, KILN_ERR_UNSUPPORTED,
        "tensor blk.3.ffn_up.weight (model.layers.3.mlp.up_proj.weight): file has q5_k, which kiln does "
        "not read (f32, f16, bf16, q4_0, q4_1, q8_0, q4_k, q6_k)");
    s[1] = spec2("model.norm.weight", "f32", C, -1);
    expect_fail(w, s, 2, KILN_ERR_ARG, "missing tensor output_norm.weight (model.norm.weight)");
    s[1] = spec2("lm_head.weight", "f32", 1, C);
    expect_fail(
        w, s, 2, KILN_ERR_ARG,
        "missing tensor output.weight (lm_head.weight); the model may tie it to the embedding (recipe "
        "option tie_embeddings)");
    s[1] = spec2("model.layers.3.self_attn.q_norm.weight", "f32", 64, -1);
    expect_fail(
        w, s, 2, KILN_ERR_ARG,
        "tensor model.layers.3.self_attn.q_norm.weight has no GGUF name (kiln maps Llama-style names: "
        "docs/WEIGHTS.md)");
    s[1] = spec2("model.layers.3.input_layernorm.weight", "i32", C, -1);
    expect_fail(
        w, s, 2, KILN_ERR_UNSUPPORTED,
        "tensor model.layers.3.input_layernorm.weight: the package wants dtype 'i32', which kiln does not "
        "load (f32, f16, bf16, q4_0, q4_1, q8_0, q4_k, q6_k)");
    s[1] = spec2("model.layers.3.input_layernorm.weight", "f32", C, -1);
    s[1].nbytes = 4 * C + 4;
    expect_fail(w, s, 2, KILN_ERR_CORRUPT,
                "tensor model.layers.3.input_layernorm.weight: the package says 2308 bytes, but f32 [576] is "
                "2304 bytes");
    s[1] = spec2("model.layers.3.self_attn.q_proj.weight", "q4_1", C, 48);
    expect_fail(
        w, s, 2, KILN_ERR_CORRUPT,
        "tensor model.layers.3.self_attn.q_proj.weight: the package wants q4_1 [576,48], whose rows are "
        "not whole 32-element blocks");
    s[1] = (RtWeightSpec){.name = "model.norm.weight", .dtype = "f32", .rank = 5, .nbytes = 4};
    expect_failc(w, s, 2, KILN_ERR_ARG, "the package's shape is not valid");
    s[1] = (RtWeightSpec){.name = NULL, .dtype = "f32", .rank = 0, .nbytes = 4};
    expect_failc(w, s, 2, KILN_ERR_ARG, "without a name");
    /* the first failure is the one reported */
    RtWeightSpec three[3] = {good, spec2("model.norm.weight", "f32", C, -1),
                             spec2("model.layers.3.self_attn.o_proj.weight", "q4_1", C, C)};
    char err[512];
    KT_CHECK(rt_w_check(w, three, 3, err, sizeof err) == KILN_ERR_ARG &&
                 strstr(err, "missing tensor output_norm"),
             "first failure: %s", err);
    KT_CHECK(rt_w_check(w, three, 0, err, sizeof err) == KILN_OK &&
                 rt_w_check(w, NULL, 0, NULL, 0) == KILN_OK,
             "no specs");
    KT_CHECK(rt_w_check(NULL, three, 1, err, sizeof err) == KILN_ERR_ARG &&
                 rt_w_check(w, NULL, 1, err, sizeof err) == KILN_ERR_ARG &&
                 rt_w_check(w, three, -1, err, sizeof err) == KILN_ERR_ARG &&
                 rt_w_read(NULL, &good, q, err, sizeof err) == KILN_ERR_ARG &&
                 rt_w_read(w, NULL, q, err, sizeof err) == KILN_ERR_ARG &&
                 rt_w_read(w, &good, NULL, err, sizeof err) == KILN_ERR_ARG,
             "NULL arguments");
    rt_w_close(w);

    /* a safetensors file: names as they are; messages name the tensor once */
    uint64_t f64[4] = {0};
    KfStTensor st[] = {{"model.norm.weight", "F32", 1, {C}, norm, sizeof norm},
                       {"model.layers.0.mlp.up_proj.weight", "F64", 2, {2, 2}, f64, sizeof f64},
                       {"model.layers.0.mlp.down_proj.weight", "BF16", 2, {2, 64}, q, 256}};
    kf_st_write_tensors(kf_at("model.safetensors"), st, 3);
    w = open_ok(kf_at("model.safetensors"));
    if (!w) goto done;
    s[0] = spec2("model.norm.weight", "bf16", C, -1);
    s[1] = spec2("model.layers.0.mlp.up_proj.weight", "f32", 2, 2);
    expect_fail(w, s, 2, KILN_ERR_UNSUPPORTED,
                "tensor model.layers.0.mlp.up_proj.weight: file has f64, which kiln does not read (f32, f16, "
                "bf16, q4_0, q4_1, q8_0, q4_k, q6_k)");
    s[1] = spec2("model.layers.0.mlp.down_proj.weight", "q8_0", 2, 64);
    expect_fail(
        w, s, 2, KILN_ERR_UNSUPPORTED,
        "tensor model.layers.0.mlp.down_proj.weight: file has bf16, the package wants q8_0; kiln does not "
        "quantize (compile without --set weight_dtype, or use a GGUF file with q8_0 weights)");
    s[1] = spec2("model.norm.weight", "f32", 1, C);
    expect_fail(w, s, 2, KILN_ERR_ARG,
                "tensor model.norm.weight: shape [576] in the file, the package wants [1,576]");
    s[1] = spec2("blk.0.attn_q.weight", "f32", 1, C);
    expect_fail(w, s, 2, KILN_ERR_ARG, "missing tensor blk.0.attn_q.weight");
    rt_w_close(w);

    /* GGUF architectures: unknown, absent */
    KfGgTensor n1[] = {{"output_norm.weight", RT_GGUF_TYPE_F32, 1, {C}, norm, sizeof norm}};
    kv = (KfGgKvs){0};
    kf_gg_kv_str(&kv, "general.architecture", "gemma");
    kf_gg_write(kf_at("gemma.gguf"), &kv, n1, 1);
    kf_gg_kvs_free(&kv);
    kf_gg_write(kf_at("noarch.gguf"), NULL, n1, 1);
    s[0] = spec2("model.norm.weight", "f32", C, -1);
    w = open_ok(kf_at("gemma.gguf"));
    if (w)
        expect_fail(w, s, 1, KILN_ERR_UNSUPPORTED,
                    "architecture 'gemma' is not supported (kiln reads llama and qwen2 GGUF files)");
    KT_CHECK(w && rt_w_gguf(w) && rt_gguf_tensor_count(rt_w_gguf(w)) == 1,
             "the handle still serves the tokenizer");
    rt_w_close(w);
    w = open_ok(kf_at("noarch.gguf"));
    if (w)
        expect_fail(w, s, 1, KILN_ERR_UNSUPPORTED,
                    "no general.architecture; kiln reads llama and qwen2 GGUF files");
    rt_w_close(w);
done:
    free(q);
    free(o);
}

/* ---- threads ---------------------------------------------------------------------------------------- */

typedef struct ThreadJob {
    const RtWeights *w;
    RtWeightSpec spec;
    void *out;
    KilnStatus status;
} ThreadJob;

static void *thread_read(void *arg)
{
    ThreadJob *j = arg;
    for (int rep = 0; rep < 4 && j->status == KILN_OK; rep++)
        j->status = rt_w_read(j->w, &j->spec, j->out, NULL, 0);
    return NULL;
}

static void test_threads(void)
{
    enum { NT = 6, ROWS = 64, K = 256 };
    const char *const names[NT] = {
        "model.layers.0.mlp.up_proj.weight",      "model.layers.1.mlp.up_proj.weight",
        "model.layers.2.mlp.up_proj.weight",      "model.layers.0.self_attn.q_proj.weight",
        "model.layers.1.self_attn.k_proj.weight", "model.layers.2.mlp.down_proj.weight"};
    char gnames[NT][64];
    unsigned char *data[NT];
    KfGgTensor t[NT];
    size_t nb = ROWS * K / 32 * 20;
    for (int i = 0; i < NT; i++) {
        rt_w_gguf_name(names[i], gnames[i], sizeof gnames[i]);
        data[i] = xmalloc(nb);
        random_blocks(RT_GGUF_TYPE_Q4_1, data[i], ROWS * K / 32);
        t[i] = (KfGgTensor){gnames[i], RT_GGUF_TYPE_Q4_1, 2, {K, ROWS}, data[i], nb};
    }
    KfGgKvs kv = {0};
    kf_gg_kv_str(&kv, "general.architecture", "llama");
    kf_gg_kv_u32(&kv, "llama.attention.head_count", 4);
    kf_gg_write(kf_at("threads.gguf"), &kv, t, NT);
    kf_gg_kvs_free(&kv);
    RtWeights *w = open_ok(kf_at("threads.gguf"));
    if (!w) goto done;
    ThreadJob jobs[NT];
    void *alone[NT];
    for (int i = 0; i < NT; i++) {
        jobs[i] = (ThreadJob){w, spec2(names[i], i % 2 ? "bf16" : "f32", ROWS, K), NULL, KILN_OK};
        jobs[i].out = xmalloc((size_t)jobs[i].spec.nbytes);
        alone[i] = read_new(w, &jobs[i].spec);
    }
    pthread_t th[NT];
    int started[NT];
    for (int i = 0; i < NT; i++)
        started[i] = pthread_create(&th[i], NULL, thread_read, &jobs[i]) == 0;
    for (int i = 0; i < NT; i++)
        if (started[i]) pthread_join(th[i], NULL);
    for (int i = 0; i < NT; i++) {
        KT_CHECK(started[i] && jobs[i].status == KILN_OK && alone[i] &&
                     !memcmp(jobs[i].out, alone[i], (size_t)jobs[i].spec.nbytes),
                 "thread %d: %s", i, names[i]);
        free(jobs[i].out);
        free(alone[i]);
    }
    rt_w_close(w);
done:
    for (int i = 0; i < NT; i++)
        free(data[i]);
}

/* ---- the real model --------------------------------------------------------------------------------- */

/* FNV-1a 64 of the little-endian bits of n floats (as test_weights.c, for gguf-py's hashes there). */
static uint64_t fnv_floats(const float *f, int64_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits = f32_bits(f[i]);
        for (int k = 0; k < 4; k++)
            h = (h ^ (bits >> 8 * k & 0xff)) * 0x100000001b3ull;
    }
    return h;
}

/* The weight table recipes/llama.lua builds for smollm2-135m with dtype bf16 and weight_dtype wdt. */
enum { R_L = 30, R_C = 576, R_H = 9, R_KV = 3, R_D = 64, R_F = 1536, R_V = 49152, R_N = 2 + 9 * R_L };
static int real_specs(RtWeightSpec *s, char names[][64], const char *wdt)
{
    int n = 0;
    snprintf(names[n], 64, "model.embed_tokens.weight");
    s[n] = spec2(names[n], "bf16", R_V, R_C), n++;
    for (int l = 0; l < R_L; l++) {
        const struct {
            const char *suffix;
            int64_t d0, d1;
        } p[9] = {{"input_layernorm.weight", R_C, -1},
                  {"self_attn.q_proj.weight", R_H * R_D, R_C},
                  {"self_attn.k_proj.weight", R_KV * R_D, R_C},
                  {"self_attn.v_proj.weight", R_KV * R_D, R_C},
                  {"self_attn.o_proj.weight", R_C, R_H * R_D},
                  {"post_attention_layernorm.weight", R_C, -1},
                  {"mlp.gate_proj.weight", R_F, R_C},
                  {"mlp.up_proj.weight", R_F, R_C},
                  {"mlp.down_proj.weight", R_C, R_F}};
        for (int k = 0; k < 9; k++) {
            snprintf(names[n], 64, "model.layers.%d.%s", l, p[k].suffix);
            s[n] = spec2(names[n], p[k].d1 < 0 ? "bf16" : wdt, p[k].d0, p[k].d1), n++;
        }
    }
    snprintf(names[n], 64, "model.norm.weight");
    s[n] = spec2(names[n], "bf16", R_C, -1), n++;
    return n;
}

static void test_real_model(void)
{
    const char *src = getenv("KILN_SOURCE_DIR");
    char path[1024], err[512], name[256], back[256];
    snprintf(path, sizeof path, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", src ? src : ".");
    if (access(path, R_OK) != 0) {
        const char *ci = getenv("CI"); /* CI=true: make test fetched it, so its absence is a failure */
        KT_CHECK(!ci || strcmp(ci, "true"), "CI=true: %s is absent (make models fetches it)", path);
        printf("test_rt_weights: %s absent, real-model checks skipped\n", path);
        return;
    }
    RtWeights *w = open_ok(path);
    if (!w) return;
    const RtGgufFile *g = rt_w_gguf(w);
    int n = rt_gguf_tensor_count(g), mapped = 0;
    for (int i = 0; i < n; i++) {
        const char *gn = rt_gguf_tensor_at(g, i)->name;
        int ok = rt_w_hf_name(gn, name, sizeof name) && rt_w_gguf_name(name, back, sizeof back) &&
                 !strcmp(back, gn);
        mapped += ok;
        if (!ok) fprintf(stderr, "real model: %s does not map\n", gn);
    }
    KT_CHECK(n == R_N && mapped == n, "real model: %d of %d tensors map", mapped, n);

    static RtWeightSpec specs[R_N];
    static char names[R_N][64];
    int ns = real_specs(specs, names, "q4_1");
    KT_CHECK(ns == R_N && rt_w_check(w, specs, ns, err, sizeof err) == KILN_OK, "weight_dtype=q4_1: %s", err);
    real_specs(specs, names, "bf16");
    KT_CHECK(rt_w_check(w, specs, ns, err, sizeof err) == KILN_OK, "weight_dtype='': %s", err);
    real_specs(specs, names, "q8_0"); /* specs[2]: layer 0's q_proj, the first linear weight */
    expect_fail(
        w, specs, 3, KILN_ERR_UNSUPPORTED,
        "tensor blk.0.attn_q.weight (model.layers.0.self_attn.q_proj.weight): file has q4_1, the package "
        "wants q8_0 (compile with --set weight_dtype=q4_1, or gguf:FILE for a file of mixed formats)");

    /* k_proj of layer 0, un-permuted as f32 then permuted back as the converter did: gguf-py's hash of
     * the file's rows (test_weights.c); and the q4_1 bytes, permuted back, are the file's */
    RtWeightSpec k = spec2("model.layers.0.self_attn.k_proj.weight", "f32", R_KV * R_D, R_C);
    float *kf = read_new(w, &k), *kp = xmalloc((size_t)k.nbytes);
    if (kf) {
        converter_permute((void *)kf, (void *)kp, R_KV * R_D, R_KV, R_C * 4);
        KT_CHECK(fnv_floats(kp, R_KV * R_D * R_C) == 0x3255da9083ac8ab6ull,
                 "real model: attn_k permuted back differs from gguf-py's dequantization");
        KT_CHECK(fnv_floats(kf, R_KV * R_D * R_C) != 0x3255da9083ac8ab6ull,
                 "real model: attn_k not un-permuted");
    }
    const RtGgufTensor *tq = rt_gguf_tensor_find(g, "blk.0.attn_q.weight");
    RtWeightSpec q = spec2("model.layers.0.self_attn.q_proj.weight", "q4_1", R_H * R_D, R_C);
    unsigned char *qb = read_new(w, &q), *qp = xmalloc((size_t)q.nbytes);
    if (qb && tq) {
        converter_permute(qb, qp, R_H * R_D, R_H, R_C / 32 * 20);
        KT_CHECK(!memcmp(qp, tq->data, (size_t)q.nbytes), "real model: q_proj q4_1 rows, permuted back");
        RtWeightSpec qf = spec2("model.layers.0.self_attn.q_proj.weight", "f32", R_H * R_D, R_C);
        float *qfl = read_new(w, &qf), *ref = xmalloc((size_t)qf.nbytes);
        rt_gguf_dequant(RT_GGUF_TYPE_Q4_1, qb, R_H * R_D * R_C, ref);
        KT_CHECK(qfl && !memcmp(qfl, ref, (size_t)qf.nbytes), "real model: q_proj f32 = dequant(q4_1 read)");
        free(qfl);
        free(ref);
    }
    /* the embedding (Q8_0) as f32: rows 0-1 match gguf-py's hash (test_weights.c); as bf16: rounded */
    RtWeightSpec e = spec2("model.embed_tokens.weight", "f32", R_V, R_C);
    float *ef = read_new(w, &e);
    KT_CHECK(ef && fnv_floats(ef, 2 * R_C) == 0x36b33c05efa74973ull, "real model: token_embd rows 0-1");
    RtWeightSpec eb = spec2("model.embed_tokens.weight", "bf16", R_V, R_C);
    uint16_t *ebf = read_new(w, &eb);
    if (ef && ebf) {
        int64_t bad = 0;
        for (int64_t i = 0; i < (int64_t)R_V * R_C; i += 97)
            bad += ebf[i] != ref_f32_to_bf16(f32_bits(ef[i]));
        KT_CHECK(bad == 0, "real model: embed as bf16: %lld differ", (long long)bad);
    }
    free(ef);
    free(ebf);
    free(kf);
    free(kp);
    free(qb);
    free(qp);
    rt_w_close(w);
    printf("test_rt_weights: real model %s checked\n", path);
}

int main(void)
{
    if (!kf_scratch_open("rt-weights")) return 1;
    rng = kref_rng(kref_seed());
    test_spec_parse();
    test_names();
    test_unpermute_row();
    test_float_conversions();
    test_gguf_conversions();
    test_unpermute_files();
    test_open();
    test_truncated();
    test_errors();
    test_threads();
    test_real_model();
    kf_scratch_close();
    return kt_done("test_rt_weights");
}
