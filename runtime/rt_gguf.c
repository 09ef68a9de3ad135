/* rt_gguf.c — reading GGUF files (rt_gguf.h) and reference dequantization.
 *
 * Layout (little-endian; versions 2 and 3 are laid out alike, v3 only allowed big-endian files too, which
 * this reader refuses):
 *     "GGUF" u32 version, u64 n_tensors, u64 n_kv
 *     n_kv ×      { string key, u32 value type, value }     string = u64 length + bytes (no NUL)
 *                  value: a scalar, a string, or { u32 element type, u64 count, count elements }
 *     n_tensors × { string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset }
 *     padding to general.alignment (default 32), then the data section; offsets are relative to its start.
 * The file is hostile until proven otherwise. A cursor walks the mapping; every read first checks that
 * the bytes are there, and every count or length is checked against the bytes left in the file before
 * it is used or allocated for (an array of 2^62 strings is refused at once, not allocated), so memory is
 * proportional to the file. Then: keys unique, general.alignment a u32 power of two, each tensor's dims
 * in [0, 2^63) with a product that fits, its type known, ne[0] a multiple of the type's block, its offset
 * aligned, its bytes inside the data section, no two tensors sharing a byte, names unique.
 * Invariant of an open file: every pointer in a RtGgufKv or RtGgufTensor lies inside the mapping with all
 * the bytes it describes.
 *
 * Dequantization follows ggml-quants.c's reference rows. It is bit-identical to llama.cpp whatever the
 * compiler contracts: a 4- or 8-bit integer times an f16 scale (11 significant bits) is exact in f32, so
 * x*d, and x*d + m with or without FMA, round only once, at the same place. K-quants alike: Q4_K's
 * d*sc and dmin*m (6-bit sc, m) and d*sc*q (4-bit q) are exact, so only the final subtraction rounds;
 * Q6_K's d*sc*q (i8 sc, 6-bit q) is exact, its odd parts being at most 2047*127*31 < 2^24.
 */
#define _POSIX_C_SOURCE 200809L
#include "rt_gguf.h"
#include "rt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { RT_GGUF_MAX_COUNT = 1 << 30 }; /* tensors or keys in one file: far beyond any model */

struct RtGgufFile {
    char *path;
    unsigned char *map; /* the whole file, read-only */
    uint64_t size;
    uint32_t version, alignment;
    uint64_t data_offset;
    int n_kv, n_tensors;
    RtGgufKv *kv;                 /* file order */
    RtGgufTensor *tensors;        /* file order */
    const RtGgufKv **kv_by_key;   /* sorted by key */
    const RtGgufTensor **by_name; /* sorted by name */
};

/* ---- tables ----------------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int block, bytes;
} rt_gguf_types[RT_GGUF_TYPE_COUNT] = {
    [RT_GGUF_TYPE_F32] = {"F32", 1, 4},
    [RT_GGUF_TYPE_F16] = {"F16", 1, 2},
    [RT_GGUF_TYPE_Q4_0] = {"Q4_0", 32, 18},
    [RT_GGUF_TYPE_Q4_1] = {"Q4_1", 32, 20},
    [RT_GGUF_TYPE_Q5_0] = {"Q5_0", 32, 22},
    [RT_GGUF_TYPE_Q5_1] = {"Q5_1", 32, 24},
    [RT_GGUF_TYPE_Q8_0] = {"Q8_0", 32, 34},
    [RT_GGUF_TYPE_Q8_1] = {"Q8_1", 32, 40},
    [RT_GGUF_TYPE_Q2_K] = {"Q2_K", 256, 84},
    [RT_GGUF_TYPE_Q3_K] = {"Q3_K", 256, 110},
    [RT_GGUF_TYPE_Q4_K] = {"Q4_K", 256, 144},
    [RT_GGUF_TYPE_Q5_K] = {"Q5_K", 256, 176},
    [RT_GGUF_TYPE_Q6_K] = {"Q6_K", 256, 210},
    [RT_GGUF_TYPE_Q8_K] = {"Q8_K", 256, 292},
    [RT_GGUF_TYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66},
    [RT_GGUF_TYPE_IQ2_XS] = {"IQ2_XS", 256, 74},
    [RT_GGUF_TYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98},
    [RT_GGUF_TYPE_IQ1_S] = {"IQ1_S", 256, 50},
    [RT_GGUF_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18},
    [RT_GGUF_TYPE_IQ3_S] = {"IQ3_S", 256, 110},
    [RT_GGUF_TYPE_IQ2_S] = {"IQ2_S", 256, 82},
    [RT_GGUF_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136},
    [RT_GGUF_TYPE_I8] = {"I8", 1, 1},
    [RT_GGUF_TYPE_I16] = {"I16", 1, 2},
    [RT_GGUF_TYPE_I32] = {"I32", 1, 4},
    [RT_GGUF_TYPE_I64] = {"I64", 1, 8},
    [RT_GGUF_TYPE_F64] = {"F64", 1, 8},
    [RT_GGUF_TYPE_IQ1_M] = {"IQ1_M", 256, 56},
    [RT_GGUF_TYPE_BF16] = {"BF16", 1, 2},
    [RT_GGUF_TYPE_TQ1_0] = {"TQ1_0", 256, 54},
    [RT_GGUF_TYPE_TQ2_0] = {"TQ2_0", 256, 66},
    [RT_GGUF_TYPE_MXFP4] = {"MXFP4", 32, 17},
    [RT_GGUF_TYPE_NVFP4] = {"NVFP4", 64, 36},
    [RT_GGUF_TYPE_Q1_0] = {"Q1_0", 128, 18},
};

/* Value types: name and size in bytes (0: strings and arrays, which have a length). */
static const struct {
    const char *name;
    int size;
} rt_gguf_vals[RT_GGUF_VAL_COUNT] = {
    [RT_GGUF_VAL_U8] = {"u8", 1},         [RT_GGUF_VAL_I8] = {"i8", 1},
    [RT_GGUF_VAL_U16] = {"u16", 2},       [RT_GGUF_VAL_I16] = {"i16", 2},
    [RT_GGUF_VAL_U32] = {"u32", 4},       [RT_GGUF_VAL_I32] = {"i32", 4},
    [RT_GGUF_VAL_F32] = {"f32", 4},       [RT_GGUF_VAL_BOOL] = {"bool", 1},
    [RT_GGUF_VAL_STRING] = {"string", 0}, [RT_GGUF_VAL_ARRAY] = {"array", 0},
    [RT_GGUF_VAL_U64] = {"u64", 8},       [RT_GGUF_VAL_I64] = {"i64", 8},
    [RT_GGUF_VAL_F64] = {"f64", 8},
};

const char *rt_gguf_type_name(RtGgufType type)
{
    return (unsigned)type < RT_GGUF_TYPE_COUNT && rt_gguf_types[type].name ? rt_gguf_types[type].name : "?";
}

int rt_gguf_type_block(RtGgufType type, int *block, int *bytes)
{
    if ((unsigned)type >= RT_GGUF_TYPE_COUNT || !rt_gguf_types[type].name) return 0;
    if (block) *block = rt_gguf_types[type].block;
    if (bytes) *bytes = rt_gguf_types[type].bytes;
    return 1;
}

const char *rt_gguf_val_name(RtGgufVal type)
{
    return (unsigned)type < RT_GGUF_VAL_COUNT ? rt_gguf_vals[type].name : "?";
}

/* ---- bytes ------------------------------------------------------------------------------------------ */

static uint16_t rt_gguf_le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rt_gguf_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rt_gguf_le64(const unsigned char *p)
{
    return (uint64_t)rt_gguf_le32(p) | (uint64_t)rt_gguf_le32(p + 4) << 32;
}

/* ---- the cursor ---------------------------------------------------------------------------------------- */

typedef struct RtGgufReader {
    const unsigned char *p;
    uint64_t size, pos;
    const char *path;
    char *err;
    int errlen;
    /* what is being read, for truncation messages: "key/value 3 ('general.name')" */
    char where[RT_FILE_QUOTE_MAX + 64];
} RtGgufReader;

static KilnStatus rt_gguf_need(RtGgufReader *r, uint64_t n)
{
    if (n <= r->size - r->pos) return KILN_OK;
    return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT,
                        "%s: truncated in %s: %llu bytes needed at offset %llu, the file has %llu", r->path,
                        r->where, (unsigned long long)n, (unsigned long long)r->pos,
                        (unsigned long long)r->size);
}

static KilnStatus rt_gguf_u32(RtGgufReader *r, uint32_t *v)
{
    KilnStatus s = rt_gguf_need(r, 4);
    if (s) return s;
    *v = rt_gguf_le32(r->p + r->pos), r->pos += 4;
    return KILN_OK;
}

static KilnStatus rt_gguf_u64(RtGgufReader *r, uint64_t *v)
{
    KilnStatus s = rt_gguf_need(r, 8);
    if (s) return s;
    *v = rt_gguf_le64(r->p + r->pos), r->pos += 8;
    return KILN_OK;
}

/* A key or tensor name: at most RT_GGUF_MAX_NAME bytes, no NUL; copied into *out (malloc'd). */
static KilnStatus rt_gguf_name(RtGgufReader *r, const char *what, char **out)
{
    uint64_t len;
    KilnStatus s = rt_gguf_u64(r, &len);
    if (s) return s;
    if (len > RT_GGUF_MAX_NAME)
        return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT, "%s: %s: a %s of %llu bytes (at most %d)",
                            r->path, r->where, what, (unsigned long long)len, RT_GGUF_MAX_NAME);
    if ((s = rt_gguf_need(r, len))) return s;
    if (memchr(r->p + r->pos, 0, (size_t)len))
        return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT, "%s: %s: the %s contains a NUL byte",
                            r->path, r->where, what);
    if (!(*out = malloc((size_t)len + 1)))
        return rt_file_errf(r->err, r->errlen, KILN_ERR_NOMEM, "%s: out of memory", r->path);
    memcpy(*out, r->p + r->pos, (size_t)len);
    (*out)[len] = 0;
    r->pos += len;
    return KILN_OK;
}

/* A string value: skipped, with *bytes pointing at its bytes and *len their count. */
static KilnStatus rt_gguf_string(RtGgufReader *r, const unsigned char **bytes, uint64_t *len)
{
    KilnStatus s = rt_gguf_u64(r, len);
    if (s || (s = rt_gguf_need(r, *len))) return s;
    *bytes = r->p + r->pos, r->pos += *len;
    return KILN_OK;
}

/* ---- key/values ---------------------------------------------------------------------------------------- */

/* Reads the value of kv (key and type already set) at the cursor. */
static KilnStatus rt_gguf_value(RtGgufReader *r, RtGgufKv *kv)
{
    RtFileQuoted q;
    KilnStatus s;
    uint32_t elem;
    kv->elem = kv->type, kv->count = 1;
    if (kv->type == RT_GGUF_VAL_STRING) return rt_gguf_string(r, &kv->data, &kv->len);
    if (kv->type != RT_GGUF_VAL_ARRAY) {
        uint64_t n = (uint64_t)rt_gguf_vals[kv->type].size;
        if ((s = rt_gguf_need(r, n))) return s;
        kv->data = r->p + r->pos, kv->len = n, r->pos += n;
        if (kv->type == RT_GGUF_VAL_BOOL && kv->data[0] > 1)
            return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT,
                                "%s: key %s: bool value %u (must be 0 or 1)", r->path,
                                rt_file_quote(&q, kv->key), kv->data[0]);
        return KILN_OK;
    }
    if ((s = rt_gguf_u32(r, &elem))) return s;
    if (elem >= RT_GGUF_VAL_COUNT)
        return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT, "%s: key %s: unknown array element type %u",
                            r->path, rt_file_quote(&q, kv->key), elem);
    if (elem == RT_GGUF_VAL_ARRAY)
        return rt_file_errf(r->err, r->errlen, KILN_ERR_UNSUPPORTED,
                            "%s: key %s: arrays of arrays are not supported", r->path,
                            rt_file_quote(&q, kv->key));
    kv->elem = (RtGgufVal)elem;
    if ((s = rt_gguf_u64(r, &kv->count))) return s;
    uint64_t left = r->size - r->pos;
    uint64_t least =
        elem == RT_GGUF_VAL_STRING ? 8 : (uint64_t)rt_gguf_vals[elem].size; /* bytes per element */
    if (kv->count > left / least)
        return rt_file_errf(
            r->err, r->errlen, KILN_ERR_CORRUPT,
            "%s: key %s: an array of %llu %s elements cannot fit in the %llu bytes left in the file", r->path,
            rt_file_quote(&q, kv->key), (unsigned long long)kv->count, rt_gguf_vals[elem].name,
            (unsigned long long)left);
    if (elem != RT_GGUF_VAL_STRING) {
        kv->data = r->p + r->pos, kv->len = kv->count * least, r->pos += kv->len;
        for (uint64_t i = 0; elem == RT_GGUF_VAL_BOOL && i < kv->count; i++)
            if (kv->data[i] > 1)
                return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT,
                                    "%s: key %s: element %llu is bool value %u (must be 0 or 1)", r->path,
                                    rt_file_quote(&q, kv->key), (unsigned long long)i, kv->data[i]);
        return KILN_OK;
    }
    /* count <= bytes left / 8, so this table is at most as large as the file */
    const unsigned char **str = malloc(sizeof *str * (size_t)(kv->count ? kv->count : 1));
    if (!str) return rt_file_errf(r->err, r->errlen, KILN_ERR_NOMEM, "%s: out of memory", r->path);
    kv->str = str;
    uint64_t start = r->pos;
    for (uint64_t i = 0; i < kv->count; i++) {
        const unsigned char *bytes;
        uint64_t len;
        str[i] = r->p + r->pos;
        if ((s = rt_gguf_string(r, &bytes, &len))) return s;
    }
    kv->len = r->pos - start;
    return KILN_OK;
}

static int rt_gguf_cmp_kv(const void *a, const void *b)
{
    return strcmp((*(const RtGgufKv *const *)a)->key, (*(const RtGgufKv *const *)b)->key);
}

static int rt_gguf_cmp_name(const void *a, const void *b)
{
    return strcmp((*(const RtGgufTensor *const *)a)->name, (*(const RtGgufTensor *const *)b)->name);
}

static int rt_gguf_cmp_offset(const void *a, const void *b)
{
    const RtGgufTensor *x = *(const RtGgufTensor *const *)a, *y = *(const RtGgufTensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

static KilnStatus rt_gguf_read_kvs(RtGgufFile *g, RtGgufReader *r)
{
    RtFileQuoted q;
    KilnStatus s;
    for (int i = 0; i < g->n_kv; i++) {
        RtGgufKv *kv = &g->kv[i];
        uint32_t type;
        snprintf(r->where, sizeof r->where, "key/value %d", i);
        char *key;
        if ((s = rt_gguf_name(r, "key", &key))) return s;
        kv->key = key;
        if (!kv->key[0])
            return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT, "%s: key/value %d has an empty key",
                                g->path, i);
        snprintf(r->where, sizeof r->where, "key/value %d (%s)", i, rt_file_quote(&q, kv->key));
        if ((s = rt_gguf_u32(r, &type))) return s;
        if (type >= RT_GGUF_VAL_COUNT)
            return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT, "%s: key %s: unknown value type %u",
                                g->path, rt_file_quote(&q, kv->key), type);
        kv->type = (RtGgufVal)type;
        if ((s = rt_gguf_value(r, kv))) return s;
        g->kv_by_key[i] = kv;
    }
    qsort(g->kv_by_key, (size_t)g->n_kv, sizeof *g->kv_by_key, rt_gguf_cmp_kv);
    for (int i = 1; i < g->n_kv; i++)
        if (!strcmp(g->kv_by_key[i]->key, g->kv_by_key[i - 1]->key))
            return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT, "%s: key %s appears twice", g->path,
                                rt_file_quote(&q, g->kv_by_key[i]->key));

    const RtGgufKv *al = rt_gguf_kv_find(g, "general.alignment");
    g->alignment = RT_GGUF_DEFAULT_ALIGNMENT;
    if (al) {
        if (al->type != RT_GGUF_VAL_U32)
            return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT,
                                "%s: general.alignment is a %s, it must be u32", g->path,
                                rt_gguf_val_name(al->type));
        g->alignment = rt_gguf_le32(al->data);
        if (g->alignment == 0 || (g->alignment & (g->alignment - 1)))
            return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT,
                                "%s: general.alignment is %u, not a power of two", g->path, g->alignment);
    }
    return KILN_OK;
}

/* ---- tensor infos -------------------------------------------------------------------------------------- */

static KilnStatus rt_gguf_read_tensor(RtGgufFile *g, RtGgufReader *r, int i)
{
    RtGgufTensor *t = &g->tensors[i];
    RtFileQuoted q;
    KilnStatus s;
    uint32_t n_dims, type;
    snprintf(r->where, sizeof r->where, "tensor info %d", i);
    char *name;
    if ((s = rt_gguf_name(r, "tensor name", &name))) return s;
    t->name = name;
    rt_file_quote(&q, t->name);
    snprintf(r->where, sizeof r->where, "tensor info %d (%s)", i, q.s);
    if ((s = rt_gguf_u32(r, &n_dims))) return s;
    if (n_dims > RT_GGUF_MAX_DIMS)
        return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT,
                            "%s: tensor %s has %u dimensions (GGUF allows at most %d)", g->path, q.s, n_dims,
                            RT_GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    int64_t nel = 1;
    int overflow = 0;
    for (int d = 0; d < RT_GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims && (s = rt_gguf_u64(r, &ne))) return s;
        if (ne > (uint64_t)INT64_MAX)
            return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT,
                                "%s: tensor %s: ne[%d] is %llu, not below 2^63", g->path, q.s, d,
                                (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        if (ne != 0 && nel > INT64_MAX / (int64_t)ne)
            overflow = 1;
        else
            nel *= (int64_t)ne;
    }
    if ((s = rt_gguf_u32(r, &type)) || (s = rt_gguf_u64(r, &t->offset))) return s;
    if (t->ne[0] == 0 || t->ne[1] == 0 || t->ne[2] == 0 || t->ne[3] == 0) overflow = 0, nel = 0;
    if (overflow)
        return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT,
                            "%s: tensor %s: [%lld, %lld, %lld, %lld] has more than 2^63 elements", g->path,
                            q.s, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                            (long long)t->ne[3]);
    t->n_elements = nel;
    int block, bytes;
    if (!rt_gguf_type_block((RtGgufType)type, &block, &bytes))
        return rt_file_errf(r->err, r->errlen, KILN_ERR_UNSUPPORTED, "%s: tensor %s: unknown ggml type %u",
                            g->path, q.s, type);
    t->type = (RtGgufType)type;
    if (t->ne[0] % block)
        return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT,
                            "%s: tensor %s: ne[0] = %lld is not a multiple of the %s block (%d elements)",
                            g->path, q.s, (long long)t->ne[0], rt_gguf_type_name(t->type), block);
    /* bytes = ne[0] / block * bytes per block * ne[1] * ne[2] * ne[3], each step checked */
    uint64_t nb = (uint64_t)(t->ne[0] / block);
    int too_big = nb != 0 && (uint64_t)bytes > UINT64_MAX / nb;
    nb *= (uint64_t)bytes;
    for (int d = 1; d < RT_GGUF_MAX_DIMS && !too_big; d++) {
        uint64_t ne = (uint64_t)t->ne[d];
        if (ne != 0 && nb > UINT64_MAX / ne) too_big = 1;
        nb *= ne;
    }
    if (too_big && nel != 0)
        return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT, "%s: tensor %s: more than 2^64 bytes",
                            g->path, q.s);
    t->nbytes = nel == 0 ? 0 : nb;
    if (t->offset % g->alignment)
        return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT,
                            "%s: tensor %s: data offset %llu is not a multiple of the alignment (%u)",
                            g->path, q.s, (unsigned long long)t->offset, g->alignment);
    g->by_name[i] = t;
    return KILN_OK;
}

/* Places every tensor in the data section and checks that they fit and do not overlap. */
static KilnStatus rt_gguf_place(RtGgufFile *g, RtGgufReader *r)
{
    RtFileQuoted q, q2;
    uint64_t start = r->pos + (g->alignment - r->pos % g->alignment) % g->alignment;
    g->data_offset = start;
    if (g->n_tensors == 0) return KILN_OK; /* the padding may be missing when nothing follows */
    if (start > g->size)
        return rt_file_errf(
            r->err, r->errlen, KILN_ERR_CORRUPT,
            "%s: truncated: the data section would start at offset %llu, past the end of the file "
            "(%llu bytes)",
            g->path, (unsigned long long)start, (unsigned long long)g->size);
    uint64_t data_size = g->size - start;
    for (int i = 0; i < g->n_tensors; i++) {
        RtGgufTensor *t = &g->tensors[i];
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return rt_file_errf(
                r->err, r->errlen, KILN_ERR_CORRUPT,
                "%s: tensor %s (%s, %llu bytes at data offset %llu) runs past the end of the file "
                "(the data section has %llu bytes): truncated?",
                g->path, rt_file_quote(&q, t->name), rt_gguf_type_name(t->type),
                (unsigned long long)t->nbytes, (unsigned long long)t->offset, (unsigned long long)data_size);
        t->data = g->map + start + t->offset;
    }
    /* by_name is borrowed to sort by offset, then re-sorted by name */
    qsort(g->by_name, (size_t)g->n_tensors, sizeof *g->by_name, rt_gguf_cmp_offset);
    for (int i = 1; i < g->n_tensors; i++) {
        const RtGgufTensor *a = g->by_name[i - 1], *b = g->by_name[i];
        if (b->offset < a->offset + a->nbytes)
            return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT,
                                "%s: tensors %s [%llu, %llu) and %s [%llu, %llu) overlap in the data section",
                                g->path, rt_file_quote(&q, a->name), (unsigned long long)a->offset,
                                (unsigned long long)(a->offset + a->nbytes), rt_file_quote(&q2, b->name),
                                (unsigned long long)b->offset, (unsigned long long)(b->offset + b->nbytes));
    }
    qsort(g->by_name, (size_t)g->n_tensors, sizeof *g->by_name, rt_gguf_cmp_name);
    for (int i = 1; i < g->n_tensors; i++)
        if (!strcmp(g->by_name[i]->name, g->by_name[i - 1]->name))
            return rt_file_errf(r->err, r->errlen, KILN_ERR_CORRUPT, "%s: tensor %s appears twice", g->path,
                                rt_file_quote(&q, g->by_name[i]->name));
    return KILN_OK;
}

/* ---- open and close --------------------------------------------------------------------------------------
 */

/* Maps the file (an empty one is KILN_OK with g->map NULL: the caller says why that is wrong). */
static KilnStatus rt_gguf_map(RtGgufFile *g, char *err, int errlen)
{
    unsigned char *map;
    size_t size;
    KilnStatus s = rt_file_map(g->path, "GGUF file", &map, &size, err, errlen);
    if (s == KILN_OK) g->map = map, g->size = (uint64_t)size;
    return s;
}

/* The fixed header: magic, version, counts; allocates the tables the counts ask for. */
static KilnStatus rt_gguf_read_header(RtGgufFile *g, RtGgufReader *r)
{
    static const unsigned char magic[4] = {'G', 'G', 'U', 'F'};
    KilnStatus s;
    uint64_t n_tensors, n_kv;
    if (g->size == 0)
        return rt_file_errf(r->err, r->errlen, KILN_ERR_FORMAT, "%s: empty file (0 bytes), not a GGUF file",
                            g->path);
    if (memcmp(g->map, magic, g->size < 4 ? (size_t)g->size : 4) != 0)
        return rt_file_errf(r->err, r->errlen, KILN_ERR_FORMAT, "%s: not a GGUF file (no \"GGUF\" magic)",
                            g->path);
    snprintf(r->where, sizeof r->where, "the header");
    if ((s = rt_gguf_need(r, 4))) return s;
    r->pos = 4;
    if ((s = rt_gguf_u32(r, &g->version))) return s;
    if (g->version != 2 && g->version != 3) {
        if (g->version == 1)
            return rt_file_errf(r->err, r->errlen, KILN_ERR_FORMAT,
                                "%s: GGUF version 1 is not supported (only 2 and 3): convert the model again",
                                g->path);
        if (g->version != 0 && (g->version & 0xffff) == 0)
            return rt_file_errf(r->err, r->errlen, KILN_ERR_FORMAT,
                                "%s: a big-endian GGUF file (version field 0x%08x), not supported", g->path,
                                g->version);
        return rt_file_errf(r->err, r->errlen, KILN_ERR_FORMAT,
                            g->version > 3 ? "%s: GGUF version %u is newer than this build reads (2 and 3)"
                                           : "%s: GGUF version %u is not valid",
                            g->path, g->version);
    }
    if ((s = rt_gguf_u64(r, &n_tensors)) || (s = rt_gguf_u64(r, &n_kv))) return s;
    /* the smallest key/value is 14 bytes (8 + a 1-byte key + 4 + a 1-byte value); a tensor info 24 */
    uint64_t left = g->size - r->pos;
    if (n_kv > left / 14 || n_tensors > left / 24 || n_kv * 14 + n_tensors * 24 > left)
        return rt_file_errf(
            r->err, r->errlen, KILN_ERR_CORRUPT,
            "%s: the header claims %llu key/values and %llu tensors, more than the %llu bytes after "
            "it can hold: truncated?",
            g->path, (unsigned long long)n_kv, (unsigned long long)n_tensors, (unsigned long long)left);
    if (n_kv > RT_GGUF_MAX_COUNT || n_tensors > RT_GGUF_MAX_COUNT)
        return rt_file_errf(r->err, r->errlen, KILN_ERR_UNSUPPORTED, "%s: more than %d key/values or tensors",
                            g->path, RT_GGUF_MAX_COUNT);
    g->n_kv = (int)n_kv, g->n_tensors = (int)n_tensors;
    g->kv = calloc((size_t)n_kv + 1, sizeof *g->kv);
    g->kv_by_key = calloc((size_t)n_kv + 1, sizeof *g->kv_by_key);
    g->tensors = calloc((size_t)n_tensors + 1, sizeof *g->tensors);
    g->by_name = calloc((size_t)n_tensors + 1, sizeof *g->by_name);
    if (!g->kv || !g->kv_by_key || !g->tensors || !g->by_name)
        return rt_file_errf(r->err, r->errlen, KILN_ERR_NOMEM, "%s: out of memory", g->path);
    return KILN_OK;
}

void rt_gguf_close(RtGgufFile *g)
{
    if (!g) return;
    for (int i = 0; g->kv && i < g->n_kv; i++) {
        free((char *)g->kv[i].key);
        free((void *)g->kv[i].str);
    }
    for (int i = 0; g->tensors && i < g->n_tensors; i++)
        free((char *)g->tensors[i].name);
    if (g->map) rt_file_unmap(g->map, (size_t)g->size);
    free(g->kv);
    free(g->kv_by_key);
    free(g->tensors);
    free(g->by_name);
    free(g->path);
    free(g);
}

KilnStatus rt_gguf_open(const char *path, RtGgufFile **out, char *err, int errlen)
{
    KilnStatus s;
    if (out) *out = NULL;
    if (!path || !out)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "rt_gguf_open: NULL %s", path ? "out" : "path");
    RtGgufFile *g = calloc(1, sizeof *g);
    if (!g || !(g->path = strdup(path))) {
        free(g);
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
    }
    RtGgufReader r = {.path = g->path, .err = err, .errlen = errlen};
    if ((s = rt_gguf_map(g, err, errlen))) goto fail;
    r.p = g->map, r.size = g->size;
    if ((s = rt_gguf_read_header(g, &r)) || (s = rt_gguf_read_kvs(g, &r))) goto fail;
    for (int i = 0; i < g->n_tensors; i++)
        if ((s = rt_gguf_read_tensor(g, &r, i))) goto fail;
    if ((s = rt_gguf_place(g, &r))) goto fail;
    *out = g;
    return KILN_OK;
fail:
    rt_gguf_close(g);
    return s;
}

/* ---- lookups ---------------------------------------------------------------------------------------------
 */

uint32_t rt_gguf_version(const RtGgufFile *g)
{
    return g ? g->version : 0;
}

uint32_t rt_gguf_alignment(const RtGgufFile *g)
{
    return g ? g->alignment : 0;
}

uint64_t rt_gguf_data_offset(const RtGgufFile *g)
{
    return g ? g->data_offset : 0;
}

int rt_gguf_kv_count(const RtGgufFile *g)
{
    return g ? g->n_kv : 0;
}

const RtGgufKv *rt_gguf_kv_at(const RtGgufFile *g, int i)
{
    return g && i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const RtGgufKv *rt_gguf_kv_find(const RtGgufFile *g, const char *key)
{
    if (!g || !key || !g->n_kv) return NULL;
    RtGgufKv k = {.key = key};
    const RtGgufKv *pk = &k;
    const RtGgufKv **hit = bsearch(&pk, g->kv_by_key, (size_t)g->n_kv, sizeof pk, rt_gguf_cmp_kv);
    return hit ? *hit : NULL;
}

int rt_gguf_tensor_count(const RtGgufFile *g)
{
    return g ? g->n_tensors : 0;
}

const RtGgufTensor *rt_gguf_tensor_at(const RtGgufFile *g, int i)
{
    return g && i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const RtGgufTensor *rt_gguf_tensor_find(const RtGgufFile *g, const char *name)
{
    if (!g || !name || !g->n_tensors) return NULL;
    RtGgufTensor k = {.name = name};
    const RtGgufTensor *pk = &k;
    const RtGgufTensor **hit = bsearch(&pk, g->by_name, (size_t)g->n_tensors, sizeof pk, rt_gguf_cmp_name);
    return hit ? *hit : NULL;
}

/* ---- typed getters ----------------------------------------------------------------------------------------
 */

/* An integer scalar at p of type t: *neg and the magnitude-carrying pair (*sv for signed, *uv for unsigned).
 * Returns 0 when t is not an integer type. */
static int rt_gguf_int_at(const unsigned char *p, RtGgufVal t, int *is_signed, int64_t *sv, uint64_t *uv)
{
    *is_signed = 1, *sv = 0, *uv = 0;
    switch (t) {
    case RT_GGUF_VAL_U8: *is_signed = 0, *uv = p[0]; return 1;
    case RT_GGUF_VAL_I8: *sv = (int8_t)p[0]; return 1;
    case RT_GGUF_VAL_U16: *is_signed = 0, *uv = rt_gguf_le16(p); return 1;
    case RT_GGUF_VAL_I16: *sv = (int16_t)rt_gguf_le16(p); return 1;
    case RT_GGUF_VAL_U32: *is_signed = 0, *uv = rt_gguf_le32(p); return 1;
    case RT_GGUF_VAL_I32: *sv = (int32_t)rt_gguf_le32(p); return 1;
    case RT_GGUF_VAL_U64: *is_signed = 0, *uv = rt_gguf_le64(p); return 1;
    case RT_GGUF_VAL_I64: *sv = (int64_t)rt_gguf_le64(p); return 1;
    default: return 0;
    }
}

/* Whether the integer fits in [lo, hi] (lo <= 0 <= hi). */
static int rt_gguf_int_fits(int is_signed, int64_t sv, uint64_t uv, int64_t lo, uint64_t hi)
{
    if (!is_signed) return uv <= hi;
    return sv >= lo && (sv < 0 || (uint64_t)sv <= hi);
}

static float rt_gguf_f32_at(const unsigned char *p)
{
    uint32_t bits = rt_gguf_le32(p);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static double rt_gguf_f64_at(const unsigned char *p)
{
    uint64_t bits = rt_gguf_le64(p);
    double f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The scalar entry for key, or a status: absent (KILN_ERR_ARG) or an array (KILN_ERR_FORMAT). */
static KilnStatus rt_gguf_scalar(const RtGgufFile *g, const char *key, const char *want, const RtGgufKv **kv,
                                 char *err, int errlen)
{
    RtFileQuoted q;
    if (!g || !key)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "rt_gguf_get: NULL %s", g ? "key" : "file");
    *kv = rt_gguf_kv_find(g, key);
    if (!*kv)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: no key %s", g->path, rt_file_quote(&q, key));
    if ((*kv)->type == RT_GGUF_VAL_ARRAY)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "%s: key %s is an array of %s, not %s", g->path,
                            rt_file_quote(&q, key), rt_gguf_val_name((*kv)->elem), want);
    return KILN_OK;
}

/* The integer getters' common part: the value of key within [lo, hi]. */
static KilnStatus rt_gguf_get_int(const RtGgufFile *g, const char *key, const char *want, int64_t lo,
                                  uint64_t hi, int64_t *sv, uint64_t *uv, int *is_signed, char *err,
                                  int errlen)
{
    RtFileQuoted q;
    const RtGgufKv *kv = NULL;
    KilnStatus s = rt_gguf_scalar(g, key, want, &kv, err, errlen);
    if (s) return s;
    if (!rt_gguf_int_at(kv->data, kv->type, is_signed, sv, uv))
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "%s: key %s is a %s, not %s", g->path,
                            rt_file_quote(&q, key), rt_gguf_val_name(kv->type), want);
    if (!rt_gguf_int_fits(*is_signed, *sv, *uv, lo, hi)) {
        if (*is_signed)
            return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "%s: key %s is %lld, out of range for %s",
                                g->path, rt_file_quote(&q, key), (long long)*sv, want);
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "%s: key %s is %llu, out of range for %s", g->path,
                            rt_file_quote(&q, key), (unsigned long long)*uv, want);
    }
    return KILN_OK;
}

KilnStatus rt_gguf_get_u32(const RtGgufFile *g, const char *key, uint32_t *out, char *err, int errlen)
{
    int64_t sv;
    uint64_t uv;
    int is_signed;
    KilnStatus s = rt_gguf_get_int(g, key, "u32", 0, UINT32_MAX, &sv, &uv, &is_signed, err, errlen);
    if (!s && out) *out = is_signed ? (uint32_t)sv : (uint32_t)uv;
    return s;
}

KilnStatus rt_gguf_get_i32(const RtGgufFile *g, const char *key, int32_t *out, char *err, int errlen)
{
    int64_t sv;
    uint64_t uv;
    int is_signed;
    KilnStatus s = rt_gguf_get_int(g, key, "i32", INT32_MIN, INT32_MAX, &sv, &uv, &is_signed, err, errlen);
    if (!s && out) *out = is_signed ? (int32_t)sv : (int32_t)uv;
    return s;
}

KilnStatus rt_gguf_get_u64(const RtGgufFile *g, const char *key, uint64_t *out, char *err, int errlen)
{
    int64_t sv;
    uint64_t uv;
    int is_signed;
    KilnStatus s = rt_gguf_get_int(g, key, "u64", 0, UINT64_MAX, &sv, &uv, &is_signed, err, errlen);
    if (!s && out) *out = is_signed ? (uint64_t)sv : uv;
    return s;
}

KilnStatus rt_gguf_get_f32(const RtGgufFile *g, const char *key, float *out, char *err, int errlen)
{
    RtFileQuoted q;
    const RtGgufKv *kv = NULL;
    KilnStatus s = rt_gguf_scalar(g, key, "f32", &kv, err, errlen);
    if (s) return s;
    if (kv->type != RT_GGUF_VAL_F32 && kv->type != RT_GGUF_VAL_F64)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "%s: key %s is a %s, not f32", g->path,
                            rt_file_quote(&q, key), rt_gguf_val_name(kv->type));
    if (out) *out = kv->type == RT_GGUF_VAL_F32 ? rt_gguf_f32_at(kv->data) : (float)rt_gguf_f64_at(kv->data);
    return KILN_OK;
}

KilnStatus rt_gguf_get_bool(const RtGgufFile *g, const char *key, int *out, char *err, int errlen)
{
    RtFileQuoted q;
    const RtGgufKv *kv = NULL;
    KilnStatus s = rt_gguf_scalar(g, key, "bool", &kv, err, errlen);
    if (s) return s;
    if (kv->type != RT_GGUF_VAL_BOOL)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "%s: key %s is a %s, not bool", g->path,
                            rt_file_quote(&q, key), rt_gguf_val_name(kv->type));
    if (out) *out = kv->data[0];
    return KILN_OK;
}

KilnStatus rt_gguf_get_str(const RtGgufFile *g, const char *key, const char **str, uint64_t *len, char *err,
                           int errlen)
{
    RtFileQuoted q;
    const RtGgufKv *kv = NULL;
    KilnStatus s = rt_gguf_scalar(g, key, "string", &kv, err, errlen);
    if (s) return s;
    if (kv->type != RT_GGUF_VAL_STRING)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "%s: key %s is a %s, not string", g->path,
                            rt_file_quote(&q, key), rt_gguf_val_name(kv->type));
    if (str) *str = (const char *)kv->data;
    if (len) *len = kv->len;
    return KILN_OK;
}

KilnStatus rt_gguf_get_arr(const RtGgufFile *g, const char *key, RtGgufVal elem, const RtGgufKv **out,
                           char *err, int errlen)
{
    RtFileQuoted q;
    if (out) *out = NULL;
    if (!g || !key)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "rt_gguf_get_arr: NULL %s", g ? "key" : "file");
    const RtGgufKv *kv = rt_gguf_kv_find(g, key);
    if (!kv) return rt_file_errf(err, errlen, KILN_ERR_ARG, "%s: no key %s", g->path, rt_file_quote(&q, key));
    if (kv->type != RT_GGUF_VAL_ARRAY)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "%s: key %s is a %s, not an array of %s", g->path,
                            rt_file_quote(&q, key), rt_gguf_val_name(kv->type), rt_gguf_val_name(elem));
    if (kv->elem != elem)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "%s: key %s is an array of %s, not of %s", g->path,
                            rt_file_quote(&q, key), rt_gguf_val_name(kv->elem), rt_gguf_val_name(elem));
    if (out) *out = kv;
    return KILN_OK;
}

const char *rt_gguf_arr_str(const RtGgufKv *kv, uint64_t i, uint64_t *len)
{
    if (!kv || kv->type != RT_GGUF_VAL_ARRAY || kv->elem != RT_GGUF_VAL_STRING || i >= kv->count) return NULL;
    if (len) *len = rt_gguf_le64(kv->str[i]);
    return (const char *)kv->str[i] + 8;
}

KilnStatus rt_gguf_arr_i64(const RtGgufKv *kv, uint64_t i, int64_t *out)
{
    int is_signed;
    int64_t sv;
    uint64_t uv;
    if (!kv || kv->type != RT_GGUF_VAL_ARRAY || kv->elem == RT_GGUF_VAL_STRING || i >= kv->count)
        return KILN_ERR_ARG;
    int size = rt_gguf_vals[kv->elem].size;
    const unsigned char *p = kv->data + i * (uint64_t)size;
    if (kv->elem == RT_GGUF_VAL_BOOL) {
        if (out) *out = p[0];
        return KILN_OK;
    }
    if (!rt_gguf_int_at(p, kv->elem, &is_signed, &sv, &uv)) return KILN_ERR_ARG;
    if (!rt_gguf_int_fits(is_signed, sv, uv, INT64_MIN, INT64_MAX)) return KILN_ERR_FORMAT;
    if (out) *out = is_signed ? sv : (int64_t)uv;
    return KILN_OK;
}

KilnStatus rt_gguf_arr_f32(const RtGgufKv *kv, uint64_t i, float *out)
{
    if (!kv || kv->type != RT_GGUF_VAL_ARRAY || i >= kv->count) return KILN_ERR_ARG;
    if (kv->elem == RT_GGUF_VAL_F32) {
        if (out) *out = rt_gguf_f32_at(kv->data + 4 * i);
        return KILN_OK;
    }
    if (kv->elem == RT_GGUF_VAL_F64) {
        if (out) *out = (float)rt_gguf_f64_at(kv->data + 8 * i);
        return KILN_OK;
    }
    return KILN_ERR_ARG;
}

/* ---- dequantization --------------------------------------------------------------------------------------
 */

float rt_gguf_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = h >> 10 & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000 | man << 13; /* infinity, or NaN with its payload */
    } else if (exp != 0) {
        bits = sign | (exp + 112) << 23 | man << 13; /* rebias 15 -> 127 */
    } else if (man == 0) {
        bits = sign; /* ±0 */
    } else {         /* subnormal: man * 2^-24, normalised */
        uint32_t e = 113;
        while (!(man & 0x400))
            man <<= 1, e--;
        bits = sign | e << 23 | (man & 0x3ff) << 13;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The 6-bit scale *sc and min *m of sub-block j (0..7) of a Q4_K super-block's 12 scale bytes q
 * (ggml's get_scale_min_k4): j < 4 in the low 6 bits of q[j] and q[j + 4]; j >= 4 in the nibbles of
 * q[j + 4], with the top 2 bits of q[j - 4] and q[j] above them. */
static void rt_gguf_scale_min_k4(int j, const unsigned char *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | (q[j - 4] >> 6) << 4;
        *m = q[j + 4] >> 4 | (q[j] >> 6) << 4;
    }
}

KilnStatus rt_gguf_dequant(RtGgufType type, const void *src, int64_t n, float *dst)
{
    int block, bytes;
    if (!rt_gguf_type_block(type, &block, &bytes) || n < 0 || n % block || (n > 0 && (!src || !dst)))
        return KILN_ERR_ARG;
    const unsigned char *p = src;
    int64_t nb = n / block;
    switch (type) {
    case RT_GGUF_TYPE_F32:
        for (int64_t i = 0; i < n; i++)
            dst[i] = rt_gguf_f32_at(p + 4 * i);
        return KILN_OK;
    case RT_GGUF_TYPE_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = rt_gguf_f16_to_f32(rt_gguf_le16(p + 2 * i));
        return KILN_OK;
    case RT_GGUF_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)rt_gguf_le16(p + 2 * i) << 16;
            memcpy(&dst[i], &bits, sizeof bits);
        }
        return KILN_OK;
    case RT_GGUF_TYPE_Q4_0: /* block: f16 d, u8 qs[16]; element j < 16 is the low nibble of qs[j] */
        for (int64_t i = 0; i < nb; i++, p += 18, dst += 32) {
            const float d = rt_gguf_f16_to_f32(rt_gguf_le16(p));
            for (int j = 0; j < 16; j++) {
                const int x0 = (p[2 + j] & 0x0f) - 8, x1 = (p[2 + j] >> 4) - 8;
                dst[j] = (float)x0 * d;
                dst[j + 16] = (float)x1 * d;
            }
        }
        return KILN_OK;
    case RT_GGUF_TYPE_Q4_1: /* block: f16 d, f16 m, u8 qs[16] */
        for (int64_t i = 0; i < nb; i++, p += 20, dst += 32) {
            const float d = rt_gguf_f16_to_f32(rt_gguf_le16(p)), m = rt_gguf_f16_to_f32(rt_gguf_le16(p + 2));
            for (int j = 0; j < 16; j++) {
                const int x0 = p[4 + j] & 0x0f, x1 = p[4 + j] >> 4;
                dst[j] = (float)x0 * d + m;
                dst[j + 16] = (float)x1 * d + m;
            }
        }
        return KILN_OK;
    case RT_GGUF_TYPE_Q8_0: /* block: f16 d, i8 qs[32] */
        for (int64_t i = 0; i < nb; i++, p += 34, dst += 32) {
            const float d = rt_gguf_f16_to_f32(rt_gguf_le16(p));
            for (int j = 0; j < 32; j++)
                dst[j] = (float)(int8_t)p[2 + j] * d;
        }
        return KILN_OK;
    case RT_GGUF_TYPE_Q4_K: /* super-block: f16 d, f16 dmin, u8 scales[12], u8 qs[128] */
        for (int64_t i = 0; i < nb; i++, p += 144, dst += 256) {
            const float d = rt_gguf_f16_to_f32(rt_gguf_le16(p)), dm = rt_gguf_f16_to_f32(rt_gguf_le16(p + 2));
            /* sub-block j of 32: the low (j even) or high nibbles of qs[32(j/2) ..] */
            for (int j = 0; j < 8; j++) {
                int sc, m;
                rt_gguf_scale_min_k4(j, p + 4, &sc, &m);
                const float d1 = d * (float)sc, m1 = dm * (float)m;
                const unsigned char *qs = p + 16 + 32 * (j / 2);
                for (int l = 0; l < 32; l++)
                    dst[32 * j + l] = d1 * (float)(qs[l] >> 4 * (j & 1) & 0x0f) - m1;
            }
        }
        return KILN_OK;
    case RT_GGUF_TYPE_Q6_K: /* super-block: u8 ql[128], u8 qh[64], i8 scales[16], f16 d */
        for (int64_t i = 0; i < nb; i++, p += 210, dst += 256) {
            const float d = rt_gguf_f16_to_f32(rt_gguf_le16(p + 208));
            for (int h = 0; h < 2; h++) { /* halves of 128: ql + 64h, qh + 32h, scales + 8h */
                const unsigned char *ql = p + 64 * h, *qh = p + 128 + 32 * h, *sc = p + 192 + 8 * h;
                float *y = dst + 128 * h;
                /* y[32k + l]: the low (k < 2) or high nibble of ql[l + 32(k&1)], bits 2k, 2k+1 of qh[l] */
                for (int k = 0; k < 4; k++)
                    for (int l = 0; l < 32; l++) {
                        const int lo = ql[l + 32 * (k & 1)] >> 4 * (k >> 1) & 0x0f, hi = qh[l] >> 2 * k & 3;
                        const int q = (lo | hi << 4) - 32;
                        y[32 * k + l] = d * (float)(int8_t)sc[l / 16 + 2 * k] * (float)q;
                    }
            }
        }
        return KILN_OK;
    default: return KILN_ERR_UNSUPPORTED;
    }
}
