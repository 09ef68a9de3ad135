/* rt_safetensors.c — reading .safetensors files and sharded checkpoints (rt_safetensors.h).
 *
 * A safetensors file is: an 8-byte little-endian length N, N bytes of JSON (the header, padded with
 * spaces), then the data section: tensor bytes, which the header places by data_offsets relative to
 * the data section's start. The file is hostile until proven otherwise. Open maps it read-only and
 * checks, in order, each with its own one-line message that starts with the path:
 *   1. the file (exists, regular, not empty), and N (2 .. RT_ST_MAX_HEADER, inside the file, '{' first);
 *   2. the JSON itself, with the strict parser below (RFC 8259: no comments, no trailing commas, valid
 *      UTF-8, valid escapes and surrogate pairs, no NUL characters, bounded nesting);
 *   3. each tensor entry: dtype known, shape of non-negative integers whose product fits in int64,
 *      data_offsets a pair begin <= end inside the data section, end - begin == elements * dtype size;
 *      "__metadata__" an object of strings (or null);
 *   4. the whole: the tensors tile the data section exactly (no overlap, no gap, nothing after the last),
 *      as the format requires (it forbids holes so a file has one meaning), and names are unique.
 * An index (model.safetensors.index.json) is parsed by the same JSON parser; each shard it names is
 * opened as above, then the shards must hold exactly the tensors the weight_map says, where it says.
 * Invariant of an open checkpoint: every RtStTensor's bytes lie inside its own shard's mapping, and no
 * byte belongs to two tensors. Only the mapping, the header's decoded strings and two arrays are kept.
 */
#define _POSIX_C_SOURCE 200809L
#include "rt_safetensors.h"
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

/* ---- files -------------------------------------------------------------------------------------------- */

/* ---- a strict JSON parser ----------------------------------------------------------------------------
 * The document becomes a flat array of nodes linked by index (first child, next sibling); in an object the
 * children alternate key, value. Decoded strings go to one buffer of the document's length + 1, which is
 * always enough: a string's decoded bytes plus its NUL never exceed its quoted source. */

enum {
    RT_JSON_NULL,
    RT_JSON_FALSE,
    RT_JSON_TRUE,
    RT_JSON_NUMBER,
    RT_JSON_STRING,
    RT_JSON_ARRAY,
    RT_JSON_OBJECT
};

typedef struct RtStJson { /* 32 bytes: an adversarial header of N bytes costs at most ~16 N of nodes */
    uint8_t type;
    uint8_t is_uint; /* numbers: a non-negative integer below 2^64, held exactly in u */
    int next;        /* the next sibling, or -1; in an object: key -> its value -> the next key */
    int first;       /* arrays and objects: the first child (objects: the first key), or -1 */
    int n;           /* arrays: elements; objects: pairs */
    uint32_t off;    /* where the value starts in the document, bytes (documents are < 2^32 bytes) */
    uint32_t len;    /* numbers: the length of their text */
    union {
        uint64_t u;    /* numbers with is_uint */
        const char *s; /* strings: decoded UTF-8, NUL-terminated, in the document's string buffer */
    };
} RtStJson;

typedef struct RtStJsonDoc {
    const char *src; /* the document text (not owned) */
    RtStJson *nodes;
    int n, cap;
    char *strings; /* owned until taken (set to NULL) by whoever keeps the strings */
} RtStJsonDoc;

typedef struct RtStParser {
    const char *src;
    size_t len, pos, spos; /* spos: next free byte of doc->strings */
    RtStJsonDoc *doc;
    const char *path, *what;
    char *err;
    int errlen;
    KilnStatus status;
} RtStParser;

static void rt_st_json_free(RtStJsonDoc *d)
{
    free(d->nodes);
    free(d->strings);
    memset(d, 0, sizeof *d);
}

static int rt_st_jfail(RtStParser *p, size_t at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Records a syntax error at byte `at`; returns -1 so callers can `return rt_st_jfail(...)`. */
static int rt_st_jfail(RtStParser *p, size_t at, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->status =
        rt_file_errf(p->err, p->errlen, KILN_ERR_CORRUPT, "%s: %s, byte %zu: %s", p->path, p->what, at, msg);
    return -1;
}

/* The byte at pos, described for a message: 'x' or 0xNN. */
static const char *rt_st_jchar(const RtStParser *p, char buf[16])
{
    unsigned char c = (unsigned char)p->src[p->pos];
    if (c > 0x20 && c < 0x7f)
        snprintf(buf, 16, "'%c'", c);
    else
        snprintf(buf, 16, "byte 0x%02x", c);
    return buf;
}

static int rt_st_jnode(RtStParser *p, int type)
{
    RtStJsonDoc *d = p->doc;
    if (d->n == d->cap) {
        if (d->cap > INT_MAX / 4) goto nomem;
        int ncap = d->cap ? 2 * d->cap : 64;
        RtStJson *nn = realloc(d->nodes, sizeof *nn * (size_t)ncap);
        if (!nn) goto nomem;
        d->nodes = nn, d->cap = ncap;
    }
    RtStJson *j = &d->nodes[d->n];
    memset(j, 0, sizeof *j);
    j->type = (uint8_t)type, j->next = j->first = -1, j->off = (uint32_t)p->pos;
    return d->n++;
nomem:
    p->status =
        rt_file_errf(p->err, p->errlen, KILN_ERR_NOMEM, "%s: out of memory parsing the %s", p->path, p->what);
    return -1;
}

static void rt_st_jws(RtStParser *p)
{
    while (p->pos < p->len && (p->src[p->pos] == ' ' || p->src[p->pos] == '\t' || p->src[p->pos] == '\n' ||
                               p->src[p->pos] == '\r'))
        p->pos++;
}

/* The length of the valid UTF-8 sequence (2..4 bytes) at s, or 0 (overlong, surrogate, > U+10FFFF, cut). */
static int rt_st_utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0], lo = 0x80, hi = 0xbf;
    int k;
    if (c >= 0xc2 && c <= 0xdf)
        k = 2;
    else if (c >= 0xe0 && c <= 0xef)
        k = 3, lo = c == 0xe0 ? 0xa0 : lo, hi = c == 0xed ? 0x9f : hi;
    else if (c >= 0xf0 && c <= 0xf4)
        k = 4, lo = c == 0xf0 ? 0x90 : lo, hi = c == 0xf4 ? 0x8f : hi;
    else
        return 0;
    if (n < (size_t)k || s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < k; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return k;
}

/* Four hex digits at pos into *cp. */
static int rt_st_jhex4(RtStParser *p, uint32_t *cp)
{
    size_t at = p->pos;
    *cp = 0;
    for (int i = 0; i < 4; i++, p->pos++) {
        if (p->pos >= p->len) return rt_st_jfail(p, at, "unterminated \\u escape");
        char c = p->src[p->pos];
        int v = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (v < 0) return rt_st_jfail(p, at, "\\u needs four hex digits");
        *cp = *cp << 4 | (uint32_t)v;
    }
    return 0;
}

static int rt_st_jstring(RtStParser *p)
{
    size_t start = p->pos++;
    int self = rt_st_jnode(p, RT_JSON_STRING);
    if (self < 0) return -1;
    p->doc->nodes[self].off = (uint32_t)start;
    char *begin = p->doc->strings + p->spos, *o = begin;
    for (;;) {
        if (p->pos >= p->len) return rt_st_jfail(p, start, "unterminated string");
        unsigned char c = (unsigned char)p->src[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) return rt_st_jfail(p, p->pos, "control character 0x%02x in a string", c);
        if (c >= 0x80) {
            int k = rt_st_utf8_len((const unsigned char *)p->src + p->pos, p->len - p->pos);
            if (!k) return rt_st_jfail(p, p->pos, "invalid UTF-8 in a string");
            memcpy(o, p->src + p->pos, (size_t)k), o += k, p->pos += (size_t)k;
            continue;
        }
        if (c != '\\') {
            *o++ = (char)c, p->pos++;
            continue;
        }
        size_t esc = p->pos;
        if (p->pos + 1 >= p->len) return rt_st_jfail(p, start, "unterminated string");
        char e = p->src[p->pos + 1];
        p->pos += 2;
        uint32_t cp, lo;
        switch (e) {
        case '"': *o++ = '"'; continue;
        case '\\': *o++ = '\\'; continue;
        case '/': *o++ = '/'; continue;
        case 'b': *o++ = '\b'; continue;
        case 'f': *o++ = '\f'; continue;
        case 'n': *o++ = '\n'; continue;
        case 'r': *o++ = '\r'; continue;
        case 't': *o++ = '\t'; continue;
        case 'u': break;
        default: return rt_st_jfail(p, esc, "invalid escape in a string");
        }
        if (rt_st_jhex4(p, &cp)) return -1;
        if (cp >= 0xdc00 && cp <= 0xdfff) return rt_st_jfail(p, esc, "unpaired surrogate \\u%04x", cp);
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (p->pos + 2 > p->len || p->src[p->pos] != '\\' || p->src[p->pos + 1] != 'u')
                return rt_st_jfail(p, esc, "unpaired surrogate \\u%04x", cp);
            p->pos += 2;
            if (rt_st_jhex4(p, &lo)) return -1;
            if (lo < 0xdc00 || lo > 0xdfff) return rt_st_jfail(p, esc, "unpaired surrogate \\u%04x", cp);
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        if (cp == 0) return rt_st_jfail(p, esc, "\\u0000 (a NUL character) in a string");
        if (cp < 0x80) {
            *o++ = (char)cp;
        } else if (cp < 0x800) {
            *o++ = (char)(0xc0 | cp >> 6), *o++ = (char)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            *o++ = (char)(0xe0 | cp >> 12), *o++ = (char)(0x80 | (cp >> 6 & 0x3f));
            *o++ = (char)(0x80 | (cp & 0x3f));
        } else {
            *o++ = (char)(0xf0 | cp >> 18), *o++ = (char)(0x80 | (cp >> 12 & 0x3f));
            *o++ = (char)(0x80 | (cp >> 6 & 0x3f)), *o++ = (char)(0x80 | (cp & 0x3f));
        }
    }
    *o++ = 0;
    p->doc->nodes[self].s = begin;
    p->spos = (size_t)(o - p->doc->strings);
    return self;
}

static int rt_st_jdigit(const RtStParser *p)
{
    return p->pos < p->len && p->src[p->pos] >= '0' && p->src[p->pos] <= '9';
}

static int rt_st_jnumber(RtStParser *p)
{
    size_t start = p->pos;
    int neg = 0, integer = 1, big = 0;
    uint64_t u = 0;
    int self = rt_st_jnode(p, RT_JSON_NUMBER);
    if (self < 0) return -1;
    if (p->src[p->pos] == '-') neg = 1, p->pos++;
    if (!rt_st_jdigit(p)) return rt_st_jfail(p, start, "malformed number");
    if (p->src[p->pos] == '0') {
        p->pos++;
        if (rt_st_jdigit(p)) return rt_st_jfail(p, start, "number with a leading zero");
    } else {
        for (; rt_st_jdigit(p); p->pos++) {
            unsigned d = (unsigned)(p->src[p->pos] - '0');
            if (u > (UINT64_MAX - d) / 10) big = 1;
            u = u * 10 + d;
        }
    }
    if (p->pos < p->len && p->src[p->pos] == '.') {
        integer = 0, p->pos++;
        if (!rt_st_jdigit(p)) return rt_st_jfail(p, start, "malformed number");
        while (rt_st_jdigit(p))
            p->pos++;
    }
    if (p->pos < p->len && (p->src[p->pos] == 'e' || p->src[p->pos] == 'E')) {
        integer = 0, p->pos++;
        if (p->pos < p->len && (p->src[p->pos] == '+' || p->src[p->pos] == '-')) p->pos++;
        if (!rt_st_jdigit(p)) return rt_st_jfail(p, start, "malformed number");
        while (rt_st_jdigit(p))
            p->pos++;
    }
    RtStJson *j = &p->doc->nodes[self];
    j->is_uint = !neg && integer && !big, j->u = j->is_uint ? u : 0, j->len = (uint32_t)(p->pos - start);
    return self;
}

static int rt_st_jvalue(RtStParser *p, int depth);

static int rt_st_jcontainer(RtStParser *p, int depth)
{
    size_t open_at = p->pos;
    int obj = p->src[p->pos] == '{', last = -1;
    char close = obj ? '}' : ']', cb[16];
    if (depth >= RT_ST_MAX_JSON_DEPTH)
        return rt_st_jfail(p, p->pos, "nested deeper than %d arrays and objects", RT_ST_MAX_JSON_DEPTH);
    int self = rt_st_jnode(p, obj ? RT_JSON_OBJECT : RT_JSON_ARRAY);
    if (self < 0) return -1;
    p->pos++;
    rt_st_jws(p);
    if (p->pos < p->len && p->src[p->pos] == close) {
        p->pos++;
        return self;
    }
    for (;;) {
        int child[2], nchild = 0;
        if (obj) {
            rt_st_jws(p);
            if (p->pos >= p->len) return rt_st_jfail(p, open_at, "unterminated object");
            if (p->src[p->pos] != '"')
                return rt_st_jfail(p, p->pos, "expected a string key, found %s", rt_st_jchar(p, cb));
            if ((child[nchild++] = rt_st_jstring(p)) < 0) return -1;
            rt_st_jws(p);
            if (p->pos >= p->len) return rt_st_jfail(p, open_at, "unterminated object");
            if (p->src[p->pos] != ':')
                return rt_st_jfail(p, p->pos, "expected ':' after a key, found %s", rt_st_jchar(p, cb));
            p->pos++;
        }
        if ((child[nchild++] = rt_st_jvalue(p, depth + 1)) < 0) return -1;
        for (int i = 0; i < nchild; i++) {
            if (last < 0)
                p->doc->nodes[self].first = child[i];
            else
                p->doc->nodes[last].next = child[i];
            last = child[i];
        }
        p->doc->nodes[self].n++;
        rt_st_jws(p);
        if (p->pos >= p->len)
            return rt_st_jfail(p, open_at, obj ? "unterminated object" : "unterminated array");
        char c = p->src[p->pos];
        if (c == ',') {
            p->pos++;
            continue;
        }
        if (c == close) {
            p->pos++;
            return self;
        }
        return rt_st_jfail(p, p->pos, "expected ',' or '%c', found %s", close, rt_st_jchar(p, cb));
    }
}

static int rt_st_jliteral(RtStParser *p, const char *word, int type)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->src + p->pos, word, n) != 0)
        return rt_st_jfail(p, p->pos, "invalid literal (expected %s)", word);
    int self = rt_st_jnode(p, type);
    p->pos += n;
    return self;
}

static int rt_st_jvalue(RtStParser *p, int depth)
{
    char cb[16];
    rt_st_jws(p);
    if (p->pos >= p->len) return rt_st_jfail(p, p->pos, "unexpected end (a value is missing)");
    char c = p->src[p->pos];
    switch (c) {
    case '{':
    case '[': return rt_st_jcontainer(p, depth);
    case '"': return rt_st_jstring(p);
    case 't': return rt_st_jliteral(p, "true", RT_JSON_TRUE);
    case 'f': return rt_st_jliteral(p, "false", RT_JSON_FALSE);
    case 'n': return rt_st_jliteral(p, "null", RT_JSON_NULL);
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return rt_st_jnumber(p);
        return rt_st_jfail(p, p->pos, "unexpected %s", rt_st_jchar(p, cb));
    }
}

/* Parses src[0..len) as exactly one JSON value (surrounding whitespace allowed) into doc; node 0 is the
 * root. Errors: KILN_ERR_CORRUPT "<path>: <what>, byte N: <why>", or KILN_ERR_NOMEM. doc is always
 * initialised and must be freed with rt_st_json_free. */
static KilnStatus rt_st_json_parse(const char *src, size_t len, RtStJsonDoc *doc, const char *path,
                                   const char *what, char *err, int errlen)
{
    char cb[16];
    memset(doc, 0, sizeof *doc);
    doc->src = src;
    RtStParser p = {
        .src = src, .len = len, .doc = doc, .path = path, .what = what, .err = err, .errlen = errlen};
    doc->strings = malloc(len + 1);
    if (!doc->strings)
        return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory parsing the %s", path, what);
    if (rt_st_jvalue(&p, 0) < 0) return p.status;
    rt_st_jws(&p);
    if (p.pos < len) {
        rt_st_jfail(&p, p.pos, "unexpected %s after the end of the JSON value", rt_st_jchar(&p, cb));
        return p.status;
    }
    return KILN_OK;
}

/* The value of key in object node obj, or -1; *twice set when the key occurs more than once. */
static int rt_st_jget(const RtStJsonDoc *d, int obj, const char *key, int *twice)
{
    int found = -1;
    *twice = 0;
    for (int k = d->nodes[obj].first; k >= 0; k = d->nodes[d->nodes[k].next].next)
        if (!strcmp(d->nodes[k].s, key)) {
            if (found >= 0) *twice = 1;
            found = d->nodes[k].next;
        }
    return found;
}

/* ---- the checkpoint ---------------------------------------------------------------------------------- */

typedef struct RtStShard {
    char *path;
    unsigned char *map; /* the whole file, read-only */
    size_t size;
    char *strings; /* the header's decoded strings: tensor names and metadata point here */
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

/* The text of a JSON value for a message: a number's digits, else its kind. */
static const char *rt_st_jdescribe(const RtStJsonDoc *d, int v, char *buf, size_t len)
{
    static const char *kinds[] = {"null", "false", "true", "a number", "a string", "an array", "an object"};
    const RtStJson *j = &d->nodes[v];
    if (j->type == RT_JSON_NUMBER)
        snprintf(buf, len, "%.*s", j->len > 40 ? 40 : (int)j->len, d->src + j->off);
    else
        snprintf(buf, len, "%s", kinds[j->type]);
    return buf;
}

/* Fills t from the header entry (name, value v) of shard sh, whose data section has data_size bytes and
 * starts at file offset data_start. */
static KilnStatus rt_st_tensor_parse(const RtStShard *sh, const RtStJsonDoc *d, const char *name, int v,
                                     uint64_t data_start, uint64_t data_size, RtStTensor *t, char *err,
                                     int errlen)
{
    RtFileQuoted q;
    char buf[64], sbuf[256];
    int twice, dt, sh_node, off_node;
    const char *path = sh->path;
    rt_file_quote(&q, name);
    if (d->nodes[v].type != RT_JSON_OBJECT)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: tensor %s: its entry is %s, not an object",
                            path, q.s, rt_st_jdescribe(d, v, buf, sizeof buf));
    static const char *keys[] = {"dtype", "shape", "data_offsets"};
    int val[3];
    for (int i = 0; i < 3; i++) {
        val[i] = rt_st_jget(d, v, keys[i], &twice);
        if (val[i] < 0)
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: tensor %s: no %s", path, q.s, keys[i]);
        if (twice)
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: tensor %s: %s is given twice", path, q.s,
                                keys[i]);
    }
    dt = val[0], sh_node = val[1], off_node = val[2];

    memset(t, 0, sizeof *t);
    t->name = name;
    if (d->nodes[dt].type != RT_JSON_STRING)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: tensor %s: dtype is %s, not a string", path,
                            q.s, rt_st_jdescribe(d, dt, buf, sizeof buf));
    int dtype = rt_st_dtype_from_name(d->nodes[dt].s);
    if (dtype < 0) {
        RtFileQuoted qd;
        const char *s = d->nodes[dt].s;
        int subbyte = !strcmp(s, "F4") || !strcmp(s, "F6_E2M3") || !strcmp(s, "F6_E3M2");
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                            subbyte ? "%s: tensor %s: dtype %s (smaller than a byte) is not supported"
                                    : "%s: tensor %s: unknown dtype %s",
                            path, q.s, rt_file_quote(&qd, s));
    }
    t->dtype = (RtStDtype)dtype;

    const RtStJson *shp = &d->nodes[sh_node];
    if (shp->type != RT_JSON_ARRAY)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: tensor %s: shape is %s, not an array", path,
                            q.s, rt_st_jdescribe(d, sh_node, buf, sizeof buf));
    if (shp->n > RT_ST_MAX_DIMS)
        return rt_file_errf(err, errlen, KILN_ERR_UNSUPPORTED,
                            "%s: tensor %s: shape has %d dimensions (at most %d)", path, q.s, shp->n,
                            RT_ST_MAX_DIMS);
    int64_t nel = 1;
    int overflow = 0;
    for (int e = shp->first; e >= 0; e = d->nodes[e].next) {
        const RtStJson *j = &d->nodes[e];
        if (j->type != RT_JSON_NUMBER || !j->is_uint || j->u > (uint64_t)INT64_MAX)
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                                "%s: tensor %s: shape dimension %d is %s, not an integer in [0, 2^63)", path,
                                q.s, t->n_dims, rt_st_jdescribe(d, e, buf, sizeof buf));
        int64_t dim = (int64_t)j->u;
        t->shape[t->n_dims++] = dim;
        if (dim != 0 && nel > INT64_MAX / dim)
            overflow = 1; /* unless a later dimension is 0; checked below */
        else
            nel *= dim;
    }
    for (int i = 0; i < t->n_dims; i++)
        if (t->shape[i] == 0) overflow = 0, nel = 0;
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

    const RtStJson *off = &d->nodes[off_node];
    int b = off->type == RT_JSON_ARRAY && off->n == 2 ? off->first : -1, e = b >= 0 ? d->nodes[b].next : -1;
    if (b < 0 || d->nodes[b].type != RT_JSON_NUMBER || !d->nodes[b].is_uint ||
        d->nodes[e].type != RT_JSON_NUMBER || !d->nodes[e].is_uint)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                            "%s: tensor %s: data_offsets is not a pair of integers in [0, 2^64)", path, q.s);
    uint64_t begin = d->nodes[b].u, end = d->nodes[e].u;
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
static KilnStatus rt_st_meta_parse(RtStShard *sh, const RtStJsonDoc *d, int v, char *err, int errlen)
{
    char buf[64];
    RtFileQuoted q;
    if (d->nodes[v].type == RT_JSON_NULL) return KILN_OK;
    if (d->nodes[v].type != RT_JSON_OBJECT)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: __metadata__ is %s, not an object", sh->path,
                            rt_st_jdescribe(d, v, buf, sizeof buf));
    sh->meta = malloc(sizeof *sh->meta * 2 * (size_t)(d->nodes[v].n + 1));
    if (!sh->meta) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", sh->path);
    for (int k = d->nodes[v].first; k >= 0; k = d->nodes[d->nodes[k].next].next) {
        int val = d->nodes[k].next;
        if (d->nodes[val].type != RT_JSON_STRING)
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: __metadata__ %s is %s, not a string",
                                sh->path, rt_file_quote(&q, d->nodes[k].s),
                                rt_st_jdescribe(d, val, buf, sizeof buf));
        sh->meta[2 * sh->n_meta] = d->nodes[k].s, sh->meta[2 * sh->n_meta + 1] = d->nodes[val].s;
        sh->n_meta++;
    }
    qsort(sh->meta, (size_t)sh->n_meta, 2 * sizeof *sh->meta, rt_st_cmp_pair);
    for (int i = 1; i < sh->n_meta; i++)
        if (!strcmp(sh->meta[2 * i], sh->meta[2 * i - 2]))
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: __metadata__ has the key %s twice",
                                sh->path, rt_file_quote(&q, sh->meta[2 * i]));
    return KILN_OK;
}

/* Maps and validates shard sh (sh->path set by the caller); on success *tensors (malloc'd, *n of them,
 * sorted by name) point into it and carry `index` as their shard. On failure the caller frees sh. */
static KilnStatus rt_st_shard_load(RtStShard *sh, int index, RtStTensor **tensors, int *n, char *err,
                                   int errlen)
{
    RtStJsonDoc doc;
    RtFileQuoted q, q2;
    KilnStatus s;
    RtStTensor *ts = NULL;
    int nt = 0, seen_meta = 0;
    *tensors = NULL, *n = 0;
    memset(&doc, 0, sizeof doc);

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

    if ((s = rt_st_json_parse((const char *)sh->map + 8, (size_t)hlen, &doc, path, "JSON header", err,
                              errlen)))
        goto done;
    if (doc.nodes[0].type != RT_JSON_OBJECT) { /* cannot happen after '{', kept for the invariant */
        s = rt_file_errf(err, errlen, KILN_ERR_FORMAT,
                         "%s: not a safetensors file (the header is not an object)", path);
        goto done;
    }
    ts = malloc(sizeof *ts * (size_t)(doc.nodes[0].n + 1));
    if (!ts) {
        s = rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int k = doc.nodes[0].first; k >= 0; k = doc.nodes[doc.nodes[k].next].next) {
        int v = doc.nodes[k].next;
        if (!strcmp(doc.nodes[k].s, "__metadata__")) {
            if (seen_meta++) {
                s = rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                                 "%s: __metadata__ appears twice in the header", path);
                goto done;
            }
            if ((s = rt_st_meta_parse(sh, &doc, v, err, errlen))) goto done;
            continue;
        }
        if ((s = rt_st_tensor_parse(sh, &doc, doc.nodes[k].s, v, data_start, data_size, &ts[nt], err,
                                    errlen)))
            goto done;
        ts[nt++].shard = index;
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
    qsort(ts, (size_t)nt, sizeof *ts, rt_st_cmp_name);
    for (int i = 1; i < nt; i++)
        if (!strcmp(ts[i].name, ts[i - 1].name)) {
            s = rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: tensor %s appears twice in the header", path,
                             rt_file_quote(&q, ts[i].name));
            goto done;
        }
    sh->strings = doc.strings, doc.strings = NULL; /* names and metadata live on in the shard */
    *tensors = ts, *n = nt, ts = NULL;
done:
    free(ts);
    rt_st_json_free(&doc);
    return s;
}

void rt_st_close(RtStCheckpoint *ck)
{
    if (!ck) return;
    for (int i = 0; i < ck->n_shards; i++) {
        RtStShard *sh = &ck->shards[i];
        if (sh->map) rt_file_unmap(sh->map, sh->size);
        free(sh->path);
        free(sh->strings);
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
static KilnStatus rt_st_index_parse(const char *path, const RtStJsonDoc *d, RtStMapEntry **entries,
                                    int *n_entries, int *n_files, char *err, int errlen)
{
    RtFileQuoted q, q2;
    char buf[64];
    int twice;
    *entries = NULL, *n_entries = 0, *n_files = 0;
    if (d->nodes[0].type != RT_JSON_OBJECT)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT,
                            "%s: not a safetensors index (the JSON is %s, not an object)", path,
                            rt_st_jdescribe(d, 0, buf, sizeof buf));
    int wm = rt_st_jget(d, 0, "weight_map", &twice);
    if (wm < 0)
        return rt_file_errf(err, errlen, KILN_ERR_FORMAT, "%s: not a safetensors index (no \"weight_map\")",
                            path);
    if (twice) return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: \"weight_map\" appears twice", path);
    if (d->nodes[wm].type != RT_JSON_OBJECT)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: weight_map is %s, not an object", path,
                            rt_st_jdescribe(d, wm, buf, sizeof buf));
    if (d->nodes[wm].n == 0)
        return rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: weight_map is empty", path);
    RtStMapEntry *e = malloc(sizeof *e * (size_t)d->nodes[wm].n);
    if (!e) return rt_file_errf(err, errlen, KILN_ERR_NOMEM, "%s: out of memory", path);
    int n = 0;
    for (int k = d->nodes[wm].first; k >= 0; k = d->nodes[d->nodes[k].next].next) {
        int v = d->nodes[k].next;
        if (d->nodes[v].type != RT_JSON_STRING) {
            free(e);
            return rt_file_errf(err, errlen, KILN_ERR_CORRUPT,
                                "%s: weight_map: tensor %s maps to %s, not a file name", path,
                                rt_file_quote(&q, d->nodes[k].s), rt_st_jdescribe(d, v, buf, sizeof buf));
        }
        const char *f = d->nodes[v].s;
        if (!*f || strchr(f, '/') || !strcmp(f, ".") || !strcmp(f, "..")) {
            free(e);
            return rt_file_errf(
                err, errlen, KILN_ERR_CORRUPT,
                "%s: weight_map: tensor %s maps to %s, which is not a plain file name in the index's "
                "directory",
                path, rt_file_quote(&q, d->nodes[k].s), rt_file_quote(&q2, f));
        }
        e[n].name = d->nodes[k].s, e[n].file = f, e[n].shard = 0, n++;
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
    RtStJsonDoc doc;
    RtStMapEntry *e = NULL;
    RtStTensor **parts = NULL;
    int *counts = NULL, n_e = 0, n_files = 0;
    RtStCheckpoint *ck = NULL;
    unsigned char *map = NULL;
    size_t size = 0;
    KilnStatus s;
    memset(&doc, 0, sizeof doc);
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
    if ((s = rt_st_json_parse((const char *)map, size, &doc, path, "index JSON", err, errlen))) goto done;
    if ((s = rt_st_index_parse(path, &doc, &e, &n_e, &n_files, err, errlen))) goto done;

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
    qsort(e, (size_t)n_e, sizeof *e, rt_st_cmp_entry_name);
    for (int i = 1; i < n_e; i++)
        if (!strcmp(e[i].name, e[i - 1].name)) {
            s = rt_file_errf(err, errlen, KILN_ERR_CORRUPT, "%s: weight_map lists tensor %s twice", path,
                             rt_file_quote(&q, e[i].name));
            goto done;
        }
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
    rt_st_json_free(&doc);
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
