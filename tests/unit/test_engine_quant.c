/* test_engine_quant.c — w4a16 and fp8 packages end to end on the host backend: the tiny recipe
 * (intermediate 256, so every K is a multiple of 64 too) compiled with
 * weight_dtype=w4g32z (and w4g32) reads GPTQ (v1, and v2 through config.json) and AWQ INT4 checkpoints
 * whose Linears hold random 4-bit codes, zero points and f16 scales; its logits (kiln_engine_score) must
 * match the bf16 package run on the dense checkpoint holding bf16(f32(q - z) * f32(bf16(s))) — the value the
 * qmatmul kernel computes before its dot (f16 scales with bf16 activations: the scale rounded to bf16
 * first, docs/KERNELS.md; the logits are then bit-identical on the host, so the bound is 1e-3: without
 * the rounding the reference alone was off by up to 1.1e-2). Also the binder's refusals: a package without
 * zero points on an asymmetric checkpoint, a group size that differs, a missing qzeros, a GGUF file. fp8
 * (weight_dtype=f8g32): FP8 checkpoints whose Linears hold random e4m3 codes with F32 scales per tensor (a
 * scalar), per output channel ([N, 1]) or per 16 x 32 block (`_scale_inv`, DeepSeek-style); the logits must
 * match the bf16 package on the dense checkpoint holding bf16(f32(q) * s). Refusals: scale blocks narrower
 * than the package's groups, a missing scale, a bf16 tensor where FP8 is wanted. GGUF K-quants
 * (weight_dtype=q4_k, q6_k; the tiny recipe at hidden 256): logits against the f32 package reading the same
 * GGUF file dequantized (kquant_checks). */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/llvm/cg_host.h"
#include "kfile.h"
#include "kiln.h"
#include "kref.h"
#include "krun.h"
#include "kt.h"
#include "runtime/rt_package.h"
#include <sqlite3.h>

enum { G = 32, MAXW = 64, T = 21 };
enum { CK_GPTQ, CK_GPTQ_V2, CK_AWQ };

typedef struct Linear { /* one Linear of the model: q[n][k], zero points z[n][g], scales (f16 bits) */
    char *name;         /* "...q_proj.weight" */
    int64_t N, K;
    uint8_t *q, *z;
    uint16_t *s;
} Linear;

typedef struct Model {
    KfStTensor dense[MAXW]; /* every weight as bf16 (Linears dequantized) */
    int n;
    Linear lin[MAXW];
    int n_lin;
} Model;

static uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static float bf16_value(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static float f16_value(uint16_t h)
{
    int e = h >> 10 & 31, m = h & 1023;
    float v = e ? ldexpf((float)(m | 1024), e - 25) : ldexpf((float)m, -24);
    return h >> 15 ? -v : v;
}

static int is_linear(const char *name, int rank)
{
    return rank == 2 && strstr(name, "_proj.weight") != NULL;
}

/* Random weights for the package's table; sym: every zero point 8. */
static int make_model(const char *pkg_path, KrefRng *g, int sym, Model *m)
{
    KilnPackage *pkg;
    char err[512];
    memset(m, 0, sizeof *m);
    if (kiln_package_open(pkg_path, &pkg, err, sizeof err) != KILN_OK) {
        KT_CHECK(0, "%s", err);
        return 0;
    }
    sqlite3_stmt *st;
    sqlite3_prepare_v2(rt_pkg_db(pkg), "SELECT name, shape FROM weights ORDER BY name", -1, &st, NULL);
    while (sqlite3_step(st) == SQLITE_ROW && m->n < MAXW) {
        KfStTensor *w = &m->dense[m->n++];
        w->name = strdup((const char *)sqlite3_column_text(st, 0));
        w->dtype = "BF16";
        size_t elems = 1;
        char *p = (char *)sqlite3_column_text(st, 1);
        while (*p == '[' || *p == ',') {
            w->shape[w->n_dims] = strtoll(p + 1, &p, 10);
            elems *= (size_t)w->shape[w->n_dims++];
        }
        uint16_t *d = malloc(elems * 2);
        w->data = d, w->nbytes = elems * 2;
        if (!is_linear(w->name, w->n_dims)) {
            int norm = strstr(w->name, "norm") != NULL;
            for (size_t i = 0; i < elems; i++)
                d[i] = bf16_of((float)(norm ? 1.0 + 0.1 * kref_normal(g) : 0.08 * kref_normal(g)));
            continue;
        }
        Linear *l = &m->lin[m->n_lin++];
        l->name = strdup(w->name);
        l->N = w->shape[0], l->K = w->shape[1];
        int64_t groups = l->N * (l->K / G);
        l->q = malloc(elems), l->z = malloc((size_t)groups), l->s = malloc((size_t)groups * 2);
        for (int64_t i = 0; i < groups; i++) {
            l->z[i] = sym ? 8 : (uint8_t)(1 + kref_next(g) % 15); /* 1..15: every format stores it */
            float sc = (float)(0.004 + 0.004 * (double)(kref_next(g) % 1000) / 1000.0);
            uint32_t u; /* f32 -> f16 by truncation of a normal value: exact bits, any value will do */
            memcpy(&u, &sc, 4);
            l->s[i] = (uint16_t)(((u >> 23 & 255) - 112) << 10 | (u >> 13 & 1023));
        }
        for (int64_t n = 0; n < l->N; n++)
            for (int64_t k = 0; k < l->K; k++) {
                uint8_t q = (uint8_t)(kref_next(g) % 16);
                int64_t gi = n * (l->K / G) + k / G;
                l->q[n * l->K + k] = q;
                d[n * l->K + k] =
                    bf16_of((float)((int)q - (int)l->z[gi]) * bf16_value(bf16_of(f16_value(l->s[gi]))));
            }
    }
    sqlite3_finalize(st);
    kiln_package_close(pkg);
    return m->n > 0;
}

static void free_model(Model *m)
{
    for (int i = 0; i < m->n; i++)
        free((void *)m->dense[i].name), free((void *)m->dense[i].data);
    for (int i = 0; i < m->n_lin; i++)
        free(m->lin[i].name), free(m->lin[i].q), free(m->lin[i].z), free(m->lin[i].s);
}

/* The checkpoint in format f: the non-Linear weights as bf16, each Linear as qweight/qzeros/scales
 * (GPTQ: [K/8,N] words of eight k, zeros [K/G,N/8] stored z - 1 (v1) or z (v2); AWQ: [K,N/8] words of
 * eight n in AWQ's nibble slots, zeros likewise, stored z); drop: a tensor suffix to leave out. */
static void write_quant(const Model *m, int f, const char *path, const char *drop)
{
    static const int slot[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    KfStTensor t[4 * MAXW];
    char *names[4 * MAXW];
    int n = 0, nn = 0;
    for (int i = 0; i < m->n; i++)
        if (!is_linear(m->dense[i].name, m->dense[i].n_dims)) t[n++] = m->dense[i];
    for (int i = 0; i < m->n_lin; i++) {
        const Linear *l = &m->lin[i];
        int64_t N = l->N, K = l->K, KG = K / G;
        size_t plen = strlen(l->name) - strlen(".weight");
        int awq = f == CK_AWQ;
        uint32_t *qw = calloc((size_t)(N * K / 8), 4), *qz = calloc((size_t)(KG * N / 8), 4);
        uint16_t *sc = malloc((size_t)(KG * N) * 2);
        for (int64_t nn_ = 0; nn_ < N; nn_++)
            for (int64_t k = 0; k < K; k++) {
                uint32_t q = l->q[nn_ * K + k];
                if (awq)
                    qw[k * (N / 8) + nn_ / 8] |= q << (4 * slot[nn_ % 8]);
                else
                    qw[(k / 8) * N + nn_] |= q << (4 * (k % 8));
            }
        for (int64_t gi = 0; gi < KG; gi++)
            for (int64_t nn_ = 0; nn_ < N; nn_++) {
                uint32_t z = l->z[nn_ * KG + gi] - (f == CK_GPTQ ? 1 : 0);
                qz[gi * (N / 8) + nn_ / 8] |= z << (4 * (awq ? slot[nn_ % 8] : nn_ % 8));
                sc[gi * N + nn_] = l->s[nn_ * KG + gi];
            }
        const char *suf[3] = {"qweight", "qzeros", "scales"};
        const void *data[3] = {qw, qz, sc};
        int64_t sh[3][2] = {{awq ? K : K / 8, awq ? N / 8 : N}, {KG, N / 8}, {KG, N}};
        for (int j = 0; j < 3; j++) {
            if (drop && !strcmp(drop, suf[j])) continue;
            char *name = malloc(plen + 16);
            snprintf(name, plen + 16, "%.*s.%s", (int)plen, l->name, suf[j]);
            names[nn++] = name;
            t[n++] = (KfStTensor){name,    j == 2 ? "F16" : "I32",
                                  2,       {sh[j][0], sh[j][1]},
                                  data[j], (size_t)(sh[j][0] * sh[j][1]) * (j == 2 ? 2 : 4)};
        }
        names[nn++] = (char *)qw, names[nn++] = (char *)qz, names[nn++] = (char *)sc;
    }
    kf_st_write_tensors(path, t, n);
    for (int i = 0; i < nn; i++)
        free(names[i]);
}

static KilnEngine *open_engine(const char *pkg, const char *weights, char *err, int errlen)
{
    KilnEngineOptions o;
    kiln_engine_options_init(&o);
    o.device = -2;
    o.kv_cache_bytes = 8 << 20;
    KilnEngine *e = NULL;
    if (kiln_engine_open(pkg, weights, &o, &e, err, errlen) != KILN_OK) return NULL;
    return e;
}

/* Logits of the T tokens, or NULL (a check failed). */
static float *score(const char *pkg, const char *weights, const int32_t *tok, int *V)
{
    char err[512];
    KilnEngine *e = open_engine(pkg, weights, err, sizeof err);
    KT_CHECK(e != NULL, "open %s with %s: %s", pkg, weights, err);
    if (!e) return NULL;
    *V = kiln_engine_vocab(e);
    float *out = malloc(sizeof(float) * (size_t)(T * *V));
    for (int i = 0; i < T * *V; i++)
        out[i] = NAN; /* poisoned */
    KilnStatus s = kiln_engine_score(e, tok, T, out);
    KT_CHECK(s == KILN_OK, "score %s: %s", pkg, kiln_engine_errmsg(e));
    kiln_engine_close(e);
    if (s != KILN_OK) free(out), out = NULL;
    return out;
}

static double rel_l2(const float *a, const float *b, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++)
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
    return den > 0 && num == num ? sqrt(num / den) : INFINITY;
}

/* Opening pkg with weights fails with a message holding `want`. */
static void expect_refusal(const char *what, const char *pkg, const char *weights, const char *want)
{
    char err[512] = "";
    KilnEngine *e = open_engine(pkg, weights, err, sizeof err);
    KT_CHECK(!e && strstr(err, want) && !strchr(err, '\n'), "%s: %s", what, e ? "opened" : err);
    if (e) kiln_engine_close(e);
}

static int compile(const char *kiln, const char *src, const char *set, const char *out)
{
    char cmd[2048], cache[1200];
    snprintf(cmd, sizeof cmd,
             "'%s' compile '%s/recipes/llama.lua' --model tiny --set intermediate_size=256 %s --target host "
             "%s -o '%s'",
             kiln, src, set, krun_compile_cache_flag(cache, sizeof cache), out);
    int ok = system(cmd) == 0;
    KT_CHECK(ok, "%s", cmd);
    return ok;
}

/* ---- fp8 ---- */

enum { F8_TENSOR, F8_CHANNEL, F8_BLOCK, F8_BN = 16, F8_BK = 32 };

/* The value of e4m3 code c (no NaN among the codes made here). */
static float e4m3_value(uint8_t c)
{
    int e = c >> 3 & 15, m = c & 7;
    float v = e ? ldexpf((float)(8 + m), e - 10) : ldexpf((float)m, -9);
    return c >> 7 ? -v : v;
}

/* An FP8 checkpoint of m's shapes: non-Linears bf16 as in m; each Linear random e4m3 codes (|q| in
 * [1/8, 15]) with scales of `kind` (F8_BLOCK: F8_BN x F8_BK blocks, as weight_scale_inv); into `dense` the
 * bf16(f32(q) * s) model. drop_scale: leave the scales out. */
static void write_fp8(const Model *m, int kind, const char *path, KfStTensor *dense, KrefRng *g,
                      int drop_scale)
{
    KfStTensor t[2 * MAXW] = {{0}};
    void *owned[2 * MAXW];
    char *names[MAXW];
    int n = 0, no = 0, nn = 0;
    for (int i = 0; i < m->n; i++) {
        dense[i] = m->dense[i];
        if (!is_linear(m->dense[i].name, m->dense[i].n_dims)) {
            t[n++] = m->dense[i];
            continue;
        }
        int64_t N = m->dense[i].shape[0], K = m->dense[i].shape[1];
        int64_t rows = kind == F8_TENSOR ? 1 : kind == F8_CHANNEL ? N : (N + F8_BN - 1) / F8_BN;
        int64_t cols = kind == F8_BLOCK ? (K + F8_BK - 1) / F8_BK : 1;
        uint8_t *q = malloc((size_t)(N * K));
        float *sc = malloc(sizeof(float) * (size_t)(rows * cols));
        uint16_t *d = malloc((size_t)(N * K) * 2);
        for (int64_t j = 0; j < rows * cols; j++)
            sc[j] = (float)(0.002 + 0.004 * (double)(kref_next(g) % 1000) / 1000.0);
        for (int64_t r = 0; r < N; r++)
            for (int64_t k = 0; k < K; k++) {
                uint8_t c = (uint8_t)((kref_next(g) & 0x80) | (4 + kref_next(g) % 7) << 3 | kref_next(g) % 8);
                int64_t si = kind == F8_TENSOR ? 0 : kind == F8_CHANNEL ? r : (r / F8_BN) * cols + k / F8_BK;
                q[r * K + k] = c;
                d[r * K + k] = bf16_of(e4m3_value(c) * sc[si]);
            }
        dense[i].data = d, dense[i].nbytes = (size_t)(N * K) * 2;
        t[n++] = (KfStTensor){m->dense[i].name, "F8_E4M3", 2, {N, K}, q, (size_t)(N * K)};
        if (!drop_scale) {
            char *name = malloc(strlen(m->dense[i].name) + 16);
            sprintf(name, "%s%s", m->dense[i].name, kind == F8_BLOCK ? "_scale_inv" : "_scale");
            names[nn++] = name;
            KfStTensor st = {name,         "F32", kind == F8_TENSOR ? 0 : 2,
                             {rows, cols}, sc,    sizeof(float) * (size_t)(rows * cols)};
            t[n++] = st;
        }
        owned[no++] = q, owned[no++] = sc;
    }
    kf_st_write_tensors(path, t, n);
    for (int i = 0; i < no; i++)
        free(owned[i]);
    for (int i = 0; i < nn; i++)
        free(names[i]);
}

static void free_dense_linears(const Model *m, KfStTensor *dense)
{
    for (int i = 0; i < m->n; i++)
        if (dense[i].data != m->dense[i].data) free((void *)dense[i].data);
}

/* fp8 packages (f8g32; f8g64 for the refusal) against bf16 on the same values, for every scale kind. */
static void fp8_checks(const char *dense_pkg, const char *f8_pkg, const char *f8g64_pkg, KrefRng *g)
{
    Model m;
    if (!make_model(dense_pkg, g, 1, &m)) return;
    int32_t tok[T];
    for (int i = 0; i < T; i++)
        tok[i] = (int32_t)(kref_next(g) % 256);
    static const char *const kinds[] = {"per-tensor", "per-channel", "block"};
    for (int kind = 0; kind < 3; kind++) {
        KfStTensor dense[MAXW];
        char ck[64], dn[64];
        snprintf(ck, sizeof ck, "fp8-%d.safetensors", kind);
        snprintf(dn, sizeof dn, "fp8-dense-%d.safetensors", kind);
        char ck_path[512], dense_path[512];
        snprintf(ck_path, sizeof ck_path, "%s", kf_at(ck));
        snprintf(dense_path, sizeof dense_path, "%s", kf_at(dn));
        write_fp8(&m, kind, ck_path, dense, g, 0);
        kf_st_write_tensors(dense_path, dense, m.n);
        int V = 0, V2 = 0;
        float *want = score(dense_pkg, dense_path, tok, &V),
              *got = want ? score(f8_pkg, ck_path, tok, &V2) : NULL;
        if (want && got) {
            double err = V == V2 ? rel_l2(got, want, T * V) : INFINITY;
            KT_CHECK(err < 1e-2, "fp8 %s scales: logits rel L2 %.3g vs the dense bf16 model", kinds[kind],
                     err);
        }
        free(want);
        free(got);
        if (kind == F8_BLOCK) /* 32-wide scale blocks serve 32-wide groups, not 64-wide ones */
            expect_refusal("fp8 blocks narrower than the groups", f8g64_pkg, ck_path, "blocks are 32 wide");
        if (kind == F8_CHANNEL) {
            expect_refusal("a bf16 checkpoint for an fp8 package", f8_pkg, dense_path,
                           "the package wants F8_E4M3");
            KfStTensor d2[MAXW];
            write_fp8(&m, kind, kf_at("fp8-noscale.safetensors"), d2, g, 1);
            free_dense_linears(&m, d2);
            expect_refusal("no scales", f8_pkg, kf_at("fp8-noscale.safetensors"), "_scale");
        }
        free_dense_linears(&m, dense);
    }
    free_model(&m);
}

/* ---- GGUF K-quants ---- */

/* The GGUF name of package weight hf (the loader's llama table, docs/WEIGHTS.md). */
static void gguf_name(const char *hf, char *out, size_t n)
{
    static const char *const map[][2] = {
        {"self_attn.q_proj.weight", "attn_q"},          {"self_attn.k_proj.weight", "attn_k"},
        {"self_attn.v_proj.weight", "attn_v"},          {"self_attn.o_proj.weight", "attn_output"},
        {"mlp.gate_proj.weight", "ffn_gate"},           {"mlp.up_proj.weight", "ffn_up"},
        {"mlp.down_proj.weight", "ffn_down"},           {"input_layernorm.weight", "attn_norm"},
        {"post_attention_layernorm.weight", "ffn_norm"}};
    int l, at = 0;
    if (sscanf(hf, "model.layers.%d.%n", &l, &at) == 1 && at > 0)
        for (unsigned i = 0; i < sizeof map / sizeof map[0]; i++)
            if (!strcmp(hf + at, map[i][0])) {
                snprintf(out, n, "blk.%d.%s.weight", l, map[i][1]);
                return;
            }
    snprintf(out, n, "%s",
             !strcmp(hf, "model.embed_tokens.weight") ? "token_embd.weight"
             : !strcmp(hf, "model.norm.weight")       ? "output_norm.weight"
             : !strcmp(hf, "lm_head.weight")          ? "output.weight"
                                                      : hf);
}

/* The GGUF type write_kquant_gguf gives Linear `name` in mode KQ_*: all Q4_K, all Q6_K, mixed as llama.cpp's
 * Q4_K_M mixes them (v_proj and down_proj Q6_K, the rest Q4_K; layer 0's o_proj left BF16), or mixed
 * with one Q5_K (a type kiln does not read). */
enum { KQ_Q4, KQ_Q6, KQ_MIXED, KQ_Q5 };
static RtGgufType kquant_type(const char *name, int mode)
{
    if (mode == KQ_Q4 || mode == KQ_Q6) return mode == KQ_Q6 ? RT_GGUF_TYPE_Q6_K : RT_GGUF_TYPE_Q4_K;
    if (mode == KQ_Q5 && strstr(name, "layers.1.self_attn.k_proj")) return RT_GGUF_TYPE_Q5_K;
    if (strstr(name, "layers.0.self_attn.o_proj")) return RT_GGUF_TYPE_BF16;
    return strstr(name, "v_proj") || strstr(name, "down_proj") ? RT_GGUF_TYPE_Q6_K : RT_GGUF_TYPE_Q4_K;
}

/* The tiny model at hidden 256 (every Linear's K a multiple of 256) as a GGUF file whose Linears hold
 * random super-blocks of kquant_type(mode), d and dmin chosen to keep the weights near 1, the rest bf16. */
static void write_kquant_gguf(const Model *m, int mode, const char *path, KrefRng *g)
{
    KfGgTensor t[MAXW];
    char names[MAXW][96];
    void *blocks[MAXW] = {0};
    for (int i = 0; i < m->n; i++) {
        const KfStTensor *w = &m->dense[i];
        gguf_name(w->name, names[i], sizeof names[i]);
        t[i] = (KfGgTensor){names[i], RT_GGUF_TYPE_BF16, w->n_dims, {0}, w->data, w->nbytes};
        for (int d = 0; d < w->n_dims; d++)
            t[i].ne[d] = (uint64_t)w->shape[w->n_dims - 1 - d];
        RtGgufType type = kquant_type(w->name, mode);
        if (!is_linear(w->name, w->n_dims) || type == RT_GGUF_TYPE_BF16) continue;
        int q6 = type == RT_GGUF_TYPE_Q6_K, block = 0, bytes = 0;
        rt_gguf_type_block(type, &block, &bytes);
        size_t nb = (size_t)(w->shape[0] * w->shape[1] / block);
        unsigned char *b = blocks[i] = malloc(nb * bytes);
        for (size_t j = 0; j < nb * bytes; j++)
            b[j] = (unsigned char)kref_next(g);
        for (size_t j = 0; j < nb; j++, b += bytes) {
            uint16_t d = kref_f32_to_f16((float)(q6 ? 2e-4 : 1e-3) * (float)(1 + kref_next(g) % 100) / 50);
            uint16_t dmin = kref_f32_to_f16((float)(1e-3 * (double)(kref_next(g) % 100) / 50));
            memcpy(b + (q6 ? 208 : 0), &d, 2);
            if (!q6) memcpy(b + 2, &dmin, 2);
        }
        t[i].type = type;
        t[i].data = blocks[i], t[i].nbytes = nb * bytes;
    }
    KfGgKvs kv = {0};
    kf_gg_kv_str(&kv, "general.architecture", "llama");
    kf_gg_kv_u32(&kv, "llama.attention.head_count", 4);
    kf_gg_kv_u32(&kv, "llama.attention.head_count_kv", 2);
    kf_gg_write(path, &kv, t, m->n);
    kf_gg_kvs_free(&kv);
    for (int i = 0; i < m->n; i++)
        free(blocks[i]);
}

/* kiln compile's output (both streams) on a failure: exit status non-zero, one line holding `want`. */
static void expect_compile_error(const char *what, const char *kiln, const char *src, const char *set,
                                 const char *out, const char *want)
{
    char cmd[2048], text[1024] = "";
    snprintf(cmd, sizeof cmd,
             "'%s' compile '%s/recipes/llama.lua' --model tiny --set intermediate_size=256 %s --target host "
             "--no-cache -o '%s' 2>&1",
             kiln, src, set, out);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(text, 1, sizeof text - 1, p) : 0;
    text[n] = 0;
    int rc = p ? pclose(p) : -1;
    FILE *f = fopen(out, "rb");
    KT_CHECK(rc != 0 && strstr(text, want) && strchr(text, '\n') == text + n - 1 && !f, "%s: rc %d, '%s'",
             what, rc, text);
    if (f) fclose(f);
}

/* Q4_K and Q6_K packages against the f32 package on the same GGUF file: the f32 package reads the
 * K-quant Linears dequantized (rt_gguf_dequant), the K-quant package runs qmatmul's K-quant kernels on
 * the super-blocks as stored; the same f32 weights summed in another order, so logits within 1e-4. Also:
 * a Q4_K package refuses the Q6_K file. A mixed file (Q4_K_M's mix, one Linear BF16) compiled with
 * weight_dtype=gguf:PATH: each Linear's qmatmul takes its own format (the BF16 one a dense f32 matmul),
 * logits within 1e-4 of the f32 package too; a Q5_K Linear or a missing file stops the compile with one
 * line. */
static void kquant_checks(const char *kiln, const char *src, KrefRng *g)
{
    const char *base = "--set hidden_size=256 --set intermediate_size=512 --set dtype=f32";
    char set[1024], f32_pkg[512], kq_pkg[2][512];
    snprintf(f32_pkg, sizeof f32_pkg, "%s", kf_at("k-f32.kiln"));
    if (!compile(kiln, src, base, f32_pkg)) return;
    for (int q6 = 0; q6 < 2; q6++) {
        snprintf(kq_pkg[q6], sizeof kq_pkg[q6], "%s", kf_at(q6 ? "q6_k.kiln" : "q4_k.kiln"));
        snprintf(set, sizeof set, "%s --set weight_dtype=%s", base, q6 ? "q6_k" : "q4_k");
        if (!compile(kiln, src, set, kq_pkg[q6])) return;
    }
    Model m;
    if (!make_model(f32_pkg, g, 1, &m)) return;
    int32_t tok[T];
    for (int i = 0; i < T; i++)
        tok[i] = (int32_t)(kref_next(g) % 256);
    for (int q6 = 0; q6 < 2; q6++) {
        char path[512];
        snprintf(path, sizeof path, "%s", kf_at(q6 ? "m-q6_k.gguf" : "m-q4_k.gguf"));
        write_kquant_gguf(&m, q6 ? KQ_Q6 : KQ_Q4, path, g);
        int V = 0, V2 = 0;
        float *want = score(f32_pkg, path, tok, &V), *got = want ? score(kq_pkg[q6], path, tok, &V2) : NULL;
        double err = got && V == V2 ? rel_l2(got, want, T * V) : INFINITY;
        KT_CHECK(err < 1e-4, "%s package on a %s GGUF: logits rel L2 %.3g vs the f32 package",
                 q6 ? "q6_k" : "q4_k", q6 ? "Q6_K" : "Q4_K", err);
        free(want);
        free(got);
        if (q6) expect_refusal("a Q6_K file for a q4_k package", kq_pkg[0], path, "file has q6_k");
    }
    char mixed[512], q5[512], mixed_pkg[512];
    snprintf(mixed, sizeof mixed, "%s", kf_at("m-q4_k_m.gguf"));
    snprintf(q5, sizeof q5, "%s", kf_at("m-q5_k.gguf"));
    snprintf(mixed_pkg, sizeof mixed_pkg, "%s", kf_at("q4_k_m.kiln"));
    write_kquant_gguf(&m, KQ_MIXED, mixed, g);
    write_kquant_gguf(&m, KQ_Q5, q5, g);
    snprintf(set, sizeof set, "%s --set weight_dtype=gguf:%s", base, mixed);
    if (compile(kiln, src, set, mixed_pkg)) {
        int V = 0, V2 = 0;
        float *want = score(f32_pkg, mixed, tok, &V), *got = want ? score(mixed_pkg, mixed, tok, &V2) : NULL;
        double err = got && V == V2 ? rel_l2(got, want, T * V) : INFINITY;
        KT_CHECK(err < 1e-4,
                 "gguf: package on a mixed Q4_K/Q6_K/BF16 GGUF: logits rel L2 %.3g vs the f32 package", err);
        free(want);
        free(got);
        expect_refusal("the mixed package on the all-Q4_K file", mixed_pkg, kf_at("m-q4_k.gguf"),
                       "file has q4_k");
    }
    snprintf(set, sizeof set, "%s --set weight_dtype=gguf:%s", base, q5);
    expect_compile_error(
        "a Q5_K Linear", kiln, src, set, kf_at("q5.kiln"),
        "blk.1.attn_k.weight (model.layers.1.self_attn.k_proj.weight): file has q5_k, which kiln "
        "does not read");
    snprintf(set, sizeof set, "%s --set weight_dtype=gguf:%s", base, kf_at("absent.gguf"));
    expect_compile_error("a missing file", kiln, src, set, kf_at("absent.kiln"), "recipes/llama.lua:");
    free_model(&m);
}

int main(void)
{
    const char *kiln = getenv("KILN_BIN"), *src = getenv("KILN_SOURCE_DIR");
    if (!cg_host_jit_available()) return kt_skip_toolkit("test_engine_quant", "this build has no LLVM host backend");
    if (!kiln || !src) {
        printf("SKIP: needs KILN_BIN and KILN_SOURCE_DIR (run through ctest)\n");
        return 77;
    }
    if (!kf_scratch_open("engine-quant")) return 1;
    char dense_pkg[512], w4z_pkg[512], w4_pkg[512], w64_pkg[512], f8_pkg[512], f8g64_pkg[512];
    snprintf(dense_pkg, sizeof dense_pkg, "%s", kf_at("dense.kiln"));
    snprintf(w4z_pkg, sizeof w4z_pkg, "%s", kf_at("w4g32z.kiln"));
    snprintf(w4_pkg, sizeof w4_pkg, "%s", kf_at("w4g32.kiln"));
    snprintf(w64_pkg, sizeof w64_pkg, "%s", kf_at("w4g64z.kiln"));
    snprintf(f8_pkg, sizeof f8_pkg, "%s", kf_at("f8g32.kiln"));
    snprintf(f8g64_pkg, sizeof f8g64_pkg, "%s", kf_at("f8g64.kiln"));
    if (!compile(kiln, src, "", dense_pkg) || !compile(kiln, src, "--set weight_dtype=w4g32z", w4z_pkg) ||
        !compile(kiln, src, "--set weight_dtype=w4g32", w4_pkg) ||
        !compile(kiln, src, "--set weight_dtype=w4g64z", w64_pkg) ||
        !compile(kiln, src, "--set weight_dtype=f8g32", f8_pkg) ||
        !compile(kiln, src, "--set weight_dtype=f8g64", f8g64_pkg))
        return kt_done("test_engine_quant");
    KrefRng g = kref_rng(kref_seed()); /* printed; KILN_TEST_SEED replays it */
    int32_t tok[T];
    for (int sym = 0; sym < 2; sym++) {
        Model m;
        if (!make_model(dense_pkg, &g, sym, &m)) break;
        char dense[512];
        snprintf(dense, sizeof dense, "%s", kf_at(sym ? "dense-sym.safetensors" : "dense.safetensors"));
        kf_st_write_tensors(dense, m.dense, m.n);
        int V = 0, V2 = 0;
        for (int i = 0; i < T; i++)
            tok[i] = (int32_t)(kref_next(&g) % 256);
        float *want = score(dense_pkg, dense, tok, &V);
        static const char *const fmt_names[] = {"gptq", "gptq_v2", "awq"};
        for (int f = 0; want && f < 3; f++) {
            /* a directory per checkpoint: GPTQ v2 says so in its config.json */
            char dir[64], path[512];
            snprintf(dir, sizeof dir, "ck-%s-%d", fmt_names[f], sym);
            snprintf(path, sizeof path, "%s/model.safetensors", kf_at(dir));
            char mk[600];
            snprintf(mk, sizeof mk, "mkdir -p '%s'", kf_at(dir));
            KT_CHECK(system(mk) == 0, "%s", mk);
            write_quant(&m, f, path, NULL);
            if (f == CK_GPTQ_V2) { /* the key after 100 kB of other config: read the whole file */
                char cfg[600];
                snprintf(cfg, sizeof cfg, "%s/config.json", kf_at(dir));
                const char *head = "{\"pad\": \"",
                           *tail = "\", \"quantization_config\": {\"quant_method\": "
                                   "\"gptq\", \"bits\": 4, \"checkpoint_format\": \"gptq_v2\"}}";
                size_t pad = 100000, len = strlen(head) + pad + strlen(tail);
                char *text = malloc(len + 1);
                strcpy(text, head);
                memset(text + strlen(head), 'x', pad);
                strcpy(text + strlen(head) + pad, tail);
                kf_spit(cfg, text, len);
                free(text);
            }
            for (int p = 0; p < 1 + sym; p++) { /* w4g32z; with symmetric codes also w4g32 */
                float *got = score(p ? w4_pkg : w4z_pkg, path, tok, &V2);
                if (!got) continue;
                double err = V == V2 ? rel_l2(got, want, T * V) : INFINITY;
                KT_CHECK(err < 1e-3, "%s %s %s: logits rel L2 %.3g vs the dense bf16 model", fmt_names[f],
                         sym ? "symmetric" : "asymmetric", p ? "w4g32" : "w4g32z", err);
                free(got);
            }
            if (f == CK_GPTQ && !sym) {
                expect_refusal("no zero points in the package", w4_pkg, path, "zero points other than 8");
                expect_refusal("another group size", w64_pkg, path, "groups are 32 wide");
                expect_refusal("a dense checkpoint", w4z_pkg, dense, "missing tensor");
                write_quant(&m, f, kf_at("noz.safetensors"), "qzeros");
                expect_refusal("no qzeros", w4z_pkg, kf_at("noz.safetensors"), "qzeros");
            }
        }
        free(want);
        free_model(&m);
    }
    fp8_checks(dense_pkg, f8_pkg, f8g64_pkg, &g);
    kquant_checks(kiln, src, &g);
    /* a GGUF file holds no GPTQ/AWQ weights */
    KfGgKvs kv = {0};
    kf_gg_kv_str(&kv, "general.architecture", "llama");
    float one = 1;
    KfGgTensor t = {"token_embd.weight", RT_GGUF_TYPE_F32, 1, {1}, &one, 4};
    kf_gg_write(kf_at("m.gguf"), &kv, &t, 1);
    kf_gg_kvs_free(&kv);
    expect_refusal("a GGUF file", w4z_pkg, kf_at("m.gguf"), "");
    kf_scratch_close();
    return kt_done("test_engine_quant");
}
