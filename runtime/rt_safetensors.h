/* rt_safetensors.h — the safetensors weight reader (Hugging Face's format), one file or a sharded
 * checkpoint, memory-mapped read-only. Prefix rt_st_. The format and its validation rules: docs/WEIGHTS.md.
 *
 *     RtStCheckpoint *ck;
 *     char err[512];
 *     // sharded: rt_st_open_index("dir/model.safetensors.index.json", &ck, err, sizeof err)
 *     if (rt_st_open("model.safetensors", &ck, err, sizeof err) != KILN_OK) {
 *         fprintf(stderr, "%s\n", err);
 *         return 1;
 *     }
 *     const RtStTensor *t = rt_st_find(ck, "model.embed_tokens.weight");
 *     if (t && t->dtype == RT_ST_DTYPE_BF16) use(t->data, t->nbytes, t->shape, t->n_dims);
 *     for (int i = 0; i < rt_st_count(ck); i++) puts(rt_st_tensor_at(ck, i)->name);   // by name
 *     rt_st_close(ck);   // the data pointers die here
 *
 * Every open validates the whole header (and, for an index, every shard against the weight_map) before
 * it returns; a handle that opened is consistent: every tensor's bytes lie inside its file, sizes match
 * shapes, no two tensors share a byte, names are unique across shards. Errors are a status plus one
 * line that starts with the path of the file at fault ("model.safetensors: tensor 'x.weight':
 * data_offsets [10, 4] are out of order").
 *
 * Ownership and threads: the handle owns the mappings, names and metadata strings; every pointer it
 * hands out is valid until rt_st_close. An open handle is never modified, so any number of threads may
 * read it at once. Tensor data is the file's bytes, little-endian, and may be unaligned for the dtype
 * (the format aligns only when its writer pads the header): read it with memcpy or copy it first.
 * A file truncated by someone else while it is open faults on access (SIGBUS), as any mapping would.
 */
#ifndef KILN_RT_SAFETENSORS_H
#define KILN_RT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "kiln.h"

#define RT_ST_MAX_DIMS       8          /* more dimensions than this are refused (KILN_ERR_UNSUPPORTED) */
#define RT_ST_MAX_HEADER     100000000  /* bytes of JSON header, the official reader's limit */
#define RT_ST_MAX_INDEX      (64 << 20) /* bytes of model.safetensors.index.json */
#define RT_ST_MAX_JSON_DEPTH 64         /* nesting of arrays and objects in either JSON document */

/* The element types of the format that are whole bytes. The sub-byte ones (F4, F6_E2M3, F6_E3M2) are
 * refused with KILN_ERR_UNSUPPORTED, as is any name not listed here. */
typedef enum RtStDtype {
    RT_ST_DTYPE_BOOL,
    RT_ST_DTYPE_U8,
    RT_ST_DTYPE_I8,
    RT_ST_DTYPE_F8_E4M3,
    RT_ST_DTYPE_F8_E5M2,
    RT_ST_DTYPE_F8_E8M0,
    RT_ST_DTYPE_F8_E4M3FNUZ,
    RT_ST_DTYPE_F8_E5M2FNUZ,
    RT_ST_DTYPE_I16,
    RT_ST_DTYPE_U16,
    RT_ST_DTYPE_F16,
    RT_ST_DTYPE_BF16,
    RT_ST_DTYPE_I32,
    RT_ST_DTYPE_U32,
    RT_ST_DTYPE_F32,
    RT_ST_DTYPE_I64,
    RT_ST_DTYPE_U64,
    RT_ST_DTYPE_F64,
    RT_ST_DTYPE_C64,
    RT_ST_DTYPE_COUNT
} RtStDtype;

typedef struct RtStTensor {
    const char *name; /* NUL-terminated UTF-8, owned by the checkpoint */
    RtStDtype dtype;
    int n_dims;                    /* 0 (a scalar) .. RT_ST_MAX_DIMS */
    int64_t shape[RT_ST_MAX_DIMS]; /* row-major, outermost first; entries past n_dims are 0 */
    int64_t n_elements;            /* product of shape (1 for a scalar) */
    const void *data;              /* the tensor's bytes in the mapping; never NULL */
    uint64_t nbytes;               /* n_elements * rt_st_dtype_size(dtype) */
    uint64_t file_offset;          /* where data starts in its file, bytes */
    int shard;                     /* which file holds it: 0 .. rt_st_shard_count - 1 */
} RtStTensor;

typedef struct RtStCheckpoint RtStCheckpoint;

/* Opens one .safetensors file: maps it read-only and validates it (8-byte header length, the JSON
 * header, every tensor's dtype, shape and data_offsets, and that the tensors cover the data section
 * exactly, without overlap or gaps, as the format requires). Returns KILN_OK and *out, or a status
 * (KILN_ERR_ARG for NULL path/out; KILN_ERR_IO when the file cannot be opened or mapped or is not a
 * regular file; KILN_ERR_FORMAT when it is not a safetensors file; KILN_ERR_CORRUPT when it is a
 * damaged one; KILN_ERR_UNSUPPORTED for a dtype or rank this reader does not take; KILN_ERR_NOMEM)
 * with a one-line message starting with `path` in err (errlen bytes; err may be NULL when errlen is 0),
 * *out NULL. Never modifies the file. */
KilnStatus rt_st_open(const char *path, RtStCheckpoint **out, char *err, int errlen);
/* Opens a sharded checkpoint from its index (model.safetensors.index.json): a JSON object whose
 * "weight_map" maps each tensor name to a shard file name in the index's directory (a plain file name:
 * no '/', not "." or ".."; other top-level keys, such as "metadata", are ignored). Every shard is
 * opened as by rt_st_open; then the shards' tensors must be exactly the weight_map's, each in the shard
 * the map names, no name in two shards. Errors as rt_st_open; the message names the index, or the shard
 * at fault. */
KilnStatus rt_st_open_index(const char *index_path, RtStCheckpoint **out, char *err, int errlen);
/* Unmaps and frees everything (NULL is fine). */
void rt_st_close(RtStCheckpoint *ck);

/* The number of tensors, and tensor i (0 <= i < count) in name order (strcmp), or NULL out of range. */
int rt_st_count(const RtStCheckpoint *ck);
const RtStTensor *rt_st_tensor_at(const RtStCheckpoint *ck, int i);
/* The tensor called name, or NULL (binary search). */
const RtStTensor *rt_st_find(const RtStCheckpoint *ck, const char *name);
/* A value of the header's "__metadata__" (string to string), or NULL. Sharded: the first shard (in
 * rt_st_shard_path order) that has the key answers. */
const char *rt_st_meta(const RtStCheckpoint *ck, const char *key);
/* The files: 1 for rt_st_open; for an index, its distinct shards in name order. Paths as opened. */
int rt_st_shard_count(const RtStCheckpoint *ck);
const char *rt_st_shard_path(const RtStCheckpoint *ck, int shard);

/* The format's name of a dtype ("BF16"), or "?" out of range; its size in bytes (0 out of range); and
 * the dtype called name, or -1. */
const char *rt_st_dtype_name(RtStDtype dtype);
int rt_st_dtype_size(RtStDtype dtype);
int rt_st_dtype_from_name(const char *name);

#endif
