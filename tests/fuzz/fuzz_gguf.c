/* fuzz_gguf.c — the GGUF reader (runtime/rt_gguf.c) and what reads through it: typed metadata getters,
 * tensor data (dequantized), the weights layer's name mapping and conversion (rt_w_read), and the
 * tokenizer built from the file's metadata. Invariant besides "no crash, no leak, no UB": every tensor
 * the reader accepts lies inside the file. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/rt_gguf.h"
#include "runtime/rt_tokenizer.h"
#include "runtime/rt_weights.h"

enum { MAX_ELEMS = 1 << 14 }; /* elements read per tensor: enough to cross blocks, bounded per input */

static void walk_kvs(const RtGgufFile *g)
{
    char err[256];
    for (int i = 0; i < rt_gguf_kv_count(g); i++) {
        const RtGgufKv *kv = rt_gguf_kv_at(g, i);
        uint32_t u32;
        int32_t i32;
        uint64_t u64, len;
        float f;
        int b;
        const char *s;
        rt_gguf_get_u32(g, kv->key, &u32, err, sizeof err);
        rt_gguf_get_i32(g, kv->key, &i32, err, sizeof err);
        rt_gguf_get_u64(g, kv->key, &u64, err, sizeof err);
        rt_gguf_get_f32(g, kv->key, &f, err, sizeof err);
        rt_gguf_get_bool(g, kv->key, &b, err, sizeof err);
        rt_gguf_get_str(g, kv->key, &s, &len, err, sizeof err);
        if (kv->type != RT_GGUF_VAL_ARRAY) continue;
        for (uint64_t j = 0; j < kv->count && j < 64; j++) {
            int64_t v;
            float fv;
            if (kv->elem == RT_GGUF_VAL_STRING) {
                if (!rt_gguf_arr_str(kv, j, &len)) fz_fail("%s[%llu]: no string", kv->key, (unsigned long long)j);
            } else {
                rt_gguf_arr_i64(kv, j, &v);
                rt_gguf_arr_f32(kv, j, &fv);
            }
        }
    }
}

static void walk_tensors(const RtGgufFile *g, size_t size)
{
    float *dst = malloc(MAX_ELEMS * sizeof *dst);
    for (int i = 0; dst && i < rt_gguf_tensor_count(g); i++) {
        const RtGgufTensor *t = rt_gguf_tensor_at(g, i);
        uint64_t end = rt_gguf_data_offset(g) + t->offset + t->nbytes;
        if (end > size || end < t->nbytes) fz_fail("tensor %s ends at %llu, past the file", t->name,
                                                   (unsigned long long)end);
        int block = 0, bytes = 0;
        if (!rt_gguf_type_block(t->type, &block, &bytes) || block <= 0) continue;
        int64_t n = t->n_elements < MAX_ELEMS ? t->n_elements : MAX_ELEMS;
        n -= n % block;
        if ((uint64_t)(n / block) * (uint64_t)bytes > t->nbytes) fz_fail("tensor %s: nbytes too small", t->name);
        rt_gguf_dequant(t->type, t->data, n, dst);
    }
    free(dst);
}

/* Each tensor with a Hugging Face name, read as f32 in its own shape (when small) through rt_w_read. */
static void read_weights(const char *path)
{
    RtWeights *w = NULL;
    char err[512];
    if (rt_w_open(path, &w, err, sizeof err) != KILN_OK) return;
    const RtGgufFile *g = rt_w_gguf(w);
    for (int i = 0; g && i < rt_gguf_tensor_count(g) && i < 32; i++) {
        const RtGgufTensor *t = rt_gguf_tensor_at(g, i);
        char hf[256];
        if (!rt_w_hf_name(t->name, hf, sizeof hf) || t->n_elements > MAX_ELEMS) continue;
        RtWeightSpec s = {.name = hf, .dtype = "f32", .rank = t->n_dims, .nbytes = t->n_elements * 4};
        for (int d = 0; d < t->n_dims; d++)
            s.shape[d] = t->ne[t->n_dims - 1 - d];
        void *dst = malloc((size_t)s.nbytes + 1);
        if (dst && rt_w_check(w, &s, 1, err, sizeof err) == KILN_OK) rt_w_read(w, &s, dst, err, sizeof err);
        free(dst);
    }
    rt_w_close(w);
}

static void tokenize(const RtGgufFile *g)
{
    static const char text[] = "Hello world! <|im_start|>user\n12345 caf\xc3\xa9 \xf0\x9f\x98\x80<s></s>";
    RtTokenizer *t = NULL;
    char err[512], out[1024];
    int32_t ids[256];
    int n = 0;
    size_t len;
    if (rt_tok_create_gguf(g, &t, err, sizeof err) != KILN_OK) return;
    for (int flags = 0; flags < 4; flags++)
        if (rt_tok_encode(t, text, sizeof text - 1, flags, ids, 256, &n, err, sizeof err) == KILN_OK)
            rt_tok_decode(t, ids, n < 256 ? n : 256, flags & 1, out, sizeof out, &len, err, sizeof err);
    rt_tok_destroy(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_file("in.gguf", data, size);
    RtGgufFile *g = NULL;
    char err[512];
    if (rt_gguf_open(path, &g, err, sizeof err) != KILN_OK) {
        if (!err[0] || strchr(err, '\n')) fz_fail("error not one line: '%s'", err);
        return 0;
    }
    walk_kvs(g);
    walk_tensors(g, size);
    tokenize(g);
    rt_gguf_close(g);
    read_weights(path);
    return 0;
}
