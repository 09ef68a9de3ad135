/* kfile.h — writing small weight files from C for the tests of the runtime's readers (test_weights,
 * test_rt_weights, test_tokenizer): a scratch directory, a growing byte buffer with little-endian
 * writers, the pieces of a GGUF file and whole GGUF and safetensors files. Prefix kf_. Every writer
 * aborts the test on out-of-memory; a file that cannot be written is a KT_CHECK failure.
 *
 *     kf_scratch_open("weights");                            // /tmp/kiln-test-weights-XXXXXX
 *     KfGgKvs kv = {0};
 *     kf_gg_kv_str(&kv, "general.architecture", "llama");
 *     KfGgTensor t = {"blk.0.attn_q.weight", RT_GGUF_TYPE_F32, 2, {64, 8}, data, 64 * 8 * 4};
 *     kf_gg_write(kf_at("m.gguf"), &kv, &t, 1);               // frees nothing: kf_gg_kvs_free(&kv)
 *     ...
 *     kf_scratch_close();                                     // removes the directory and all in it
 */
#ifndef KILN_KFILE_H
#define KILN_KFILE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/rt_gguf.h"

/* ---- scratch directory and files ---- */
/* Creates /tmp/kiln-test-<tag>-XXXXXX; returns its path, or NULL (with a message) when it cannot. */
const char *kf_scratch_open(const char *tag);
/* "<scratch>/<name>" in one of 8 rotating static buffers (so up to 8 may be live at once). */
const char *kf_at(const char *name);
/* Removes the scratch directory: files, FIFOs and subdirectories. */
void kf_scratch_close(void);
/* The bytes of a regular file (malloc'd, *n its size), or NULL for anything else. */
char *kf_slurp(const char *path, long *n);
/* Replaces path by a new file holding n bytes of data. */
void kf_spit(const char *path, const void *data, size_t n);
int kf_starts_with(const char *s, const char *prefix);

/* ---- a growing byte buffer ---- */
typedef struct KfBuf {
    unsigned char *p;
    size_t n, cap;
} KfBuf;
void kf_put(KfBuf *b, const void *src, size_t n);
void kf_u8(KfBuf *b, uint8_t v);
void kf_le(KfBuf *b, uint64_t v, int bytes); /* v's low `bytes` bytes, little-endian */
void kf_u32(KfBuf *b, uint32_t v);
void kf_u64(KfBuf *b, uint64_t v);
void kf_f32(KfBuf *b, float f);
void kf_f64(KfBuf *b, double f);
void kf_strn(KfBuf *b, const char *s, size_t n); /* a GGUF string: u64 length + bytes */
void kf_str(KfBuf *b, const char *s);
void kf_pad(KfBuf *b, size_t align); /* zero bytes up to a multiple of align */
void kf_free(KfBuf *b);

/* ---- GGUF ---- */
/* The pieces, for hand-built (often broken) files. */
void kf_gg_header(KfBuf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv);
void kf_gg_kv_head(KfBuf *b, const char *key, RtGgufVal type); /* key + value type; the value follows */
void kf_gg_tensor_info(KfBuf *b, const char *name, int n_dims, const uint64_t *ne, uint32_t type,
                       uint64_t offset);

/* Key/values for kf_gg_write, counted as they are added. */
typedef struct KfGgKvs {
    KfBuf b;
    uint64_t n;
} KfGgKvs;
void kf_gg_kv_str(KfGgKvs *k, const char *key, const char *v);
void kf_gg_kv_u32(KfGgKvs *k, const char *key, uint32_t v);
void kf_gg_kv_strs(KfGgKvs *k, const char *key, const char *list); /* '|'-separated; "" is no element */
void kf_gg_kv_i32s(KfGgKvs *k, const char *key, int n, const int32_t *v);
void kf_gg_kv_f32s(KfGgKvs *k, const char *key, int n, const float *v);
void kf_gg_kvs_free(KfGgKvs *k);

/* One tensor for kf_gg_write: ne in ggml order (ne[0] innermost), n_dims of them; nbytes at data. */
typedef struct KfGgTensor {
    const char *name;
    RtGgufType type;
    int n_dims;
    uint64_t ne[4];
    const void *data;
    size_t nbytes;
} KfGgTensor;
/* Writes a GGUF v3 file: the key/values (NULL: none), the n tensors' infos, then their data, each
 * aligned to 32 bytes, in order. */
void kf_gg_write(const char *path, const KfGgKvs *kvs, const KfGgTensor *t, int n);

/* ---- safetensors ---- */
/* The 8-byte header length, json padded with spaces to a multiple of 8, then n bytes of data. */
void kf_st_write(const char *path, const char *json, const void *data, size_t n);
/* One tensor for kf_st_write_tensors: dtype as the format spells it ("BF16"); shape outermost first. */
typedef struct KfStTensor {
    const char *name, *dtype;
    int n_dims;
    int64_t shape[8];
    const void *data;
    size_t nbytes;
} KfStTensor;
/* Writes a safetensors file holding the n tensors, their data in order, back to back. */
void kf_st_write_tensors(const char *path, const KfStTensor *t, int n);

#endif
