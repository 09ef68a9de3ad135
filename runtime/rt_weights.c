/* rt_weights.c — binding a weight file to a package's weight table (rt_weights.h).
 *
 * One path in: a GGUF file, a safetensors file or index, or a directory holding one. Each package spec
 * is resolved to a Src (resolve): the tensor under its mapped name, its shape in package order, its
 * format, its rows, and whether its rows need un-permuting. resolve does every check, so rt_w_check is
 * resolve over the specs and rt_w_read is resolve then a row loop; a read never meets a surprise.
 *
 * Units: a read moves and converts a unit at a time, the innermost row of the stored tensor (GGUF ne[0],
 * safetensors' last dim; a scalar is one element), or, for q/k tensors to un-permute, everything under
 * one index of the outermost dimension (HF's rows: a row of a matrix, one element of a bias). A unit is
 * whole blocks of a block format, so q/k of a q4_1 file are un-permuted byte for byte. Float conversion
 * goes through f32, which holds f16, bf16 and the dequantized blocks exactly, so each element rounds once.
 */
#define _POSIX_C_SOURCE 200809L
#include "rt_weights.h"
#include "rt_file.h"
#include "rt_quant.h"
#include "rt_safetensors.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct RtWeights {
    char *path;       /* the file opened */
    RtGgufFile *gguf; /* exactly one of gguf and st */
    RtStCheckpoint *st;
    char arch[64]; /* GGUF general.architecture; "" when absent or unusable */
    int gptq_v2;   /* the checkpoint's config says checkpoint_format "gptq_v2" (zero points as stored) */
};

static int read_gptq_v2(const char *path);

/* ---- formats ------------------------------------------------------------------------------------------ */

/* The formats kiln reads: package dtype text, the GGUF type, block (elements) and bytes per block. The
 * w4a16 ones (ir/gir_dtypes.def: planar words, f16 scales, zeros "z" in groups of 32/64/128) and the fp8
 * ones (planar e4m3 codes, f32 scales per group of 32/64/128) no file stores as such: the binder builds
 * them from GPTQ/AWQ tensors (w4_resolve) or FP8 tensors and their scales (f8_resolve), so their GGUF
 * type is unused. */
enum {
    FMT_F32,
    FMT_F16,
    FMT_BF16,
    FMT_Q4_0,
    FMT_Q4_1,
    FMT_Q8_0,
    FMT_Q4_K,
    FMT_Q6_K,
    FMT_W4G32,
    FMT_W4G64,
    FMT_W4G128,
    FMT_W4G32Z,
    FMT_W4G64Z,
    FMT_W4G128Z,
    FMT_F8G32,
    FMT_F8G64,
    FMT_F8G128,
    FMT_COUNT,
    FMT_OTHER = -1
};
static const struct {
    const char *name;
    RtGgufType gguf;
    int block, bytes; /* 0 for the formats a file stores: their GGUF type's (fmt_block, fmt_bytes) */
} fmts[FMT_COUNT] = {
    {"f32", RT_GGUF_TYPE_F32, 0, 0},        {"f16", RT_GGUF_TYPE_F16, 0, 0},
    {"bf16", RT_GGUF_TYPE_BF16, 0, 0},      {"q4_0", RT_GGUF_TYPE_Q4_0, 0, 0},
    {"q4_1", RT_GGUF_TYPE_Q4_1, 0, 0},      {"q8_0", RT_GGUF_TYPE_Q8_0, 0, 0},
    {"q4_k", RT_GGUF_TYPE_Q4_K, 0, 0},      {"q6_k", RT_GGUF_TYPE_Q6_K, 0, 0},
    {"w4g32", RT_GGUF_TYPE_F32, 32, 18},    {"w4g64", RT_GGUF_TYPE_F32, 64, 34},
    {"w4g128", RT_GGUF_TYPE_F32, 128, 66},  {"w4g32z", RT_GGUF_TYPE_F32, 32, 19},
    {"w4g64z", RT_GGUF_TYPE_F32, 64, 35},   {"w4g128z", RT_GGUF_TYPE_F32, 128, 67},
    {"f8g32", RT_GGUF_TYPE_F32, 32, 36},    {"f8g64", RT_GGUF_TYPE_F32, 64, 68},
    {"f8g128", RT_GGUF_TYPE_F32, 128, 132},
};
#define FMT_LIST "f32, f16, bf16, q4_0, q4_1, q8_0, q4_k, q6_k"

/* Elements per block of format f, and bytes per block. */
static int fmt_block(int f)
{
    int block = fmts[f].block;
    if (!block) rt_gguf_type_block(fmts[f].gguf, &block, NULL); /* cannot fail: a type of the table */
    return block;
}

static int fmt_bytes(int f)
{
    int bytes = fmts[f].bytes;
    if (!bytes) rt_gguf_type_block(fmts[f].gguf, NULL, &bytes);
    return bytes;
}

static int fmt_is_block(int f)
{
    return fmt_block(f) > 1;
}

static int fmt_from_name(const char *name)
{
    for (int f = 0; f < FMT_COUNT; f++)
        if (!strcmp(name, fmts[f].name)) return f;
    return FMT_OTHER;
}

static int fmt_is_w4(int f)
{
    return f >= FMT_W4G32 && f <= FMT_W4G128Z;
}

static int fmt_is_f8(int f)
{
    return f >= FMT_F8G32;
}

static int fmt_from_gguf(RtGgufType t)
{
    for (int f = 0; f < FMT_W4G32; f++) /* the formats a file stores */
        if (fmts[f].gguf == t) return f;
    return FMT_OTHER;
}

static int fmt_from_st(RtStDtype t)
{
    return t == RT_ST_DTYPE_F32    ? FMT_F32
           : t == RT_ST_DTYPE_F16  ? FMT_F16
           : t == RT_ST_DTYPE_BF16 ? FMT_BF16
                                   : FMT_OTHER;
}

/* A format's name for messages in package style: lower case ("q6_k", "f64"). */
static void lower_name(const char *name, char *out, size_t n)
{
    size_t i = 0;
    for (; name[i] && i + 1 < n; i++)
        out[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
    out[i] = 0;
}

/* ---- float conversion -------------------------------------------------------------------------------- */

/* f32 to IEEE half, nearest even: overflow (>= 65520) to inf, tiny values to subnormals or zero; a NaN
 * stays a NaN of the same sign, quiet, with the top 9 bits of its payload. */
static uint16_t f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal half: drop 13 bits, round; a carry steps the exponent */
        uint32_t h = (a >> 13) - (112u << 10), rem = a & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    if (a < 0x33000000u) return (uint16_t)sign; /* below 2^-25: rounds to zero */
    /* subnormal half: value / 2^-24 = m * 2^(e + 1), e = exponent - 127 in [-25, -15] */
    uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23);
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

/* f32 to bfloat16, nearest even (overflow to inf); a NaN keeps its sign and top payload bits, quieted. */
static uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* n f32 values to dst (any alignment) in float format f. */
static void f32_row_to(int f, const float *src, int64_t n, unsigned char *dst)
{
    if (f == FMT_F32) {
        memcpy(dst, src, (size_t)n * 4);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = f == FMT_F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
        memcpy(dst + 2 * i, &h, 2);
    }
}

/* ---- names ------------------------------------------------------------------------------------------- */

enum { QK_NONE, QK_Q, QK_K }; /* which head count un-permutes a tensor's rows (architecture llama) */

static const struct {
    const char *gguf, *hf;
} global_names[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output.weight", "lm_head.weight"},
    {"output_norm.weight", "model.norm.weight"},
};

/* Per layer: GGUF "blk.N." + gguf, HF "model.layers.N." + hf. */
static const struct {
    const char *gguf, *hf;
    int qk;
} layer_names[] = {
    {"attn_norm.weight", "input_layernorm.weight", QK_NONE},
    {"attn_q.weight", "self_attn.q_proj.weight", QK_Q},
    {"attn_q.bias", "self_attn.q_proj.bias", QK_Q},
    {"attn_k.weight", "self_attn.k_proj.weight", QK_K},
    {"attn_k.bias", "self_attn.k_proj.bias", QK_K},
    {"attn_v.weight", "self_attn.v_proj.weight", QK_NONE},
    {"attn_v.bias", "self_attn.v_proj.bias", QK_NONE},
    {"attn_output.weight", "self_attn.o_proj.weight", QK_NONE},
    {"attn_output.bias", "self_attn.o_proj.bias", QK_NONE},
    {"ffn_norm.weight", "post_attention_layernorm.weight", QK_NONE},
    {"ffn_gate.weight", "mlp.gate_proj.weight", QK_NONE},
    {"ffn_up.weight", "mlp.up_proj.weight", QK_NONE},
    {"ffn_down.weight", "mlp.down_proj.weight", QK_NONE},
};
enum {
    N_GLOBAL = sizeof global_names / sizeof global_names[0],
    N_LAYER = sizeof layer_names / sizeof layer_names[0]
};

/* name = prefix + layer number (decimal, no leading zeros, < 10^6) + "." + *rest. */
static int split_layer(const char *name, const char *prefix, long *layer, const char **rest)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n)) return 0;
    const char *p = name + n;
    int digits = 0;
    long v = 0;
    for (; p[digits] >= '0' && p[digits] <= '9' && digits < 7; digits++)
        v = v * 10 + (p[digits] - '0');
    if (digits == 0 || digits > 6 || (digits > 1 && p[0] == '0') || p[digits] != '.') return 0;
    *layer = v, *rest = p + digits + 1;
    return 1;
}

/* Maps name from one naming to the other (to_gguf: HF to GGUF). Returns 1 and out, *qk the tensor's
 * un-permute role; 0 (out "") when unmapped or too long. */
static int map_name(const char *name, int to_gguf, char *out, int outlen, int *qk)
{
    if (out && outlen > 0) out[0] = 0;
    if (!name || !out || outlen <= 0) return 0;
    *qk = QK_NONE;
    for (int i = 0; i < N_GLOBAL; i++)
        if (!strcmp(name, to_gguf ? global_names[i].hf : global_names[i].gguf)) {
            const char *to = to_gguf ? global_names[i].gguf : global_names[i].hf;
            if ((int)strlen(to) >= outlen) return 0;
            strcpy(out, to);
            return 1;
        }
    long layer;
    const char *rest;
    if (!split_layer(name, to_gguf ? "model.layers." : "blk.", &layer, &rest)) return 0;
    for (int i = 0; i < N_LAYER; i++)
        if (!strcmp(rest, to_gguf ? layer_names[i].hf : layer_names[i].gguf)) {
            int k = snprintf(out, (size_t)outlen, "%s%ld.%s", to_gguf ? "blk." : "model.layers.", layer,
                             to_gguf ? layer_names[i].gguf : layer_names[i].hf);
            if (k < 0 || k >= outlen) {
                out[0] = 0;
                return 0;
            }
            *qk = layer_names[i].qk;
            return 1;
        }
    return 0;
}

int rt_w_gguf_name(const char *hf_name, char *out, int outlen)
{
    int qk;
    return map_name(hf_name, 1, out, outlen, &qk);
}

int rt_w_hf_name(const char *gguf_name, char *out, int outlen)
{
    int qk;
    return map_name(gguf_name, 0, out, outlen, &qk);
}

/* GGUF architectures kiln maps, and whether their q/k rows are in llama.cpp's interleaved order: llama.cpp
 * runs llama with its "normal" RoPE (consecutive pairs), so its converter permutes HF checkpoints' rows
 * (LlamaModel; Mistral's native checkpoints are in that order already); qwen2 runs NEOX (HF's
 * rotate-half), and Qwen2Model does not permute. */
static const struct {
    const char *name;
    int permuted;
} archs[] = {{"llama", 1}, {"qwen2", 0}};

static int arch_index(const char *arch)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(arch, archs[i].name)) return (int)i;
    return -1;
}

int64_t rt_w_unpermute_row(int64_t hf_row, int64_t n_rows, int64_t n_head)
{
    if (n_head <= 0 || n_rows <= 0 || n_rows % n_head) return -1;
    int64_t d = n_rows / n_head;
    if (d % 2 || hf_row < 0 || hf_row >= n_rows) return -1;
    int64_t h = hf_row / d, i = hf_row % d, half = d / 2;
    return h * d + 2 * (i % half) + i / half;
}

/* ---- specs ------------------------------------------------------------------------------------------- */

int rt_w_spec_parse(const char *name, const char *dtype, const char *shape_text, int64_t nbytes,
                    RtWeightSpec *out)
{
    if (!out) return 0;
    memset(out, 0, sizeof *out);
    if (!name || !dtype || !shape_text || nbytes < 0 || *shape_text != '[') return 0;
    RtWeightSpec s = {.name = name, .dtype = dtype, .nbytes = nbytes};
    const char *p = shape_text + 1;
    if (*p != ']') {
        for (;;) {
            if (s.rank == RT_W_MAX_RANK || *p < '0' || *p > '9' ||
                (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
                return 0;
            int64_t v = 0;
            for (; *p >= '0' && *p <= '9'; p++) {
                if (v > ((INT64_C(1) << 62) - 1 - (*p - '0')) / 10) return 0;
                v = v * 10 + (*p - '0');
            }
            s.shape[s.rank++] = v;
            if (*p == ']') break;
            if (*p++ != ',') return 0;
        }
    }
    if (p[1] != 0) return 0;
    *out = s;
    return 1;
}

/* The shape as package text, "[576,576]", into buf. */
static const char *shape_str(const int64_t *shape, int rank, char *buf, size_t n)
{
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < rank && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, d ? ",%lld" : "%lld", (long long)shape[d]);
    if (o < n) snprintf(buf + o, n - o, "]");
    return buf;
}

/* ---- opening ----------------------------------------------------------------------------------------- */

enum { KIND_GGUF, KIND_ST, KIND_INDEX };

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* What a regular file is: "GGUF" first, or a .gguf name, is GGUF; a .json name, or '{' first, is an index;
 * else safetensors (whose reader says so if it is not). */
static int file_kind(const char *path)
{
    unsigned char head[16] = {0};
    ssize_t n = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, head, sizeof head);
        close(fd);
    }
    if ((n >= 4 && !memcmp(head, "GGUF", 4)) || ends_with(path, ".gguf")) return KIND_GGUF;
    if (ends_with(path, ".json")) return KIND_INDEX;
    for (ssize_t i = 0; i < n; i++)
        if (head[i] != ' ' && head[i] != '\t' && head[i] != '\n' && head[i] != '\r')
            return head[i] == '{' ? KIND_INDEX : KIND_ST;
    return KIND_ST;
}

/* The candidates of one kind in a directory: how many, and the two first in name order. */
typedef struct Cands {
    int n;
    char first[256], second[256];
} Cands;

static void cands_add(Cands *c, const char *name)
{
    if (strlen(name) >= sizeof c->first) return;
    c->n++;
    if (c->n == 1 || strcmp(name, c->first) < 0) {
        memcpy(c->second, c->first, sizeof c->second);
        strcpy(c->first, name);
    } else if (c->n == 2 || strcmp(name, c->second) < 0) {
        strcpy(c->second, name);
    }
}

static char *path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    int slash = a > 0 && dir[a - 1] == '/';
    char *p = malloc(a + b + 2);
    if (p) snprintf(p, a + b + 2, "%s%s%s", dir, slash ? "" : "/", name);
    return p;
}

/* Chooses the weight file in directory dir (order in rt_w_open's contract) into *chosen (malloc'd). */
static KilnStatus pick_in_dir(const char *dir, char **chosen, char *err, int errlen)
{
    enum { C_MODEL_INDEX, C_INDEX, C_ST, C_GGUF, C_COUNT };
    static const char *const what[C_COUNT] = {"", "*.safetensors.index.json", "*.safetensors", "*.gguf"};
    Cands c[C_COUNT];
    memset(c, 0, sizeof c);
    DIR *d = opendir(dir);
    if (!d) return rt_file_errf(err, errlen, KILN_ERR_IO, "%s: cannot list the directory", dir);
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        char *full = path_join(dir, n);
        struct stat st;
        int reg = full && stat(full, &st) == 0 && S_ISREG(st.st_mode);
        free(full);
        if (!reg) continue;
        if (!strcmp(n, "model.safetensors.index.json"))
            cands_add(&c[C_MODEL_INDEX], n);
        else if (ends_with(n, ".safetensors.index.json"))
            cands_add(&c[C_INDEX], n);
        else if (ends_with(n, ".safetensors"))
            cands_add(&c[C_ST], n);
        else if (ends_with(n, ".gguf"))
            cands_add(&c[C_GGUF], n);
    }
    closedir(d);
    for (int k = 0; k < C_COUNT; k++) {
        if (c[k].n == 0) continue;
        if (c[k].n > 1)
            return rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: holds %d %s files (%s, %s%s): name one", dir,
                                c[k].n, what[k], c[k].first, c[k].second, c[k].n > 2 ? ", ..." : "");
        *chosen = path_join(dir, c[k].first);
        return *chosen ? KILN_OK : rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", dir);
    }
    return rt_file_errf(err, errlen, KILN_ERR_IO,
                        "%s: holds no weight file (*.safetensors.index.json, *.safetensors or *.gguf)", dir);
}

/* general.architecture into w->arch; "" when absent, not a string, empty, too long or with a NUL. */
static void read_arch(RtWeights *w)
{
    const char *s;
    uint64_t len;
    if (rt_gguf_get_str(w->gguf, "general.architecture", &s, &len, NULL, 0) == KILN_OK && len > 0 &&
        len < sizeof w->arch && !memchr(s, 0, (size_t)len)) {
        memcpy(w->arch, s, (size_t)len);
        w->arch[len] = 0;
    }
}

KilnStatus rt_w_open(const char *path, RtWeights **out, char *err, int errlen)
{
    if (out) *out = NULL;
    if (!path || !out) return rt_file_errf(err, errlen, KILN_ERR_ARG, "rt_w_open: NULL path or out");
    RtWeights *w = calloc(1, sizeof *w);
    if (!w) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
    struct stat st;
    KilnStatus s;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        s = pick_in_dir(path, &w->path, err, errlen);
    else if (!(w->path = strdup(path)))
        s = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
    else
        s = KILN_OK;
    if (s == KILN_OK) {
        int kind = file_kind(w->path);
        if (kind == KIND_GGUF)
            s = rt_gguf_open(w->path, &w->gguf, err, errlen);
        else if (kind == KIND_INDEX)
            s = rt_st_open_index(w->path, &w->st, err, errlen);
        else
            s = rt_st_open(w->path, &w->st, err, errlen);
    }
    if (s != KILN_OK) {
        rt_w_close(w);
        return s;
    }
    if (w->gguf) read_arch(w);
    if (w->st) w->gptq_v2 = read_gptq_v2(w->path);
    *out = w;
    return KILN_OK;
}

void rt_w_close(RtWeights *w)
{
    if (!w) return;
    rt_gguf_close(w->gguf);
    rt_st_close(w->st);
    free(w->path);
    free(w);
}

const char *rt_w_kind(const RtWeights *w)
{
    return !w ? NULL : w->gguf ? "gguf" : "safetensors";
}

const char *rt_w_path(const RtWeights *w)
{
    return w ? w->path : NULL;
}

RtGgufFile *rt_w_gguf(const RtWeights *w)
{
    return w ? w->gguf : NULL;
}

/* ---- resolving a spec -------------------------------------------------------------------------------- */

/* A spec's tensor in the file, as resolve found it. */
typedef struct Src {
    const char *file; /* the file that holds it, for messages */
    char label[600];  /* "blk.0.attn_q.weight (model.layers.0.self_attn.q_proj.weight)", or the name */
    const unsigned char *data; /* its bytes in the mapping */
    int fmt;                   /* FMT_*, or FMT_OTHER */
    char fmt_name[16];         /* package style: "q4_1", "q6_k", "f64" */
    int rank;
    int64_t shape[RT_ST_MAX_DIMS]; /* package order: outermost first */
    int64_t n_elements;
    int block, block_bytes; /* of the stored format (plain types: 1 and the element size) */
    int qk;                 /* QK_Q / QK_K: a GGUF q/k tensor (permuted when the architecture is) */
    int64_t n_head;         /* > 0: units are permuted in n_head heads (rt_w_unpermute_row) */
    /* what a read moves and converts at a time: the innermost row; for a permuted tensor, everything
     * under one index of the outermost dimension (a matrix row, a bias element) */
    int64_t unit_elems, n_units;
    size_t unit_bytes; /* stored bytes of one unit */
    RtQuantSrc quant;  /* a w4a16 Linear's checkpoint tensors (then only label is set above) */
    /* an fp8 Linear (f8g<G>): e4m3 codes [N, K] and f32 scales on a rows x cols grid, each scale covering
     * a bn x bk block (per tensor: 1 x 1; per output channel: N x 1) */
    const unsigned char *f8_codes, *f8_scales;
    int64_t f8_N, f8_K, f8_rows, f8_cols, f8_bn, f8_bk;
} Src;

/* The spec's own consistency: dtype known, nbytes = the dtype's size of the shape. *to: the format.
 * Messages start with `where` (the weights file, or the package when there is none). */
static KilnStatus check_spec(const char *where, const RtWeightSpec *spec, int *to, char *err, int errlen)
{
    if (!spec->name || !spec->dtype)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: a weight spec without a name or dtype", where);
    *to = fmt_from_name(spec->dtype);
    if (*to == FMT_OTHER)
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                            "%s: tensor %s: the package wants dtype '%s', which kiln does not load (%s)",
                            where, spec->name, spec->dtype, FMT_LIST);
    int block = fmt_block(*to), ok = spec->rank >= 0 && spec->rank <= RT_W_MAX_RANK;
    int64_t elems = 1;
    for (int d = 0; ok && d < spec->rank; d++) {
        ok = spec->shape[d] >= 0 && (spec->shape[d] == 0 || elems <= (INT64_C(1) << 62) / spec->shape[d]);
        if (ok) elems *= spec->shape[d];
    }
    if (!ok)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: tensor %s: the package's shape is not valid",
                            where, spec->name);
    char sh[128];
    if (block > 1 && (spec->rank == 0 || spec->shape[spec->rank - 1] % block))
        return rt_file_errf(
            err, errlen, KILN_ERR_CORRUPT,
            "%s: tensor %s: the package wants %s %s, whose rows are not whole %d-element blocks", where,
            spec->name, spec->dtype, shape_str(spec->shape, spec->rank, sh, sizeof sh), block);
    int64_t want = elems / block * fmt_bytes(*to);
    if (spec->nbytes != want)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                            "%s: tensor %s: the package says %lld bytes, but %s %s is %lld bytes", where,
                            spec->name, (long long)spec->nbytes, spec->dtype,
                            shape_str(spec->shape, spec->rank, sh, sizeof sh), (long long)want);
    return KILN_OK;
}

/* Units of unit_elems elements (a multiple of the stored block). A tensor of no elements has no units
 * (its row may still claim any length: [2^61, 0] is empty). */
static void src_units(Src *src, int64_t unit_elems)
{
    if (!src->n_elements) unit_elems = 0;
    src->unit_elems = unit_elems;
    src->n_units = unit_elems ? src->n_elements / unit_elems : 0;
    src->unit_bytes = (size_t)(unit_elems / src->block * src->block_bytes);
}

/* Fills src's stored layout, with units of one innermost row (a scalar: one element). */
static void src_layout(Src *src, int64_t n_elements, int block, int block_bytes)
{
    src->n_elements = n_elements, src->block = block, src->block_bytes = block_bytes;
    src_units(src, src->rank ? src->shape[src->rank - 1] : 1);
}

/* src->n_head for a GGUF tensor: its head count when its rows are permuted, else 0. */
static KilnStatus gguf_heads(const RtWeights *w, Src *src, char *err, int errlen)
{
    int qk = src->qk;
    src->n_head = 0;
    if (!w->gguf || qk == QK_NONE || !archs[arch_index(w->arch)].permuted) return KILN_OK;
    char key[128];
    uint32_t n = 0;
    snprintf(key, sizeof key, "%s.attention.head_count%s", w->arch, qk == QK_K ? "_kv" : "");
    KilnStatus s = rt_gguf_get_u32(w->gguf, key, &n, NULL, 0);
    if (s == KILN_ERR_ARG && qk == QK_K) { /* llama.cpp: head_count_kv defaults to head_count */
        snprintf(key, sizeof key, "%s.attention.head_count", w->arch);
        s = rt_gguf_get_u32(w->gguf, key, &n, NULL, 0);
    }
    if (s != KILN_OK || n == 0)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT,
                            "%s: tensor %s: no valid %s, which un-permuting its rows needs", w->path,
                            src->label, key);
    int64_t rows = src->rank ? src->shape[0] : 1, unit = rows ? src->n_elements / rows : 0;
    if (rt_w_unpermute_row(0, rows, n) < 0)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                            "%s: tensor %s: %lld rows do not divide into %u heads of an even size (%s)",
                            w->path, src->label, (long long)rows, n, key);
    if (unit % src->block)
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                            "%s: tensor %s: its rows are not whole %s blocks, so they cannot be un-permuted",
                            w->path, src->label, src->fmt_name);
    src->n_head = n;
    src_units(src, unit);
    return KILN_OK;
}

static KilnStatus find_gguf(const RtWeights *w, const RtWeightSpec *spec, Src *src, char *err, int errlen)
{
    char name[512];
    int qk;
    if (!w->arch[0])
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                            "%s: no general.architecture; kiln reads llama and qwen2 GGUF files", w->path);
    if (arch_index(w->arch) < 0)
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                            "%s: architecture '%s' is not supported (kiln reads llama and qwen2 GGUF files)",
                            w->path, w->arch);
    if (!map_name(spec->name, 1, name, sizeof name, &qk))
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "%s: tensor %s has no GGUF name (kiln maps Llama-style names: docs/WEIGHTS.md)",
                            w->path, spec->name);
    snprintf(src->label, sizeof src->label, "%s (%s)", name, spec->name);
    const RtGgufTensor *t = rt_gguf_tensor_find(w->gguf, name);
    if (!t) {
        int tied = !strcmp(name, "output.weight") && rt_gguf_tensor_find(w->gguf, "token_embd.weight");
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: missing tensor %s%s", w->path, src->label,
                            tied ? "; the model may tie it to the embedding (recipe option tie_embeddings)"
                                 : "");
    }
    int block = 1, bytes = 1;
    rt_gguf_type_block(t->type, &block, &bytes);
    src->file = w->path;
    src->data = t->data;
    src->fmt = fmt_from_gguf(t->type);
    lower_name(rt_gguf_type_name(t->type), src->fmt_name, sizeof src->fmt_name);
    src->rank = t->n_dims;
    for (int d = 0; d < t->n_dims; d++)
        src->shape[d] = t->ne[t->n_dims - 1 - d];
    src_layout(src, t->n_elements, block, bytes);
    src->qk = qk;
    return KILN_OK;
}

static KilnStatus find_st(const RtWeights *w, const RtWeightSpec *spec, Src *src, char *err, int errlen)
{
    snprintf(src->label, sizeof src->label, "%s", spec->name);
    const RtStTensor *t = rt_st_find(w->st, spec->name);
    if (!t) return rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: missing tensor %s", w->path, spec->name);
    src->file = rt_st_shard_path(w->st, t->shard);
    src->data = t->data;
    src->fmt = fmt_from_st(t->dtype);
    lower_name(rt_st_dtype_name(t->dtype), src->fmt_name, sizeof src->fmt_name);
    src->rank = t->n_dims;
    memcpy(src->shape, t->shape, sizeof src->shape);
    src_layout(src, t->n_elements, 1, rt_st_dtype_size(t->dtype));
    return KILN_OK;
}

/* Whether the stored format converts to format `to`. */
static KilnStatus check_conversion(const Src *src, int to, char *err, int errlen)
{
    const char *p = src->file, *t = src->label, *have = src->fmt_name, *want = fmts[to].name;
    if (src->fmt == FMT_OTHER)
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                            "%s: tensor %s: file has %s, which kiln does not read (%s)", p, t, have,
                            FMT_LIST);
    if (!fmt_is_block(to) || src->fmt == to) return KILN_OK;
    if (fmt_is_block(src->fmt))
        return rt_file_errf(
            err, errlen, KILN_ERR_UNSUPPORTED,
            "%s: tensor %s: file has %s, the package wants %s (compile with --set weight_dtype=%s, or "
            "gguf:FILE for a file of mixed formats)",
            p, t, have, want, have);
    return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                        "%s: tensor %s: file has %s, the package wants %s; kiln does not quantize (compile "
                        "without --set weight_dtype, or use a GGUF file with %s weights)",
                        p, t, have, want, want);
}

/* ---- w4a16: GPTQ/AWQ INT4 Linears repacked into one planar weight (ir/gir_dtypes.def) -------------- */

/* Whether the checkpoint's config.json or quantize_config.json (beside the file) names checkpoint_format
 * "gptq_v2", at its top level or in its "quantization_config": GPTQModel's zero points as stored, where
 * AutoGPTQ's (v1) store z - 1. A file that is absent or not JSON says nothing. */
static int read_gptq_v2(const char *path)
{
    const char *slash = strrchr(path, '/');
    int dir = slash ? (int)(slash - path) : 0, v2 = 0;
    static const char *const names[] = {"config.json", "quantize_config.json"};
    for (int i = 0; i < 2 && !v2; i++) {
        char f[4096];
        if (snprintf(f, sizeof f, "%.*s%s%s", dir, path, slash ? "/" : "", names[i]) >= (int)sizeof f)
            continue;
        unsigned char *map = NULL;
        size_t n = 0;
        char e[8];
        if (rt_file_map(f, "config", &map, &n, e, sizeof e) != KILN_OK || !map) continue; /* absent, empty */
        json_t *cfg = json_loadb((const char *)map, n, 0, NULL);
        rt_file_unmap(map, n);
        const char *fmt = json_string_value(json_object_get(cfg, "checkpoint_format"));
        if (!fmt)
            fmt = json_string_value(
                json_object_get(json_object_get(cfg, "quantization_config"), "checkpoint_format"));
        v2 = fmt && !strcmp(fmt, "gptq_v2");
        json_decref(cfg);
    }
    return v2;
}

/* A checkpoint tensor of a quantized Linear, with its dtype checked; NULL (after *s is set) when absent
 * and required, or of the wrong dtype. */
static const RtStTensor *w4_tensor(const RtWeights *w, const char *prefix, const char *what, RtStDtype dt,
                                   int required, KilnStatus *s, char *err, int errlen)
{
    char name[512];
    snprintf(name, sizeof name, "%s.%s", prefix, what);
    const RtStTensor *t = rt_st_find(w->st, name);
    if (!t && required)
        *s = rt_file_errf(err, errlen, KILN_ERR_ARG,
                          "%s: missing tensor %s (the package wants %s.weight as GPTQ/AWQ INT4)", w->path,
                          name, prefix);
    else if (t && t->dtype != dt)
        *s = rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED, "%s: tensor %s is %s, not %s", w->path, name,
                          rt_st_dtype_name(t->dtype), rt_st_dtype_name(dt));
    return *s == KILN_OK ? t : NULL;
}

/* A repacked Linear's first checks (w4a16, fp8: `what`): the package's entry is a matrix below 2^31 each
 * way, and the checkpoint is safetensors (the only files holding such tensors). */
static KilnStatus linear_check(const RtWeights *w, const RtWeightSpec *spec, const char *what, char *err,
                               int errlen)
{
    if (spec->rank != 2 || spec->shape[0] < 1 || spec->shape[1] < 1 || spec->shape[0] > INT32_MAX ||
        spec->shape[1] > INT32_MAX)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                            "%s: tensor %s: the package's %s entry is not valid", w->path, spec->name,
                            spec->dtype);
    if (!w->st)
        return rt_file_errf(
            err, errlen, KILN_ERR_UNSUPPORTED,
            "%s: tensor %s: the package wants %s (%s), which only a safetensors checkpoint holds", w->path,
            spec->name, spec->dtype, what);
    return KILN_OK;
}

/* The checks of a w4a16 spec past check_spec's (format `to`): a matrix, the checkpoint's tensors, format,
 * group and zero points (rt_quant_check / rt_quant_is_symmetric). On KILN_OK, *src describes the Linear. */
static KilnStatus w4_resolve(const RtWeights *w, const RtWeightSpec *spec, int to, RtQuantSrc *src, char *err,
                             int errlen)
{
    const char *n = spec->name;
    size_t len = strlen(n);
    int G = fmt_block(to), zeros = to >= FMT_W4G32Z;
    char prefix[512];
    KilnStatus s0 = linear_check(w, spec, "GPTQ/AWQ INT4", err, errlen);
    if (s0 != KILN_OK) return s0;
    if (len < 8 || strcmp(n + len - 7, ".weight") || len - 7 >= sizeof prefix)
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED, "%s: tensor %s: %s needs a Linear's .weight",
                            w->path, n, spec->dtype);
    snprintf(prefix, sizeof prefix, "%.*s", (int)len - 7, n);
    KilnStatus s = KILN_OK;
    const RtStTensor *qw = w4_tensor(w, prefix, "qweight", RT_ST_DTYPE_I32, 1, &s, err, errlen);
    const RtStTensor *qz = s ? NULL : w4_tensor(w, prefix, "qzeros", RT_ST_DTYPE_I32, 1, &s, err, errlen);
    const RtStTensor *sc = s ? NULL : w4_tensor(w, prefix, "scales", RT_ST_DTYPE_F16, 1, &s, err, errlen);
    const RtStTensor *gi = s ? NULL : w4_tensor(w, prefix, "g_idx", RT_ST_DTYPE_I32, 0, &s, err, errlen);
    if (s != KILN_OK) return s;
    int64_t N = spec->shape[0], K = spec->shape[1];
    /* GPTQ packs eight k to a word ([K/8, N]); AWQ eight n ([K, N/8]) */
    int gptq = qw->n_dims == 2 && qw->shape[0] * 8 == K && qw->shape[1] == N;
    int awq = qw->n_dims == 2 && qw->shape[0] == K && qw->shape[1] * 8 == N;
    if (!gptq && !awq)
        return rt_file_errf(
            err, errlen, KILN_ERR_ARG,
            "%s: tensor %s.qweight: shape [%lld,%lld] is neither GPTQ's [K/8,N] nor AWQ's [K,N/8] "
            "for the package's [%lld,%lld]",
            w->path, prefix, (long long)qw->shape[0], (long long)qw->shape[1], (long long)N, (long long)K);
    int64_t ck_groups = sc->n_dims == 2 ? sc->shape[0] : 0;
    if (ck_groups != K / G) {
        int64_t ckG = ck_groups > 0 && K % ck_groups == 0 ? K / ck_groups : 0;
        return rt_file_errf(
            err, errlen, KILN_ERR_UNSUPPORTED,
            "%s: tensor %s: the checkpoint's groups are %lld wide, the package's %d (compile with "
            "--set weight_dtype=w4g%lldz)",
            w->path, n, (long long)ckG, G, (long long)ckG);
    }
    *src = (RtQuantSrc){.format = awq          ? RT_QUANT_AWQ
                                  : w->gptq_v2 ? RT_QUANT_GPTQ_V2
                                               : RT_QUANT_GPTQ,
                        .name = n,
                        .bits = 4,
                        .N = N,
                        .K = K,
                        .G = G,
                        .qweight = qw->data,
                        .qweight_bytes = (int64_t)qw->nbytes,
                        .qzeros = qz->data,
                        .qzeros_bytes = (int64_t)qz->nbytes,
                        .scales = sc->data,
                        .scales_bytes = (int64_t)sc->nbytes,
                        .g_idx = gi ? gi->data : NULL,
                        .g_idx_bytes = gi ? (int64_t)gi->nbytes : 0};
    int sym = 0;
    if ((s = rt_quant_is_symmetric(src, &sym, err, errlen))) return s;
    if (!zeros && !sym)
        return rt_file_errf(
            err, errlen, KILN_ERR_UNSUPPORTED,
            "%s: tensor %s: the checkpoint has zero points other than 8, the package's %s has "
            "none (compile with --set weight_dtype=%sz)",
            w->path, n, spec->dtype, spec->dtype);
    return KILN_OK;
}

/* Repacks the resolved Linear src (format `to`) into dst: words, then f16 scales, then (z) zeros. */
static KilnStatus w4_read(const RtQuantSrc *src, int to, void *dst, char *err, int errlen)
{
    int64_t N = src->N, K = src->K, G = src->G;
    int zeros = to >= FMT_W4G32Z;
    unsigned char *out = dst;
    RtQuantDst d = {.dtype = RT_QUANT_F16,
                    .w = (int32_t *)(void *)out,
                    .w_len = N * K / 8,
                    .scales = (uint16_t *)(void *)(out + N * K / 2),
                    .scales_len = N * (K / G),
                    .zeros = zeros ? out + N * K / 2 + N * (K / G) * 2 : NULL,
                    .zeros_len = zeros ? N * (K / G) : 0};
    return rt_quant_repack(src, &d, err, errlen);
}

/* The checks of an f8g<G> spec past check_spec's: a matrix; the checkpoint's NAME (F8_E4M3, the package's
 * shape) and NAME_scale or NAME_scale_inv (F32: one value, one per output channel as [N] or [N, 1], or a
 * grid of blocks [ceil(N/bn), ceil(K/bk)] whose bk the group G divides). Fills src's f8 fields. */
static KilnStatus f8_resolve(const RtWeights *w, const RtWeightSpec *spec, int to, Src *src, char *err,
                             int errlen)
{
    const char *n = spec->name;
    int G = fmt_block(to);
    KilnStatus s0 = linear_check(w, spec, "FP8 e4m3", err, errlen);
    if (s0 != KILN_OK) return s0;
    int64_t N = spec->shape[0], K = spec->shape[1];
    const RtStTensor *c = rt_st_find(w->st, n);
    if (!c)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: missing tensor %s (the package wants it as FP8)",
                            w->path, n);
    if (c->dtype != RT_ST_DTYPE_F8_E4M3 || c->n_dims != 2 || c->shape[0] != N || c->shape[1] != K)
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                            "%s: tensor %s is %s [%lld,%lld], the package wants F8_E4M3 [%lld,%lld] (%s)",
                            w->path, n, rt_st_dtype_name(c->dtype), (long long)c->shape[0],
                            (long long)(c->n_dims > 1 ? c->shape[1] : 0), (long long)N, (long long)K,
                            spec->dtype);
    char name[600];
    snprintf(name, sizeof name, "%s_scale", n);
    const RtStTensor *sc = rt_st_find(w->st, name);
    if (!sc) {
        snprintf(name, sizeof name, "%s_scale_inv", n);
        sc = rt_st_find(w->st, name);
    }
    if (!sc)
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "%s: missing tensor %s_scale (or _scale_inv) of FP8 %s", w->path, n, n);
    if (sc->dtype != RT_ST_DTYPE_F32)
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED, "%s: tensor %s is %s, not F32", w->path, name,
                            rt_st_dtype_name(sc->dtype));
    int64_t rows, cols;
    if (sc->n_elements == 1)
        rows = cols = 1;
    else if ((sc->n_dims == 1 && sc->shape[0] == N) ||
             (sc->n_dims == 2 && sc->shape[0] == N && sc->shape[1] == 1))
        rows = N, cols = 1;
    else if (sc->n_dims == 2)
        rows = sc->shape[0], cols = sc->shape[1];
    else
        rows = cols = 0;
    int64_t bn = rows > 0 ? (N + rows - 1) / rows : 0, bk = cols > 0 ? (K + cols - 1) / cols : 0;
    if (!bn || !bk || (N + bn - 1) / bn != rows || (K + bk - 1) / bk != cols)
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "%s: tensor %s: %lld scales are neither one, one per output channel nor a block "
                            "grid of [%lld,%lld]",
                            w->path, name, (long long)sc->n_elements, (long long)N, (long long)K);
    if (bk % G)
        return rt_file_errf(
            err, errlen, KILN_ERR_UNSUPPORTED,
            "%s: tensor %s: the checkpoint's scale blocks are %lld wide along K, the package's "
            "groups %d (compile with --set weight_dtype=f8g32 or a group dividing %lld)",
            w->path, name, (long long)bk, G, (long long)bk);
    src->f8_codes = c->data, src->f8_scales = sc->data;
    src->f8_N = N, src->f8_K = K, src->f8_rows = rows, src->f8_cols = cols, src->f8_bn = bn, src->f8_bk = bk;
    return KILN_OK;
}

/* The f8g<G> weight from the resolved src: the codes as they are, then one f32 scale per (n, G-group). */
static KilnStatus f8_read(const Src *src, int to, void *dst)
{
    int64_t N = src->f8_N, K = src->f8_K, G = fmt_block(to);
    unsigned char *out = dst, *scales = out + N * K;
    memcpy(out, src->f8_codes, (size_t)(N * K));
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < K / G; g++) {
            int64_t at = (n / src->f8_bn) * src->f8_cols + (g * G) / src->f8_bk;
            memcpy(scales + (size_t)(n * (K / G) + g) * 4, src->f8_scales + (size_t)at * 4, 4);
        }
    return KILN_OK;
}

KilnStatus rt_w_stored_dtype(const RtWeights *w, const char *name, const char *fallback, char *out,
                             int outlen, char *err, int errlen)
{
    if (!w || !name || !fallback || !out || outlen < 1)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "rt_w_stored_dtype: NULL argument%s", "");
    out[0] = 0;
    RtWeightSpec spec = {.name = name};
    Src src;
    memset(&src, 0, sizeof src);
    KilnStatus s = w->gguf ? find_gguf(w, &spec, &src, err, errlen) : find_st(w, &spec, &src, err, errlen);
    if (s != KILN_OK) return s;
    if (src.fmt == FMT_OTHER)
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                            "%s: tensor %s: file has %s, which kiln does not read (%s)", src.file, src.label,
                            src.fmt_name, FMT_LIST);
    const char *dt = fmt_is_block(src.fmt) ? fmts[src.fmt].name : fallback;
    if ((int)strlen(dt) >= outlen)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "rt_w_stored_dtype: '%s' does not fit", dt);
    snprintf(out, (size_t)outlen, "%s", dt);
    return KILN_OK;
}

/* Every check of one spec; on KILN_OK, *src and *to describe the read (a w4a16 Linear: src->quant). */
static KilnStatus resolve(const RtWeights *w, const RtWeightSpec *spec, Src *src, int *to, char *err,
                          int errlen)
{
    memset(src, 0, sizeof *src);
    KilnStatus s = check_spec(w->path, spec, to, err, errlen);
    if (s == KILN_OK && fmt_is_w4(*to)) {
        snprintf(src->label, sizeof src->label, "%s", spec->name);
        return w4_resolve(w, spec, *to, &src->quant, err, errlen);
    }
    if (s == KILN_OK && fmt_is_f8(*to)) {
        snprintf(src->label, sizeof src->label, "%s", spec->name);
        return f8_resolve(w, spec, *to, src, err, errlen);
    }
    if (s == KILN_OK) s = w->gguf ? find_gguf(w, spec, src, err, errlen) : find_st(w, spec, src, err, errlen);
    if (s != KILN_OK) return s;
    int same = src->rank == spec->rank;
    for (int d = 0; same && d < spec->rank; d++)
        same = src->shape[d] == spec->shape[d];
    if (!same) {
        char have[256], want[128];
        return rt_file_errf(err, errlen, KILN_ERR_ARG,
                            "%s: tensor %s: shape %s in the file, the package wants %s", src->file,
                            src->label, shape_str(src->shape, src->rank, have, sizeof have),
                            shape_str(spec->shape, spec->rank, want, sizeof want));
    }
    s = check_conversion(src, *to, err, errlen);
    return s != KILN_OK ? s : gguf_heads(w, src, err, errlen);
}

KilnStatus rt_w_spec_check(const RtWeightSpec *spec, const char *where, char *err, int errlen)
{
    int to;
    return spec ? check_spec(where, spec, &to, err, errlen)
                : rt_file_errf(err, errlen, KILN_ERR_ARG, "rt_w_spec_check: NULL spec");
}

KilnStatus rt_w_check(const RtWeights *w, const RtWeightSpec *specs, int n, char *err, int errlen)
{
    if (!w || (n > 0 && !specs) || n < 0)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "rt_w_check: NULL weights or specs");
    for (int i = 0; i < n; i++) {
        Src src;
        int to;
        KilnStatus s = resolve(w, &specs[i], &src, &to, err, errlen);
        if (s != KILN_OK) return s;
    }
    return KILN_OK;
}

/* ---- reading ----------------------------------------------------------------------------------------- */

KilnStatus rt_w_read(const RtWeights *w, const RtWeightSpec *spec, void *dst, char *err, int errlen)
{
    if (!w || !spec) return rt_file_errf(err, errlen, KILN_ERR_ARG, "rt_w_read: NULL weights or spec");
    Src src;
    int to;
    KilnStatus s = resolve(w, spec, &src, &to, err, errlen);
    if (s != KILN_OK) return s;
    if (!dst && spec->nbytes > 0)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: tensor %s: NULL destination", w->path, src.label);
    if (fmt_is_w4(to)) return w4_read(&src.quant, to, dst, err, errlen);
    if (fmt_is_f8(to)) return f8_read(&src, to, dst);
    size_t out_unit = (size_t)(src.unit_elems / fmt_block(to) * fmt_bytes(to));
    float *row = NULL;
    if (src.fmt != to && src.n_units > 0) {
        row = malloc((size_t)src.unit_elems * sizeof *row);
        if (!row)
            return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: tensor %s: out of memory", w->path,
                                src.label);
    }
    unsigned char *out = dst;
    for (int64_t u = 0; u < src.n_units; u++) {
        int64_t from = src.n_head ? rt_w_unpermute_row(u, src.n_units, src.n_head) : u;
        const unsigned char *in = src.data + (size_t)from * src.unit_bytes;
        if (src.fmt == to) {
            memcpy(out + (size_t)u * out_unit, in, out_unit);
        } else {
            rt_gguf_dequant(fmts[src.fmt].gguf, in, src.unit_elems, row); /* cannot fail: checked */
            f32_row_to(to, row, src.unit_elems, out + (size_t)u * out_unit);
        }
    }
    free(row);
    return KILN_OK;
}

/* ---- random weights ---------------------------------------------------------------------------------- */

static uint64_t rand_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* N(0, 1) from the sum of four uniforms (variance 4/12, rescaled): enough for weights that only need to
 * be finite, varied and of a realistic scale. */
static float rand_normal(uint64_t *s)
{
    double u = 0;
    for (int i = 0; i < 4; i++)
        u += (double)(rand_next(s) >> 11) * (1.0 / 9007199254740992.0);
    return (float)((u - 2.0) * 1.7320508075688772);
}

/* Float weights draw from a table of 4096 values of the weight's distribution, already in its dtype, five
 * 12-bit indices per splitmix64 draw: a 16 GB model fills in seconds (one rand_normal per element took
 * over a minute). Matrices [..., K] take sd min(0.08, 1/sqrt(K)), so each product keeps its input's scale
 * and a 32-layer model's logits stay a smooth function of its kernels' rounding (with a flat 0.08 an 8B
 * model amplified a different K order in one matmul past the tuner's check). */
void rt_w_random(const RtWeightSpec *spec, uint64_t seed, void *dst)
{
    uint64_t s = seed;
    for (const char *c = spec->name; *c; c++)
        s = (s ^ (unsigned char)*c) * 0x100000001b3ull;
    int f = fmt_from_name(spec->dtype), norm = strstr(spec->name, "norm") != NULL;
    unsigned char *out = dst;
    if (f == FMT_F32 || f == FMT_F16 || f == FMT_BF16) {
        enum { TABLE = 4096 };
        unsigned char table[TABLE * 4];
        size_t eb = (size_t)fmt_bytes(f);
        int64_t fan_in = spec->rank >= 2 ? spec->shape[spec->rank - 1] : 0;
        float sd = fan_in > 0 ? fminf(0.08f, (float)(1.0 / sqrt((double)fan_in))) : 0.08f;
        for (int i = 0; i < TABLE; i++) {
            float v = norm ? 1.0f + 0.1f * rand_normal(&s) : sd * rand_normal(&s);
            f32_row_to(f, &v, 1, table + (size_t)i * eb);
        }
        int64_t n = spec->nbytes / (int64_t)eb;
        for (int64_t i = 0; i < n;) {
            uint64_t r = rand_next(&s);
            for (int j = 0; j < 5 && i < n; j++, i++, r >>= 12)
                memcpy(out + (size_t)i * eb, table + (size_t)(r & (TABLE - 1)) * eb, eb);
        }
        return;
    }
    for (int64_t i = 0; i < spec->nbytes; i++) {
        uint64_t r = rand_next(&s);
        out[i] = (unsigned char)((r % 0x30) | ((r >> 32) & 0x80));
    }
}

int rt_w_finite(const RtWeightSpec *spec, const void *data, int full, int64_t *at)
{
    /* per dtype: bytes of a unit (element or block), elements in it, the offsets of its f16 fields */
    static const struct {
        const char *dtype;
        int unit, elems, n_half, half[2];
    } k[] = {{"f32", 4, 1, 0, {0}},         {"f16", 2, 1, 1, {0}},       {"bf16", 2, 1, 0, {0}},
             {"q4_0", 18, 32, 1, {0}},      {"q4_1", 20, 32, 2, {0, 2}}, {"q8_0", 34, 32, 1, {0}},
             {"q4_k", 144, 256, 2, {0, 2}}, {"q6_k", 210, 256, 1, {208}}};
    const unsigned char *p = data;
    /* e4m3fn codes (NaN: 0x7f, 0xff; no infinities), plain or the planar f8g<G> weight's codes [N, K]
     * followed by its f32 scales */
    int f8 = !strcmp(spec->dtype, "f8e4m3"), f8g = !strncmp(spec->dtype, "f8g", 3);
    if (f8 || f8g) {
        int64_t codes = f8g ? (spec->rank == 2 ? spec->shape[0] * spec->shape[1] : 0) : spec->nbytes;
        if (codes < 0 || codes > spec->nbytes) codes = spec->nbytes;
        int64_t scales = (spec->nbytes - codes) / 4;
        for (int pass = 0; pass < 2; pass++) {
            int64_t n = pass ? scales : codes, step = full || n <= 64 ? 1 : n / 64;
            for (int64_t i = 0; i < n; i = i == n - 1 ? n : i + step < n ? i + step : n - 1) {
                uint32_t v = 0;
                if (pass) memcpy(&v, p + codes + i * 4, 4);
                if (pass ? (v & 0x7f800000u) == 0x7f800000u : (p[i] & 0x7f) == 0x7f) {
                    *at = pass ? codes + i : i; /* a scale: counted after the codes */
                    return 0;
                }
            }
        }
        return 1;
    }
    for (size_t t = 0; t < sizeof k / sizeof k[0]; t++) {
        if (strcmp(spec->dtype, k[t].dtype)) continue;
        int64_t n = spec->nbytes / k[t].unit, step = full || n <= 64 ? 1 : n / 64;
        for (int64_t i = 0; i < n; i = i == n - 1 ? n : i + step < n ? i + step : n - 1) { /* and the last */
            const unsigned char *u = p + i * k[t].unit;
            int bad = 0;
            if (!strcmp(k[t].dtype, "f32")) {
                uint32_t v;
                memcpy(&v, u, 4);
                bad = (v & 0x7f800000u) == 0x7f800000u;
            } else if (!strcmp(k[t].dtype, "bf16")) {
                bad = ((u[0] | u[1] << 8) & 0x7f80) == 0x7f80;
            }
            for (int h = 0; h < k[t].n_half; h++)
                bad |= ((u[k[t].half[h]] | u[k[t].half[h] + 1] << 8) & 0x7c00) == 0x7c00;
            if (bad) {
                *at = i * k[t].elems;
                return 0;
            }
        }
        return 1;
    }
    return 1;
}
