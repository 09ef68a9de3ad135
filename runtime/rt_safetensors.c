/* rt_safetensors.c — reading .safetensors files and sharded checkpoints (rt_safetensors.h).
 *
 * A safetensors file is: an 8-byte little-endian length N, N bytes of JSON (the header, padded with
 * spaces), then the data section: tensor bytes, which the header places by data_offsets relative to
 * the data section's start. The file is hostile until proven otherwise. Open maps it read-only and
 * checks, in order, each with its own one-line message that starts with the path:
 *   1. the file (exists, regular, not empty), and N (2 .. RT_ST_MAX_HEADER, inside the file, '{' first);
 *   2. the JSON itself, parsed by jansson (RFC 8259: no comments, no trailing commas, valid UTF-8, valid
 *      escapes and surrogate pairs, no NUL characters, integers in [-2^63, 2^63), no duplicate keys),
 *      nested at most RT_ST_MAX_JSON_DEPTH deep;
 *   3. each tensor entry: dtype known, shape of non-negative integers whose product fits in int64,
 *      data_offsets a pair begin <= end inside the data section, end - begin == elements * dtype size;
 *      "__metadata__" an object of strings (or null);
 *   4. the whole: the tensors tile the data section exactly (no overlap, no gap, nothing after the last),
 *      as the format requires (it forbids holes so a file has one meaning).
 * An index (model.safetensors.index.json) is parsed the same way; each shard it names is opened as
 * above, then the shards must hold exactly the tensors the weight_map says, where it says.
 * Invariant of an open checkpoint: every RtStTensor's bytes lie inside its own shard's mapping, and no
 * byte belongs to two tensors. Only the mapping, the parsed header (names and metadata point into it)
 * and two arrays are kept.
 */
#define _POSIX_C_SOURCE 200809L
#include "rt_safetensors.h"
#include "rt_file.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes ----------------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int size;
} rt_st_dtypes[RT_ST_DTYPE_COUNT] = {
    [RT_ST_DTYPE_BOOL] = {"BOOL", 1},
    [RT_ST_DTYPE_U8] = {"U8", 1},
    [RT_ST_DTYPE_I8] = {"I8", 1},
    [RT_ST_DTYPE_F8_E4M3] = {"F8_E4M3", 1},
    [RT_ST_DTYPE_F8_E5M2] = {"F8_E5M2", 1},
    [RT_ST_DTYPE_F8_E8M0] = {"F8_E8M0", 1},
    [RT_ST_DTYPE_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 1},
    [RT_ST_DTYPE_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 1},
    [RT_ST_DTYPE_I16] = {"I16", 2},
    [RT_ST_DTYPE_U16] = {"U16", 2},
    [RT_ST_DTYPE_F16] = {"F16", 2},
    [RT_ST_DTYPE_BF16] = {"BF16", 2},
    [RT_ST_DTYPE_I32] = {"I32", 4},
    [RT_ST_DTYPE_U32] = {"U32", 4},
    [RT_ST_DTYPE_F32] = {"F32", 4},
    [RT_ST_DTYPE_I64] = {"I64", 8},
    [RT_ST_DTYPE_U64] = {"U64", 8},
    [RT_ST_DTYPE_F64] = {"F64", 8},
    [RT_ST_DTYPE_C64] = {"C64", 8},
};

const char *rt_st_dtype_name(RtStDtype dtype)
{
    return (unsigned)dtype < RT_ST_DTYPE_COUNT ? rt_st_dtypes[dtype].name : "?";
}

int rt_st_dtype_size(RtStDtype dtype)
{
    return (unsigned)dtype < RT_ST_DTYPE_COUNT ? rt_st_dtypes[dtype].size : 0;
}

int rt_st_dtype_from_name(const char *name)
{
    for (int i = 0; name && i < RT_ST_DTYPE_COUNT; i++)
        if (!strcmp(name, rt_st_dtypes[i].name)) return i;
    return -1;
}

/* ---- JSON (jansson) ---------------------------------------------------------------------------------- */

/* Whether v nests arrays and objects more than `left` deep. */
static int rt_st_too_deep(json_t *v, int left)
{
    const char *key;
    size_t i;
    json_t *c;
    if (!json_is_object(v) && !json_is_array(v)) return 0;
    if (left == 0) return 1;
    if (json_is_object(v)) {
        json_object_foreach(v, key, c) if (rt_st_too_deep(c, left - 1)) return 1;
    } else {
        json_array_foreach(v, i, c) if (rt_st_too_deep(c, left - 1)) return 1;
    }
    return 0;
}

/* Parses src[0..len) as exactly one JSON value into *out (the caller json_decrefs it): strict, duplicate
 * keys refused, nested at most RT_ST_MAX_JSON_DEPTH deep. Errors: KILN_ERR_CORRUPT "<path>: <what>, byte
 * N: <jansson's reason>" (or "...: nested deeper than 64 ..."), or KILN_ERR_NOMEM; *out NULL. */
static KilnStatus rt_st_json_load(const void *src, size_t len, const char *path, const char *what,
                                  json_t **out, char *err, int errlen)
{
    json_error_t je;
    /* jansson's tree costs ~10x a real header and up to ~80x one of empty containers: past 1 MB, a
     * document with more than one value separator or container per 8 bytes (real headers have one per
     * 15 or more: long names, dtype, shape, offsets) is refused before it is parsed, which bounds the tree
     * near 20x the 100 MB limit (as the hand-written parser's was) */
    if (len > ((size_t)1 << 20)) {
        size_t marks = 0;
        for (const unsigned char *c = src, *end = c + len; c < end; c++)
            marks += *c == ',' || *c == '{' || *c == '[';
        if (marks > len / 8)
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                                "%s: %s: %zu values in %zu bytes (more than one per 8 bytes past 1 MB): not a "
                                "checkpoint's",
                                path, what, marks, len);
    }
    *out = json_loadb(src, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!*out)
        return rt_file_errf(
            err, errlen, json_error_code(&je) == json_error_out_of_memory ? KILN_ERR_NOMEM : KILN_ERR_CORRUPT,
            "%s: %s, byte %d: %s", path, what, je.position, je.text);
    if (rt_st_too_deep(*out, RT_ST_MAX_JSON_DEPTH)) {
        json_decref(*out), *out = NULL;
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: %s: nested deeper than %d arrays and objects",
                            path, what, RT_ST_MAX_JSON_DEPTH);
    }
    return KILN_OK;
}

/* A JSON value for a message: a number's value (a real with a '.' or an exponent), else its kind. */
static const char *rt_st_jdescribe(json_t *v, char *buf, size_t len)
{
    static const char *kinds[] = {
        [JSON_OBJECT] = "an object", [JSON_ARRAY] = "an array", [JSON_STRING] = "a string",
        [JSON_TRUE] = "true",        [JSON_FALSE] = "false",    [JSON_NULL] = "null"};
    if (json_is_integer(v)) {
        snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    } else if (json_is_real(v)) {
        int n = snprintf(buf, len, "%.15g", json_real_value(v));
        if (n > 0 && (size_t)n + 2 < len && !strpbrk(buf, ".e")) memcpy(buf + n, ".0", 3);
    } else {
        snprintf(buf, len, "%s", kinds[json_typeof(v)]);
    }
    return buf;
}

/* Whether v is an integer >= 0 (below 2^63, as all jansson's integers), into *u. */
static int rt_st_juint(json_t *v, uint64_t *u)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *u = (uint64_t)json_integer_value(v);
    return 1;
}

/* ---- the checkpoint ---------------------------------------------------------------------------------- */

typedef struct RtStShard {
    char *path;
    unsigned char *map; /* the whole file, read-only */
    size_t size;
    json_t *header; /* the parsed header: tensor names and metadata point into it */
    int n_meta;
    const char **meta; /* n_meta (key, value) pairs: meta[2i] key, meta[2i+1] value, sorted by key */
} RtStShard;

struct RtStCheckpoint {
    int n_shards;
    RtStShard *shards;
    int n_tensors;
    RtStTensor *tensors; /* sorted by name */
};

static int rt_st_cmp_name(const void *a, const void *b)
{
    return strcmp(((const RtStTensor *)a)->name, ((const RtStTensor *)b)->name);
}

static int rt_st_cmp_offset(const void *a, const void *b)
{
    const RtStTensor *x = a, *y = b;
    uint64_t xe = x->file_offset + x->nbytes, ye = y->file_offset + y->nbytes;
    if (x->file_offset != y->file_offset) return x->file_offset < y->file_offset ? -1 : 1;
    if (xe != ye) return xe < ye ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int rt_st_cmp_pair(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "[4096, 11008]" into buf. */
static const char *rt_st_shape_text(const int64_t *shape, int n, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (o < len) snprintf(buf + o, len - o, "]");
    return buf;
}

/* Fills t from the header entry (name, value v) of shard sh, whose data section has data_size bytes and
 * starts at file offset data_start. */
static KilnStatus rt_st_tensor_parse(const RtStShard *sh, const char *name, json_t *v, uint64_t data_start,
                                     uint64_t data_size, RtStTensor *t, char *err, int errlen)
{
    RtFileQuoted q;
    char buf[64], sbuf[256];
    const char *path = sh->path;
    rt_file_quote(&q, name);
    if (!json_is_object(v))
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: tensor %s: its entry is %s, not an object",
                            path, q.s, rt_st_jdescribe(v, buf, sizeof buf));
    static const char *keys[] = {"dtype", "shape", "data_offsets"};
    json_t *val[3];
    for (int i = 0; i < 3; i++)
        if (!(val[i] = json_object_get(v, keys[i])))
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: tensor %s: no %s", path, q.s, keys[i]);
    json_t *dt = val[0], *shp = val[1], *off = val[2];

    memset(t, 0, sizeof *t);
    t->name = name;
    if (!json_is_string(dt))
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: tensor %s: dtype is %s, not a string", path,
                            q.s, rt_st_jdescribe(dt, buf, sizeof buf));
    const char *dts = json_string_value(dt);
    int dtype = rt_st_dtype_from_name(dts);
    if (dtype < 0) {
        RtFileQuoted qd;
        int subbyte = !strcmp(dts, "F4") || !strcmp(dts, "F6_E2M3") || !strcmp(dts, "F6_E3M2");
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                            subbyte ? "%s: tensor %s: dtype %s (smaller than a byte) is not supported"
                                    : "%s: tensor %s: unknown dtype %s",
                            path, q.s, rt_file_quote(&qd, dts));
    }
    t->dtype = (RtStDtype)dtype;

    if (!json_is_array(shp))
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: tensor %s: shape is %s, not an array", path,
                            q.s, rt_st_jdescribe(shp, buf, sizeof buf));
    if (json_array_size(shp) > RT_ST_MAX_DIMS)
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                            "%s: tensor %s: shape has %zu dimensions (at most %d)", path, q.s,
                            json_array_size(shp), RT_ST_MAX_DIMS);
    int64_t nel = 1;
    int overflow = 0;
    size_t i;
    json_t *e;
    json_array_foreach(shp, i, e)
    {
        uint64_t u;
        if (!rt_st_juint(e, &u))
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                                "%s: tensor %s: shape dimension %d is %s, not an integer in [0, 2^63)", path,
                                q.s, t->n_dims, rt_st_jdescribe(e, buf, sizeof buf));
        int64_t dim = (int64_t)u;
        t->shape[t->n_dims++] = dim;
        if (dim != 0 && nel > INT64_MAX / dim)
            overflow = 1; /* unless a later dimension is 0; checked below */
        else
            nel *= dim;
    }
    for (int d = 0; d < t->n_dims; d++)
        if (t->shape[d] == 0) overflow = 0, nel = 0;
    rt_st_shape_text(t->shape, t->n_dims, sbuf, sizeof sbuf);
    if (overflow)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                            "%s: tensor %s: shape %s has more than 2^63 elements", path, q.s, sbuf);
    t->n_elements = nel;
    int esize = rt_st_dtype_size(t->dtype);
    if ((uint64_t)nel > UINT64_MAX / (uint64_t)esize)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: tensor %s: %s %s is more than 2^64 bytes",
                            path, q.s, rt_st_dtype_name(t->dtype), sbuf);
    t->nbytes = (uint64_t)nel * (uint64_t)esize;

    uint64_t begin, end;
    if (json_array_size(off) != 2 || !rt_st_juint(json_array_get(off, 0), &begin) ||
        !rt_st_juint(json_array_get(off, 1), &end))
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                            "%s: tensor %s: data_offsets is not a pair of integers in [0, 2^63)", path, q.s);
    if (begin > end)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                            "%s: tensor %s: data_offsets [%llu, %llu] are out of order", path, q.s,
                            (unsigned long long)begin, (unsigned long long)end);
    if (end > data_size)
        return rt_file_errf(
            err, errlen, KILN_ERR_CORRUPT,
            "%s: tensor %s: data_offsets [%llu, %llu] run past the end of the data section (%llu "
            "bytes): truncated?",
            path, q.s, (unsigned long long)begin, (unsigned long long)end, (unsigned long long)data_size);
    if (end - begin != t->nbytes)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                            "%s: tensor %s: data_offsets [%llu, %llu] hold %llu bytes, but %s %s needs %llu",
                            path, q.s, (unsigned long long)begin, (unsigned long long)end,
                            (unsigned long long)(end - begin), rt_st_dtype_name(t->dtype), sbuf,
                            (unsigned long long)t->nbytes);
    t->file_offset = data_start + begin;
    t->data = sh->map + t->file_offset;
    return KILN_OK;
}

/* Reads "__metadata__" (an object of strings, or null) into sh->meta. */
static KilnStatus rt_st_meta_parse(RtStShard *sh, json_t *v, char *err, int errlen)
{
    char buf[64];
    RtFileQuoted q;
    const char *key;
    json_t *val;
    if (json_is_null(v)) return KILN_OK;
    if (!json_is_object(v))
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: __metadata__ is %s, not an object", sh->path,
                            rt_st_jdescribe(v, buf, sizeof buf));
    sh->meta = malloc(sizeof *sh->meta * 2 * (json_object_size(v) + 1));
    if (!sh->meta) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", sh->path);
    json_object_foreach(v, key, val)
    {
        if (!json_is_string(val))
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: __metadata__ %s is %s, not a string",
                                sh->path, rt_file_quote(&q, key), rt_st_jdescribe(val, buf, sizeof buf));
        sh->meta[2 * sh->n_meta] = key, sh->meta[2 * sh->n_meta + 1] = json_string_value(val);
        sh->n_meta++;
    }
    qsort(sh->meta, (size_t)sh->n_meta, 2 * sizeof *sh->meta, rt_st_cmp_pair);
    return KILN_OK;
}

/* Maps and validates shard sh (sh->path set by the caller); on success *tensors (malloc'd, *n of them,
 * sorted by name) point into it and carry `index` as their shard. On failure the caller frees sh. */
static KilnStatus rt_st_shard_load(RtStShard *sh, int index, RtStTensor **tensors, int *n, char *err,
                                   int errlen)
{
    RtFileQuoted q, q2;
    KilnStatus s;
    RtStTensor *ts = NULL;
    int nt = 0;
    const char *key;
    json_t *v;
    *tensors = NULL, *n = 0;

    if ((s = rt_file_map(sh->path, "safetensors file", &sh->map, &sh->size, err, errlen))) return s;
    const char *path = sh->path;
    if (sh->size == 0)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "%s: empty file (0 bytes), not a safetensors file",
                            path);
    if (sh->size < 8)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                            "%s: truncated (%zu bytes, shorter than the 8-byte header length)", path,
                            sh->size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | sh->map[i];
    if (hlen < 2 || hlen > RT_ST_MAX_HEADER)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT,
                            "%s: not a safetensors file (header length %llu; it must be 2 .. %d bytes)", path,
                            (unsigned long long)hlen, RT_ST_MAX_HEADER);
    if (hlen > sh->size - 8)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                            "%s: truncated: the header length is %llu bytes, but only %zu bytes follow it",
                            path, (unsigned long long)hlen, sh->size - 8);
    if (sh->map[8] != '{')
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT,
                            "%s: not a safetensors file (the header does not start with '{')", path);
    uint64_t data_start = 8 + hlen, data_size = sh->size - data_start;

    if ((s = rt_st_json_load(sh->map + 8, (size_t)hlen, path, "JSON header", &sh->header, err, errlen)))
        return s;
    if (!json_is_object(sh->header)) /* cannot happen after '{', kept for the invariant */
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT,
                            "%s: not a safetensors file (the header is not an object)", path);
    ts = malloc(sizeof *ts * (json_object_size(sh->header) + 1));
    if (!ts) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
    json_object_foreach(sh->header, key, v)
    {
        if (!strcmp(key, "__metadata__")) {
            if ((s = rt_st_meta_parse(sh, v, err, errlen))) goto done;
        } else {
            if ((s = rt_st_tensor_parse(sh, key, v, data_start, data_size, &ts[nt], err, errlen))) goto done;
            ts[nt++].shard = index;
        }
    }

    /* The tensors must tile the data section: in offset order each begins where the previous ended. */
    qsort(ts, (size_t)nt, sizeof *ts, rt_st_cmp_offset);
    uint64_t at = data_start;
    for (int i = 0; i < nt; i++) {
        if (ts[i].file_offset < at) {
            s = rt_file_errf(
                err, errlen, KILN_ERR_CORRUPT,
                "%s: tensor %s: data_offsets [%llu, %llu] overlap tensor %s [%llu, %llu]", path,
                rt_file_quote(&q, ts[i].name), (unsigned long long)(ts[i].file_offset - data_start),
                (unsigned long long)(ts[i].file_offset - data_start + ts[i].nbytes),
                rt_file_quote(&q2, ts[i - 1].name), (unsigned long long)(ts[i - 1].file_offset - data_start),
                (unsigned long long)(at - data_start));
            goto done;
        }
        if (ts[i].file_offset > at) {
            s = rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                             "%s: bytes [%llu, %llu) of the data section belong to no tensor (before %s)",
                             path, (unsigned long long)(at - data_start),
                             (unsigned long long)(ts[i].file_offset - data_start),
                             rt_file_quote(&q, ts[i].name));
            goto done;
        }
        at = ts[i].file_offset + ts[i].nbytes;
    }
    if (at != sh->size) {
        s = rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                         "%s: the last %llu bytes of the file belong to no tensor", path,
                         (unsigned long long)(sh->size - at));
        goto done;
    }
    qsort(ts, (size_t)nt, sizeof *ts, rt_st_cmp_name); /* names are unique: the header's keys */
    *tensors = ts, *n = nt, ts = NULL;
done:
    free(ts);
    return s;
}

void rt_st_close(RtStCheckpoint *ck)
{
    if (!ck) return;
    for (int i = 0; i < ck->n_shards; i++) {
        RtStShard *sh = &ck->shards[i];
        if (sh->map) rt_file_unmap(sh->map, sh->size);
        free(sh->path);
        json_decref(sh->header);
        free(sh->meta);
    }
    free(ck->shards);
    free(ck->tensors);
    free(ck);
}

/* A checkpoint with n zeroed shards, or NULL. */
static RtStCheckpoint *rt_st_alloc(int n)
{
    RtStCheckpoint *ck = calloc(1, sizeof *ck);
    if (!ck) return NULL;
    ck->shards = calloc((size_t)n, sizeof *ck->shards);
    if (!ck->shards) {
        free(ck);
        return NULL;
    }
    ck->n_shards = n;
    return ck;
}

KilnStatus rt_st_open(const char *path, RtStCheckpoint **out, char *err, int errlen)
{
    if (out) *out = NULL;
    if (!path || !out)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "rt_st_open: NULL %s", path ? "out" : "path");
    RtStCheckpoint *ck = rt_st_alloc(1);
    if (!ck || !(ck->shards[0].path = strdup(path))) {
        rt_st_close(ck);
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
    }
    KilnStatus s = rt_st_shard_load(&ck->shards[0], 0, &ck->tensors, &ck->n_tensors, err, errlen);
    if (s) {
        rt_st_close(ck);
        return s;
    }
    *out = ck;
    return KILN_OK;
}

/* One weight_map entry. */
typedef struct RtStMapEntry {
    const char *name, *file;
    int shard;
} RtStMapEntry;

static int rt_st_cmp_entry_file(const void *a, const void *b)
{
    return strcmp(((const RtStMapEntry *)a)->file, ((const RtStMapEntry *)b)->file);
}

static int rt_st_cmp_entry_name(const void *a, const void *b)
{
    return strcmp(((const RtStMapEntry *)a)->name, ((const RtStMapEntry *)b)->name);
}

/* Reads the index's weight_map into *entries (sorted by file, shard numbers assigned) and the number of
 * distinct shard files into *n_files. */
static KilnStatus rt_st_index_parse(const char *path, json_t *root, RtStMapEntry **entries, int *n_entries,
                                    int *n_files, char *err, int errlen)
{
    RtFileQuoted q, q2;
    char buf[64];
    const char *name;
    json_t *v;
    *entries = NULL, *n_entries = 0, *n_files = 0;
    if (!json_is_object(root))
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT,
                            "%s: not a safetensors index (the JSON is %s, not an object)", path,
                            rt_st_jdescribe(root, buf, sizeof buf));
    json_t *wm = json_object_get(root, "weight_map");
    if (!wm)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "%s: not a safetensors index (no \"weight_map\")",
                            path);
    if (!json_is_object(wm))
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: weight_map is %s, not an object", path,
                            rt_st_jdescribe(wm, buf, sizeof buf));
    if (json_object_size(wm) == 0)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: weight_map is empty", path);
    RtStMapEntry *e = malloc(sizeof *e * json_object_size(wm));
    if (!e) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
    int n = 0;
    json_object_foreach(wm, name, v)
    {
        const char *f = json_string_value(v);
        if (!f) {
            free(e);
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                                "%s: weight_map: tensor %s maps to %s, not a file name", path,
                                rt_file_quote(&q, name), rt_st_jdescribe(v, buf, sizeof buf));
        }
        if (!*f || strchr(f, '/') || !strcmp(f, ".") || !strcmp(f, "..")) {
            free(e);
            return rt_file_errf(
                err, errlen, KILN_ERR_CORRUPT,
                "%s: weight_map: tensor %s maps to %s, which is not a plain file name in the index's "
                "directory",
                path, rt_file_quote(&q, name), rt_file_quote(&q2, f));
        }
        e[n].name = name, e[n].file = f, e[n].shard = 0, n++;
    }
    qsort(e, (size_t)n, sizeof *e, rt_st_cmp_entry_file);
    int files = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && strcmp(e[i].file, e[i - 1].file)) files++;
        e[i].shard = files;
    }
    *entries = e, *n_entries = n, *n_files = files + 1;
    return KILN_OK;
}

KilnStatus rt_st_open_index(const char *index_path, RtStCheckpoint **out, char *err, int errlen)
{
    RtFileQuoted q;
    json_t *doc = NULL;
    RtStMapEntry *e = NULL;
    RtStTensor **parts = NULL;
    int *counts = NULL, n_e = 0, n_files = 0;
    RtStCheckpoint *ck = NULL;
    unsigned char *map = NULL;
    size_t size = 0;
    KilnStatus s;
    if (out) *out = NULL;
    if (!index_path || !out)
        return rt_file_errf(err, errlen, KILN_ERR_ARG, "rt_st_open_index: NULL %s",
                            index_path ? "out" : "path");
    const char *path = index_path;

    if ((s = rt_file_map(path, "safetensors index", &map, &size, err, errlen))) return s;
    if (size == 0)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "%s: empty file (0 bytes), not a safetensors index",
                            path);
    if (size > RT_ST_MAX_INDEX) {
        s = rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                         "%s: an index of %zu bytes is larger than the limit (%d)", path, size,
                         RT_ST_MAX_INDEX);
        goto done;
    }
    if ((s = rt_st_json_load(map, size, path, "index JSON", &doc, err, errlen))) goto done;
    if ((s = rt_st_index_parse(path, doc, &e, &n_e, &n_files, err, errlen))) goto done;

    ck = rt_st_alloc(n_files);
    parts = calloc((size_t)n_files, sizeof *parts);
    counts = calloc((size_t)n_files, sizeof *counts);
    if (!ck || !parts || !counts) {
        s = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path + 1) : 0;
    int total = 0;
    for (int i = 0, f = 0; i < n_e; i++) {
        if (i > 0 && e[i].shard == e[i - 1].shard) continue;
        RtStShard *sh = &ck->shards[f];
        size_t flen = strlen(e[i].file);
        if (!(sh->path = malloc(dirlen + flen + 1))) {
            s = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        memcpy(sh->path, path, dirlen), memcpy(sh->path + dirlen, e[i].file, flen + 1);
        if ((s = rt_st_shard_load(sh, f, &parts[f], &counts[f], err, errlen))) goto done;
        if (counts[f] > INT_MAX - total) {
            s = rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED, "%s: too many tensors", path);
            goto done;
        }
        total += counts[f];
        f++;
    }
    ck->tensors = malloc(sizeof *ck->tensors * ((size_t)total + 1));
    if (!ck->tensors) {
        s = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int f = 0; f < n_files; f++) {
        if (counts[f]) memcpy(ck->tensors + ck->n_tensors, parts[f], sizeof *parts[f] * (size_t)counts[f]);
        ck->n_tensors += counts[f];
    }
    qsort(ck->tensors, (size_t)total, sizeof *ck->tensors, rt_st_cmp_name);
    for (int i = 1; i < total; i++)
        if (!strcmp(ck->tensors[i].name, ck->tensors[i - 1].name)) {
            const RtStTensor *a = &ck->tensors[i - 1], *b = &ck->tensors[i];
            if (a->shard > b->shard) a = b, b = &ck->tensors[i - 1];
            s = rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: tensor %s is also in %s",
                             ck->shards[b->shard].path, rt_file_quote(&q, b->name),
                             ck->shards[a->shard].path);
            goto done;
        }

    /* The shards must hold exactly the weight_map: a merge of two name-sorted lists. */
    qsort(e, (size_t)n_e, sizeof *e, rt_st_cmp_entry_name); /* names are unique: the map's keys */
    for (int i = 0, j = 0; i < n_e || j < total;) {
        int c = i == n_e ? 1 : j == total ? -1 : strcmp(e[i].name, ck->tensors[j].name);
        if (c > 0) {
            const RtStTensor *t = &ck->tensors[j];
            s = rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: tensor %s is not in the weight_map of %s",
                             ck->shards[t->shard].path, rt_file_quote(&q, t->name), path);
            goto done;
        }
        if (c < 0 || ck->tensors[j].shard != e[i].shard) {
            s = rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                             "%s: weight_map puts tensor %s in %s, which has no such tensor", path,
                             rt_file_quote(&q, e[i].name), e[i].file);
            goto done;
        }
        i++, j++;
    }
    *out = ck, ck = NULL;
done:
    for (int f = 0; parts && f < n_files; f++)
        free(parts[f]);
    free(parts);
    free(counts);
    free(e);
    json_decref(doc);
    if (map) rt_file_unmap(map, size);
    rt_st_close(ck);
    return s;
}

/* ---- lookups --------------------------------------------------------------------------------------- */

int rt_st_count(const RtStCheckpoint *ck)
{
    return ck ? ck->n_tensors : 0;
}

const RtStTensor *rt_st_tensor_at(const RtStCheckpoint *ck, int i)
{
    return ck && i >= 0 && i < ck->n_tensors ? &ck->tensors[i] : NULL;
}

const RtStTensor *rt_st_find(const RtStCheckpoint *ck, const char *name)
{
    if (!ck || !name) return NULL;
    RtStTensor key = {.name = name};
    return bsearch(&key, ck->tensors, (size_t)ck->n_tensors, sizeof key, rt_st_cmp_name);
}

const char *rt_st_meta(const RtStCheckpoint *ck, const char *key)
{
    if (!ck || !key) return NULL;
    for (int i = 0; i < ck->n_shards; i++) {
        const RtStShard *sh = &ck->shards[i];
        const char **hit =
            sh->n_meta ? bsearch(&key, sh->meta, (size_t)sh->n_meta, 2 * sizeof *sh->meta, rt_st_cmp_pair)
                       : NULL;
        if (hit) return hit[1];
    }
    return NULL;
}

int rt_st_shard_count(const RtStCheckpoint *ck)
{
    return ck ? ck->n_shards : 0;
}

const char *rt_st_shard_path(const RtStCheckpoint *ck, int shard)
{
    return ck && shard >= 0 && shard < ck->n_shards ? ck->shards[shard].path : NULL;
}
