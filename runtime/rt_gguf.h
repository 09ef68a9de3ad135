/* rt_gguf.h — the GGUF weight reader (llama.cpp's format, versions 2 and 3), memory-mapped read-only,
 * and reference dequantization to f32. Prefix rt_gguf_. Format and validation rules: docs/WEIGHTS.md.
 *
 *     RtGgufFile *g;
 *     char err[512];
 *     if (rt_gguf_open("model.gguf", &g, err, sizeof err) != KILN_OK) { fprintf(stderr, "%s\n", err); ... }
 *     uint32_t n_layer;
 *     if (rt_gguf_get_u32(g, "llama.block_count", &n_layer, err, sizeof err)) fail(err);
 *     const RtGgufKv *tokens;                      // tokenizer.ggml.tokens: an array of strings
 *     if (rt_gguf_get_arr(g, "tokenizer.ggml.tokens", RT_GGUF_VAL_STRING, &tokens, err, sizeof err))
 * fail(err); uint64_t len; const char *tok = rt_gguf_arr_str(tokens, 42, &len);        // not NUL-terminated:
 * use len const RtGgufTensor *t = rt_gguf_tensor_find(g, "blk.0.attn_q.weight"); float *row =
 * malloc(sizeof(float) * t->ne[0]); rt_gguf_dequant(t->type, t->data, t->ne[0], row);           // the first
 * row, as f32 rt_gguf_close(g);                                            // every pointer above dies here
 *
 * rt_gguf_open validates the whole file before it returns (header, every key/value, every tensor info,
 * every tensor's bytes inside the file, no two tensors sharing a byte, no duplicate key or name), so an
 * open handle is consistent. Errors are a status plus one line that starts with the path.
 *
 * Ownership and threads: the handle owns the mapping, keys, names and tables; every pointer it hands out
 * (keys, names, string values, tensor data) is valid until rt_gguf_close. An open handle is never
 * modified: any number of threads may read it at once. Tensor data and array elements are the file's
 * little-endian bytes and may be unaligned for their type. A file truncated by someone else while it is
 * open faults on access (SIGBUS), as any mapping would.
 */
#ifndef KILN_RT_GGUF_H
#define KILN_RT_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "kiln.h"

#define RT_GGUF_MAX_DIMS          4     /* GGML_MAX_DIMS: more is refused */
#define RT_GGUF_MAX_NAME          65535 /* bytes of a key or a tensor name */
#define RT_GGUF_DEFAULT_ALIGNMENT 32    /* without general.alignment */

/* Metadata value types, numbered as in the file. */
typedef enum RtGgufVal {
    RT_GGUF_VAL_U8 = 0,
    RT_GGUF_VAL_I8 = 1,
    RT_GGUF_VAL_U16 = 2,
    RT_GGUF_VAL_I16 = 3,
    RT_GGUF_VAL_U32 = 4,
    RT_GGUF_VAL_I32 = 5,
    RT_GGUF_VAL_F32 = 6,
    RT_GGUF_VAL_BOOL = 7, /* one byte, 0 or 1 (anything else is refused) */
    RT_GGUF_VAL_STRING = 8,
    RT_GGUF_VAL_ARRAY = 9, /* of one scalar or string type; arrays of arrays are refused */
    RT_GGUF_VAL_U64 = 10,
    RT_GGUF_VAL_I64 = 11,
    RT_GGUF_VAL_F64 = 12,
    RT_GGUF_VAL_COUNT
} RtGgufVal;

/* Tensor types (ggml_type), numbered as in the file. Gaps are types ggml removed; they, and numbers past
 * the end, are refused as unknown. Block sizes and bytes per block: rt_gguf_type_block. */
typedef enum RtGgufType {
    RT_GGUF_TYPE_F32 = 0,
    RT_GGUF_TYPE_F16 = 1,
    RT_GGUF_TYPE_Q4_0 = 2,
    RT_GGUF_TYPE_Q4_1 = 3,
    RT_GGUF_TYPE_Q5_0 = 6,
    RT_GGUF_TYPE_Q5_1 = 7,
    RT_GGUF_TYPE_Q8_0 = 8,
    RT_GGUF_TYPE_Q8_1 = 9,
    RT_GGUF_TYPE_Q2_K = 10,
    RT_GGUF_TYPE_Q3_K = 11,
    RT_GGUF_TYPE_Q4_K = 12,
    RT_GGUF_TYPE_Q5_K = 13,
    RT_GGUF_TYPE_Q6_K = 14,
    RT_GGUF_TYPE_Q8_K = 15,
    RT_GGUF_TYPE_IQ2_XXS = 16,
    RT_GGUF_TYPE_IQ2_XS = 17,
    RT_GGUF_TYPE_IQ3_XXS = 18,
    RT_GGUF_TYPE_IQ1_S = 19,
    RT_GGUF_TYPE_IQ4_NL = 20,
    RT_GGUF_TYPE_IQ3_S = 21,
    RT_GGUF_TYPE_IQ2_S = 22,
    RT_GGUF_TYPE_IQ4_XS = 23,
    RT_GGUF_TYPE_I8 = 24,
    RT_GGUF_TYPE_I16 = 25,
    RT_GGUF_TYPE_I32 = 26,
    RT_GGUF_TYPE_I64 = 27,
    RT_GGUF_TYPE_F64 = 28,
    RT_GGUF_TYPE_IQ1_M = 29,
    RT_GGUF_TYPE_BF16 = 30,
    RT_GGUF_TYPE_TQ1_0 = 34,
    RT_GGUF_TYPE_TQ2_0 = 35,
    RT_GGUF_TYPE_MXFP4 = 39,
    RT_GGUF_TYPE_NVFP4 = 40,
    RT_GGUF_TYPE_Q1_0 = 41,
    RT_GGUF_TYPE_COUNT
} RtGgufType;

/* One metadata entry. */
typedef struct RtGgufKv {
    const char *key; /* NUL-terminated, owned by the file handle */
    RtGgufVal type;  /* RT_GGUF_VAL_ARRAY for arrays */
    RtGgufVal elem;  /* arrays: the element type (never ARRAY); scalars: equal to type */
    uint64_t count;  /* arrays: elements; scalars: 1 */
    /* scalars: the value's bytes; strings: the string's bytes (len of them, not NUL-terminated); arrays
     * of numbers or bools: the first element (count * size bytes); arrays of strings: NULL */
    const unsigned char *data;
    uint64_t len;                    /* bytes at data */
    const unsigned char *const *str; /* internal: arrays of strings, each element's length prefix */
} RtGgufKv;

typedef struct RtGgufTensor {
    const char *name; /* NUL-terminated, owned by the file handle */
    RtGgufType type;
    int n_dims; /* as stored, 0 .. 4 */
    int64_t
        ne[RT_GGUF_MAX_DIMS]; /* ggml order: ne[0] is the contiguous (innermost) dimension; 1 past n_dims */
    int64_t n_elements;       /* ne[0] * ne[1] * ne[2] * ne[3] */
    uint64_t offset;          /* from the start of the data section, bytes; a multiple of the alignment */
    const void *data;         /* the tensor's bytes in the mapping; never NULL */
    uint64_t nbytes;          /* n_elements / block * bytes per block */
} RtGgufTensor;

typedef struct RtGgufFile RtGgufFile;

/* Opens a GGUF v2 or v3 file: maps it read-only and validates everything (rules in docs/WEIGHTS.md).
 * Returns KILN_OK and *out, or a status with a one-line message starting with `path` in err (errlen
 * bytes; err may be NULL when errlen is 0) and *out NULL: KILN_ERR_ARG (NULL path/out), KILN_ERR_IO
 * (missing, unreadable, a directory, not a regular file), KILN_ERR_FORMAT (not GGUF, version 1, a version
 * newer than 3, big-endian), KILN_ERR_CORRUPT (truncated or inconsistent), KILN_ERR_UNSUPPORTED (an unknown
 * tensor type, arrays of arrays, more than 2^30 tensors or keys), KILN_ERR_NOMEM. Counts and lengths are
 * checked against the bytes left in the file before anything is allocated for them, so memory stays
 * proportional to the file. Never modifies the file. */
KilnStatus rt_gguf_open(const char *path, RtGgufFile **out, char *err, int errlen);
/* Unmaps and frees everything (NULL is fine). */
void rt_gguf_close(RtGgufFile *g);

uint32_t rt_gguf_version(const RtGgufFile *g);
uint32_t rt_gguf_alignment(const RtGgufFile *g);   /* general.alignment, or 32 */
uint64_t rt_gguf_data_offset(const RtGgufFile *g); /* where the data section starts in the file, bytes */

/* Metadata in file order, and by key (NULL when absent). */
int rt_gguf_kv_count(const RtGgufFile *g);
const RtGgufKv *rt_gguf_kv_at(const RtGgufFile *g, int i);
const RtGgufKv *rt_gguf_kv_find(const RtGgufFile *g, const char *key);

/* Typed getters. KILN_OK and *out; KILN_ERR_ARG when the key is absent (a caller with a default can test
 * for that); KILN_ERR_FORMAT when it has another type or a value out of range. Integer getters take any
 * integer value type whose value fits; get_f32 takes f32 and f64 (rounded); get_bool only bool. Messages
 * are one line starting with the path ("model.gguf: key 'llama.block_count' is a string, not u32"). */
KilnStatus rt_gguf_get_u32(const RtGgufFile *g, const char *key, uint32_t *out, char *err, int errlen);
KilnStatus rt_gguf_get_i32(const RtGgufFile *g, const char *key, int32_t *out, char *err, int errlen);
KilnStatus rt_gguf_get_u64(const RtGgufFile *g, const char *key, uint64_t *out, char *err, int errlen);
KilnStatus rt_gguf_get_f32(const RtGgufFile *g, const char *key, float *out, char *err, int errlen);
KilnStatus rt_gguf_get_bool(const RtGgufFile *g, const char *key, int *out, char *err, int errlen);
/* A string value: *s points at its len bytes in the mapping (not NUL-terminated; may hold any bytes). */
KilnStatus rt_gguf_get_str(const RtGgufFile *g, const char *key, const char **s, uint64_t *len, char *err,
                           int errlen);
/* An array whose elements have type elem: *kv is the entry; read its elements with rt_gguf_arr_*. */
KilnStatus rt_gguf_get_arr(const RtGgufFile *g, const char *key, RtGgufVal elem, const RtGgufKv **kv,
                           char *err, int errlen);

/* Element i of an array entry. arr_str: a string element's bytes and *len, or NULL (not an array of
 * strings, or i out of range). arr_i64: an integer or bool element (a u64 above INT64_MAX is
 * KILN_ERR_FORMAT); arr_f32: an f32 or f64 element. Both return KILN_ERR_ARG for another element type or
 * i out of range. */
const char *rt_gguf_arr_str(const RtGgufKv *kv, uint64_t i, uint64_t *len);
KilnStatus rt_gguf_arr_i64(const RtGgufKv *kv, uint64_t i, int64_t *out);
KilnStatus rt_gguf_arr_f32(const RtGgufKv *kv, uint64_t i, float *out);

/* Tensors in file order, and by name (NULL when absent). */
int rt_gguf_tensor_count(const RtGgufFile *g);
const RtGgufTensor *rt_gguf_tensor_at(const RtGgufFile *g, int i);
const RtGgufTensor *rt_gguf_tensor_find(const RtGgufFile *g, const char *name);

/* The name of a tensor type ("Q4_0") or "?" when unknown; its block (elements per block) and bytes per
 * block: returns 1 and fills them (either pointer may be NULL) for a known type, else 0. */
const char *rt_gguf_type_name(RtGgufType type);
int rt_gguf_type_block(RtGgufType type, int *block, int *bytes);
/* The name of a value type ("u32", "string", "array"), or "?". */
const char *rt_gguf_val_name(RtGgufVal type);

/* IEEE half (binary16) bits to f32, exactly (subnormals, infinities; a NaN keeps its payload). */
float rt_gguf_f16_to_f32(uint16_t h);
/* Reference dequantization of n elements (a multiple of the type's block: 256 for Q4_K and Q6_K) of a
 * tensor of `type` at src (the file's bytes, any alignment) to f32 at dst. Types: F32, F16, BF16, Q4_0,
 * Q4_1, Q8_0, Q4_K, Q6_K; results are bit-identical to llama.cpp's dequantize_row_q4_0 / q4_1 / q8_0 /
 * q4_K / q6_K (and gguf-py's quants.dequantize).
 * Returns KILN_OK; KILN_ERR_ARG for n < 0, n not a multiple of the block, NULL src/dst with n > 0, or an
 * unknown type; KILN_ERR_UNSUPPORTED for a known type without a dequantizer here (Q5_K, IQ4_NL, ...). */
KilnStatus rt_gguf_dequant(RtGgufType type, const void *src, int64_t n, float *dst);

#endif
